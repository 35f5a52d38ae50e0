/* GPT-2 as transformers' GPT2LMHeadModel: pre-LN blocks, Conv1D weights in [in, out] layout,
 * learned positions, LM head tied to wte unless tie_word_embeddings is false. */
#include "brigade/gpt2.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "models/encoder_common.h"
#include "models/model_internal.h"
#include "models/gpt2_internal.h"

/* In brg_gpt2_task order. */
static const char *const architectures[] = {"GPT2LMHeadModel", "GPT2Model", "GPT2ForSequenceClassification",
                                            "GPT2ForTokenClassification"};
enum { N_TASKS = sizeof architectures / sizeof architectures[0] };

const char *brg_gpt2_architecture(brg_gpt2_task task) {
    return (unsigned)task < N_TASKS ? architectures[task] : "?";
}

void brg_gpt2_config_default(brg_gpt2_config *c) {
    memset(c, 0, sizeof *c);
    c->n_layer = 12;
    c->n_head = 12;
    c->n_embd = 768;
    c->n_positions = 1024;
    c->vocab_size = 50257;
    c->n_inner = 0;
    c->layer_norm_epsilon = 1e-5f;
    c->activation = BRG_ACT_GELU_TANH;
    snprintf(c->activation_name, sizeof c->activation_name, "gelu_new");
    c->embd_pdrop = c->attn_pdrop = c->resid_pdrop = 0.1f;
    c->initializer_range = 0.02f;
    c->tie_word_embeddings = true;
    c->scale_attn_weights = true;
    c->scale_attn_by_inverse_layer_idx = false;
    c->bos_token_id = c->eos_token_id = 50256;
    c->task = BRG_GPT2_LM_HEAD;
    c->pad_token_id = -1;
    c->num_labels = 2;
    c->problem_type = BRG_PROBLEM_AUTO;
    c->classifier_dropout = -1.0f;
}

static brg_status parse_task(const cJSON *j, const char *ctx, brg_gpt2_task *task) {
    int t;
    BRG_TRY(model_parse_architecture(j, ctx, architectures, N_TASKS, &t));
    *task = (brg_gpt2_task)t;
    return BRG_OK;
}

static brg_status parse_optional_int(const cJSON *j, const char *ctx, const char *key, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (v && !cJSON_IsNull(v)) BRG_TRY(brg_json_get_int(j, ctx, key, true, 0, out));
    return BRG_OK;
}

static brg_status parse_activation(const char *name, const char *ctx, brg_gpt2_config *c) {
    if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_fast") == 0)
        c->activation = BRG_ACT_GELU_TANH;
    else if (strcmp(name, "gelu") == 0)
        c->activation = BRG_ACT_GELU_ERF;
    else
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: activation_function '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)",
                         ctx, name);
    snprintf(c->activation_name, sizeof c->activation_name, "%s", name);
    return BRG_OK;
}

