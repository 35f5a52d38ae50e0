/* question-answering as transformers 4.57's QuestionAnsweringPipeline (v5 dropped it) with a fast
 * tokenizer padding on the right (question first):
 *
 * preprocess: tokenizer(question, context, truncation="only_second", max_length=max_seq_len,
 *   stride=doc_stride, return_overflowing_tokens=True): the context is cut into windows of the
 *   room the question leaves, each starting room - doc_stride tokens after the last (the
 *   tokenizers 0.13-0.22 windows: every token tokenized, then truncated); p_mask keeps the
 *   context tokens and the CLS tokens as candidates.
 * postprocess, per window: the start and end logits of non-candidates set to -10000, each
 *   softmaxed; the null score start[0] * end[0] kept (handle_impossible_answer); position 0
 *   zeroed; the spans s <= e < s + max_answer_len scored start[s] * end[e], their best
 *   top_k * 2 + 10 (top_k without word alignment) kept when both ends are candidates; each span
 *   widened to the words of its end tokens (word_to_chars in the context; the token offsets
 *   where a token has no word), its text the context's characters; a text equal (lowercased) to
 *   an earlier answer's adds its score to it.
 * The answers sorted by score (stable), top_k of them: one is {"score", "start", "end", "answer"},
 * several (or none) a list. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipelines/task_internal.h"

typedef struct state {
    int64_t max_seq_len, doc_stride, max_answer_len, top_k;
} state;

static bool fits(const brg_model *m) {
    const char *a = m->ops->architecture;
    const size_t n = strlen(a), k = strlen("ForQuestionAnswering");
    return n > k && strcmp(a + n - k, "ForQuestionAnswering") == 0;
}

static brg_status setup(brg_task_pipeline *p) {
    if (p->tokens.padding_left)
        return brg_error(BRG_ERR_UNSUPPORTED, "question-answering: a tokenizer padding on the left (context first) "
                         "is not supported");
    state *s = calloc(1, sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "no memory for the pipeline");
    p->state = s;
    const brg_task_options *o = &p->opts;
    s->max_seq_len = o->max_seq_len != BRG_TASK_UNSET ? o->max_seq_len
                     : p->tokens.model_max_length > 0 && p->tokens.model_max_length < 384 ? p->tokens.model_max_length
                                                                                            : 384;
    if (s->max_seq_len < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "max_seq_len %lld: give at least 1", (long long)s->max_seq_len);
    s->doc_stride = o->doc_stride != BRG_TASK_UNSET ? o->doc_stride
                    : s->max_seq_len / 2 < 128          ? s->max_seq_len / 2
                                                        : 128;
    if (s->doc_stride < 0) return brg_error(BRG_ERR_INVALID_ARG, "doc_stride %lld: give 0 or more", (long long)s->doc_stride);
    if (s->doc_stride > s->max_seq_len)
        return brg_error(BRG_ERR_INVALID_ARG, "`doc_stride` (%lld) is larger than `max_seq_len` (%lld)",
                         (long long)s->doc_stride, (long long)s->max_seq_len);
    s->top_k = o->top_k == BRG_TASK_UNSET ? 1 : o->top_k;
    if (s->top_k < 1) return brg_error(BRG_ERR_INVALID_ARG, "top_k parameter should be >= 1 (got %lld)", (long long)s->top_k);
    s->max_answer_len = o->max_answer_len == BRG_TASK_UNSET ? 15 : o->max_answer_len;
    if (s->max_answer_len < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "max_answer_len parameter should be >= 1 (got %lld)",
                         (long long)s->max_answer_len);
    return BRG_OK;
}

static void destroy(brg_task_pipeline *p) { free(p->state); }

/* One window: the question's tokens, context tokens [from, to) of the full encoding, the rest. */
typedef struct window {
    int64_t example;
    size_t n;
    int32_t *ids, *types, *mask, *word, *seq;
    int64_t (*off)[2];
    float *start, *end; /* the model's logits */
    brg_encoding view;  /* ids, type_ids, attention_mask for the forward pass */
} window;

typedef struct windows {
    window *v;
    int64_t n, cap;
} windows;

static void windows_free(windows *w) {
    for (int64_t i = 0; i < w->n; i++) {
        window *x = &w->v[i];
        free(x->ids), free(x->types), free(x->mask), free(x->word), free(x->seq), free(x->off);
        free(x->start), free(x->end);
    }
    free(w->v);
    memset(w, 0, sizeof *w);
}

