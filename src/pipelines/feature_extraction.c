/* feature-extraction as transformers 5's FeatureExtractionPipeline: the text encoded with special
 * tokens, the model's first output (model_outputs[0]: a base model's last_hidden_state) as
 * nested lists, [1, tokens, hidden] for the input's own tokens (transformers run with
 * batch_size > 1 would also list the padding's rows; brigade never does). Any model whose forward
 * takes the text alone fits (not T5ForConditionalGeneration, which needs decoder inputs, nor the
 * image models). */
#include <stdlib.h>
#include <string.h>

#include "pipelines/task_internal.h"

static bool fits(const brg_model *m) {
    const char *a = m->ops->architecture;
    return strcmp(a, "T5ForConditionalGeneration") != 0 && strncmp(a, "ViT", 3) != 0; /* images: not text */
}

/* Nested lists of dims[d..nd) of x. */
static void write_nested(task_json *j, const float *x, const int64_t *dims, int nd, int d) {
    int64_t inner = 1;
    for (int k = d + 1; k < nd; k++) inner *= dims[k];
    task_json_raw(j, "[");
    for (int64_t i = 0; i < dims[d]; i++) {
        if (i) task_json_raw(j, ", ");
        if (d == nd - 1) task_json_num(j, x[i]);
        else write_nested(j, x + i * inner, dims, nd, d + 1);
    }
    task_json_raw(j, "]");
}

static bool token_level(const brg_named_tensor *o, int64_t T) {
    if (o->tensor->ndim < 2 || o->tensor->shape[1] != T) return false;
    return o->tensor->ndim >= 3 || strcmp(o->name, "start_logits") == 0 || strcmp(o->name, "end_logits") == 0;
}

static brg_status row_result(const brg_named_tensor *o, int64_t r, int64_t T, int64_t n_tokens, char **out) {
    const brg_tensor *t = o->tensor;
    if (t->dtype != BRG_DTYPE_F32)
        return brg_error(BRG_ERR_UNSUPPORTED, "feature-extraction: %s is not float32", o->name);
    int64_t dims[BRG_MAX_DIMS + 1], per_row = 1;
    dims[0] = 1;
    for (int d = 1; d < t->ndim; d++) dims[d] = t->shape[d], per_row *= t->shape[d];
    if (token_level(o, T)) dims[1] = n_tokens;
    task_json j;
    BRG_TRY(task_json_open(&j));
    write_nested(&j, (const float *)t->data + r * per_row, dims, t->ndim, 0);
    return task_json_close(&j, out);
}

static brg_status batch_results(brg_task_pipeline *p, const task_batch *b, char **results) {
    if (b->n_outs < 1) return brg_error(BRG_ERR_FORMAT, "%s gives no outputs", p->model->ops->architecture);
    for (int64_t r = 0; r < b->n; r++) BRG_TRY(row_result(&b->outs[0], r, b->T, (int64_t)b->enc[r].n, &results[r]));
    return BRG_OK;
}

static brg_status run(brg_task_pipeline *p, const brg_task_input *in, int64_t n, int64_t first, char **results) {
    return task_run_batches(p, in, n, first, false, NULL, batch_results, results);
}

const task_def task_feature_extraction = {
    .name = "feature-extraction",
    .info = {.name = "feature-extraction",
             .inputs = "text",
             .models = "BertModel, GPT2Model, T5EncoderModel (any model whose forward takes the text alone)",
             .returns = "[[[...]]]: the first output, [1, tokens, hidden]",
             .follows = "transformers 5",
             .implemented = true},
    .fits = fits,
    .run = run,
};
