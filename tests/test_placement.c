/* Layer placement (get_layer_ipu, wildcards, encoder/decoder split) ported from
 * optimum-graphcore's tests/test_ipu_configuration.py, and the per-device plan. */
#include "test_util.h"

static brg_ipu_config cfg_, enc_, dec_;

static brg_status make(const char *json) { return brg_ipu_config_from_json(json, NULL, &cfg_); }

static bool ints_are(const int *got, int n_got, int n, const int *v) {
    if (n_got != n) return false;
    for (int i = 0; i < n; i++)
        if (got[i] != v[i]) return false;
    return true;
}
#define N_OF(...) (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))
#define LIST_IS(l, ...) ints_are((l)->v, (l)->present ? (l)->n : -1, N_OF(__VA_ARGS__), (int[]){__VA_ARGS__})

/* get_layer_ipu(cfg_, n) == expected */
static bool layer_ipu_is(int n_layers, int n, const int *want) {
    int got[64], count = -1;
    brg_status st = brg_ipu_config_get_layer_ipu(&cfg_, n_layers, got, 64, &count);
    if (st != BRG_OK) fprintf(stderr, "  %s\n", brg_last_error());
    return st == BRG_OK && ints_are(got, count, n, want);
}
#define LAYER_IPU_IS(n_layers, ...) layer_ipu_is((n_layers), N_OF(__VA_ARGS__), (int[]){__VA_ARGS__})

static void test_layers_per_ipu(void) {
    CHECK_OK(make("{\"layers_per_ipu\": [1, 2]}"));
    CHECK(cfg_.ipus_per_replica == 2);
    CHECK(LAYER_IPU_IS(3, 0, 1, 1));
    CHECK(LAYER_IPU_IS(BRG_LAYERS_UNSPECIFIED, 0, 1, 1));
    int buf[8], n;
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 2, buf, 8, &n), BRG_ERR_INVALID_ARG,
              "layers_per_ipu does not define the correct number of layers for the current model");
    CHECK(strstr(brg_last_error(), "assignments for 3 layers but there are 2 layers") != NULL);
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 4, buf, 8, &n), BRG_ERR_INVALID_ARG,
              "layers_per_ipu does not define the correct number of layers for the current model");

    CHECK_OK(make("{\"layers_per_ipu\": [1, -1], \"ipus_per_replica\": 4}"));
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 3, buf, 8, &n), BRG_ERR_INVALID_ARG,
              "layers_per_ipu has a non-default value set, but its length does not match ipus_per_replica");

    CHECK_OK(make("{}"));
    CHECK(LAYER_IPU_IS(9, 0, 0, 0, 0, 0, 0, 0, 0, 0));
    CHECK_OK(make("{\"ipus_per_replica\": 2}"));
    CHECK(LAYER_IPU_IS(6, 0, 0, 0, 1, 1, 1));
    CHECK(LAYER_IPU_IS(7, 0, 0, 0, 1, 1, 1, 1));
    CHECK_OK(make("{\"layers_per_ipu\": [2, -1]}"));
    CHECK(LAYER_IPU_IS(6, 0, 0, 1, 1, 1, 1));
    CHECK_OK(make("{\"layers_per_ipu\": [-1, 2]}"));
    CHECK(LAYER_IPU_IS(6, 0, 0, 0, 0, 1, 1));
    CHECK_OK(make("{\"layers_per_ipu\": [-1, 2, -1, 2]}"));
    CHECK(LAYER_IPU_IS(7, 0, 1, 1, 2, 2, 3, 3));
    /* three layers over four IPUs: the remainder goes to the last */
    CHECK_OK(make("{\"ipus_per_replica\": 4}"));
    CHECK(LAYER_IPU_IS(3, 3, 3, 3));
    brg_ipu_list l;
    CHECK_OK(brg_ipu_config_expand_layers(&cfg_, 3, &l));
    CHECK(LIST_IS(&l, 0, 0, 0, 3));
    /* one IPU takes everything whatever the list says */
    CHECK_OK(make("{\"layers_per_ipu\": [5], \"ipus_per_replica\": 1}"));
    CHECK(LAYER_IPU_IS(3, 0, 0, 0));
    /* explicit layers beyond the model's count leave the wildcards negative upstream: refused */
    CHECK_OK(make("{\"layers_per_ipu\": [1, -1, -1, 5]}"));
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 3, buf, 8, &n), BRG_ERR_INVALID_ARG,
              "IPU assignments for 6 layers but there are 3 layers");
    CHECK_OK(make("{\"layers_per_ipu\": [4, 4]}"));
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 8, buf, 4, &n), BRG_ERR_INVALID_ARG, "more than 4 layers");
    /* inference names in inference mode */
    CHECK_OK(make("{\"inference_layers_per_ipu\": [1, 2]}"));
    brg_ipu_config_eval(&cfg_);
    CHECK_ERR(brg_ipu_config_get_layer_ipu(&cfg_, 4, buf, 8, &n), BRG_ERR_INVALID_ARG,
              "inference_layers_per_ipu does not define the correct number of layers");
    CHECK(strstr(brg_last_error(), "inference_layers_per_ipu=[1, 2]") != NULL);
}

