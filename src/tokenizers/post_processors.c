/* Post-processors: the special tokens around one sequence or a pair (TemplateProcessing,
 * BertProcessing, RobertaProcessing), type ids, and ByteLevel's offset trimming. */
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "tk_internal.h"

typedef enum { PP_TEMPLATE, PP_BERT, PP_ROBERTA, PP_BYTELEVEL, PP_SEQUENCE } pptype;

typedef struct special {
    char *name;
    int32_t *ids;
    char **tokens;
    size_t n;
} special;

typedef struct tpiece {
    bool is_seq;
    int seq;        /* 0 = A, 1 = B */
    int32_t type_id;
    size_t special; /* index into specials */
} tpiece;

struct tk_post {
    pptype type;
    tpiece *single, *pair;
    size_t n_single, n_pair;
    special *specials;
    size_t n_specials;
    bool trim_offsets, add_prefix_space;
    tk_post **kids;
    size_t n_kids;
};

void tk_post_free(tk_post *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_specials; i++) {
        for (size_t k = 0; k < p->specials[i].n; k++) free(p->specials[i].tokens[k]);
        free(p->specials[i].name);
        free(p->specials[i].ids);
        free(p->specials[i].tokens);
    }
    free(p->specials);
    free(p->single);
    free(p->pair);
    for (size_t i = 0; i < p->n_kids; i++) tk_post_free(p->kids[i]);
    free(p->kids);
    free(p);
}

static brg_status add_special(tk_post *p, const char *name, const int32_t *ids, const char *const *toks, size_t n) {
    special *s = realloc(p->specials, (p->n_specials + 1) * sizeof *s);
    if (!s) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    p->specials = s;
    s = &p->specials[p->n_specials++];
    *s = (special){strdup(name), calloc(n + 1, sizeof(int32_t)), calloc(n + 1, sizeof(char *)), n};
    if (!s->name || !s->ids || !s->tokens) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    for (size_t i = 0; i < n; i++) {
        s->ids[i] = ids[i];
        if (!(s->tokens[i] = strdup(toks[i]))) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    }
    return BRG_OK;
}

static brg_status find_special(const tk_post *p, const char *name, size_t *out) {
    for (size_t i = 0; i < p->n_specials; i++)
        if (strcmp(p->specials[i].name, name) == 0) {
            *out = i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_FORMAT, "TemplateProcessing: special token '%s' is used but not in special_tokens", name);
}

static brg_status parse_template(const tk_post *p, const cJSON *arr, tpiece **out, size_t *n) {
    const char *ctx = "TemplateProcessing";
    if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "%s: 'single' and 'pair' must be lists", ctx);
    *out = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof **out);
    if (!*out) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    for (const cJSON *e = arr->child; e; e = e->next) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *body = seq ? seq : sp;
        if (!cJSON_IsObject(body)) return brg_error(BRG_ERR_FORMAT, "%s: pieces must be Sequence or SpecialToken", ctx);
        tpiece *t = &(*out)[(*n)++];
        int64_t type_id;
        const char *id;
        BRG_TRY(brg_json_get_int(body, ctx, "type_id", false, 0, &type_id));
        BRG_TRY(brg_json_get_string(body, ctx, "id", true, NULL, &id));
        t->type_id = (int32_t)type_id;
        t->is_seq = seq != NULL;
        if (t->is_seq) {
            if (strcmp(id, "A") != 0 && strcmp(id, "B") != 0)
                return brg_error(BRG_ERR_FORMAT, "%s: sequence id '%s' is neither A nor B", ctx, id);
            t->seq = id[0] == 'B';
        } else {
            BRG_TRY(find_special(p, id, &t->special));
        }
    }
    return BRG_OK;
}

