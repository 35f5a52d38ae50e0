/* ViTModel and T5EncoderModel load checkpoints of other classes as from_pretrained does: a
 * ViTForImageClassification checkpoint (vit.-prefixed, no pooler) initialises the pooler and
 * reports it, and reports the classifier as unused, while its encoder loads (the classifier applied
 * to last_hidden_state gives the fixture's logits); a full T5 checkpoint drops its decoder without
 * a word and reports an untied lm_head, and its encoder gives what the full model's encoder gives.
 * BF16 weights are upcast; a missing encoder tensor is an error naming it. */
#include <fcntl.h>
#include <unistd.h>

#include "brigade/t5.h"
#include "test_util.h"

/* tests/fixtures/<name> copied to the scratch folder with architectures[0] set to `arch`. */
static void copy_as(const char *name, const char *arch, char *dir, size_t len) {
    char cmd[2048];
    snprintf(dir, len, "%s/base_ckpt_%s", test_tmp_dir(), name);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && cp -r tests/fixtures/%s '%s' && "
             "sed -i -E '/\"architectures\"/{n;s/\"[A-Za-z0-9]+\"/\"%s\"/}' '%s/config.json' && "
             "grep -q '\"%s\"' '%s/config.json'",
             dir, name, dir, arch, dir, arch, dir);
    CHECK_MSG(system(cmd) == 0, "cannot copy %s as %s", name, arch);
}

/* brg_model_load with stderr captured: returns what was printed (malloc'd). */
static char *load_capturing(const char *dir, brg_model **m) {
    char path[1200];
    snprintf(path, sizeof path, "%s.stderr", dir);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    brg_status st = brg_model_load(dir, m);
    fflush(stderr);
    dup2(saved, 2);
    close(fd), close(saved);
    CHECK_OK(st);
    FILE *f = fopen(path, "rb");
    char *text = calloc(1, 1 << 16);
    if (f && text) fread(text, 1, (1 << 16) - 1, f);
    if (f) fclose(f);
    return text;
}

static bool line_with(const char *text, const char *lead, const char *const *names) {
    const char *at = text ? strstr(text, lead) : NULL;
    if (!at) return false;
    const char *end = strchr(at, '\n');
    size_t n = end ? (size_t)(end - at) : strlen(at);
    char line[4096];
    snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1), at);
    for (int i = 0; names[i]; i++) {
        char quoted[256];
        snprintf(quoted, sizeof quoted, "'%s'", names[i]);
        if (!strstr(line, quoted)) return false;
    }
    return true;
}

static brg_tensor *f32_of(brg_arena *a, const brg_safetensors *f, const char *name) {
    brg_tensor src, *t = NULL;
    CHECK_OK(brg_safetensors_get(f, name, &src));
    CHECK_OK(brg_tensor_new(a, BRG_DTYPE_F32, src.ndim, src.shape, name, &t));
    if (t) CHECK_OK(brg_tensor_copy(t, &src));
    return t;
}

static brg_safetensors *open_in(const char *dir, const char *file) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    brg_safetensors *f = NULL;
    CHECK_OK(brg_safetensors_open(path, &f));
    return f;
}

