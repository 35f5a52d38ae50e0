/* Used by test_transport.c: a few optimizer steps of a tiny GPT-2 and a tiny T5, pipelined and
 * replicated, through a runtime made by a given function; the weights that come out, and a hash
 * of their bits, are compared between transports. */
#ifndef BRIGADE_TEST_TRANSPORT_TRAIN_H
#define BRIGADE_TEST_TRANSPORT_TRAIN_H

#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "brigade/t5.h"
#include "test_util.h"

enum { TT_ROWS = 8, TT_T = 8, TT_TD = 6, TT_VOCAB = 37, TT_STEPS = 3, TT_MAX_PARAMS = 128 };

typedef brg_status (*tt_create_fn)(brg_model *m, const brg_runtime_options *o, brg_runtime **out);

typedef enum { TT_GPT2, TT_T5 } tt_arch;

typedef struct tt_layout {
    tt_arch arch;
    int replicas, stages, micro_batches;
    int block_stage[8];
    brg_schedule_kind kind;
    bool recompute;
    const char *what;
} tt_layout;

typedef struct tt_trained {
    int n_params;
    float *weights[TT_MAX_PARAMS];
    int64_t numel[TT_MAX_PARAMS];
    float losses[TT_STEPS][8];
    uint64_t hash; /* FNV-1a over the weights' and losses' bits */
} tt_trained;

static inline void tt_perturb(brg_model *m, uint64_t seed) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int p = 0; p < m->n_params; p++) {
        float *d = m->params[p].tensor->data;
        for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++) d[i] += 0.1f * (float)brg_rng_normal(&rng);
    }
}

static brg_model *tt_model(tt_arch arch) {
    brg_model *m = NULL;
    if (arch == TT_GPT2) {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.n_positions = 16, c.vocab_size = TT_VOCAB;
        c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0;
        c.initializer_range = 0.2f;
        CHECK_OK(brg_gpt2_create(&c, &m));
    } else {
        brg_t5_config c;
        brg_t5_config_default(&c);
        c.vocab_size = TT_VOCAB, c.d_model = 16, c.d_kv = 4, c.num_heads = 3, c.d_ff = 24;
        c.num_layers = 2, c.num_decoder_layers = 2;
        c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 12;
        c.dropout_rate = 0;
        c.decoder_start_token_id = 0;
        CHECK_OK(brg_t5_create(&c, &m));
    }
    if (!m) return NULL;
    brg_model_init_weights(m, 5);
    tt_perturb(m, 9); /* layer norms away from 1 and 0, so their gradients matter */
    return m;
}

typedef struct tt_data {
    int32_t ids[TT_ROWS * TT_T], labels[TT_ROWS * TT_T], dec_labels[TT_ROWS * TT_TD];
    float mask[TT_ROWS * TT_T];
} tt_data;

static inline void tt_make_data(tt_data *d, uint64_t seed) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int i = 0; i < TT_ROWS * TT_T; i++) {
        int row = i / TT_T, t = i % TT_T;
        d->mask[i] = t < TT_T - (row % 3) ? 1.0f : 0.0f;
        d->ids[i] = (int32_t)(2 + brg_rng_next(&rng) % (TT_VOCAB - 2));
        d->labels[i] = d->mask[i] == 0.0f || i % 5 == 0 ? -100 : d->ids[i];
    }
    for (int i = 0; i < TT_ROWS * TT_TD; i++)
        d->dec_labels[i] = i % 7 == 3 ? -100 : (int32_t)(brg_rng_next(&rng) % TT_VOCAB);
}

/* PopTorch's [accumulation, replica, micro] row order. */
typedef struct tt_batch {
    brg_micro_batch mbs[8];
    brg_tensor ids[8], mask[8], labels[8];
    brg_loss_items denom;
} tt_batch;

static inline void tt_split(const brg_model *m, const tt_layout *l, const tt_data *d, tt_batch *b) {
    int n_mb = l->replicas * l->micro_batches, rows = TT_ROWS / n_mb, lt = l->arch == TT_GPT2 ? TT_T : TT_TD;
    const int32_t *labels = l->arch == TT_GPT2 ? d->labels : d->dec_labels;
    for (int r = 0; r < l->replicas; r++)
        for (int a = 0; a < l->micro_batches; a++) {
            int slot = r * l->micro_batches + a, first = (a * l->replicas + r) * rows;
            int64_t s[2] = {rows, TT_T}, sl[2] = {rows, lt};
            b->ids[slot] = brg_tensor_wrap(BRG_DTYPE_I32, 2, s, (void *)(d->ids + first * TT_T));
            b->mask[slot] = brg_tensor_wrap(BRG_DTYPE_F32, 2, s, (void *)(d->mask + first * TT_T));
            b->labels[slot] = brg_tensor_wrap(BRG_DTYPE_I32, 2, sl, (void *)(labels + first * lt));
            b->mbs[slot] = TEST_MAP("input_ids", &b->ids[slot], "attention_mask", &b->mask[slot], "labels",
                                    &b->labels[slot]);
        }
    brg_tensor all = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){TT_ROWS, lt}, (void *)labels);
    brg_tensor_map whole = TEST_MAP("labels", &all);
    b->denom = brg_model_count_loss_items(m, &whole);
}