static brg_status parse_config(const cJSON *j, const char *ctx, brg_gpt2_config *c) {
    brg_gpt2_config_default(c);
    BRG_TRY(parse_task(j, ctx, &c->task));
    BRG_TRY(parse_optional_int(j, ctx, "pad_token_id", &c->pad_token_id));
    BRG_TRY(brg_json_get_float(j, ctx, "classifier_dropout", false, -1.0f, &c->classifier_dropout));
    BRG_TRY(enc_read_labels(j, ctx, &c->num_labels, &c->problem_type));
    BRG_TRY(brg_json_get_int(j, ctx, "n_layer", true, 0, &c->n_layer));
    BRG_TRY(brg_json_get_int(j, ctx, "n_head", true, 0, &c->n_head));
    BRG_TRY(brg_json_get_int(j, ctx, "n_embd", true, 0, &c->n_embd));
    BRG_TRY(brg_json_get_int(j, ctx, "n_positions", true, 0, &c->n_positions));
    BRG_TRY(brg_json_get_int(j, ctx, "vocab_size", true, 0, &c->vocab_size));
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(j, "n_inner");
    if (inner && !cJSON_IsNull(inner)) BRG_TRY(brg_json_get_int(j, ctx, "n_inner", true, 0, &c->n_inner));
    BRG_TRY(brg_json_get_float(j, ctx, "layer_norm_epsilon", false, 1e-5f, &c->layer_norm_epsilon));
    BRG_TRY(brg_json_get_float(j, ctx, "embd_pdrop", false, 0.1f, &c->embd_pdrop));
    BRG_TRY(brg_json_get_float(j, ctx, "attn_pdrop", false, 0.1f, &c->attn_pdrop));
    BRG_TRY(brg_json_get_float(j, ctx, "resid_pdrop", false, 0.1f, &c->resid_pdrop));
    BRG_TRY(brg_json_get_float(j, ctx, "initializer_range", false, 0.02f, &c->initializer_range));
    BRG_TRY(brg_json_get_bool(j, ctx, "tie_word_embeddings", false, true, &c->tie_word_embeddings));
    BRG_TRY(brg_json_get_bool(j, ctx, "scale_attn_weights", false, true, &c->scale_attn_weights));
    BRG_TRY(brg_json_get_bool(j, ctx, "scale_attn_by_inverse_layer_idx", false, false,
                              &c->scale_attn_by_inverse_layer_idx));
    bool cross = false;
    BRG_TRY(brg_json_get_bool(j, ctx, "add_cross_attention", false, false, &cross));
    if (cross) return brg_error(BRG_ERR_UNSUPPORTED, "%s: add_cross_attention is not supported", ctx);
    BRG_TRY(parse_optional_int(j, ctx, "bos_token_id", &c->bos_token_id));
    BRG_TRY(parse_optional_int(j, ctx, "eos_token_id", &c->eos_token_id));
    const char *act = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "activation_function", false, "gelu_new", &act));
    BRG_TRY(parse_activation(act, ctx, c));
    return brg_gpt2_config_validate(c);
}

brg_status brg_gpt2_config_validate(const brg_gpt2_config *c) {
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->n_positions < 1 || c->vocab_size < 1)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "GPT-2 config: n_layer, n_head, n_embd, n_positions and vocab_size must be positive "
                         "(got %lld, %lld, %lld, %lld, %lld)",
                         (long long)c->n_layer, (long long)c->n_head, (long long)c->n_embd,
                         (long long)c->n_positions, (long long)c->vocab_size);
    if (c->n_embd % c->n_head != 0)
        return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: n_embd (%lld) must be divisible by n_head (%lld)",
                         (long long)c->n_embd, (long long)c->n_head);
    if (c->vocab_size > INT32_MAX || c->n_inner < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: vocab_size or n_inner out of range");
    if (!(c->layer_norm_epsilon > 0)) return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: layer_norm_epsilon must be > 0");
    if ((unsigned)c->task >= N_TASKS) return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: unknown task %d", (int)c->task);
    if (c->num_labels < 1 || c->num_labels > INT32_MAX || c->pad_token_id >= c->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: num_labels (%lld) or pad_token_id (%lld) out of range",
                         (long long)c->num_labels, (long long)c->pad_token_id);
    if (!(c->classifier_dropout < 1)) return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: classifier_dropout must be < 1");
    float p[3] = {c->embd_pdrop, c->attn_pdrop, c->resid_pdrop};
    for (int i = 0; i < 3; i++)
        if (!(p[i] >= 0 && p[i] < 1)) return brg_error(BRG_ERR_INVALID_ARG, "GPT-2 config: dropout %g not in [0, 1)", p[i]);
    return BRG_OK;
}

brg_status brg_gpt2_config_load(const char *path, brg_gpt2_config *cfg) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, 16u << 20, &j));
    brg_status st = parse_config(j, "config.json", cfg);
    cJSON_Delete(j);
    return st;
}

