/* The scale-out model against what can be worked out by hand: a uniform pipeline's
 * (m + p - 1)(F + B), transfers on a cut, the ring all-reduce's 2(N-1)/N bytes and 2(N-1)
 * latencies, shared memory within a rank, device threads (and other work) sharing cores; the
 * checks' one-line errors; 64 replicas x 4 stages; and the calibration read from a trace. */
#include <math.h>
#include <stdio.h>

#include "brigade/scale_model.h"
#include "test_util.h"

enum { MAX_STAGES = 8 };

typedef struct setup {
    brg_stage_cost stage[MAX_STAGES];
    brg_schedule sched;
    brg_scale_options o;
} setup;

/* p stages of forward F and backward B, m micro-batches, nothing sent, no gradients: one
 * replica on one rank with cores to spare. */
static void make(setup *s, brg_schedule_kind kind, int p, int m, double F, double B) {
    CHECK_OK(brg_schedule_build(kind, p, m, &s->sched));
    for (int i = 0; i < p; i++) s->stage[i] = (brg_stage_cost){.forward_s = F, .backward_s = B};
    s->o = (brg_scale_options){.ranks = 1, .replicas = 1, .stages = p, .schedule = &s->sched,
                               .network_bytes_per_s = 1e9, .network_latency_s = 0, .memory_bytes_per_s = 1e10,
                               .ranks_per_host = 1, .cores_per_host = 1024, .threads_per_device = 1,
                               .tokens_per_micro_batch = 128};
}

static void test_uniform_pipeline(void) {
    brg_schedule_kind kinds[2] = {BRG_SCHEDULE_1F1B, BRG_SCHEDULE_GPIPE};
    for (int k = 0; k < 2; k++) {
        setup s;
        make(&s, kinds[k], 4, 8, 1.0, 2.0);
        s.o.host_step_s = 0.5;
        for (int i = 0; i < 4; i++) s.stage[i].optimizer_s = 0.25 * (i + 1);
        brg_scale_result r;
        CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
        CHECK_NEAR(r.pipeline_s, (8 + 4 - 1) * 3.0, 1e-9);
        CHECK_NEAR(r.compute_s, 8 * 3.0, 1e-9);
        CHECK_NEAR(r.optimizer_s, 1.0, 1e-12); /* the slowest stage's */
        CHECK_NEAR(r.host_s, 0.5, 1e-12);
        CHECK_NEAR(r.all_reduce_s, 0, 1e-12);
        CHECK_NEAR(r.step_s, 33 + 1 + 0.5, 1e-9);
        CHECK_NEAR(r.bubble_share, 3 * 3.0 / r.step_s, 1e-9); /* each stage idles (p - 1)(F + B) */
        CHECK_NEAR(r.tokens_per_s, 8 * 128 / r.step_s, 1e-6);
        CHECK(r.pipeline_cuts == 0 && r.devices == 4 && r.max_devices_per_rank == 4);
        CHECK_NEAR(r.contention, 1, 1e-12);
        brg_schedule_free(&s.sched);
    }
}

/* One micro-batch through 2 stages on 2 ranks: F0, the activations over the network, F1 and B1,
 * their gradient back, B0. */
static void test_cut(void) {
    setup s;
    make(&s, BRG_SCHEDULE_1F1B, 2, 1, 1.0, 2.0);
    s.o.ranks = 2;
    s.o.ranks_per_host = 2;
    s.o.network_latency_s = 0.125;
    s.stage[0].send_bytes = 1e9;      /* 1 s at 1 GB/s */
    s.stage[1].grad_send_bytes = 5e8; /* 0.5 s */
    brg_scale_result r;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.pipeline_s, 1 + (1 + 0.125) + 3 + (0.5 + 0.125) + 2, 1e-9);
    CHECK(r.pipeline_cuts == 1 && r.max_devices_per_rank == 1);
    /* on one rank the same bytes go through shared memory at 10 GB/s */
    s.o.ranks = 1;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.pipeline_s, 1 + 0.1 + 3 + 0.05 + 2, 1e-9);
    CHECK(r.pipeline_cuts == 0);
    brg_schedule_free(&s.sched);
}

/* N replicas of one stage, G gradient bytes each. */
static void test_all_reduce(void) {
    const double G = 4e8;
    int counts[3] = {2, 4, 64};
    for (int i = 0; i < 3; i++) {
        int N = counts[i];
        setup s;
        make(&s, BRG_SCHEDULE_1F1B, 1, 1, 0, 0);
        s.stage[0].gradient_bytes = G;
        s.o.replicas = N;
        s.o.ranks = N;
        s.o.ranks_per_host = 1;
        s.o.network_latency_s = 1e-3;
        brg_scale_result r;
        CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
        CHECK_NEAR(r.all_reduce_s, 2.0 * (N - 1) / N * G / 1e9 + 2.0 * (N - 1) * 1e-3, 1e-9);
        CHECK_NEAR(r.all_reduce_share, r.all_reduce_s / r.step_s, 1e-12);
        /* all on one rank: shared memory, no latency */
        s.o.ranks = 1;
        CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
        CHECK_NEAR(r.all_reduce_s, 2.0 * (N - 1) / N * G / 1e10, 1e-9);
        brg_schedule_free(&s.sched);
    }
    /* 4 replicas x 2 stages over 2 ranks: each rank adds its 2 copies of a stage in shared
     * memory, then the two ranks' ring; both stages' rings share each rank's link. */
    setup s;
    make(&s, BRG_SCHEDULE_1F1B, 2, 1, 0, 0);
    s.stage[0].gradient_bytes = G;
    s.stage[1].gradient_bytes = 2 * G;
    s.o.replicas = 4;
    s.o.ranks = 2;
    s.o.ranks_per_host = 2;
    brg_scale_result r;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.all_reduce_s, 2.0 * 1 / 2 * (2 * G) / 1e10 + (G + 2 * G) / 1e9, 1e-9);
    brg_schedule_free(&s.sched);
}

