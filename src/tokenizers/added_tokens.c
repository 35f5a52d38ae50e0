/* Added tokens ([CLS], <mask>, <|endoftext|>, ...): found in the raw input (non-normalized
 * ones) and then in each normalized segment (normalized ones) before the pre-tokenizer runs,
 * with leftmost-longest matching and the single_word / lstrip / rstrip rules of `tokenizers`. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

void tk_added_free(tk_added_vocab *av) {
    for (size_t i = 0; i < av->n; i++) {
        free(av->v[i].content);
        free(av->v[i].decoded);
        tk_str_free(&av->v[i].norm);
    }
    free(av->v);
    *av = (tk_added_vocab){0};
}

static brg_status push(tk_added_vocab *av, const tk_added *a) {
    if (av->n == av->cap) {
        size_t nc = av->cap ? av->cap * 2 : 16;
        tk_added *p = realloc(av->v, nc * sizeof *p);
        if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (added tokens)");
        av->v = p;
        av->cap = nc;
    }
    av->v[av->n] = *a;
    av->v[av->n].decoded = NULL;
    if (!(av->v[av->n].content = strdup(a->content))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    av->n++;
    return BRG_OK;
}

brg_status tk_added_push(tk_added_vocab *av, const char *content, int32_t id, bool special) {
    tk_added a = {.content = (char *)content, .id = id, .special = special, .normalized = !special};
    return push(av, &a);
}

brg_status tk_added_parse(const cJSON *arr, tk_added_vocab *av) {
    const char *ctx = "tokenizer.json added_tokens";
    if (!arr || cJSON_IsNull(arr)) return BRG_OK;
    if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "%s must be a list", ctx);
    for (const cJSON *e = arr->child; e; e = e->next) {
        if (!cJSON_IsObject(e)) return brg_error(BRG_ERR_FORMAT, "%s: every entry must be an object", ctx);
        tk_added a = {0};
        const char *content;
        int64_t id;
        BRG_TRY(brg_json_get_string(e, ctx, "content", true, NULL, &content));
        BRG_TRY(brg_json_get_int(e, ctx, "id", true, 0, &id));
        if (id < 0 || id > INT32_MAX)
            return brg_error(BRG_ERR_FORMAT, "%s: '%s' has id %lld out of range", ctx, content, (long long)id);
        BRG_TRY(brg_json_get_bool(e, ctx, "special", false, false, &a.special));
        BRG_TRY(brg_json_get_bool(e, ctx, "single_word", false, false, &a.single_word));
        BRG_TRY(brg_json_get_bool(e, ctx, "lstrip", false, false, &a.lstrip));
        BRG_TRY(brg_json_get_bool(e, ctx, "rstrip", false, false, &a.rstrip));
        BRG_TRY(brg_json_get_bool(e, ctx, "normalized", false, !a.special, &a.normalized));
        if (!content[0]) continue; /* `tokenizers` ignores empty tokens */
        a.content = (char *)content;
        a.id = (int32_t)id;
        BRG_TRY(push(av, &a));
    }
    return BRG_OK;
}

brg_status tk_added_prepare(tk_added_vocab *av, const tk_normalizer *norm) {
    for (size_t i = 0; i < av->n; i++) {
        tk_added *a = &av->v[i];
        tk_str_free(&a->norm);
        BRG_TRY(tk_str_from_utf8(&a->norm, a->content, strlen(a->content), 0));
        if (!a->normalized || !norm) continue;
        BRG_TRY(tk_normalizer_apply(norm, &a->norm));
        free(a->decoded);
        a->decoded = tk_str_utf8(&a->norm, 0, a->norm.n, NULL);
        if (!a->decoded) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        if (strcmp(a->decoded, a->content) == 0) {
            free(a->decoded);
            a->decoded = NULL;
        }
    }
    return BRG_OK;
}

/* Length in chars of token `a` if it matches s at i (its raw or normalized form), else 0. */
static size_t match_at(const tk_added *a, const tk_str *s, size_t i) {
    const tk_str *p = &a->norm;
    if (p->n == 0 || i + p->n > s->n) return 0;
    for (size_t k = 0; k < p->n; k++)
        if (s->c[i + k].cp != p->c[k].cp) return 0;
    return p->n;
}

/* The leftmost match at or after `from`, the longest there (ties: the earlier token). */
static bool find(const tk_added_vocab *av, bool normalized, const tk_str *s, size_t from, size_t *ms, size_t *me,
                 size_t *which) {
    for (size_t i = from; i < s->n; i++) {
        size_t best = 0;
        for (size_t t = 0; t < av->n; t++) {
            if (av->v[t].normalized != normalized || (av->encode_special && av->v[t].special)) continue;
            size_t len = match_at(&av->v[t], s, i);
            if (len > best) best = len, *which = t;
        }
        if (best) {
            *ms = i;
            *me = i + best;
            return true;
        }
    }
    return false;
}

static brg_status emit(tk_splits *out, const tk_str *s, size_t a, size_t b, int32_t id) {
    if (a >= b) return BRG_OK;
    tk_str part;
    BRG_TRY(tk_str_copy(&part, s, a, b));
    return tk_splits_push(out, &part, id);
}

/* AddedVocabulary::find_matches + split_with_indices over one segment. */
static brg_status split_segment(const tk_added_vocab *av, bool normalized, const tk_str *s, tk_splits *out) {
    size_t pos = 0, done = 0, ms, me, t;
    while (find(av, normalized, s, pos, &ms, &me, &t)) {
        const tk_added *a = &av->v[t];
        size_t start = ms, stop = me;
        pos = me;
        if (a->single_word) {
            bool before = ms > 0 && tk_is_word_char(s->c[ms - 1].cp);
            bool after = me < s->n && tk_is_word_char(s->c[me].cp);
            if (before || after) continue;
        }
        if (a->lstrip) {
            while (start > done && tk_is_whitespace(s->c[start - 1].cp)) start--;
        }
        if (a->rstrip)
            while (stop < s->n && tk_is_whitespace(s->c[stop].cp)) stop++;
        BRG_TRY(emit(out, s, done, start, -1));
        BRG_TRY(emit(out, s, start, stop, a->id));
        done = stop;
        if (pos < done) pos = done;
    }
    return emit(out, s, done, s->n, -1);
}

brg_status tk_added_extract(const tk_added_vocab *av, const tk_normalizer *norm, tk_str *input, tk_splits *out) {
    tk_splits raw = {0};
    brg_status st = split_segment(av, false, input, &raw);
    for (size_t i = 0; i < raw.n && st == BRG_OK; i++) {
        if (raw.v[i].token_id >= 0) {
            st = tk_splits_push(out, &raw.v[i].s, raw.v[i].token_id);
            continue;
        }
        st = tk_normalizer_apply(norm, &raw.v[i].s);
        if (st == BRG_OK) st = split_segment(av, true, &raw.v[i].s, out);
    }
    tk_splits_free(&raw);
    return st;
}
