/* BERT: config.json, parameters named as transformers' state dict, blocks, loading a folder.
 * The forward is in bert_forward.c. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/bert.h"
#include "brigade/checkpoint.h"
#include "io/json.h"
#include "models/bert_internal.h"
#include "models/encoder_common.h"
#include "models/model_internal.h"

/* In brg_bert_task order. */
static const char *const architectures[] = {"BertForMaskedLM", "BertForSequenceClassification",
                                            "BertForQuestionAnswering", "BertModel", "BertForTokenClassification",
                                            "BertForMultipleChoice", "BertForPreTraining"};
enum { N_TASKS = sizeof architectures / sizeof architectures[0] };

const char *brg_bert_architecture(brg_bert_task task) {
    return (unsigned)task < sizeof architectures / sizeof architectures[0] ? architectures[task] : "?";
}

void brg_bert_config_default(brg_bert_config *c, brg_bert_task task) {
    memset(c, 0, sizeof *c);
    c->task = task;
    c->vocab_size = 30522;
    c->hidden_size = 768;
    c->num_hidden_layers = 12;
    c->num_attention_heads = 12;
    c->intermediate_size = 3072;
    c->max_position_embeddings = 512;
    c->type_vocab_size = 2;
    c->hidden_act = BRG_ACT_GELU_ERF;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "gelu");
    c->hidden_dropout_prob = c->attention_probs_dropout_prob = 0.1f;
    c->classifier_dropout = -1.0f;
    c->layer_norm_eps = 1e-12f;
    c->initializer_range = 0.02f;
    c->pad_token_id = 0;
    c->tie_word_embeddings = true;
    c->num_labels = 2;
    c->problem_type = BRG_PROBLEM_AUTO;
    c->add_pooling_layer = true;
}

static brg_status parse_task(const cJSON *j, const char *ctx, brg_bert_task *task) {
    int t;
    BRG_TRY(model_parse_architecture(j, ctx, architectures, N_TASKS, &t));
    *task = (brg_bert_task)t;
    return BRG_OK;
}

/* Fields that change the computation in ways brigade does not implement. */
static brg_status reject_unsupported(const cJSON *j, const char *ctx) {
    bool decoder = false, cross = false;
    BRG_TRY(brg_json_get_bool(j, ctx, "is_decoder", false, false, &decoder));
    BRG_TRY(brg_json_get_bool(j, ctx, "add_cross_attention", false, false, &cross));
    if (decoder || cross)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: is_decoder / add_cross_attention BERT is not supported", ctx);
    const char *pos = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "position_embedding_type", false, "absolute", &pos));
    if (strcmp(pos, "absolute") != 0)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: position_embedding_type '%s' is not supported (absolute)", ctx, pos);
    return BRG_OK;
}

static brg_status parse_optional_int(const cJSON *j, const char *ctx, const char *key, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (v && !cJSON_IsNull(v)) BRG_TRY(brg_json_get_int(j, ctx, key, true, 0, out));
    else *out = -1;
    return BRG_OK;
}