/* The fixture's classifier on ViTModel's last_hidden_state[:, 0] gives the fixture's logits. */
static void check_classifier_logits(brg_model *m, const char *dir, brg_arena *a) {
    brg_safetensors *exp = open_in(dir, "expected.safetensors"), *w = open_in(dir, "model.safetensors");
    if (!exp || !w) return;
    brg_bundle b = {.inputs = TEST_MAP("pixel_values", f32_of(a, exp, "pixel_values"))};
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward(m, tape, &b));
    brg_named_tensor outs[4];
    int n = 0;
    CHECK_OK(brg_model_outputs(m, &b.inputs, b.logits, a, outs, 4, &n));
    brg_tensor *want = f32_of(a, exp, "logits"), *cw = f32_of(a, w, "classifier.weight"),
               *cb = f32_of(a, w, "classifier.bias");
    const brg_tensor *h = outs[0].tensor;
    int64_t B = h->shape[0], T = h->shape[1], C = h->shape[2], L = cw->shape[0];
    double worst = 0;
    for (int64_t r = 0; r < B; r++)
        for (int64_t l = 0; l < L; l++) {
            double s = ((const float *)cb->data)[l];
            for (int64_t c = 0; c < C; c++)
                s += (double)((const float *)cw->data)[l * C + c] * ((const float *)h->data)[r * T * C + c];
            worst = fmax(worst, fabs(s - ((const float *)want->data)[r * L + l]));
        }
    CHECK_MSG(n == 2 && worst <= 1e-4, "ViTModel from a classifier checkpoint: logits differ by %.3g", worst);
    printf("ViTModel from vit_cls: classifier(last_hidden_state[:, 0]) max diff %.2g\n", worst);
    brg_tape_destroy(tape);
    brg_safetensors_close(exp), brg_safetensors_close(w);
}

static void test_vit_from_classifier(brg_arena *a) {
    char dir[1024];
    copy_as("vit_cls", "ViTModel", dir, sizeof dir);
    brg_model *m = NULL;
    char *err = load_capturing(dir, &m), *said = err ? err : "";
    static const char *const unused[] = {"classifier.weight", "classifier.bias", NULL};
    static const char *const fresh[] = {"pooler.dense.weight", "pooler.dense.bias", NULL};
    CHECK_MSG(line_with(err, "were not used when initializing ViTModel:", unused), "no unused report in: %s", said);
    CHECK_MSG(line_with(err, "some weights of ViTModel were not initialized from the model checkpoint", fresh),
              "no newly-initialised report in: %s", said);
    CHECK_MSG(err && !strstr(err, "'layernorm.weight'"), "the final LayerNorm loads from vit.layernorm: %s", said);
    free(err);
    if (!m) return;
    CHECK(strcmp(m->ops->architecture, "ViTModel") == 0);
    const brg_tensor *pw = brg_model_param(m, "pooler.dense.weight"), *pb = brg_model_param(m, "pooler.dense.bias");
    CHECK(pw && pb && ((const float *)pw->data)[0] != 0.0f && ((const float *)pb->data)[0] == 0.0f);
    check_classifier_logits(m, dir, a);
    brg_model_destroy(m);
}

/* BF16 weights load upcast (to bf16's precision). */
static void test_vit_bf16(brg_arena *a) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load("tests/fixtures/vit_base", &m));
    if (!m) return;
    brg_named_tensor list[64];
    int n = 0;
    for (int p = 0; p < m->n_params && n < 64; p++) {
        brg_tensor *h = NULL;
        CHECK_OK(brg_tensor_new(a, BRG_DTYPE_BF16, m->params[p].tensor->ndim, m->params[p].tensor->shape, "bf16", &h));
        if (h) CHECK_OK(brg_tensor_copy(h, m->params[p].tensor));
        list[n++] = (brg_named_tensor){m->params[p].name, h};
    }
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/base_ckpt_vit_bf16", test_tmp_dir());
    CHECK_OK(brg_model_save(m, dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(brg_safetensors_write(path, list, (size_t)n, NULL, 0));
    brg_model *half = NULL;
    CHECK_OK(brg_model_load(dir, &half));
    for (int p = 0; half && p < m->n_params; p++) {
        const float *x = m->params[p].tensor->data, *y = half->params[p].tensor->data;
        double worst = 0, scale = 0;
        for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++)
            worst = fmax(worst, fabs((double)x[i] - y[i])), scale = fmax(scale, fabs((double)x[i]));
        CHECK_MSG(worst <= scale / 128, "%s: not upcast from BF16 (diff %.3g)", m->params[p].name, worst);
    }
    brg_model_destroy(half);
    brg_model_destroy(m);
}