static brg_status parse_specials(tk_post *p, const cJSON *obj) {
    const char *ctx = "TemplateProcessing special_tokens";
    if (!obj || cJSON_IsNull(obj)) return BRG_OK;
    if (!cJSON_IsObject(obj)) return brg_error(BRG_ERR_FORMAT, "%s must be an object", ctx);
    for (const cJSON *e = obj->child; e; e = e->next) {
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(e, "ids");
        const cJSON *toks = cJSON_GetObjectItemCaseSensitive(e, "tokens");
        int n = cJSON_GetArraySize(ids);
        if (!cJSON_IsArray(ids) || !cJSON_IsArray(toks) || cJSON_GetArraySize(toks) != n)
            return brg_error(BRG_ERR_FORMAT, "%s: '%s' needs lists 'ids' and 'tokens' of one length", ctx, e->string);
        int32_t *iv = calloc((size_t)n + 1, sizeof *iv);
        const char **tv = calloc((size_t)n + 1, sizeof *tv);
        brg_status st = iv && tv ? BRG_OK : brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        const cJSON *t = toks->child;
        int k = 0;
        for (const cJSON *i = ids->child; i && st == BRG_OK; i = i->next, t = t->next, k++) {
            int64_t v;
            if (!brg_json_integer(i, &v) || v < 0 || v > INT32_MAX || !cJSON_IsString(t))
                st = brg_error(BRG_ERR_FORMAT, "%s: '%s' has a bad id or token", ctx, e->string);
            else
                iv[k] = (int32_t)v, tv[k] = t->valuestring;
        }
        if (st == BRG_OK) st = add_special(p, e->string, iv, tv, (size_t)n);
        free(iv);
        free(tv);
        BRG_TRY(st);
    }
    return BRG_OK;
}

/* "sep": ["[SEP]", 102] */
static brg_status parse_pair_token(const cJSON *j, const char *key, const char *ctx, tk_post *p) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    const cJSON *t = cJSON_IsArray(a) ? a->child : NULL, *i = t ? t->next : NULL;
    int64_t id;
    if (!cJSON_IsString(t) || !brg_json_integer(i, &id) || id < 0 || id > INT32_MAX)
        return brg_error(BRG_ERR_FORMAT, "%s: '%s' must be [token, id]", ctx, key);
    int32_t id32 = (int32_t)id;
    const char *tok = t->valuestring;
    return add_special(p, key, &id32, &tok, 1);
}

static brg_status parse_fields(const cJSON *j, tk_post *p) {
    switch (p->type) {
    case PP_TEMPLATE:
        BRG_TRY(parse_specials(p, cJSON_GetObjectItemCaseSensitive(j, "special_tokens")));
        BRG_TRY(parse_template(p, cJSON_GetObjectItemCaseSensitive(j, "single"), &p->single, &p->n_single));
        return parse_template(p, cJSON_GetObjectItemCaseSensitive(j, "pair"), &p->pair, &p->n_pair);
    case PP_BERT:
    case PP_ROBERTA: {
        const char *ctx = p->type == PP_BERT ? "BertProcessing" : "RobertaProcessing";
        BRG_TRY(parse_pair_token(j, "sep", ctx, p)); /* specials[0] */
        BRG_TRY(parse_pair_token(j, "cls", ctx, p)); /* specials[1] */
        if (p->type == PP_ROBERTA) {
            BRG_TRY(brg_json_get_bool(j, ctx, "trim_offsets", false, true, &p->trim_offsets));
            BRG_TRY(brg_json_get_bool(j, ctx, "add_prefix_space", false, true, &p->add_prefix_space));
        }
        return BRG_OK;
    }
    case PP_BYTELEVEL:
        BRG_TRY(brg_json_get_bool(j, "ByteLevel post-processor", "trim_offsets", false, true, &p->trim_offsets));
        return brg_json_get_bool(j, "ByteLevel post-processor", "add_prefix_space", false, true, &p->add_prefix_space);
    case PP_SEQUENCE: {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "processors");
        if (!cJSON_IsArray(arr)) return brg_error(BRG_ERR_FORMAT, "Sequence post-processor needs a 'processors' list");
        p->kids = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *p->kids);
        if (!p->kids) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        for (const cJSON *e = arr->child; e; e = e->next) {
            BRG_TRY(tk_post_parse(e, &p->kids[p->n_kids]));
            if (p->kids[p->n_kids]) p->n_kids++;
        }
        return BRG_OK;
    }
    }
    return BRG_OK;
}

