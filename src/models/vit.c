/* ViT as transformers' ViTForImageClassification and ViTModel: patch embedding (Conv2d with
 * stride = kernel, computed as unfold + matmul), [CLS] token, learned positions, pre-LN encoder
 * layers, final LayerNorm, and a classifier on the [CLS] output or ViTModel's pooler. */
#include "brigade/vit.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/ops_pack.h"
#include "io/json.h"
#include "models/encoder_common.h"
#include "models/model_internal.h"

typedef struct vit_model_config {
    brg_vit_config c;
    cJSON *id2label;
} vit_model_config;

void brg_vit_config_default(brg_vit_config *c) {
    memset(c, 0, sizeof *c);
    c->image_h = c->image_w = 224;
    c->patch_h = c->patch_w = 16;
    c->num_channels = 3;
    c->hidden_size = 768;
    c->num_hidden_layers = 12;
    c->num_attention_heads = 12;
    c->intermediate_size = 3072;
    c->hidden_act = BRG_ACT_GELU_ERF;
    snprintf(c->hidden_act_name, sizeof c->hidden_act_name, "gelu");
    c->layer_norm_eps = 1e-12f;
    c->initializer_range = 0.02f;
    c->qkv_bias = true;
    c->encoder_stride = 16;
    c->pooler_output_size = 0;
    snprintf(c->pooler_act, sizeof c->pooler_act, "tanh");
    c->num_labels = 2;
}

/* In brg_vit_task order. */
static const char *const architectures[] = {"ViTForImageClassification", "ViTModel"};
enum { N_TASKS = sizeof architectures / sizeof architectures[0] };

const char *brg_vit_architecture(brg_vit_task task) { return (unsigned)task < N_TASKS ? architectures[task] : "?"; }

int64_t brg_vit_num_patches(const brg_vit_config *c) {
    return c->patch_h > 0 && c->patch_w > 0 ? (c->image_h / c->patch_h) * (c->image_w / c->patch_w) : 0;
}

/* ---- config.json ---- */

/* image_size / patch_size: one number, or [height, width]. */
static brg_status read_size(const cJSON *j, const char *ctx, const char *key, int64_t *h, int64_t *w, bool *pair) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    *pair = false;
    if (!v || cJSON_IsNull(v)) return BRG_OK;
    if (cJSON_IsArray(v)) {
        const cJSON *a = cJSON_GetArrayItem(v, 0), *b = cJSON_GetArrayItem(v, 1);
        if (cJSON_GetArraySize(v) != 2 || !brg_json_integer(a, h) || !brg_json_integer(b, w))
            return brg_error(BRG_ERR_FORMAT, "%s: %s must be an integer or [height, width]", ctx, key);
        *pair = true;
        return BRG_OK;
    }
    BRG_TRY(brg_json_get_int(j, ctx, key, true, 0, h));
    *w = *h;
    return BRG_OK;
}

/* ACT2FN's names brigade computes; only ViTModel's pooler uses it. */
static bool pooler_activation_of(const char *name, brg_vit_pooler_act *out) {
    static const struct {
        const char *name;
        brg_vit_pooler_act act;
    } known[] = {{"tanh", BRG_VIT_POOLER_TANH},         {"relu", BRG_VIT_POOLER_RELU},
                 {"gelu", BRG_VIT_POOLER_GELU_ERF},     {"gelu_new", BRG_VIT_POOLER_GELU_TANH},
                 {"gelu_pytorch_tanh", BRG_VIT_POOLER_GELU_TANH}, {"gelu_fast", BRG_VIT_POOLER_GELU_TANH}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0) {
            *out = known[i].act;
            return true;
        }
    return false;
}

