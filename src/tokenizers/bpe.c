/* The BPE model (GPT-2, RoBERTa and friends): characters (with continuing_subword_prefix /
 * end_of_word_suffix, byte_fallback, unk) merged by rank. The lowest-ranked adjacent pair is
 * merged first, leftmost on ties, which is the order `tokenizers`' priority queue pops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

typedef struct merge_slot {
    uint64_t key; /* (a + 1) << 32 | b; 0 = empty */
    int32_t rank, id;
} merge_slot;

struct tk_bpe {
    tk_vocab vocab;
    char **rev;
    size_t n_rev;
    merge_slot *merges;
    size_t merge_cap, n_merges;
    char *unk, *prefix, *suffix; /* NULL when unset */
    bool fuse_unk, byte_fallback, ignore_merges;
};

brg_status tk_build_rev(const tk_vocab *v, char ***rev, size_t *n_rev, const char *what);
brg_status tk_vocab_from_json(const cJSON *obj, const char *ctx, tk_vocab *v);

void tk_bpe_free(tk_bpe *b) {
    if (!b) return;
    tk_vocab_free(&b->vocab);
    free(b->rev);
    free(b->merges);
    free(b->unk);
    free(b->prefix);
    free(b->suffix);
    free(b);
}

static uint64_t pair_key(int32_t a, int32_t b) {
    return ((uint64_t)(uint32_t)a + 1) << 32 | (uint32_t)b;
}

static size_t merge_find(const tk_bpe *b, uint64_t key) {
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 20) & (b->merge_cap - 1);
    while (b->merges[i].key && b->merges[i].key != key) i = (i + 1) & (b->merge_cap - 1);
    return i;
}

static brg_status merges_reserve(tk_bpe *b, size_t n) {
    size_t cap = 64;
    while (cap < 2 * n + 2) cap *= 2;
    b->merges = calloc(cap, sizeof *b->merges);
    b->merge_cap = cap;
    return b->merges ? BRG_OK : brg_error(BRG_ERR_OOM, "tokenizer: out of memory (merges)");
}

/* A later duplicate of a pair takes the later rank, as a HashMap insert does. */
static brg_status add_merge(tk_bpe *b, const char *l, size_t ll, const char *r, size_t rl, int32_t rank,
                            const char *ctx) {
    int32_t a = tk_vocab_get(&b->vocab, l, ll), c = tk_vocab_get(&b->vocab, r, rl);
    size_t plen = b->prefix ? strlen(b->prefix) : 0;
    if (a < 0 || c < 0)
        return brg_error(BRG_ERR_FORMAT, "%s: merge %d '%.*s %.*s' uses a token that is not in the vocabulary", ctx,
                         rank, (int)ll, l, (int)rl, r);
    if (rl < plen) return brg_error(BRG_ERR_FORMAT, "%s: merge %d's right part is shorter than the prefix", ctx, rank);
    char *m = malloc(ll + rl + 1);
    if (!m) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (merges)");
    memcpy(m, l, ll);
    memcpy(m + ll, r + plen, rl - plen);
    int32_t id = tk_vocab_get(&b->vocab, m, ll + rl - plen);
    free(m);
    if (id < 0)
        return brg_error(BRG_ERR_FORMAT, "%s: merge %d '%.*s %.*s' makes a token that is not in the vocabulary", ctx,
                         rank, (int)ll, l, (int)rl, r);
    size_t s = merge_find(b, pair_key(a, c));
    if (!b->merges[s].key) b->n_merges++;
    b->merges[s] = (merge_slot){pair_key(a, c), rank, id};
    return BRG_OK;
}

/* "a b" (one ASCII space, exactly two parts) */
static brg_status add_merge_line(tk_bpe *b, const char *line, size_t len, int32_t rank, const char *ctx) {
    const char *sp = memchr(line, ' ', len);
    if (!sp || memchr(sp + 1, ' ', len - (size_t)(sp - line) - 1) || sp == line || sp + 1 == line + len)
        return brg_error(BRG_ERR_FORMAT, "%s: merge %d '%.*s' is not two tokens separated by one space", ctx, rank,
                         (int)len, line);
    return add_merge(b, line, (size_t)(sp - line), sp + 1, len - (size_t)(sp - line) - 1, rank, ctx);
}

