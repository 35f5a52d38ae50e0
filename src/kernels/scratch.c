/* Per-thread scratch buffers for kernels that need temporary rows (attention's score blocks).
 * Devices are long-lived threads that run the same shapes every step: a buffer grows to the
 * largest request once and is reused, so steady-state steps allocate nothing. A thread-exit
 * destructor frees them. */
#include <pthread.h>
#include <stdlib.h>

#include "brigade/status.h"
#include "kernels/kernels.h"

#define SLOTS 4

typedef struct scratch {
    float *buf[SLOTS];
    size_t cap[SLOTS];
} scratch;

static pthread_key_t key;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static _Thread_local scratch *mine;

static void release(void *p) {
    scratch *s = p;
    for (int i = 0; i < SLOTS; i++) free(s->buf[i]);
    free(s);
    mine = NULL;
}

static void make_key(void) { BRG_ASSERT(pthread_key_create(&key, release) == 0); }

float *brg_scratch(int slot, size_t n) {
    BRG_ASSERT(slot >= 0 && slot < SLOTS);
    if (!mine) {
        pthread_once(&once, make_key);
        mine = calloc(1, sizeof *mine);
        BRG_ASSERT(mine != NULL);
        BRG_ASSERT(pthread_setspecific(key, mine) == 0);
    }
    if (n == 0) n = 1;
    if (mine->cap[slot] < n) {
        float *grown = realloc(mine->buf[slot], n * sizeof(float));
        BRG_ASSERT(grown != NULL); /* a few rows of scores: failing here means the host is out of memory */
        mine->buf[slot] = grown;
        mine->cap[slot] = n;
    }
    return mine->buf[slot];
}
