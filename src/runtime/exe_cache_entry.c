/* An executable-cache entry on disk: a fixed header (magic, version, key, sizes, checksums),
 * a table (placement, each parameter's offset and element count, each packed weight's parameter,
 * layout, shape, offset and bytes) and then the parameters' F32 bytes followed by the packed
 * weights' panels, each 64-byte aligned, the first at a page boundary so the whole file maps as
 * it lies. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/thread_pool.h"
#include "exe_cache_internal.h"
#include "io/atomic_file.h"
#include "kernels/kernels.h"
#include "packed_weights.h"

#define ENTRY_MAGIC "BRGEXEC\0"
#define ENTRY_VERSION 3u /* 2: packed weights; 3: the table's own checksum */
#define TABLE_SEED 0x5441424cu
#define PAGE 4096u
#define ALIGN 64u

typedef struct entry_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key[EXE_KEY_PARTS];
    uint64_t total_bytes;   /* the file's size */
    uint64_t checksum;      /* of bytes [header_bytes, total_bytes): see chunked_sum */
    int32_t n_devices, n_blocks, n_layers, n_params;
    int32_t n_packs, reserved;
    uint64_t table_offset;  /* int32 block_device[n_blocks], int32 layer_device[n_layers], then
                             * uint64 {offset, numel}[n_params] at the next 8-byte boundary, then
                             * uint64 [n_packs][EXE_PACK_FIELDS] */
    uint64_t payload_offset;
    uint64_t table_checksum;  /* of bytes [table_offset, payload_offset) */
    uint64_t header_checksum; /* of the header with this field 0 */
} entry_header;

static uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

static uint64_t header_sum(entry_header h) {
    h.header_checksum = 0;
    return exe_hash_of(&h, sizeof h, 0x48445221);
}

static uint64_t param_table_at(const entry_header *h) {
    return round_up(h->table_offset + 4 * (uint64_t)(h->n_blocks + h->n_layers), 8);
}

static uint64_t pack_table_at(const entry_header *h) { return param_table_at(h) + 16 * (uint64_t)h->n_params; }

static uint64_t table_end(const entry_header *h) {
    return pack_table_at(h) + 8 * EXE_PACK_FIELDS * (uint64_t)h->n_packs;
}

/* ---- the checksum ----
 * The bytes after the header in chunks of CHUNK, each summed on its own (seeded by its index),
 * and the chunk sums hashed in order: a start checks a GPT-2 small entry (1 GB with its packed
 * weights) on several threads. A chunk's sum is built for speed (a start reads every byte of the
 * entry): per 64-byte stripe s, each of 8 64-bit lanes d[i] adds lo32(x) * hi32(x) + d[i ^ 1]
 * to its accumulator, x = d[i] ^ (key[i] + s * PRIME), a 32 x 32 -> 64 bit multiply that vector
 * units do 8 at a time; the stripe index in the key makes the order count; a short last stripe
 * is zero-padded, the byte count goes into the finish. It detects damage, not tampering. */
#define CHUNK ((uint64_t)32 << 20)
#define SUM_SEED 0x454e5452u
#define MAX_SUM_THREADS 4
#define STRIPE 64
#define SUM_PRIME 0x9E3779B97F4A7C15ull

typedef struct stripe_sum {
    uint64_t acc[8];
    uint64_t stripes, bytes;
} stripe_sum;

static const uint64_t stripe_keys[8] = {0xb8fe6c3923a44bbeull, 0x7c01812cf721ad1cull, 0xded46de9839097dbull,
                                        0x7240a4a4b7b3671full, 0xcb79e64eccc0e578ull, 0x825ad07dccff7149ull,
                                        0xf8bdd0eb9d6a0e47ull, 0x3fb4a4297f4a9ad2ull};

/* Whole stripes only. */
static void stripes_plain(stripe_sum *restrict st, const char *restrict p, uint64_t n) {
    for (uint64_t s = 0; s < n; s++) {
        uint64_t d[8];
        memcpy(d, p + s * STRIPE, STRIPE);
        const uint64_t k = (st->stripes + s) * SUM_PRIME;
        for (int i = 0; i < 8; i++) {
            const uint64_t x = d[i] ^ (stripe_keys[i] + k);
            st->acc[i] += (x & 0xffffffffu) * (x >> 32) + d[i ^ 1];
        }
    }
    st->stripes += n;
}

