/* brigade generate: greedy continuation of a prompt. Until tokenizers land, text is byte-level
 * (token id = byte value), which models trained on brigade's text or built-in data use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/generate.h"
#include "commands.h"

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
        args_usage("generate", "Continues a prompt greedily (byte-level text until tokenizers land).", specs, n);
        return 0;
    }
    if (!args_parse("generate", argc, argv, 2, specs, n)) return 2;
    brg_model *m = NULL;
    if (brg_model_load(model, &m) != BRG_OK) return cli_fail("generate");
    int64_t len = (int64_t)strlen(prompt), cap = len + (max_new > 0 ? max_new : 0);
    brg_status st = BRG_OK;
    if (m->vocab_size < 256) st = brg_error(BRG_ERR_INVALID_ARG, "byte-level prompts need vocab_size >= 256");
    else if (len < 1) st = brg_error(BRG_ERR_INVALID_ARG, "the prompt is empty");
    int32_t *ids = st == BRG_OK ? malloc((size_t)cap * sizeof *ids) : NULL;
    if (st == BRG_OK && !ids) st = brg_error(BRG_ERR_OOM, "cannot allocate %lld tokens", (long long)cap);
    int64_t out = 0;
    if (st == BRG_OK) {
        for (int64_t i = 0; i < len; i++) ids[i] = (unsigned char)prompt[i];
        st = brg_generate_greedy(m, ids, len, cap, max_new, (int32_t)stop, &out);
    }
    if (st == BRG_OK) {
        for (int64_t i = 0; i < out; i++) putchar(ids[i] < 256 ? ids[i] : '?');
        putchar('\n');
    }
    free(ids);
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("generate");
}
