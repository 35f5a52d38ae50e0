/* T5 beyond parity: config.json as transformers 5 reads it (defaults, feed_forward_proj, the
 * tie/scale pair), the head's tie decided from the checkpoint, the block layout, bad inputs, and
 * dropout in training. */
#include "brigade/rng.h"
#include "brigade/t5.h"
#include "test_util.h"

static const char *write_config(const char *name, const char *json) {
    static char path[1024];
    char dir[900];
    snprintf(dir, sizeof dir, "%s/t5_model_%s", test_tmp_dir(), name);
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(json, f);
        fclose(f);
    }
    return path;
}

static void test_config(void) {
    brg_t5_config c;
    CHECK_OK(brg_t5_config_load(write_config("defaults", "{\"architectures\": [\"T5ForConditionalGeneration\"]}"), &c));
    CHECK(c.d_model == 512 && c.num_layers == 6 && c.num_decoder_layers == 6 && c.act == BRG_T5_ACT_RELU &&
          !c.is_gated_act && c.tie_word_embeddings && c.scale_decoder_outputs && c.pad_token_id == 0 &&
          c.decoder_start_token_id == -1 && c.n_eos == 1 && c.eos_token_ids[0] == 1 && c.n_positions == 512);
    /* The hub's T5 v1.1 configs: gated-gelu means gelu_new; tie false means no rescale. */
    CHECK_OK(brg_t5_config_load(write_config("v11", "{\"feed_forward_proj\": \"gated-gelu\", \"num_layers\": 8,"
                                                    " \"num_decoder_layers\": null, \"tie_word_embeddings\": false,"
                                                    " \"eos_token_id\": [1, 2], \"n_positions\": 256}"), &c));
    CHECK(c.is_gated_act && c.act == BRG_T5_ACT_GELU_TANH && strcmp(c.dense_act_fn, "gelu_new") == 0 &&
          c.num_decoder_layers == 8 && !c.scale_decoder_outputs && c.eos_is_list && c.n_eos == 2 && c.n_positions == 256);
    /* transformers 5 writes scale_decoder_outputs, which wins; explicit dense_act_fn wins too. */
    CHECK_OK(brg_t5_config_load(write_config("v5", "{\"feed_forward_proj\": \"gated-gelu\", \"dense_act_fn\": \"gelu\","
                                                   " \"tie_word_embeddings\": true,"
                                                   " \"scale_decoder_outputs\": false}"), &c));
    CHECK(c.act == BRG_T5_ACT_GELU_ERF && !c.scale_decoder_outputs && c.tie_word_embeddings);
    CHECK_ERR(brg_t5_config_load(write_config("bad_ff", "{\"feed_forward_proj\": \"gelu-gated\"}"), &c),
              BRG_ERR_INVALID_ARG, "feed_forward_proj 'gelu-gated'");
    CHECK_ERR(brg_t5_config_load(write_config("silu", "{\"feed_forward_proj\": \"gated-silu\"}"), &c),
              BRG_ERR_UNSUPPORTED, "'silu'");
    CHECK_ERR(brg_t5_config_load(write_config("buckets", "{\"relative_attention_num_buckets\": 32,"
                                                         " \"relative_attention_max_distance\": 16}"), &c),
              BRG_ERR_INVALID_ARG, "relative_attention_max_distance (16)");
    CHECK_ERR(brg_t5_config_load(write_config("decoder", "{\"is_decoder\": true}"), &c), BRG_ERR_UNSUPPORTED,
              "is_decoder");
    CHECK_ERR(brg_t5_config_load(write_config("type", "{\"d_model\": \"big\"}"), &c), BRG_ERR_FORMAT, "d_model");
}

static brg_model *small(bool tied, float dropout) {
    brg_t5_config c;
    brg_t5_config_default(&c);
    c.vocab_size = 23, c.d_model = 8, c.d_kv = 3, c.num_heads = 2, c.d_ff = 12;
    c.num_layers = 3, c.num_decoder_layers = 2;
    c.relative_attention_num_buckets = 6, c.relative_attention_max_distance = 10;
    c.dropout_rate = dropout, c.decoder_start_token_id = 0;
    c.tie_word_embeddings = c.scale_decoder_outputs = tied;
    brg_model *m = NULL;
    CHECK_OK(brg_t5_create(&c, &m));
    if (m) brg_model_init_weights(m, 17);
    return m;
}