/* The same arithmetic, four lanes a vector: the same sums. */
__attribute__((target("avx2"))) static void stripes_avx2(stripe_sum *restrict st, const char *restrict p,
                                                         uint64_t n) {
    __m256i a0 = _mm256_loadu_si256((const __m256i *)st->acc);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(st->acc + 4));
    const __m256i k0 = _mm256_loadu_si256((const __m256i *)stripe_keys);
    const __m256i k1 = _mm256_loadu_si256((const __m256i *)(stripe_keys + 4));
    for (uint64_t s = 0; s < n; s++) {
        const __m256i k = _mm256_set1_epi64x((long long)((st->stripes + s) * SUM_PRIME));
        const __m256i d0 = _mm256_loadu_si256((const __m256i *)(p + s * STRIPE));
        const __m256i d1 = _mm256_loadu_si256((const __m256i *)(p + s * STRIPE + 32));
        const __m256i x0 = _mm256_xor_si256(d0, _mm256_add_epi64(k0, k));
        const __m256i x1 = _mm256_xor_si256(d1, _mm256_add_epi64(k1, k));
        /* lo32(x) * hi32(x), plus the neighbouring lane (i ^ 1: pairs swapped) */
        a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_mul_epu32(x0, _mm256_srli_epi64(x0, 32)),
                                                   _mm256_permute4x64_epi64(d0, 0xB1)));
        a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_mul_epu32(x1, _mm256_srli_epi64(x1, 32)),
                                                   _mm256_permute4x64_epi64(d1, 0xB1)));
    }
    _mm256_storeu_si256((__m256i *)st->acc, a0);
    _mm256_storeu_si256((__m256i *)(st->acc + 4), a1);
    st->stripes += n;
}

static void stripe_add(stripe_sum *st, const void *data, uint64_t n) {
    const char *p = data;
    const uint64_t whole = n / STRIPE;
    if (__builtin_cpu_supports("avx2")) stripes_avx2(st, p, whole);
    else stripes_plain(st, p, whole);
    st->bytes += n;
    if (n % STRIPE) { /* only a last piece ends mid-stripe */
        unsigned char last[STRIPE] = {0};
        memcpy(last, p + whole * STRIPE, n % STRIPE);
        stripes_plain(st, (const char *)last, 1);
    }
}

static uint64_t stripe_end(const stripe_sum *st, uint64_t seed) {
    return exe_hash_of(st, sizeof *st, seed);
}

typedef struct chunked_sum {
    stripe_sum cur;
    uint64_t in_chunk, n, cap;
    uint64_t *hashes;
    bool oom;
} chunked_sum;

static void sum_init(chunked_sum *c) { memset(c, 0, sizeof *c); }

static void sum_close_chunk(chunked_sum *c) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        uint64_t *grown = realloc(c->hashes, c->cap * sizeof *grown);
        if (!grown) {
            c->oom = true;
            return;
        }
        c->hashes = grown;
    }
    c->hashes[c->n] = stripe_end(&c->cur, SUM_SEED + c->n);
    c->n++;
    c->in_chunk = 0;
    memset(&c->cur, 0, sizeof c->cur);
}

/* Pieces in file order, each a multiple of 64 bytes but the last (so stripes never straddle
 * pieces; the chunk edges are multiples of 64 too). */
static void sum_add(chunked_sum *c, const void *data, uint64_t n) {
    const char *p = data;
    while (n > 0 && !c->oom) {
        const uint64_t take = n < CHUNK - c->in_chunk ? n : CHUNK - c->in_chunk;
        stripe_add(&c->cur, p, take);
        c->in_chunk += take, p += take, n -= take;
        if (c->in_chunk == CHUNK) sum_close_chunk(c);
    }
}

/* The checksum; 0 with *ok false when out of memory. */
static uint64_t sum_end(chunked_sum *c, bool *ok) {
    if (c->in_chunk > 0 || c->n == 0) sum_close_chunk(c);
    *ok = !c->oom;
    const uint64_t sum = c->oom ? 0 : exe_hash_of(c->hashes, c->n * sizeof *c->hashes, SUM_SEED);
    free(c->hashes);
    return sum;
}

/* Chunk i's sum of bytes[0, len). */
static uint64_t chunk_sum(const char *bytes, uint64_t len, uint64_t i) {
    const uint64_t at = i * CHUNK, n = len - at < CHUNK ? len - at : CHUNK;
    stripe_sum st = {{0}, 0, 0};
    stripe_add(&st, bytes + at, n);
    return stripe_end(&st, SUM_SEED + i);
}

