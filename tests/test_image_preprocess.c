/* pixel_values against transformers' ViTImageProcessorPil for every case of the committed fixture
 * set (tools/image_fixtures.py): each preprocessor config of cases.json on its files (bilinear
 * down and up, bicubic, lanczos, box, hamming, shortest_edge, a square size given as a number,
 * center crop, no resize, no rescale). PNG files within 1e-5 after normalisation; JPEG files the
 * same plus what JPEG_TOLERANCE 8-bit steps of decoding (test_image_decode.c) could move them.
 * Then the config errors and resize's edge cases. */
#include "image_util.h"

#define PNG_TOL 1e-5
#define JPEG_TOLERANCE 1 /* as test_image_decode.c */

static void check_case(const brg_safetensors *exp, const cJSON *c) {
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "config"));
    brg_image_processor p;
    brg_status st = brg_image_processor_from_json(json, strlen(json), name, &p);
    CHECK_MSG(st == BRG_OK, "%s: %s", name, brg_last_error());
    free(json);
    if (st != BRG_OK) return;
    float min_std = 1e30f;
    for (int ch = 0; ch < 3; ch++) min_std = p.image_std[ch] < min_std ? p.image_std[ch] : min_std;
    const double step = (p.do_rescale ? p.rescale_factor : 1.0) / (p.do_normalize ? min_std : 1.0f);
    for (const cJSON *f = cJSON_GetObjectItem(c, "files")->child; f; f = f->next) {
        char path[512], key[256];
        snprintf(path, sizeof path, "%s/%s", IMAGE_FIXTURES, f->valuestring);
        snprintf(key, sizeof key, "%s/%s", name, f->valuestring);
        brg_image img;
        CHECK_OK(brg_image_load(path, &img));
        brg_tensor t;
        CHECK_OK(brg_safetensors_get(exp, key, &t));
        int64_t H = 0, W = 0;
        CHECK_OK(brg_image_processor_output_size(&p, img.width, img.height, &H, &W));
        CHECK_MSG(t.ndim == 3 && t.shape[0] == 3 && t.shape[1] == H && t.shape[2] == W,
                  "%s: pixel_values %lldx%lld, transformers' [%lld, %lld, %lld]", key, (long long)H, (long long)W,
                  (long long)t.shape[0], (long long)t.shape[1], (long long)t.shape[2]);
        if (t.ndim == 3 && t.shape[1] == H && t.shape[2] == W) {
            float *got = malloc((size_t)(3 * H * W) * sizeof *got);
            CHECK_OK(brg_image_preprocess(&p, &img, got));
            float *want = test_read_f32(exp, key, NULL);
            const double d = want ? test_max_abs_diff(got, want, 3 * H * W) : INFINITY;
            const double tol = image_is_jpeg(f->valuestring) ? PNG_TOL + 2 * JPEG_TOLERANCE * step : PNG_TOL;
            CHECK_MSG(d <= tol, "%s: pixel_values differ from transformers' by %g (tolerance %g)", key, d, tol);
            free(want);
            free(got);
        }
        brg_image_free(&img);
    }
}

static brg_status from(const char *json, brg_image_processor *p) {
    return brg_image_processor_from_json(json, strlen(json), "cfg.json", p);
}

