/* BERT (masked LM, single-label / regression / multi-label classification, question answering,
 * BertModel with and without pooler, token classification, multiple choice, pretraining)
 * against transformers fixtures; with arguments, checks those fixture folders instead. */
#include "encoder_parity.h"

int main(int argc, char **argv) { return parity_main(argc, argv, "tests/fixtures/bert_*", 10, ep_check_fixture); }
