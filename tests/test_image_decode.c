/* PNG and JPEG decoding against what transformers' load_image gives for the committed files
 * (Pillow's decoders, exif_transpose, convert("RGB")): PNG exactly; JPEG within
 * JPEG_TOLERANCE (see below). Then bad input: missing, empty and foreign files, sizes past the
 * limits, and every fixture truncated and bit-flipped: each either decodes or fails with one line
 * naming the file, never a crash (the ASan build runs this too). */
#include "image/image_internal.h"
#include "image_util.h"

/* libjpeg-turbo here (Debian's) and the one Pillow bundles decode with the same defaults (ISLOW
 * integer IDCT, fancy upsampling, the same YCbCr->RGB tables), which libjpeg-turbo keeps
 * bit-identical across versions and SIMD paths; measured on the committed files: 0 samples
 * differ. The bound allows one step of 8-bit rounding, which is all a different IDCT or
 * upsampling build (libjpeg's documented accuracy of the ISLOW IDCT) could move a sample. */
#define JPEG_TOLERANCE 1

static void check_file(const brg_safetensors *exp, const char *name) {
    char path[512], key[256];
    snprintf(path, sizeof path, "%s/%s", IMAGE_FIXTURES, name);
    snprintf(key, sizeof key, "decoded.%s", name);
    brg_image img;
    brg_status st = brg_image_load(path, &img);
    CHECK_MSG(st == BRG_OK, "%s: %s", path, brg_last_error());
    if (st != BRG_OK) return;
    brg_tensor t;
    CHECK_OK(brg_safetensors_get(exp, key, &t));
    CHECK_MSG(t.ndim == 3 && t.shape[0] == img.height && t.shape[1] == img.width && t.shape[2] == 3,
              "%s: decoded %lldx%lld, transformers %lldx%lld", name, (long long)img.width, (long long)img.height,
              (long long)(t.ndim == 3 ? t.shape[1] : -1), (long long)(t.ndim == 3 ? t.shape[0] : -1));
    if (t.ndim == 3 && t.shape[0] == img.height && t.shape[1] == img.width) {
        int64_t n = 0;
        float *want = test_read_f32(exp, key, &n);
        int64_t differ = 0;
        int worst = 0;
        for (int64_t i = 0; want && i < n; i++) {
            int d = abs((int)img.rgb[i] - (int)want[i]);
            differ += d != 0;
            worst = d > worst ? d : worst;
        }
        const int tol = image_is_jpeg(name) ? JPEG_TOLERANCE : 0;
        CHECK_MSG(worst <= tol, "%s: %lld of %lld samples differ from transformers', by up to %d (tolerance %d)", name,
                  (long long)differ, (long long)n, worst, tol);
        if (image_is_jpeg(name)) printf("%s: %lld of %lld samples differ (max %d)\n", name, (long long)differ, (long long)n, worst);
        free(want);
    }
    brg_image_free(&img);
}

/* ---- bad input -------------------------------------------------------------------------------- */

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    }
    return c ^ 0xffffffffu;
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