static void test_layers_per_ipu_wildcard_modes(void) {
    for (int m = 0; m < 2; m++) {
        CHECK_OK(make(m ? "{\"inference_ipus_per_replica\": 4, \"inference_layers_per_ipu\": [-1]}"
                        : "{\"ipus_per_replica\": 4, \"layers_per_ipu\": [-1]}"));
        cfg_.mode = (brg_ipu_mode)m;
        brg_ipu_view v;
        brg_ipu_config_view(&cfg_, cfg_.mode, &v);
        CHECK(v.ipus_per_replica == 4);
        CHECK(LAYER_IPU_IS(8, 0, 0, 1, 1, 2, 2, 3, 3));
    }
}

static brg_status split(int e, int d) { return brg_ipu_config_split_encoder_decoder(&cfg_, e, d, &enc_, &dec_); }

static void test_split_encoder_decoder(void) {
    CHECK_OK(make("{\"layers_per_ipu\": [1, 2]}"));
    CHECK_OK(split(1, 2));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 1) && enc_.ipus_per_replica == 1);
    CHECK(LIST_IS(&dec_.layers_per_ipu, 2) && dec_.ipus_per_replica == 1);

    CHECK_OK(make("{\"layers_per_ipu\": [2, 2, 2, 2], \"matmul_proportion\": [0.1, 0.2, 0.3, 0.4]}"));
    CHECK_OK(split(4, 4));
    CHECK(enc_.matmul_proportion.n == 2 && enc_.matmul_proportion.v[0] == 0.1 && enc_.matmul_proportion.v[1] == 0.2);
    CHECK(dec_.matmul_proportion.n == 2 && dec_.matmul_proportion.v[0] == 0.3 && dec_.matmul_proportion.v[1] == 0.4);
    /* every other attribute is copied unchanged */
    brg_ipu_config e = enc_, d = dec_;
    e.layers_per_ipu = d.layers_per_ipu = cfg_.layers_per_ipu;
    e.ipus_per_replica = d.ipus_per_replica = cfg_.ipus_per_replica;
    e.matmul_proportion = d.matmul_proportion = cfg_.matmul_proportion;
    CHECK(brg_ipu_config_equal(&e, &cfg_) && brg_ipu_config_equal(&d, &cfg_));

    CHECK_OK(make("{\"layers_per_ipu\": [0, 2, 2, 0], \"serialized_projection_splits_per_ipu\": [0, 2, 2, 0]}"));
    CHECK_ERR(split(2, 2), BRG_ERR_INVALID_ARG, "must have all splits placed on the");
    CHECK(strstr(brg_last_error(), "The `SplitProjection` must have all splits placed on the decoder, but "
                                   "serialized_projection_splits_per_ipu=[0, 2, 2, 0] results in [0, 2] being placed "
                                   "on the encoder") != NULL);
    CHECK_OK(make("{\"layers_per_ipu\": [0, 2, 2, 0], \"serialized_embedding_splits_per_ipu\": [0, 2, 2, 0]}"));
    CHECK_ERR(split(2, 2), BRG_ERR_INVALID_ARG, "must have all splits placed on the");

    CHECK_OK(make("{\"layers_per_ipu\": [-1, -1]}"));
    CHECK_OK(split(2, 3));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 2) && LIST_IS(&dec_.layers_per_ipu, 3));

    CHECK_OK(make("{\"layers_per_ipu\": [1, 2]}"));
    CHECK_ERR(split(2, 2), BRG_ERR_INVALID_ARG,
              "layers_per_ipu does not define the correct number of layers for the current model");
    CHECK_OK(make("{\"layers_per_ipu\": [4, 3]}"));
    CHECK_ERR(split(3, 4), BRG_ERR_INVALID_ARG, "Unable to find a valid split of ipu_config.layers_per_ipu");
    CHECK_OK(make("{\"layers_per_ipu\": [4]}"));
    CHECK_ERR(split(2, 2), BRG_ERR_INVALID_ARG,
              "Need ipus_per_replica to be at least 2 to split ipu_config into encoder and decoder configs");

    CHECK_OK(make("{\"layers_per_ipu\": [1, 2, 3, 0, 5, 6, 7, 8]}"));
    CHECK_OK(split(6, 26));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 1, 2, 3, 0) && enc_.ipus_per_replica == 4);
    CHECK(LIST_IS(&dec_.layers_per_ipu, 5, 6, 7, 8) && dec_.ipus_per_replica == 4);
    CHECK_OK(make("{\"layers_per_ipu\": [0, 6, 0, 6]}"));
    CHECK_OK(split(6, 6));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 0, 6) && enc_.ipus_per_replica == 2);
    CHECK(LIST_IS(&dec_.layers_per_ipu, 0, 6) && dec_.ipus_per_replica == 2);
    CHECK_OK(make("{\"layers_per_ipu\": [3, 0, 3, 0, 0, 7]}"));
    CHECK_OK(split(6, 7));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 3, 0, 3, 0) && enc_.ipus_per_replica == 4);
    CHECK(LIST_IS(&dec_.layers_per_ipu, 0, 7) && dec_.ipus_per_replica == 2);
}

