/* Image.resize as Pillow computes it on 8-bit images (libImaging/Resample.c, the reference):
 *
 *  - per output pixel, the filter centred on (x + 0.5) * scale in input coordinates, stretched by
 *    the scale when it is above 1 (downscaling: the filter then averages every input pixel it
 *    covers), over the input pixels [round(center - support), round(center + support)) clamped
 *    to the image, weights normalised to sum 1, all in double;
 *  - weights to fixed point with 22 fraction bits (rounded half away from zero);
 *  - two passes, each rounded and clipped to 8 bits: horizontal first (over only the rows the
 *    vertical pass reads), unless the height shrinks by more than twice as many pixels as the
 *    width does (Pillow 13 then runs the vertical pass first: the order changes the rounding, so
 *    it is part of the result); a pass whose size does not change is skipped.
 *
 * Built with -ffp-contract=off (CMakeLists.txt): the weights must round exactly as Pillow's. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/image.h"

#define PRECISION_BITS (32 - 8 - 2)

typedef struct filter {
    double (*fn)(double x);
    double support;
} filter;

static double box_filter(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }

static double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

static double hamming_filter(double x) {
    if (x < 0.0) x = -x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    return sin(x) / x * (0.54f + 0.46f * cos(x));
}

static double bicubic_filter(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double sinc_filter(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return sin(x) / x;
}

static double lanczos_filter(double x) {
    if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
    return 0.0;
}

const char *brg_resample_name(brg_resample f) {
    switch (f) {
    case BRG_RESAMPLE_NEAREST: return "nearest";
    case BRG_RESAMPLE_LANCZOS: return "lanczos";
    case BRG_RESAMPLE_BILINEAR: return "bilinear";
    case BRG_RESAMPLE_BICUBIC: return "bicubic";
    case BRG_RESAMPLE_BOX: return "box";
    case BRG_RESAMPLE_HAMMING: return "hamming";
    }
    return "unknown";
}

/* The weights of each output pixel: bounds[2i] the first input pixel, bounds[2i + 1] how many,
 * k[i * ksize ...] their fixed-point weights. */
typedef struct coeffs {
    int ksize;
    int *bounds;
    int32_t *k;
} coeffs;

static void coeffs_free(coeffs *c) {
    free(c->bounds);
    free(c->k);
}