/* A PNG signature and a valid IHDR claiming w x h (8-bit RGB), then nothing. */
static void png_header(uint8_t out[33], uint32_t w, uint32_t h) {
    memcpy(out, "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
    be32(out + 16, w);
    be32(out + 20, h);
    memcpy(out + 24, "\x08\x02\0\0\0", 5);
    be32(out + 29, crc32_of(out + 12, 17));
}

static void check_limits(void) {
    uint8_t png[33];
    brg_image img;
    png_header(png, 70000, 10);
    CHECK_ERR(brg_image_decode(png, sizeof png, "wide.png", &img), BRG_ERR_UNSUPPORTED, "wide.png: PNG of 70000x10 pixels: wider");
    png_header(png, 20000, 20000);
    CHECK_ERR(brg_image_decode(png, sizeof png, "huge.png", &img), BRG_ERR_UNSUPPORTED, "pixels: more than");
    png_header(png, 40, 30);
    CHECK_ERR(brg_image_decode(png, sizeof png, "cut.png", &img), BRG_ERR_FORMAT, "cut.png: corrupt PNG");
    CHECK(img.rgb == NULL && img.width == 0);
    /* A JPEG whose SOF claims 65000 x 65000: refused from the header, nothing that size made. */
    size_t n = 0;
    uint8_t *jpg = image_read_file(IMAGE_FIXTURES "/baseline_64x48.jpg", &n);
    for (size_t i = 0; jpg && i + 9 < n; i++)
        if (jpg[i] == 0xff && jpg[i + 1] == 0xc0) {
            jpg[i + 5] = 0xfd, jpg[i + 6] = 0xe8, jpg[i + 7] = 0xfd, jpg[i + 8] = 0xe8;
            break;
        }
    if (jpg) CHECK_ERR(brg_image_decode(jpg, n, "bomb.jpg", &img), BRG_ERR_UNSUPPORTED, "bomb.jpg: JPEG of 65000x65000");
    free(jpg);
    /* The smaller limit the fuzz harness uses. */
    jpg = image_read_file(IMAGE_FIXTURES "/baseline_64x48.jpg", &n);
    if (jpg) CHECK_ERR(img_decode_limited(jpg, n, "small.jpg", 1000, &img), BRG_ERR_UNSUPPORTED, "more than the 1000");
    free(jpg);
}

static void check_foreign(void) {
    brg_image img;
    CHECK_ERR(brg_image_load("tests/fixtures/images/none.png", &img), BRG_ERR_NOT_FOUND, "cannot open");
    CHECK_ERR(brg_image_load("tests/fixtures/images", &img), BRG_ERR_IO, "not a regular file");
    CHECK_ERR(brg_image_decode("", 0, "empty.png", &img), BRG_ERR_FORMAT, "empty.png: the file is empty");
    CHECK_ERR(brg_image_decode("GIF89a\1\0\1\0", 10, "a.gif", &img), BRG_ERR_UNSUPPORTED, "a.gif: a GIF file");
    CHECK_ERR(brg_image_decode("BM\0\0\0\0", 6, "a.bmp", &img), BRG_ERR_UNSUPPORTED, "a BMP file");
    CHECK_ERR(brg_image_decode("hello", 5, "a.txt", &img), BRG_ERR_UNSUPPORTED, "not a PNG or JPEG");
    CHECK_ERR(brg_image_decode("\xff\xd8\xff", 3, "short.jpg", &img), BRG_ERR_FORMAT, "short.jpg: corrupt JPEG");
}

/* Every fixture cut at many lengths and with random bits flipped: decodes or one clear line. A
 * cut copy decodes only when what is lost is past the image data (a PNG's last IDAT CRC and
 * IEND, a JPEG's EOI), as Pillow reads them too, and then to the same pixels. */
static void check_damage(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", IMAGE_FIXTURES, name);
    size_t n = 0;
    uint8_t *data = image_read_file(path, &n);
    if (!data) return;
    uint8_t *copy = malloc(n);
    int bad = 0, failed = 0, tries = 0;
    brg_image whole;
    CHECK_OK(brg_image_decode(data, n, name, &whole));
    const size_t step = n / 97 + 1, trailer = image_is_jpeg(name) ? 2 : 16;
    for (size_t len = 0; len < n; len += step) {
        brg_image img;
        brg_status st = brg_image_decode(data, len, name, &img);
        tries++;
        if (st == BRG_OK) {
            failed += len < n - trailer || img.width != whole.width || img.height != whole.height ||
                      memcmp(img.rgb, whole.rgb, (size_t)(img.width * img.height * 3)) != 0;
            brg_image_free(&img);
        } else if (!image_one_line_error(brg_last_error(), name)) {
            bad++;
            fprintf(stderr, "%s cut to %zu: '%s'\n", name, len, brg_last_error());
        }
    }
    CHECK_MSG(failed == 0, "%s: %d truncated copies decoded (or differently)", name, failed);
    brg_rng rng;
    brg_rng_seed(&rng, 1234);
    for (int t = 0; t < 150; t++) { /* bit flips: either way, but never a crash or a bad message */
        memcpy(copy, data, n);
        const int flips = 1 + (int)((uint32_t)brg_rng_next(&rng) % 4);
        for (int f = 0; f < flips; f++) {
            uint32_t at = (uint32_t)brg_rng_next(&rng) % (uint32_t)n;
            copy[at] ^= (uint8_t)(1u << ((uint32_t)brg_rng_next(&rng) % 8));
        }
        brg_image img;
        brg_status st = brg_image_decode(copy, n, name, &img);
        tries++;
        if (st == BRG_OK) {
            CHECK(img.rgb && img.width >= 1 && img.height >= 1);
            brg_image_free(&img);
        } else if (!image_one_line_error(brg_last_error(), name)) {
            bad++;
            fprintf(stderr, "%s flipped: '%s'\n", name, brg_last_error());
        }
    }
    CHECK_MSG(bad == 0, "%s: %d of %d damaged copies failed without one line naming the file", name, bad, tries);
    brg_image_free(&whole);
    free(copy);
    free(data);
}

static void check_exif_parsers(void) {
    static const uint8_t le[] = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                                 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
    CHECK(img_exif_orientation(le, sizeof le) == 6);
    CHECK(img_exif_orientation(le, 20) == 0); /* cut inside the entry */
    CHECK(img_exif_orientation(le + 6, sizeof le - 6) == 6);
    static const uint8_t be[] = {'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0};
    CHECK(img_exif_orientation(be, sizeof be) == 8);
    const char *x1 = "<x:xmpmeta><rdf:Description tiff:Orientation=\"3\"/>";
    const char *x2 = "<tiff:Orientation>7</tiff:Orientation>";
    CHECK(img_xmp_orientation((const uint8_t *)x1, strlen(x1)) == 3);
    CHECK(img_xmp_orientation((const uint8_t *)x2, strlen(x2)) == 7);
    CHECK(img_xmp_orientation((const uint8_t *)"tiff:Orientation=\"", 18) == 0);
}

int main(void) {
    cJSON *cases = image_cases();
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(IMAGE_FIXTURES "/expected.safetensors", &exp));
    const cJSON *files = cases ? cJSON_GetObjectItem(cases, "files") : NULL;
    CHECK(cJSON_GetArraySize(files) >= 25);
    for (const cJSON *f = files ? files->child : NULL; exp && f; f = f->next) check_file(exp, f->valuestring);
    check_limits();
    check_foreign();
    check_exif_parsers();
    for (const cJSON *f = files ? files->child : NULL; f; f = f->next) check_damage(f->valuestring);
    brg_safetensors_close(exp);
    cJSON_Delete(cases);
    return test_finish();
}
