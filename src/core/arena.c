/* A chunked bump allocator. Chunks are kept after a reset, so steady-state training never calls
 * malloc; the budget counts bytes handed out (with alignment padding), not bytes reserved. */
#include "brigade/arena.h"

#include <ctype.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CHUNK ((size_t)1 << 22) /* 4 MiB */

/* Chunks after `current` are always empty; `used` is the sum of the chunks' used bytes. */
typedef struct chunk {
    struct chunk *next;
    size_t capacity;
    size_t used;
    size_t dirty; /* bytes from data on that were ever handed out; past them the allocator's zeros stand */
    unsigned char *data;
    void *raw; /* the allocator's block, data aligned within it */
} chunk;

struct brg_arena {
    char name[64];
    size_t budget;
    size_t used;
    size_t peak;          /* of used, plus children_used for a parent, plus scratch */
    struct brg_arena *parent; /* a child draws on its parent's budget */
    size_t children_used;
    size_t scratch;       /* kernel scratch held outside the chunks (budget and peak), see brg_arena_add_scratch */
    size_t borrowed;      /* memory held elsewhere that the device computes on, see brg_arena_borrow */
    chunk *first;
    chunk *current;
    brg_allocator allocator;
};

void *brg_host_alloc_zeroed(void *ctx, size_t bytes) {
    (void)ctx;
    return calloc(1, bytes);
}

