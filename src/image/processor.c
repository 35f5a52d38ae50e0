/* preprocessor_config.json and pixel_values as transformers' ViTImageProcessorPil computes them
 * (image_processing_backends.PilBackend._preprocess): resize through Pillow, center crop, rescale
 * (uint8 * factor in float64, then float32), normalize ((x - mean) / std in float32), channels
 * first. Built with -ffp-contract=off (CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/image.h"
#include "io/json.h"

void brg_image_processor_default(brg_image_processor *p) {
    memset(p, 0, sizeof *p);
    p->do_resize = true;
    p->height = p->width = 224;
    p->resample = BRG_RESAMPLE_BILINEAR;
    p->do_rescale = true;
    p->rescale_factor = 1.0 / 255.0;
    p->do_normalize = true;
    for (int c = 0; c < 3; c++) p->image_mean[c] = p->image_std[c] = 0.5f;
}

/* A size: a number (a square, as get_size_dict(default_to_square=True) makes it) or
 * {"height", "width"} or {"shortest_edge"}; shortest may be NULL (crop_size takes no
 * shortest_edge). */
static brg_status read_size(const cJSON *root, const char *ctx, const char *key, int64_t *h, int64_t *w,
                            int64_t *shortest) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return BRG_OK;
    int64_t v;
    if (cJSON_IsNumber(it)) {
        if (!brg_json_integer(it, &v) || v < 1 || v > BRG_IMAGE_MAX_SIDE)
            return brg_error(BRG_ERR_FORMAT, "%s: %s must be a whole number from 1 to %d", ctx, key, BRG_IMAGE_MAX_SIDE);
        *h = *w = v;
        if (shortest) *shortest = 0;
        return BRG_OK;
    }
    if (!cJSON_IsObject(it))
        return brg_error(BRG_ERR_FORMAT, "%s: %s must be a number or an object such as {\"height\": 224, \"width\": 224}",
                         ctx, key);
    char sub[160];
    snprintf(sub, sizeof sub, "%s: %s", ctx, key);
    for (const cJSON *e = it->child; e; e = e->next) {
        if (cJSON_IsNull(e)) continue;
        if (strcmp(e->string, "height") && strcmp(e->string, "width") && (!shortest || strcmp(e->string, "shortest_edge")))
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: %s.%s: brigade resizes to {\"height\", \"width\"}%s", ctx, key,
                             e->string, shortest ? " or {\"shortest_edge\"}" : "");
        if (!brg_json_integer(e, &v) || v < 1 || v > BRG_IMAGE_MAX_SIDE)
            return brg_error(BRG_ERR_FORMAT, "%s: %s.%s must be a whole number from 1 to %d", ctx, key, e->string,
                             BRG_IMAGE_MAX_SIDE);
    }
    int64_t hh = 0, ww = 0, se = 0;
    BRG_TRY(brg_json_get_int(it, sub, "height", false, 0, &hh));
    BRG_TRY(brg_json_get_int(it, sub, "width", false, 0, &ww));
    if (shortest) BRG_TRY(brg_json_get_int(it, sub, "shortest_edge", false, 0, &se));
    if (se) {
        if (hh || ww)
            return brg_error(BRG_ERR_UNSUPPORTED, "%s: %s has shortest_edge and height/width: give one or the other", ctx,
                             key);
        *h = *w = 0;
        *shortest = se;
    } else {
        if (!hh || !ww) return brg_error(BRG_ERR_FORMAT, "%s: %s needs both height and width", ctx, key);
        *h = hh;
        *w = ww;
        if (shortest) *shortest = 0;
    }
    return BRG_OK;
}

/* image_mean / image_std: one number for every channel, or three. */
static brg_status read_triple(const cJSON *root, const char *ctx, const char *key, float *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) return BRG_OK;
    if (cJSON_IsNumber(it)) {
        out[0] = out[1] = out[2] = (float)it->valuedouble;
        return BRG_OK;
    }
    if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 3)
        return brg_error(BRG_ERR_FORMAT, "%s: %s must be a number or a list of 3 (one per RGB channel)", ctx, key);
    int c = 0;
    for (const cJSON *e = it->child; e; e = e->next, c++) {
        if (!cJSON_IsNumber(e)) return brg_error(BRG_ERR_FORMAT, "%s: %s[%d] must be a number", ctx, key, c);
        out[c] = (float)e->valuedouble; /* np.array(mean, dtype=float32) */
    }
    return BRG_OK;
}