static brg_status precompute(int in_size, int out_size, const filter *f, coeffs *c) {
    const float in0 = 0.0f, in1 = (float)in_size;
    double scale = (double)(in1 - in0) / out_size, filterscale = scale;
    if (filterscale < 1.0) filterscale = 1.0;
    const double support = f->support * filterscale;
    const int ksize = (int)ceil(support) * 2 + 1;
    memset(c, 0, sizeof *c);
    if (out_size > INT_MAX / (ksize * (int)sizeof(double)))
        return brg_error(BRG_ERR_OOM, "resize to %d pixels: too many filter weights", out_size);
    double *kk = malloc((size_t)out_size * (size_t)ksize * sizeof *kk);
    c->bounds = malloc((size_t)out_size * 2 * sizeof *c->bounds);
    c->k = malloc((size_t)out_size * (size_t)ksize * sizeof *c->k);
    if (!kk || !c->bounds || !c->k) {
        free(kk);
        coeffs_free(c);
        return brg_error(BRG_ERR_OOM, "no memory for resize weights");
    }
    c->ksize = ksize;
    for (int xx = 0; xx < out_size; xx++) {
        const double center = in0 + (xx + 0.5) * scale, ss = 1.0 / filterscale;
        double ww = 0.0;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = &kk[(size_t)xx * (size_t)ksize];
        int x;
        for (x = 0; x < xmax; x++) {
            double w = f->fn((x + xmin - center + 0.5) * ss);
            k[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        c->bounds[xx * 2] = xmin;
        c->bounds[xx * 2 + 1] = xmax;
    }
    for (size_t i = 0; i < (size_t)out_size * (size_t)ksize; i++)
        c->k[i] = kk[i] < 0 ? (int32_t)(-0.5 + kk[i] * (1 << PRECISION_BITS)) : (int32_t)(0.5 + kk[i] * (1 << PRECISION_BITS));
    free(kk);
    return BRG_OK;
}

static inline uint8_t clip8(int ss) {
    int v = ss >> PRECISION_BITS; /* arithmetic shift, as Pillow's table lookup indexes */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* out rows [0, oh) of width ow from in rows [offset, offset + oh) of width iw. */
static void horizontal(const uint8_t *in, int iw, int offset, uint8_t *out, int ow, int oh, const coeffs *c) {
    for (int yy = 0; yy < oh; yy++) {
        const uint8_t *row = in + (size_t)(yy + offset) * (size_t)iw * 3;
        uint8_t *o = out + (size_t)yy * (size_t)ow * 3;
        for (int xx = 0; xx < ow; xx++) {
            const int xmin = c->bounds[xx * 2], xmax = c->bounds[xx * 2 + 1];
            const int32_t *k = &c->k[(size_t)xx * (size_t)c->ksize];
            int ss0 = 1 << (PRECISION_BITS - 1), ss1 = ss0, ss2 = ss0;
            for (int x = 0; x < xmax; x++) {
                const uint8_t *p = row + (size_t)(x + xmin) * 3;
                ss0 += p[0] * k[x];
                ss1 += p[1] * k[x];
                ss2 += p[2] * k[x];
            }
            o[xx * 3] = clip8(ss0);
            o[xx * 3 + 1] = clip8(ss1);
            o[xx * 3 + 2] = clip8(ss2);
        }
    }
}

static void vertical(const uint8_t *in, int w, uint8_t *out, int oh, const coeffs *c) {
    for (int yy = 0; yy < oh; yy++) {
        const int ymin = c->bounds[yy * 2], ymax = c->bounds[yy * 2 + 1];
        const int32_t *k = &c->k[(size_t)yy * (size_t)c->ksize];
        uint8_t *o = out + (size_t)yy * (size_t)w * 3;
        for (int xx = 0; xx < w; xx++) {
            int ss0 = 1 << (PRECISION_BITS - 1), ss1 = ss0, ss2 = ss0;
            for (int y = 0; y < ymax; y++) {
                const uint8_t *p = in + ((size_t)(y + ymin) * (size_t)w + (size_t)xx) * 3;
                ss0 += p[0] * k[y];
                ss1 += p[1] * k[y];
                ss2 += p[2] * k[y];
            }
            o[xx * 3] = clip8(ss0);
            o[xx * 3 + 1] = clip8(ss1);
            o[xx * 3 + 2] = clip8(ss2);
        }
    }
}

brg_status brg_image_resize(const brg_image *in, int64_t width, int64_t height, brg_resample filter_id,
                            brg_image *out) {
    if (!out) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_resize: no output image");
    memset(out, 0, sizeof *out);
    if (!in || !in->rgb || in->width < 1 || in->height < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "brg_image_resize: no input image");
    if (width < 1 || height < 1 || width > BRG_IMAGE_MAX_SIDE || height > BRG_IMAGE_MAX_SIDE ||
        width * height > BRG_IMAGE_MAX_PIXELS)
        return brg_error(BRG_ERR_INVALID_ARG, "resize to %lldx%lld: each side must be 1 to %d, at most %lld pixels",
                         (long long)width, (long long)height, BRG_IMAGE_MAX_SIDE, BRG_IMAGE_MAX_PIXELS);
    static const filter filters[] = {
        [BRG_RESAMPLE_LANCZOS] = {lanczos_filter, 3.0}, [BRG_RESAMPLE_BILINEAR] = {bilinear_filter, 1.0},
        [BRG_RESAMPLE_BICUBIC] = {bicubic_filter, 2.0}, [BRG_RESAMPLE_BOX] = {box_filter, 0.5},
        [BRG_RESAMPLE_HAMMING] = {hamming_filter, 1.0},
    };
    if ((int)filter_id < 1 || (int)filter_id > BRG_RESAMPLE_HAMMING)
        return brg_error(BRG_ERR_UNSUPPORTED, "resample %d (%s): brigade resizes with lanczos (1), bilinear (2), "
                         "bicubic (3), box (4) or hamming (5)", (int)filter_id, brg_resample_name(filter_id));
    const filter *f = &filters[filter_id];
    const int iw = (int)in->width, ih = (int)in->height, ow = (int)width, oh = (int)height;

    out->rgb = malloc((size_t)ow * (size_t)oh * 3);
    if (!out->rgb) return brg_error(BRG_ERR_OOM, "no memory for a %dx%d image", ow, oh);
    out->width = ow;
    out->height = oh;
    if (ow == iw && oh == ih) {
        memcpy(out->rgb, in->rgb, (size_t)ow * (size_t)oh * 3);
        return BRG_OK;
    }
    coeffs cv = {0}, ch = {0};
    brg_status st = BRG_OK;
    const bool need_h = ow != iw, need_v = oh != ih;
    const bool horizontal_first = !(ih - oh > 0 && ih - oh > (iw - ow) * 2);
    if (need_v) st = precompute(ih, oh, f, &cv);
    if (st == BRG_OK && need_h) st = precompute(iw, ow, f, &ch);
    uint8_t *tmp = NULL;
    if (st == BRG_OK && need_h && need_v) {
        if (horizontal_first) {
            /* Only the rows the vertical pass reads. */
            const int first = cv.bounds[0], rows = cv.bounds[oh * 2 - 2] + cv.bounds[oh * 2 - 1] - first;
            for (int i = 0; i < oh; i++) cv.bounds[i * 2] -= first;
            tmp = malloc((size_t)ow * (size_t)rows * 3);
            if (!tmp) st = brg_error(BRG_ERR_OOM, "no memory to resize to %dx%d", ow, oh);
            if (st == BRG_OK) {
                horizontal(in->rgb, iw, first, tmp, ow, rows, &ch);
                vertical(tmp, ow, out->rgb, oh, &cv);
            }
        } else {
            tmp = malloc((size_t)iw * (size_t)oh * 3);
            if (!tmp) st = brg_error(BRG_ERR_OOM, "no memory to resize to %dx%d", ow, oh);
            if (st == BRG_OK) {
                vertical(in->rgb, iw, tmp, oh, &cv);
                horizontal(tmp, iw, 0, out->rgb, ow, oh, &ch);
            }
        }
    } else if (st == BRG_OK && need_h) {
        horizontal(in->rgb, iw, 0, out->rgb, ow, oh, &ch);
    } else if (st == BRG_OK) {
        vertical(in->rgb, iw, out->rgb, oh, &cv);
    }
    free(tmp);
    coeffs_free(&cv);
    coeffs_free(&ch);
    if (st != BRG_OK) brg_image_free(out);
    return st;
}