static void test_split_encoder_decoder_modes(void) {
    for (int m = 0; m < 2; m++) {
        const char *p = m ? "inference_" : "";
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"%slayers_per_ipu\": [1, 2, 3, 4], \"%smatmul_proportion\": [0.1, 0.2, 0.3, 0.4], "
                 "\"%sipus_per_replica\": 4, \"%sserialized_projection_splits_per_ipu\": [0, 0, 2, 2], "
                 "\"%sserialized_embedding_splits_per_ipu\": [2, 2, 0, 0]}",
                 p, p, p, p, p);
        CHECK_OK(make(json));
        cfg_.mode = (brg_ipu_mode)m;
        CHECK_OK(split(3, 7));
        brg_ipu_view e, d;
        brg_ipu_config_view(&enc_, cfg_.mode, &e);
        brg_ipu_config_view(&dec_, cfg_.mode, &d);
        CHECK(LIST_IS(e.layers_per_ipu, 1, 2) && e.ipus_per_replica == 2);
        CHECK(e.matmul_proportion->n == 2 && e.matmul_proportion->v[1] == 0.2);
        CHECK(!e.serialized_projection_splits_per_ipu->present && LIST_IS(e.serialized_embedding_splits_per_ipu, 2, 2));
        CHECK(LIST_IS(d.layers_per_ipu, 3, 4) && d.ipus_per_replica == 2);
        CHECK(d.matmul_proportion->n == 2 && d.matmul_proportion->v[0] == 0.3);
        CHECK(LIST_IS(d.serialized_projection_splits_per_ipu, 2, 2) && !d.serialized_embedding_splits_per_ipu->present);
        /* the other mode is untouched */
        brg_ipu_mode other = m ? BRG_IPU_MODE_TRAINING : BRG_IPU_MODE_INFERENCE;
        brg_ipu_config_view(&enc_, other, &e);
        brg_ipu_config_view(&cfg_, other, &d);
        CHECK(e.layers_per_ipu->n == d.layers_per_ipu->n && e.ipus_per_replica == d.ipus_per_replica);
        CHECK(m ? LIST_IS(e.layers_per_ipu, -1) : LIST_IS(e.layers_per_ipu, 1, 2, 3, 4));
    }
    /* a T5 config as published: training over 4 IPUs, inference over 2 */
    CHECK_OK(brg_ipu_config_load("tests/fixtures/ipu_configs/t5-small-ipu.json", &cfg_));
    CHECK_OK(split(6, 6));
    CHECK(LIST_IS(&enc_.layers_per_ipu, 2, 4) && LIST_IS(&dec_.layers_per_ipu, 2, 4));
    CHECK(dec_.matmul_proportion.n == 2 && dec_.matmul_proportion.v[0] == 0.3);
    brg_ipu_config_eval(&cfg_);
    CHECK_OK(split(6, 6));
    CHECK(LIST_IS(&enc_.inference_layers_per_ipu, 6) && enc_.inference_ipus_per_replica == 1);
    CHECK(LIST_IS(&dec_.inference_layers_per_ipu, 6) && dec_.inference_matmul_proportion.n == 1);
}

