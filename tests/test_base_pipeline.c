/* The base models (ViTModel, T5EncoderModel, BertModel, GPT2Model) trained over two pipelined
 * devices give transformers' gradients. A base model has no loss, so the test gives its head one:
 * sum(output x cotangent) with the fixture's cotangents, the fixture's "loss" (see the fixture
 * scripts in tools/).
 * The runtime then runs it over 2 stages placed by layers_per_ipu [-1] and 2 micro-batches (1F1B)
 * where the batch splits evenly, and every reduced gradient must match the fixture's. Dropout is
 * switched off in a copy of each folder (its masks depend on how a batch is split). */
#include "parity_util.h"
#include "brigade/registry.h"
#include "brigade/runtime.h"

typedef struct fixture {
    const char *name;
    double floor; /* parity_compare_grads' floor: key biases' gradients are zero up to rounding */
} fixture;

static const fixture fixtures[] = {{"vit_base", 1e-2},  {"t5_encoder", 0},  {"t5_encoder_gated", 0},
                                   {"bert_base", 1e-2}, {"gpt2_base", 0}};

/* What the added loss reads: the whole batch's leading input (to find a micro-batch's first row
 * from its view) and the cotangents packed as the logits are, row by row. One model at a time. */
static struct {
    const brg_model_ops *base;
    const brg_tensor *lead;
    const float *cotangent;
    int64_t row;
} objective;

static brg_model_ops with_loss;

static brg_status forward_with_loss(brg_model *m, int block, brg_tape *tape, brg_bundle *b) {
    BRG_TRY(objective.base->forward_block(m, block, tape, b));
    if (m->blocks[block].kind != BRG_BLOCK_HEAD) return BRG_OK;
    const brg_tensor *lead = brg_bundle_input(b, "input_ids") ? brg_bundle_input(b, "input_ids")
                                                              : brg_bundle_input(b, "pixel_values");
    size_t row_bytes = brg_tensor_nbytes(objective.lead) / (size_t)objective.lead->shape[0];
    int64_t first = (int64_t)(((const char *)lead->data - (const char *)objective.lead->data) / (ptrdiff_t)row_bytes);
    int64_t n = b->logits->shape[0] * objective.row, flat_shape[2] = {1, n};
    brg_tensor *cot, *flat;
    BRG_TRY(brg_tape_new_tensor(tape, BRG_DTYPE_F32, 2, flat_shape, false, "cotangent", &cot));
    memcpy(cot->data, objective.cotangent + first * objective.row, (size_t)n * sizeof(float));
    BRG_TRY(brg_reshape(tape, b->logits, 2, flat_shape, &flat));
    return brg_linear(tape, flat, cot, NULL, false, &b->loss);
}

/* The fixture's cotangents in the packed logits' layout (each output's, in output order). */
static float *packed_cotangents(brg_model *m, brg_bundle *b, const brg_safetensors *exp, brg_arena *a, int64_t *row) {
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    if (!tape) return NULL;
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward(m, tape, b));
    brg_named_tensor outs[8];
    int n = 0;
    float *packed = NULL;
    if (b->logits) CHECK_OK(brg_model_outputs(m, &b->inputs, b->logits, a, outs, 8, &n));
    int64_t B = b->logits ? b->logits->shape[0] : 0, off = 0;
    *row = B ? brg_tensor_numel(b->logits) / B : 0;
    if (n > 0) packed = calloc((size_t)(B * *row), sizeof *packed);
    for (int k = 0; k < n && packed; k++) {
        char name[160];
        brg_tensor cot;
        snprintf(name, sizeof name, "cotangent.%s", outs[k].name);
        CHECK_OK(brg_safetensors_get(exp, name, &cot));
        int64_t per = brg_tensor_numel(outs[k].tensor) / B;
        for (int64_t r = 0; r < B; r++)
            for (int64_t i = 0; i < per; i++) packed[r * *row + off + i] = (float)brg_tensor_get(&cot, r * per + i);
        off += per;
    }
    brg_tape_destroy(tape);
    return packed;
}

/* A copy of the fixture folder with every dropout probability 0. */
static bool copy_without_dropout(const char *name, const char *dst) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r tests/fixtures/%s '%s' && sed -i -E "
             "'s/(\"(hidden_dropout_prob|attention_probs_dropout_prob|dropout_rate|resid_pdrop|embd_pdrop|"
             "attn_pdrop)\": )[0-9.e-]+/\\10.0/' "
             "'%s/config.json'",
             dst, name, dst, dst);
    return system(cmd) == 0;
}

static brg_tensor *rows_of(brg_tensor *views, int k, const brg_tensor *t, int64_t first, int64_t rows) {
    if (!t) return NULL;
    CHECK_OK(brg_tensor_view_slice(t, 0, first, rows, &views[k]));
    return &views[k];
}

