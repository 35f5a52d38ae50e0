/* brigade generate: greedy continuation of a prompt, through the model folder's tokenizer when it
 * has one (encoded as the tokenizer does by default, the whole sequence decoded without special
 * tokens), else byte-level (token id = byte value, as models trained on brigade's byte-level text
 * or built-in data use). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/generate.h"
#include "brigade/tokenizer.h"
#include "commands.h"

/* Flag values that make no sense are refused up front, naming the flag. */
static brg_status check_request(const brg_model *m, bool bytes, int64_t prompt_len, int64_t max_new, int64_t stop,
                                bool stop_seen) {
    if (bytes && m->vocab_size < 256)
        return brg_error(BRG_ERR_INVALID_ARG, "byte-level prompts need vocab_size >= 256 (the folder has no tokenizer)");
    if (prompt_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "the prompt is empty");
    if (max_new < 1) return brg_error(BRG_ERR_INVALID_ARG, "--max-new-tokens %lld: give at least 1", (long long)max_new);
    if (stop_seen && (stop < 0 || stop >= m->vocab_size))
        return brg_error(BRG_ERR_INVALID_ARG, "--stop-token %lld is outside the model's vocabulary [0, %lld)",
                         (long long)stop, (long long)m->vocab_size);
    if (prompt_len >= m->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the prompt is %lld tokens%s and the model takes at most %lld positions: no room for "
                         "a new token",
                         (long long)prompt_len, bytes ? " (bytes)" : "", (long long)m->max_positions);
    return BRG_OK;
}

/* The prompt's ids: the tokenizer's encoding, or its bytes. */
static brg_status prompt_ids(const brg_tokenizer *tok, const char *prompt, int32_t **ids, int64_t *len) {
    if (!tok) {
        *len = (int64_t)strlen(prompt);
        *ids = malloc((size_t)(*len ? *len : 1) * sizeof **ids);
        if (!*ids) return brg_error(BRG_ERR_OOM, "cannot allocate the prompt");
        for (int64_t i = 0; i < *len; i++) (*ids)[i] = (unsigned char)prompt[i];
        return BRG_OK;
    }
    brg_encoding e;
    BRG_TRY(brg_tokenizer_encode(tok, prompt, strlen(prompt), true, &e));
    *len = (int64_t)e.n;
    *ids = malloc((e.n ? e.n : 1) * sizeof **ids);
    if (*ids) memcpy(*ids, e.ids, e.n * sizeof **ids);
    brg_encoding_free(&e);
    return *ids ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the prompt");
}

/* The whole sequence as text: the tokenizer's decoding, or the bytes; control bytes escaped. */
static brg_status write_sequence(const brg_tokenizer *tok, const int32_t *ids, int64_t n) {
    if (!tok) {
        brg_generate_write_text(stdout, ids, n);
        putchar('\n');
        return BRG_OK;
    }
    char *text = NULL;
    BRG_TRY(brg_tokenizer_decode(tok, ids, (size_t)n, true, &text));
    const size_t len = strlen(text);
    int32_t *bytes = malloc((len ? len : 1) * sizeof *bytes);
    if (bytes) {
        for (size_t i = 0; i < len; i++) bytes[i] = (unsigned char)text[i];
        brg_generate_write_text(stdout, bytes, (int64_t)len);
        putchar('\n');
    }
    free(bytes);
    free(text);
    return bytes ? BRG_OK : brg_error(BRG_ERR_OOM, "cannot allocate the output text");
}

static brg_status generate(brg_model *m, const brg_tokenizer *tok, const int32_t *prompt, int64_t len, int64_t max_new,
                           int32_t stop) {
    /* Never more room than the positions left: a huge --max-new-tokens must not size the buffer. */
    int64_t room = m->max_positions - len, cap = len + (max_new < room ? max_new : room);
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return brg_error(BRG_ERR_OOM, "cannot allocate %lld tokens", (long long)cap);
    memcpy(ids, prompt, (size_t)len * sizeof *ids);
    int64_t out = 0;
    brg_status st = brg_generate_greedy(m, ids, len, cap, max_new, stop, &out);
    if (st == BRG_OK) st = write_sequence(tok, ids, out);
    free(ids);
    return st;
}

int cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL;
    int64_t max_new = 32, stop = -1;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "model folder or hub id in the local cache", false},
        {"prompt", ARG_STRING, &prompt, true, "text to continue (the folder's tokenizer, else bytes)", false},
        {"max-new-tokens", ARG_INT, &max_new, false, "tokens to add (default 32)", false},
        {"stop-token", ARG_INT, &stop, false, "stop after this token id (default: none)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("generate", "Continues a prompt greedily, through the folder's tokenizer (else byte-level); "
                   "control bytes in the output are written as escapes (\\n, \\xHH).", specs, n);
        return 0;
    }
    if (!args_parse("generate", argc, argv, 2, specs, n)) return 2;
    brg_model *m = NULL;
    if (brg_model_load(model, &m) != BRG_OK) return cli_fail("generate");
    brg_tokenizer *tok = NULL;
    if (brg_tokenizer_load(model, &tok) != BRG_OK) brg_clear_error(); /* none: byte-level */
    int32_t *ids = NULL;
    int64_t len = 0;
    brg_status st = prompt_ids(tok, prompt, &ids, &len);
    if (st == BRG_OK) st = check_request(m, tok == NULL, len, max_new, stop, args_seen(specs, n, "stop-token"));
    if (st == BRG_OK) st = generate(m, tok, ids, len, max_new, (int32_t)stop);
    free(ids);
    brg_tokenizer_free(tok);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("generate");
}