static brg_status parse_config(const cJSON *j, const char *ctx, brg_bert_config *c) {
    brg_bert_task task;
    BRG_TRY(parse_task(j, ctx, &task));
    brg_bert_config_default(c, task);
    BRG_TRY(reject_unsupported(j, ctx));
    BRG_TRY(brg_json_get_int(j, ctx, "vocab_size", false, c->vocab_size, &c->vocab_size));
    BRG_TRY(brg_json_get_int(j, ctx, "hidden_size", false, c->hidden_size, &c->hidden_size));
    BRG_TRY(brg_json_get_int(j, ctx, "num_hidden_layers", false, c->num_hidden_layers, &c->num_hidden_layers));
    BRG_TRY(brg_json_get_int(j, ctx, "num_attention_heads", false, c->num_attention_heads, &c->num_attention_heads));
    BRG_TRY(brg_json_get_int(j, ctx, "intermediate_size", false, c->intermediate_size, &c->intermediate_size));
    BRG_TRY(brg_json_get_int(j, ctx, "max_position_embeddings", false, c->max_position_embeddings,
                             &c->max_position_embeddings));
    BRG_TRY(brg_json_get_int(j, ctx, "type_vocab_size", false, c->type_vocab_size, &c->type_vocab_size));
    BRG_TRY(brg_json_get_float(j, ctx, "hidden_dropout_prob", false, 0.1f, &c->hidden_dropout_prob));
    BRG_TRY(brg_json_get_float(j, ctx, "attention_probs_dropout_prob", false, 0.1f, &c->attention_probs_dropout_prob));
    BRG_TRY(brg_json_get_float(j, ctx, "classifier_dropout", false, -1.0f, &c->classifier_dropout));
    BRG_TRY(brg_json_get_float(j, ctx, "layer_norm_eps", false, 1e-12f, &c->layer_norm_eps));
    BRG_TRY(brg_json_get_float(j, ctx, "initializer_range", false, 0.02f, &c->initializer_range));
    BRG_TRY(parse_optional_int(j, ctx, "pad_token_id", &c->pad_token_id));
    BRG_TRY(brg_json_get_bool(j, ctx, "tie_word_embeddings", false, true, &c->tie_word_embeddings));
    const char *act = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "hidden_act", false, "gelu", &act));
    BRG_TRY(enc_parse_activation(act, ctx, &c->hidden_act, c->hidden_act_name, sizeof c->hidden_act_name));
    BRG_TRY(enc_read_labels(j, ctx, &c->num_labels, &c->problem_type));
    return brg_bert_config_validate(c);
}

brg_status brg_bert_config_validate(const brg_bert_config *c) {
    if ((unsigned)c->task >= N_TASKS)
        return brg_error(BRG_ERR_INVALID_ARG, "BERT config: unknown task %d", (int)c->task);
    if (c->vocab_size < 1 || c->hidden_size < 1 || c->num_hidden_layers < 1 || c->num_attention_heads < 1 ||
        c->intermediate_size < 1 || c->max_position_embeddings < 1 || c->type_vocab_size < 1)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "BERT config: vocab_size, hidden_size, num_hidden_layers, num_attention_heads, "
                         "intermediate_size, max_position_embeddings and type_vocab_size must be positive");
    if (c->hidden_size % c->num_attention_heads != 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "BERT config: hidden_size (%lld) must be divisible by num_attention_heads (%lld)",
                         (long long)c->hidden_size, (long long)c->num_attention_heads);
    if (c->vocab_size > INT32_MAX || c->type_vocab_size > INT32_MAX || c->pad_token_id >= c->vocab_size)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "BERT config: vocab_size (%lld), type_vocab_size (%lld) or pad_token_id (%lld) out of range",
                         (long long)c->vocab_size, (long long)c->type_vocab_size, (long long)c->pad_token_id);
    if (!(c->layer_norm_eps > 0)) return brg_error(BRG_ERR_INVALID_ARG, "BERT config: layer_norm_eps must be > 0");
    float p[3] = {c->hidden_dropout_prob, c->attention_probs_dropout_prob,
                  c->classifier_dropout < 0 ? 0 : c->classifier_dropout};
    for (int i = 0; i < 3; i++)
        if (!(p[i] >= 0 && p[i] < 1))
            return brg_error(BRG_ERR_INVALID_ARG, "BERT config: dropout %g not in [0, 1)", p[i]);
    if (c->num_labels < 1 || c->num_labels > INT32_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "BERT config: num_labels must be at least 1 (got %lld)",
                         (long long)c->num_labels);
    if (c->task == BRG_BERT_QUESTION_ANSWERING && c->num_labels != 2)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "BERT config: BertForQuestionAnswering needs num_labels 2 (start and end), got %lld",
                         (long long)c->num_labels);
    return BRG_OK;
}

brg_status brg_bert_config_load(const char *path, brg_bert_config *cfg) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j));
    brg_status st = parse_config(j, "config.json", cfg);
    cJSON_Delete(j);
    return st;
}