/* The config and config.json's label names, kept to write them back. */
static brg_status load_model_config(const char *path, gpt2_model_config **out) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, 16u << 20, &j));
    gpt2_model_config *mc = calloc(1, sizeof *mc);
    brg_status st = mc ? parse_config(j, path, &mc->c) : brg_error(BRG_ERR_OOM, "cannot allocate the GPT-2 config");
    if (st == BRG_OK) mc->id2label = enc_copy_id2label(j);
    cJSON_Delete(j);
    if (st != BRG_OK) free(mc);
    else *out = mc;
    return st;
}

/* ---- forward ---- */

static const brg_gpt2_config *cfg_of(const brg_model *m) { return m->config; }

static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }
static brg_tensor *LP(brg_model *m, int layer, int which) { return P(m, 2 + layer * PER_LAYER + which); }

/* Each dropout site gets its own key range so masks never repeat within a micro-batch. */
static uint64_t dropout_offset(int block, int site) { return ((uint64_t)block * 8 + (uint64_t)site) << 40; }

static brg_status embeddings_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const brg_gpt2_config *c = cfg_of(m);
    brg_tensor *ids = brg_bundle_input(b, "input_ids");
    if (!ids || ids->ndim != 2) return brg_error(BRG_ERR_INVALID_ARG, "input_ids must be [batch, sequence]");
    int64_t B = ids->shape[0], T = ids->shape[1];
    if (T > c->n_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "sequence length %lld exceeds n_positions %lld", (long long)T,
                         (long long)c->n_positions);
    brg_tensor *tok, *pos_ids, *pos, *x, *hidden;
    BRG_TRY(brg_embedding(tape, ids, P(m, P_WTE), &tok));
    int64_t pshape[2] = {B, T};
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 2, pshape, false, "position ids", &pos_ids));
    int32_t *pid = pos_ids->data;
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 0; t < T; t++) pid[i * T + t] = (int32_t)t;
    BRG_TRY(brg_embedding(tape, pos_ids, P(m, P_WPE), &pos));
    /* each of these is read by the next op alone, and no backward reads their data: the sum goes
     * over the position embeddings' buffer, the dropout over the sum's */
    brg_tape_donate(tape, pos);
    BRG_TRY(brg_add(tape, tok, pos, &x));
    brg_tape_donate(tape, x);
    BRG_TRY(brg_dropout(tape, x, c->embd_pdrop, b->training, b->seed, dropout_offset(0, 0), &hidden));
    brg_tape_donate(tape, NULL); /* without dropout the sum itself goes on, and every layer reads it */
    return brg_bundle_carry(b, "hidden", hidden);
}

static brg_status attention_forward(brg_model *m, int layer, brg_tape *tape, brg_bundle *b, brg_tensor *x,
                                    brg_tensor **out) {
    const brg_gpt2_config *c = cfg_of(m);
    int64_t C = c->n_embd, H = c->n_head, D = C / H;
    int block = layer + 1;
    brg_tensor *qkv, *q, *k, *v, *att, *merged, *proj;
    BRG_TRY(brg_linear(tape, x, LP(m, layer, L_ATTN_W), LP(m, layer, L_ATTN_B), true, &qkv));
    BRG_TRY(brg_split_heads(tape, qkv, 0, H, D, &q));
    BRG_TRY(brg_split_heads(tape, qkv, C, H, D, &k));
    BRG_TRY(brg_split_heads(tape, qkv, 2 * C, H, D, &v));
    float scale = c->scale_attn_weights ? 1.0f / sqrtf((float)D) : 1.0f;
    if (c->scale_attn_by_inverse_layer_idx) scale /= (float)(layer + 1);
    brg_attention_opts opts = {.scale = scale, .causal = true, .key_mask = brg_bundle_input(b, "attention_mask"),
                               .dropout = b->training ? c->attn_pdrop : 0.0f, .seed = b->seed,
                               .offset = dropout_offset(block, 0)};
    BRG_TRY(brg_attention(tape, q, k, v, &opts, &att));
    BRG_TRY(brg_merge_heads(tape, att, &merged));
    BRG_TRY(brg_linear(tape, merged, LP(m, layer, L_APROJ_W), LP(m, layer, L_APROJ_B), true, &proj));
    brg_tape_donate(tape, proj); /* only the dropout reads it */
    return brg_dropout(tape, proj, c->resid_pdrop, b->training, b->seed, dropout_offset(block, 1), out);
}