static brg_status opt_string(const cJSON *j, const char *ctx, const char *key, char **out) {
    const char *s;
    BRG_TRY(brg_json_get_string(j, ctx, key, false, NULL, &s));
    if (s && s[0] && !(*out = strdup(s))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    return BRG_OK;
}

static brg_status parse_merges(tk_bpe *b, const cJSON *arr, const char *ctx) {
    if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "%s: 'merges' must be a list", ctx);
    BRG_TRY(merges_reserve(b, (size_t)cJSON_GetArraySize(arr)));
    int32_t rank = 0;
    for (const cJSON *e = arr->child; e; e = e->next, rank++) {
        if (cJSON_IsString(e)) {
            BRG_TRY(add_merge_line(b, e->valuestring, strlen(e->valuestring), rank, ctx));
            continue;
        }
        const cJSON *l = cJSON_IsArray(e) ? e->child : NULL, *r = l ? l->next : NULL;
        if (!cJSON_IsString(l) || !cJSON_IsString(r) || r->next)
            return brg_error(BRG_ERR_FORMAT, "%s: merge %d must be \"a b\" or [\"a\", \"b\"]", ctx, rank);
        const char *ls = l->valuestring, *rs = r->valuestring;
        BRG_TRY(add_merge(b, ls, strlen(ls), rs, strlen(rs), rank, ctx));
    }
    return BRG_OK;
}

static brg_status parse_into(const cJSON *j, tk_bpe *b) {
    const char *ctx = "BPE model";
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dropout");
    if (d && !cJSON_IsNull(d) && (!cJSON_IsNumber(d) || d->valuedouble < 0 || d->valuedouble > 1))
        return brg_error(BRG_ERR_FORMAT, "%s: dropout must be null or in [0, 1]", ctx);
    BRG_TRY(opt_string(j, ctx, "unk_token", &b->unk));
    BRG_TRY(opt_string(j, ctx, "continuing_subword_prefix", &b->prefix));
    BRG_TRY(opt_string(j, ctx, "end_of_word_suffix", &b->suffix));
    BRG_TRY(brg_json_get_bool(j, ctx, "fuse_unk", false, false, &b->fuse_unk));
    BRG_TRY(brg_json_get_bool(j, ctx, "byte_fallback", false, false, &b->byte_fallback));
    BRG_TRY(brg_json_get_bool(j, ctx, "ignore_merges", false, false, &b->ignore_merges));
    BRG_TRY(tk_vocab_from_json(cJSON_GetObjectItemCaseSensitive(j, "vocab"), ctx, &b->vocab));
    BRG_TRY(parse_merges(b, cJSON_GetObjectItemCaseSensitive(j, "merges"), ctx));
    return tk_build_rev(&b->vocab, &b->rev, &b->n_rev, "BPE");
}

brg_status tk_bpe_parse(const cJSON *j, tk_bpe **out) {
    tk_bpe *b = calloc(1, sizeof *b);
    if (!b) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    brg_status st = parse_into(j, b);
    if (st != BRG_OK) {
        tk_bpe_free(b);
        return st;
    }
    *out = b;
    return BRG_OK;
}

/* merges.txt: "#version" lines are skipped, every other line is one "a b" merge. */
static brg_status read_merges_txt(tk_bpe *b, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!text || got != (size_t)size) {
        free(text);
        return brg_error(BRG_ERR_IO, "cannot read %s", path);
    }
    text[got] = 0;
    size_t lines = 1;
    for (size_t i = 0; i < got; i++) lines += text[i] == '\n';
    brg_status st = merges_reserve(b, lines);
    int32_t rank = 0;
    for (size_t i = 0; i < got && st == BRG_OK;) {
        size_t e = i;
        while (e < got && text[e] != '\n') e++;
        size_t len = e - i;
        if (len && text[i + len - 1] == '\r') len--;
        if (!(len >= 8 && memcmp(text + i, "#version", 8) == 0)) st = add_merge_line(b, text + i, len, rank++, path);
        i = e + 1;
    }
    free(text);
    return st;
}

