/* token-classification as transformers 5's TokenClassificationPipeline: the text encoded with
 * special tokens (truncated to tokenizer_config.json's model_max_length when it has one), a
 * softmax per token, special tokens skipped; then, by aggregation strategy:
 *   none: one entity per token {"entity", "score", "index", "word", "start", "end"};
 *   simple: adjacent tokens grouped where the tag continues (B-X then I-X, or the same plain
 *     label) into {"entity_group", "score" (mean), "word", "start", "end"};
 *   first / average / max: tokens merged into words first (a token continues a word when the
 *     tokenizer has a continuing-subword prefix and the token's string is not as long as its
 *     text, else when the text before it is not a space), a word's label from its first token,
 *     its tokens' mean scores or its best token; then grouped as simple.
 * Entities whose label is in ignore_labels (default "O") are dropped. "word" is the token
 * string (an unknown token's own text), words and groups joined through the tokenizer's
 * decoder. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipelines/task_internal.h"
#include "tokenizers/tk_internal.h"

static bool fits(const brg_model *m) {
    const char *a = m->ops->architecture;
    const size_t n = strlen(a), k = strlen("ForTokenClassification");
    return n > k && strcmp(a + n - k, "ForTokenClassification") == 0;
}

static brg_status setup(brg_task_pipeline *p) {
    BRG_TRY(task_labels_load(p));
    if (p->tokens.model_max_length > 0) {
        brg_truncation t = {.enabled = true, .max_length = (size_t)p->tokens.model_max_length,
                            .strategy = BRG_TRUNC_LONGEST_FIRST};
        BRG_TRY(brg_tokenizer_set_truncation(p->tok, &t));
    }
    return BRG_OK;
}

/* A token (pre-entity), a word, or a group of them. */
typedef struct entity {
    const float *scores; /* per label (tokens; an average's own buffer for words) */
    int64_t label;
    float score;
    int64_t index;
    char *word;
    int64_t start, end;
    bool is_subword;
} entity;

typedef struct entities {
    entity *v;
    int64_t n;
} entities;

static void entities_free(entities *e) {
    for (int64_t i = 0; i < e->n; i++) free(e->v[i].word);
    free(e->v);
    e->v = NULL;
    e->n = 0;
}

static int64_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++) best = x[i] > x[best] ? i : best;
    return best;
}

static bool is_space_cp(uint32_t c) { return c == ' '; }

/* gather_pre_entities: every token that is not special, its scores, text and span. */
static brg_status pre_entities(const brg_task_pipeline *p, const char *sentence, const brg_encoding *e,
                               const float *scores, entities *out) {
    const size_t len = strlen(sentence);
    uint32_t *cps = malloc((len + 1) * sizeof *cps);
    out->v = calloc(e->n ? e->n : 1, sizeof *out->v);
    out->n = 0;
    if (!cps || !out->v) {
        free(cps);
        return brg_error(BRG_ERR_OOM, "no memory for the entities");
    }
    int64_t n_cp = 0;
    for (size_t i = 0; i < len;) i += tk_utf8_decode(sentence + i, len - i, &cps[n_cp++]);
    const char *prefix = brg_tokenizer_continuing_subword_prefix(p->tok);
    const bool real_words = prefix && *prefix;
    brg_status st = BRG_OK;
    for (size_t idx = 0; st == BRG_OK && idx < e->n; idx++) {
        if (e->special_tokens_mask[idx]) continue;
        const int64_t s = e->offsets[idx][0], en = e->offsets[idx][1];
        const char *tok = brg_tokenizer_id_to_token(p->tok, e->ids[idx]);
        char *word_ref = task_slice(sentence, s, en);
        if (!word_ref) {
            st = brg_error(BRG_ERR_OOM, "no memory for a word");
            break;
        }
        bool sub;
        if (real_words) sub = task_code_points(tok ? tok : "", tok ? strlen(tok) : 0) != en - s;
        else sub = s > 0 && !(is_space_cp(cps[s - 1]) || (s < n_cp && is_space_cp(cps[s])));
        char *word;
        if (e->ids[idx] == p->tokens.unk_id || !tok) {
            word = word_ref;
            sub = false;
        } else {
            word = strdup(tok);
            free(word_ref);
            if (!word) st = brg_error(BRG_ERR_OOM, "no memory for a word");
        }
        out->v[out->n++] = (entity){.scores = scores + idx * p->n_labels, .index = (int64_t)idx, .word = word,
                                    .start = s, .end = en, .is_subword = sub};
    }
    free(cps);
    return st;
}