/* ---- config.json out ---- */

static brg_status bert_save_config(const brg_model *m, const char *dir) {
    const bert_model_config *mc = m->config;
    const brg_bert_config *c = &mc->c;
    cJSON *j = cJSON_CreateObject();
    if (!j) return brg_error(BRG_ERR_OOM, "cannot build config.json");
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(brg_bert_architecture(c->task)));
    cJSON_AddStringToObject(j, "model_type", "bert");
    cJSON_AddBoolToObject(j, "add_cross_attention", false);
    enc_add_float(j, "attention_probs_dropout_prob", c->attention_probs_dropout_prob);
    if (c->classifier_dropout >= 0) enc_add_float(j, "classifier_dropout", c->classifier_dropout);
    else cJSON_AddNullToObject(j, "classifier_dropout");
    cJSON_AddStringToObject(j, "hidden_act", c->hidden_act_name);
    enc_add_float(j, "hidden_dropout_prob", c->hidden_dropout_prob);
    cJSON_AddNumberToObject(j, "hidden_size", (double)c->hidden_size);
    enc_add_float(j, "initializer_range", c->initializer_range);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)c->intermediate_size);
    cJSON_AddBoolToObject(j, "is_decoder", false);
    enc_add_float(j, "layer_norm_eps", c->layer_norm_eps);
    cJSON_AddNumberToObject(j, "max_position_embeddings", (double)c->max_position_embeddings);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)c->num_attention_heads);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)c->num_hidden_layers);
    if (c->pad_token_id >= 0) cJSON_AddNumberToObject(j, "pad_token_id", (double)c->pad_token_id);
    else cJSON_AddNullToObject(j, "pad_token_id");
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tie_word_embeddings);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    cJSON_AddNumberToObject(j, "type_vocab_size", (double)c->type_vocab_size);
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
    bool labelled = c->task != BRG_BERT_MASKED_LM && c->task != BRG_BERT_BASE && c->task != BRG_BERT_PRETRAINING;
    if (labelled || mc->id2label)
        enc_write_labels(j, mc->id2label, c->num_labels, c->problem_type);
    return brg_json_write_config(j, dir);
}

static void bert_free_config(void *config) {
    bert_model_config *mc = config;
    if (!mc) return;
    cJSON_Delete(mc->id2label);
    free(mc);
}

/* What every BERT head takes first: the tokens, their mask and their segments. */
#define BERT_TEXT_INPUTS                                                                                          \
    {.name = "input_ids", .kind = BRG_INPUT_TOKENS},                                                              \
    {.name = "attention_mask", .kind = BRG_INPUT_MASK, .like = "input_ids"},                                      \
    {.name = "token_type_ids", .kind = BRG_INPUT_TYPE_IDS, .like = "input_ids"}

static const brg_input_decl bert_inputs[] = {
    BERT_TEXT_INPUTS,
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL}, /* the end */
};
/* transformers' question-answering heads take the answer span as start/end positions. */
static const brg_input_decl bert_qa_inputs[] = {
    BERT_TEXT_INPUTS,
    {.name = "start_positions", .kind = BRG_INPUT_POSITIONS, .needs = "end_positions", .target = true},
    {.name = "end_positions", .kind = BRG_INPUT_POSITIONS, .needs = "start_positions", .target = true},
    {.name = NULL}, /* the end */
};

static const char *const bert_qa_outputs[] = {"start_logits", "end_logits", NULL};

static const brg_input_decl bert_base_inputs[] = {
    BERT_TEXT_INPUTS,
    {.name = NULL}, /* the end */
};
static const brg_input_decl bert_pretraining_inputs[] = {
    BERT_TEXT_INPUTS,
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = "next_sentence_label", .kind = BRG_INPUT_CLASSES, .classes = 2, .target = true},
    {.name = NULL}, /* the end */
};

#define BERT_OPS(arch, in, ...)                                                                                   \
    {.architecture = arch, .forward_block = bert_forward_block, .save_config = bert_save_config,                 \
     .free_config = bert_free_config, .count_loss_items = bert_count_loss_items, .inputs = in, __VA_ARGS__}

