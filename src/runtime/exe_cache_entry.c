/* An executable-cache entry on disk: a fixed header (magic, version, key, sizes, checksums),
 * a table (placement, each parameter's offset and element count) and the parameters' F32 bytes,
 * each 64-byte aligned, the first at a page boundary so the whole file maps as it lies. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exe_cache_internal.h"
#include "io/atomic_file.h"

#define ENTRY_MAGIC "BRGEXEC\0"
#define ENTRY_VERSION 1u
#define PAGE 4096u
#define ALIGN 64u

typedef struct entry_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key[EXE_KEY_PARTS];
    uint64_t total_bytes;   /* the file's size */
    uint64_t checksum;      /* of bytes [header_bytes, total_bytes) */
    int32_t n_devices, n_blocks, n_layers, n_params;
    uint64_t table_offset;  /* int32 block_device[n_blocks], int32 layer_device[n_layers], then
                             * uint64 {offset, numel}[n_params] at the next 8-byte boundary */
    uint64_t payload_offset;
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

/* ---- writing ---- */

typedef struct layout {
    entry_header h;
    unsigned char *table; /* [payload_offset - table_offset] */
    uint64_t (*param)[2];
} layout;

static brg_status plan_layout(const exe_key *key, const brg_model *m, const brg_placement *pl, layout *lo) {
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
    h->table_offset = h->header_bytes;
    const uint64_t params_at = param_table_at(h);
    h->payload_offset = round_up(params_at + 16 * (uint64_t)m->n_params, PAGE);
    lo->table = calloc(1, h->payload_offset - h->table_offset);
    if (!lo->table) return brg_error(BRG_ERR_OOM, "cannot lay out the executable cache entry");
    int32_t *ints = (int32_t *)lo->table;
    for (int b = 0; b < pl->n_blocks; b++) ints[b] = pl->block_device[b];
    for (int l = 0; l < pl->n_layers; l++) ints[pl->n_blocks + l] = pl->layer_device[l];
    lo->param = (uint64_t(*)[2])(lo->table + (params_at - h->table_offset));
    uint64_t at = h->payload_offset;
    for (int p = 0; p < m->n_params; p++) {
        const uint64_t numel = (uint64_t)brg_tensor_numel(m->params[p].tensor);
        lo->param[p][0] = at;
        lo->param[p][1] = numel;
        at += round_up(numel * sizeof(float), ALIGN);
    }
    h->total_bytes = at;
    return BRG_OK;
}

/* The payload as written: each parameter, then zeros up to the next 64-byte boundary. */
static brg_status each_piece(const brg_model *m, brg_status (*fn)(void *ctx, const void *p, size_t n), void *ctx) {
    for (int p = 0; p < m->n_params; p++) {
        const size_t n = (size_t)brg_tensor_numel(m->params[p].tensor) * sizeof(float);
        BRG_TRY(fn(ctx, m->params[p].tensor->data, n - n % ALIGN));
        unsigned char tail[ALIGN] = {0};
        memcpy(tail, (const char *)m->params[p].tensor->data + (n - n % ALIGN), n % ALIGN);
        if (n % ALIGN) BRG_TRY(fn(ctx, tail, ALIGN));
    }
    return BRG_OK;
}

static brg_status hash_piece(void *ctx, const void *p, size_t n) {
    exe_hash_add(ctx, p, n);
    return BRG_OK;
}

static brg_status write_piece(void *ctx, const void *p, size_t n) { return brg_atomic_file_write(ctx, p, n); }

brg_status exe_entry_write(const char *path, const exe_key *key, const brg_model *m, const brg_placement *pl) {
    layout lo;
    BRG_TRY(plan_layout(key, m, pl, &lo));
    exe_hash h;
    exe_hash_init(&h, 0x454e5452);
    exe_hash_add(&h, lo.table, lo.h.payload_offset - lo.h.table_offset);
    (void)each_piece(m, hash_piece, &h); /* hashing cannot fail */
    lo.h.checksum = exe_hash_end(&h);
    lo.h.header_checksum = header_sum(lo.h);
    unsigned char head[PAGE] = {0};
    memcpy(head, &lo.h, sizeof lo.h);
    brg_atomic_file f;
    brg_status st = brg_atomic_file_open(path, &f);
    if (st == BRG_OK) st = brg_atomic_file_write(&f, head, lo.h.header_bytes);
    if (st == BRG_OK) st = brg_atomic_file_write(&f, lo.table, lo.h.payload_offset - lo.h.table_offset);
    if (st == BRG_OK) st = each_piece(m, write_piece, &f);
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
        h->n_layers > (1 << 20) || h->n_params > (1 << 24) || h->table_offset != h->header_bytes)
        return false;
    return h->payload_offset == round_up(param_table_at(h) + 16 * (uint64_t)h->n_params, PAGE) &&
           h->payload_offset <= h->total_bytes;
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
    return at == h->total_bytes;
}

static void fill(exe_entry *e, const entry_header *h) {
    int32_t *ints = (int32_t *)((char *)e->map + h->table_offset);
    e->placement = (brg_placement){BRG_IPU_MODE_INFERENCE, h->n_devices, h->n_blocks, ints, h->n_layers,
                                   ints + h->n_blocks};
    e->n_params = h->n_params;
}

exe_load_result exe_entry_load(const char *path, const exe_key *key, exe_entry *e, char *why, size_t len) {
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
     * a later write copies its page and never reaches the file. */
    e->map = mmap(NULL, e->bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
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
    exe_hash sum;
    exe_hash_init(&sum, 0x454e5452);
    exe_hash_add(&sum, (const char *)e->map + h.header_bytes, e->bytes - h.header_bytes);
    if (exe_hash_end(&sum) != h.checksum) return invalid(e, why, len, "%s", "corrupt (checksum mismatch)");
    e->param = (const uint64_t *)((const char *)e->map + param_table_at(&h));
    if (!params_sane(e, &h)) return invalid(e, why, len, "%s", "corrupt (inconsistent table)");
    fill(e, &h);
    return EXE_LOAD_HIT;
}

void exe_entry_unmap(exe_entry *e) {
    if (e->map) munmap(e->map, e->bytes);
    memset(e, 0, sizeof *e);
}
