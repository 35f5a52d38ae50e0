/* Which text preparation a model gets, by its head: the architecture name says what it trains
 * on (transformers' example scripts: run_clm, run_classification, run_mlm, run_summarization,
 * run_qa). */
#include "train_data.h"

#include <cJSON.h>
#include <string.h>

#include "brigade/checkpoint.h"
#include "brigade/tokenizer.h"
#include "io/json.h"

typedef enum objective { CAUSAL_LM, SEQUENCE_CLASSIFICATION, MASKED_LM, SEQ2SEQ, QUESTION_ANSWERING, OTHER } objective;

static bool ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && strcmp(s + n - m, tail) == 0;
}

static objective objective_of(const brg_model *m) {
    if (m->ops->labels_from_inputs) return CAUSAL_LM;
    if (ends_with(m->ops->architecture, "ForSequenceClassification")) return SEQUENCE_CLASSIFICATION;
    if (ends_with(m->ops->architecture, "ForMaskedLM")) return MASKED_LM;
    if (ends_with(m->ops->architecture, "ForConditionalGeneration")) return SEQ2SEQ;
    if (ends_with(m->ops->architecture, "ForQuestionAnswering")) return QUESTION_ANSWERING;
    return OTHER;
}

static bool takes(const brg_model *m, const char *input) {
    for (const brg_input_decl *d = brg_model_inputs(m); d->name; d++)
        if (strcmp(d->name, input) == 0) return true;
    return false;
}

/* The padding token: config.json's pad_token_id (the model's own, which GPT-2 classifiers also
 * look for), else the padding tokenizer.json configures; -1 when neither names one. */
static brg_status pad_id(const char *model_dir, const brg_tokenizer *tok, int32_t *out) {
    char dir[4096], path[4200];
    cJSON *j = NULL;
    BRG_TRY(brg_hf_resolve(model_dir, dir, sizeof dir));
    BRG_TRY(brg_json_load_config(dir, path, sizeof path, &j));
    int64_t id = -1;
    brg_status st = brg_json_get_int(j, path, "pad_token_id", false, -1, &id);
    cJSON_Delete(j);
    BRG_TRY(st);
    const brg_padding p = brg_tokenizer_get_padding(tok);
    *out = id >= 0 && id <= INT32_MAX ? (int32_t)id : p.enabled ? p.pad_id : -1;
    return BRG_OK;
}

/* The mask token of a masked LM's tokenizer, as BERT ([MASK]) and RoBERTa (<mask>) spell it. */
static brg_status mask_id(const brg_tokenizer *tok, int32_t *out) {
    *out = brg_tokenizer_token_to_id(tok, "[MASK]");
    if (*out < 0) *out = brg_tokenizer_token_to_id(tok, "<mask>");
    if (*out < 0) return brg_error(BRG_ERR_NOT_FOUND, "the tokenizer has no mask token ([MASK] or <mask>) for masked-LM training");
    return BRG_OK;
}

static brg_status load_classification(const char *ref, const char *model_dir, brg_tokenizer *tok,
                                      const brg_text_format *fmt, brg_dataset **out) {
    brg_label_map labels;
    BRG_TRY(brg_label_map_load(model_dir, &labels));
    brg_status st = brg_dataset_load_text_classification(ref, tok, fmt, &labels, out);
    brg_label_map_free(&labels);
    return st;
}

static brg_status load_mlm(const char *ref, brg_tokenizer *tok, const brg_text_format *fmt, const train_text_flags *f,
                           bool eval, brg_dataset **out) {
    int32_t mask;
    BRG_TRY(mask_id(tok, &mask));
    /* Random replacements come from the ids both the tokenizer and the model know. */
    const int64_t vocab = (int64_t)brg_tokenizer_vocab_size(tok) < fmt->vocab_size ? (int64_t)brg_tokenizer_vocab_size(tok)
                                                                                    : fmt->vocab_size;
    brg_mlm_masking m = brg_mlm_masking_default(mask, vocab, f->seed);
    m.probability = f->mlm_probability;
    BRG_TRY(brg_dataset_load_text_mlm(ref, tok, fmt, &m, f->line_by_line, out));
    if (eval) brg_dataset_fix_masks(*out);
    return BRG_OK;
}

static brg_status load_tokenized(const char *ref, const char *model_dir, const brg_model *m, brg_tokenizer *tok,
                                 const train_text_flags *f, bool eval, brg_dataset **out) {
    const objective obj = objective_of(m);
    if (obj == CAUSAL_LM) return brg_dataset_load_text_tokens(ref, tok, m->vocab_size, f->seq_len, out);
    if (obj == OTHER)
        return brg_error(BRG_ERR_UNSUPPORTED,
                         "%s: brigade prepares text for causal LMs, sequence classification, masked LMs, seq2seq and "
                         "question answering, not for %s: give a safetensors file of its inputs and labels",
                         ref, m->ops->architecture);
    brg_text_format fmt = {.seq_len = f->seq_len, .vocab_size = m->vocab_size,
                           .token_type_ids = takes(m, "token_type_ids")};
    BRG_TRY(pad_id(model_dir, tok, &fmt.pad_id));
    if (obj == SEQ2SEQ) {
        const brg_seq2seq_format s2s = {.source_prefix = f->source_prefix, .max_target_length = f->max_target_length};
        return brg_dataset_load_text_seq2seq(ref, tok, &fmt, &s2s, out);
    }
    if (obj == QUESTION_ANSWERING) return brg_dataset_load_text_qa(ref, tok, &fmt, f->doc_stride, out);
    return obj == SEQUENCE_CLASSIFICATION ? load_classification(ref, model_dir, tok, &fmt, out)
                                          : load_mlm(ref, tok, &fmt, f, eval, out);
}

brg_status train_data_load_text(const char *ref, const char *model_dir, const brg_model *m, const train_text_flags *f,
                                bool eval, brg_dataset **out) {
    brg_tokenizer *tok = NULL;
    if (brg_tokenizer_load(model_dir, &tok) != BRG_OK) {
        brg_clear_error();
        return brg_dataset_load(ref, m, f->seq_len, out);
    }
    brg_status st = load_tokenized(ref, model_dir, m, tok, f, eval, out);
    brg_tokenizer_free(tok);
    return st;
}