static brg_status mlp_forward(brg_model *m, int layer, brg_tape *tape, brg_bundle *b, brg_tensor *x,
                              brg_tensor **out) {
    const brg_gpt2_config *c = cfg_of(m);
    brg_tensor *a, *proj;
    BRG_TRY(brg_linear_act(tape, x, LP(m, layer, L_FC_W), LP(m, layer, L_FC_B), true, c->activation, &a));
    BRG_TRY(brg_linear(tape, a, LP(m, layer, L_MPROJ_W), LP(m, layer, L_MPROJ_B), true, &proj));
    brg_tape_donate(tape, proj); /* only the dropout reads it */
    return brg_dropout(tape, proj, c->resid_pdrop, b->training, b->seed, dropout_offset(layer + 1, 2), out);
}

static brg_status layer_forward(brg_model *m, int layer, brg_tape *tape, brg_bundle *b) {
    float eps = cfg_of(m)->layer_norm_epsilon;
    brg_tensor *x = brg_bundle_carried(b, "hidden"), *n1, *att, *r1, *n2, *mlp, *out;
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach layer %d", layer);
    BRG_TRY(brg_layer_norm(tape, x, LP(m, layer, L_LN1_W), LP(m, layer, L_LN1_B), eps, &n1));
    BRG_TRY(attention_forward(m, layer, tape, b, n1, &att));
    /* the branches' outputs (a dropout's, or a projection's) are read by the residual sums alone,
     * and no backward reads their data: each sum goes over its branch's buffer */
    brg_tape_donate(tape, att);
    BRG_TRY(brg_add(tape, x, att, &r1));
    BRG_TRY(brg_layer_norm(tape, r1, LP(m, layer, L_LN2_W), LP(m, layer, L_LN2_B), eps, &n2));
    BRG_TRY(mlp_forward(m, layer, tape, b, n2, &mlp));
    brg_tape_donate(tape, mlp);
    BRG_TRY(brg_add(tape, r1, mlp, &out));
    return brg_bundle_carry(b, "hidden", out);
}

/* transformers shifts labels left by one (position t predicts token t+1); padding the last
 * position with -100 keeps a [B, T] target grid and the same mean. */
static brg_status shifted_targets(brg_tape *tape, const brg_tensor *labels, brg_tensor **out) {
    int64_t B = labels->shape[0], T = labels->shape[1];
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_I32, 2, labels->shape, false, "shifted labels", out));
    const int32_t *l = labels->data;
    int32_t *s = (*out)->data;
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 0; t < T; t++) s[i * T + t] = t + 1 < T ? l[i * T + t + 1] : -100;
    return BRG_OK;
}

static brg_status head_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const brg_gpt2_config *c = cfg_of(m);
    int ln_f = 2 + (int)c->n_layer * PER_LAYER;
    brg_tensor *x = brg_bundle_carried(b, "hidden"), *n, *labels = brg_bundle_input(b, "labels");
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach the head");
    b->loss = NULL;
    BRG_TRY(brg_layer_norm(tape, x, P(m, ln_f), P(m, ln_f + 1), c->layer_norm_epsilon, &n));
    if (c->task != BRG_GPT2_LM_HEAD) return gpt2_task_head(m, tape, b, n, ln_f + 2);
    brg_tensor *head_w = c->tie_word_embeddings ? P(m, P_WTE) : P(m, ln_f + 2);
    BRG_TRY(brg_linear(tape, n, head_w, NULL, false, &b->logits));
    if (!labels) return BRG_OK;
    if (!brg_tensor_same_shape(labels, brg_bundle_input(b, "input_ids")))
        return brg_error(BRG_ERR_INVALID_ARG, "labels must have the shape of input_ids");
    brg_tensor *targets;
    BRG_TRY(shifted_targets(tape, labels, &targets));
    brg_tape_donate(tape, b->logits); /* the linear's backward reads no logits: the loss may spend them */
    return brg_cross_entropy_share(tape, b->logits, targets, -100, b->loss_denominator, &b->loss);
}

