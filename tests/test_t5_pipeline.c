/* T5 pipelined over 2 and 4 stages and replicated gives the single-device loss and gradients:
 * the encoder output travels with the pipeline to the decoder stages and its gradient comes
 * back; the shared embedding and each stack's relative position bias are copied to every stage
 * that reads them and their gradients summed. */
#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "brigade/t5.h"
#include "runtime_util.h"

enum { ROWS = 8, TE = 7, TD = 6, VOCAB = 37, MAX_PARAMS = 96 };

static brg_model *tiny_t5(const char *feed_forward, bool tied, uint64_t seed) {
    brg_t5_config c;
    brg_t5_config_default(&c);
    c.vocab_size = VOCAB, c.d_model = 16, c.d_kv = 4, c.num_heads = 3, c.d_ff = 24;
    c.num_layers = 2, c.num_decoder_layers = 2;
    c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 12;
    c.dropout_rate = 0;
    c.decoder_start_token_id = 0;
    snprintf(c.feed_forward_proj, sizeof c.feed_forward_proj, "%s", feed_forward);
    c.is_gated_act = strncmp(feed_forward, "gated-", 6) == 0;
    c.act = c.is_gated_act ? BRG_T5_ACT_GELU_TANH : BRG_T5_ACT_RELU;
    c.tie_word_embeddings = c.scale_decoder_outputs = tied;
    brg_model *m = NULL;
    CHECK_OK(brg_t5_create(&c, &m));
    if (!m) return NULL;
    brg_model_init_weights(m, seed);
    /* Layer norms start at 1; move them so their gradients matter. */
    brg_rng rng;
    brg_rng_seed(&rng, seed + 1);
    for (int p = 0; p < m->n_params; p++) {
        float *d = m->params[p].tensor->data;
        for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++) d[i] += 0.1f * (float)brg_rng_normal(&rng);
    }
    return m;
}

typedef struct data {
    int32_t ids[ROWS * TE], labels[ROWS * TD], dec_ids[ROWS * TD];
    float mask[ROWS * TE], dec_mask[ROWS * TD];
    bool give_decoder_inputs;
} data;

static void make_data(data *d, bool give_decoder_inputs) {
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    d->give_decoder_inputs = give_decoder_inputs;
    for (int i = 0; i < ROWS * TE; i++) {
        int row = i / TE, t = i % TE;
        d->mask[i] = t < TE - (row % 3) ? 1.0f : 0.0f; /* right padding of 0-2 positions */
        d->ids[i] = d->mask[i] == 0.0f ? 0 : (int32_t)(2 + brg_rng_next(&rng) % (VOCAB - 2));
    }
    for (int i = 0; i < ROWS * TD; i++) {
        int row = i / TD, t = i % TD;
        d->dec_mask[i] = t < TD - (row % 2) ? 1.0f : 0.0f;
        d->dec_ids[i] = (int32_t)(brg_rng_next(&rng) % VOCAB);
        d->labels[i] = d->dec_mask[i] == 0.0f || i % 7 == 3 ? -100 : (int32_t)(brg_rng_next(&rng) % VOCAB);
    }
}

typedef struct inputs {
    brg_tensor ids, mask, labels, dec_ids, dec_mask;
} inputs;

/* Rows [first, first + rows) of every input, as one micro-batch. */
static brg_micro_batch slice(const data *d, int first, int rows, inputs *in) {
    int64_t se[2] = {rows, TE}, sd[2] = {rows, TD};
    in->ids = brg_tensor_wrap(BRG_DTYPE_I32, 2, se, (void *)(d->ids + first * TE));
    in->mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, se, (void *)(d->mask + first * TE));
    in->labels = brg_tensor_wrap(BRG_DTYPE_I32, 2, sd, (void *)(d->labels + first * TD));
    in->dec_ids = brg_tensor_wrap(BRG_DTYPE_I32, 2, sd, (void *)(d->dec_ids + first * TD));
    in->dec_mask = brg_tensor_wrap(BRG_DTYPE_F32, 2, sd, (void *)(d->dec_mask + first * TD));
    brg_micro_batch mb = TEST_MAP("input_ids", &in->ids, "attention_mask", &in->mask, "labels", &in->labels);
    if (d->give_decoder_inputs) {
        TEST_PUT(&mb, "decoder_input_ids", &in->dec_ids);
        TEST_PUT(&mb, "decoder_attention_mask", &in->dec_mask);
    }
    return mb;
}

