/* safetensors: round trips through the writer, and one crafted file per validation rule. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

static char tmp_path_buf[1024];

static const char *tmp_path(const char *name) {
    snprintf(tmp_path_buf, sizeof tmp_path_buf, "%s/st_%s", test_tmp_dir(), name);
    return tmp_path_buf;
}

/* An 8-byte header length `n`, then `header`, then `data_len` bytes 0, 1, 2, ... */
static unsigned char *craft_n(uint64_t n, const char *header, size_t data_len, size_t *len) {
    size_t hl = strlen(header);
    *len = 8 + hl + data_len;
    unsigned char *buf = malloc(*len + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(n >> (8 * i));
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) buf[8 + hl + i] = (unsigned char)i;
    return buf;
}

static brg_status parse_header(const char *header, size_t data_len) {
    size_t len;
    unsigned char *buf = craft_n(strlen(header), header, data_len, &len);
    brg_safetensors *st = NULL;
    brg_status s = brg_safetensors_parse(buf, len, &st);
    brg_safetensors_close(st);
    free(buf);
    return s;
}

#define W4(name, begin, end) "\"" name "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" #begin "," #end "]}"

static bool file_exists(const char *p) { return access(p, F_OK) == 0; }

static bool no_temp_left(const char *path) {
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    return !file_exists(tmp);
}

/* ---- round trips ---- */

static void test_round_trip_all_dtypes(void) {
    float f32[6] = {1.5f, -2.25f, 3, 0, 1e-30f, -1e30f};
    uint16_t f16[4] = {0x3c00, 0xc000, 0x7bff, 0x0001};
    uint16_t bf16[3] = {0x3f80, 0xc040, 0x0001};
    int32_t i32[4] = {1, -2, INT32_MAX, INT32_MIN};
    int64_t i64[3] = {((int64_t)1 << 40) + 1, -7, INT64_MIN};
    unsigned char bools[5] = {1, 0, 0, 1, 1};
    float scalar = 42.0f;
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s31[2] = {3, 1}, s22[2] = {2, 2}, s3[1] = {3}, s5[1] = {5};
    int64_t s04[2] = {0, 4}, s20[2] = {2, 0};
    brg_tensor t[9] = {
        brg_tensor_wrap(BRG_DTYPE_F32, 2, s23, f32),     brg_tensor_wrap(BRG_DTYPE_F16, 1, s4, f16),
        brg_tensor_wrap(BRG_DTYPE_BF16, 2, s31, bf16),   brg_tensor_wrap(BRG_DTYPE_I32, 2, s22, i32),
        brg_tensor_wrap(BRG_DTYPE_I64, 1, s3, i64),      brg_tensor_wrap(BRG_DTYPE_BOOL, 1, s5, bools),
        brg_tensor_wrap(BRG_DTYPE_F32, 0, NULL, &scalar), brg_tensor_wrap(BRG_DTYPE_F32, 2, s04, NULL),
        brg_tensor_wrap(BRG_DTYPE_I64, 2, s20, NULL),
    };
    const char *names[9] = {"f32", "f16", "bf16", "i32", "i64", "bool", "scalar", "empty_f32", "empty_i64"};
    brg_named_tensor nt[9];
    for (int i = 0; i < 9; i++) nt[i] = (brg_named_tensor){names[i], &t[i]};
    brg_metadata_entry meta[2] = {{"format", "pt"}, {"note", "h\xc3\xa9llo \"quoted\"\n"}};
    const char *path = tmp_path("roundtrip.safetensors");
    CHECK_OK(brg_safetensors_write(path, nt, 9, meta, 2));
    CHECK(no_temp_left(path));

    brg_safetensors *st;
    CHECK_OK(brg_safetensors_open(path, &st));
    if (!st) return;
    CHECK(brg_safetensors_count(st) == 9);
    CHECK(strcmp(brg_safetensors_source(st), path) == 0);
    CHECK(brg_safetensors_metadata_count(st) == 2);
    CHECK(brg_safetensors_metadata(st, "format") && strcmp(brg_safetensors_metadata(st, "format"), "pt") == 0);
    CHECK(strcmp(brg_safetensors_metadata_key(st, 1), "note") == 0);
    CHECK(strcmp(brg_safetensors_metadata_value(st, 1), meta[1].value) == 0);
    CHECK(brg_safetensors_metadata(st, "absent") == NULL);
    /* The reference writer's order: its Dtype enum descending (I64, F32, I32, BF16, F16, BOOL), then name. */
    const char *order[9] = {"empty_i64", "i64", "empty_f32", "f32", "scalar", "i32", "bf16", "f16", "bool"};
    for (int i = 0; i < 9; i++) CHECK_MSG(strcmp(brg_safetensors_name(st, i), order[i]) == 0, "%d: %s", i,
                                          brg_safetensors_name(st, i));
    for (int i = 0; i < 9; i++) {
        brg_tensor v;
        CHECK_OK(brg_safetensors_get(st, names[i], &v));
        CHECK(v.dtype == t[i].dtype && brg_tensor_same_shape(&v, &t[i]));
        CHECK(strcmp(v.name, names[i]) == 0);
        size_t nb = brg_tensor_nbytes(&t[i]);
        CHECK(nb == 0 || memcmp(v.data, t[i].data, nb) == 0);
    }
    brg_tensor v;
    CHECK_OK(brg_safetensors_get(st, "scalar", &v));
    CHECK(v.ndim == 0 && brg_tensor_get(&v, 0) == 42.0);
    CHECK(brg_safetensors_has(st, "bool") && !brg_safetensors_has(st, "nope"));
    CHECK_ERR(brg_safetensors_get(st, "nope", &v), BRG_ERR_NOT_FOUND, "'nope'");
    CHECK(strstr(brg_last_error(), path) != NULL);
    brg_safetensors_close(st);

    /* The header is space-padded to 8 bytes and starts with the metadata. */
    FILE *fp = fopen(path, "rb");
    unsigned char head[24] = {0};
    CHECK(fp && fread(head, 1, sizeof head, fp) == sizeof head);
    if (fp) fclose(fp);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | head[i];
    CHECK(n % 8 == 0);
    CHECK(memcmp(head + 8, "{\"__metadata__\"", 15) == 0);
}

