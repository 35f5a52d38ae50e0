/* Traces (brigade/trace.h): a pipelined training step of a tiny GPT-2 recorded and read back as
 * JSON, one forward and one backward event per (device, block, micro-batch) in the order the
 * schedule runs them, transfers with their bytes, memory counters, the tracks' names; and the
 * recorder's own contract (a path that cannot be written, discard, one trace at a time). */
#include <cJSON.h>
#include <unistd.h>

#include "brigade/rng.h"
#include "brigade/trace.h"
#include "brigade/trainer.h"
#include "test_util.h"
#include "trainer_util.h"

enum { ROWS = 16, T = 8, VOCAB = 37, STAGES = 2, MICRO = 4, MAX_DEV = 8, MAX_EV = 4096 };

/* embeddings, h.0, h.1, head: two blocks a stage */
static const int BLOCK_STAGE[] = {0, 0, 1, 1};

/* ---- reading a trace back ---- */

typedef struct ev {
    const char *name, *cat, *dir;
    char ph;
    int tid, block, mb, peer, index;
    double ts, dur;
    long long bytes;
    int order; /* position in the file: ties in ts keep it */
} ev;

typedef struct trace {
    cJSON *root;
    ev ev[MAX_EV];
    int n;
} trace;

static int int_arg(const cJSON *args, const char *key, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(args, key);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static bool load(const char *path, trace *t) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "no trace at %s", path);
    if (!f) return false;
    static char text[4 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    t->root = cJSON_Parse(text);
    CHECK_MSG(t->root != NULL, "%s is not JSON", path);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(t->root, "traceEvents");
    const cJSON *unit = cJSON_GetObjectItemCaseSensitive(t->root, "displayTimeUnit");
    CHECK(cJSON_IsArray(list));
    CHECK(cJSON_IsString(unit) && strcmp(unit->valuestring, "ms") == 0);
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        if (t->n == MAX_EV) break;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args"), *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const cJSON *dir = cJSON_GetObjectItemCaseSensitive(args, "direction");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(args, "bytes");
        CHECK(cJSON_IsString(name) && cJSON_IsString(ph) && cJSON_IsObject(args));
        if (!cJSON_IsString(name) || !cJSON_IsString(ph)) continue;
        ev *x = &t->ev[t->n];
        *x = (ev){.name = name->valuestring, .ph = ph->valuestring[0], .order = t->n,
                  .cat = cJSON_IsString(cat) ? cat->valuestring : "", .dir = cJSON_IsString(dir) ? dir->valuestring : "",
                  .tid = int_arg(e, "tid", -1), .block = int_arg(args, "block", -1),
                  .mb = int_arg(args, "micro_batch", -1), .peer = int_arg(args, "peer", -1),
                  .index = int_arg(args, "index", -1), .bytes = cJSON_IsNumber(bytes) ? (long long)bytes->valuedouble : -1};
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        x->ts = cJSON_IsNumber(ts) ? ts->valuedouble : -1;
        x->dur = cJSON_IsNumber(dur) ? dur->valuedouble : -1;
        CHECK_MSG(x->ph == 'M' || x->ts >= 0, "%s has no ts", x->name);
        CHECK_MSG(x->ph != 'X' || x->dur >= 0, "%s has no dur", x->name);
        t->n++;
    }
    CHECK_MSG(t->n < MAX_EV, "more events than the test reads");
    return t->root != NULL;
}

static int by_time(const void *a, const void *b) {
    const ev *x = *(const ev *const *)a, *y = *(const ev *const *)b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->order - y->order;
}

/* The device's compute events of `cat` ("forward", "backward", "recompute") in time order. */
static int device_passes(trace *t, int tid, bool with_recompute, const ev **out) {
    int n = 0;
    for (int i = 0; i < t->n; i++) {
        const ev *e = &t->ev[i];
        if (e->ph != 'X' || e->tid != tid || strcmp(e->cat, "compute") != 0) continue;
        if (!with_recompute && strncmp(e->name, "recompute", 9) == 0) continue;
        out[n++] = e;
    }
    qsort(out, (size_t)n, sizeof *out, by_time);
    return n;
}

