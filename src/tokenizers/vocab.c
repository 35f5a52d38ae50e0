/* A string -> id map (open addressing, FNV-1a) for vocabularies, merges and added tokens. */
#include <stdlib.h>
#include <string.h>

#include "tk_internal.h"

static uint64_t hash(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)k[i]) * 1099511628211ULL;
    return h;
}

static size_t slot(const tk_vocab *v, const char *key, size_t klen) {
    size_t i = (size_t)hash(key, klen) & (v->cap - 1);
    while (v->keys[i] && !(v->lens[i] == klen && memcmp(v->keys[i], key, klen) == 0))
        i = (i + 1) & (v->cap - 1);
    return i;
}

static brg_status grow(tk_vocab *v) {
    size_t nc = v->cap ? v->cap * 2 : 64;
    tk_vocab n = {calloc(nc, sizeof(char *)), calloc(nc, sizeof(size_t)), calloc(nc, sizeof(int32_t)), nc, v->count};
    if (!n.keys || !n.lens || !n.vals) {
        free(n.keys);
        free(n.lens);
        free(n.vals);
        return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (vocabulary)");
    }
    for (size_t i = 0; i < v->cap; i++) {
        if (!v->keys[i]) continue;
        size_t s = slot(&n, v->keys[i], v->lens[i]);
        n.keys[s] = v->keys[i];
        n.lens[s] = v->lens[i];
        n.vals[s] = v->vals[i];
    }
    free(v->keys);
    free(v->lens);
    free(v->vals);
    *v = n;
    return BRG_OK;
}

/* A later put of the same key overwrites, as a Rust HashMap insert does. */
brg_status tk_vocab_put(tk_vocab *v, const char *key, size_t klen, int32_t id) {
    if ((v->count + 1) * 2 > v->cap) BRG_TRY(grow(v));
    size_t s = slot(v, key, klen);
    if (!v->keys[s]) {
        char *k = malloc(klen + 1);
        if (!k) return brg_error(BRG_ERR_OOM, "tokenizer: out of memory (vocabulary)");
        memcpy(k, key, klen);
        k[klen] = 0;
        v->keys[s] = k;
        v->lens[s] = klen;
        v->count++;
    }
    v->vals[s] = id;
    return BRG_OK;
}

int32_t tk_vocab_get(const tk_vocab *v, const char *key, size_t klen) {
    if (!v->cap) return -1;
    size_t s = slot(v, key, klen);
    return v->keys[s] ? v->vals[s] : -1;
}

void tk_vocab_free(tk_vocab *v) {
    for (size_t i = 0; i < v->cap; i++) free(v->keys[i]);
    free(v->keys);
    free(v->lens);
    free(v->vals);
    *v = (tk_vocab){0};
}
