/* brigade train for every architecture: a committed fixture's inputs become a small dataset,
 * trained for a few steps on one device and as a two-stage pipeline (one micro-batch per row);
 * the two trained folders must hold the same weights. Dropout is switched off in a copy of the
 * model (its masks depend on how a batch is split) and the optimizer is SGD (Adam would turn
 * rounding noise in exactly-zero gradients, such as attention key biases, into steps of ~lr). */
#include "test_util.h"

static const char *const fixtures[] = {"bert_mlm", "bert_cls",    "bert_regression", "bert_qa", "vit_cls",
                                       "t5_gated_untied", "bert_token", "bert_choice", "gpt2_seqcls"};
static int train(const char *cli, const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' train --quiet --steps 3 --lr 0.05 --optimizer sgd --no-shuffle --seed 3 %s", cli,
             args);
    return system(cmd);
}

static void compare_weights(const char *name, const char *a_dir, const char *b_dir) {
    brg_model *a = NULL, *b = NULL;
    CHECK_OK(brg_model_load(a_dir, &a));
    CHECK_OK(brg_model_load(b_dir, &b));
    if (!a || !b) return;
    double worst = 0, moved = 0;
    brg_model *orig = NULL;
    char dir[512];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    CHECK_OK(brg_model_load(dir, &orig));
    for (int p = 0; p < a->n_params && orig; p++) {
        long n = (long)brg_tensor_numel(a->params[p].tensor);
        double d = test_max_abs_diff(a->params[p].tensor->data, b->params[p].tensor->data, n);
        double m = test_max_abs_diff(a->params[p].tensor->data, orig->params[p].tensor->data, n);
        worst = d > worst ? d : worst;
        moved = m > moved ? m : moved;
    }
    CHECK_MSG(worst <= 1e-5, "%s: pipelined training differs from one device by %.3g", name, worst);
    CHECK_MSG(moved > 1e-4, "%s: training did not change the weights (%.3g)", name, moved);
    brg_model_destroy(orig);
    brg_model_destroy(a);
    brg_model_destroy(b);
}

/* A copy of the fixture's model with every dropout probability set to 0. */
static bool copy_without_dropout(const char *name, const char *dst) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r tests/fixtures/%s '%s' && sed -i -E "
             "'s/(\"(hidden_dropout_prob|attention_probs_dropout_prob|dropout_rate|resid_pdrop|embd_pdrop|attn_pdrop)\": )[0-9.e-]+/\\10.0/' "
             "'%s/config.json'",
             dst, name, dst, dst);
    return system(cmd) == 0;
}

static void check(const char *cli, const char *tmp, const char *name) {
    char exp_path[600], data[600], cfg[600], one[600], two[600], model[600], args[3000];
    snprintf(exp_path, sizeof exp_path, "tests/fixtures/%s/expected.safetensors", name);
    brg_safetensors *exp = NULL;
    CHECK_OK(brg_safetensors_open(exp_path, &exp));
    if (!exp) return;
    snprintf(data, sizeof data, "%s/%s-data.safetensors", tmp, name);
    int64_t rows = test_write_fixture_inputs(exp, data);
    brg_safetensors_close(exp);
    snprintf(cfg, sizeof cfg, "%s/%s-train-ipu.json", tmp, name);
    FILE *f = fopen(cfg, "w");
    if (f) {
        fprintf(f, "{\"ipus_per_replica\": 2, \"layers_per_ipu\": [-1], \"gradient_accumulation_steps\": %lld}\n",
                (long long)rows);
        fclose(f);
    }
    snprintf(model, sizeof model, "%s/%s-model", tmp, name);
    CHECK_MSG(copy_without_dropout(name, model), "%s: cannot copy the model", name);
    snprintf(one, sizeof one, "%s/%s-one", tmp, name);
    snprintf(two, sizeof two, "%s/%s-two", tmp, name);
    snprintf(args, sizeof args, "--model %s --data %s --output %s --micro-batch-size %lld", model, data, one,
             (long long)rows);
    CHECK_MSG(train(cli, args) == 0, "%s: one-device training failed", name);
    snprintf(args, sizeof args, "--model %s --data %s --output %s --micro-batch-size 1 --ipu-config %s", model, data,
             two, cfg);
    CHECK_MSG(train(cli, args) == 0, "%s: pipelined training failed", name);
    compare_weights(name, one, two);
}

int main(void) {
    const char *cli = getenv("BRIGADE_CLI");
    if (!cli || !*cli) {
        fprintf(stderr, "BRIGADE_CLI is not set (ctest sets it to the brigade binary)\n");
        return 1;
    }
    const char *tmp = test_tmp_dir();
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) check(cli, tmp, fixtures[i]);
    return test_finish();
}