static void check_config_errors(void) {
    brg_image_processor p;
    CHECK_OK(from("{}", &p));
    CHECK(p.do_resize && p.height == 224 && p.width == 224 && p.resample == BRG_RESAMPLE_BILINEAR && p.do_rescale &&
          p.do_normalize && p.image_mean[0] == 0.5f && !p.do_center_crop);
    CHECK_OK(from("{\"size\": {\"shortest_edge\": 20}, \"image_mean\": 0.25, \"do_convert_rgb\": true}", &p));
    CHECK(p.shortest_edge == 20 && p.height == 0 && p.image_mean[2] == 0.25f);
    CHECK_ERR(from("{\"resample\": 0}", &p), BRG_ERR_UNSUPPORTED, "resample 0 (nearest)");
    CHECK_ERR(from("{\"resample\": 9}", &p), BRG_ERR_FORMAT, "resample 9");
    CHECK_ERR(from("{\"do_pad\": true}", &p), BRG_ERR_UNSUPPORTED, "do_pad");
    CHECK_ERR(from("{\"size\": {\"shortest_edge\": 20, \"longest_edge\": 40}}", &p), BRG_ERR_UNSUPPORTED, "size.longest_edge");
    CHECK_ERR(from("{\"size\": {\"height\": 20}}", &p), BRG_ERR_FORMAT, "needs both height and width");
    CHECK_ERR(from("{\"size\": 0}", &p), BRG_ERR_FORMAT, "size must be a whole number");
    CHECK_ERR(from("{\"image_std\": [1, 2]}", &p), BRG_ERR_FORMAT, "image_std must be a number or a list of 3");
    CHECK_ERR(from("{\"do_center_crop\": true}", &p), BRG_ERR_FORMAT, "needs crop_size");
    CHECK_ERR(from("{\"do_resize\": 1}", &p), BRG_ERR_FORMAT, "do_resize");
    CHECK_ERR(from("[1]", &p), BRG_ERR_FORMAT, "expected a JSON object");
    CHECK_ERR(from("{\"size\": 3, \"size\": 4}", &p), BRG_ERR_FORMAT, "size");
    CHECK_ERR(brg_image_processor_load("tests/fixtures/vit_cls", &p), BRG_ERR_NOT_FOUND, "no preprocessor_config.json");
    CHECK_OK(brg_image_processor_load("tests/fixtures/image_cls_vit", &p));
    CHECK(p.height == 32 && p.width == 32 && p.rescale_factor == 1.0 / 255.0);
}

static void check_resize_edges(void) {
    uint8_t px[2 * 3 * 3];
    for (int i = 0; i < 18; i++) px[i] = (uint8_t)(i * 13);
    brg_image in = {.width = 3, .height = 2, .rgb = px}, out;
    CHECK_OK(brg_image_resize(&in, 3, 2, BRG_RESAMPLE_BICUBIC, &out));
    CHECK(out.width == 3 && out.height == 2 && memcmp(out.rgb, px, sizeof px) == 0); /* same size: a copy */
    brg_image_free(&out);
    CHECK_OK(brg_image_resize(&in, 1, 1, BRG_RESAMPLE_BOX, &out)); /* box to 1x1: the rounded mean */
    for (int c = 0; c < 3; c++) {
        int sum = 0;
        for (int i = 0; i < 6; i++) sum += px[i * 3 + c];
        CHECK(abs(out.rgb[c] - (sum + 3) / 6) <= 1);
    }
    brg_image_free(&out);
    CHECK_ERR(brg_image_resize(&in, 0, 2, BRG_RESAMPLE_BILINEAR, &out), BRG_ERR_INVALID_ARG, "resize to 0x2");
    CHECK_ERR(brg_image_resize(&in, 2, 2, BRG_RESAMPLE_NEAREST, &out), BRG_ERR_UNSUPPORTED, "resample 0 (nearest)");
    CHECK(out.rgb == NULL);
    /* shortest_edge keeps the aspect ratio as int(size * long / short). */
    brg_image_processor p;
    CHECK_OK(from("{\"size\": {\"shortest_edge\": 24}}", &p));
    int64_t h, w;
    CHECK_OK(brg_image_processor_output_size(&p, 37, 23, &h, &w));
    CHECK(h == 24 && w == 38);
    CHECK_OK(brg_image_processor_output_size(&p, 23, 37, &h, &w));
    CHECK(h == 38 && w == 24);
}

int main(void) {
    cJSON *cases = image_cases();
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(IMAGE_FIXTURES "/expected.safetensors", &exp));
    int n = 0;
    for (const cJSON *c = cases && exp ? cJSON_GetObjectItem(cases, "cases")->child : NULL; c; c = c->next, n++)
        check_case(exp, c);
    CHECK(n >= 11);
    check_config_errors();
    check_resize_edges();
    brg_safetensors_close(exp);
    cJSON_Delete(cases);
    return test_finish();
}
