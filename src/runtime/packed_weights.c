/* The per-device store of packed inference weights (packed_weights.h). */
#include "packed_weights.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime_internal.h"

/* A parameter's memory, sorted by address for the lookup. */
typedef struct held_param {
    const float *data;
    int64_t numel;
    int param;
} held_param;

/* One packed (or refused) copy. */
typedef struct pack {
    packed_weight_record r;
    brg_packed_b b;
    void *owned;  /* panels this device packed, in one of its chunks (else an entry's, or none) */
    bool refused; /* the budget had no room: the plain product */
    bool current; /* per run: packed from the weights of the run under way */
} pack;

/* Panels live in large chunks advised to use huge pages: a GPT-2 small device packs some 250 MB
 * at its first micro-batch, and faulting that in 4 KiB pages costs more system time than the
 * packing itself. Pages of a chunk's unused tail are never touched, so cost nothing. */
#define CHUNK_BYTES ((size_t)64 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

typedef struct chunk {
    char *base;
    size_t cap, used;
} chunk;

struct packed_weights {
    held_param *held;
    int n_held;
    pack **packs;
    int n_packs, cap;
    chunk *chunks;
    int n_chunks, chunks_cap;
    brg_arena *arena;
    /* An inference device with a memory budget keeps the plain products: its panels would take
     * about its weights' bytes again, at a point of a run where the budget must still hold the
     * activations to come, which it was sized for without them. */
    bool budgeted;
    bool per_run, in_run; /* a training device's store, and whether a run is under way */
};

static int by_address(const void *a, const void *b) {
    const float *x = ((const held_param *)a)->data, *y = ((const held_param *)b)->data;
    return x < y ? -1 : x > y;
}

brg_status packed_weights_create(const brg_model *view, const bool *holds, brg_arena *arena, bool per_run,
                                 packed_weights **out) {
    *out = NULL;
    packed_weights *pw = calloc(1, sizeof *pw);
    if (pw) pw->held = calloc((size_t)(view->n_params ? view->n_params : 1), sizeof *pw->held);
    if (!pw || !pw->held) {
        free(pw);
        return brg_error(BRG_ERR_OOM, "cannot allocate the packed-weights table");
    }
    pw->arena = arena;
    pw->per_run = per_run;
    /* A training device's plan counted its panels within the budget (brg_runtime_options
     * pack_weights); the budget still refuses what it has no room for. */
    pw->budgeted = !per_run && brg_arena_budget(arena) != BRG_ARENA_UNLIMITED;
    for (int p = 0; p < view->n_params; p++) {
        const brg_tensor *t = view->params[p].tensor;
        if (!holds[p] || !t || t->dtype != BRG_DTYPE_F32 || !t->data) continue;
        pw->held[pw->n_held++] = (held_param){t->data, brg_tensor_numel(t), p};
    }
    qsort(pw->held, (size_t)pw->n_held, sizeof *pw->held, by_address);
    *out = pw;
    return BRG_OK;
}

static void free_packs(packed_weights *pw) {
    for (int i = 0; i < pw->n_packs; i++) free(pw->packs[i]);
    pw->n_packs = 0;
    for (int i = 0; i < pw->n_chunks; i++) free(pw->chunks[i].base);
    free(pw->chunks);
    pw->chunks = NULL;
    pw->n_chunks = pw->chunks_cap = 0;
}