/* 4 replicas of one stage on one host of 2 cores: every device busy throughout, each computes at
 * half speed. */
static void test_contention(void) {
    setup s;
    make(&s, BRG_SCHEDULE_1F1B, 1, 4, 1.0, 2.0);
    s.o.replicas = 4;
    s.o.cores_per_host = 2;
    brg_scale_result r;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.contention, 2, 1e-9);
    CHECK_NEAR(r.pipeline_s, 2 * 4 * 3.0, 1e-9);
    /* the same on 4 hosts of a rank each: a core each */
    s.o.ranks = 4;
    s.o.ranks_per_host = 1;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.contention, 1, 1e-12);
    CHECK_NEAR(r.pipeline_s, 4 * 3.0, 1e-9);
    /* a core each, but 3 threads of other work beside each device: 4 threads on 1 core */
    s.o.cores_per_host = 1;
    s.o.other_threads = 3;
    CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
    CHECK_NEAR(r.contention, 4, 1e-9);
    CHECK_NEAR(r.pipeline_s, 4 * 4 * 3.0, 1e-9);
    brg_schedule_free(&s.sched);
}

static void test_errors(void) {
    setup s;
    make(&s, BRG_SCHEDULE_1F1B, 4, 4, 1, 2);
    brg_scale_result r;
    brg_scale_options o = s.o;
    o.ranks = 0;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "--ranks must be at least 1, got 0");
    o = s.o, o.replicas = 0;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "--replicas must be at least 1, got 0");
    o = s.o, o.replicas = 2, o.ranks = 9;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG,
              "9 ranks for 8 devices (2 replicas x 4 stages): every rank needs a device; use at most 8 ranks");
    o = s.o, o.network_bytes_per_s = -1;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "network bandwidth must be a positive");
    o = s.o, o.network_bytes_per_s = NAN;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "network bandwidth must be a positive");
    o = s.o, o.network_bytes_per_s = INFINITY;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "network bandwidth must be a positive");
    o = s.o, o.stages = 3;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "the schedule must have the pipeline's 3 stages");
    o = s.o, o.other_threads = -1;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "other work's threads per host must be a number");
    o = s.o, o.cores_per_host = 0;
    CHECK_ERR(brg_scale_predict(s.stage, &o, &r), BRG_ERR_INVALID_ARG, "cores per host > 0");
    brg_schedule_free(&s.sched);
}

/* 64 replicas x 4 stages, on 16, 64 and 256 ranks (one host each): the all-reduce's share grows
 * as the network slows, and spreading a replica's stages over ranks cuts its pipeline. */
