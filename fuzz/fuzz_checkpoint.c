/* A sharded model folder's model.safetensors.index.json: its weight_map against two fixed shards
 * (a.safetensors: x, y; b.safetensors: z), shard names that are not plain file names, tensors
 * listed in the wrong shard or in two, metadata. A folder that opens has every tensor read. */
#include "brigade/checkpoint.h"
#include "brigade/tensor.h"
#include "fuzz_util.h"

/* What the reads add up to: stored, so the compiler keeps the reads. */
static volatile uint64_t sink;

/* A safetensors file of F32 tensors of 1 to 2 values: header (padded to 8 bytes), then data. */
static void write_shard(const char *name, const char *header, size_t data_bytes) {
    size_t n = strlen(header), padded = (n + 7) / 8 * 8;
    uint8_t buf[512] = {0};
    if (8 + padded + data_bytes > sizeof buf) abort();
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, ' ', padded - n);
    fuzz_write_file(name, buf, 8 + padded + data_bytes);
}

static const char *folder(void) {
    static char dir[600];
    if (!dir[0]) {
        write_shard("a.safetensors",
                    "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12);
        write_shard("b.safetensors", "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
        snprintf(dir, sizeof dir, "%s", fuzz_write_file("b.safetensors.tmp", (const uint8_t *)"", 0));
        *strrchr(dir, '/') = '\0';
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *dir = folder();
    fuzz_write_file("model.safetensors.index.json", data, size);
    brg_checkpoint *ck = NULL;
    if (brg_checkpoint_open(dir, &ck) != BRG_OK) return 0;
    for (size_t i = 0; i < brg_checkpoint_count(ck); i++) {
        const char *name = brg_checkpoint_name(ck, i);
        brg_tensor t;
        if (!brg_checkpoint_has(ck, name) || brg_checkpoint_get(ck, name, &t) != BRG_OK) abort();
        float v[2];
        brg_tensor dst = brg_tensor_wrap(BRG_DTYPE_F32, t.ndim, t.shape, v);
        if (brg_tensor_numel(&t) <= 2 && brg_tensor_copy(&dst, &t) == BRG_OK) sink += v[0] != 0;
    }
    brg_checkpoint_close(ck);
    return 0;
}
