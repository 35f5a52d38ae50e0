/* Images as transformers' image pipelines see them: PNG (libpng) and JPEG (libjpeg-turbo) files
 * decoded to 8-bit RGB as transformers' load_image gives them (PIL.Image.open, then
 * ImageOps.exif_transpose, then convert("RGB")), and preprocessed into pixel_values as
 * ViTImageProcessorPil does from a folder's preprocessor_config.json (resize with Pillow's
 * resampling filters, center crop, rescale, normalize).
 *
 * Decoding follows Pillow's conversions to RGB:
 *   PNG  8-bit gray, RGB: as stored; gray at 1, 2 or 4 bits scaled to 0..255 (v * 255 / (2^d - 1));
 *        palette (1, 2, 4, 8-bit indices) through PLTE, indices past it black; 16-bit RGB, RGBA
 *        and gray+alpha: the high byte of each sample; 16-bit gray (Pillow's I;16): min(v, 255);
 *        alpha (an alpha channel or tRNS) dropped, not composited (convert("RGB")); gamma, sBIT
 *        and ICC profiles ignored; Adam7 interlacing.
 *   JPEG baseline and progressive, any chroma subsampling (libjpeg's default ISLOW IDCT and fancy
 *        upsampling, as Pillow decodes); grayscale replicated; CMYK and YCCK as Pillow's
 *        "CMYK;I" (Adobe's inverted samples) then cmyk2rgb. A file cut short is an error, as
 *        Pillow's "image file is truncated"; libjpeg's warnings on corrupt data are ignored, as
 *        Pillow ignores them.
 *   The EXIF orientation (JPEG APP1 Exif, PNG eXIf or an ImageMagick "Raw profile type exif" text
 *        chunk, else XMP's tiff:Orientation) is applied as exif_transpose does.
 * Anything else (other formats, 12-bit JPEG, arithmetic coding where libjpeg lacks it) is an error
 * naming the file and what it is; a truncated or corrupt file is one one-line error, never a
 * crash. Sizes past BRG_IMAGE_MAX_SIDE or BRG_IMAGE_MAX_PIXELS are refused before anything of
 * that size is allocated. */
#ifndef BRIGADE_IMAGE_H
#define BRIGADE_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Widest and tallest image decoded (JPEG's own limit). */
#define BRG_IMAGE_MAX_SIDE 65535
/* Most pixels decoded: Pillow's DecompressionBombError threshold (2 x Image.MAX_IMAGE_PIXELS). */
#define BRG_IMAGE_MAX_PIXELS 178956970LL

/* An 8-bit RGB image, rows top to bottom: pixel (x, y) is rgb[(y * width + x) * 3 + {0, 1, 2}]. */
typedef struct brg_image {
    int64_t width, height;
    uint8_t *rgb; /* malloc'd; brg_image_free */
} brg_image;

/* The file's image; `out` is zeroed on failure. Messages start with the path. */
brg_status brg_image_load(const char *path, brg_image *out);
/* The same from memory; `name` labels messages. */
brg_status brg_image_decode(const void *data, size_t size, const char *name, brg_image *out);
void brg_image_free(brg_image *img);

/* Pillow's resampling filters, by PIL.Image.Resampling's numbers (preprocessor_config.json's
 * "resample"). NEAREST is not implemented. */
typedef enum brg_resample {
    BRG_RESAMPLE_NEAREST = 0,
    BRG_RESAMPLE_LANCZOS = 1,
    BRG_RESAMPLE_BILINEAR = 2,
    BRG_RESAMPLE_BICUBIC = 3,
    BRG_RESAMPLE_BOX = 4,
    BRG_RESAMPLE_HAMMING = 5,
} brg_resample;

/* "nearest", "lanczos", "bilinear", ... */
const char *brg_resample_name(brg_resample filter);

/* Image.resize((width, height), filter) bit for bit: Pillow's separable convolution (the filter
 * stretched by the scale when downscaling, so it antialiases), 8-bit fixed-point coefficients (22
 * fraction bits), two passes each rounded and clipped to 8 bits: horizontal first, unless the
 * height shrinks by more than twice as many pixels as the width (then vertical first, as Pillow 13).
 * The same size copies. `out` is zeroed on failure. */
brg_status brg_image_resize(const brg_image *in, int64_t width, int64_t height, brg_resample filter, brg_image *out);

/* preprocessor_config.json as ViTImageProcessorPil reads it. Only the fields below matter; keys
 * that would change the result and that brigade does not implement (do_pad, size with
 * longest_edge or max_height/max_width) are errors naming them. */
typedef struct brg_image_processor {
    bool do_resize;
    /* size: {"height", "width"} (or a plain number: a square), else {"shortest_edge"} (the short
     * side to that, the long one int(size * long / short)); the other fields 0. */
    int64_t height, width, shortest_edge;
    brg_resample resample;
    bool do_center_crop;
    int64_t crop_height, crop_width; /* crop_size; zeros pad an image smaller than it */
    bool do_rescale;
    double rescale_factor; /* pixel * factor in double, then rounded to float, as numpy does */
    bool do_normalize;
    float image_mean[3], image_std[3]; /* (x - mean) / std in float32 */
    /* do_convert_rgb is accepted and changes nothing: decoded images are RGB already. */
} brg_image_processor;

/* ViTImageProcessor's defaults: resize to 224x224 bilinear, rescale 1/255, normalize with mean
 * and std 0.5, no crop. */
void brg_image_processor_default(brg_image_processor *p);
/* The defaults overridden by the JSON text of a preprocessor_config.json (`ctx` names it). */
brg_status brg_image_processor_from_json(const char *json, size_t len, const char *ctx, brg_image_processor *p);
/* DIR/preprocessor_config.json; a folder without one is BRG_ERR_NOT_FOUND naming it. */
brg_status brg_image_processor_load(const char *dir, brg_image_processor *p);

/* The [height, width] pixel_values of an image of that size get. */
brg_status brg_image_processor_output_size(const brg_image_processor *p, int64_t width, int64_t height,
                                           int64_t *out_height, int64_t *out_width);
/* pixel_values of one image, channels first: out[c * H * W + y * W + x] for the H x W that
 * brg_image_processor_output_size gives (out holds 3 * H * W floats). */
brg_status brg_image_preprocess(const brg_image_processor *p, const brg_image *img, float *out);

#ifdef __cplusplus
}
#endif
#endif
