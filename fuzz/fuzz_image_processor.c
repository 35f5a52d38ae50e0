/* preprocessor_config.json (ViTImageProcessor's keys: size in its three forms, resample,
 * center crop, rescale, normalize, the keys brigade refuses), then the processor applied to a
 * fixed 5x3 image when its output is small, so an accepted config must really be usable. */
#include "brigade/image.h"
#include "fuzz_util.h"

/* Most output pixels a run here may make: keeps each input fast. */
#define MAX_OUT (64 * 64)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    brg_image_processor p;
    brg_image_processor_default(&p);
    if (brg_image_processor_from_json((const char *)data, size, "fuzz", &p) != BRG_OK) return 0;
    uint8_t rgb[5 * 3 * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 37);
    const brg_image img = {.width = 5, .height = 3, .rgb = rgb};
    int64_t h, w;
    if (brg_image_processor_output_size(&p, img.width, img.height, &h, &w) != BRG_OK) return 0;
    if (h <= 0 || w <= 0 || h > MAX_OUT / w) return 0;
    float *out = malloc((size_t)(3 * h * w) * sizeof *out);
    if (!out) abort();
    (void)brg_image_preprocess(&p, &img, out);
    free(out);
    return 0;
}