/* In brg_bert_task order. */
static const brg_model_ops bert_ops[] = {
    BERT_OPS("BertForMaskedLM", bert_inputs, .logits_names = NULL, .token_loss = true),
    BERT_OPS("BertForSequenceClassification", bert_inputs, .logits_names = NULL),
    BERT_OPS("BertForQuestionAnswering", bert_qa_inputs, .logits_names = bert_qa_outputs),
    BERT_OPS("BertModel", bert_base_inputs, .outputs = bert_base_outputs),
    BERT_OPS("BertForTokenClassification", bert_inputs, .logits_names = NULL),
    BERT_OPS("BertForMultipleChoice", bert_inputs, .choices = true),
    BERT_OPS("BertForPreTraining", bert_pretraining_inputs, .outputs = bert_pretraining_outputs),
};
_Static_assert(sizeof bert_ops / sizeof bert_ops[0] == N_TASKS, "one ops entry per task");

/* ---- construction ---- */

typedef struct param_adder {
    brg_model *m;
    float std;
    const char *base; /* "bert." in the head models, "" in BertModel (transformers' names) */
} param_adder;

static brg_status add_linear(param_adder *a, const char *prefix, int64_t out, int64_t in) {
    char n[BRG_NAME_MAX];
    int64_t sw[2] = {out, in}, sb[1] = {out};
    snprintf(n, sizeof n, "%s.weight", prefix);
    BRG_TRY(brg_model_add_param(a->m, n, 2, sw, BRG_INIT_NORMAL, a->std, false, NULL));
    snprintf(n, sizeof n, "%s.bias", prefix);
    return brg_model_add_param(a->m, n, 1, sb, BRG_INIT_ZEROS, 0, true, NULL);
}

static brg_status add_layer_norm(param_adder *a, const char *prefix, int64_t width) {
    char n[BRG_NAME_MAX];
    int64_t s[1] = {width};
    snprintf(n, sizeof n, "%s.weight", prefix);
    BRG_TRY(brg_model_add_param(a->m, n, 1, s, BRG_INIT_ONES, 0, true, NULL));
    snprintf(n, sizeof n, "%s.bias", prefix);
    return brg_model_add_param(a->m, n, 1, s, BRG_INIT_ZEROS, 0, true, NULL);
}

static brg_status add_embeddings(param_adder *a, const brg_bert_config *c) {
    int64_t C = c->hidden_size;
    int64_t sw[2] = {c->vocab_size, C}, sp[2] = {c->max_position_embeddings, C}, st[2] = {c->type_vocab_size, C};
    char n[BRG_NAME_MAX];
    BRG_TRY(brg_model_add_block(a->m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1));
    snprintf(n, sizeof n, "%sembeddings.word_embeddings.weight", a->base);
    BRG_TRY(brg_model_add_param(a->m, n, 2, sw, BRG_INIT_NORMAL, a->std, false, NULL));
    snprintf(n, sizeof n, "%sembeddings.position_embeddings.weight", a->base);
    BRG_TRY(brg_model_add_param(a->m, n, 2, sp, BRG_INIT_NORMAL, a->std, false, NULL));
    snprintf(n, sizeof n, "%sembeddings.token_type_embeddings.weight", a->base);
    BRG_TRY(brg_model_add_param(a->m, n, 2, st, BRG_INIT_NORMAL, a->std, false, NULL));
    snprintf(n, sizeof n, "%sembeddings.LayerNorm", a->base);
    return add_layer_norm(a, n, C);
}

