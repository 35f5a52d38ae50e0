/* PNG through libpng's classic API, with no colour transformation but unpacking sub-byte samples
 * (and Adam7 deinterlacing): the samples as stored, converted to RGB here as Pillow's PNG plugin
 * and convert("RGB") do (see brigade/image.h). */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/image_internal.h"

typedef struct png_src {
    const uint8_t *data;
    size_t size, pos;
    char msg[256];  /* libpng's error message */
    int phase;      /* 0: the header and image data; 1: the chunks after them */
} png_src;

static void on_error(png_structp png, png_const_charp msg) {
    png_src *src = png_get_error_ptr(png);
    snprintf(src->msg, sizeof src->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void on_read(png_structp png, png_bytep out, size_t n) {
    png_src *src = png_get_io_ptr(png);
    if (src->size - src->pos < n) png_error(png, "the file is truncated");
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

/* One row of samples as stored (sub-byte samples unpacked to a byte each, 16-bit ones big
 * endian) to RGB. */
static void row_to_rgb(const uint8_t *s, uint8_t *o, int64_t w, int color_type, int depth, const uint8_t (*lut)[3]) {
    switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
        if (depth == 16) {
            for (int64_t x = 0; x < w; x++) { /* Pillow's I;16, then I16_RGB: clipped at 255 */
                uint8_t v = s[2 * x] ? 255 : s[2 * x + 1];
                o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = v;
            }
        } else {
            const int scale = depth == 1 ? 255 : depth == 2 ? 85 : depth == 4 ? 17 : 1;
            for (int64_t x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = (uint8_t)(s[x] * scale);
        }
        break;
    case PNG_COLOR_TYPE_GRAY_ALPHA: {
        const int step = depth == 16 ? 4 : 2; /* the high byte of a 16-bit sample; alpha dropped */
        for (int64_t x = 0; x < w; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = s[step * x];
        break;
    }
    case PNG_COLOR_TYPE_RGB:
    case PNG_COLOR_TYPE_RGB_ALPHA: {
        const int bytes = depth == 16 ? 2 : 1, px = (color_type == PNG_COLOR_TYPE_RGB ? 3 : 4) * bytes;
        for (int64_t x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) o[3 * x + c] = s[px * x + bytes * c];
        break;
    }
    default: /* palette */
        for (int64_t x = 0; x < w; x++) memcpy(o + 3 * x, lut[s[x]], 3);
        break;
    }
}

/* Everything the error path needs, on the heap: nothing setjmp's frame holds in a register
 * changes after setjmp. */
typedef struct png_job {
    png_src src;
    png_structp png;
    png_infop info;
    int64_t W, H;
    uint8_t *rgb, *rows, *row;
    png_bytep *row_ptrs;
} png_job;

static void job_free(png_job *j, bool keep_rgb) {
    png_destroy_read_struct(&j->png, &j->info, NULL);
    if (!keep_rgb) free(j->rgb);
    free(j->rows);
    free(j->row);
    free(j->row_ptrs);
    free(j);
}

/* EXIF orientation of the chunks read so far: eXIf, an ImageMagick "Raw profile type exif" text
 * (hex after three header lines), then XMP's tiff:Orientation (iTXt XML:com.adobe.xmp). */
static int orientation_of(png_structp png, png_infop info) {
    png_bytep exif = NULL;
    png_uint_32 n = 0;
    if (png_get_eXIf_1(png, info, &n, &exif) && exif && n) return img_exif_orientation(exif, n);
    png_textp text = NULL;
    int nt = 0;
    png_get_text(png, info, &text, &nt);
    for (int i = 0; i < nt; i++) {
        if (strcmp(text[i].key, "Raw profile type exif") != 0 || !text[i].text) continue;
        const char *t = text[i].text;
        for (int line = 0; line < 3 && t; line++) {
            t = strchr(t, '\n');
            if (t) t++;
        }
        if (!t) return 0;
        size_t len = strlen(t), got = 0;
        uint8_t *bin = malloc(len / 2 + 1);
        if (!bin) return 0;
        int hi = -1;
        for (size_t k = 0; k < len; k++) {
            int c = (unsigned char)t[k], v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (v < 0) continue;
            if (hi < 0) hi = v;
            else {
                bin[got++] = (uint8_t)(hi << 4 | v);
                hi = -1;
            }
        }
        int o = img_exif_orientation(bin, got);
        free(bin);
        return o;
    }
    for (int i = 0; i < nt; i++)
        if (strcmp(text[i].key, "XML:com.adobe.xmp") == 0 && text[i].text)
            return img_xmp_orientation((const uint8_t *)text[i].text, strlen(text[i].text));
    return 0;
}

brg_status img_decode_png(const uint8_t *data, size_t size, const char *name, int64_t max_pixels, brg_image *out,
                          int *orientation) {
    /* IHDR comes first (libpng insists): its size is refused before libpng reads any further. */
    if (size >= 24 && memcmp(data + 12, "IHDR", 4) == 0) {
        const int64_t w = (int64_t)data[16] << 24 | data[17] << 16 | data[18] << 8 | data[19];
        const int64_t h = (int64_t)data[20] << 24 | data[21] << 16 | data[22] << 8 | data[23];
        if (w >= 1 && h >= 1) BRG_TRY(img_check_size(name, "PNG", w, h, max_pixels));
    }
    png_job *const j = calloc(1, sizeof *j);
    if (!j) return brg_error(BRG_ERR_OOM, "%s: no memory for the PNG decoder", name);
    j->src = (png_src){.data = data, .size = size};
    j->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &j->src, on_error, on_warning);
    if (j->png) j->info = png_create_info_struct(j->png);
    if (!j->png || !j->info) {
        job_free(j, false);
        return brg_error(BRG_ERR_OOM, "%s: no memory for the PNG decoder", name);
    }
    if (setjmp(png_jmpbuf(j->png))) {
        if (j->src.phase == 1) goto done; /* past the image data: a damaged trailer loses only metadata */
        brg_status st = brg_error(BRG_ERR_FORMAT, "%s: corrupt PNG: %s", name, j->src.msg[0] ? j->src.msg : "libpng failed");
        job_free(j, false);
        return st;
    }
    png_set_read_fn(j->png, &j->src, on_read);
    png_set_user_limits(j->png, BRG_IMAGE_MAX_SIDE, BRG_IMAGE_MAX_SIDE);
    png_set_chunk_malloc_max(j->png, (png_alloc_size_t)64 << 20);
    png_set_benign_errors(j->png, 1);           /* warnings, as Pillow shrugs at them */
    png_set_check_for_invalid_index(j->png, 0); /* indices past PLTE are black, as in Pillow */
    png_set_crc_action(j->png, PNG_CRC_DEFAULT, PNG_CRC_WARN_DISCARD);
    png_read_info(j->png, j->info);

    png_uint_32 w32, h32;
    int depth, color_type, interlace;
    png_get_IHDR(j->png, j->info, &w32, &h32, &depth, &color_type, &interlace, NULL, NULL);
    j->W = w32;
    j->H = h32;
    const int64_t W = j->W, H = j->H;
    brg_status st = img_check_size(name, "PNG", W, H, max_pixels);
    if (st != BRG_OK) {
        job_free(j, false);
        return st;
    }
    uint8_t lut[256][3];
    memset(lut, 0, sizeof lut);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_colorp plte = NULL;
        int n = 0;
        if (!png_get_PLTE(j->png, j->info, &plte, &n) || !plte) {
            job_free(j, false);
            return brg_error(BRG_ERR_FORMAT, "%s: corrupt PNG: a palette image without a PLTE chunk", name);
        }
        for (int i = 0; i < n && i < 256; i++) {
            lut[i][0] = plte[i].red;
            lut[i][1] = plte[i].green;
            lut[i][2] = plte[i].blue;
        }
    }
    if (depth < 8) png_set_packing(j->png);
    int passes = png_set_interlace_handling(j->png);
    png_read_update_info(j->png, j->info);
    const size_t rowbytes = png_get_rowbytes(j->png, j->info);

    j->rgb = malloc((size_t)(W * H) * 3);
    if (!j->rgb) {
        job_free(j, false);
        return brg_error(BRG_ERR_OOM, "%s: no memory for a %lldx%lld image", name, (long long)W, (long long)H);
    }
    if (passes > 1) { /* Adam7: the whole image, then converted */
        j->rows = malloc(rowbytes * (size_t)H);
        j->row_ptrs = malloc(sizeof *j->row_ptrs * (size_t)H);
        if (!j->rows || !j->row_ptrs) {
            job_free(j, false);
            return brg_error(BRG_ERR_OOM, "%s: no memory for an interlaced %lldx%lld image", name, (long long)W,
                             (long long)H);
        }
        for (int64_t y = 0; y < H; y++) j->row_ptrs[y] = j->rows + rowbytes * (size_t)y;
        png_read_image(j->png, j->row_ptrs);
        for (int64_t y = 0; y < H; y++) row_to_rgb(j->row_ptrs[y], j->rgb + y * W * 3, W, color_type, depth, lut);
    } else {
        j->row = malloc(rowbytes);
        if (!j->row) {
            job_free(j, false);
            return brg_error(BRG_ERR_OOM, "%s: no memory for a PNG row", name);
        }
        for (int64_t y = 0; y < H; y++) {
            png_read_row(j->png, j->row, NULL);
            row_to_rgb(j->row, j->rgb + y * W * 3, W, color_type, depth, lut);
        }
    }
    j->src.phase = 1;
    png_read_end(j->png, j->info); /* eXIf and text chunks after the image data */
done:
    *orientation = orientation_of(j->png, j->info);
    out->width = j->W;
    out->height = j->H;
    out->rgb = j->rgb;
    job_free(j, true);
    return BRG_OK;
}