/* ---- plans -------------------------------------------------------------------------------- */

/* embeddings (params 100, tied to the head), 4 layers, head (params 10, uses the 100 tied) */
static void make_costs(brg_block_cost *c) {
    memset(c, 0, 6 * sizeof *c);
    for (int b = 0; b < 6; b++) {
        c[b].tied_owner = -1;
        c[b].layer = b >= 1 && b <= 4 ? b - 1 : -1;
        c[b].params = b == 0 ? 100 : b == 5 ? 10 : 50;
        c[b].flops = b == 0 ? 10 : b == 5 ? 200 : 100;
        c[b].saved_bytes = b == 0 ? 40 : b == 5 ? 400 : 1000;
        c[b].input_bytes = 16;
    }
    c[5].tied_params = 100;
    c[5].tied_owner = 0;
}

static void test_plan_devices(void) {
    brg_block_cost c[6];
    make_costs(c);
    int dev[6] = {0, 0, 0, 1, 1, 1};
    brg_device_plan p[2];
    CHECK_OK(brg_plan_devices(c, 6, dev, 2, BRG_IPU_MODE_TRAINING, false, p));
    CHECK(p[0].n_blocks == 3 && p[0].params == 200 && p[1].params == 110 + 100);
    CHECK(p[0].weight_bytes == 800 && p[0].gradient_bytes == 800 && p[0].optimizer_bytes == 1600);
    /* the copy of the tied weight has its gradient and moments too (each device steps its own) */
    CHECK(p[1].weight_bytes == 840 && p[1].gradient_bytes == 840 && p[1].optimizer_bytes == 1680);
    /* device 1 also holds the copy of what device 0 sent */
    CHECK(p[0].activation_bytes == 2040 && p[1].activation_bytes == 16 + 2400);
    CHECK(p[1].total_bytes == 840 + 840 + 1680 + 16 + 2400 && p[1].in_flight == 1 && p[1].scratch_bytes == 0);
    CHECK_NEAR(p[0].compute_share, 210.0 / 610.0, 1e-12);
    CHECK_NEAR(p[0].compute_share + p[1].compute_share, 1.0, 1e-12);
    /* recomputation: each layer keeps its input, one layer at a time is rebuilt */
    CHECK_OK(brg_plan_devices(c, 6, dev, 2, BRG_IPU_MODE_TRAINING, true, p));
    CHECK(p[0].activation_bytes == 40 + 16 + 16 + 1000 && p[1].activation_bytes == 16 + 400 + 16 + 16 + 1000);
    /* inference: every block's forward */
    for (int b = 0; b < 6; b++) c[b].forward_bytes = c[b].saved_bytes / 2;
    CHECK_OK(brg_plan_devices(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, p));
    CHECK(p[0].gradient_bytes == 0 && p[0].optimizer_bytes == 0 && p[0].activation_bytes == 20 + 500 + 500);
    CHECK(p[1].activation_bytes == 16 + 500 + 500 + 200);
    int same[6] = {0, 0, 0, 0, 0, 0};
    brg_device_plan one;
    CHECK_OK(brg_plan_devices(c, 6, same, 1, BRG_IPU_MODE_TRAINING, false, &one));
    CHECK(one.params == 310 && one.weight_bytes == 1240); /* tied weight once on one device */
    int bad[6] = {0, 0, 0, 1, 1, 2};
    CHECK_ERR(brg_plan_devices(c, 6, bad, 2, BRG_IPU_MODE_TRAINING, false, p), BRG_ERR_INVALID_ARG, "device 2");

    /* micro-batches in flight, gradients of activations, scratch, another optimizer, threads */
    for (int b = 0; b < 6; b++) {
        c[b].grad_bytes = 10;
        c[b].input_grad_bytes = 8;
        c[b].scratch_bytes[0] = c[b].team_scratch_bytes[0] = b == 5 ? 0 : 64; /* on every team thread */
        c[b].scratch_bytes[3] = b == 5 ? 128 : 0;
        /* operands rounded to 16 bits: counted only with half_products */
        c[b].scratch_bytes[BRG_PLAN_SCRATCH_ROUNDED_A] = 32 * (b + 1);
        c[b].scratch_bytes[BRG_PLAN_SCRATCH_ROUNDED_B] = 16;
        c[b].team_scratch_bytes[BRG_PLAN_SCRATCH_ROUNDED_A] = 8;
        c[b].param_bytes = 4 * c[b].params + 24; /* rounded up */
        c[b].param_tensors = 2;
    }
    int flight[2] = {2, 1};
    brg_plan_options o = {.mode = BRG_IPU_MODE_TRAINING, .in_flight = flight, .optimizer_state = 1, .threads = 3};
    CHECK_OK(brg_plan_devices_with(c, 6, dev, 2, &o, p));
    const int64_t header = ((int64_t)sizeof(brg_tensor) + BRG_ARENA_ALIGN - 1) / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN;
    CHECK(p[0].in_flight == 2 && p[0].micro_batch_bytes == 2040 + 30 && p[0].activation_bytes == 2 * 2070);
    CHECK(p[0].weight_bytes == 800 + 72 + 6 * header && p[0].optimizer_bytes == 800 + 72);
    CHECK(p[0].scratch_bytes == 64 + 2 * 64); /* the attention rows of each of 3 threads */
    CHECK(p[1].activation_bytes == 16 + 8 + 2400 + 30 && p[1].scratch_bytes == 3 * 64 + 128);
    /* the copy: its data rounded up and one header */
    CHECK(p[1].weight_bytes == 440 + 72 + 448 + 7 * header && p[1].gradient_bytes == 440 + 72 + 448);
    CHECK(p[1].total_bytes == p[1].weight_bytes + p[1].gradient_bytes + p[1].optimizer_bytes + p[1].activation_bytes +
                                  p[1].scratch_bytes);
    /* a 16-bit compute type: each device's largest rounded operands, on the team's threads too */
    o.half_products = true;
    CHECK_OK(brg_plan_devices_with(c, 6, dev, 2, &o, p));
    CHECK(p[0].scratch_bytes == 64 + 2 * 64 + 32 * 3 + 16 + 2 * 8);
    CHECK(p[1].scratch_bytes == 3 * 64 + 128 + 32 * 6 + 16 + 2 * 8);
}