static brg_status parse_config(const cJSON *j, const char *ctx, brg_vit_config *c) {
    brg_vit_config_default(c);
    int task;
    BRG_TRY(model_parse_architecture(j, ctx, architectures, N_TASKS, &task));
    c->task = (brg_vit_task)task;
    BRG_TRY(read_size(j, ctx, "image_size", &c->image_h, &c->image_w, &c->image_size_pair));
    BRG_TRY(read_size(j, ctx, "patch_size", &c->patch_h, &c->patch_w, &c->patch_size_pair));
    BRG_TRY(brg_json_get_int(j, ctx, "num_channels", false, c->num_channels, &c->num_channels));
    BRG_TRY(brg_json_get_int(j, ctx, "hidden_size", false, c->hidden_size, &c->hidden_size));
    BRG_TRY(brg_json_get_int(j, ctx, "num_hidden_layers", false, c->num_hidden_layers, &c->num_hidden_layers));
    BRG_TRY(brg_json_get_int(j, ctx, "num_attention_heads", false, c->num_attention_heads, &c->num_attention_heads));
    BRG_TRY(brg_json_get_int(j, ctx, "intermediate_size", false, c->intermediate_size, &c->intermediate_size));
    BRG_TRY(brg_json_get_float(j, ctx, "hidden_dropout_prob", false, 0.0f, &c->hidden_dropout_prob));
    BRG_TRY(brg_json_get_float(j, ctx, "attention_probs_dropout_prob", false, 0.0f, &c->attention_probs_dropout_prob));
    BRG_TRY(brg_json_get_float(j, ctx, "layer_norm_eps", false, 1e-12f, &c->layer_norm_eps));
    BRG_TRY(brg_json_get_float(j, ctx, "initializer_range", false, 0.02f, &c->initializer_range));
    BRG_TRY(brg_json_get_bool(j, ctx, "qkv_bias", false, true, &c->qkv_bias));
    BRG_TRY(brg_json_get_int(j, ctx, "encoder_stride", false, 16, &c->encoder_stride));
    BRG_TRY(brg_json_get_int(j, ctx, "pooler_output_size", false, 0, &c->pooler_output_size));
    const char *s = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "pooler_act", false, "tanh", &s));
    snprintf(c->pooler_act, sizeof c->pooler_act, "%s", s);
    if (!pooler_activation_of(s, &c->pooler_activation) && c->task == BRG_VIT_BASE)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: pooler_act '%s' is not supported "
                         "(tanh, relu, gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)",
                         ctx, s);
    BRG_TRY(brg_json_get_string(j, ctx, "hidden_act", false, "gelu", &s));
    BRG_TRY(enc_parse_activation(s, ctx, &c->hidden_act, c->hidden_act_name, sizeof c->hidden_act_name));
    BRG_TRY(enc_read_labels(j, ctx, &c->num_labels, &c->problem_type));
    return brg_vit_config_validate(c);
}

brg_status brg_vit_config_validate(const brg_vit_config *c) {
    if ((unsigned)c->task >= N_TASKS)
        return brg_error(BRG_ERR_INVALID_ARG, "ViT config: unknown task %d", (int)c->task);
    if (c->hidden_size < 1 || c->num_hidden_layers < 1 || c->num_attention_heads < 1 || c->intermediate_size < 1 ||
        c->num_channels < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "ViT config: hidden_size, num_hidden_layers, num_attention_heads, "
                                              "intermediate_size and num_channels must be positive");
    if (c->patch_h < 1 || c->patch_w < 1 || c->image_h < c->patch_h || c->image_w < c->patch_w)
        return brg_error(BRG_ERR_INVALID_ARG, "ViT config: image_size %lldx%lld must hold at least one %lldx%lld patch",
                         (long long)c->image_h, (long long)c->image_w, (long long)c->patch_h, (long long)c->patch_w);
    if (c->hidden_size % c->num_attention_heads != 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "ViT config: hidden_size (%lld) must be divisible by num_attention_heads (%lld)",
                         (long long)c->hidden_size, (long long)c->num_attention_heads);
    if (!(c->layer_norm_eps > 0)) return brg_error(BRG_ERR_INVALID_ARG, "ViT config: layer_norm_eps must be > 0");
    float p[2] = {c->hidden_dropout_prob, c->attention_probs_dropout_prob};
    for (int i = 0; i < 2; i++)
        if (!(p[i] >= 0 && p[i] < 1))
            return brg_error(BRG_ERR_INVALID_ARG, "ViT config: dropout %g not in [0, 1)", p[i]);
    if (c->pooler_output_size < 0 || c->pooler_output_size > INT32_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "ViT config: pooler_output_size %lld out of range",
                         (long long)c->pooler_output_size);
    if (c->num_labels < 1 || c->num_labels > INT32_MAX)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "ViT config: num_labels must be at least 1 (got %lld)",
                         (long long)c->num_labels);
    return BRG_OK;
}