void brg_host_release(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

brg_status brg_arena_create(const char *name, size_t budget, brg_arena **out) {
    brg_arena *a = calloc(1, sizeof *a);
    if (!a) return brg_error(BRG_ERR_OOM, "cannot allocate arena for %s", name);
    snprintf(a->name, sizeof a->name, "%s", name ? name : "host");
    a->budget = budget;
    a->allocator = (brg_allocator){brg_host_alloc_zeroed, brg_host_release, NULL};
    *out = a;
    return BRG_OK;
}

brg_status brg_arena_create_child(brg_arena *parent, const char *name, brg_arena **out) {
    BRG_ASSERT(parent && !parent->parent);
    BRG_TRY(brg_arena_create(name, BRG_ARENA_UNLIMITED, out));
    (*out)->parent = parent;
    (*out)->allocator = parent->allocator;
    return BRG_OK;
}

void brg_arena_set_allocator(brg_arena *arena, const brg_allocator *allocator) {
    BRG_ASSERT(!arena->first);
    arena->allocator = *allocator;
}

void brg_arena_destroy(brg_arena *arena) {
    if (!arena) return;
    if (arena->parent) arena->parent->children_used -= arena->used;
    chunk *c = arena->first;
    while (c) {
        chunk *next = c->next;
        arena->allocator.release(arena->allocator.ctx, c->raw);
        free(c);
        c = next;
    }
    free(arena);
}

static size_t align_up(size_t n) { return (n + BRG_ARENA_ALIGN - 1) & ~(size_t)(BRG_ARENA_ALIGN - 1); }

static chunk *chunk_new(const brg_allocator *allocator, size_t capacity) {
    chunk *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    /* Zeroed by the allocator: the host's calloc, not aligned_alloc + memset, gives a large block
     * as fresh zero pages, so bytes never written are never touched (a model whose weights then
     * live in an executable-cache entry's mapping costs no page of its own). */
    c->raw = capacity + BRG_ARENA_ALIGN > capacity ? allocator->alloc_zeroed(allocator->ctx, capacity + BRG_ARENA_ALIGN)
                                                   : NULL;
    if (!c->raw) {
        free(c);
        return NULL;
    }
    c->data = (unsigned char *)(((uintptr_t)c->raw + BRG_ARENA_ALIGN - 1) & ~(uintptr_t)(BRG_ARENA_ALIGN - 1));
    c->capacity = capacity;
    return c;
}

static void format_bytes(size_t n, char *buf, size_t len) {
    if (n >= ((size_t)1 << 30)) snprintf(buf, len, "%.2f GiB (%zu bytes)", (double)n / (1 << 30), n);
    else if (n >= ((size_t)1 << 20)) snprintf(buf, len, "%.2f MiB (%zu bytes)", (double)n / (1 << 20), n);
    else snprintf(buf, len, "%zu bytes", n);
}

/* BRIGADE_ARENA_POISON=1: uninitialised allocations are filled with 0xFF (read once). */
static bool poison_uninit(void) {
    static _Atomic int state = -1;
    int s = atomic_load(&state);
    if (s < 0) {
        const char *v = getenv("BRIGADE_ARENA_POISON");
        s = v && strcmp(v, "1") == 0;
        atomic_store(&state, s);
    }
    return s;
}

/* Finds room for `bytes` in the current chunk or a later (empty, kept) one, else a new chunk.
 * `zero`: bytes an earlier allocation wrote are cleared (past them the allocator's zeros stand);
 * otherwise they are handed out as they are. */
static void *bump(brg_arena *a, size_t bytes, bool zero) {
    chunk *c = a->current;
    while (c && c->used + bytes > c->capacity && c->next) c = c->next;
    if (!c || c->used + bytes > c->capacity) {
        size_t cap = bytes > MIN_CHUNK ? bytes : MIN_CHUNK;
        chunk *n = chunk_new(&a->allocator, cap);
        if (!n) return NULL;
        if (c) c->next = n;
        else a->first = n;
        c = n;
    }
    a->current = c;
    void *p = c->data + c->used;
    if (!zero && poison_uninit()) memset(p, 0xFF, bytes);
    else if (zero && c->used < c->dirty)
        memset(p, 0, (c->dirty < c->used + bytes ? c->dirty : c->used + bytes) - c->used);
    c->used += bytes;
    if (c->used > c->dirty) c->dirty = c->used;
    return p;
}

static size_t family_used(const brg_arena *root) {
    return root->used + root->children_used + root->scratch + root->borrowed;
}

static void *arena_alloc(brg_arena *arena, size_t bytes, const char *what, bool zero) {
    BRG_ASSERT(arena);
    brg_arena *root = arena->parent ? arena->parent : arena;
    size_t need = align_up(bytes ? bytes : 1);
    if (need < bytes) {
        brg_error(BRG_ERR_OOM, "%s: allocation of %zu bytes for %s overflows", root->name, bytes, what);
        return NULL;
    }
    if (root->budget && family_used(root) + need > root->budget) {
        char b_need[64], b_used[64], b_budget[64];
        format_bytes(need, b_need, sizeof b_need);
        format_bytes(family_used(root), b_used, sizeof b_used);
        format_bytes(root->budget, b_budget, sizeof b_budget);
        brg_error(BRG_ERR_OOM, "%s out of memory: %s needs %s, %s of the %s budget already in use",
                  root->name, what ? what : "an allocation", b_need, b_used, b_budget);
        return NULL;
    }
    void *p = bump(arena, need, zero);
    if (!p) {
        brg_error(BRG_ERR_OOM, "%s: host allocation of %zu bytes for %s failed", arena->name, need, what);
        return NULL;
    }
    arena->used += need;
    if (arena->used > arena->peak) arena->peak = arena->used;
    if (arena->parent) arena->parent->children_used += need;
    if (family_used(root) > root->peak) root->peak = family_used(root);
    return p;
}

void *brg_arena_alloc(brg_arena *arena, size_t bytes, const char *what) {
    return arena_alloc(arena, bytes, what, true);
}

void *brg_arena_alloc_uninit(brg_arena *arena, size_t bytes, const char *what) {
    return arena_alloc(arena, bytes, what, false);
}

brg_status brg_arena_alloc_into(brg_arena *arena, size_t bytes, const char *what, void **out) {
    *out = brg_arena_alloc(arena, bytes, what);
    return *out ? BRG_OK : BRG_ERR_OOM;
}

size_t brg_arena_mark(const brg_arena *arena) { return arena->used; }

void brg_arena_reset(brg_arena *arena, size_t mark) {
    BRG_ASSERT(mark <= arena->used);
    if (arena->parent) arena->parent->children_used -= arena->used - mark;
    size_t before = 0;
    chunk *c = arena->first;
    while (c && before + c->used < mark) {
        before += c->used;
        c = c->next;
    }
    arena->used = mark;
    if (!c) return;
    c->used = mark - before;
    arena->current = c;
    for (chunk *n = c->next; n; n = n->next) n->used = 0;
}

void brg_arena_add_scratch(brg_arena *arena, size_t bytes) {
    brg_arena *root = arena->parent ? arena->parent : arena;
    root->scratch += bytes;
    if (family_used(root) > root->peak) root->peak = family_used(root);
}

void brg_arena_drop_scratch(brg_arena *arena, size_t bytes) {
    brg_arena *root = arena->parent ? arena->parent : arena;
    root->scratch -= bytes < root->scratch ? bytes : root->scratch;
}

size_t brg_arena_scratch(const brg_arena *arena) { return (arena->parent ? arena->parent : arena)->scratch; }

brg_status brg_arena_borrow(brg_arena *arena, size_t bytes, const char *what) {
    BRG_ASSERT(arena && !arena->parent);
    size_t need = align_up(bytes ? bytes : 1);
    if (arena->budget && family_used(arena) + need > arena->budget) {
        char b_need[64], b_used[64], b_budget[64];
        format_bytes(need, b_need, sizeof b_need);
        format_bytes(family_used(arena), b_used, sizeof b_used);
        format_bytes(arena->budget, b_budget, sizeof b_budget);
        return brg_error(BRG_ERR_OOM, "%s out of memory: %s needs %s, %s of the %s budget already in use", arena->name,
                         what ? what : "borrowed memory", b_need, b_used, b_budget);
    }
    arena->borrowed += need;
    if (family_used(arena) > arena->peak) arena->peak = family_used(arena);
    return BRG_OK;
}

size_t brg_arena_borrowed(const brg_arena *arena) { return arena->borrowed; }

brg_status brg_arena_check(const brg_arena *arena) {
    const brg_arena *root = arena->parent ? arena->parent : arena;
    if (!root->budget || root->peak <= root->budget) return BRG_OK;
    char b_peak[64], b_budget[64], b_scratch[64];
    format_bytes(root->peak, b_peak, sizeof b_peak);
    format_bytes(root->budget, b_budget, sizeof b_budget);
    format_bytes(root->scratch, b_scratch, sizeof b_scratch);
    return brg_error(BRG_ERR_OOM, "%s out of memory: it held %s at its peak, over the %s budget (%s of it kernel scratch)",
                     root->name, b_peak, b_budget, b_scratch);
}

size_t brg_arena_used(const brg_arena *arena) { return arena->used; }
size_t brg_arena_peak(const brg_arena *arena) { return arena->peak; }
size_t brg_arena_budget(const brg_arena *arena) { return arena->budget; }
const char *brg_arena_name(const brg_arena *arena) { return arena->name; }

brg_status brg_parse_bytes(const char *text, size_t *out) {
    *out = 0;
    if (!text || !*text) return brg_error(BRG_ERR_INVALID_ARG, "empty memory size");
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (errno || end == text || v < 0) return brg_error(BRG_ERR_INVALID_ARG, "bad memory size '%s'", text);
    while (isspace((unsigned char)*end)) end++;
    double mult = 1;
    if (*end) {
        char u = (char)toupper((unsigned char)*end);
        const char *rest = end + 1;
        int binary = (*rest == 'i' || *rest == 'I');
        if (binary) rest++;
        if (*rest == 'B' || *rest == 'b') rest++;
        double k = binary ? 1024.0 : 1000.0;
        switch (u) {
        case 'K': mult = k; break;
        case 'M': mult = k * k; break;
        case 'G': mult = k * k * k; break;
        case 'T': mult = k * k * k * k; break;
        case 'B': mult = 1; rest = end + 1; break;
        default: return brg_error(BRG_ERR_INVALID_ARG, "bad memory size '%s' (use e.g. 512MiB, 2GiB)", text);
        }
        if (*rest) return brg_error(BRG_ERR_INVALID_ARG, "bad memory size '%s' (use e.g. 512MiB, 2GiB)", text);
    }
    double bytes = v * mult;
    if (bytes >= (double)SIZE_MAX) return brg_error(BRG_ERR_INVALID_ARG, "memory size '%s' too large", text);
    *out = (size_t)bytes;
    return BRG_OK;
}