/* optimum-graphcore's [-1] layers_per_ipu: encoder and decoder layers split evenly over the
 * stages (the remainder on the last), the embeddings on the first, the head on the last. */
static void even_split(const brg_model *m, int stages, int *block_stage) {
    int layers = 0;
    for (int b = 0; b < m->n_blocks; b++) layers += m->blocks[b].kind == BRG_BLOCK_LAYER;
    int per = layers / stages;
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        int s = blk->kind == BRG_BLOCK_EMBEDDINGS ? 0 : blk->kind == BRG_BLOCK_HEAD ? stages - 1 : blk->layer / per;
        block_stage[b] = s < stages ? s : stages - 1;
    }
}

static void run(brg_model *m, const data *d, const layout *l, result *out) {
    brg_runtime_options o = layout_options(l);
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    memset(out, 0, sizeof *out);
    if (!rt) return;
    int n_mb = l->replicas * l->micro_batches, rows = ROWS / n_mb;
    brg_micro_batch mbs[8];
    inputs in[8];
    for (int r = 0; r < l->replicas; r++)
        for (int a = 0; a < l->micro_batches; a++) {
            int slot = r * l->micro_batches + a;
            mbs[slot] = slice(d, (a * l->replicas + r) * rows, rows, &in[slot]);
        }
    brg_tensor all_labels = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){ROWS, TD}, (void *)d->labels);
    brg_tensor_map whole = TEST_MAP("labels", &all_labels);
    brg_loss_items denom = brg_model_count_loss_items(m, &whole);
    float losses[8];
    CHECK_OK(brg_runtime_run(rt, mbs, &denom, 1, losses));
    for (int i = 0; i < n_mb; i++) out->loss += losses[i];
    collect_grads(rt, m, out);
    brg_runtime_destroy(rt);
}

static void check_model(const char *feed_forward, bool tied, bool give_decoder_inputs) {
    brg_model *m = tiny_t5(feed_forward, tied, 5);
    if (!m) return;
    CHECK(m->n_params <= MAX_PARAMS && m->n_blocks == 6);
    data d;
    make_data(&d, give_decoder_inputs);
    int one[6] = {0}, two[6], four[6], cut_in_encoder[6] = {0, 0, 1, 1, 1, 1};
    even_split(m, 2, two);
    even_split(m, 4, four);
    CHECK(two[2] == 0 && two[3] == 1 && four[2] == 1 && four[3] == 2 && four[5] == 3);
    result single;
    run(m, &d, &(layout){1, 1, 1, one, BRG_SCHEDULE_1F1B, .what = "one device"}, &single);
    CHECK(single.loss > 1.0);
    printf("%s %s: single-device loss %.6f\n", feed_forward, tied ? "tied" : "untied", single.loss);
    /* Recomputation includes decoder.block.0, which turns the encoder's output into
     * encoder_hidden and starts a new hidden of the decoder's length. */
    const layout others[] = {
        {1, 2, 2, two, BRG_SCHEDULE_1F1B, .what = "2 stages (encoder | decoder), 1F1B"},
        {1, 2, 2, cut_in_encoder, BRG_SCHEDULE_GPIPE, .what = "2 stages cut inside the encoder, GPipe"},
        {1, 4, 4, four, BRG_SCHEDULE_1F1B, .what = "4 stages, 1F1B"},
        {2, 1, 1, one, BRG_SCHEDULE_1F1B, .what = "2 replicas"},
        {2, 2, 2, two, BRG_SCHEDULE_1F1B, .what = "2 replicas x 2 stages"},
        {1, 2, 2, two, BRG_SCHEDULE_1F1B, .recompute = true, .what = "2 stages with recomputation"},
        {1, 1, 2, one, BRG_SCHEDULE_1F1B, .recompute = true, .what = "one device with recomputation"},
    };
    char name[64];
    snprintf(name, sizeof name, "%s %s", feed_forward, tied ? "tied" : "untied");
    check_layouts_against(m, &d, run, &single, others, (int)(sizeof others / sizeof others[0]), name);
    free_result(m, &single);
    brg_model_destroy(m);
}

int main(void) {
    check_model("relu", true, false);
    check_model("gated-gelu", false, true);
    return test_finish();
}