brg_status brg_vit_config_load(const char *path, brg_vit_config *cfg) {
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j));
    brg_status st = parse_config(j, "config.json", cfg);
    cJSON_Delete(j);
    return st;
}

static void add_size(cJSON *j, const char *key, int64_t h, int64_t w, bool pair) {
    if (!pair) {
        cJSON_AddNumberToObject(j, key, (double)h);
        return;
    }
    cJSON *a = cJSON_AddArrayToObject(j, key);
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)h));
    cJSON_AddItemToArray(a, cJSON_CreateNumber((double)w));
}

static brg_status vit_save_config(const brg_model *m, const char *dir) {
    const vit_model_config *mc = m->config;
    const brg_vit_config *c = &mc->c;
    cJSON *j = cJSON_CreateObject();
    if (!j) return brg_error(BRG_ERR_OOM, "cannot build config.json");
    cJSON *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(brg_vit_architecture(c->task)));
    cJSON_AddStringToObject(j, "model_type", "vit");
    enc_add_float(j, "attention_probs_dropout_prob", c->attention_probs_dropout_prob);
    cJSON_AddNumberToObject(j, "encoder_stride", (double)c->encoder_stride);
    cJSON_AddStringToObject(j, "hidden_act", c->hidden_act_name);
    enc_add_float(j, "hidden_dropout_prob", c->hidden_dropout_prob);
    cJSON_AddNumberToObject(j, "hidden_size", (double)c->hidden_size);
    add_size(j, "image_size", c->image_h, c->image_w, c->image_size_pair);
    enc_add_float(j, "initializer_range", c->initializer_range);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)c->intermediate_size);
    enc_add_float(j, "layer_norm_eps", c->layer_norm_eps);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)c->num_attention_heads);
    cJSON_AddNumberToObject(j, "num_channels", (double)c->num_channels);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)c->num_hidden_layers);
    add_size(j, "patch_size", c->patch_h, c->patch_w, c->patch_size_pair);
    cJSON_AddStringToObject(j, "pooler_act", c->pooler_act);
    int64_t pooler = c->pooler_output_size ? c->pooler_output_size : c->hidden_size;
    cJSON_AddNumberToObject(j, "pooler_output_size", (double)pooler);
    cJSON_AddBoolToObject(j, "qkv_bias", c->qkv_bias);
    cJSON_AddStringToObject(j, "torch_dtype", "float32");
    if (c->task != BRG_VIT_BASE || mc->id2label) enc_write_labels(j, mc->id2label, c->num_labels, c->problem_type);
    return brg_json_write_config(j, dir);
}

/* ---- parameters ---- */

enum { E_CLS, E_POS, E_PROJ_W, E_PROJ_B, EMB_PARAMS };
enum { L_Q_W, L_Q_B, L_K_W, L_K_B, L_V_W, L_V_B, L_AO_W, L_AO_B, L_I_W, L_I_B, L_O_W, L_O_B,
       L_LNB_W, L_LNB_B, L_LNA_W, L_LNA_B, L_COUNT };
enum { H_LN_W, H_LN_B, H_CLS_W, H_CLS_B };
enum { H_POOL_W = H_CLS_W, H_POOL_B = H_CLS_B }; /* ViTModel */

static const brg_vit_config *cfg_of(const brg_model *m) { return &((const vit_model_config *)m->config)->c; }
static int per_layer(const brg_vit_config *c) { return c->qkv_bias ? L_COUNT : L_COUNT - 3; }
static brg_tensor *P(brg_model *m, int i) { return m->params[i].tensor; }

/* Without qkv_bias the three projection biases are absent and later entries shift down. */
static brg_tensor *LP(brg_model *m, int layer, int which) {
    const brg_vit_config *c = cfg_of(m);
    bool qkv_bias = which == L_Q_B || which == L_K_B || which == L_V_B;
    if (qkv_bias && !c->qkv_bias) return NULL;
    int offset = which;
    if (!c->qkv_bias) offset -= which > L_V_B ? 3 : which / 2;
    return P(m, EMB_PARAMS + layer * per_layer(c) + offset);
}

static brg_tensor *HP(brg_model *m, int which) {
    const brg_vit_config *c = cfg_of(m);
    return P(m, EMB_PARAMS + (int)c->num_hidden_layers * per_layer(c) + which);
}

