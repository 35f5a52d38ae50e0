/* Evaluation: the mean loss of a dataset under the current weights (and a classifier's
 * accuracy), forward only, on one host device over the model's master copy (gathered from the
 * devices through the runtime's transport first). */
#include <math.h>
#include <string.h>

#include "brigade/ranks.h"
#include "brigade/tape.h"
#include "trainer_internal.h"

/* Examples a classifier got right: labels one class id per row (-100 not counted), logits
 * [rows, classes]; the predicted class is the first highest logit, as torch.argmax picks it. */
typedef struct hits {
    int64_t right, counted;
    bool classifier;
} hits;

static void count_hits(const brg_bundle *b, int64_t rows, hits *h) {
    const brg_tensor *y = brg_bundle_input(b, "labels"), *z = b->logits;
    h->classifier = y && z && y->dtype == BRG_DTYPE_I32 && y->ndim == 1 && z->dtype == BRG_DTYPE_F32 &&
                    z->ndim == 2 && z->shape[0] == rows && z->shape[1] > 1 && brg_tensor_is_contiguous(z);
    if (!h->classifier) return;
    const int64_t classes = z->shape[1];
    for (int64_t r = 0; r < rows; r++) {
        const int64_t label = brg_tensor_get_int(y, r);
        if (label == -100) continue;
        const float *row = (const float *)z->data + r * classes;
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (row[c] > row[best]) best = c;
        h->right += best == label;
        h->counted++;
    }
}

static brg_status eval_batch(brg_model *m, brg_tape *tape, const brg_dataset *d, int64_t first, int64_t rows,
                             brg_loss_items denominators, double *loss, hits *h) {
    brg_tensor views[BRG_TENSOR_MAP_MAX];
    brg_bundle b = {0};
    brg_dataset_rows(d, first, rows, views, &b.inputs);
    b.loss_denominator = denominators.labels;
    b.extra_loss_denominator = denominators.extra;
    BRG_TRY(brg_model_forward(m, tape, &b));
    if (b.loss) *loss += ((float *)b.loss->data)[0];
    count_hits(&b, rows, h);
    return BRG_OK;
}

brg_status trainer_evaluate(trainer *t, trainer_eval *out) {
    const brg_dataset *d = t->opts.eval_data;
    brg_model *m = t->model;
    BRG_TRY(brg_runtime_sync_to_model(t->rt));
    out->loss = out->accuracy = NAN;
    if (!brg_ranks_is_host()) return BRG_OK; /* rank 0's model has the weights now: it evaluates */
    brg_loss_items denominators = brg_model_count_loss_items(m, &d->columns);
    out->loss = out->accuracy = NAN;
    if (denominators.labels <= 0) return BRG_OK;
    brg_arena *arena;
    BRG_TRY(brg_arena_create("evaluation", 0, &arena));
    brg_tape *tape = NULL;
    brg_status st = brg_tape_create(arena, &tape);
    if (st == BRG_OK) brg_tape_set_grad_enabled(tape, false);
    double loss = 0;
    hits h = {0};
    int64_t batch = t->opts.micro_batch;
    for (int64_t first = 0; st == BRG_OK && first < d->rows; first += batch) {
        size_t mark = brg_arena_mark(arena);
        int64_t rows = d->rows - first < batch ? d->rows - first : batch;
        st = eval_batch(m, tape, d, first, rows, denominators, &loss, &h);
        brg_arena_reset(arena, mark);
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    if (st != BRG_OK) return st;
    out->loss = loss;
    if (h.classifier && h.counted > 0) out->accuracy = (double)h.right / (double)h.counted;
    return BRG_OK;
}