/* Every parameter's gradient from the device that holds it, into the model's own buffers. */
static void gather_grads(brg_runtime *rt, brg_model *m) {
    for (int p = 0; p < m->n_params; p++)
        for (int dv = 0; dv < brg_runtime_device_count(rt); dv++) {
            brg_device_info info;
            brg_device_get_info(brg_runtime_device(rt, dv), &info);
            if (!info.holds[p]) continue;
            brg_tensor *t = m->params[p].tensor;
            memcpy(t->grad, info.view->params[p].tensor->grad, brg_tensor_nbytes(t));
            break;
        }
}

static void train_two_stages(brg_model *m, brg_bundle *b, const brg_safetensors *exp, const fixture *f) {
    brg_ipu_config cfg;
    brg_placement pl = {0};
    CHECK_OK(brg_ipu_config_from_json("{\"ipus_per_replica\": 2, \"layers_per_ipu\": [-1]}", "test", &cfg));
    CHECK_OK(brg_model_parallelize(m, &cfg, BRG_IPU_MODE_TRAINING, &pl));
    CHECK_MSG(pl.n_devices == 2 && pl.block_device[0] == 0 && pl.block_device[m->n_blocks - 1] == 1,
              "%s: not placed over two devices", f->name);
    int64_t B = objective.lead->shape[0], micro = B % 2 == 0 ? 2 : 1, rows = B / micro;
    brg_runtime_options o = {.replicas = 1, .stages = 2, .block_stage = pl.block_device, .micro_batches = (int)micro,
                             .schedule = BRG_SCHEDULE_1F1B, .training = true};
    brg_runtime *rt = NULL;
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    brg_micro_batch mbs[2];
    brg_tensor views[2][3];
    for (int64_t k = 0; k < micro; k++)
        mbs[k] = TEST_MAP("input_ids", rows_of(views[k], 0, brg_bundle_input(b, "input_ids"), k * rows, rows),
                          "attention_mask", rows_of(views[k], 1, brg_bundle_input(b, "attention_mask"), k * rows, rows),
                          "pixel_values", rows_of(views[k], 2, brg_bundle_input(b, "pixel_values"), k * rows, rows));
    float losses[2] = {0, 0};
    if (rt) CHECK_OK(brg_runtime_run(rt, mbs, NULL, 1, losses));
    brg_tensor loss;
    CHECK_OK(brg_safetensors_get(exp, "loss", &loss));
    double ref = brg_tensor_get(&loss, 0), got = (double)losses[0] + losses[1];
    CHECK_MSG(fabs(ref - got) <= LOSS_TOL * fmax(1.0, fabs(ref)), "%s: sum(output x cotangent) %.8f vs %.8f", f->name,
              got, ref);
    printf("%s, 2 devices x %lld micro-batches: sum(output x cotangent) %.7f (transformers %.7f)\n", f->name,
           (long long)micro, got, ref);
    if (rt) {
        gather_grads(rt, m);
        parity_compare_grads(m, exp, f->name, f->floor, NULL);
    }
    brg_runtime_destroy(rt);
    brg_placement_free(&pl);
}

static void check(const fixture *f) {
    char dir[512], inputs[600];
    snprintf(dir, sizeof dir, "%s/base_pipeline_%s", test_tmp_dir(), f->name);
    snprintf(inputs, sizeof inputs, "%s/inputs.safetensors", dir);
    CHECK_MSG(copy_without_dropout(f->name, dir), "%s: cannot copy the fixture", f->name);
    brg_model *m = NULL;
    brg_safetensors *exp = parity_open_expected(dir), *in = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    if (exp && test_write_fixture_inputs(exp, inputs) > 0) CHECK_OK(brg_safetensors_open(inputs, &in));
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_bundle b = {0};
    if (m && in && a && brg_inputs_load(m, a, in, &b.inputs) == BRG_OK) {
        objective.base = m->ops;
        objective.lead = brg_bundle_input(&b, "input_ids") ? brg_bundle_input(&b, "input_ids")
                                                           : brg_bundle_input(&b, "pixel_values");
        float *cot = packed_cotangents(m, &b, exp, a, &objective.row);
        objective.cotangent = cot;
        with_loss = *m->ops;
        with_loss.forward_block = forward_with_loss;
        m->ops = &with_loss;
        brg_model_zero_grad(m);
        if (cot) train_two_stages(m, &b, exp, f);
        m->ops = objective.base;
        free(cot);
    }
    brg_arena_destroy(a);
    brg_safetensors_close(in);
    brg_safetensors_close(exp);
    brg_model_destroy(m);
}

int main(void) {
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) check(&fixtures[i]);
    return test_finish();
}