/* The encoder output of the full model: its blocks up to the last encoder layer. */
static void check_same_encoder(brg_model *enc, const char *full_dir, brg_arena *a) {
    brg_model *full = NULL;
    CHECK_OK(brg_model_load(full_dir, &full));
    brg_safetensors *exp = open_in(full_dir, "expected.safetensors");
    if (!full || !exp) return;
    brg_tensor src;
    CHECK_OK(brg_safetensors_get(exp, "input_ids", &src));
    brg_bundle b = {0}, e = {0};
    brg_tensor *ids = NULL;
    CHECK_OK(brg_inputs_to_i32(a, &src, "input_ids", 0, enc->vocab_size, 0, &ids));
    TEST_PUT(&b.inputs, "input_ids", ids);
    TEST_PUT(&e.inputs, "input_ids", ids);
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, false);
    CHECK_OK(brg_model_forward_blocks(full, 0, brg_t5_first_decoder_block(full) - 1, tape, &b));
    CHECK_OK(brg_model_forward(enc, tape, &e));
    const brg_tensor *hidden = brg_bundle_carried(&b, "hidden");
    CHECK(hidden && e.logits && brg_tensor_same_shape(hidden, e.logits) &&
          memcmp(hidden->data, e.logits->data, brg_tensor_nbytes(hidden)) == 0);
    brg_tape_destroy(tape);
    brg_safetensors_close(exp);
    brg_model_destroy(full);
}

static void test_t5_encoder_from_full(brg_arena *a) {
    static const char *const head[] = {"lm_head.weight", NULL};
    const char *names[2] = {"t5_gated_untied", "t5_relu_tied"};
    for (int k = 0; k < 2; k++) {
        char dir[1024], full[600];
        copy_as(names[k], "T5EncoderModel", dir, sizeof dir);
        brg_model *m = NULL;
        char *err = load_capturing(dir, &m), *said = err ? err : "";
        /* decoder.* goes unused without a word; an untied head is reported */
        CHECK_MSG(err && !strstr(err, "decoder"), "%s: the decoder was reported: %s", names[k], said);
        if (k == 0) CHECK_MSG(line_with(err, "were not used when initializing T5EncoderModel:", head), "%s", said);
        else CHECK_MSG(err && err[0] == '\0', "%s: unexpected report: %s", names[k], said);
        free(err);
        if (!m) continue;
        CHECK(strcmp(m->ops->architecture, "T5EncoderModel") == 0 && m->n_blocks == 4);
        snprintf(full, sizeof full, "tests/fixtures/%s", names[k]);
        check_same_encoder(m, full, a);
        brg_model_destroy(m);
    }
}

/* A checkpoint without one of the encoder's tensors is an error naming it. */
static void test_t5_encoder_missing(void) {
    brg_model *m = NULL;
    CHECK_OK(brg_model_load("tests/fixtures/t5_encoder", &m));
    if (!m) return;
    brg_named_tensor list[64];
    int n = 0;
    for (int p = 0; p < m->n_params && n < 64; p++)
        if (strcmp(m->params[p].name, "encoder.final_layer_norm.weight") != 0)
            list[n++] = (brg_named_tensor){m->params[p].name, m->params[p].tensor};
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/base_ckpt_t5_missing", test_tmp_dir());
    CHECK_OK(brg_model_save(m, dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK_OK(brg_safetensors_write(path, list, (size_t)n, NULL, 0));
    brg_model *back = NULL;
    CHECK_ERR(brg_model_load(dir, &back), BRG_ERR_FORMAT,
              "the checkpoint has no tensor 'encoder.final_layer_norm.weight'");
    brg_model_destroy(m);
}

int main(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    if (!a) return test_finish();
    test_vit_from_classifier(a);
    test_vit_bf16(a);
    test_t5_encoder_from_full(a);
    test_t5_encoder_missing();
    brg_arena_destroy(a);
    return test_finish();
}