static brg_status add_window(windows *w, const brg_encoding *e, int64_t example, size_t c_first, size_t c_end,
                             size_t from, size_t to) {
    if (w->n == w->cap) {
        const int64_t cap = w->cap ? 2 * w->cap : 16;
        window *v = realloc(w->v, (size_t)cap * sizeof *v);
        if (!v) return brg_error(BRG_ERR_OOM, "no memory for the windows");
        w->v = v;
        w->cap = cap;
    }
    window *x = &w->v[w->n];
    memset(x, 0, sizeof *x);
    w->n++;
    const size_t n = e->n - (c_end - c_first) + (to - from);
    x->example = example;
    x->ids = malloc(n * sizeof *x->ids);
    x->types = malloc(n * sizeof *x->types);
    x->mask = malloc(n * sizeof *x->mask);
    x->word = malloc(n * sizeof *x->word);
    x->seq = malloc(n * sizeof *x->seq);
    x->off = malloc(n * sizeof *x->off);
    x->start = malloc(n * sizeof *x->start);
    x->end = malloc(n * sizeof *x->end);
    if (!x->ids || !x->types || !x->mask || !x->word || !x->seq || !x->off || !x->start || !x->end)
        return brg_error(BRG_ERR_OOM, "no memory for a window");
    for (size_t i = 0; i < e->n; i++) {
        const bool context = i >= c_first && i < c_end;
        if (context && (i < c_first + from || i >= c_first + to)) continue;
        const size_t k = x->n++;
        x->ids[k] = e->ids[i];
        x->types[k] = e->type_ids[i];
        x->mask[k] = e->attention_mask[i];
        x->word[k] = e->word_ids[i];
        x->seq[k] = e->sequence_ids[i];
        x->off[k][0] = e->offsets[i][0];
        x->off[k][1] = e->offsets[i][1];
    }
    x->view = (brg_encoding){.n = x->n, .ids = x->ids, .type_ids = x->types, .attention_mask = x->mask};
    return BRG_OK;
}

/* The windows of one example (return_overflowing_tokens with only_second truncation). */
static brg_status split(const brg_task_pipeline *p, const brg_encoding *e, int64_t example, int64_t index,
                        windows *w) {
    const state *s = p->state;
    size_t c_first = e->n, c_end = e->n;
    for (size_t i = 0; i < e->n; i++)
        if (e->sequence_ids[i] == 1) {
            if (c_first == e->n) c_first = i;
            c_end = i + 1;
        }
    const size_t n_context = c_end - c_first, L = (size_t)s->max_seq_len;
    if (e->n <= L) return add_window(w, e, example, c_first, c_end, 0, n_context);
    const size_t fixed = e->n - n_context;
    if (fixed >= L)
        return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: the question and special tokens take %zu of the %zu tokens "
                         "of max_seq_len: no room for the context", p->in_name, (long long)index, fixed, L);
    const size_t room = L - fixed;
    if ((size_t)s->doc_stride >= room)
        return brg_error(BRG_ERR_INVALID_ARG, "%s %lld: doc_stride %lld must be less than the %zu context tokens a "
                         "window holds next to this question", p->in_name, (long long)index, (long long)s->doc_stride, room);
    for (size_t from = 0;; from += room - (size_t)s->doc_stride) {
        const size_t to = from + room < n_context ? from + room : n_context;
        BRG_TRY(add_window(w, e, example, c_first, c_end, from, to));
        if (to == n_context) return BRG_OK;
    }
}

/* ---- answers ------------------------------------------------------------------------------ */

typedef struct answer {
    double score;
    int64_t start, end;
    char *text;
} answer;

typedef struct answers {
    answer *v;
    int64_t n, cap;
} answers;