static void test_big_integers_written_exactly(void) {
    int64_t shape[2] = {3000000000LL, 0}; /* no data, but a dimension past 2^31 */
    brg_tensor t = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, NULL);
    brg_named_tensor nt = {"wide", &t};
    const char *path = tmp_path("big.safetensors");
    CHECK_OK(brg_safetensors_write(path, &nt, 1, NULL, 0));
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_open(path, &st));
    brg_tensor v;
    if (st) CHECK_OK(brg_safetensors_get(st, "wide", &v));
    CHECK(st && v.shape[0] == 3000000000LL && v.shape[1] == 0);
    brg_safetensors_close(st);
}

static void test_non_contiguous_input(void) {
    float m[12];
    for (int i = 0; i < 12; i++) m[i] = (float)i + 0.5f;
    int64_t s34[2] = {3, 4};
    brg_tensor full = brg_tensor_wrap(BRG_DTYPE_F32, 2, s34, m), tr, sl;
    CHECK_OK(brg_tensor_view_transpose(&full, 0, 1, &tr)); /* [4, 3] */
    uint16_t h[12];
    for (int i = 0; i < 12; i++) h[i] = (uint16_t)(0x7c01 + i); /* NaN payloads must survive */
    brg_tensor half = brg_tensor_wrap(BRG_DTYPE_F16, 2, s34, h), htr;
    CHECK_OK(brg_tensor_view_transpose(&half, 0, 1, &htr));
    CHECK_OK(brg_tensor_view_slice(&full, 1, 1, 2, &sl)); /* [3, 2] columns 1..2 */
    CHECK(!brg_tensor_is_contiguous(&tr) && !brg_tensor_is_contiguous(&sl));
    brg_named_tensor nt[3] = {{"tr", &tr}, {"half", &htr}, {"slice", &sl}};
    const char *path = tmp_path("strided.safetensors");
    CHECK_OK(brg_safetensors_write(path, nt, 3, NULL, 0));
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_open(path, &st));
    if (!st) return;
    for (int k = 0; k < 3; k++) {
        brg_tensor v;
        CHECK_OK(brg_safetensors_get(st, nt[k].name, &v));
        CHECK(brg_tensor_same_shape(&v, nt[k].tensor));
        int64_t n = brg_tensor_numel(&v);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (v.dtype == BRG_DTYPE_F16) {
                uint16_t a, b;
                memcpy(&a, (const char *)v.data + 2 * i, 2);
                int64_t r = i / 3, c = i % 3; /* htr[r][c] = h[c][r] */
                b = h[c * 4 + r];
                bad += a != b;
            } else {
                bad += brg_tensor_get(&v, i) != brg_tensor_get(nt[k].tensor, i);
            }
        }
        CHECK_MSG(bad == 0, "%s: %d elements differ", nt[k].name, bad);
    }
    brg_safetensors_close(st);
}