static brg_status add(brg_model *m, const char *name, int ndim, const int64_t *shape, brg_init_kind init, float std) {
    return brg_model_add_param(m, name, ndim, shape, init, std, init != BRG_INIT_NORMAL, NULL);
}

static brg_status add_linear(brg_model *m, const char *prefix, int64_t out, int64_t in, bool bias, float std) {
    char n[BRG_NAME_MAX];
    int64_t sw[2] = {out, in}, sb[1] = {out};
    snprintf(n, sizeof n, "%s.weight", prefix);
    BRG_TRY(add(m, n, 2, sw, BRG_INIT_NORMAL, std));
    snprintf(n, sizeof n, "%s.bias", prefix);
    return bias ? add(m, n, 1, sb, BRG_INIT_ZEROS, 0) : BRG_OK;
}

static brg_status add_layer_norm(brg_model *m, const char *prefix, int64_t width) {
    char n[BRG_NAME_MAX];
    int64_t s[1] = {width};
    snprintf(n, sizeof n, "%s.weight", prefix);
    BRG_TRY(add(m, n, 1, s, BRG_INIT_ONES, 0));
    snprintf(n, sizeof n, "%s.bias", prefix);
    return add(m, n, 1, s, BRG_INIT_ZEROS, 0);
}

/* transformers' names: "vit." in the classifier, none in ViTModel. */
static const char *base_of(const brg_vit_config *c) { return c->task == BRG_VIT_BASE ? "" : "vit."; }

static brg_status add_embeddings(brg_model *m, const brg_vit_config *c) {
    int64_t C = c->hidden_size, std_shape[3] = {1, 1, C}, pos[3] = {1, brg_vit_num_patches(c) + 1, C};
    int64_t proj[4] = {C, c->num_channels, c->patch_h, c->patch_w}, sb[1] = {C};
    float std = c->initializer_range;
    const char *base = base_of(c);
    char n[BRG_NAME_MAX];
    BRG_TRY(brg_model_add_block(m, "embeddings", BRG_BLOCK_EMBEDDINGS, -1));
    snprintf(n, sizeof n, "%sembeddings.cls_token", base);
    BRG_TRY(add(m, n, 3, std_shape, BRG_INIT_NORMAL, std));
    snprintf(n, sizeof n, "%sembeddings.position_embeddings", base);
    BRG_TRY(add(m, n, 3, pos, BRG_INIT_NORMAL, std));
    snprintf(n, sizeof n, "%sembeddings.patch_embeddings.projection.weight", base);
    BRG_TRY(add(m, n, 4, proj, BRG_INIT_NORMAL, std));
    snprintf(n, sizeof n, "%sembeddings.patch_embeddings.projection.bias", base);
    return add(m, n, 1, sb, BRG_INIT_ZEROS, 0);
}

static brg_status add_layer(brg_model *m, const brg_vit_config *c, int l) {
    int64_t C = c->hidden_size, I = c->intermediate_size;
    float std = c->initializer_range;
    char block[32], p[BRG_NAME_MAX];
    snprintf(block, sizeof block, "layer.%d", l);
    BRG_TRY(brg_model_add_block(m, block, BRG_BLOCK_LAYER, l));
    static const char *const qkv[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%sencoder.layer.%d.attention.attention.%s", base_of(c), l, qkv[i]);
        BRG_TRY(add_linear(m, p, C, C, c->qkv_bias, std));
    }
    snprintf(p, sizeof p, "%sencoder.layer.%d.attention.output.dense", base_of(c), l);
    BRG_TRY(add_linear(m, p, C, C, true, std));
    snprintf(p, sizeof p, "%sencoder.layer.%d.intermediate.dense", base_of(c), l);
    BRG_TRY(add_linear(m, p, I, C, true, std));
    snprintf(p, sizeof p, "%sencoder.layer.%d.output.dense", base_of(c), l);
    BRG_TRY(add_linear(m, p, C, I, true, std));
    snprintf(p, sizeof p, "%sencoder.layer.%d.layernorm_before", base_of(c), l);
    BRG_TRY(add_layer_norm(m, p, C));
    snprintf(p, sizeof p, "%sencoder.layer.%d.layernorm_after", base_of(c), l);
    return add_layer_norm(m, p, C);
}

