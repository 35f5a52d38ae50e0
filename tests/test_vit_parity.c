/* ViT image classification (single-label, and regression with num_labels 1) and ViTModel
 * (last_hidden_state, pooler_output) against transformers fixtures; with arguments, checks those
 * fixture folders instead. */
#include "encoder_parity.h"

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/vit_*", 3, ep_check_fixture); }