static void test_atomic_write_keeps_old_file(void) {
    float a[2] = {1, 2}, b[2] = {3, 4};
    int64_t s2[1] = {2};
    brg_tensor ta = brg_tensor_wrap(BRG_DTYPE_F32, 1, s2, a), tb = brg_tensor_wrap(BRG_DTYPE_F32, 1, s2, b);
    const char *path = tmp_path("atomic.safetensors");
    brg_named_tensor good = {"w", &ta};
    CHECK_OK(brg_safetensors_write(path, &good, 1, NULL, 0));
    brg_named_tensor dup[2] = {{"w", &tb}, {"w", &ta}};
    CHECK_ERR(brg_safetensors_write(path, dup, 2, NULL, 0), BRG_ERR_INVALID_ARG, "tensor name 'w' appears twice");
    brg_named_tensor empty = {"", &tb};
    CHECK_ERR(brg_safetensors_write(path, &empty, 1, NULL, 0), BRG_ERR_INVALID_ARG, "empty name");
    brg_named_tensor reserved = {"__metadata__", &tb};
    CHECK_ERR(brg_safetensors_write(path, &reserved, 1, NULL, 0), BRG_ERR_INVALID_ARG, "reserved");
    brg_metadata_entry meta[2] = {{"k", "1"}, {"k", "2"}};
    brg_named_tensor other = {"w", &tb};
    CHECK_ERR(brg_safetensors_write(path, &other, 1, meta, 2), BRG_ERR_INVALID_ARG, "metadata key 'k' appears twice");
    CHECK(no_temp_left(path));
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_open(path, &st));
    brg_tensor v;
    if (st) CHECK_OK(brg_safetensors_get(st, "w", &v));
    CHECK(st && brg_tensor_get(&v, 1) == 2.0); /* still the first file */
    brg_safetensors_close(st);

    /* A folder in the way is refused before anything is written, and nothing is left beside it
     * (a failure after the data is written is test_atomic_file's file-size-limit case). */
    const char *dir = tmp_path("atomic_dir");
    mkdir(dir, 0755);
    CHECK_ERR(brg_safetensors_write(dir, &good, 1, NULL, 0), BRG_ERR_IO, "is a directory");
    CHECK(no_temp_left(dir));
    char missing[1100];
    snprintf(missing, sizeof missing, "%s/no/such/folder.safetensors", test_tmp_dir());
    CHECK_ERR(brg_safetensors_write(missing, &good, 1, NULL, 0), BRG_ERR_IO, "cannot create");
    CHECK(!file_exists(missing));
}

/* ---- opening files ---- */

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    CHECK(fwrite(data, 1, len, fp) == len);
    fclose(fp);
}