brg_status brg_image_processor_from_json(const char *json, size_t len, const char *ctx, brg_image_processor *p) {
    brg_image_processor_default(p);
    cJSON *root = NULL;
    BRG_TRY(brg_json_parse(json, len, ctx, &root));
    brg_status st = brg_json_check_duplicates(root, ctx);
    if (st == BRG_OK && !cJSON_IsObject(root)) st = brg_error(BRG_ERR_FORMAT, "%s: expected a JSON object", ctx);
    int64_t resample = p->resample;
    bool pad = false;
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_resize", false, p->do_resize, &p->do_resize);
    if (st == BRG_OK) st = read_size(root, ctx, "size", &p->height, &p->width, &p->shortest_edge);
    if (st == BRG_OK) st = brg_json_get_int(root, ctx, "resample", false, resample, &resample);
    if (st == BRG_OK && (resample < 0 || resample > BRG_RESAMPLE_HAMMING))
        st = brg_error(BRG_ERR_FORMAT, "%s: resample %lld is not one of PIL's filters (0 to 5)", ctx, (long long)resample);
    if (st == BRG_OK && p->do_resize && resample == BRG_RESAMPLE_NEAREST)
        st = brg_error(BRG_ERR_UNSUPPORTED, "%s: resample 0 (nearest): brigade resizes with lanczos (1), bilinear (2), "
                       "bicubic (3), box (4) or hamming (5)", ctx);
    p->resample = (brg_resample)resample;
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_center_crop", false, false, &p->do_center_crop);
    if (st == BRG_OK) st = read_size(root, ctx, "crop_size", &p->crop_height, &p->crop_width, NULL);
    if (st == BRG_OK && p->do_center_crop && (!p->crop_height || !p->crop_width))
        st = brg_error(BRG_ERR_FORMAT, "%s: do_center_crop needs crop_size {\"height\", \"width\"}", ctx);
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_rescale", false, p->do_rescale, &p->do_rescale);
    if (st == BRG_OK) st = brg_json_get_double(root, ctx, "rescale_factor", false, p->rescale_factor, &p->rescale_factor);
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_normalize", false, p->do_normalize, &p->do_normalize);
    if (st == BRG_OK) st = read_triple(root, ctx, "image_mean", p->image_mean);
    if (st == BRG_OK) st = read_triple(root, ctx, "image_std", p->image_std);
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_pad", false, false, &pad);
    if (st == BRG_OK && pad) st = brg_error(BRG_ERR_UNSUPPORTED, "%s: do_pad is not implemented", ctx);
    bool rgb = true;
    if (st == BRG_OK) st = brg_json_get_bool(root, ctx, "do_convert_rgb", false, true, &rgb);
    cJSON_Delete(root);
    return st;
}

brg_status brg_image_processor_load(const char *dir, brg_image_processor *p) {
    char path[4200];
    if (snprintf(path, sizeof path, "%s/preprocessor_config.json", dir) >= (int)sizeof path)
        return brg_error(BRG_ERR_INVALID_ARG, "model path too long: %s", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return brg_error(BRG_ERR_NOT_FOUND, "%s has no preprocessor_config.json (the image processor's settings, which "
                         "transformers' save_pretrained writes)", dir);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            char *t = cap <= ((size_t)1 << 24) ? realloc(text, cap) : NULL;
            if (!t) {
                free(text);
                fclose(f);
                return brg_error(BRG_ERR_FORMAT, "%s: too large for a preprocessor config", path);
            }
            text = t;
        }
        size_t got = fread(text + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    bool err = ferror(f);
    fclose(f);
    brg_status st = err ? brg_error(BRG_ERR_IO, "cannot read %s", path) : brg_image_processor_from_json(text, len, path, p);
    free(text);
    return st;
}

brg_status brg_image_processor_output_size(const brg_image_processor *p, int64_t width, int64_t height,
                                           int64_t *out_height, int64_t *out_width) {
    int64_t h = height, w = width;
    if (p->do_resize) {
        if (p->shortest_edge) { /* get_resize_output_image_size(default_to_square=False) */
            const int64_t s = width <= height ? width : height, l = width <= height ? height : width;
            const int64_t ns = p->shortest_edge, nl = (int64_t)((double)(ns * l) / (double)s);
            h = width <= height ? nl : ns;
            w = width <= height ? ns : nl;
        } else {
            h = p->height;
            w = p->width;
        }
        if (h < 1 || w < 1 || h > BRG_IMAGE_MAX_SIDE || w > BRG_IMAGE_MAX_SIDE)
            return brg_error(BRG_ERR_UNSUPPORTED, "resizing %lldx%lld gives %lldx%lld, outside 1 to %d a side",
                             (long long)width, (long long)height, (long long)w, (long long)h, BRG_IMAGE_MAX_SIDE);
    }
    if (p->do_center_crop) {
        h = p->crop_height;
        w = p->crop_width;
    }
    *out_height = h;
    *out_width = w;
    return BRG_OK;
}

/* Python's floor division. */
static int64_t floor_div2(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

brg_status brg_image_preprocess(const brg_image_processor *p, const brg_image *img, float *out) {
    if (!p || !img || !img->rgb || !out) return brg_error(BRG_ERR_INVALID_ARG, "brg_image_preprocess: missing argument");
    int64_t rh = img->height, rw = img->width, H, W;
    BRG_TRY(brg_image_processor_output_size(p, img->width, img->height, &H, &W));
    brg_image resized = {0};
    const brg_image *src = img;
    if (p->do_resize) {
        int64_t sh = H, sw = W;
        if (p->do_center_crop) { /* the resize's own size, before the crop */
            brg_image_processor np = *p;
            np.do_center_crop = false;
            BRG_TRY(brg_image_processor_output_size(&np, img->width, img->height, &sh, &sw));
        }
        BRG_TRY(brg_image_resize(img, sw, sh, p->resample, &resized));
        src = &resized;
        rh = sh;
        rw = sw;
    }
    /* Center crop (np center_crop): top = (h - crop_h) // 2, zeros outside the image. */
    const int64_t top = p->do_center_crop ? floor_div2(rh - H) : 0, left = p->do_center_crop ? floor_div2(rw - W) : 0;
    const int64_t plane = H * W;
    for (int c = 0; c < 3; c++) {
        const float mean = p->image_mean[c], std = p->image_std[c];
        for (int64_t y = 0; y < H; y++)
            for (int64_t x = 0; x < W; x++) {
                const int64_t sy = y + top, sx = x + left;
                const uint8_t u = sy >= 0 && sy < rh && sx >= 0 && sx < rw ? src->rgb[(sy * rw + sx) * 3 + c] : 0;
                float v = p->do_rescale ? (float)((double)u * p->rescale_factor) : (float)u;
                if (p->do_normalize) v = (v - mean) / std;
                out[c * plane + y * W + x] = v;
            }
    }
    brg_image_free(&resized);
    return BRG_OK;
}