static brg_status answers_add(answers *a, double score, int64_t start, int64_t end, char *text) {
    if (a->n == a->cap) {
        const int64_t cap = a->cap ? 2 * a->cap : 16;
        answer *v = realloc(a->v, (size_t)cap * sizeof *v);
        if (!v) {
            free(text);
            return brg_error(BRG_ERR_OOM, "no memory for the answers");
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = (answer){score, start, end, text};
    return BRG_OK;
}

typedef struct span {
    float score;
    int64_t flat; /* s * T + e */
} span;

static int by_span_score(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->flat > y->flat) - (x->flat < y->flat);
}

/* The softmax of x[0..T) with non-candidates at -10000 (numpy float32). */
static void masked_softmax(const float *x, const bool *cand, int64_t T, float *out) {
    float *m = malloc((size_t)T * sizeof *m);
    if (!m) return;
    for (int64_t i = 0; i < T; i++) m[i] = cand[i] ? x[i] : -10000.0f;
    task_softmax(m, T, out);
    free(m);
}

/* word_to_chars(word, sequence_index=1) over the window's tokens; false when none has it. */
static bool word_chars(const window *w, int32_t word, int64_t *a, int64_t *b) {
    int64_t first = -1, last = -1;
    for (size_t i = 0; i < w->n; i++)
        if (w->seq[i] == 1 && w->word[i] == word) {
            if (first < 0) first = (int64_t)i;
            last = (int64_t)i;
        }
    if (first < 0) return false;
    *a = w->off[first][0];
    *b = w->off[last][1];
    return true;
}

static void indices(const brg_task_pipeline *p, const window *w, int64_t s, int64_t e, int64_t *a, int64_t *b) {
    if (!p->opts.no_align_to_words && w->word[s] >= 0 && w->word[e] >= 0) {
        int64_t a0, a1, b0, b1;
        if (word_chars(w, w->word[s], &a0, &a1) && word_chars(w, w->word[e], &b0, &b1)) {
            *a = a0;
            *b = b1;
            return;
        }
    }
    *a = w->off[s][0];
    *b = w->off[e][1];
}

/* One window's spans into the answers; *min_null tracks the null score. */
static brg_status window_answers(const brg_task_pipeline *p, const window *w, const char *context, answers *out,
                                 double *min_null) {
    const state *s = p->state;
    const int64_t T = (int64_t)w->n;
    bool *cand = malloc((size_t)T * sizeof *cand);
    float *start = malloc((size_t)T * sizeof *start), *end = malloc((size_t)T * sizeof *end);
    span *spans = malloc((size_t)(T * T) * sizeof *spans);
    brg_status st = cand && start && end && spans ? BRG_OK : brg_error(BRG_ERR_OOM, "no memory for the spans");
    if (st == BRG_OK) {
        /* p_mask: tokens outside the context, except CLS tokens; attention_mask is all ones. */
        for (int64_t i = 0; i < T; i++)
            cand[i] = (w->seq[i] == 1 || (p->tokens.cls_id >= 0 && w->ids[i] == p->tokens.cls_id)) && w->mask[i];
        masked_softmax(w->start, cand, T, start);
        masked_softmax(w->end, cand, T, end);
        if (p->opts.handle_impossible_answer) {
            const double null = (double)(start[0] * end[0]);
            if (null < *min_null) *min_null = null;
        }
        start[0] = end[0] = 0.0f;
        for (int64_t a = 0; a < T; a++)
            for (int64_t b = 0; b < T; b++) {
                const bool kept = b >= a && b - a <= s->max_answer_len - 1;
                spans[a * T + b] = (span){kept ? start[a] * end[b] : 0.0f, a * T + b};
            }
        const int64_t want = p->opts.no_align_to_words ? s->top_k : s->top_k * 2 + 10;
        /* The best `want` spans, best first (numpy's argmax / argpartition + argsort). */
        qsort(spans, (size_t)(T * T), sizeof *spans, by_span_score);
        const int64_t kept = want < T * T ? want : T * T;
        for (int64_t k = 0; st == BRG_OK && k < kept; k++) {
            const int64_t a = spans[k].flat / T, b = spans[k].flat % T;
            if (!cand[a] || !cand[b]) continue;
            int64_t c0, c1;
            indices(p, w, a, b, &c0, &c1);
            char *text = task_slice(context, c0, c1);
            if (!text) {
                st = brg_error(BRG_ERR_OOM, "no memory for an answer");
                break;
            }
            int64_t same = -1;
            for (int64_t i = 0; i < out->n && same < 0; i++)
                if (task_lower_equal(out->v[i].text, text)) same = i;
            if (same >= 0) {
                out->v[same].score += (double)spans[k].score;
                free(text);
            } else {
                st = answers_add(out, (double)spans[k].score, c0, c1, text);
            }
        }
    }
    free(cand);
    free(start);
    free(end);
    free(spans);
    return st;
}

/* sorted(answers, key=score, reverse=True) is stable. */
static int by_answer_score(const void *a, const void *b) {
    const answer *x = a, *y = b;
    return (x->score < y->score) - (x->score > y->score);
}

static void write_answer(task_json *j, const answer *a) {
    task_json_raw(j, "{\"score\": ");
    task_json_num(j, a->score);
    task_json_raw(j, ", \"start\": ");
    task_json_int(j, a->start);
    task_json_raw(j, ", \"end\": ");
    task_json_int(j, a->end);
    task_json_raw(j, ", \"answer\": ");
    task_json_str(j, a->text);
    task_json_raw(j, "}");
}

static brg_status example_result(const brg_task_pipeline *p, const windows *w, int64_t example, const char *context,
                                 char **out) {
    const state *s = p->state;
    answers a = {0};
    double min_null = 1000000;
    brg_status st = BRG_OK;
    for (int64_t i = 0; st == BRG_OK && i < w->n; i++)
        if (w->v[i].example == example) st = window_answers(p, &w->v[i], context, &a, &min_null);
    if (st == BRG_OK && p->opts.handle_impossible_answer) {
        char *empty = strdup("");
        st = empty ? answers_add(&a, min_null, 0, 0, empty) : brg_error(BRG_ERR_OOM, "no memory for an answer");
    }
    if (st == BRG_OK) {
        /* qsort is not stable: sort indices by (score, position) instead. */
        for (int64_t i = 1; i < a.n; i++) {
            answer x = a.v[i];
            int64_t k = i - 1;
            while (k >= 0 && by_answer_score(&a.v[k], &x) > 0) a.v[k + 1] = a.v[k], k--;
            a.v[k + 1] = x;
        }
        const int64_t shown = a.n < s->top_k ? a.n : s->top_k;
        task_json j;
        st = task_json_open(&j);
        if (st == BRG_OK) {
            if (shown == 1) write_answer(&j, &a.v[0]);
            else {
                task_json_raw(&j, "[");
                for (int64_t i = 0; i < shown; i++) {
                    if (i) task_json_raw(&j, ", ");
                    write_answer(&j, &a.v[i]);
                }
                task_json_raw(&j, "]");
            }
            st = task_json_close(&j, out);
        }
    }
    for (int64_t i = 0; i < a.n; i++) free(a.v[i].text);
    free(a.v);
    return st;
}

/* The model on every window, batch_size windows per forward pass. */
static brg_status run_windows(brg_task_pipeline *p, windows *w) {
    const int64_t B = p->opts.batch_size;
    const brg_encoding **rows = malloc((size_t)B * sizeof *rows);
    if (!rows) return brg_error(BRG_ERR_OOM, "no memory for a batch");
    brg_status st = BRG_OK;
    for (int64_t b0 = 0; st == BRG_OK && b0 < w->n; b0 += B) {
        const int64_t nb = w->n - b0 < B ? w->n - b0 : B;
        for (int64_t r = 0; r < nb; r++) rows[r] = &w->v[b0 + r].view;
        const size_t mark = brg_arena_mark(p->arena);
        brg_named_tensor outs[BRG_INFERENCE_MAX_OUTPUTS];
        int n_outs = 0;
        int64_t T = 0;
        st = task_forward(p, rows, nb, outs, &n_outs, &T);
        const brg_tensor *s = st == BRG_OK ? task_output(outs, n_outs, "start_logits") : NULL;
        const brg_tensor *e = st == BRG_OK ? task_output(outs, n_outs, "end_logits") : NULL;
        if (st == BRG_OK && (!s || !e || s->ndim != 2 || e->ndim != 2 || s->shape[1] != T || e->shape[1] != T))
            st = brg_error(BRG_ERR_FORMAT, "%s gives no [batch, tokens] start_logits and end_logits",
                           p->model->ops->architecture);
        for (int64_t r = 0; st == BRG_OK && r < nb; r++) {
            window *x = &w->v[b0 + r];
            memcpy(x->start, (const float *)s->data + r * T, x->n * sizeof *x->start);
            memcpy(x->end, (const float *)e->data + r * T, x->n * sizeof *x->end);
        }
        brg_arena_reset(p->arena, mark);
    }
    free(rows);
    return st;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    windows w = {0};
    brg_status st = BRG_OK;
    for (int64_t i = 0; st == BRG_OK && i < n; i++) {
        brg_encoding e;
        st = task_encode(p, in[i].question, in[i].context, true, first + i, &e);
        if (st == BRG_OK) {
            st = split(p, &e, i, first + i, &w);
            brg_encoding_free(&e);
        }
    }
    if (st == BRG_OK) st = run_windows(p, &w);
    for (int64_t i = 0; st == BRG_OK && i < n; i++) st = example_result(p, &w, i, in[i].context, &results[i]);
    windows_free(&w);
    return st;
}

const task_def task_question_answering = {
    .name = "question-answering",
    .info = {.name = "question-answering",
             .inputs = "question, context",
             .models = "BertForQuestionAnswering",
             .returns = "{\"score\", \"start\", \"end\", \"answer\"} (top_k > 1: a list)",
             .follows = "transformers 4.57",
             .implemented = true},
    .fits = fits,
    .setup = setup,
    .run = run,
    .destroy = destroy,
};
