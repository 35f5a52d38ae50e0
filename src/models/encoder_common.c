/* What BERT and ViT share: config.json fields, bidirectional self-attention, and
 * transformers' sequence-classification loss (regression, single- and multi-label). */
#include "models/encoder_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"

const char *brg_problem_type_name(brg_problem_type type) {
    switch (type) {
    case BRG_PROBLEM_REGRESSION: return "regression";
    case BRG_PROBLEM_SINGLE_LABEL: return "single_label_classification";
    case BRG_PROBLEM_MULTI_LABEL: return "multi_label_classification";
    case BRG_PROBLEM_AUTO: break;
    }
    return NULL;
}

/* ---- config.json ---- */

brg_status enc_parse_activation(const char *name, const char *ctx, brg_activation *act, char *name_out,
                                size_t name_len) {
    if (strcmp(name, "gelu") == 0)
        *act = BRG_ACT_GELU_ERF;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0 || strcmp(name, "gelu_fast") == 0)
        *act = BRG_ACT_GELU_TANH;
    else
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: hidden_act '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast)", ctx,
                         name);
    snprintf(name_out, name_len, "%s", name);
    return BRG_OK;
}

static brg_status parse_problem_type(const cJSON *j, const char *ctx, brg_problem_type *out) {
    const char *name = NULL;
    BRG_TRY(brg_json_get_string(j, ctx, "problem_type", false, NULL, &name));
    *out = BRG_PROBLEM_AUTO;
    if (!name) return BRG_OK;
    for (int t = BRG_PROBLEM_REGRESSION; t <= BRG_PROBLEM_MULTI_LABEL; t++)
        if (strcmp(name, brg_problem_type_name((brg_problem_type)t)) == 0) {
            *out = (brg_problem_type)t;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_FORMAT,
                     "%s: problem_type '%s' is not one of regression, single_label_classification, "
                     "multi_label_classification",
                     ctx, name);
}

brg_status enc_read_labels(const cJSON *j, const char *ctx, int64_t *num_labels, brg_problem_type *problem) {
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    int64_t from_key = -1;
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(j, "num_labels");
    if (nl && !cJSON_IsNull(nl)) BRG_TRY(brg_json_get_int(j, ctx, "num_labels", true, 0, &from_key));
    *num_labels = from_key >= 0 ? from_key : 2;
    if (id2label && !cJSON_IsNull(id2label)) {
        if (!cJSON_IsObject(id2label))
            return brg_error(BRG_ERR_FORMAT, "%s: id2label must be an object mapping label ids to names", ctx);
        int64_t n = cJSON_GetArraySize(id2label);
        if (from_key >= 0 && from_key != n)
            return brg_error(BRG_ERR_FORMAT, "%s: num_labels is %lld but id2label has %lld entries", ctx,
                             (long long)from_key, (long long)n);
        *num_labels = n;
    }
    return parse_problem_type(j, ctx, problem);
}

cJSON *enc_copy_id2label(const cJSON *j) {
    const cJSON *id2label = cJSON_GetObjectItemCaseSensitive(j, "id2label");
    return cJSON_IsObject(id2label) ? cJSON_Duplicate(id2label, true) : NULL;
}

void enc_write_labels(cJSON *j, const cJSON *names, int64_t num_labels, brg_problem_type problem) {
    bool use_names = names && cJSON_GetArraySize(names) == num_labels;
    cJSON *id2label = cJSON_AddObjectToObject(j, "id2label");
    cJSON *label2id = cJSON_AddObjectToObject(j, "label2id");
    for (int64_t i = 0; id2label && label2id && i < num_labels; i++) {
        char key[32], fallback[48];
        snprintf(key, sizeof key, "%lld", (long long)i);
        snprintf(fallback, sizeof fallback, "LABEL_%lld", (long long)i);
        const cJSON *given = use_names ? cJSON_GetObjectItemCaseSensitive(names, key) : NULL;
        const char *name = cJSON_IsString(given) ? given->valuestring : fallback;
        cJSON_AddStringToObject(id2label, key, name);
        if (!cJSON_GetObjectItemCaseSensitive(label2id, name)) cJSON_AddNumberToObject(label2id, name, (double)i);
    }
    const char *pt = brg_problem_type_name(problem);
    if (pt) cJSON_AddStringToObject(j, "problem_type", pt);
    else cJSON_AddNullToObject(j, "problem_type");
}

void enc_add_float(cJSON *j, const char *key, float v) {
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    cJSON_AddNumberToObject(j, key, strtod(buf, NULL));
}

/* ---- self-attention ---- */

uint64_t enc_dropout_offset(int block, int site) { return ((uint64_t)block * 8 + (uint64_t)site) << 40; }