static brg_status add_layer(param_adder *a, const brg_bert_config *c, int l) {
    int64_t C = c->hidden_size, I = c->intermediate_size;
    char block[32], p[BRG_NAME_MAX];
    snprintf(block, sizeof block, "layer.%d", l);
    BRG_TRY(brg_model_add_block(a->m, block, BRG_BLOCK_LAYER, l));
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%sencoder.layer.%d.attention.self.%s", a->base, l, qkv[i]);
        BRG_TRY(add_linear(a, p, C, C));
    }
    snprintf(p, sizeof p, "%sencoder.layer.%d.attention.output.dense", a->base, l);
    BRG_TRY(add_linear(a, p, C, C));
    snprintf(p, sizeof p, "%sencoder.layer.%d.attention.output.LayerNorm", a->base, l);
    BRG_TRY(add_layer_norm(a, p, C));
    snprintf(p, sizeof p, "%sencoder.layer.%d.intermediate.dense", a->base, l);
    BRG_TRY(add_linear(a, p, I, C));
    snprintf(p, sizeof p, "%sencoder.layer.%d.output.dense", a->base, l);
    BRG_TRY(add_linear(a, p, C, I));
    snprintf(p, sizeof p, "%sencoder.layer.%d.output.LayerNorm", a->base, l);
    return add_layer_norm(a, p, C);
}

/* The decoder reads the word embeddings (and its bias is cls.predictions.bias) when tied; untied,
 * transformers keeps cls.predictions.bias as a separate, unused parameter. */
static brg_status add_mlm_head(param_adder *a, const brg_bert_config *c) {
    int64_t C = c->hidden_size, sv[1] = {c->vocab_size};
    int bias;
    BRG_TRY(add_linear(a, "cls.predictions.transform.dense", C, C));
    BRG_TRY(add_layer_norm(a, "cls.predictions.transform.LayerNorm", C));
    BRG_TRY(brg_model_add_param(a->m, "cls.predictions.bias", 1, sv, BRG_INIT_ZEROS, 0, true, &bias));
    if (!c->tie_word_embeddings) return add_linear(a, "cls.predictions.decoder", c->vocab_size, C);
    BRG_TRY(brg_model_add_alias(a->m, "cls.predictions.decoder.weight", E_WORD));
    return brg_model_add_alias(a->m, "cls.predictions.decoder.bias", bias);
}

