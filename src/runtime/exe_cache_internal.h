/* Executable-cache internals: the entry's key (exe_cache_key.c) and its file (exe_cache_entry.c);
 * brigade/exe_cache.h says what an entry is for. */
#ifndef BRIGADE_EXE_CACHE_INTERNAL_H
#define BRIGADE_EXE_CACHE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/exe_cache.h"
#include "brigade/placement.h"

/* What an entry depends on, each hashed on its own so a stale entry can say what changed. */
typedef enum exe_key_part {
    EXE_KEY_MODEL_CONFIG,
    EXE_KEY_WEIGHTS,
    EXE_KEY_IPU_CONFIG,
    EXE_KEY_SHAPES,
    EXE_KEY_PRECISION,
    EXE_KEY_CPU,
    EXE_KEY_BUILD,
    EXE_KEY_PARTS
} exe_key_part;

typedef struct exe_key {
    uint64_t part[EXE_KEY_PARTS];
} exe_key;

/* "the weights file (size, mtime, header)", ... for the stale-entry message. */
const char *exe_key_part_name(exe_key_part part);

/* A 64-bit hash, fed in pieces; every piece but the last a multiple of 64 bytes long. */
typedef struct exe_hash {
    uint64_t lane[8];
    uint64_t bytes;
} exe_hash;
void exe_hash_init(exe_hash *h, uint64_t seed);
void exe_hash_add(exe_hash *h, const void *data, size_t n);
uint64_t exe_hash_end(const exe_hash *h);
uint64_t exe_hash_of(const void *data, size_t n, uint64_t seed);

/* The key of `rq` over the resolved model folder `dir`. */
brg_status exe_key_compute(const brg_cached_inference_request *rq, const char *dir, exe_key *out);

/* ---- the entry file ---- */

typedef struct chunk_queue chunk_queue; /* exe_cache_entry.c */

/* A mapped, checked entry. */
typedef struct exe_entry {
    void *map;
    size_t bytes;
    brg_placement placement; /* points into the mapping: not freed */
    int n_params;
    const uint64_t *param; /* [n_params][2]: offset in the file, element count */
    int n_packs;
    const uint64_t *pack; /* [n_packs][EXE_PACK_FIELDS] (enum exe_pack_field) */
    /* A check of the payload in the background (NULL: none pending): `checker` and then
     * exe_entry_confirm take its chunks; the payload should sum to check_want. */
    struct chunk_queue *check;
    struct brg_pool *checker; /* its one thread (core/thread_pool.h) */
    uint64_t check_want;
} exe_entry;

/* A packed weight's row in the entry's table (packed_weights.h: the panels of one parameter
 * as op(B) in one layout); the panels lie after the parameters, each 64-byte aligned. */
enum exe_pack_field {
    EXE_PACK_PARAM, EXE_PACK_LAYOUT, EXE_PACK_TRANS_B, EXE_PACK_K, EXE_PACK_N, EXE_PACK_LDB, EXE_PACK_OFFSET,
    EXE_PACK_BYTES, EXE_PACK_DEVICES, EXE_PACK_FIELDS
};

typedef enum exe_load_result { EXE_LOAD_HIT, EXE_LOAD_ABSENT, EXE_LOAD_INVALID } exe_load_result;

/* Maps and checks `path` against `key`; INVALID with `why` ("truncated", "stale: the IPUConfig
 * changed", ...) for any entry that must not be used. With `later`, the payload's checksum is
 * checked in the background (exe_cache_entry.c) and a HIT is provisional until exe_entry_confirm. */
exe_load_result exe_entry_load(const char *path, const exe_key *key, exe_entry *out, bool later, char *why,
                               size_t why_len);
/* Waits for a background check: false (with `why`) when the payload does not match its checksum.
 * True at once when nothing is pending. */
bool exe_entry_confirm(exe_entry *e, char *why, size_t why_len);
void exe_entry_unmap(exe_entry *e);
/* Writes the model's F32 parameters, the placement and the packed weights as an entry, atomically. */
struct packed_weight_record;
brg_status exe_entry_write(const char *path, const exe_key *key, const brg_model *m, const brg_placement *pl,
                           const struct packed_weight_record *packs, int n_packs);

#endif