static int64_t pooler_width(const brg_vit_config *c) {
    return c->pooler_output_size ? c->pooler_output_size : c->hidden_size;
}

static brg_status build(brg_model *m, const brg_vit_config *c) {
    BRG_TRY(add_embeddings(m, c));
    for (int l = 0; l < c->num_hidden_layers; l++) BRG_TRY(add_layer(m, c, l));
    BRG_TRY(brg_model_add_block(m, "head", BRG_BLOCK_HEAD, -1));
    if (c->task == BRG_VIT_BASE) {
        BRG_TRY(add_layer_norm(m, "layernorm", c->hidden_size));
        return add_linear(m, "pooler.dense", pooler_width(c), c->hidden_size, true, c->initializer_range);
    }
    BRG_TRY(add_layer_norm(m, "vit.layernorm", c->hidden_size));
    return add_linear(m, "classifier", c->num_labels, c->hidden_size, true, c->initializer_range);
}

/* ---- forward ---- */

static brg_status check_pixels(const brg_vit_config *c, const brg_tensor *px) {
    char s[128];
    if (!px) return brg_error(BRG_ERR_INVALID_ARG, "ViT needs pixel_values");
    if (px->dtype != BRG_DTYPE_F32 || px->ndim != 4 || px->shape[0] < 1 || px->shape[1] != c->num_channels ||
        px->shape[2] != c->image_h || px->shape[3] != c->image_w)
        return brg_error(BRG_ERR_INVALID_ARG, "pixel_values must be F32 [batch, %lld, %lld, %lld], got %s %s",
                         (long long)c->num_channels, (long long)c->image_h, (long long)c->image_w,
                         brg_dtype_name(px->dtype), brg_shape_str(px, s, sizeof s));
    return BRG_OK;
}

static brg_status embeddings_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const brg_vit_config *c = cfg_of(m);
    brg_tensor *pixels = brg_bundle_input(b, "pixel_values");
    BRG_TRY(check_pixels(c, pixels));
    brg_tensor *patches, *w, *emb, *with_cls, *x, *hidden;
    int64_t wshape[2] = {c->hidden_size, c->num_channels * c->patch_h * c->patch_w};
    BRG_TRY(brg_patch_unfold(tape, pixels, c->patch_h, c->patch_w, &patches));
    BRG_TRY(brg_reshape(tape, P(m, E_PROJ_W), 2, wshape, &w));
    BRG_TRY(brg_linear(tape, patches, w, P(m, E_PROJ_B), false, &emb));
    BRG_TRY(brg_prepend_token(tape, P(m, E_CLS), emb, &with_cls));
    BRG_TRY(brg_add_broadcast(tape, with_cls, P(m, E_POS), &x));
    BRG_TRY(brg_dropout(tape, x, c->hidden_dropout_prob, b->training, b->seed, enc_dropout_offset(0, 0), &hidden));
    return brg_bundle_carry(b, "hidden", hidden);
}

static brg_status layer_forward(brg_model *m, int layer, brg_tape *tape, brg_bundle *b) {
    const brg_vit_config *c = cfg_of(m);
    int block = layer + 1;
    float eps = c->layer_norm_eps, p = c->hidden_dropout_prob;
    brg_tensor *x = brg_bundle_carried(b, "hidden"), *n1, *ctx, *ao, *ad, *r1, *n2, *ia, *o, *od, *out;
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach layer %d", layer);
    BRG_TRY(brg_layer_norm(tape, x, LP(m, layer, L_LNB_W), LP(m, layer, L_LNB_B), eps, &n1));
    enc_attention_weights w = {LP(m, layer, L_Q_W), LP(m, layer, L_Q_B), LP(m, layer, L_K_W),
                               LP(m, layer, L_K_B), LP(m, layer, L_V_W), LP(m, layer, L_V_B)};
    BRG_TRY(enc_self_attention(tape, b, n1, &w, c->num_attention_heads, c->attention_probs_dropout_prob,
                               enc_dropout_offset(block, 0), &ctx));
    BRG_TRY(brg_linear(tape, ctx, LP(m, layer, L_AO_W), LP(m, layer, L_AO_B), false, &ao));
    BRG_TRY(brg_dropout(tape, ao, p, b->training, b->seed, enc_dropout_offset(block, 1), &ad));
    BRG_TRY(brg_add(tape, ad, x, &r1));
    BRG_TRY(brg_layer_norm(tape, r1, LP(m, layer, L_LNA_W), LP(m, layer, L_LNA_B), eps, &n2));
    BRG_TRY(brg_linear_act(tape, n2, LP(m, layer, L_I_W), LP(m, layer, L_I_B), false, c->hidden_act, &ia));
    BRG_TRY(brg_linear(tape, ia, LP(m, layer, L_O_W), LP(m, layer, L_O_B), false, &o));
    BRG_TRY(brg_dropout(tape, o, p, b->training, b->seed, enc_dropout_offset(block, 2), &od));
    BRG_TRY(brg_add(tape, od, r1, &out));
    return brg_bundle_carry(b, "hidden", out);
}