static brg_status join_words(const brg_task_pipeline *p, const entity *v, int64_t n, char **out) {
    const char **words = malloc((size_t)(n ? n : 1) * sizeof *words);
    if (!words) return brg_error(BRG_ERR_OOM, "no memory for a word");
    for (int64_t i = 0; i < n; i++) words[i] = v[i].word;
    brg_status st = brg_tokenizer_decode_tokens(p->tok, words, (size_t)n, out);
    free(words);
    return st;
}

/* aggregate_word: tokens v[0..n) of one word -> out. `avg` holds n_labels floats for average. */
static brg_status aggregate_word(const brg_task_pipeline *p, brg_aggregation how, const entity *v, int64_t n,
                                 float *avg, entity *out) {
    const int64_t L = p->n_labels;
    const float *scores = v[0].scores;
    if (how == BRG_AGGREGATION_MAX) {
        int64_t best = 0;
        float best_max = v[0].scores[argmax(v[0].scores, L)];
        for (int64_t i = 1; i < n; i++) {
            const float m = v[i].scores[argmax(v[i].scores, L)];
            if (m > best_max) best = i, best_max = m;
        }
        scores = v[best].scores;
    } else if (how == BRG_AGGREGATION_AVERAGE) {
        for (int64_t l = 0; l < L; l++) {
            float sum = 0;
            for (int64_t i = 0; i < n; i++) sum += v[i].scores[l];
            avg[l] = sum / (float)n;
        }
        scores = avg;
    }
    const int64_t label = argmax(scores, L);
    *out = (entity){.label = label, .score = scores[label], .index = -1, .start = v[0].start, .end = v[n - 1].end};
    return join_words(p, v, n, &out->word);
}

/* aggregate_words: runs of a token and the subword tokens after it. */
static brg_status aggregate_words(const brg_task_pipeline *p, brg_aggregation how, const entities *tokens,
                                  entities *out) {
    out->v = calloc((size_t)(tokens->n ? tokens->n : 1), sizeof *out->v);
    float *avg = malloc((size_t)p->n_labels * sizeof *avg);
    out->n = 0;
    brg_status st = out->v && avg ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for the words");
    for (int64_t i = 0; st == BRG_OK && i < tokens->n;) {
        int64_t j = i + 1;
        while (j < tokens->n && tokens->v[j].is_subword) j++;
        st = aggregate_word(p, how, tokens->v + i, j - i, avg, &out->v[out->n]);
        if (st == BRG_OK) out->n++;
        i = j;
    }
    free(avg);
    return st;
}

/* get_tag: "B-X" -> (B, X), "I-X" -> (I, X), anything else -> (I, itself). */
static void get_tag(const char *label, bool *begin, const char **tag) {
    *begin = strncmp(label, "B-", 2) == 0;
    *tag = strncmp(label, "B-", 2) == 0 || strncmp(label, "I-", 2) == 0 ? label + 2 : label;
}

/* group_sub_entities: a run v[0..n) of one entity, scored by its mean; it keeps the first's label
 * (shown after its first "-", see shown_label). */
static brg_status group_run(const brg_task_pipeline *p, const entity *v, int64_t n, entity *out) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += v[i].score;
    *out = (entity){.label = v[0].label, .score = (float)(sum / (double)n), .index = -1, .start = v[0].start,
                    .end = v[n - 1].end};
    return join_words(p, v, n, &out->word);
}

static brg_status group_entities(const brg_task_pipeline *p, const entities *in, entities *out) {
    out->v = calloc((size_t)(in->n ? in->n : 1), sizeof *out->v);
    out->n = 0;
    if (!out->v) return brg_error(BRG_ERR_OOM, "no memory for the groups");
    brg_status st = BRG_OK;
    for (int64_t i = 0; st == BRG_OK && i < in->n;) {
        int64_t j = i + 1;
        for (; j < in->n; j++) {
            bool b, last_b;
            const char *tag, *last_tag;
            get_tag(p->labels[in->v[j].label], &b, &tag);
            get_tag(p->labels[in->v[j - 1].label], &last_b, &last_tag);
            if (!(strcmp(tag, last_tag) == 0 && !b)) break;
        }
        st = group_run(p, in->v + i, j - i, &out->v[out->n]);
        if (st == BRG_OK) out->n++;
        i = j;
    }
    return st;
}

/* The label an entity shows: the token's or word's own, a group's after its first "-". */
static const char *shown_label(const brg_task_pipeline *p, const entity *e, bool group) {
    const char *l = p->labels[e->label];
    if (!group) return l;
    const char *dash = strchr(l, '-');
    return dash ? dash + 1 : l;
}