brg_status tk_post_parse(const cJSON *j, tk_post **out) {
    static const struct { const char *name; pptype type; } names[] = {
        {"TemplateProcessing", PP_TEMPLATE}, {"BertProcessing", PP_BERT}, {"RobertaProcessing", PP_ROBERTA},
        {"ByteLevel", PP_BYTELEVEL}, {"Sequence", PP_SEQUENCE},
    };
    *out = NULL;
    if (!j || cJSON_IsNull(j)) return BRG_OK;
    const char *type = tk_type_of(j);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(type, names[i].name) != 0) continue;
        tk_post *p = calloc(1, sizeof *p);
        if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
        p->type = names[i].type;
        brg_status st = parse_fields(j, p);
        if (st != BRG_OK) {
            tk_post_free(p);
            return st;
        }
        *out = p;
        return BRG_OK;
    }
    return brg_error(BRG_ERR_UNSUPPORTED, "tokenizer.json: unknown post_processor type '%s'", type);
}

brg_status tk_post_bert(const char *cls, int32_t cls_id, const char *sep, int32_t sep_id, tk_post **out) {
    tk_post *p = calloc(1, sizeof *p);
    if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    p->type = PP_BERT;
    brg_status st = add_special(p, "sep", &sep_id, &sep, 1);
    if (st == BRG_OK) st = add_special(p, "cls", &cls_id, &cls, 1);
    if (st != BRG_OK) {
        tk_post_free(p);
        return st;
    }
    *out = p;
    return BRG_OK;
}

brg_status tk_post_bytelevel(tk_post **out) {
    tk_post *p = calloc(1, sizeof *p);
    if (!p) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory");
    p->type = PP_BYTELEVEL;
    p->trim_offsets = false;
    p->add_prefix_space = true;
    *out = p;
    return BRG_OK;
}

brg_status tk_post_validate(const tk_post *p, bool (*known)(const void *ctx, int32_t id), const void *ctx) {
    if (!p) return BRG_OK;
    for (size_t i = 0; i < p->n_specials; i++)
        for (size_t k = 0; k < p->specials[i].n; k++)
            if (!known(ctx, p->specials[i].ids[k]))
                return brg_error(BRG_ERR_FORMAT, "post_processor: special token '%s' has id %d, which no token has",
                                 p->specials[i].tokens[k], p->specials[i].ids[k]);
    for (size_t i = 0; i < p->n_kids; i++) BRG_TRY(tk_post_validate(p->kids[i], known, ctx));
    return BRG_OK;
}

size_t tk_post_added(const tk_post *p, bool pair) {
    if (!p) return 0;
    size_t n = 0;
    switch (p->type) {
    case PP_TEMPLATE: {
        const tpiece *t = pair ? p->pair : p->single;
        size_t k = pair ? p->n_pair : p->n_single;
        for (size_t i = 0; i < k; i++)
            if (!t[i].is_seq) n += p->specials[t[i].special].n;
        return n;
    }
    case PP_BERT: return pair ? 3 : 2;
    case PP_ROBERTA: return pair ? 4 : 2;
    case PP_BYTELEVEL: return 0;
    case PP_SEQUENCE:
        for (size_t i = 0; i < p->n_kids; i++) n += tk_post_added(p->kids[i], pair);
        return n;
    }
    return 0;
}

static bool space_like(uint32_t c) {
    return c == 0x120 || tk_is_whitespace(c);
}

/* ByteLevel's trim_offsets: leading/trailing Ġ or whitespace leave the token's offsets. */
static void trim_offsets(tk_enc *e, bool add_prefix_space) {
    for (size_t i = 0; i < e->n; i++) {
        tk_str t;
        if (tk_str_from_utf8(&t, e->v[i].tok, strlen(e->v[i].tok), 0) != BRG_OK) continue;
        size_t lead = 0, trail = 0;
        while (lead < t.n && space_like(t.c[lead].cp)) lead++;
        while (trail < t.n && space_like(t.c[t.n - 1 - trail].cp)) trail++;
        tk_str_free(&t);
        int64_t *s = &e->v[i].os, *en = &e->v[i].oe;
        if (lead) {
            bool first = i == 0 || *s == 0;
            if (first && add_prefix_space && lead == 1) lead = 0;
            *s = *s + (int64_t)lead < *en ? *s + (int64_t)lead : *en;
        }
        if (trail && *en >= (int64_t)trail) *en = *en - (int64_t)trail > *s ? *en - (int64_t)trail : *s;
    }
}

static brg_status append_seq(tk_enc *out, tk_enc *src, int32_t type_id, bool set_type) {
    for (size_t i = 0; i < src->n; i++) {
        tk_entry e = src->v[i];
        if (set_type) e.type = type_id;
        BRG_TRY(tk_enc_push(out, &e, e.tok));
    }
    return BRG_OK;
}