static void test_64_replicas(void) {
    setup s;
    make(&s, BRG_SCHEDULE_1F1B, 4, 16, 0.1, 0.2);
    for (int i = 0; i < 4; i++)
        s.stage[i].gradient_bytes = 1.2e8, s.stage[i].send_bytes = 3e6, s.stage[i].grad_send_bytes = 3e6;
    s.o.replicas = 64;
    s.o.ranks_per_host = 1;
    s.o.cores_per_host = 4;
    s.o.network_latency_s = 5e-5;
    int ranks[3] = {16, 64, 256};
    for (int i = 0; i < 3; i++) {
        s.o.ranks = ranks[i];
        double share = 0;
        double gbps[3] = {100, 10, 1};
        for (int g = 0; g < 3; g++) {
            s.o.network_bytes_per_s = gbps[g] * 1e9 / 8;
            brg_scale_result r;
            CHECK_OK(brg_scale_predict(s.stage, &s.o, &r));
            CHECK(r.devices == 256 && r.all_reduce_share > share && r.all_reduce_share < 1 && r.tokens_per_s > 0);
            CHECK(r.pipeline_cuts == (ranks[i] == 256 ? 3 : 0));
            CHECK(r.max_devices_per_rank == 256 / ranks[i]);
            share = r.all_reduce_share;
        }
    }
    brg_schedule_free(&s.sched);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* A trace of 3 steps of a 2-block model (the first left out): block 0's forwards 1, 2, 3, 4 ms
 * (lower quartile 1 ms), backwards 10 ms; block 1's 5 and 20 ms. */
static void test_calibration(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/scale_calibration.json", test_tmp_dir());
    char text[8192];
    size_t at = (size_t)snprintf(text, sizeof text, "{\"traceEvents\": [\n");
    for (int step = 1; step <= 3; step++) {
        double t0 = step * 1e5; /* us */
        at += (size_t)snprintf(text + at, sizeof text - at,
                               "{\"name\": \"step %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 60000, \"tid\": 100000, "
                               "\"args\": {\"index\": %d}},\n"
                               "{\"name\": \"pipeline %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 50000, \"tid\": 100000, "
                               "\"args\": {\"index\": %d}},\n"
                               "{\"name\": \"optimizer %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 4000, \"tid\": 100000, "
                               "\"args\": {\"index\": %d}},\n",
                               step, t0, step, step, t0 + 10, step, step, t0 + 50100, step);
        for (int mb = 0; mb < 2; mb++) {
            double t = t0 + 100 + mb * 20000;
            at += (size_t)snprintf(
                text + at, sizeof text - at,
                "{\"name\": \"forward block 0 mb %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": %d, \"tid\": 0, "
                "\"args\": {\"block\": 0}},\n"
                "{\"name\": \"forward block 1 mb %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 5000, \"tid\": 0, "
                "\"args\": {\"block\": 1}},\n"
                "{\"name\": \"backward block 1 mb %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 20000, \"tid\": 0, "
                "\"args\": {\"block\": 1}},\n"
                "{\"name\": \"backward block 0 mb %d\", \"ph\": \"X\", \"ts\": %g, \"dur\": 10000, \"tid\": 0, "
                "\"args\": {\"block\": 0}},\n",
                mb, t, step == 1 ? 99000 : 1000 * ((step - 2) * 2 + mb + 1), mb, t + 100, mb, t + 200, mb, t + 300);
        }
    }
    snprintf(text + at, sizeof text - at, "{\"name\": \"end\", \"ph\": \"M\"}]}\n");
    write_file(path, text);
    brg_scale_calibration c;
    CHECK_OK(brg_scale_calibration_load(path, 2, &c));
    CHECK(c.steps == 2 && c.n_blocks == 2);
    CHECK_NEAR(c.forward_s[0], 1e-3, 1e-12);
    CHECK_NEAR(c.backward_s[0], 10e-3, 1e-12);
    CHECK_NEAR(c.forward_s[1], 5e-3, 1e-12);
    CHECK_NEAR(c.backward_s[1], 20e-3, 1e-12);
    CHECK_NEAR(c.optimizer_s, 4e-3, 1e-12);
    CHECK_NEAR(c.host_step_s, 60e-3 - 50e-3 - 4e-3, 1e-9);
    /* step 2: 50 ms of pipeline, 2 x (1.5 avg + 5 + 20 + 10) ms of blocks: (50 - 73) / 2 < 0 -> 0 */
    CHECK_NEAR(c.micro_batch_overhead_s, 0, 1e-12);
    brg_scale_calibration_free(&c);
    CHECK_ERR(brg_scale_calibration_load(path, 1, &c), BRG_ERR_INVALID_ARG, "the model has 1 blocks");
    CHECK_ERR(brg_scale_calibration_load(path, 3, &c), BRG_ERR_INVALID_ARG, "no forward of block 2");

    write_file(path, "{\"traceEvents\": [{\"name\": \"step 1\", \"ph\": \"X\", \"ts\": 0, \"dur\": 5, \"args\": "
                     "{\"index\": 1}}]}");
    CHECK_ERR(brg_scale_calibration_load(path, 2, &c), BRG_ERR_INVALID_ARG, "has 1 training step(s)");
    write_file(path, "[1, 2]");
    CHECK_ERR(brg_scale_calibration_load(path, 2, &c), BRG_ERR_INVALID_ARG, "is not a brigade trace");
    write_file(path, "{\"traceEvents\": [{\"name\": \"step 1\", \"ph\": \"X\", \"ts\": 0, \"dur\": 5, \"args\": "
                     "{\"index\": 1}}, {\"name\": \"step 2\", \"ph\": \"X\", \"ts\": 10, \"dur\": 5, \"args\": "
                     "{\"index\": 2}}, {\"name\": \"forward block 0 mb 0\", \"ph\": \"X\", \"ts\": 11, \"dur\": 1, "
                     "\"tid\": 0, \"args\": {\"block\": 0}}, {\"name\": \"forward block 1 mb 0\", \"ph\": \"X\", "
                     "\"ts\": 12, \"dur\": 1, \"tid\": 1, \"args\": {\"block\": 1}}]}");
    CHECK_ERR(brg_scale_calibration_load(path, 2, &c), BRG_ERR_INVALID_ARG, "calibrate with a one-device run");
    remove(path);
    CHECK_ERR(brg_scale_calibration_load(path, 2, &c), BRG_ERR_IO, "cannot open the calibration trace");
}

int main(void) {
    test_uniform_pipeline();
    test_cut();
    test_all_reduce();
    test_contention();
    test_errors();
    test_64_replicas();
    test_calibration();
    return test_finish();
}