brg_status tk_bpe_from_files(const char *vocab_json, const char *merges_txt, tk_bpe **out) {
    cJSON *root = NULL;
    BRG_TRY(brg_json_load_file(vocab_json, (size_t)256 << 20, &root));
    tk_bpe *b = calloc(1, sizeof *b);
    brg_status st = b ? tk_vocab_from_json(root, vocab_json, &b->vocab) : brg_error(BRG_ERR_OOM, "out of memory");
    cJSON_Delete(root);
    if (st == BRG_OK) st = read_merges_txt(b, merges_txt);
    if (st == BRG_OK) st = tk_build_rev(&b->vocab, &b->rev, &b->n_rev, "BPE");
    if (st != BRG_OK) {
        tk_bpe_free(b);
        return st;
    }
    *out = b;
    return BRG_OK;
}

typedef struct sym {
    int32_t id;
    size_t s, e; /* char range in the word */
} sym;

static brg_status push_sym(sym **v, size_t *n, size_t *cap, int32_t id, size_t s, size_t e) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 32;
        sym *p = realloc(*v, nc * sizeof *p);
        if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (BPE)");
        *v = p;
        *cap = nc;
    }
    (*v)[(*n)++] = (sym){id, s, e};
    return BRG_OK;
}

/* Initial symbols: one per char (prefix / suffix added), byte fallback, or unk. */
static brg_status initial_symbols(const tk_bpe *b, const tk_str *w, const char *text, const size_t *pos, sym **v,
                                  size_t *n) {
    size_t cap = 0, plen = b->prefix ? strlen(b->prefix) : 0, slen = b->suffix ? strlen(b->suffix) : 0;
    char buf[256];
    int32_t unk = b->unk ? tk_vocab_get(&b->vocab, b->unk, strlen(b->unk)) : -1;
    for (size_t i = 0; i < w->n; i++) {
        size_t cl = pos[i + 1] - pos[i], k = 0;
        if (i > 0 && plen && plen + cl + slen < sizeof buf) memcpy(buf, b->prefix, plen), k = plen;
        memcpy(buf + k, text + pos[i], cl);
        k += cl;
        if (i + 1 == w->n && slen && k + slen < sizeof buf) memcpy(buf + k, b->suffix, slen), k += slen;
        int32_t id = tk_vocab_get(&b->vocab, buf, k);
        if (id >= 0) {
            BRG_TRY(push_sym(v, n, &cap, id, i, i + 1));
            continue;
        }
        if (b->byte_fallback) {
            int32_t ids[4];
            bool all = true;
            for (size_t j = 0; j < cl && all; j++) {
                char hex[8];
                snprintf(hex, sizeof hex, "<0x%02X>", (unsigned char)text[pos[i] + j]);
                ids[j] = tk_vocab_get(&b->vocab, hex, strlen(hex));
                all = ids[j] >= 0;
            }
            if (all) {
                for (size_t j = 0; j < cl; j++) BRG_TRY(push_sym(v, n, &cap, ids[j], i, i + 1));
                continue;
            }
        }
        if (!b->unk) continue; /* no unk token: the char is dropped, as in `tokenizers` */
        if (unk < 0) return brg_error(BRG_ERR_FORMAT, "BPE: unk_token '%s' is not in the vocabulary", b->unk);
        if (b->fuse_unk && *n && (*v)[*n - 1].id == unk) (*v)[*n - 1].e = i + 1;
        else BRG_TRY(push_sym(v, n, &cap, unk, i, i + 1));
    }
    return BRG_OK;
}

/* A candidate merge of the symbol at `pos` with its right neighbour. */
typedef struct cand {
    int32_t rank;
    int32_t pos;
} cand;

