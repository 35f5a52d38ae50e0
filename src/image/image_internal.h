/* Internals of the image decoders (src/image/): the PNG and JPEG back ends, the EXIF orientation
 * readers they share, and the decode entry point with an explicit pixel limit (the fuzz harness
 * lowers it). Not public API. */
#ifndef BRIGADE_IMAGE_INTERNAL_H
#define BRIGADE_IMAGE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "brigade/image.h"

/* brg_image_decode with `max_pixels` in place of BRG_IMAGE_MAX_PIXELS. */
brg_status img_decode_limited(const void *data, size_t size, const char *name, int64_t max_pixels, brg_image *out);

/* Each decodes a whole file of its format into out->rgb (malloc'd) and sets *orientation to the
 * EXIF orientation it carries (1 when none). Messages start with `name`. */
brg_status img_decode_png(const uint8_t *data, size_t size, const char *name, int64_t max_pixels, brg_image *out,
                          int *orientation);
brg_status img_decode_jpeg(const uint8_t *data, size_t size, const char *name, int64_t max_pixels, brg_image *out,
                           int *orientation);

/* The size check both decoders make before allocating: 1..BRG_IMAGE_MAX_SIDE each way and at
 * most max_pixels in all. */
brg_status img_check_size(const char *name, const char *format, int64_t width, int64_t height, int64_t max_pixels);

/* The Orientation tag (0x0112) of EXIF data as Pillow's Exif.load reads it: an optional
 * "Exif\0\0" prefix, a TIFF header, IFD 0; a SHORT or LONG value with one element. 0 when
 * absent or unreadable (never an error: Pillow's exif_transpose then leaves the image as it is). */
int img_exif_orientation(const uint8_t *data, size_t len);
/* XMP's tiff:Orientation="N" or <tiff:Orientation>N, as Pillow's getexif falls back to; 0 if none. */
int img_xmp_orientation(const uint8_t *data, size_t len);

#endif