/* A chunked_sum of bytes[0, len) computed by whichever threads take its chunks: each takes the
 * next untaken one until none is left, and the sum is made once all are in. */
struct chunk_queue {
    const char *bytes;
    uint64_t len, n;
    uint64_t *hashes;
    atomic_uint_fast64_t next;
};

static chunk_queue *queue_new(const char *bytes, uint64_t len) {
    chunk_queue *q = malloc(sizeof *q);
    if (!q) return NULL;
    *q = (chunk_queue){bytes, len, len ? (len + CHUNK - 1) / CHUNK : 1, NULL, 0};
    q->hashes = malloc(q->n * sizeof *q->hashes);
    if (!q->hashes) free(q), q = NULL;
    return q;
}

static void queue_take(chunk_queue *q) {
    for (uint64_t i; (i = atomic_fetch_add(&q->next, 1)) < q->n;) q->hashes[i] = chunk_sum(q->bytes, q->len, i);
}

/* A pool's job: every thread takes chunks. */
static void queue_take_job(void *q, int i, int n) {
    (void)i, (void)n;
    queue_take(q);
}

/* No chunk is handed out after this (a taker ends with the chunk it is on). */
static void queue_close(chunk_queue *q) { atomic_store(&q->next, q->n); }

static void queue_free(chunk_queue *q) {
    if (q) free(q->hashes);
    free(q);
}

/* The sum, once every chunk is in; frees q. */
static uint64_t queue_sum(chunk_queue *q) {
    const uint64_t sum = exe_hash_of(q->hashes, q->n * sizeof *q->hashes, SUM_SEED);
    queue_free(q);
    return sum;
}

/* chunked_sum of bytes[0, len) in one call, its chunks taken by up to MAX_SUM_THREADS threads (as
 * many as the cores); *ok false when out of memory. */
static uint64_t sum_of(const char *bytes, uint64_t len, bool *ok) {
    chunk_queue *q = queue_new(bytes, len);
    *ok = q != NULL;
    if (!q) return 0;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int helpers = cores < 2 ? 0 : cores > MAX_SUM_THREADS ? MAX_SUM_THREADS - 1 : (int)cores - 1;
    brg_pool *threads = NULL;
    if (helpers > 0 && brg_pool_create(helpers, "the cache's checksum", &threads) != BRG_OK) brg_clear_error();
    if (threads) brg_pool_launch(threads, queue_take_job, q);
    queue_take(q); /* with the helpers, or alone if none could start */
    brg_pool_destroy(threads);
    return queue_sum(q);
}

/* ---- writing ---- */

typedef struct layout {
    entry_header h;
    unsigned char *table; /* [payload_offset - table_offset] */
    uint64_t (*param)[2];
    uint64_t (*pack)[EXE_PACK_FIELDS];
} layout;

static brg_status plan_layout(const exe_key *key, const brg_model *m, const brg_placement *pl,
                              const packed_weight_record *packs, int n_packs, layout *lo) {
    entry_header *h = &lo->h;
    memset(lo, 0, sizeof *lo);
    memcpy(h->magic, ENTRY_MAGIC, 8);
    h->version = ENTRY_VERSION;
    h->header_bytes = (uint32_t)round_up(sizeof *h, ALIGN);
    memcpy(h->key, key->part, sizeof h->key);
    h->n_devices = pl->n_devices;
    h->n_blocks = pl->n_blocks;
    h->n_layers = pl->n_layers;
    h->n_params = m->n_params;
    h->n_packs = n_packs;
    h->table_offset = h->header_bytes;
    const uint64_t params_at = param_table_at(h);
    h->payload_offset = round_up(table_end(h), PAGE);
    lo->table = calloc(1, h->payload_offset - h->table_offset);
    if (!lo->table) return brg_error(BRG_ERR_OOM, "cannot lay out the executable cache entry");
    int32_t *ints = (int32_t *)lo->table;
    for (int b = 0; b < pl->n_blocks; b++) ints[b] = pl->block_device[b];
    for (int l = 0; l < pl->n_layers; l++) ints[pl->n_blocks + l] = pl->layer_device[l];
    lo->param = (uint64_t(*)[2])(lo->table + (params_at - h->table_offset));
    lo->pack = (uint64_t(*)[EXE_PACK_FIELDS])(lo->table + (pack_table_at(h) - h->table_offset));
    uint64_t at = h->payload_offset;
    for (int p = 0; p < m->n_params; p++) {
        const uint64_t numel = (uint64_t)brg_tensor_numel(m->params[p].tensor);
        lo->param[p][0] = at;
        lo->param[p][1] = numel;
        at += round_up(numel * sizeof(float), ALIGN);
    }
    for (int i = 0; i < n_packs; i++) {
        const packed_weight_record *r = &packs[i];
        const uint64_t row[EXE_PACK_FIELDS] = {(uint64_t)r->param, (uint64_t)r->layout, r->trans_b, (uint64_t)r->K,
                                               (uint64_t)r->N, (uint64_t)r->ldb, at, r->bytes, r->devices};
        memcpy(lo->pack[i], row, sizeof row);
        at += round_up(r->bytes, ALIGN);
    }
    h->total_bytes = at;
    return BRG_OK;
}

