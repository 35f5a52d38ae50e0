/* `brigade init --arch` for every architecture the registry holds (a new one fails here until init
 * can size it): the folder loads back as that architecture, and a batch through it on one device
 * and as a two-stage inference pipeline (brg_infer) gives the same finite outputs. */
#include "brigade/pipeline.h"
#include "brigade/rng.h"
#include "kernels/kernels.h"
#include "test_util.h"

enum { ROWS = 2, T = 6, TD = 4, VOCAB = 64, CHOICES = 3, IMAGE = 8 };

static bool takes(const brg_model *m, const char *input) {
    for (const brg_input_decl *d = brg_model_inputs(m); d->name; d++)
        if (strcmp(d->name, input) == 0) return true;
    return false;
}

static brg_tensor *random_tensor(brg_arena *a, brg_dtype dtype, int ndim, const int64_t *shape, brg_rng *rng) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, dtype, ndim, shape, "input", &t));
    for (int64_t i = 0; t && i < brg_tensor_numel(t); i++) {
        if (dtype == BRG_DTYPE_I32) ((int32_t *)t->data)[i] = (int32_t)(2 + brg_rng_next(rng) % (VOCAB - 2));
        else ((float *)t->data)[i] = (float)brg_rng_normal(rng);
    }
    return t;
}

/* Inputs the model takes, from what it declares: pixels, or token ids ([B, choices, T] for a
 * multiple-choice head) and, for an encoder-decoder, decoder ids. */
static brg_bundle make_inputs(const brg_model *m, brg_arena *a) {
    brg_rng rng;
    brg_rng_seed(&rng, 5);
    brg_bundle b = {0};
    if (takes(m, "pixel_values")) {
        const int64_t shape[4] = {ROWS, 3, IMAGE, IMAGE};
        TEST_PUT(&b.inputs, "pixel_values", random_tensor(a, BRG_DTYPE_F32, 4, shape, &rng));
        return b;
    }
    const int64_t flat[2] = {ROWS, T}, choices[3] = {ROWS, CHOICES, T}, dec[2] = {ROWS, TD};
    TEST_PUT(&b.inputs, "input_ids",
             m->ops->choices ? random_tensor(a, BRG_DTYPE_I32, 3, choices, &rng)
                             : random_tensor(a, BRG_DTYPE_I32, 2, flat, &rng));
    if (takes(m, "decoder_input_ids"))
        TEST_PUT(&b.inputs, "decoder_input_ids", random_tensor(a, BRG_DTYPE_I32, 2, dec, &rng));
    return b;
}

static void check_arch(const char *cli, const char *tmp, const char *arch) {
    char dir[1200], cmd[4096];
    snprintf(dir, sizeof dir, "%s/init-%s", tmp, arch);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && '%s' init --arch %s --layers 2 --hidden 16 --heads 2 --vocab %d --positions 16 "
             "--image-size %d --patch-size 4 --seed 1 --output '%s' > /dev/null",
             dir, cli, arch, VOCAB, IMAGE, dir);
    CHECK_MSG(system(cmd) == 0, "brigade init --arch %s failed", arch);
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    if (!m) return;
    CHECK_MSG(strcmp(m->ops->architecture, arch) == 0, "init --arch %s wrote a %s", arch, m->ops->architecture);
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    brg_bundle one = make_inputs(m, a), piped_in = one;
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward(m, tape, &one));
    brg_tape_destroy(tape);
    brg_ipu_config cfg;
    CHECK_OK(brg_ipu_config_from_json("{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1], "
                                      "\"inference_device_iterations\": 2}",
                                      "two stages", &cfg));
    brg_inference_outputs out;
    CHECK_OK(brg_infer(m, &cfg, &piped_in.inputs, a, &out));
    if (one.logits && out.logits) {
        CHECK_MSG(brg_tensor_same_shape(one.logits, out.logits), "%s: the pipeline's logits have another shape", arch);
        long n = (long)brg_tensor_numel(one.logits);
        double d = test_max_abs_diff(one.logits->data, out.logits->data, n);
        double tol = strcmp(brg_gemm_backend(), "openblas") == 0 ? 1e-6 : 0.0;
        CHECK_MSG(d <= tol, "%s: pipelined outputs differ from one device's by %.3g", arch, d);
        CHECK_MSG(n > 0 && isfinite(test_max_abs(one.logits->data, n)), "%s: outputs not finite", arch);
        CHECK_MSG(out.n_named >= 1, "%s: no named outputs", arch);
    }
    brg_arena_destroy(a);
    brg_model_destroy(m);
}

int main(void) {
    const char *cli = getenv("BRIGADE_CLI");
    if (!cli) {
        fprintf(stderr, "BRIGADE_CLI is not set (ctest sets it)\n");
        return 1;
    }
    const char *tmp = test_tmp_dir();
    char names[4096];
    brg_model_arch_names(names, sizeof names);
    int count = 0;
    for (char *save = NULL, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save), count++)
        check_arch(cli, tmp, name);
    CHECK_MSG(count >= 13, "only %d registered architectures", count);
    return test_finish();
}