/* Plain SGD on each device's own copies. */
static inline brg_status tt_sgd(brg_device *dev, void *arg) {
    float lr = *(const float *)arg;
    brg_device_info info;
    brg_device_get_info(dev, &info);
    for (int p = 0; p < info.view->n_params; p++) {
        if (!info.holds[p]) continue;
        brg_tensor *t = info.view->params[p].tensor;
        float *w = t->data;
        for (int64_t i = 0; i < brg_tensor_numel(t); i++) w[i] -= lr * t->grad[i];
    }
    return BRG_OK;
}

static inline uint64_t tt_fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* TT_STEPS steps (each: run, clip to norm 1, SGD, zero), then the weights as the runtime hands
 * them back to the model. Every device's copy of a parameter must equal the model's. */
static inline void tt_train(const tt_layout *l, tt_create_fn create, tt_trained *out) {
    memset(out, 0, sizeof *out);
    brg_model *m = tt_model(l->arch);
    if (!m) return;
    BRG_ASSERT(m->n_params <= TT_MAX_PARAMS);
    brg_runtime_options o = {.replicas = l->replicas, .stages = l->stages, .block_stage = l->block_stage,
                             .micro_batches = l->micro_batches, .schedule = l->kind, .training = true,
                             .recompute = l->recompute};
    brg_runtime *rt = NULL;
    CHECK_OK(create(m, &o, &rt));
    if (!rt) {
        brg_model_destroy(m);
        return;
    }
    float lr = 0.1f;
    for (int step = 0; step < TT_STEPS; step++) {
        tt_data d;
        tt_make_data(&d, 100 + (uint64_t)step);
        tt_batch b;
        tt_split(m, l, &d, &b);
        CHECK_OK(brg_runtime_run(rt, b.mbs, &b.denom, 7, out->losses[step]));
        double sq = 0;
        CHECK_OK(brg_runtime_grad_sq_norm(rt, &sq));
        if (sq > 1) CHECK_OK(brg_runtime_scale_grads(rt, (float)(1 / sqrt(sq))));
        CHECK_OK(brg_runtime_each_device(rt, tt_sgd, &lr));
        CHECK_OK(brg_runtime_zero_grads(rt));
    }
    brg_runtime_sync_to_model(rt);
    uint64_t h = 0xcbf29ce484222325ull;
    out->n_params = m->n_params;
    for (int p = 0; p < m->n_params; p++) {
        const brg_tensor *t = m->params[p].tensor;
        out->numel[p] = brg_tensor_numel(t);
        out->weights[p] = malloc(brg_tensor_nbytes(t));
        memcpy(out->weights[p], t->data, brg_tensor_nbytes(t));
        h = tt_fnv(h, t->data, brg_tensor_nbytes(t));
        for (int dv = 0; dv < brg_runtime_device_count(rt); dv++) {
            brg_device_info info;
            brg_device_get_info(brg_runtime_device(rt, dv), &info);
            if (info.holds[p])
                CHECK_MSG(memcmp(info.view->params[p].tensor->data, t->data, brg_tensor_nbytes(t)) == 0,
                          "%s: device %d's copy of %s differs from the model's", l->what, dv, m->params[p].name);
        }
    }
    out->hash = tt_fnv(h, out->losses, sizeof out->losses);
    brg_runtime_destroy(rt);
    brg_model_destroy(m);
}

static inline void tt_free(tt_trained *t) {
    for (int p = 0; p < t->n_params; p++) free(t->weights[p]);
}

/* GPT-2's blocks: embeddings, 2 layers, head (wte tied to the head: a copy on both ends).
 * T5's: embeddings, 2 encoder layers, 2 decoder layers, head. */
static const tt_layout TT_LAYOUTS[] = {
    {TT_GPT2, 2, 2, 4, {0, 0, 1, 1}, BRG_SCHEDULE_GPIPE, false, "gpt2 2 replicas x 2 stages, GPipe"},
    {TT_GPT2, 2, 2, 4, {0, 0, 1, 1}, BRG_SCHEDULE_1F1B, false, "gpt2 2 replicas x 2 stages, 1F1B"},
    {TT_GPT2, 2, 2, 2, {0, 1, 1, 1}, BRG_SCHEDULE_1F1B, true, "gpt2 2 replicas x 2 stages, recomputation"},
    {TT_GPT2, 1, 4, 4, {0, 1, 2, 3}, BRG_SCHEDULE_1F1B, false, "gpt2 4 stages, 1F1B"},
    {TT_T5, 2, 2, 2, {0, 0, 0, 1, 1, 1}, BRG_SCHEDULE_1F1B, false, "t5 2 replicas x 2 stages, 1F1B"},
    {TT_T5, 1, 2, 4, {0, 0, 1, 1, 1, 1}, BRG_SCHEDULE_GPIPE, true, "t5 cut in the encoder, GPipe, recomputation"},
};
enum { TT_N_LAYOUTS = sizeof TT_LAYOUTS / sizeof TT_LAYOUTS[0] };

#endif