typedef brg_status (*piece_fn)(void *ctx, const void *p, size_t n);

/* n bytes, then zeros up to the next 64-byte boundary. */
static brg_status aligned_piece(piece_fn fn, void *ctx, const void *data, size_t n) {
    BRG_TRY(fn(ctx, data, n - n % ALIGN));
    unsigned char tail[ALIGN] = {0};
    memcpy(tail, (const char *)data + (n - n % ALIGN), n % ALIGN);
    if (n % ALIGN) BRG_TRY(fn(ctx, tail, ALIGN));
    return BRG_OK;
}

/* The payload as written: each parameter, then each packed weight's panels. */
static brg_status each_piece(const brg_model *m, const packed_weight_record *packs, int n_packs, piece_fn fn,
                             void *ctx) {
    for (int p = 0; p < m->n_params; p++)
        BRG_TRY(aligned_piece(fn, ctx, m->params[p].tensor->data,
                              (size_t)brg_tensor_numel(m->params[p].tensor) * sizeof(float)));
    for (int i = 0; i < n_packs; i++) BRG_TRY(aligned_piece(fn, ctx, packs[i].panels, (size_t)packs[i].bytes));
    return BRG_OK;
}

static brg_status hash_piece(void *ctx, const void *p, size_t n) {
    sum_add(ctx, p, n);
    return BRG_OK;
}

static brg_status write_piece(void *ctx, const void *p, size_t n) { return brg_atomic_file_write(ctx, p, n); }

brg_status exe_entry_write(const char *path, const exe_key *key, const brg_model *m, const brg_placement *pl,
                           const packed_weight_record *packs, int n_packs) {
    layout lo;
    BRG_TRY(plan_layout(key, m, pl, packs, n_packs, &lo));
    chunked_sum sum;
    sum_init(&sum);
    sum_add(&sum, lo.table, lo.h.payload_offset - lo.h.table_offset);
    (void)each_piece(m, packs, n_packs, hash_piece, &sum); /* hashing cannot fail */
    bool ok;
    lo.h.checksum = sum_end(&sum, &ok);
    lo.h.table_checksum = exe_hash_of(lo.table, lo.h.payload_offset - lo.h.table_offset, TABLE_SEED);
    if (!ok) {
        free(lo.table);
        return brg_error(BRG_ERR_OOM, "cannot checksum the executable cache entry");
    }
    lo.h.header_checksum = header_sum(lo.h);
    unsigned char head[PAGE] = {0};
    memcpy(head, &lo.h, sizeof lo.h);
    brg_atomic_file f;
    brg_status st = brg_atomic_file_open(path, &f);
    if (st == BRG_OK) st = brg_atomic_file_write(&f, head, lo.h.header_bytes);
    if (st == BRG_OK) st = brg_atomic_file_write(&f, lo.table, lo.h.payload_offset - lo.h.table_offset);
    if (st == BRG_OK) st = each_piece(m, packs, n_packs, write_piece, &f);
    if (st == BRG_OK) st = brg_atomic_file_commit(&f);
    free(lo.table);
    return st;
}

/* ---- reading ---- */

static exe_load_result invalid(exe_entry *e, char *why, size_t len, const char *fmt, const char *arg) {
    exe_entry_unmap(e);
    snprintf(why, len, fmt, arg);
    return EXE_LOAD_INVALID;
}