static brg_status gpt2_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const brg_block *blk = &m->blocks[block];
    switch (blk->kind) {
    case BRG_BLOCK_EMBEDDINGS: return embeddings_forward(m, tape, b);
    case BRG_BLOCK_LAYER: return layer_forward(m, blk->layer, tape, b);
    case BRG_BLOCK_HEAD: return head_forward(m, tape, b);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown block kind");
}

/* ---- config.json ---- */

static brg_status gpt2_save_config(const brg_model *m, const char *dir) {
    const brg_gpt2_config *c = cfg_of(m);
    cJSON *j = cJSON_CreateObject();
    if (!j) return brg_error(BRG_ERR_OOM, "cannot build config.json");
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(brg_gpt2_architecture(c->task)));
    cJSON_AddStringToObject(j, "model_type", "gpt2");
    cJSON_AddStringToObject(j, "activation_function", c->activation_name);
    cJSON_AddNumberToObject(j, "attn_pdrop", c->attn_pdrop);
    cJSON_AddNumberToObject(j, "bos_token_id", (double)c->bos_token_id);
    cJSON_AddNumberToObject(j, "embd_pdrop", c->embd_pdrop);
    cJSON_AddNumberToObject(j, "eos_token_id", (double)c->eos_token_id);
    cJSON_AddNumberToObject(j, "initializer_range", c->initializer_range);
    cJSON_AddNumberToObject(j, "layer_norm_epsilon", c->layer_norm_epsilon);
    cJSON_AddNumberToObject(j, "n_embd", (double)c->n_embd);
    cJSON_AddNumberToObject(j, "n_head", (double)c->n_head);
    if (c->n_inner) cJSON_AddNumberToObject(j, "n_inner", (double)c->n_inner);
    else cJSON_AddNullToObject(j, "n_inner");
    cJSON_AddNumberToObject(j, "n_layer", (double)c->n_layer);
    cJSON_AddNumberToObject(j, "n_positions", (double)c->n_positions);
    cJSON_AddNumberToObject(j, "resid_pdrop", c->resid_pdrop);
    cJSON_AddBoolToObject(j, "scale_attn_by_inverse_layer_idx", c->scale_attn_by_inverse_layer_idx);
    cJSON_AddBoolToObject(j, "scale_attn_weights", c->scale_attn_weights);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
    if (c->pad_token_id >= 0) cJSON_AddNumberToObject(j, "pad_token_id", (double)c->pad_token_id);
    if (c->classifier_dropout >= 0) enc_add_float(j, "classifier_dropout", c->classifier_dropout);
    if (c->task == BRG_GPT2_SEQUENCE_CLASSIFICATION || c->task == BRG_GPT2_TOKEN_CLASSIFICATION)
        enc_write_labels(j, ((const gpt2_model_config *)m->config)->id2label, c->num_labels, c->problem_type);
    return brg_json_write_config(j, dir);
}

/* Position t predicts label t + 1, so the first label of each row never counts. */
static brg_loss_items gpt2_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    if (cfg_of(m)->task != BRG_GPT2_LM_HEAD) return gpt2_task_count_loss_items(m, batch);
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    int64_t B = labels->shape[0], T = labels->shape[1], n = 0;
    const int32_t *l = labels->data;
    for (int64_t i = 0; i < B; i++)
        for (int64_t t = 1; t < T; t++) n += l[i * T + t] != -100;
    return (brg_loss_items){(double)n, 0};
}

static void gpt2_free_config(void *config) {
    gpt2_model_config *mc = config;
    if (!mc) return;
    cJSON_Delete(mc->id2label);
    free(mc);
}

static const brg_input_decl gpt2_inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL}, /* the end */
};
static const brg_input_decl gpt2_base_inputs[] = {
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},
    {.name = NULL}, /* the end */
};