static bool cand_less(cand a, cand b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    for (; i > 0 && cand_less(c, h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(h[c + 1], h[c])) c++;
        if (!cand_less(h[c], last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

/* The merge of pair (a, b), or NULL. */
static const merge_slot *merge_of(const tk_bpe *b, int32_t a, int32_t c) {
    size_t s = merge_find(b, pair_key(a, c));
    return b->merges[s].key ? &b->merges[s] : NULL;
}

/* Word::merge_all: a min-queue of (rank, position); a popped candidate whose symbols changed
 * since it was queued is stale and skipped. Symbols form a linked list over v[]. */
static brg_status merge_all(const tk_bpe *b, sym *v, size_t *n) {
    /* n - 1 initial candidates and at most two per merge, of which there are n - 1 at most. */
    size_t cap = 3 * *n + 2, hn = 0;
    cand *h = malloc(cap * sizeof *h);
    int32_t *next = malloc((*n + 1) * sizeof *next), *prev = malloc((*n + 1) * sizeof *prev);
    if (!h || !next || !prev) {
        free(h);
        free(next);
        free(prev);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (BPE)");
    }
    for (size_t i = 0; i < *n; i++) {
        next[i] = i + 1 < *n ? (int32_t)i + 1 : -1;
        prev[i] = (int32_t)i - 1;
        const merge_slot *m = i + 1 < *n ? merge_of(b, v[i].id, v[i + 1].id) : NULL;
        if (m) heap_push(h, &hn, (cand){m->rank, (int32_t)i});
    }
    while (hn) {
        cand c = heap_pop(h, &hn);
        int32_t r = next[c.pos];
        if (v[c.pos].id < 0 || r < 0) continue;
        const merge_slot *m = merge_of(b, v[c.pos].id, v[r].id);
        if (!m || m->rank != c.rank) continue;
        v[c.pos].id = m->id;
        v[c.pos].e = v[r].e;
        v[r].id = -1;
        next[c.pos] = next[r];
        if (next[r] >= 0) prev[next[r]] = c.pos;
        const merge_slot *left = prev[c.pos] >= 0 ? merge_of(b, v[prev[c.pos]].id, v[c.pos].id) : NULL;
        const merge_slot *right = next[c.pos] >= 0 ? merge_of(b, v[c.pos].id, v[next[c.pos]].id) : NULL;
        BRG_ASSERT(hn + 2 <= cap);
        if (left) heap_push(h, &hn, (cand){left->rank, prev[c.pos]});
        if (right) heap_push(h, &hn, (cand){right->rank, c.pos});
    }
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (v[i].id >= 0) v[k++] = v[i];
    *n = k;
    free(h);
    free(next);
    free(prev);
    return BRG_OK;
}

brg_status tk_bpe_tokenize(const tk_bpe *b, const tk_str *w, tk_tokens *out) {
    if (w->n == 0) return BRG_OK;
    size_t *pos;
    char *text = tk_str_utf8(w, 0, w->n, &pos);
    if (!text) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (BPE)");
    brg_status st = BRG_OK;
    int32_t whole = b->ignore_merges ? tk_vocab_get(&b->vocab, text, pos[w->n]) : -1;
    if (whole >= 0) {
        st = tk_tokens_push(out, whole, text, pos[w->n], 0, w->n);
    } else {
        sym *v = NULL;
        size_t n = 0;
        st = initial_symbols(b, w, text, pos, &v, &n);
        if (st == BRG_OK) st = merge_all(b, v, &n);
        for (size_t i = 0; i < n && st == BRG_OK; i++) {
            const char *t = (size_t)v[i].id < b->n_rev && b->rev[v[i].id] ? b->rev[v[i].id] : "";
            st = tk_tokens_push(out, v[i].id, t, strlen(t), v[i].s, v[i].e);
        }
        free(v);
    }
    free(text);
    free(pos);
    return st;
}

const tk_vocab *tk_bpe_vocab(const tk_bpe *b) { return &b->vocab; }
const char *tk_bpe_prefix(const tk_bpe *b) { return b->prefix; }

const char *const *tk_bpe_rev(const tk_bpe *b, size_t *n) {
    *n = b->n_rev;
    return (const char *const *)b->rev;
}