/* The table's numbers stay inside the file and agree with each other. */
static bool table_sane(const entry_header *h) {
    if (h->n_blocks < 1 || h->n_layers < 0 || h->n_params < 1 || h->n_devices < 1 || h->n_blocks > (1 << 20) ||
        h->n_layers > (1 << 20) || h->n_params > (1 << 24) || h->n_packs < 0 || h->n_packs > (1 << 24) ||
        h->table_offset != h->header_bytes)
        return false;
    return h->payload_offset == round_up(table_end(h), PAGE) && h->payload_offset <= h->total_bytes;
}

static bool params_sane(const exe_entry *e, const entry_header *h) {
    const int32_t *ints = (const int32_t *)((const char *)e->map + h->table_offset);
    for (int i = 0; i < h->n_blocks + h->n_layers; i++)
        if (ints[i] < 0 || ints[i] >= h->n_devices) return false;
    uint64_t at = h->payload_offset;
    for (int p = 0; p < h->n_params; p++) {
        if (e->param[2 * p] != at || e->param[2 * p + 1] > (h->total_bytes - at) / sizeof(float)) return false;
        at += round_up(e->param[2 * p + 1] * sizeof(float), ALIGN);
    }
    for (int i = 0; i < h->n_packs; i++) {
        const uint64_t *r = e->pack + (size_t)i * EXE_PACK_FIELDS;
        const uint64_t layout = r[EXE_PACK_LAYOUT], K = r[EXE_PACK_K], N = r[EXE_PACK_N];
        const bool kinds = layout > BRG_GEMM_PACK_NONE && layout <= BRG_GEMM_PACK_AVX2 && r[EXE_PACK_TRANS_B] <= 1;
        const bool sizes = K >= 1 && N >= 1 && K <= (1u << 30) && N <= (1u << 30) && r[EXE_PACK_LDB] <= (1u << 30);
        /* Its panels are where the table says, as long as the layout makes them, and its op(B)
         * lies inside the parameter it was packed from. */
        if (r[EXE_PACK_PARAM] >= (uint64_t)h->n_params || !kinds || !sizes || r[EXE_PACK_OFFSET] != at ||
            r[EXE_PACK_BYTES] != brg_gemm_pack_bytes((brg_gemm_pack_layout)layout, (int64_t)K, (int64_t)N))
            return false;
        const uint64_t rows = r[EXE_PACK_TRANS_B] ? N : K, cols = r[EXE_PACK_TRANS_B] ? K : N;
        if (r[EXE_PACK_LDB] < cols || (rows - 1) * r[EXE_PACK_LDB] + cols > e->param[2 * r[EXE_PACK_PARAM] + 1] ||
            r[EXE_PACK_BYTES] > h->total_bytes - at)
            return false;
        at += round_up(r[EXE_PACK_BYTES], ALIGN);
    }
    return at == h->total_bytes;
}

static void fill(exe_entry *e, const entry_header *h) {
    int32_t *ints = (int32_t *)((char *)e->map + h->table_offset);
    e->placement = (brg_placement){BRG_IPU_MODE_INFERENCE, h->n_devices, h->n_blocks, ints, h->n_layers,
                                   ints + h->n_blocks};
    e->n_params = h->n_params;
    e->n_packs = h->n_packs;
}

/* ---- the payload's check in the background ----
 * A start that can use its outputs late (exe_entry_load's `later`) checks the header and the table
 * at once, and the payload (the weights and panels: numbers only, which cannot make a start go
 * wrong other than numerically) while the pipeline runs: a thread of the lowest priority
 * (SCHED_IDLE) takes its chunks one by one on the cores the devices leave idle (the pipeline's
 * fill and drain). exe_entry_confirm, before any output is used, takes whatever chunks are left
 * itself, at the caller's priority (so a machine busy with other work cannot starve the check),
 * waits for the chunk the background thread is on and compares. */

static void check_payload(void *q, int i, int n) {
    const struct sched_param lowest = {0}; /* the pool's one thread, ended with the check */
    (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &lowest);
    queue_take_job(q, i, n);
}

/* Starts the background check of bytes [from, e->bytes); false when it cannot. */
static bool start_check(exe_entry *e, uint64_t from) {
    e->check = queue_new((const char *)e->map + from, e->bytes - from);
    if (e->check && brg_pool_create(1, "the cache's background check", &e->checker) == BRG_OK) {
        brg_pool_launch(e->checker, check_payload, e->check);
        return true;
    }
    brg_clear_error();
    queue_free(e->check);
    e->check = NULL;
    return false;
}

