/* ipu_config.json and override strings: the input up to its first NUL byte is the JSON, the rest
 * an update_from_string override list. A config that loads is validated, switched between modes
 * and saved; what is saved must load again. */
#include "brigade/ipu_config.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *s = fuzz_string(data, size);
    const size_t json_len = strlen(s);
    const char *overrides = json_len < size ? s + json_len + 1 : NULL;
    brg_ipu_config cfg;
    if (brg_ipu_config_from_json(s, "fuzz", &cfg) == BRG_OK) {
        if (overrides) (void)brg_ipu_config_update_from_string(&cfg, overrides);
        if (brg_ipu_config_validate(&cfg) == BRG_OK) {
            brg_ipu_config_eval(&cfg);
            int64_t factor;
            (void)brg_ipu_config_batch_size_factor(&cfg, BRG_IPU_MODE_INFERENCE, &factor);
            brg_ipu_config_train(&cfg);
            char *json = NULL;
            if (brg_ipu_config_to_json(&cfg, &json) == BRG_OK) {
                brg_ipu_config back;
                if (brg_ipu_config_from_json(json, "fuzz round trip", &back) != BRG_OK) abort();
            }
            free(json);
        }
    }
    free(s);
    return 0;
}
