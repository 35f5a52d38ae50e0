/* generation_config.json: every key brigade honours, mistyped values, eos lists, early_stopping's
 * three forms and the keys it refuses; read as a model folder's file (over a small GPT-2's special
 * tokens) and as JSON text, then validated with and without the model's vocabulary. */
#include "brigade/generate.h"
#include "brigade/gpt2.h"
#include "fuzz_util.h"

static brg_model *model(void) {
    static brg_model *m;
    if (!m) {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.vocab_size = 64, c.n_positions = 16, c.n_embd = 8, c.n_layer = 1, c.n_head = 2;
        c.bos_token_id = 1, c.eos_token_id = 2;
        if (brg_gpt2_create(&c, &m) != BRG_OK) abort();
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", fuzz_write_file("generation_config.json", data, size));
    *strrchr(dir, '/') = '\0';
    brg_generation_config c;
    if (brg_generation_config_for_model(model(), dir, &c) == BRG_OK) {
        (void)brg_generation_config_validate(&c, model());
        (void)brg_generation_config_validate(&c, NULL);
    }
    brg_clear_error();
    brg_generation_config_default(&c);
    if (brg_generation_config_update_from_json(&c, (const char *)data, size, "fuzz") == BRG_OK)
        (void)brg_generation_config_validate(&c, NULL);
    return 0;
}