/* LayerNorm is per position, so normalising only the [CLS] row gives the classifier exactly what
 * normalising every position would. */
static brg_status pooler_activation(brg_tape *tape, brg_vit_pooler_act act, brg_tensor *x, brg_tensor **y) {
    switch (act) {
    case BRG_VIT_POOLER_TANH: return brg_tanh(tape, x, y);
    case BRG_VIT_POOLER_RELU: return brg_relu(tape, x, y);
    case BRG_VIT_POOLER_GELU_ERF: return brg_activation_op(tape, x, BRG_ACT_GELU_ERF, y);
    case BRG_VIT_POOLER_GELU_TANH: return brg_activation_op(tape, x, BRG_ACT_GELU_TANH, y);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown pooler activation");
}

/* ViTModel: every position normalised (last_hidden_state), then the pooler on the [CLS] row,
 * packed after it in each row. */
static brg_status base_head(brg_model *m, brg_tape *tape, brg_bundle *b, brg_tensor *x) {
    const brg_vit_config *c = cfg_of(m);
    brg_tensor *n, *first, *dense, *pooled;
    BRG_TRY(brg_layer_norm(tape, x, HP(m, H_LN_W), HP(m, H_LN_B), c->layer_norm_eps, &n));
    BRG_TRY(brg_select(tape, n, 1, 0, &first));
    BRG_TRY(brg_linear(tape, first, HP(m, H_POOL_W), HP(m, H_POOL_B), false, &dense));
    BRG_TRY(pooler_activation(tape, c->pooler_activation, dense, &pooled));
    return brg_concat_rows(tape, n, pooled, &b->logits);
}

static brg_status vit_base_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                                   brg_arena *arena, brg_named_tensor *out, int max, int *n) {
    (void)batch;
    const brg_vit_config *c = cfg_of(m);
    int64_t C = c->hidden_size, P = pooler_width(c), T = brg_vit_num_patches(c) + 1, hs[2] = {T, C};
    *n = 0;
    if (max < 2) return brg_error(BRG_ERR_INTERNAL, "no room for ViTModel's outputs");
    brg_tensor *h, *p;
    BRG_TRY(brg_model_output_span(arena, logits, "last_hidden_state", 0, 2, hs, &h));
    BRG_TRY(brg_model_output_span(arena, logits, "pooler_output", T * C, 1, &P, &p));
    out[(*n)++] = (brg_named_tensor){"last_hidden_state", h};
    out[(*n)++] = (brg_named_tensor){"pooler_output", p};
    return BRG_OK;
}

static brg_status head_forward(brg_model *m, brg_tape *tape, brg_bundle *b) {
    const brg_vit_config *c = cfg_of(m);
    brg_tensor *x = brg_bundle_carried(b, "hidden"), *first, *n;
    if (!x) return brg_error(BRG_ERR_INVALID_ARG, "no hidden states reach the head");
    b->loss = NULL;
    if (c->task == BRG_VIT_BASE) return base_head(m, tape, b, x);
    BRG_TRY(brg_select(tape, x, 1, 0, &first));
    BRG_TRY(brg_layer_norm(tape, first, HP(m, H_LN_W), HP(m, H_LN_B), c->layer_norm_eps, &n));
    BRG_TRY(brg_linear(tape, n, HP(m, H_CLS_W), HP(m, H_CLS_B), false, &b->logits));
    if (!brg_bundle_input(b, "labels")) return BRG_OK;
    return enc_sequence_loss(tape, b, b->logits, c->problem_type, &b->loss);
}

