/* Hugging Face model folders: finding one (a path, or a hub id in the local cache) and reading
 * its weights, whether in one model.safetensors or sharded under model.safetensors.index.json. */
#ifndef BRIGADE_CHECKPOINT_H
#define BRIGADE_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "brigade/status.h"
#include "brigade/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns a model reference into a folder path written to dir[0..dir_len).
 *
 * An existing directory is used as is. Anything else is read as a hub id ("gpt2",
 * "Graphcore/gpt2-small-ipu", optionally "id@revision") and looked up OFFLINE in the Hugging
 * Face cache, as huggingface_hub lays it out: the cache is $HF_HUB_CACHE, else
 * $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub; the model is models--{org}--{name}/snapshots/<commit>, where
 * <commit> is the content of refs/<revision> (default "main"), or the revision itself when it
 * is a 40-hex-digit commit hash. With no revision and no refs/main, a single snapshot is used.
 *
 * BRG_ERR_NOT_FOUND says where it looked (brigade never downloads); BRG_ERR_INVALID_ARG when the
 * path does not fit in dir_len bytes. */
brg_status brg_hf_resolve(const char *ref, char *dir, size_t dir_len);

typedef struct brg_checkpoint brg_checkpoint;

/* Opens dir/model.safetensors, else the shards listed in dir/model.safetensors.index.json, and
 * validates all of them: shard names must be plain file names, every tensor of the weight_map
 * must be in the shard it names, and no tensor may appear in two shards. Tensors a shard holds
 * beyond the weight_map are kept. BRG_ERR_NOT_FOUND when the folder holds neither file. */
brg_status brg_checkpoint_open(const char *dir, brg_checkpoint **out);
void brg_checkpoint_close(brg_checkpoint *ckpt);

/* All tensors across shards: shard by shard (shards in file-name order), each in data order. */
size_t brg_checkpoint_count(const brg_checkpoint *ckpt);
const char *brg_checkpoint_name(const brg_checkpoint *ckpt, size_t i);

bool brg_checkpoint_has(const brg_checkpoint *ckpt, const char *name);

/* A read-only view into the shard's mapping, possibly unaligned (see brigade/safetensors.h);
 * valid until brg_checkpoint_close. BRG_ERR_NOT_FOUND naming the tensor and the folder. */
brg_status brg_checkpoint_get(const brg_checkpoint *ckpt, const char *name, brg_tensor *out);

/* The folder, and the number of weight files (1 for model.safetensors). */
const char *brg_checkpoint_dir(const brg_checkpoint *ckpt);
size_t brg_checkpoint_shard_count(const brg_checkpoint *ckpt);

#ifdef __cplusplus
}
#endif
#endif