#define GPT2_OPS(arch, in, ...)                                                                                   \
    {.architecture = arch, .forward_block = gpt2_forward_block, .save_config = gpt2_save_config,                 \
     .free_config = gpt2_free_config, .count_loss_items = gpt2_count_loss_items, .inputs = in, __VA_ARGS__}

/* In brg_gpt2_task order. */
static const brg_model_ops gpt2_ops[] = {
    GPT2_OPS("GPT2LMHeadModel", gpt2_inputs, .labels_from_inputs = true, .token_loss = true),
    GPT2_OPS("GPT2Model", gpt2_base_inputs, .outputs = gpt2_base_outputs),
    GPT2_OPS("GPT2ForSequenceClassification", gpt2_inputs, .labels_from_inputs = false),
    GPT2_OPS("GPT2ForTokenClassification", gpt2_inputs, .labels_from_inputs = false),
};
_Static_assert(sizeof gpt2_ops / sizeof gpt2_ops[0] == N_TASKS, "one ops entry per task");

/* ---- construction ---- */

static brg_status add_layer_params(brg_model *m, const brg_gpt2_config *c, const char *base, int l) {
    int64_t C = c->n_embd, I = c->n_inner ? c->n_inner : 4 * C;
    float std = c->initializer_range;
    /* transformers scales the residual projections by 1/sqrt(2 * n_layer) (GPT-2 paper). */
    float proj_std = std / sqrtf(2.0f * (float)c->n_layer);
    char n[BRG_NAME_MAX];
    int64_t sC[1] = {C}, s3C[1] = {3 * C}, sI[1] = {I};
    int64_t sCC3[2] = {C, 3 * C}, sCC[2] = {C, C}, sCI[2] = {C, I}, sIC[2] = {I, C};
#define ADD(suffix, nd, shape, init, sd, nodecay)                                                 \
    snprintf(n, sizeof n, "%sh.%d.%s", base, l, suffix);                                          \
    BRG_TRY(brg_model_add_param(m, n, nd, shape, init, sd, nodecay, NULL))
    ADD("ln_1.weight", 1, sC, BRG_INIT_ONES, 0, true);
    ADD("ln_1.bias", 1, sC, BRG_INIT_ZEROS, 0, true);
    ADD("attn.c_attn.weight", 2, sCC3, BRG_INIT_NORMAL, std, false);
    ADD("attn.c_attn.bias", 1, s3C, BRG_INIT_ZEROS, 0, true);
    ADD("attn.c_proj.weight", 2, sCC, BRG_INIT_NORMAL, proj_std, false);
    ADD("attn.c_proj.bias", 1, sC, BRG_INIT_ZEROS, 0, true);
    ADD("ln_2.weight", 1, sC, BRG_INIT_ONES, 0, true);
    ADD("ln_2.bias", 1, sC, BRG_INIT_ZEROS, 0, true);
    ADD("mlp.c_fc.weight", 2, sCI, BRG_INIT_NORMAL, std, false);
    ADD("mlp.c_fc.bias", 1, sI, BRG_INIT_ZEROS, 0, true);
    ADD("mlp.c_proj.weight", 2, sIC, BRG_INIT_NORMAL, proj_std, false);
    ADD("mlp.c_proj.bias", 1, sC, BRG_INIT_ZEROS, 0, true);
#undef ADD
    return BRG_OK;
}

