/* JPEG through libjpeg-turbo's libjpeg API, set up as Pillow's JpegDecode.c sets it up (the
 * library's defaults: ISLOW IDCT, fancy upsampling, colour space from the file), with a source
 * that fails when the data runs out (Pillow's "image file is truncated") and warnings ignored. */
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "image/image_internal.h"

/* Progressive files with more scans than this are refused (libjpeg-turbo's advice against
 * files built to make the decoder loop: a real encoder writes around ten). */
#define MAX_SCANS 1000

typedef struct jpeg_job {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr err;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
    const uint8_t *data;
    size_t size;
    uint8_t *rgb, *row;
} jpeg_job;

static jpeg_job *job_of(j_common_ptr c) { return (jpeg_job *)((char *)c - offsetof(jpeg_job, cinfo)); }

static void on_error(j_common_ptr c) {
    jpeg_job *j = job_of(c);
    char buf[JMSG_LENGTH_MAX];
    c->err->format_message(c, buf);
    snprintf(j->msg, sizeof j->msg, "%s", buf);
    longjmp(j->jb, 1);
}

static void on_message(j_common_ptr c) { (void)c; }

static void fail(j_decompress_ptr c, const char *msg) {
    jpeg_job *j = job_of((j_common_ptr)c);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jb, 1);
}

static void src_init(j_decompress_ptr c) { (void)c; }
static boolean src_fill(j_decompress_ptr c) {
    fail(c, "the file is truncated");
    return FALSE;
}
static void src_skip(j_decompress_ptr c, long n) {
    struct jpeg_source_mgr *s = c->src;
    if (n <= 0) return;
    if ((size_t)n > s->bytes_in_buffer) fail(c, "the file is truncated");
    s->next_input_byte += n;
    s->bytes_in_buffer -= (size_t)n;
}
static void src_term(j_decompress_ptr c) { (void)c; }

static void on_progress(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > MAX_SCANS) fail(d, "more than 1000 scans (a file made to stall decoders)");
}

/* EXIF (the first APP1 "Exif\0\0" segment, as Pillow keeps the first), else XMP's
 * tiff:Orientation (the APP1 "http://ns.adobe.com/xap/1.0/\0" segment). */
static int orientation_of(j_decompress_ptr c) {
    static const char xmp[] = "http://ns.adobe.com/xap/1.0/";
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && memcmp(m->data, "Exif\0\0", 6) == 0)
            return img_exif_orientation(m->data, m->data_length);
    for (jpeg_saved_marker_ptr m = c->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= sizeof xmp && memcmp(m->data, xmp, sizeof xmp) == 0)
            return img_xmp_orientation(m->data + sizeof xmp, m->data_length - sizeof xmp);
    return 0;
}

/* Pillow's MULDIV255 and cmyk2rgb, on samples already inverted as its "CMYK;I" unpacker does. */
static inline int muldiv255(int a, int b) {
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static void cmyk_row(const uint8_t *s, uint8_t *o, int64_t w) {
    for (int64_t x = 0; x < w; x++, s += 4, o += 3) {
        const int c = 255 - s[0], m = 255 - s[1], y = 255 - s[2], k = 255 - s[3];
        const int nk = 255 - k;
        const int v[3] = {nk - muldiv255(c, nk), nk - muldiv255(m, nk), nk - muldiv255(y, nk)};
        for (int i = 0; i < 3; i++) o[i] = (uint8_t)(v[i] < 0 ? 0 : v[i] > 255 ? 255 : v[i]);
    }
}

brg_status img_decode_jpeg(const uint8_t *data, size_t size, const char *name, int64_t max_pixels, brg_image *out,
                           int *orientation) {
    jpeg_job *const j = calloc(1, sizeof *j);
    if (!j) return brg_error(BRG_ERR_OOM, "%s: no memory for the JPEG decoder", name);
    j->data = data;
    j->size = size;
    j->cinfo.err = jpeg_std_error(&j->err);
    j->err.error_exit = on_error;
    j->err.output_message = on_message;
    if (setjmp(j->jb)) {
        const bool unsupported = strncmp(j->msg, "Unsupported", 11) == 0 || strncmp(j->msg, "Sorry", 5) == 0;
        brg_status st = brg_error(unsupported ? BRG_ERR_UNSUPPORTED : BRG_ERR_FORMAT, "%s: %s JPEG: %s", name,
                                  unsupported ? "unsupported" : "corrupt", j->msg);
        jpeg_destroy_decompress(&j->cinfo);
        free(j->rgb);
        free(j->row);
        free(j);
        return st;
    }
    jpeg_create_decompress(&j->cinfo);
    j->src = (struct jpeg_source_mgr){.next_input_byte = data, .bytes_in_buffer = size, .init_source = src_init,
                                      .fill_input_buffer = src_fill, .skip_input_data = src_skip,
                                      .resync_to_restart = jpeg_resync_to_restart, .term_source = src_term};
    j->cinfo.src = &j->src;
    j->progress.progress_monitor = on_progress;
    j->cinfo.progress = &j->progress;
    jpeg_save_markers(&j->cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&j->cinfo, TRUE);

    brg_status st = img_check_size(name, "JPEG", j->cinfo.image_width, j->cinfo.image_height, max_pixels);
    const int comps = j->cinfo.num_components;
    if (st == BRG_OK && comps != 1 && comps != 3 && comps != 4)
        st = brg_error(BRG_ERR_UNSUPPORTED, "%s: a JPEG with %d components (Pillow's are 1, 3 or 4)", name, comps);
    if (st != BRG_OK) {
        jpeg_destroy_decompress(&j->cinfo);
        free(j);
        return st;
    }
    /* Pillow: 1 layer "L", 3 "RGB", 4 "CMYK" (YCCK converted to CMYK by the library). */
    j->cinfo.out_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_start_decompress(&j->cinfo);
    const int64_t W = j->cinfo.output_width, H = j->cinfo.output_height;
    const int oc = j->cinfo.output_components;
    j->rgb = malloc((size_t)(W * H) * 3);
    j->row = malloc((size_t)W * (size_t)oc);
    if (!j->rgb || !j->row) fail(&j->cinfo, "no memory for the image");
    while (j->cinfo.output_scanline < j->cinfo.output_height) {
        int64_t y = j->cinfo.output_scanline;
        JSAMPROW rows[1] = {j->row};
        if (jpeg_read_scanlines(&j->cinfo, rows, 1) != 1) fail(&j->cinfo, "the file is truncated");
        uint8_t *o = j->rgb + y * W * 3;
        if (oc == 1)
            for (int64_t x = 0; x < W; x++) o[3 * x] = o[3 * x + 1] = o[3 * x + 2] = j->row[x];
        else if (oc == 3)
            memcpy(o, j->row, (size_t)W * 3);
        else
            cmyk_row(j->row, o, W);
    }
    /* No jpeg_finish_decompress: a file whose last scan is whole but that lacks EOI decodes, as
     * in Pillow. */
    *orientation = orientation_of(&j->cinfo);
    jpeg_destroy_decompress(&j->cinfo);
    out->width = W;
    out->height = H;
    out->rgb = j->rgb;
    free(j->row);
    free(j);
    return BRG_OK;
}
