/* Per-thread scratch buffers for kernels that need temporary rows (attention's score blocks).
 * Devices are long-lived threads that run the same shapes every step: a buffer grows to the
 * largest request once and is reused, so steady-state steps allocate nothing. A thread-exit
 * destructor frees them. A thread bound to a device's arena charges what its buffers hold to
 * that arena, so scratch counts against the device's budget and shows in its peak. */
#include <pthread.h>
#include <stdlib.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

typedef struct scratch {
    float *buf[BRG_SCRATCH_SLOTS];
    size_t cap[BRG_SCRATCH_SLOTS];
    brg_arena *arena; /* charged with the buffers' bytes, or NULL */
} scratch;

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Thread_local scratch *mine;
/* A device's team threads charge its arena concurrently. */
static pthread_mutex_t charge_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t held(const scratch *s) {
    size_t n = 0;
    for (int i = 0; i < BRG_SCRATCH_SLOTS; i++) n += s->cap[i] * sizeof(float);
    return n;
}

static void charge(brg_arena *arena, size_t bytes, bool add) {
    if (!arena || !bytes) return;
    pthread_mutex_lock(&charge_lock);
    if (add) brg_arena_add_scratch(arena, bytes);
    else brg_arena_drop_scratch(arena, bytes);
    pthread_mutex_unlock(&charge_lock);
}

static void free_buffers(scratch *s) {
    charge(s->arena, held(s), false);
    for (int i = 0; i < BRG_SCRATCH_SLOTS; i++) {
        free(s->buf[i]);
        s->buf[i] = NULL;
        s->cap[i] = 0;
    }
}

static void release(void *p) {
    scratch *s = p;
    free_buffers(s);
    free(s);
    mine = NULL;
}

static void make_key(void) { BRG_ASSERT(pthread_key_create(&key, release) == 0); }

static scratch *get(void) {
    if (!mine) {
        pthread_once(&once, make_key);
        mine = calloc(1, sizeof *mine);
        BRG_ASSERT(mine != NULL);
        BRG_ASSERT(pthread_setspecific(key, mine) == 0);
    }
    return mine;
}

void brg_scratch_bind(brg_arena *arena) {
    if (!arena && !mine) return;
    scratch *s = get();
    if (s->arena == arena) return;
    free_buffers(s);
    s->arena = arena;
}

brg_arena *brg_scratch_bound(void) { return mine ? mine->arena : NULL; }

float *brg_scratch(int slot, size_t n) {
    BRG_ASSERT(slot >= 0 && slot < BRG_SCRATCH_SLOTS);
    scratch *s = get();
    if (n == 0) n = 1;
    if (s->cap[slot] < n) {
        float *grown = realloc(s->buf[slot], n * sizeof(float));
        BRG_ASSERT(grown != NULL); /* a few rows of scores: failing here means the host is out of memory */
        charge(s->arena, (n - s->cap[slot]) * sizeof(float), true);
        s->buf[slot] = grown;
        s->cap[slot] = n;
    }
    return s->buf[slot];
}