static const char *thread_name(const trace *t, int tid) {
    for (int i = 0; i < t->n; i++) {
        const ev *e = &t->ev[i];
        if (e->ph == 'M' && e->tid == tid && strcmp(e->name, "thread_name") == 0) {
            const cJSON *list = cJSON_GetObjectItemCaseSensitive(t->root, "traceEvents");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, e->order), "args");
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(args, "name");
            return cJSON_IsString(n) ? n->valuestring : NULL;
        }
    }
    return NULL;
}

static int count(const trace *t, int tid, char ph, const char *prefix) {
    int n = 0;
    for (int i = 0; i < t->n; i++)
        if ((tid < 0 || t->ev[i].tid == tid) && t->ev[i].ph == ph && strncmp(t->ev[i].name, prefix, strlen(prefix)) == 0)
            n++;
    return n;
}

/* ---- the checks ---- */

/* Each device's forward and backward events are exactly its stage's row of the schedule, every
 * step expanded to the stage's blocks (forward in block order, backward in reverse). */
static void check_schedule_order(trace *t, brg_schedule_kind kind, int replicas, const char *what) {
    brg_schedule s;
    CHECK_OK(brg_schedule_build(kind, STAGES, MICRO, &s));
    for (int dev = 0; dev < replicas * STAGES; dev++) {
        const int stage = dev % STAGES, first = stage * 2, last = first + 1;
        const ev *got[MAX_EV];
        int n = device_passes(t, dev, false, got), k = 0;
        CHECK_MSG(n == 2 * s.length[stage], "%s: device %d has %d forward/backward events, the schedule %d", what, dev,
                  n, 2 * s.length[stage]);
        for (int i = 0; i < s.length[stage] && k < n; i++) {
            const brg_schedule_step st = s.steps[stage][i];
            const bool fwd = st.pass == BRG_PASS_FORWARD;
            for (int j = 0; j < 2 && k < n; j++, k++) {
                const int block = fwd ? first + j : last - j;
                char want[64];
                snprintf(want, sizeof want, "%s block %d mb %d", fwd ? "forward" : "backward", block, st.micro_batch);
                CHECK_MSG(strcmp(got[k]->name, want) == 0 && got[k]->block == block && got[k]->mb == st.micro_batch &&
                              strcmp(got[k]->dir, fwd ? "forward" : "backward") == 0,
                          "%s: device %d event %d is '%s' (block %d, mb %d, %s), the schedule's '%s'", what, dev, k,
                          got[k]->name, got[k]->block, got[k]->mb, got[k]->dir, want);
            }
        }
        char name[64];
        snprintf(name, sizeof name, "device %d (replica %d, stage %d)", dev, dev / STAGES, stage);
        const char *track = thread_name(t, dev);
        CHECK_MSG(track && strcmp(track, name) == 0, "%s: track %d is named '%s', not '%s'", what, dev,
                  track ? track : "(none)", name);
        /* a memory counter after every step of its row */
        snprintf(name, sizeof name, "memory device %d", dev);
        CHECK_MSG(count(t, dev, 'C', name) == s.length[stage], "%s: %d counters '%s', steps %d", what,
                  count(t, dev, 'C', name), name, s.length[stage]);
        CHECK_MSG(count(t, dev, 'X', "optimizer step") == 1, "%s: device %d optimizer steps", what, dev);
        CHECK_MSG(count(t, dev, 'X', "all-reduce") >= 1, "%s: device %d all-reduces", what, dev);
    }
    brg_schedule_free(&s);
}

/* Stage 0 sends each micro-batch's activations forward and receives its gradients; stage 1 the
 * mirror; what one sends, the other receives, with the same bytes. */