static void test_layout(void) {
    brg_model *m = small(true, 0);
    if (!m) return;
    const char *names[] = {"encoder.embeddings", "encoder.block.0", "encoder.block.1", "encoder.block.2",
                           "decoder.block.0", "decoder.block.1", "head"};
    CHECK(m->n_blocks == 7);
    for (int b = 0; b < 7 && b < m->n_blocks; b++) {
        CHECK_MSG(strcmp(m->blocks[b].name, names[b]) == 0, "block %d is %s", b, m->blocks[b].name);
        CHECK(m->blocks[b].layer == (b >= 1 && b <= 5 ? b - 1 : -1));
    }
    CHECK(brg_t5_first_decoder_block(m) == 4);
    /* Later layers read their stack's bias; decoder.block.0 and the head read the embedding. */
    int enc_bias = brg_model_find_param(m, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    int dec_bias = brg_model_find_param(m, "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    int shared = brg_model_find_param(m, "shared.weight");
    CHECK(enc_bias >= 0 && dec_bias >= 0 && shared >= 0);
    CHECK(brg_model_block_uses(m, 3, enc_bias) && !brg_model_block_uses(m, 3, dec_bias));
    CHECK(brg_model_block_uses(m, 5, dec_bias) && brg_model_block_uses(m, 4, shared) &&
          brg_model_block_uses(m, 6, shared));
    CHECK(brg_model_find_param(m, "lm_head.weight") == shared);
    CHECK(m->params[brg_model_find_param(m, "encoder.final_layer_norm.weight")].block == 3);
    CHECK(m->params[brg_model_find_param(m, "decoder.final_layer_norm.weight")].block == 6);
    brg_model_destroy(m);
}

typedef struct batch {
    int32_t ids[2 * 5], labels[2 * 4];
    brg_tensor tids, tlabels;
} batch;

static void make_batch(batch *bt, brg_bundle *b) {
    for (int i = 0; i < 10; i++) bt->ids[i] = 1 + (i * 7) % 22;
    for (int i = 0; i < 8; i++) bt->labels[i] = i == 5 ? -100 : (i * 5) % 23;
    bt->tids = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){2, 5}, bt->ids);
    bt->tlabels = brg_tensor_wrap(BRG_DTYPE_I32, 2, (int64_t[]){2, 4}, bt->labels);
    memset(b, 0, sizeof *b);
    TEST_PUT(&b->inputs, "input_ids", &bt->tids);
    TEST_PUT(&b->inputs, "labels", &bt->tlabels);
}

static brg_status forward(brg_model *m, brg_bundle *b, bool training, uint64_t seed, float *loss) {
    brg_arena *a;
    BRG_TRY(brg_arena_create("t5 test", 0, &a));
    brg_tape *tape;
    brg_status st = brg_tape_create(a, &tape);
    if (st == BRG_OK) {
        b->training = training;
        b->seed = seed;
        brg_model_zero_grad(m);
        st = brg_model_forward(m, tape, b);
        if (st == BRG_OK && b->loss) {
            *loss = ((float *)b->loss->data)[0];
            st = brg_tape_backward(tape, b->loss);
        }
        brg_tape_destroy(tape);
    }
    memset(&b->carried, 0, sizeof b->carried); /* hidden, encoder_hidden */
    b->logits = b->loss = NULL;
    brg_arena_destroy(a);
    return st;
}

static void test_inputs(void) {
    brg_model *m = small(true, 0);
    if (!m) return;
    batch bt;
    brg_bundle b;
    float loss;
    make_batch(&bt, &b);
    CHECK_OK(forward(m, &b, false, 0, &loss));
    TEST_PUT(&b.inputs, "labels", NULL);
    CHECK_ERR(forward(m, &b, false, 0, &loss), BRG_ERR_INVALID_ARG, "decoder_input_ids or labels");
    make_batch(&bt, &b);
    bt.labels[2] = 23;
    CHECK_ERR(forward(m, &b, false, 0, &loss), BRG_ERR_INVALID_ARG, "labels[0][2] = 23");
    make_batch(&bt, &b);
    brg_t5_config *c = m->config;
    c->decoder_start_token_id = -1;
    CHECK_ERR(forward(m, &b, false, 0, &loss), BRG_ERR_INVALID_ARG, "decoder_start_token_id");
    c->decoder_start_token_id = 0;
    float mask[6] = {1, 1, 1, 1, 1, 1};
    brg_tensor wrong = brg_tensor_wrap(BRG_DTYPE_F32, 2, (int64_t[]){2, 3}, mask);
    TEST_PUT(&b.inputs, "attention_mask", &wrong);
    CHECK_ERR(forward(m, &b, false, 0, &loss), BRG_ERR_INVALID_ARG, "attention_mask must be F32 [2, 5]");
    brg_model_destroy(m);
}

/* Dropout (on embeddings, residual branches, the feed-forward and the attention probabilities)
 * is keyed by the micro-batch seed: the same seed gives the same loss, another seed another. */
static void test_dropout(void) {
    brg_model *m = small(false, 0.3f);
    if (!m) return;
    batch bt;
    brg_bundle b;
    float eval = 0, l1 = 0, l2 = 0, l3 = 0;
    make_batch(&bt, &b);
    CHECK_OK(forward(m, &b, false, 1, &eval));
    CHECK_OK(forward(m, &b, true, 1, &l1));
    CHECK_OK(forward(m, &b, true, 1, &l2));
    CHECK_OK(forward(m, &b, true, 2, &l3));
    CHECK(l1 == l2 && l1 != l3 && l1 != eval && isfinite(l1));
    brg_model_destroy(m);
}