static brg_status add_head(param_adder *a, const brg_bert_config *c) {
    int64_t C = c->hidden_size;
    BRG_TRY(brg_model_add_block(a->m, "head", BRG_BLOCK_HEAD, -1));
    switch (c->task) {
    case BRG_BERT_MASKED_LM: return add_mlm_head(a, c);
    case BRG_BERT_SEQUENCE_CLASSIFICATION:
        BRG_TRY(add_linear(a, "bert.pooler.dense", C, C));
        return add_linear(a, "classifier", c->num_labels, C);
    case BRG_BERT_QUESTION_ANSWERING: return add_linear(a, "qa_outputs", c->num_labels, C);
    case BRG_BERT_BASE: return c->add_pooling_layer ? add_linear(a, "pooler.dense", C, C) : BRG_OK;
    case BRG_BERT_TOKEN_CLASSIFICATION: return add_linear(a, "classifier", c->num_labels, C);
    case BRG_BERT_PRETRAINING: /* the pooler and next-sentence head first, then the masked-LM head */
        BRG_TRY(add_linear(a, "bert.pooler.dense", C, C));
        BRG_TRY(add_linear(a, "cls.seq_relationship", 2, C));
        return add_mlm_head(a, c);
    case BRG_BERT_MULTIPLE_CHOICE: /* one score per choice */
        BRG_TRY(add_linear(a, "bert.pooler.dense", C, C));
        return add_linear(a, "classifier", 1, C);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown BERT task");
}

static brg_status build(brg_model *m, const brg_bert_config *c) {
    param_adder a = {m, c->initializer_range, c->task == BRG_BERT_BASE ? "" : "bert."};
    BRG_TRY(add_embeddings(&a, c));
    for (int l = 0; l < c->num_hidden_layers; l++) BRG_TRY(add_layer(&a, c, l));
    return add_head(&a, c);
}

brg_status brg_bert_create(const brg_bert_config *cfg, brg_model **out) {
    BRG_TRY(brg_bert_config_validate(cfg));
    bert_model_config *mc = calloc(1, sizeof *mc);
    if (!mc) return brg_error(BRG_ERR_OOM, "cannot allocate the BERT config");
    mc->c = *cfg;
    brg_model *m;
    brg_status st = brg_model_create(&bert_ops[cfg->task], mc, &m);
    if (st != BRG_OK) {
        free(mc);
        return st;
    }
    m->vocab_size = cfg->vocab_size;
    m->max_positions = cfg->max_position_embeddings;
    st = build(m, cfg);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

void brg_bert_init_weights(brg_model *m, uint64_t seed) {
    brg_model_init_weights(m, seed);
    const brg_bert_config *c = &((const bert_model_config *)m->config)->c;
    if (c->pad_token_id < 0) return;
    float *row = (float *)m->params[E_WORD].tensor->data + c->pad_token_id * c->hidden_size;
    memset(row, 0, (size_t)c->hidden_size * sizeof(float));
}

/* ---- loading a folder ---- */

/* Buffers and the tensors of other BERT heads that transformers skips without a word when
 * loading these classes (a BertForPreTraining checkpoint loads into BertForMaskedLM). */
static const char *const ignore_with_pooler[] = {"embeddings.position_ids", "embeddings.token_type_ids",
                                                 "cls.seq_relationship.weight", "cls.seq_relationship.bias", NULL};
static const char *const ignore_without_pooler[] = {"embeddings.position_ids", "embeddings.token_type_ids",
                                                    "cls.seq_relationship.weight", "cls.seq_relationship.bias",
                                                    "pooler.dense.weight", "pooler.dense.bias", NULL};
static const char *const ignore_buffers[] = {"embeddings.position_ids", "embeddings.token_type_ids", NULL};

static brg_status create_from_json(const cJSON *j, const char *path, int pooler, brg_model **out) {
    brg_bert_config cfg;
    BRG_TRY(parse_config(j, path, &cfg));
    if (pooler >= 0) cfg.add_pooling_layer = pooler != 0;
    BRG_TRY(brg_bert_create(&cfg, out));
    ((bert_model_config *)(*out)->config)->id2label = enc_copy_id2label(j);
    return BRG_OK;
}

/* BertModel has the pooler when the checkpoint does (under either name); -1 when there is no
 * checkpoint to ask. */
static int checkpoint_has_pooler(const char *dir) {
    brg_checkpoint *ckpt = NULL;
    if (brg_checkpoint_open(dir, &ckpt) != BRG_OK) {
        brg_clear_error();
        return -1;
    }
    int has = brg_checkpoint_has(ckpt, "pooler.dense.weight") || brg_checkpoint_has(ckpt, "bert.pooler.dense.weight");
    brg_checkpoint_close(ckpt);
    return has;
}

brg_status brg_bert_create_dir(const char *dir, brg_model **out) {
    char path[4200];
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, &j));
    brg_bert_task task;
    brg_status st = parse_task(j, path, &task);
    int pooler = st == BRG_OK && task == BRG_BERT_BASE ? checkpoint_has_pooler(dir) : -1;
    if (st == BRG_OK) st = create_from_json(j, path, pooler, out);
    cJSON_Delete(j);
    return st;
}

brg_status brg_bert_load_dir(const char *dir, brg_model **out) {
    brg_model *m = NULL;
    BRG_TRY(brg_bert_create_dir(dir, &m));
    brg_bert_task task = ((const bert_model_config *)m->config)->c.task;
    brg_load_options o = {.base_prefix = "bert.", .init_missing_head = task != BRG_BERT_BASE, .seed = 42};
    bool pooled = task == BRG_BERT_SEQUENCE_CLASSIFICATION || task == BRG_BERT_MULTIPLE_CHOICE;
    o.ignore_suffixes = pooled                                            ? ignore_with_pooler
                        : task == BRG_BERT_BASE || task == BRG_BERT_PRETRAINING ? ignore_buffers
                                                                          : ignore_without_pooler;
    return brg_model_load_dir_pretrained(m, dir, &o, out);
}