static void test_open_files(void) {
    const char *path = tmp_path("tiny.safetensors");
    write_bytes(path, "\x02\0\0", 3);
    brg_safetensors *st;
    CHECK_ERR(brg_safetensors_open(path, &st), BRG_ERR_FORMAT, "too small");
    CHECK(strstr(brg_last_error(), path) != NULL);
    CHECK_ERR(brg_safetensors_open(tmp_path("missing.safetensors"), &st), BRG_ERR_NOT_FOUND, "missing.safetensors");

    /* An empty data region: the mapping ends right after the header. */
    const char *hdr = "{\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    size_t len;
    unsigned char *buf = craft_n(strlen(hdr), hdr, 0, &len);
    path = tmp_path("emptydata.safetensors");
    write_bytes(path, buf, len);
    free(buf);
    CHECK_OK(brg_safetensors_open(path, &st));
    brg_tensor v;
    if (st) CHECK_OK(brg_safetensors_get(st, "e", &v));
    if (st) {
        float dst;
        brg_tensor d = brg_tensor_wrap(BRG_DTYPE_F32, 1, v.shape, &dst);
        CHECK_OK(brg_tensor_copy(&d, &v));
    }
    brg_safetensors_close(st);

    buf = craft_n(2, "{}", 0, &len);
    path = tmp_path("nothing.safetensors");
    write_bytes(path, buf, len);
    free(buf);
    CHECK_OK(brg_safetensors_open(path, &st));
    CHECK(st && brg_safetensors_count(st) == 0 && brg_safetensors_metadata_count(st) == 0);
    brg_safetensors_close(st);
}

/* Tensor data at an odd address: reading goes through memcpy, so this must work everywhere. */
static void test_unaligned_data(void) {
    const char *hdr = "{\"x\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]}} ";
    size_t len;
    unsigned char *raw = craft_n(strlen(hdr), hdr, 16, &len);
    unsigned char *buf = malloc(len + 1);
    memcpy(buf + 1, raw, len);
    int64_t want[2] = {-5, (int64_t)1 << 50};
    memcpy(buf + 1 + 8 + strlen(hdr), want, 16);
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_parse(buf + 1, len, &st));
    if (st) {
        brg_tensor v;
        CHECK_OK(brg_safetensors_get(st, "x", &v));
        CHECK(((uintptr_t)v.data % 8) != 0);
        int64_t got[2];
        brg_tensor d = brg_tensor_wrap(BRG_DTYPE_I64, 1, v.shape, got);
        CHECK_OK(brg_tensor_copy(&d, &v));
        CHECK(got[0] == want[0] && got[1] == want[1]);
    }
    brg_safetensors_close(st);
    free(buf);
    free(raw);
}

/* ---- validation, one rule at a time ---- */

static void test_header_length_rules(void) {
    unsigned char small[5] = {1, 0, 0, 0, 0};
    brg_safetensors *st;
    CHECK_ERR(brg_safetensors_parse(small, 5, &st), BRG_ERR_FORMAT, "<buffer>: 5 bytes is too small");
    size_t len;
    unsigned char *buf = craft_n(100000001, "{}", 0, &len);
    CHECK_ERR(brg_safetensors_parse(buf, len, &st), BRG_ERR_FORMAT, "header too large");
    free(buf);
    buf = craft_n(100, "{}", 10, &len);
    CHECK_ERR(brg_safetensors_parse(buf, len, &st), BRG_ERR_FORMAT, "runs past the end");
    free(buf);
    buf = craft_n(UINT64_MAX, "{}", 0, &len);
    CHECK_ERR(brg_safetensors_parse(buf, len, &st), BRG_ERR_FORMAT, "header too large");
    free(buf);
    CHECK_ERR(parse_header("", 0), BRG_ERR_FORMAT, "empty");
}

