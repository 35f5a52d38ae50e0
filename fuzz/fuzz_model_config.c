/* A model folder's config.json, read by every architecture's loader and validated (parsing only:
 * nothing is allocated from the sizes it names). */
#include "brigade/bert.h"
#include "brigade/gpt2.h"
#include "brigade/t5.h"
#include "brigade/vit.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("config.json", data, size);
    brg_gpt2_config g;
    if (brg_gpt2_config_load(path, &g) == BRG_OK) (void)brg_gpt2_config_validate(&g);
    brg_bert_config b;
    if (brg_bert_config_load(path, &b) == BRG_OK) (void)brg_bert_config_validate(&b);
    brg_t5_config t;
    if (brg_t5_config_load(path, &t) == BRG_OK) (void)brg_t5_config_validate(&t);
    brg_vit_config v;
    if (brg_vit_config_load(path, &v) == BRG_OK) (void)brg_vit_config_validate(&v);
    return 0;
}