static bool payload_matches(bool summed, uint64_t sum, uint64_t want, char *why, size_t len) {
    if (!summed) return snprintf(why, len, "unreadable (no memory to check it)"), false;
    if (sum != want) return snprintf(why, len, "corrupt (checksum mismatch)"), false;
    return true;
}

bool exe_entry_confirm(exe_entry *e, char *why, size_t len) {
    if (!e->check) return true;
    queue_take(e->check); /* the chunks the background thread has not reached */
    brg_pool_destroy(e->checker);
    e->checker = NULL;
    const uint64_t sum = queue_sum(e->check);
    e->check = NULL;
    return payload_matches(true, sum, e->check_want, why, len);
}

exe_load_result exe_entry_load(const char *path, const exe_key *key, exe_entry *e, bool later, char *why,
                               size_t len) {
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return EXE_LOAD_ABSENT;
        return invalid(e, why, len, "unreadable (%s)", strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return invalid(e, why, len, "%s", "not a regular file");
    }
    e->bytes = (size_t)st.st_size;
    entry_header h;
    if (e->bytes < sizeof h) {
        close(fd);
        return invalid(e, why, len, "%s", "truncated (shorter than its header)");
    }
    /* Mapped read-only first, so populating shares the page cache's pages instead of copying
     * each (a writable private mapping populates by copy-on-write); then private and writable:
     * a later write copies its page and never reaches the file. A check in the background does
     * not populate here: its threads fault the pages in as they read them, in parallel. */
    e->map = mmap(NULL, e->bytes, PROT_READ, MAP_PRIVATE | (later ? 0 : MAP_POPULATE), fd, 0);
    close(fd);
    if (e->map == MAP_FAILED) {
        e->map = NULL;
        return invalid(e, why, len, "unmappable (%s)", strerror(errno));
    }
    if (mprotect(e->map, e->bytes, PROT_READ | PROT_WRITE) != 0)
        return invalid(e, why, len, "unmappable (%s)", strerror(errno));
    memcpy(&h, e->map, sizeof h);
    if (memcmp(h.magic, ENTRY_MAGIC, 8) != 0) return invalid(e, why, len, "%s", "not an entry (wrong magic)");
    if (h.version != ENTRY_VERSION) return invalid(e, why, len, "%s", "of another format version");
    if (h.header_checksum != header_sum(h) || h.header_bytes != round_up(sizeof h, ALIGN))
        return invalid(e, why, len, "%s", "corrupt (header checksum mismatch)");
    for (int k = 0; k < EXE_KEY_PARTS; k++)
        if (h.key[k] != key->part[k]) return invalid(e, why, len, "stale (%s changed)", exe_key_part_name(k));
    if (h.total_bytes != e->bytes)
        return invalid(e, why, len, "%s", h.total_bytes > e->bytes ? "truncated" : "corrupt (longer than it says)");
    if (!table_sane(&h)) return invalid(e, why, len, "%s", "corrupt (inconsistent table)");
    if (exe_hash_of((const char *)e->map + h.table_offset, h.payload_offset - h.table_offset, TABLE_SEED) !=
        h.table_checksum)
        return invalid(e, why, len, "%s", "corrupt (table checksum mismatch)");
    e->param = (const uint64_t *)((const char *)e->map + param_table_at(&h));
    e->pack = (const uint64_t *)((const char *)e->map + pack_table_at(&h));
    if (!params_sane(e, &h)) return invalid(e, why, len, "%s", "corrupt (inconsistent table)");
    e->check_want = h.checksum;
    if (!later || !start_check(e, h.header_bytes)) { /* now, on this thread and its helpers */
        bool summed;
        const uint64_t sum = sum_of((const char *)e->map + h.header_bytes, e->bytes - h.header_bytes, &summed);
        char reason[64];
        if (!payload_matches(summed, sum, h.checksum, reason, sizeof reason))
            return invalid(e, why, len, "%s", reason);
    }
    fill(e, &h);
    return EXE_LOAD_HIT;
}

void exe_entry_unmap(exe_entry *e) {
    if (e->check) { /* it reads the mapping: no more chunks for it, then it ends */
        queue_close(e->check);
        brg_pool_destroy(e->checker);
        queue_free(e->check);
    }
    if (e->map) munmap(e->map, e->bytes);
    memset(e, 0, sizeof *e);
}