static void test_plan_balance(void) {
    brg_block_cost c[6];
    make_costs(c);
    int dev[6] = {0, 0, 0, 1, 1, 1};
    brg_ipu_list l;
    /* the head's copy of the tied table weighs on device 1 too */
    CHECK_OK(brg_plan_balance(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, &l));
    CHECK(LIST_IS(&l, 3, 1));
    /* a large untied embedding table: memory gives device 0 fewer layers than compute would */
    c[0].params = 1000;
    c[5].tied_params = 0;
    CHECK_OK(brg_plan_balance(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, &l));
    CHECK(LIST_IS(&l, 1, 3));
    /* the same costs balanced for compute alone or memory alone */
    CHECK_OK(brg_plan_balance_for(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, BRG_BALANCE_COMPUTE, &l));
    CHECK(LIST_IS(&l, 3, 1));
    CHECK_OK(brg_plan_balance_for(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, BRG_BALANCE_MEMORY, &l));
    CHECK(LIST_IS(&l, 0, 4));
    CHECK_OK(brg_plan_balance_for(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, BRG_BALANCE_BOTH, &l));
    CHECK(LIST_IS(&l, 1, 3));
    CHECK_ERR(brg_plan_balance_for(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, (brg_balance_goal)7, &l),
              BRG_ERR_INVALID_ARG, "balance goal 7");
    brg_balance_goal goal = BRG_BALANCE_BOTH;
    CHECK_OK(brg_balance_goal_parse("compute", &goal));
    CHECK(goal == BRG_BALANCE_COMPUTE);
    CHECK_OK(brg_balance_goal_parse("memory", &goal));
    CHECK(goal == BRG_BALANCE_MEMORY);
    CHECK_ERR(brg_balance_goal_parse("speed", &goal), BRG_ERR_INVALID_ARG, "expected both, compute or memory");
    /* compute alone: the head's FLOPs weigh on the last device, which takes fewer layers */
    for (int b = 0; b < 6; b++) c[b].params = c[b].tied_params = 0;
    CHECK_OK(brg_plan_balance(c, 6, dev, 2, BRG_IPU_MODE_INFERENCE, false, &l));
    CHECK(LIST_IS(&l, 3, 1));
    int dev4[6] = {0, 0, 1, 2, 3, 3};
    CHECK_OK(brg_plan_balance(c, 6, dev4, 4, BRG_IPU_MODE_INFERENCE, false, &l));
    CHECK(l.n == 4 && l.v[0] + l.v[1] + l.v[2] + l.v[3] == 4 && l.v[3] == 0);
    /* uniform layers and no extra blocks: an even split */
    brg_block_cost u[8];
    int du[8];
    for (int b = 0; b < 8; b++)
        u[b] = (brg_block_cost){.layer = b, .params = 10, .tied_owner = -1, .flops = 5, .saved_bytes = 20,
                                .input_bytes = 4},
        du[b] = 0;
    CHECK_OK(brg_plan_balance(u, 8, du, 4, BRG_IPU_MODE_TRAINING, false, &l));
    CHECK(LIST_IS(&l, 2, 2, 2, 2));
    CHECK_OK(brg_plan_balance(u, 8, du, 1, BRG_IPU_MODE_TRAINING, false, &l));
    CHECK(LIST_IS(&l, 8));
    u[3].layer = 9;
    CHECK_ERR(brg_plan_balance(u, 8, du, 4, BRG_IPU_MODE_TRAINING, false, &l), BRG_ERR_INVALID_ARG, "layer index 9");
}

int main(void) {
    test_layers_per_ipu();
    test_layers_per_ipu_wildcard_modes();
    test_split_encoder_decoder();
    test_split_encoder_decoder_modes();
    test_plan_devices();
    test_plan_balance();
    return test_finish();
}
