/* PNG and JPEG decoding from memory (with a small pixel limit, so that a claimed size costs the
 * fuzzer nothing), then resizing and preprocessing what decodes: an accepted image must be whole
 * and usable. */
#include "brigade/image.h"
#include "fuzz_util.h"
#include "image/image_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brg_image img;
    if (img_decode_limited(data, size, "fuzz", 1 << 20, &img) != BRG_OK) {
        if (img.rgb || img.width || strchr(brg_last_error(), '\n')) abort(); /* zeroed, one line */
        return 0;
    }
    if (!img.rgb || img.width < 1 || img.height < 1) abort();
    brg_image_processor p;
    brg_image_processor_default(&p);
    p.height = 7;
    p.width = 5;
    p.resample = (brg_resample)(1 + size % 5);
    float out[3 * 7 * 5];
    if (brg_image_preprocess(&p, &img, out) != BRG_OK) abort();
    brg_image_free(&img);
    return 0;
}