static void test_header_text_rules(void) {
    CHECK_ERR(parse_header("{\"a\xff\":1}", 0), BRG_ERR_FORMAT, "not valid UTF-8");
    CHECK_ERR(parse_header("{\"a\xc0\x80\":1}", 0), BRG_ERR_FORMAT, "not valid UTF-8"); /* overlong */
    CHECK_ERR(parse_header("{\"w\": }", 0), BRG_ERR_FORMAT, "invalid JSON");
    CHECK_ERR(parse_header("{}{}", 0), BRG_ERR_FORMAT, "invalid JSON");
    CHECK_ERR(parse_header("[1, 2]", 0), BRG_ERR_FORMAT, "header must be a JSON object");
    CHECK_ERR(parse_header("\"text\"", 0), BRG_ERR_FORMAT, "header must be a JSON object");
    CHECK_ERR(parse_header("\xef\xbb\xbf{}", 0), BRG_ERR_FORMAT, "byte-order mark");
    CHECK_ERR(parse_header("{\"a\x01\":1}", 0), BRG_ERR_FORMAT, "control character");
    CHECK_ERR(parse_header("\x01{}", 0), BRG_ERR_FORMAT, "unexpected byte 0x01");
    /* Writers pad with spaces; leading whitespace is accepted too (safetensors #686). */
    CHECK_OK(parse_header("  \n\t{" W4("w", 0, 4) "}   ", 4));
    CHECK_OK(parse_header("{" W4("w", 0, 4) "}\r\n", 4));
}

static void test_entry_schema_rules(void) {
    CHECK_ERR(parse_header("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "tensor 'w': missing field 'dtype'");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "tensor 'w': missing field 'shape'");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4), BRG_ERR_FORMAT,
              "tensor 'w': missing field 'data_offsets'");
    CHECK_ERR(parse_header("{\"w\":[1]}", 0), BRG_ERR_FORMAT, "tensor 'w' must be a JSON object");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4),
              BRG_ERR_FORMAT, "unknown field 'x'");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
              BRG_ERR_FORMAT, "field 'dtype' twice");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "\"dtype\" must be a string");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "tensor 'w' has unknown dtype 'F99'");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "unknown dtype 'f32'");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8),
              BRG_ERR_UNSUPPORTED, "tensor 'w' has dtype F64, which brigade does not support");
    CHECK_ERR(parse_header("{\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4),
              BRG_ERR_UNSUPPORTED, "tensor 'q' has dtype F8_E4M3");
    CHECK_ERR(parse_header("{\"u\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4), BRG_ERR_UNSUPPORTED,
              "does not support");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "\"shape\" must be an array");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "found a non-number");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4),
              BRG_ERR_UNSUPPORTED, "tensor 'w' has 9 dimensions; brigade supports at most 8");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4), BRG_ERR_FORMAT,
              "array of two integers");
}

static void test_number_rules(void) {
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4), BRG_ERR_FORMAT,
              "negative value (-4)");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "\"shape\" holds a negative value");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}", 4), BRG_ERR_FORMAT,
              "4.5, which is not an integer");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", 4), BRG_ERR_FORMAT,
              "too large (at most 2^53)");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}", 4),
              BRG_ERR_FORMAT, "too large");
    /* Integral values spelt as floats are still not integers to the reference (serde). */
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.0]}}", 4), BRG_ERR_FORMAT,
              "fraction or exponent");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-0,4]}}", 4), BRG_ERR_FORMAT,
              "sign, fraction or exponent");
    /* Shape products are checked for overflow (2^32 * 2^32 = 2^64; 2^31 * 2^31 * 4 bytes = 2^64). */
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4),
              BRG_ERR_FORMAT, "overflows");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,4]}}", 4),
              BRG_ERR_FORMAT, "overflows");
}