/* A checkpoint whose lm_head.weight equals shared.weight is tied, as transformers ties it; one
 * whose values differ keeps a separate head. Keys brigade does not read survive a save. */
static void test_tie_from_checkpoint(void) {
    brg_model *m = small(false, 0);
    if (!m) return;
    int head = brg_model_find_param(m, "lm_head.weight"), shared = brg_model_find_param(m, "shared.weight");
    CHECK(head != shared);
    char dir[900];
    snprintf(dir, sizeof dir, "%s/t5_model_tie", test_tmp_dir());
    CHECK_OK(brg_model_save(m, dir));
    brg_model *again = NULL;
    CHECK_OK(brg_t5_load_dir(dir, &again));
    if (again) CHECK(brg_model_find_param(again, "lm_head.weight") != brg_model_find_param(again, "shared.weight"));
    brg_model_destroy(again);
    memcpy(m->params[head].tensor->data, m->params[shared].tensor->data, brg_tensor_nbytes(m->params[shared].tensor));
    CHECK_OK(brg_model_save(m, dir));
    again = NULL;
    CHECK_OK(brg_t5_load_dir(dir, &again));
    if (again) {
        CHECK(brg_model_find_param(again, "lm_head.weight") == brg_model_find_param(again, "shared.weight"));
        CHECK(!((brg_t5_config *)again->config)->scale_decoder_outputs);
    }
    brg_model_destroy(again);
    brg_model_destroy(m);

    char cfg[1200];
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    FILE *f = fopen(cfg, "r");
    char text[8192] = {0};
    if (f) {
        size_t n = fread(text, 1, sizeof text - 1, f);
        text[n] = '\0';
        fclose(f);
    }
    char *close = strrchr(text, '}');
    if (close) snprintf(close, sizeof text - (size_t)(close - text), ", \"task_specific_params\": {\"x\": 1}}");
    write_config("tie", text);
    again = NULL;
    CHECK_OK(brg_t5_load_dir(dir, &again));
    if (again) CHECK_OK(brg_model_save(again, dir));
    brg_model_destroy(again);
    f = fopen(cfg, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK_MSG(strstr(text, "task_specific_params") != NULL, "config.json lost a key on save: %s", text);
}

/* Planning: each block's cost, and what it reads from blocks that own it. */
static void test_costs(void) {
    brg_model *m = small(true, 0);
    if (!m) return;
    brg_block_cost cost[7];
    CHECK(m->n_blocks == 7);
    CHECK_OK(brg_model_block_costs(m, 2, 5, cost));
    for (int b = 0; b < m->n_blocks && b < 7; b++)
        CHECK(cost[b].flops >= 0 && cost[b].saved_bytes > 0 && cost[b].grad_bytes > 0 &&
              (b == 0) == (cost[b].input_bytes == 0) && cost[b].layer == m->blocks[b].layer);
    int64_t table = 6 * 2, shared = 23 * 8;
    CHECK(cost[0].tied_params == 0 && cost[1].tied_params == 0);
    CHECK(cost[2].tied_params == table && cost[2].tied_owner == 1);
    CHECK(cost[4].tied_params == shared && cost[4].tied_owner == 0);
    CHECK(cost[5].tied_params == table && cost[5].tied_owner == 4);
    CHECK(cost[6].tied_params == shared && cost[6].tied_owner == 0);
    /* the first decoder layer receives the encoder output, the others the decoder's hidden states too */
    CHECK(cost[4].flops > cost[3].flops && cost[4].input_bytes == cost[3].input_bytes &&
          cost[5].input_bytes == 2 * cost[3].input_bytes);
    CHECK(cost[6].input_grad_bytes * 2 < cost[6].input_bytes); /* the head does not use the encoder output */
    CHECK_ERR(brg_t5_block_cost(m, 7, 2, 5, &cost[0]), BRG_ERR_INVALID_ARG, "no block 7");
    brg_model_destroy(m);

    const char *path = write_config("plan", "{\"d_model\": 8, \"d_kv\": 2, \"num_heads\": 2, \"d_ff\": 4, "
                                            "\"num_layers\": 1, \"vocab_size\": 10, \"tie_word_embeddings\": false}");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    m = NULL;
    CHECK_OK(brg_t5_create_dir(dir, &m));
    if (m) {
        CHECK(m->n_blocks == 4);
        CHECK(brg_model_find_param(m, "lm_head.weight") != brg_model_find_param(m, "shared.weight"));
    }
    brg_model_destroy(m);
}

int main(void) {
    test_costs();
    test_config();
    test_layout();
    test_inputs();
    test_dropout();
    test_tie_from_checkpoint();
    return test_finish();
}
