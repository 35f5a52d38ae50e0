/* brigade forward end to end for every architecture: the committed transformers fixtures' inputs
 * go through the command (one device, and the inference pipeline of an ipu_config.json), and its
 * outputs are compared with transformers' logits and loss. */
#include "test_util.h"

static const char *const fixtures[] = {"gpt2_mask",  "bert_mlm",         "bert_cls",        "bert_regression",
                                       "bert_multilabel", "bert_qa",    "vit_cls",         "t5_relu_tied",
                                       "t5_gated_untied", "bert_base",  "bert_base_nopool", "bert_token",
                                       "gpt2_base",  "gpt2_seqcls",      "gpt2_seqcls_regression", "gpt2_token",
                                       "bert_choice",     "vit_base",  "t5_encoder",       "t5_encoder_gated"};
static const char *const output_names[] = {"logits", "start_logits", "end_logits", "last_hidden_state", "pooler_output",
                                           "loss"};

static void compare_outputs(const char *name, const brg_safetensors *exp, const char *out_path) {
    brg_safetensors *out = NULL;
    CHECK_OK(brg_safetensors_open(out_path, &out));
    if (!out) return;
    int compared = 0;
    for (size_t i = 0; i < sizeof output_names / sizeof output_names[0]; i++) {
        if (!brg_safetensors_has(exp, output_names[i])) continue;
        /* a base model's fixture "loss" is a test device (sum of outputs x cotangents), not an output */
        if (strcmp(output_names[i], "loss") == 0 && brg_safetensors_has(exp, "cotangent.last_hidden_state")) continue;
        brg_tensor want, got;
        CHECK_OK(brg_safetensors_get(exp, output_names[i], &want));
        CHECK_MSG(brg_safetensors_get(out, output_names[i], &got) == BRG_OK, "%s: no %s in the output", name,
                  output_names[i]);
        if (!brg_tensor_same_shape(&want, &got)) {
            CHECK_MSG(false, "%s: %s has the wrong shape", name, output_names[i]);
            continue;
        }
        double worst = 0, tol = strcmp(output_names[i], "loss") == 0 ? 1e-5 : 1e-4;
        for (int64_t k = 0; k < brg_tensor_numel(&want); k++) {
            double d = fabs(brg_tensor_get(&want, k) - brg_tensor_get(&got, k));
            worst = d > worst || d != d ? d : worst;
        }
        CHECK_MSG(worst <= tol, "%s: %s differs from transformers by %.3g", name, output_names[i], worst);
        compared++;
    }
    CHECK_MSG(compared >= 1 + !brg_safetensors_has(exp, "cotangent.last_hidden_state"), "%s: only %d outputs compared",
              name, compared);
    brg_safetensors_close(out);
}

static int run_cli(const char *cli, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' forward %s > /dev/null", cli, args);
    return system(cmd);
}

static void check_fixture(const char *cli, const char *tmp, const char *name) {
    char dir[512], exp_path[600], in[600], out[600], cfg[600], args[3000];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    snprintf(exp_path, sizeof exp_path, "%s/expected.safetensors", dir);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(exp_path, &exp));
    if (!exp) return;
    snprintf(in, sizeof in, "%s/%s-inputs.safetensors", tmp, name);
    snprintf(out, sizeof out, "%s/%s-outputs.safetensors", tmp, name);
    if (test_write_fixture_inputs(exp, in) >= 0) {
        snprintf(args, sizeof args, "--model %s --inputs %s --output %s", dir, in, out);
        CHECK_MSG(run_cli(cli, args) == 0, "%s: brigade forward failed", name);
        compare_outputs(name, exp, out);
        /* The same as a two-stage inference pipeline (three rows: 3 device iterations). */
        snprintf(cfg, sizeof cfg, "%s/%s-ipu.json", tmp, name);
        FILE *f = fopen(cfg, "w");
        brg_tensor lead;
        bool pixels = brg_safetensors_has(exp, "pixel_values");
        CHECK_OK(brg_safetensors_get(exp, pixels ? "pixel_values" : "input_ids", &lead));
        if (f) {
            fprintf(f, "{\"inference_ipus_per_replica\": 2, \"inference_layers_per_ipu\": [-1], "
                       "\"inference_device_iterations\": %lld}\n", (long long)lead.shape[0]);
            fclose(f);
        }
        snprintf(out, sizeof out, "%s/%s-piped.safetensors", tmp, name);
        snprintf(args, sizeof args, "--model %s --inputs %s --output %s --ipu-config %s", dir, in, out, cfg);
        CHECK_MSG(run_cli(cli, args) == 0, "%s: brigade forward --ipu-config failed", name);
        compare_outputs(name, exp, out);
    }
    brg_safetensors_close(exp);
}

int main(void) {
    const char *cli = getenv("BRIGADE_CLI");
    if (!cli || !*cli) {
        fprintf(stderr, "BRIGADE_CLI is not set (ctest sets it to the brigade binary)\n");
        return 1;
    }
    const char *tmp = test_tmp_dir();
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) check_fixture(cli, tmp, fixtures[i]);
    return test_finish();
}
