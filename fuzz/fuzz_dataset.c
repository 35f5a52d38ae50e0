/* Training data files for a small byte-level GPT-2: a safetensors file of columns (names, dtypes,
 * shapes, token ranges checked as `brigade forward` checks them) or text cut into rows. */
#include "brigade/dataset.h"
#include "brigade/gpt2.h"
#include "fuzz_util.h"

static brg_model *model(void) {
    static brg_model *m;
    if (!m) {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.vocab_size = 256, c.n_positions = 16, c.n_embd = 8, c.n_layer = 1, c.n_head = 2;
        if (brg_gpt2_create(&c, &m) != BRG_OK) abort();
    }
    return m;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("data.bin", data, size);
    brg_dataset *d = NULL;
    if (brg_dataset_load(path, model(), 8, &d) == BRG_OK) brg_dataset_free(d);
    return 0;
}