brg_status enc_self_attention(brg_tape *tape, const brg_bundle *b, brg_tensor *x, const enc_attention_weights *w,
                              int64_t heads, float attn_dropout, uint64_t dropout_offset, brg_tensor **out) {
    int64_t width = w->wq->shape[0], D = width / heads;
    brg_tensor *q, *k, *v, *qh, *kh, *vh, *att;
    BRG_TRY(brg_linear(tape, x, w->wq, w->bq, false, &q));
    BRG_TRY(brg_linear(tape, x, w->wk, w->bk, false, &k));
    BRG_TRY(brg_linear(tape, x, w->wv, w->bv, false, &v));
    BRG_TRY(brg_split_heads(tape, q, 0, heads, D, &qh));
    BRG_TRY(brg_split_heads(tape, k, 0, heads, D, &kh));
    BRG_TRY(brg_split_heads(tape, v, 0, heads, D, &vh));
    brg_attention_opts opts = {.scale = 1.0f / sqrtf((float)D), .causal = false,
                               .key_mask = brg_bundle_input(b, "attention_mask"),
                               .dropout = b->training ? attn_dropout : 0.0f, .seed = b->seed,
                               .offset = dropout_offset};
    BRG_TRY(brg_attention(tape, qh, kh, vh, &opts, &att));
    return brg_merge_heads(tape, att, out);
}

/* ---- sequence-level loss ---- */

static brg_problem_type resolve(brg_problem_type problem, int64_t num_labels, const brg_tensor *labels) {
    if (problem != BRG_PROBLEM_AUTO) return problem;
    if (num_labels == 1) return BRG_PROBLEM_REGRESSION;
    return labels->dtype == BRG_DTYPE_I32 ? BRG_PROBLEM_SINGLE_LABEL : BRG_PROBLEM_MULTI_LABEL;
}

/* Float targets with the labels' values (regression and multi-label accept integer labels). */
static brg_status float_targets(brg_tape *tape, brg_tensor *labels, brg_tensor **out) {
    if (labels->dtype == BRG_DTYPE_F32 && brg_tensor_is_contiguous(labels)) {
        *out = labels;
        return BRG_OK;
    }
    if (labels->dtype != BRG_DTYPE_I32 && labels->dtype != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_INVALID_ARG, "labels must be F32 or I32, not %s", brg_dtype_name(labels->dtype));
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, labels->ndim, labels->shape, false, "labels", out));
    return brg_tensor_copy(*out, labels);
}

static brg_status check_label_shape(const brg_tensor *labels, int64_t B, int64_t L, brg_problem_type problem) {
    char s[128];
    bool ok;
    if (L == 1 || problem == BRG_PROBLEM_SINGLE_LABEL)
        ok = brg_tensor_numel(labels) == B && (labels->ndim == 1 || (labels->ndim == 2 && labels->shape[1] == 1) ||
                                               (labels->ndim == 0 && B == 1));
    else
        ok = labels->ndim == 2 && labels->shape[0] == B && labels->shape[1] == L;
    if (ok) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG, "labels %s do not fit %s over %lld examples and %lld labels (expected %s)",
                     brg_shape_str(labels, s, sizeof s), brg_problem_type_name(problem), (long long)B, (long long)L,
                     L == 1 || problem == BRG_PROBLEM_SINGLE_LABEL ? "[batch]" : "[batch, num_labels]");
}

brg_status enc_sequence_loss(brg_tape *tape, const brg_bundle *b, brg_tensor *logits, brg_problem_type problem,
                             brg_tensor **loss) {
    brg_tensor *labels = brg_bundle_input(b, "labels"), *target;
    int64_t B = logits->shape[0], L = logits->shape[1];
    problem = resolve(problem, L, labels);
    BRG_TRY(check_label_shape(labels, B, L, problem));
    double denom = b->loss_denominator;
    switch (problem) {
    case BRG_PROBLEM_SINGLE_LABEL:
        if (labels->dtype != BRG_DTYPE_I32)
            return brg_error(BRG_ERR_INVALID_ARG, "single_label_classification needs I32 class labels, not %s",
                             brg_dtype_name(labels->dtype));
        return brg_cross_entropy_share(tape, logits, labels, -100, denom, loss);
    case BRG_PROBLEM_REGRESSION:
        BRG_TRY(float_targets(tape, labels, &target));
        return brg_mse_loss_share(tape, logits, target, denom > 0 ? denom * (double)L : 0.0, loss);
    case BRG_PROBLEM_MULTI_LABEL:
        BRG_TRY(float_targets(tape, labels, &target));
        return brg_bce_with_logits_share(tape, logits, target, denom > 0 ? denom * (double)L : 0.0, loss);
    case BRG_PROBLEM_AUTO: break;
    }
    return brg_error(BRG_ERR_INTERNAL, "unresolved problem type");
}

int64_t enc_sequence_loss_items(const brg_tensor *labels, int64_t num_labels, brg_problem_type problem) {
    if (resolve(problem, num_labels, labels) == BRG_PROBLEM_SINGLE_LABEL && labels->dtype == BRG_DTYPE_I32) {
        int64_t n = 0, total = brg_tensor_numel(labels);
        for (int64_t i = 0; i < total; i++) n += brg_tensor_get_int(labels, i) != -100;
        return n;
    }
    return labels->ndim ? labels->shape[0] : 1;
}
