/* tokenizer.json: every component type and field. A tokenizer that loads encodes and decodes a
 * fixed text with accents, CJK, an emoji sequence, whitespace runs and special-token look-alikes,
 * with and without special tokens. */
#include "brigade/tokenizer.h"
#include "fuzz_util.h"

static const char text[] = "Hello  w\xc3\xb6rld!\tcaf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                           "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb [CLS] <s> 1234 http://x.y/z ";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("tokenizer.json", data, size);
    brg_tokenizer *tok = NULL;
    if (brg_tokenizer_load(path, &tok) != BRG_OK) return 0;
    for (int special = 0; special < 2; special++) {
        brg_encoding enc;
        if (brg_tokenizer_encode(tok, text, sizeof text - 1, special, &enc) != BRG_OK) continue;
        char *back = NULL;
        (void)brg_tokenizer_decode(tok, enc.ids, enc.n, !special, &back);
        free(back);
        brg_encoding_free(&enc);
    }
    brg_tokenizer_free(tok);
    return 0;
}