static bool ignored(const brg_task_pipeline *p, const char *label) {
    if (!p->opts.ignore_labels) return strcmp(label, "O") == 0;
    for (int i = 0; i < p->opts.n_ignore_labels; i++)
        if (strcmp(p->opts.ignore_labels[i], label) == 0) return true;
    return false;
}

static brg_status write_result(const brg_task_pipeline *p, const entities *e, bool group, char **out) {
    task_json j;
    BRG_TRY(task_json_open(&j));
    task_json_raw(&j, "[");
    bool any = false;
    for (int64_t i = 0; i < e->n; i++) {
        const entity *x = &e->v[i];
        const char *label = shown_label(p, x, group);
        if (ignored(p, label)) continue;
        task_json_raw(&j, any ? ", {" : "{");
        any = true;
        task_json_raw(&j, group ? "\"entity_group\": " : "\"entity\": ");
        task_json_str(&j, label);
        task_json_raw(&j, ", \"score\": ");
        task_json_num(&j, x->score);
        if (!group) {
            task_json_raw(&j, ", \"index\": ");
            task_json_int(&j, x->index);
        }
        task_json_raw(&j, ", \"word\": ");
        task_json_str(&j, x->word);
        task_json_raw(&j, ", \"start\": ");
        task_json_int(&j, x->start);
        task_json_raw(&j, ", \"end\": ");
        task_json_int(&j, x->end);
        task_json_raw(&j, "}");
    }
    task_json_raw(&j, "]");
    return task_json_close(&j, out);
}

static brg_status postprocess(const brg_task_pipeline *p, const char *sentence, const brg_encoding *e,
                              const float *logits, char **out) {
    const int64_t L = p->n_labels, n = (int64_t)e->n;
    float *scores = malloc((size_t)(n * L + 1) * sizeof *scores);
    if (!scores) return brg_error(BRG_ERR_OOM, "no memory for the scores");
    for (int64_t t = 0; t < n; t++) task_softmax(logits + t * L, L, scores + t * L);
    entities tokens = {0}, words = {0}, groups = {0};
    const brg_aggregation how = p->opts.aggregation;
    brg_status st = pre_entities(p, sentence, e, scores, &tokens);
    for (int64_t i = 0; st == BRG_OK && i < tokens.n; i++) {
        tokens.v[i].label = argmax(tokens.v[i].scores, L);
        tokens.v[i].score = tokens.v[i].scores[tokens.v[i].label];
    }
    if (st == BRG_OK && how == BRG_AGGREGATION_NONE) st = write_result(p, &tokens, false, out);
    else if (st == BRG_OK) {
        const entities *src = &tokens;
        if (how != BRG_AGGREGATION_SIMPLE) {
            st = aggregate_words(p, how, &tokens, &words);
            src = &words;
        }
        if (st == BRG_OK) st = group_entities(p, src, &groups);
        if (st == BRG_OK) st = write_result(p, &groups, true, out);
    }
    entities_free(&tokens);
    entities_free(&words);
    entities_free(&groups);
    free(scores);
    return st;
}

static brg_status batch_results(brg_task_pipeline *p, const task_batch *b, char **results) {
    const int64_t T = b->T;
    const brg_tensor *logits = task_output(b->outs, b->n_outs, "logits");
    if (!logits || logits->ndim != 3 || logits->shape[1] != T || logits->shape[2] != p->n_labels)
        return brg_error(BRG_ERR_FORMAT, "%s gives no [batch, tokens, %lld] logits", p->model->ops->architecture,
                         (long long)p->n_labels);
    for (int64_t r = 0; r < b->n; r++)
        BRG_TRY(postprocess(p, b->in[r].text, &b->enc[r], (const float *)logits->data + r * T * p->n_labels,
                            &results[r]));
    return BRG_OK;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    return task_run_batches(p, in, n, first, false, NULL, batch_results, results);
}

const task_def task_token_classification = {
    .name = "token-classification",
    .info = {.name = "token-classification",
             .inputs = "text",
             .models = "BertForTokenClassification, GPT2ForTokenClassification",
             .returns = "[{\"entity\", \"score\", \"index\", \"word\", \"start\", \"end\"}] (aggregated: "
                        "[{\"entity_group\", \"score\", \"word\", \"start\", \"end\"}])",
             .follows = "transformers 5",
             .implemented = true},
    .fits = fits,
    .setup = setup,
    .run = run,
};