static void check_transfers(const trace *t, int replicas, const char *what) {
    const long long activations = (long long)(ROWS / (MICRO * replicas)) * T * 16 * (long long)sizeof(float);
    for (int r = 0; r < replicas; r++)
        for (int mb = 0; mb < MICRO; mb++)
            for (int d = 0; d < 2; d++) {
                const int from = r * STAGES + (d == 0 ? 0 : 1), to = r * STAGES + (d == 0 ? 1 : 0);
                const char *dir = d == 0 ? "forward" : "backward";
                int sends = 0, recvs = 0;
                for (int i = 0; i < t->n; i++) {
                    const ev *e = &t->ev[i];
                    if (e->ph != 'X' || e->mb != mb || strcmp(e->dir, dir) != 0 || strcmp(e->cat, "transport") != 0)
                        continue;
                    if (e->tid == from && e->peer == to && strncmp(e->name, "send", 4) == 0) {
                        sends++;
                        CHECK_MSG(e->bytes == activations, "%s: '%s' carries %lld bytes, not %lld", what, e->name,
                                  e->bytes, activations);
                    }
                    if (e->tid == to && e->peer == from && strncmp(e->name, "recv", 4) == 0) {
                        recvs++;
                        CHECK_MSG(e->bytes == activations, "%s: '%s' carries %lld bytes, not %lld", what, e->name,
                                  e->bytes, activations);
                    }
                }
                CHECK_MSG(sends == 1 && recvs == 1, "%s: mb %d %s from device %d: %d sends, %d receives", what, mb, dir,
                          from, sends, recvs);
            }
}

/* The host track: the step and its phases. */
static void check_host(const trace *t, const char *what) {
    const char *host = thread_name(t, 100000);
    CHECK_MSG(host && strcmp(host, "host") == 0, "%s: no host track", what);
    CHECK_MSG(count(t, 100000, 'X', "step 1") == 1 && count(t, 100000, 'X', "data 1") == 1 &&
                  count(t, 100000, 'X', "pipeline 1") == 1 && count(t, 100000, 'X', "optimizer 1") == 1,
              "%s: the host track lacks the step's phases", what);
}

/* Every recomputation sits inside the backward of its (device, block, micro-batch); layers only. */
static void check_recompute(trace *t, const char *what) {
    int found = 0;
    for (int i = 0; i < t->n; i++) {
        const ev *r = &t->ev[i];
        if (r->ph != 'X' || strncmp(r->name, "recompute", 9) != 0) continue;
        found++;
        CHECK_MSG(r->block == 1 || r->block == 2, "%s: '%s' recomputes a block that is no layer", what, r->name);
        bool inside = false;
        for (int j = 0; j < t->n; j++) {
            const ev *b = &t->ev[j];
            if (b->ph == 'X' && b->tid == r->tid && b->block == r->block && b->mb == r->mb &&
                strncmp(b->name, "backward", 8) == 0)
                inside = b->ts <= r->ts && r->ts + r->dur <= b->ts + b->dur + 1e-3;
        }
        CHECK_MSG(inside, "%s: '%s' on device %d is not inside its backward", what, r->name, r->tid);
    }
    CHECK_MSG(found == 2 * MICRO, "%s: %d recompute events, wanted one per layer and micro-batch (%d)", what, found,
              2 * MICRO);
}