static brg_status add_head_params(brg_model *m, const brg_gpt2_config *c, int wte) {
    int64_t C = c->n_embd, sVC[2] = {c->vocab_size, C}, sLC[2] = {c->num_labels, C}, sL[1] = {c->num_labels};
    float std = c->initializer_range;
    switch (c->task) {
    case BRG_GPT2_LM_HEAD:
        if (c->tie_word_embeddings) return brg_model_add_alias(m, "lm_head.weight", wte);
        return brg_model_add_param(m, "lm_head.weight", 2, sVC, BRG_INIT_NORMAL, std, false, NULL);
    case BRG_GPT2_BASE: return BRG_OK;
    case BRG_GPT2_SEQUENCE_CLASSIFICATION:
        return brg_model_add_param(m, "score.weight", 2, sLC, BRG_INIT_NORMAL, std, false, NULL);
    case BRG_GPT2_TOKEN_CLASSIFICATION:
        BRG_TRY(brg_model_add_param(m, "classifier.weight", 2, sLC, BRG_INIT_NORMAL, std, false, NULL));
        return brg_model_add_param(m, "classifier.bias", 1, sL, BRG_INIT_ZEROS, 0, true, NULL);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown GPT-2 task");
}

static brg_status build(brg_model *m, const brg_gpt2_config *c) {
    int64_t C = c->n_embd;
    int64_t sVC[2] = {c->vocab_size, C}, sPC[2] = {c->n_positions, C}, sC[1] = {C};
    float std = c->initializer_range;
    /* transformers' names: GPT2Model's have no prefix, the heads' hold it under "transformer." */
    const char *base = c->task == BRG_GPT2_BASE ? "" : "transformer.";
    char n[BRG_NAME_MAX];
    int wte;
    BRG_TRY(brg_model_add_block(m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1));
    snprintf(n, sizeof n, "%swte.weight", base);
    BRG_TRY(brg_model_add_param(m, n, 2, sVC, BRG_INIT_NORMAL, std, false, &wte));
    snprintf(n, sizeof n, "%swpe.weight", base);
    BRG_TRY(brg_model_add_param(m, n, 2, sPC, BRG_INIT_NORMAL, std, false, NULL));
    for (int l = 0; l < c->n_layer; l++) {
        char name[32];
        snprintf(name, sizeof name, "h.%d", l);
        BRG_TRY(brg_model_add_block(m, name, BRG_BLOCK_LAYER, l));
        BRG_TRY(add_layer_params(m, c, base, l));
    }
    BRG_TRY(brg_model_add_block(m, "head", BRG_BLOCK_HEAD, -1));
    snprintf(n, sizeof n, "%sln_f.weight", base);
    BRG_TRY(brg_model_add_param(m, n, 1, sC, BRG_INIT_ONES, 0, true, NULL));
    snprintf(n, sizeof n, "%sln_f.bias", base);
    BRG_TRY(brg_model_add_param(m, n, 1, sC, BRG_INIT_ZEROS, 0, true, NULL));
    return add_head_params(m, c, wte);
}

static brg_status create(gpt2_model_config *mc, brg_model **out) {
    const brg_gpt2_config *cfg = &mc->c;
    brg_status st = brg_gpt2_config_validate(cfg);
    brg_model *m = NULL;
    if (st == BRG_OK) st = brg_model_create(&gpt2_ops[cfg->task], mc, &m);
    if (st != BRG_OK) {
        gpt2_free_config(mc);
        return st;
    }
    m->vocab_size = cfg->vocab_size;
    m->max_positions = cfg->n_positions;
    st = build(m, cfg);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status brg_gpt2_create(const brg_gpt2_config *cfg, brg_model **out) {
    gpt2_model_config *mc = calloc(1, sizeof *mc);
    if (!mc) return brg_error(BRG_ERR_OOM, "cannot allocate the GPT-2 config");
    mc->c = *cfg;
    return create(mc, out);
}

brg_status gpt2_create_path(const char *config_path, brg_model **out) {
    gpt2_model_config *mc = NULL;
    BRG_TRY(load_model_config(config_path, &mc));
    return create(mc, out);
}

/* ---- loading a folder ---- */

brg_status brg_gpt2_load_dir(const char *dir, brg_model **out) {
    char path[4096];
    BRG_TRY(brg_json_config_path(dir, path, sizeof path));
    brg_model *m;
    BRG_TRY(gpt2_create_path(path, &m));
    /* Older checkpoints carry the causal-mask buffers. */
    static const char *const ignore[] = {".attn.bias", ".attn.masked_bias", NULL};
    brg_load_options o = {.base_prefix = "transformer.", .ignore_suffixes = ignore,
                          .init_missing_head = cfg_of(m)->task != BRG_GPT2_BASE,
                          .seed = 42};
    return brg_model_load_dir_pretrained(m, dir, &o, out);
}