static brg_status append_special(tk_enc *out, const special *s, int32_t type_id) {
    for (size_t k = 0; k < s->n; k++) {
        tk_entry e = {.id = s->ids[k], .word = -1, .type = type_id, .special = 1, .attn = 1, .seq = -1};
        BRG_TRY(tk_enc_push(out, &e, s->tokens[k]));
    }
    return BRG_OK;
}

static brg_status run_template(const tk_post *p, tk_enc *a, tk_enc *b, bool add_special, tk_enc *out) {
    const tpiece *t = b ? p->pair : p->single;
    size_t k = b ? p->n_pair : p->n_single;
    for (size_t i = 0; i < k; i++) {
        if (t[i].is_seq) BRG_TRY(append_seq(out, t[i].seq ? b : a, t[i].type_id, true));
        else if (add_special) BRG_TRY(append_special(out, &p->specials[t[i].special], t[i].type_id));
    }
    return BRG_OK;
}

/* [CLS] A [SEP] (B [SEP]); Roberta: <s> A </s> (</s> B </s>), all type 0. */
static brg_status run_bert(const tk_post *p, tk_enc *a, tk_enc *b, bool add_special, tk_enc *out) {
    bool roberta = p->type == PP_ROBERTA;
    const special *sep = &p->specials[0], *cls = &p->specials[1];
    if (roberta && p->trim_offsets) {
        trim_offsets(a, p->add_prefix_space);
        if (b) trim_offsets(b, p->add_prefix_space);
    }
    int32_t btype = roberta ? 0 : 1;
    if (!add_special) {
        BRG_TRY(append_seq(out, a, 0, roberta));
        return b ? append_seq(out, b, btype, roberta) : BRG_OK;
    }
    BRG_TRY(append_special(out, cls, 0));
    BRG_TRY(append_seq(out, a, 0, true));
    BRG_TRY(append_special(out, sep, 0));
    if (!b) return BRG_OK;
    if (roberta) BRG_TRY(append_special(out, sep, 0));
    BRG_TRY(append_seq(out, b, btype, true));
    return append_special(out, sep, btype);
}

/* Sequence: every processor but the last runs on each sequence alone (offset trimming and the
 * like: ByteLevel then TemplateProcessing, as Llama 3 files have it); the last one combines. */
static brg_status run_sequence(const tk_post *p, tk_enc *a, tk_enc *b, bool add_special, tk_enc *out) {
    tk_enc cur = {0}, curb = {0};
    brg_status st = append_seq(&cur, a, 0, false);
    if (st == BRG_OK && b) st = append_seq(&curb, b, 0, false);
    for (size_t i = 0; i + 1 < p->n_kids && st == BRG_OK; i++) {
        tk_enc next = {0}, nextb = {0};
        st = tk_post_process(p->kids[i], &cur, NULL, add_special, &next);
        if (st == BRG_OK && b) st = tk_post_process(p->kids[i], &curb, NULL, add_special, &nextb);
        tk_enc_free(&cur);
        tk_enc_free(&curb);
        cur = next;
        curb = nextb;
    }
    if (st == BRG_OK && p->n_kids) {
        st = tk_post_process(p->kids[p->n_kids - 1], &cur, b ? &curb : NULL, add_special, out);
    } else if (st == BRG_OK) {
        st = append_seq(out, &cur, 0, false);
        if (st == BRG_OK && b) st = append_seq(out, &curb, 0, false);
    }
    tk_enc_free(&cur);
    tk_enc_free(&curb);
    return st;
}

brg_status tk_post_process(const tk_post *p, tk_enc *a, tk_enc *b, bool add_special, tk_enc *out) {
    brg_status st = BRG_OK;
    if (!p || p->type == PP_BYTELEVEL) {
        if (p && p->trim_offsets) {
            trim_offsets(a, p->add_prefix_space);
            if (b) trim_offsets(b, p->add_prefix_space);
        }
        st = append_seq(out, a, 0, false);
        if (st == BRG_OK && b) st = append_seq(out, b, 0, false);
    } else if (p->type == PP_TEMPLATE) {
        st = run_template(p, a, b, add_special, out);
    } else if (p->type == PP_SEQUENCE) {
        st = run_sequence(p, a, b, add_special, out);
    } else {
        st = run_bert(p, a, b, add_special, out);
    }
    return st;
}
