/* safetensors from memory: header, offsets, dtypes, metadata; every tensor it accepts is read
 * back whole (converted to F32 where it can be), so an accepted file must really be readable. */
#include "brigade/safetensors.h"
#include "brigade/tensor.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brg_safetensors *st = NULL;
    if (brg_safetensors_parse(data, size, &st) != BRG_OK) return 0;
    for (size_t i = 0; i < brg_safetensors_count(st); i++) {
        brg_tensor t;
        if (brg_safetensors_get(st, brg_safetensors_name(st, i), &t) != BRG_OK) continue;
        int64_t n = brg_tensor_numel(&t);
        if (n > (1 << 22)) continue; /* a huge but valid tensor: reading it proves nothing more */
        float *buf = malloc((size_t)(n ? n : 1) * sizeof(float));
        brg_tensor dst = brg_tensor_wrap(BRG_DTYPE_F32, t.ndim, t.shape, buf);
        (void)brg_tensor_copy(&dst, &t);
        free(buf);
    }
    for (size_t i = 0; i < brg_safetensors_metadata_count(st); i++) {
        const char *key = brg_safetensors_metadata_key(st, i);
        if (brg_safetensors_metadata(st, key) == NULL) abort(); /* every listed key must be found */
        (void)brg_safetensors_metadata_value(st, i);
    }
    brg_safetensors_close(st);
    return 0;
}