static void test_layout_rules(void) {
    CHECK_ERR(parse_header("{" W4("a", 0, 4) "," W4("b", 8, 12) "}", 12), BRG_ERR_FORMAT,
              "tensor 'b': data_offsets [8, 12] leave a gap");
    CHECK_ERR(parse_header("{" W4("a", 4, 8) "}", 8), BRG_ERR_FORMAT, "tensor 'a': data_offsets [4, 8] leave a gap");
    CHECK_ERR(parse_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}," W4("b", 4, 8) "}", 8),
              BRG_ERR_FORMAT, "overlap the previous tensor");
    CHECK_ERR(parse_header("{" W4("a", 0, 4) "," W4("b", 4, 0) "}", 4), BRG_ERR_FORMAT, "end before they begin");
    CHECK_ERR(parse_header("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4), BRG_ERR_FORMAT,
              "span 4 bytes, but 2 F32 elements need 8");
    CHECK_ERR(parse_header("{" W4("w", 0, 4) "}", 5), BRG_ERR_FORMAT, "1 unexpected bytes after the last tensor");
    CHECK_ERR(parse_header("{" W4("w", 0, 4) "}", 3), BRG_ERR_FORMAT, "truncated");
    CHECK_ERR(parse_header("{}", 1), BRG_ERR_FORMAT, "unexpected bytes");
    CHECK_ERR(parse_header("{" W4("w", 0, 4) "," W4("w", 4, 8) "}", 8), BRG_ERR_FORMAT,
              "tensor name 'w' appears twice");
}

static void test_valid_shapes_and_order(void) {
    /* Listed out of order, with a scalar and empty tensors; names come back in data order. */
    const char *hdr = "{\"z\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                      "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
                      "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                      "\"t\":{\"dtype\":\"I64\",\"shape\":[5,0],\"data_offsets\":[8,8]}}";
    size_t len;
    unsigned char *buf = craft_n(strlen(hdr), hdr, 8, &len);
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_parse(buf, len, &st));
    if (st) {
        const char *order[4] = {"s", "e", "z", "t"};
        CHECK(brg_safetensors_count(st) == 4);
        for (int i = 0; i < 4 && brg_safetensors_count(st) == 4; i++)
            CHECK(strcmp(brg_safetensors_name(st, i), order[i]) == 0);
        brg_tensor v;
        CHECK_OK(brg_safetensors_get(st, "s", &v));
        CHECK(v.ndim == 0 && brg_tensor_numel(&v) == 1);
        CHECK_OK(brg_safetensors_get(st, "t", &v));
        CHECK(v.ndim == 2 && brg_tensor_numel(&v) == 0);
        CHECK_ERR(brg_safetensors_get(st, "nope", &v), BRG_ERR_NOT_FOUND, "tensor 'nope' is not in <buffer>");
    }
    brg_safetensors_close(st);
    free(buf);
}

static void test_metadata_rules(void) {
    CHECK_ERR(parse_header("{\"__metadata__\":{\"a\":1}}", 0), BRG_ERR_FORMAT, "value of 'a' must be a string");
    CHECK_ERR(parse_header("{\"__metadata__\":[\"a\"]}", 0), BRG_ERR_FORMAT, "\"__metadata__\" must be an object");
    CHECK_ERR(parse_header("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0), BRG_ERR_FORMAT, "duplicate key 'a'");
    CHECK_ERR(parse_header("{\"__metadata__\":{},\"__metadata__\":{}}", 0), BRG_ERR_FORMAT, "appears twice");
    CHECK_OK(parse_header("{\"__metadata__\":null}", 0)); /* the reference reads it as an Option */
    const char *hdr = "{" W4("w", 0, 4) ",\"__metadata__\":{\"format\":\"pt\",\"b\":\"\"}}";
    size_t len;
    unsigned char *buf = craft_n(strlen(hdr), hdr, 4, &len);
    brg_safetensors *st;
    CHECK_OK(brg_safetensors_parse(buf, len, &st));
    CHECK(st && brg_safetensors_metadata_count(st) == 2 && brg_safetensors_count(st) == 1);
    CHECK(st && strcmp(brg_safetensors_metadata(st, "b"), "") == 0);
    brg_safetensors_close(st);
    free(buf);
}

int main(void) {
    test_round_trip_all_dtypes();
    test_big_integers_written_exactly();
    test_non_contiguous_input();
    test_atomic_write_keeps_old_file();
    test_open_files();
    test_unaligned_data();
    test_header_length_rules();
    test_header_text_rules();
    test_entry_schema_rules();
    test_number_rules();
    test_layout_rules();
    test_valid_shapes_and_order();
    test_metadata_rules();
    return test_finish();
}
