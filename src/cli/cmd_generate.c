/* brigade generate: greedy continuation of a prompt. Until tokenizers land, text is byte-level
 * (token id = byte value), which models trained on brigade's text or built-in data use. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/generate.h"
#include "commands.h"

/* Flag values that make no sense are refused up front, naming the flag. */
static brg_status check_request(const brg_model *m, int64_t prompt_len, int64_t max_new, int64_t stop, bool stop_seen) {
    if (m->vocab_size < 256) return brg_error(BRG_ERR_INVALID_ARG, "byte-level prompts need vocab_size >= 256");
    if (prompt_len < 1) return brg_error(BRG_ERR_INVALID_ARG, "the prompt is empty");
    if (max_new < 1) return brg_error(BRG_ERR_INVALID_ARG, "--max-new-tokens %lld: give at least 1", (long long)max_new);
    if (stop_seen && (stop < 0 || stop >= m->vocab_size))
        return brg_error(BRG_ERR_INVALID_ARG, "--stop-token %lld is outside the model's vocabulary [0, %lld)",
                         (long long)stop, (long long)m->vocab_size);
    if (prompt_len >= m->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "the prompt is %lld tokens (bytes) and the model takes at most %lld positions: no room for "
                         "a new token",
                         (long long)prompt_len, (long long)m->max_positions);
    return BRG_OK;
}

static brg_status generate(brg_model *m, const char *prompt, int64_t max_new, int32_t stop) {
    int64_t len = (int64_t)strlen(prompt);
    /* Never more room than the positions left: a huge --max-new-tokens must not size the buffer. */
    int64_t room = m->max_positions - len, cap = len + (max_new < room ? max_new : room);
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return brg_error(BRG_ERR_OOM, "cannot allocate %lld tokens", (long long)cap);
    for (int64_t i = 0; i < len; i++) ids[i] = (unsigned char)prompt[i];
    int64_t out = 0;
    brg_status st = brg_generate_greedy(m, ids, len, cap, max_new, stop, &out);
    if (st == BRG_OK) {
        brg_generate_write_text(stdout, ids, out);
        putchar('\n');
    }
    free(ids);
    return st;
}

int cmd_generate(int argc, char **argv) {
    const char *model = NULL, *prompt = NULL;
    int64_t max_new = 32, stop = -1;
    arg_spec specs[] = {
        {"model", ARG_STRING, &model, true, "model folder or hub id in the local cache", false},
        {"prompt", ARG_STRING, &prompt, true, "text to continue (byte-level tokens)", false},
        {"max-new-tokens", ARG_INT, &max_new, false, "tokens to add (default 32)", false},
        {"stop-token", ARG_INT, &stop, false, "stop after this token id (default: none)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("generate", "Continues a prompt greedily (byte-level text until tokenizers land); control "
                   "bytes in the output are written as escapes (\\n, \\xHH).", specs, n);
        return 0;
    }
    if (!args_parse("generate", argc, argv, 2, specs, n)) return 2;
    brg_model *m = NULL;
    if (brg_model_load(model, &m) != BRG_OK) return cli_fail("generate");
    brg_status st = check_request(m, (int64_t)strlen(prompt), max_new, stop, args_seen(specs, n, "stop-token"));
    if (st == BRG_OK) st = generate(m, prompt, max_new, (int32_t)stop);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("generate");
}
