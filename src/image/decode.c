/* Image files to 8-bit RGB: the format from the file's signature, the back end (png.c, jpeg.c),
 * then the EXIF orientation applied as PIL.ImageOps.exif_transpose does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image/image_internal.h"

/* A file larger than this is not read (the largest image, RGBA at 16 bits uncompressed, is
 * 8 bytes a pixel; a valid file of the largest allowed size stays well below it). */
#define MAX_FILE_BYTES ((size_t)2 << 30)

void brg_image_free(brg_image *img) {
    if (!img) return;
    free(img->rgb);
    memset(img, 0, sizeof *img);
}

brg_status img_check_size(const char *name, const char *format, int64_t width, int64_t height, int64_t max_pixels) {
    if (width < 1 || height < 1)
        return brg_error(BRG_ERR_FORMAT, "%s: %s of %lldx%lld pixels: an image needs at least one", name, format,
                         (long long)width, (long long)height);
    if (width > BRG_IMAGE_MAX_SIDE || height > BRG_IMAGE_MAX_SIDE)
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %s of %lldx%lld pixels: wider or taller than the %d brigade decodes",
                         name, format, (long long)width, (long long)height, BRG_IMAGE_MAX_SIDE);
    if (width * height > max_pixels)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: %s of %lldx%lld = %lld pixels: more than the %lld brigade decodes (Pillow's "
                         "decompression-bomb limit)",
                         name, format, (long long)width, (long long)height, (long long)(width * height),
                         (long long)max_pixels);
    return BRG_OK;
}

/* ---- EXIF and XMP orientation --------------------------------------------------------------- */

static uint32_t rd16(const uint8_t *p, int big) { return big ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0]; }
static uint32_t rd32(const uint8_t *p, int big) {
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

int img_exif_orientation(const uint8_t *d, size_t len) {
    if (len >= 6 && memcmp(d, "Exif\0\0", 6) == 0) {
        d += 6;
        len -= 6;
    }
    if (len < 8) return 0;
    int big;
    if (memcmp(d, "II*\0", 4) == 0) big = 0;
    else if (memcmp(d, "MM\0*", 4) == 0) big = 1;
    else return 0;
    uint32_t ifd = rd32(d + 4, big);
    if (ifd > len || len - ifd < 2) return 0;
    uint32_t n = rd16(d + ifd, big);
    for (uint32_t i = 0; i < n; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > len) return 0;
        if (rd16(d + e, big) != 0x0112) continue;
        uint32_t type = rd16(d + e + 2, big), count = rd32(d + e + 4, big);
        if (count != 1) return 0;
        if (type == 3) return (int)rd16(d + e + 8, big);             /* SHORT */
        if (type == 4) return (int)(rd32(d + e + 8, big) & 0xffff);  /* LONG (orientations are small) */
        return 0;
    }
    return 0;
}

int img_xmp_orientation(const uint8_t *d, size_t len) {
    static const char key[] = "tiff:Orientation";
    const size_t k = sizeof key - 1;
    for (size_t i = 0; i + k < len; i++) {
        if (memcmp(d + i, key, k) != 0) continue;
        size_t j = i + k; /* j < len */
        if (d[j] == '>' && j + 1 < len && d[j + 1] >= '0' && d[j + 1] <= '9') return d[j + 1] - '0';
        if (d[j] == '=' && j + 2 < len && d[j + 1] == '"' && d[j + 2] >= '0' && d[j + 2] <= '9') return d[j + 2] - '0';
    }
    return 0;
}

/* exif_transpose: orientation 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE,
 * 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90; anything else leaves the image. */
static brg_status transpose(brg_image *img, int orientation, const char *name) {
    if (orientation < 2 || orientation > 8) return BRG_OK;
    const int64_t W = img->width, H = img->height;
    const bool swap = orientation >= 5;
    const int64_t ow = swap ? H : W, oh = swap ? W : H;
    uint8_t *out = malloc((size_t)(W * H) * 3);
    if (!out) return brg_error(BRG_ERR_OOM, "%s: no memory to turn a %lldx%lld image", name, (long long)W, (long long)H);
    for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++) {
            int64_t sx, sy;
            switch (orientation) {
            case 2: sx = W - 1 - x; sy = y; break;
            case 3: sx = W - 1 - x; sy = H - 1 - y; break;
            case 4: sx = x; sy = H - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = H - 1 - x; break;
            case 7: sx = W - 1 - y; sy = H - 1 - x; break;
            default: sx = W - 1 - y; sy = x; break; /* 8 */
            }
            memcpy(out + (y * ow + x) * 3, img->rgb + (sy * W + sx) * 3, 3);
        }
    free(img->rgb);
    img->rgb = out;
    img->width = ow;
    img->height = oh;
    return BRG_OK;
}

/* ---- entry points ------------------------------------------------------------------------- */

brg_status img_decode_limited(const void *data, size_t size, const char *name, int64_t max_pixels, brg_image *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *d = data;
    int orientation = 1;
    brg_status st;
    if (size >= 8 && memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) {
        st = img_decode_png(d, size, name, max_pixels, out, &orientation);
    } else if (size >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) {
        st = img_decode_jpeg(d, size, name, max_pixels, out, &orientation);
    } else if (size == 0) {
        return brg_error(BRG_ERR_FORMAT, "%s: the file is empty", name);
    } else {
        const char *what = size >= 6 && (memcmp(d, "GIF87a", 6) == 0 || memcmp(d, "GIF89a", 6) == 0) ? "a GIF"
                           : size >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0 ? "a WebP"
                           : size >= 2 && memcmp(d, "BM", 2) == 0                                  ? "a BMP"
                           : size >= 4 && (memcmp(d, "II*\0", 4) == 0 || memcmp(d, "MM\0*", 4) == 0) ? "a TIFF"
                           : size >= 8 && memcmp(d, "\x89PNG", 4) == 0 ? "a damaged PNG (bad signature)"
                                                                       : "not a PNG or JPEG";
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %s file (brigade decodes PNG and JPEG)", name, what);
    }
    if (st == BRG_OK) st = transpose(out, orientation, name);
    if (st != BRG_OK) brg_image_free(out);
    return st;
}

brg_status brg_image_decode(const void *data, size_t size, const char *name, brg_image *out) {
    if (!out) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_decode: no output image");
    if (!data && size) {
        memset(out, 0, sizeof *out);
        return brg_error(BRG_ERR_INVALID_ARG, "brg_image_decode: no data");
    }
    return img_decode_limited(data, size, name ? name : "image", BRG_IMAGE_MAX_PIXELS, out);
}

brg_status brg_image_load(const char *path, brg_image *out) {
    if (!out) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_load: no output image");
    memset(out, 0, sizeof *out);
    if (!path) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_load: no path");
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(errno == ENOENT ? BRG_ERR_NOT_FOUND : BRG_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return brg_error(BRG_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)sb.st_size > MAX_FILE_BYTES) {
        fclose(f);
        return brg_error(BRG_ERR_UNSUPPORTED, "%s: %lld bytes: larger than any image brigade decodes", path,
                         (long long)sb.st_size);
    }
    size_t size = (size_t)sb.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return brg_error(BRG_ERR_OOM, "%s: no memory to read %zu bytes", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    int err = ferror(f);
    fclose(f);
    if (got != size || err) {
        free(buf);
        return brg_error(BRG_ERR_IO, "cannot read %s", path);
    }
    brg_status st = img_decode_limited(buf, size, path, BRG_IMAGE_MAX_PIXELS, out);
    free(buf);
    return st;
}