static void traced_step(brg_schedule_kind kind, bool recompute, int replicas, const char *what) {
    char path[1100];
    snprintf(path, sizeof path, "%s/trace_%s.json", test_tmp_dir(), what);
    unlink(path);
    brg_model *m = tu_tiny_gpt2(VOCAB);
    brg_dataset *d = tu_token_rows(ROWS, T, VOCAB, false);
    if (!m || !d) return;
    brg_train_options o;
    brg_train_options_default(&o);
    o.stages = STAGES, o.replicas = replicas, o.block_stage = BLOCK_STAGE, o.accumulation = MICRO;
    o.micro_batch = ROWS / (MICRO * replicas), o.steps = 1, o.schedule = kind, o.recompute = recompute;
    o.shuffle = false;
    CHECK_OK(brg_trace_start(path, "test_trace"));
    CHECK(brg_trace_enabled());
    CHECK_OK(brg_train(m, d, &o, NULL));
    CHECK_OK(brg_trace_finish());
    CHECK(!brg_trace_enabled());
    trace *t = malloc(sizeof *t);
    if (t && load(path, t)) {
        check_schedule_order(t, kind, replicas, what);
        check_transfers(t, replicas, what);
        check_host(t, what);
        if (recompute) check_recompute(t, what);
        else CHECK_MSG(count(t, -1, 'X', "recompute") == 0, "%s: recompute events without recomputation", what);
    }
    if (t) cJSON_Delete(t->root);
    free(t);
    brg_dataset_free(d);
    brg_model_destroy(m);
}

/* ---- the recorder's contract ---- */

static void test_contract(void) {
    char path[1100], dir[1100];
    /* A path that cannot be written is refused at the start, before anything runs. */
    snprintf(path, sizeof path, "%s/no_such_folder/t.json", test_tmp_dir());
    CHECK_ERR(brg_trace_start(path, "x"), BRG_ERR_IO, "no_such_folder/t.json");
    CHECK(!brg_trace_enabled());
    CHECK_OK(brg_trace_finish()); /* nothing started: nothing to write */
    snprintf(dir, sizeof dir, "%s", test_tmp_dir());
    CHECK_ERR(brg_trace_start(dir, "x"), BRG_ERR_IO, dir); /* a folder */
    /* One trace at a time; a discarded one leaves no file. */
    snprintf(path, sizeof path, "%s/trace_discarded.json", test_tmp_dir());
    unlink(path);
    CHECK_OK(brg_trace_start(path, "x"));
    CHECK_ERR(brg_trace_start(path, "y"), BRG_ERR_INVALID_ARG, "already");
    brg_trace_named("span", brg_trace_now(), -1);
    int64_t recorded = 0, dropped = 0;
    brg_trace_counts(&recorded, &dropped);
    CHECK(recorded == 1 && dropped == 0);
    brg_trace_discard();
    CHECK(access(path, F_OK) != 0);
    /* Off, hooks record nothing (and the next trace starts empty). */
    brg_trace_named("span", brg_trace_now(), -1);
    brg_trace_memory(0, 1);
    brg_trace_counts(&recorded, &dropped);
    CHECK(recorded == 0);
    /* A named span, its index and a name that needs escaping. */
    snprintf(path, sizeof path, "%s/trace_named.json", test_tmp_dir());
    CHECK_OK(brg_trace_start(path, "brigade \"quoted\""));
    brg_trace_named("decode step", brg_trace_now(), 7);
    brg_trace_memory(3, 4096);
    CHECK_OK(brg_trace_finish());
    trace *t = malloc(sizeof *t);
    if (t && load(path, t)) {
        CHECK(count(t, 100000, 'X', "decode step 7") == 1);
        CHECK(count(t, 100000, 'C', "memory device 3") == 1);
        const char *process = NULL;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(t->root, "traceEvents");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 0), "args");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(args, "name");
        if (cJSON_IsString(n)) process = n->valuestring;
        CHECK_MSG(process && strcmp(process, "brigade \"quoted\" (rank 0)") == 0, "process track '%s'",
                  process ? process : "(none)");
    }
    if (t) cJSON_Delete(t->root);
    free(t);
}

int main(void) {
    test_contract();
    traced_step(BRG_SCHEDULE_1F1B, false, 1, "1f1b");
    traced_step(BRG_SCHEDULE_GPIPE, false, 1, "gpipe");
    traced_step(BRG_SCHEDULE_1F1B, true, 1, "1f1b_recompute");
    traced_step(BRG_SCHEDULE_1F1B, false, 2, "1f1b_replicated");
    return test_finish();
}
