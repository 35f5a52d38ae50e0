/* fill-mask as transformers 5's FillMaskPipeline: the text encoded with special tokens (it must
 * hold the tokenizer's mask token); at each mask position the softmax over the vocabulary (or
 * over the targets), its top_k (5) as {"score", "token", "token_str", "sequence"}: the token
 * decoded alone, and the input with the mask replaced, padding dropped, decoded without special
 * tokens (with them when the text holds several masks, so the other masks show). One mask gives
 * a list of predictions, several a list of such lists. */
#include <stdlib.h>
#include <string.h>

#include "pipelines/task_internal.h"

typedef struct state {
    int32_t *targets; /* NULL: the whole vocabulary */
    int64_t n_targets;
} state;

static bool fits(const brg_model *m) {
    const char *a = m->ops->architecture;
    const size_t n = strlen(a), k = strlen("ForMaskedLM");
    return n > k && strcmp(a + n - k, "ForMaskedLM") == 0;
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* get_target_ids: a target is a vocabulary token, else the first token it encodes to (ignored
 * when it encodes to none); duplicates dropped. */
static brg_status setup(brg_task_pipeline *p) {
    if (p->tokens.mask_id < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "fill-mask: the tokenizer does not define a `mask_token` "
                         "(tokenizer_config.json's mask_token)");
    state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the pipeline");
    p->state = s;
    if (!p->opts.targets) return BRG_OK;
    s->targets = malloc((size_t)(p->opts.n_targets + 1) * sizeof *s->targets);
    if (!s->targets) return brg_error(BRG_ERR_OOM, "no memory for the targets");
    for (int i = 0; i < p->opts.n_targets; i++) {
        const char *t = p->opts.targets[i];
        int32_t id = brg_tokenizer_token_to_id(p->tok, t);
        if (id < 0) {
            brg_encoding e;
            BRG_TRY(brg_tokenizer_encode(p->tok, t, strlen(t), false, &e));
            if (e.n) id = e.ids[0];
            brg_encoding_free(&e);
        }
        if (id < 0) continue;
        if (id >= p->model->vocab_size)
            return brg_error(BRG_ERR_INVALID_ARG, "fill-mask: target '%s' is token %d, outside the model's %lld", t,
                             (int)id, (long long)p->model->vocab_size);
        s->targets[s->n_targets++] = id;
    }
    qsort(s->targets, (size_t)s->n_targets, sizeof *s->targets, cmp_i32);
    int64_t k = 0;
    for (int64_t i = 0; i < s->n_targets; i++)
        if (k == 0 || s->targets[k - 1] != s->targets[i]) s->targets[k++] = s->targets[i];
    s->n_targets = k;
    if (k == 0) return brg_error(BRG_ERR_INVALID_ARG, "fill-mask: at least one target must be provided when passed");
    return BRG_OK;
}

static void destroy(brg_task_pipeline *p) {
    state *s = p->state;
    if (s) free(s->targets);
    free(s);
}

typedef struct cand {
    float prob;
    int32_t id;
} cand;

static int by_prob(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->prob != y->prob) return x->prob > y->prob ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool clean_up(const brg_task_pipeline *p) {
    return p->opts.clean_up_tokenization_spaces >= 0 ? p->opts.clean_up_tokenization_spaces : p->tokens.clean_up;
}

/* One prediction: {"score", "token", "token_str", "sequence"}. */
static brg_status proposition(const brg_task_pipeline *p, const brg_encoding *e, size_t at, const cand *c, bool single,
                              task_json *j) {
    int32_t *ids = malloc((e->n + 1) * sizeof *ids);
    if (!ids) return brg_error(BRG_ERR_OOM, "no memory for a sequence");
    size_t k = 0;
    for (size_t t = 0; t < e->n; t++) {
        const int32_t id = t == at ? c->id : e->ids[t];
        if (id != p->tokens.pad_id) ids[k++] = id;
    }
    char *sequence = NULL, *token_str = NULL;
    brg_status st = task_decode(p, ids, k, single, clean_up(p), &sequence);
    if (st == BRG_OK) st = task_decode(p, &c->id, 1, false, clean_up(p), &token_str);
    if (st == BRG_OK) {
        task_json_raw(j, "{\"score\": ");
        task_json_num(j, c->prob);
        task_json_raw(j, ", \"token\": ");
        task_json_int(j, c->id);
        task_json_raw(j, ", \"token_str\": ");
        task_json_str(j, token_str);
        task_json_raw(j, ", \"sequence\": ");
        task_json_str(j, sequence);
        task_json_raw(j, "}");
    }
    free(sequence);
    free(token_str);
    free(ids);
    return st;
}

static brg_status postprocess(const brg_task_pipeline *p, const brg_encoding *e, const float *logits, int64_t V,
                              char **out) {
    const state *s = p->state;
    const int64_t n_cand = s->targets ? s->n_targets : V;
    int64_t top_k = p->opts.top_k == BRG_TASK_UNSET ? 5 : p->opts.top_k;
    if (top_k > n_cand) top_k = n_cand;
    size_t n_masks = 0;
    for (size_t t = 0; t < e->n; t++) n_masks += e->ids[t] == p->tokens.mask_id;
    const bool single = n_masks == 1;
    float *probs = malloc((size_t)V * sizeof *probs);
    cand *c = malloc((size_t)n_cand * sizeof *c);
    task_json j = {0};
    brg_status st = probs && c ? task_json_open(&j) : brg_error(BRG_ERR_OOM, "no memory for the predictions");
    if (st == BRG_OK && !single) task_json_raw(&j, "[");
    for (size_t t = 0, m = 0; st == BRG_OK && t < e->n; t++) {
        if (e->ids[t] != p->tokens.mask_id) continue;
        task_softmax(logits + (int64_t)t * V, V, probs);
        for (int64_t i = 0; i < n_cand; i++) {
            const int32_t id = s->targets ? s->targets[i] : (int32_t)i;
            c[i] = (cand){probs[id], id};
        }
        qsort(c, (size_t)n_cand, sizeof *c, by_prob);
        task_json_raw(&j, m++ ? ", [" : "[");
        for (int64_t k = 0; st == BRG_OK && k < top_k; k++) {
            if (k) task_json_raw(&j, ", ");
            st = proposition(p, e, t, &c[k], single, &j);
        }
        task_json_raw(&j, "]");
    }
    if (j.f) {
        if (!single) task_json_raw(&j, "]");
        brg_status closed = task_json_close(&j, out);
        if (st == BRG_OK) st = closed;
        else free(*out), *out = NULL;
    }
    free(probs);
    free(c);
    return st;
}

static brg_status has_mask(brg_task_pipeline *p, const brg_encoding *enc, int64_t index) {
    for (size_t t = 0; t < enc->n; t++)
        if (enc->ids[t] == p->tokens.mask_id) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: no mask_token (%s) found on the input", p->in_name,
                     (long long)index, p->tokens.mask_token);
}

static brg_status batch_results(brg_task_pipeline *p, const task_batch *b, char **results) {
    const int64_t T = b->T;
    const brg_tensor *logits = task_output(b->outs, b->n_outs, "logits");
    if (!logits || logits->ndim != 3 || logits->shape[1] != T)
        return brg_error(BRG_ERR_FORMAT, "%s gives no [batch, tokens, vocab] logits", p->model->ops->architecture);
    const int64_t V = logits->shape[2];
    for (int64_t r = 0; r < b->n; r++)
        BRG_TRY(postprocess(p, &b->enc[r], (const float *)logits->data + r * T * V, V, &results[r]));
    return BRG_OK;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    return task_run_batches(p, in, n, first, false, has_mask, batch_results, results);
}

const task_def task_fill_mask = {
    .name = "fill-mask",
    .info = {.name = "fill-mask",
             .inputs = "text",
             .models = "BertForMaskedLM",
             .returns = "[{\"score\", \"token\", \"token_str\", \"sequence\"}] (several masks: one list each)",
             .follows = "transformers 5",
             .implemented = true},
    .fits = fits,
    .setup = setup,
    .run = run,
    .destroy = destroy,
};