static brg_status vit_forward_block(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    const brg_block *blk = &m->blocks[block];
    switch (blk->kind) {
    case BRG_BLOCK_EMBEDDINGS: return embeddings_forward(m, tape, b);
    case BRG_BLOCK_LAYER: return layer_forward(m, blk->layer, tape, b);
    case BRG_BLOCK_HEAD: return head_forward(m, tape, b);
    }
    return brg_error(BRG_ERR_INTERNAL, "unknown block kind");
}

static brg_loss_items vit_count_loss_items(const brg_model *m, const brg_tensor_map *batch) {
    const brg_vit_config *c = cfg_of(m);
    if (c->task == BRG_VIT_BASE) return (brg_loss_items){0, 0};
    const brg_tensor *labels = brg_tensor_map_get(batch, "labels");
    return (brg_loss_items){(double)enc_sequence_loss_items(labels, c->num_labels, c->problem_type), 0};
}

static void vit_free_config(void *config) {
    vit_model_config *mc = config;
    if (!mc) return;
    cJSON_Delete(mc->id2label);
    free(mc);
}

static const brg_input_decl vit_inputs[] = {
    {.name = "pixel_values", .kind = BRG_INPUT_PIXELS},
    {.name = "labels", .kind = BRG_INPUT_LABELS, .target = true},
    {.name = NULL}, /* the end */
};
static const brg_input_decl vit_base_inputs[] = {
    {.name = "pixel_values", .kind = BRG_INPUT_PIXELS},
    {.name = NULL}, /* the end */
};

#define VIT_OPS(arch, in, ...)                                                                                    \
    {.architecture = arch, .forward_block = vit_forward_block, .save_config = vit_save_config,                   \
     .free_config = vit_free_config, .count_loss_items = vit_count_loss_items, .inputs = in, __VA_ARGS__}

/* In brg_vit_task order. */
static const brg_model_ops vit_ops[] = {
    VIT_OPS("ViTForImageClassification", vit_inputs, .outputs = NULL),
    VIT_OPS("ViTModel", vit_base_inputs, .outputs = vit_base_outputs),
};
_Static_assert(sizeof vit_ops / sizeof vit_ops[0] == N_TASKS, "one ops entry per task");

/* ---- creation and loading ---- */

brg_status brg_vit_create(const brg_vit_config *cfg, brg_model **out) {
    BRG_TRY(brg_vit_config_validate(cfg));
    vit_model_config *mc = calloc(1, sizeof *mc);
    if (!mc) return brg_error(BRG_ERR_OOM, "cannot allocate the ViT config");
    mc->c = *cfg;
    brg_model *m;
    brg_status st = brg_model_create(&vit_ops[cfg->task], mc, &m);
    if (st != BRG_OK) {
        free(mc);
        return st;
    }
    m->max_positions = brg_vit_num_patches(cfg) + 1;
    st = build(m, cfg);
    if (st != BRG_OK) {
        brg_model_destroy(m);
        return st;
    }
    *out = m;
    return BRG_OK;
}

brg_status brg_vit_create_dir(const char *dir, brg_model **out) {
    char path[4200];
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, &j));
    brg_vit_config cfg;
    brg_status st = parse_config(j, path, &cfg);
    if (st == BRG_OK) st = brg_vit_create(&cfg, out);
    if (st == BRG_OK) ((vit_model_config *)(*out)->config)->id2label = enc_copy_id2label(j);
    cJSON_Delete(j);
    return st;
}

brg_status brg_vit_load_dir(const char *dir, brg_model **out) {
    brg_model *m = NULL;
    BRG_TRY(brg_vit_create_dir(dir, &m));
    if (cfg_of(m)->task == BRG_VIT_BASE) {
        /* transformers' ViTModel always has its pooler: a checkpoint without one (the
         * classifier's vit.*) initialises it, and the classifier's tensors go unused. */
        brg_load_options o = {.base_prefix = "vit.", .init_missing_head = true, .seed = 42};
        return brg_model_load_dir_pretrained(m, dir, &o, out);
    }
    /* A ViTModel checkpoint carries a pooler the classifier does not use. */
    static const char *const ignore[] = {"pooler.dense.weight", "pooler.dense.bias", NULL};
    return brg_model_load_dir_weights(m, dir, "vit.", ignore, out);
}
