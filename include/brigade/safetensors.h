/* safetensors files: validated reading (memory-mapped, zero copy) and atomic writing.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of UTF-8 JSON
 * ({"__metadata__": {string: string}, "name": {"dtype", "shape", "data_offsets"}, ...}), then
 * the tensor bytes, little-endian and row-major, packed back to back from offset 0.
 *
 * Opening validates everything the reference reader does (huggingface/safetensors) and a little
 * more (duplicate names, unknown fields in a tensor entry, non-integer numbers); a file that
 * opens is safe to read with no further checks. Every rejection is BRG_ERR_FORMAT with a message
 * naming the file ("<buffer>" for brg_safetensors_parse) and the problem, except dtypes that
 * safetensors defines but brigade does not compute with (F64, U8, I8, I16, F8_*, ...) and
 * tensors of more than BRG_MAX_DIMS dimensions: those are BRG_ERR_UNSUPPORTED, naming the tensor.
 *
 * Alignment: the format gives no alignment guarantee, so the data of a tensor view may sit at
 * any address. Read it through brg_tensor_copy or brg_tensor_get (memcpy based), never by
 * casting the pointer to float* or int64_t*. Views of an opened file are read-only memory. */
#ifndef BRIGADE_SAFETENSORS_H
#define BRIGADE_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>

#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reference's cap on the JSON header, enforced on read and write. */
#define BRG_SAFETENSORS_MAX_HEADER 100000000u

typedef struct brg_safetensors brg_safetensors;

/* Maps `path` read-only and validates it. Close with brg_safetensors_close. As with any mapping,
 * the file must not be truncated while it is open (brigade's own writers replace files by
 * rename, which is safe). */
brg_status brg_safetensors_open(const char *path, brg_safetensors **out);

/* Same validation over a caller-owned buffer, which is not copied and must outlive the handle.
 * Messages name the input "<buffer>". */
brg_status brg_safetensors_parse(const void *buf, size_t len, brg_safetensors **out);

/* Unmaps and frees; tensor views and strings obtained from the handle die with it. NULL is ok. */
void brg_safetensors_close(brg_safetensors *st);

/* The file name given to open, or "<buffer>". */
const char *brg_safetensors_source(const brg_safetensors *st);

/* Tensors, in the order of their data in the file. */
size_t brg_safetensors_count(const brg_safetensors *st);
const char *brg_safetensors_name(const brg_safetensors *st, size_t i);

bool brg_safetensors_has(const brg_safetensors *st, const char *name);

/* A contiguous view into the mapping (see the alignment note above); out->name is the tensor's
 * name, owned by the handle. BRG_ERR_NOT_FOUND, naming the tensor and the file, if absent. */
brg_status brg_safetensors_get(const brg_safetensors *st, const char *name, brg_tensor *out);

/* The "__metadata__" map, in file order. brg_safetensors_metadata returns NULL when absent. */
const char *brg_safetensors_metadata(const brg_safetensors *st, const char *key);
size_t brg_safetensors_metadata_count(const brg_safetensors *st);
const char *brg_safetensors_metadata_key(const brg_safetensors *st, size_t i);
const char *brg_safetensors_metadata_value(const brg_safetensors *st, size_t i);

typedef struct brg_named_tensor {
    const char *name;
    const brg_tensor *tensor; /* any strides; written contiguously */
} brg_named_tensor;

typedef struct brg_metadata_entry {
    const char *key;
    const char *value;
} brg_metadata_entry;

/* Writes a safetensors file the reference reader accepts: data ordered by descending dtype size,
 * then name (as the reference writer does), header padded with spaces to a multiple of 8 bytes,
 * "__metadata__" first when n_meta > 0. Names must be non-empty, unique and not "__metadata__";
 * metadata keys non-empty and unique (BRG_ERR_INVALID_ARG otherwise, before anything is written).
 * The write is atomic: a temporary "<path>.tmp.<pid>" is fsynced and renamed over `path`; on any
 * failure it is removed and an existing file at `path` is left as it was. */
brg_status brg_safetensors_write(const char *path, const brg_named_tensor *tensors, size_t n,
                                 const brg_metadata_entry *meta, size_t n_meta);

#ifdef __cplusplus
}
#endif
#endif