/* `bytes` of 64-byte aligned panel memory, NULL when the host has none. */
static void *panel_memory(packed_weights *pw, size_t bytes) {
    bytes = (bytes + 63) / 64 * 64;
    chunk *last = pw->n_chunks ? &pw->chunks[pw->n_chunks - 1] : NULL;
    if (last && last->cap - last->used >= bytes) {
        void *p = last->base + last->used;
        last->used += bytes;
        return p;
    }
    if (pw->n_chunks == pw->chunks_cap) {
        const int cap = pw->chunks_cap ? 2 * pw->chunks_cap : 4;
        chunk *grown = realloc(pw->chunks, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        pw->chunks = grown;
        pw->chunks_cap = cap;
    }
    const size_t cap = bytes > CHUNK_BYTES ? (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : CHUNK_BYTES;
    char *base = aligned_alloc(HUGE_PAGE, cap);
    if (!base) return NULL;
    (void)madvise(base, cap, MADV_HUGEPAGE); /* a hint: refused, 4 KiB pages do */
    pw->chunks[pw->n_chunks++] = (chunk){base, cap, bytes};
    return base;
}

void packed_weights_destroy(packed_weights *pw) {
    if (!pw) return;
    free_packs(pw);
    free(pw->packs);
    free(pw->held);
    free(pw);
}

static const held_param *held_at(const packed_weights *pw, const float *data) {
    const held_param key = {data, 0, 0};
    return bsearch(&key, pw->held, (size_t)pw->n_held, sizeof key, by_address);
}

static bool same_matrix(const packed_weight_record *r, int param, brg_gemm_pack_layout layout, bool trans_b, int64_t K,
                        int64_t N, int64_t ldb) {
    return r->param == param && r->layout == layout && r->trans_b == trans_b && r->K == K && r->N == N && r->ldb == ldb;
}

static pack *find(const packed_weights *pw, int param, brg_gemm_pack_layout layout, bool trans_b, int64_t K, int64_t N,
                  int64_t ldb) {
    for (int i = 0; i < pw->n_packs; i++)
        if (same_matrix(&pw->packs[i]->r, param, layout, trans_b, K, N, ldb)) return pw->packs[i];
    return NULL;
}

static pack *add(packed_weights *pw, const packed_weight_record *r) {
    if (pw->n_packs == pw->cap) {
        const int cap = pw->cap ? 2 * pw->cap : 16;
        pack **grown = realloc(pw->packs, (size_t)cap * sizeof *grown);
        if (!grown) return NULL;
        pw->packs = grown;
        pw->cap = cap;
    }
    pack *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->r = *r;
    pw->packs[pw->n_packs++] = k;
    return k;
}

/* Counts `bytes` in the device's memory (its peak, what its stats report); false (the error
 * cleared: nothing failed, the weight keeps its plain product) when there is no room. */
static bool budget_allows(packed_weights *pw, uint64_t bytes) {
    if (brg_arena_borrow(pw->arena, (size_t)bytes, "packed weights") == BRG_OK) return true;
    brg_clear_error();
    return false;
}

/* Packs parameter h's matrix now; the pack is marked refused when there is no room for it. */
static pack *pack_now(packed_weights *pw, const held_param *h, brg_gemm_pack_layout layout, bool trans_b, int64_t K,
                      int64_t N, int64_t ldb) {
    const uint64_t bytes = brg_gemm_pack_bytes(layout, K, N);
    pack *k = add(pw, &(packed_weight_record){h->param, layout, trans_b, K, N, ldb, NULL, bytes, 0});
    if (!k) return NULL;
    /* Memory first: refused by the budget, its chunk space stays untouched (never faulted in). */
    k->owned = panel_memory(pw, (size_t)bytes);
    if (!k->owned || !budget_allows(pw, bytes)) {
        k->owned = NULL;
        k->refused = true;
        return k;
    }
    brg_gemm_pack_b(layout, trans_b, K, N, h->data, ldb, k->owned, &k->b);
    k->r.panels = k->owned;
    k->current = true;
    return k;
}

/* Per run: the weights may have changed since the last run, so the first use in this one packs
 * them again, in place. */
static void pack_again(pack *k) {
    brg_gemm_pack_b(k->r.layout, k->r.trans_b, k->r.K, k->r.N, k->b.plain, k->r.ldb, k->owned, &k->b);
    k->current = true;
}

static const brg_packed_b *lookup(void *ctx, const float *B, bool trans_b, int64_t K, int64_t N, int64_t ldb) {
    packed_weights *pw = ctx;
    const brg_gemm_pack_layout layout = brg_gemm_pack_layout_now();
    if (layout == BRG_GEMM_PACK_NONE || K <= 0 || N <= 0 || pw->budgeted || (pw->per_run && !pw->in_run))
        return NULL;
    const held_param *h = held_at(pw, B);
    /* The whole op(B) must lie inside the parameter. */
    const int64_t rows = trans_b ? N : K, cols = trans_b ? K : N;
    if (!h || (rows - 1) * ldb + cols > h->numel) return NULL;
    pack *k = find(pw, h->param, layout, trans_b, K, N, ldb);
    if (!k) k = pack_now(pw, h, layout, trans_b, K, N, ldb);
    else if (!k->current && !k->refused && k->owned) pack_again(k);
    return k && !k->refused ? &k->b : NULL;
}

/* Run after the parameters were overwritten: the device's own panels are packed again in place
 * (their bytes stay counted once); panels from an entry no longer match and are dropped from use
 * (their borrowed bytes stay counted: the plain product from now on). A per-run store has nothing
 * to do: every run packs again at its first use. */
void packed_weights_refresh(packed_weights *pw) {
    for (int i = 0; pw && !pw->per_run && i < pw->n_packs; i++) {
        pack *k = pw->packs[i];
        if (k->refused) continue;
        if (!k->owned) k->refused = true;
        else pack_again(k);
    }
}

void packed_weights_begin_run(packed_weights *pw) {
    if (!pw || !pw->per_run) return;
    for (int i = 0; i < pw->n_packs; i++) pw->packs[i]->current = false;
    pw->in_run = true;
}

void packed_weights_end_run(packed_weights *pw) {
    if (pw) pw->in_run = false;
}

void packed_weights_bind(packed_weights *pw) { brg_packed_weights_bind(pw ? lookup : NULL, pw); }

brg_status packed_weights_collect(brg_runtime *rt, packed_weight_record **out, int *n) {
    *out = NULL;
    *n = 0;
    int cap = 0;
    for (int d = 0; d < rt->n_devices; d++) {
        const packed_weights *pw = rt->devices[d].packed;
        const uint64_t bit = (uint64_t)1 << (d < 63 ? d : 63);
        for (int i = 0; pw && i < pw->n_packs; i++) {
            const packed_weight_record *r = &pw->packs[i]->r;
            bool seen = !r->panels;
            for (int j = 0; !seen && j < *n; j++)
                if (same_matrix(&(*out)[j], r->param, r->layout, r->trans_b, r->K, r->N, r->ldb))
                    (*out)[j].devices |= bit, seen = true;
            if (seen) continue;
            if (*n == cap) {
                cap = cap ? 2 * cap : 64;
                packed_weight_record *grown = realloc(*out, (size_t)cap * sizeof *grown);
                if (!grown) {
                    free(*out);
                    *out = NULL;
                    *n = 0;
                    return brg_error(BRG_ERR_OOM, "cannot list the packed weights");
                }
                *out = grown;
            }
            (*out)[*n] = *r;
            (*out)[(*n)++].devices = bit;
        }
    }
    return BRG_OK;
}

void packed_weights_adopt(brg_runtime *rt, const packed_weight_record *r) {
    for (int d = 0; d < rt->n_devices; d++) {
        packed_weights *pw = rt->devices[d].packed;
        if (!(r->devices >> (d < 63 ? d : 63) & 1)) continue;
        if (!pw || pw->budgeted || r->param < 0 || r->param >= rt->model->n_params || !rt->devices[d].holds[r->param])
            continue;
        const float *data = rt->devices[d].view.params[r->param].tensor->data;
        const held_param *h = held_at(pw, data);
        const int64_t rows = r->trans_b ? r->N : r->K, cols = r->trans_b ? r->K : r->N;
        /* Panels of another layout than the kernels run now would never be read. */
        if (!h || r->layout != brg_gemm_pack_layout_now() || r->K < 1 || r->N < 1 || r->ldb < cols ||
            (rows - 1) * r->ldb + cols > h->numel || find(pw, r->param, r->layout, r->trans_b, r->K, r->N, r->ldb))
            continue;
        pack *k = add(pw, r);
        if (!k) continue; /* no room in the table: this device packs for itself */
        if (!budget_allows(pw, r->bytes)) {
            k->refused = true;
            continue;
        }
        brg_gemm_packed_b_wrap(r->layout, r->trans_b, r->K, r->N, h->data, r->ldb, r->panels, &k->b);
    }
}
