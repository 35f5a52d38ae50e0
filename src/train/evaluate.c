/* Evaluation: the mean loss of a dataset under the current weights, forward only, on one host
 * device over the model's master copy (gathered from the devices through the runtime's
 * transport first). */
#include <math.h>
#include <string.h>

#include "brigade/tape.h"
#include "trainer_internal.h"

static brg_status eval_batch(brg_model *m, brg_tape *tape, const brg_dataset *d, int64_t first, int64_t rows,
                             brg_loss_items denominators, double *loss) {
    brg_tensor views[BRG_BUNDLE_INPUTS];
    brg_bundle b;
    brg_dataset_rows(d, first, rows, views, &b);
    b.loss_denominator = denominators.labels;
    b.extra_loss_denominator = denominators.extra;
    BRG_TRY(brg_model_forward(m, tape, &b));
    if (b.loss) *loss += ((float *)b.loss->data)[0];
    return BRG_OK;
}

brg_status trainer_evaluate(trainer *t, double *mean_loss) {
    const brg_dataset *d = t->opts.eval_data;
    brg_model *m = t->model;
    BRG_TRY(brg_runtime_sync_to_model(t->rt));
    brg_loss_items denominators = brg_model_count_loss_items(m, &d->columns);
    *mean_loss = NAN;
    if (denominators.labels <= 0) return BRG_OK;
    brg_arena *arena;
    BRG_TRY(brg_arena_create("evaluation", 0, &arena));
    brg_tape *tape = NULL;
    brg_status st = brg_tape_create(arena, &tape);
    if (st == BRG_OK) brg_tape_set_grad_enabled(tape, false);
    double loss = 0;
    int64_t batch = t->opts.micro_batch;
    for (int64_t first = 0; st == BRG_OK && first < d->rows; first += batch) {
        size_t mark = brg_arena_mark(arena);
        int64_t rows = d->rows - first < batch ? d->rows - first : batch;
        st = eval_batch(m, tape, d, first, rows, denominators, &loss);
        brg_arena_reset(arena, mark);
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    if (st == BRG_OK) *mean_loss = loss;
    return st;
}
