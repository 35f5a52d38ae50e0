/* BERT and ViT behaviour beyond the parity fixtures: attention dropout in training (its own,
 * unfused path) against finite differences, the loss per problem type, loss-item counting, the
 * padding row at initialisation, and the errors bad configs and inputs give. */
#include "brigade/rng.h"
#include "test_util.h"

enum { B = 3, T = 6, VOCAB = 23 };

static brg_model *small_bert(brg_bert_task task, int64_t num_labels, float dropout) {
    brg_bert_config c;
    brg_bert_config_default(&c, task);
    c.vocab_size = VOCAB, c.hidden_size = 8, c.num_hidden_layers = 1, c.num_attention_heads = 2;
    c.intermediate_size = 12, c.max_position_embeddings = 8, c.initializer_range = 0.3f;
    c.hidden_dropout_prob = 0.0f, c.attention_probs_dropout_prob = dropout, c.num_labels = num_labels;
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (m) brg_bert_init_weights(m, 17);
    return m;
}

typedef struct inputs {
    brg_tensor *ids, *mask, *types, *labels;
} inputs;

static brg_tensor *tensor(brg_arena *a, brg_dtype dt, int nd, const int64_t *shape) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, dt, nd, shape, "input", &t));
    return t;
}

static void make_inputs(brg_arena *a, inputs *in) {
    int64_t bt[2] = {B, T};
    in->ids = tensor(a, BRG_DTYPE_I32, 2, bt);
    in->mask = tensor(a, BRG_DTYPE_F32, 2, bt);
    in->types = tensor(a, BRG_DTYPE_I32, 2, bt);
    in->labels = tensor(a, BRG_DTYPE_I32, 2, bt);
    for (int i = 0; i < B * T; i++) {
        ((int32_t *)in->ids->data)[i] = 1 + (i * 7) % (VOCAB - 1);
        ((float *)in->mask->data)[i] = i % T < T - i / T ? 1.0f : 0.0f;
        ((int32_t *)in->types->data)[i] = i % T >= 3;
        ((int32_t *)in->labels->data)[i] = i % 2 ? -100 : (i * 5) % VOCAB;
    }
}

static brg_bundle bundle_of(const inputs *in, bool training) {
    brg_bundle b = {.inputs = TEST_MAP("input_ids", in->ids, "attention_mask", in->mask, "token_type_ids", in->types,
                                       "labels", in->labels),
                    .training = training,
                    .seed = 99};
    return b;
}

static double loss_of(brg_model *m, brg_arena *a, const inputs *in, bool training, bool backward) {
    size_t mark = brg_arena_mark(a);
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_tape_set_grad_enabled(tape, backward);
    brg_bundle b = bundle_of(in, training);
    double loss = NAN;
    brg_status st = brg_model_forward(m, tape, &b);
    CHECK_OK(st);
    if (st == BRG_OK && b.loss) {
        loss = ((float *)b.loss->data)[0];
        if (backward) CHECK_OK(brg_tape_backward(tape, b.loss));
    }
    brg_tape_destroy(tape);
    brg_arena_reset(a, mark);
    return loss;
}

/* Attention dropout in training: the same seed draws the same masks, the gradients match central
 * differences taken with those masks, and a vanishing p changes nothing. */
static void test_attention_dropout(brg_arena *a) {
    inputs in;
    make_inputs(a, &in);
    brg_model *m = small_bert(BRG_BERT_MASKED_LM, 2, 0.3f);
    if (!m) return;
    brg_model_zero_grad(m);
    double train = loss_of(m, a, &in, true, true), eval = loss_of(m, a, &in, false, false);
    CHECK_MSG(fabs(train - eval) > 1e-3, "attention dropout had no effect (%.6f vs %.6f)", train, eval);
    CHECK_NEAR(loss_of(m, a, &in, true, false), train, 0.0); /* the same seed draws the same masks */
    const char *probe[3] = {"bert.encoder.layer.0.attention.self.query.weight",
                            "bert.encoder.layer.0.attention.self.value.bias", "bert.embeddings.LayerNorm.weight"};
    for (int k = 0; k < 3; k++) {
        brg_tensor *p = brg_model_param(m, probe[k]);
        float *d = p->data;
        double worst = 0, maxg = test_max_abs(p->grad, (long)brg_tensor_numel(p));
        for (int64_t i = 0; i < brg_tensor_numel(p); i += 3) {
            float keep = d[i];
            d[i] = keep + 1e-2f;
            double up = loss_of(m, a, &in, true, false);
            d[i] = keep - 1e-2f;
            double down = loss_of(m, a, &in, true, false);
            d[i] = keep;
            worst = fmax(worst, fabs((up - down) / 2e-2 - p->grad[i]));
        }
        CHECK_MSG(worst <= 2e-4 + 1e-2 * maxg && maxg > 1e-3, "%s: finite differences differ by %g (max grad %g)",
                  probe[k], worst, maxg);
    }
    brg_model_destroy(m);
    m = small_bert(BRG_BERT_MASKED_LM, 2, 1e-7f);
    if (m) CHECK_NEAR(loss_of(m, a, &in, true, false), loss_of(m, a, &in, false, false), 1e-5);
    brg_model_destroy(m);
}

/* Logits of a classification model on the fixed inputs with `labels`. */
static double class_loss(brg_model *m, brg_arena *a, const inputs *in, brg_tensor *labels, brg_tensor **logits) {
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_bundle b = bundle_of(in, false);
    TEST_PUT(&b.inputs, "labels", labels);
    CHECK_OK(brg_model_forward(m, tape, &b));
    *logits = b.logits;
    brg_tape_destroy(tape);
    return b.loss ? ((float *)b.loss->data)[0] : NAN;
}

static void test_problem_types(brg_arena *a) {
    inputs in;
    make_inputs(a, &in);
    brg_model *m = small_bert(BRG_BERT_SEQUENCE_CLASSIFICATION, 2, 0.0f);
    if (!m) return;
    brg_tensor *f = tensor(a, BRG_DTYPE_F32, 2, (int64_t[]){B, 2}), *i = tensor(a, BRG_DTYPE_I32, 1, (int64_t[]){B});
    float *fl = f->data;
    for (int k = 0; k < 2 * B; k++) fl[k] = (float)(k % 3 == 0);
    for (int k = 0; k < B; k++) ((int32_t *)i->data)[k] = k == 1 ? -100 : k % 2;
    brg_tensor *logits;
    /* F32 labels with two labels: multi-label, BCE with logits averaged over every element. */
    double bce = class_loss(m, a, &in, f, &logits), want = 0;
    for (int k = 0; k < 2 * B; k++) {
        double x = ((float *)logits->data)[k], s = 1 / (1 + exp(-x));
        want -= fl[k] * log(s) + (1 - fl[k]) * log(1 - s);
    }
    CHECK_NEAR(bce, want / (2 * B), 1e-6);
    /* I32 labels: single-label cross-entropy over the rows that are not -100. */
    double ce = class_loss(m, a, &in, i, &logits);
    want = 0;
    for (int k = 0; k < B; k += 2) {
        const float *r = (const float *)logits->data + 2 * k;
        want += log(exp(r[0]) + exp(r[1])) - r[((int32_t *)i->data)[k]];
    }
    CHECK_NEAR(ce, want / 2, 1e-6);
    brg_tensor_map bi = TEST_MAP("labels", i), bf = TEST_MAP("labels", f);
    CHECK(brg_model_count_loss_items(m, &bi).labels == 2 && brg_model_count_loss_items(m, &bf).labels == B);
    brg_tensor *wrong = tensor(a, BRG_DTYPE_F32, 1, (int64_t[]){B});
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_bundle b = bundle_of(&in, false);
    TEST_PUT(&b.inputs, "labels", wrong);
    CHECK_ERR(brg_model_forward(m, tape, &b), BRG_ERR_INVALID_ARG, "[batch, num_labels]");
    brg_tape_destroy(tape);
    brg_model_destroy(m);
}

static void test_input_errors(brg_arena *a) {
    inputs in;
    make_inputs(a, &in);
    brg_model *mlm = small_bert(BRG_BERT_MASKED_LM, 2, 0.0f), *qa = small_bert(BRG_BERT_QUESTION_ANSWERING, 2, 0.0f);
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    if (!mlm || !qa || !tape) return;
    brg_tensor_map counted = TEST_MAP("input_ids", in.ids, "labels", in.labels);
    CHECK(brg_model_count_loss_items(mlm, &counted).labels == 9);
    const float *word = mlm->params[0].tensor->data;
    CHECK(test_max_abs(word, 8) == 0.0 && test_max_abs(word + 8, 8) > 0.0); /* pad row 0 starts at zero */
    brg_bundle b = bundle_of(&in, false);
    ((int32_t *)in.types->data)[4] = 2;
    CHECK_ERR(brg_model_forward(mlm, tape, &b), BRG_ERR_INVALID_ARG, "token_type_ids value 2 at position 4");
    ((int32_t *)in.types->data)[4] = 1;
    TEST_PUT(&b.inputs, "labels", tensor(a, BRG_DTYPE_I32, 1, (int64_t[]){B}));
    CHECK_ERR(brg_model_forward(mlm, tape, &b), BRG_ERR_INVALID_ARG, "labels must be I32 with the shape of input_ids");
    b = bundle_of(&in, false);
    TEST_PUT(&b.inputs, "input_ids", NULL);
    CHECK_ERR(brg_model_forward(mlm, tape, &b), BRG_ERR_INVALID_ARG, "input_ids must be");
    brg_tensor *longer = tensor(a, BRG_DTYPE_I32, 2, (int64_t[]){1, 9});
    b = (brg_bundle){.inputs = TEST_MAP("input_ids", longer)};
    CHECK_ERR(brg_model_forward(mlm, tape, &b), BRG_ERR_INVALID_ARG, "exceeds max_position_embeddings 8");
    b = bundle_of(&in, false);
    TEST_PUT(&b.inputs, "labels", NULL); /* question answering's targets are its positions */
    TEST_PUT(&b.inputs, "start_positions", tensor(a, BRG_DTYPE_I32, 1, (int64_t[]){B}));
    CHECK_ERR(brg_model_forward(qa, tape, &b), BRG_ERR_INVALID_ARG, "needs both start_positions");
    TEST_PUT(&b.inputs, "end_positions", tensor(a, BRG_DTYPE_I32, 1, (int64_t[]){B + 1}));
    CHECK_ERR(brg_model_forward(qa, tape, &b), BRG_ERR_INVALID_ARG, "end_positions must be I32 [batch]");
    brg_tape_destroy(tape);
    brg_model_destroy(mlm);
    brg_model_destroy(qa);
}

static void test_vit_errors(brg_arena *a) {
    brg_vit_config c;
    brg_vit_config_default(&c);
    c.image_h = 8, c.image_w = 12, c.patch_h = c.patch_w = 4, c.hidden_size = 8, c.num_hidden_layers = 1;
    c.num_attention_heads = 2, c.intermediate_size = 8, c.num_labels = 1, c.qkv_bias = false;
    brg_model *m = NULL;
    CHECK_OK(brg_vit_create(&c, &m));
    if (!m) return;
    CHECK(brg_vit_num_patches(&c) == 6 && m->n_params == 4 + 13 + 4);
    CHECK(brg_model_param(m, "vit.encoder.layer.0.attention.attention.query.bias") == NULL);
    brg_tape *tape = NULL;
    CHECK_OK(brg_tape_create(a, &tape));
    brg_bundle b = {0};
    CHECK_ERR(brg_model_forward(m, tape, &b), BRG_ERR_INVALID_ARG, "ViT needs pixel_values");
    TEST_PUT(&b.inputs, "pixel_values", tensor(a, BRG_DTYPE_F32, 4, (int64_t[]){2, 3, 12, 8}));
    CHECK_ERR(brg_model_forward(m, tape, &b), BRG_ERR_INVALID_ARG, "pixel_values must be F32 [batch, 3, 8, 12]");
    TEST_PUT(&b.inputs, "pixel_values", tensor(a, BRG_DTYPE_F32, 4, (int64_t[]){2, 3, 8, 12}));
    /* integer regression targets are accepted */
    TEST_PUT(&b.inputs, "labels", tensor(a, BRG_DTYPE_I32, 1, (int64_t[]){2}));
    CHECK_OK(brg_model_forward(m, tape, &b));
    CHECK(b.logits && b.logits->shape[0] == 2 && b.logits->shape[1] == 1 && b.loss);
    c.image_w = 3;
    CHECK_ERR(brg_vit_config_validate(&c), BRG_ERR_INVALID_ARG, "must hold at least one 4x4 patch");
    brg_tape_destroy(tape);
    brg_model_destroy(m);
}

/* Writes `json` as config.json in a scratch folder and loads it as a BERT config. */
static brg_status load_json(const char *json, bool vit) {
    char path[1024];
    snprintf(path, sizeof path, "%s/encoder_config.json", test_tmp_dir());
    FILE *f = fopen(path, "w");
    if (!f) return brg_error(BRG_ERR_IO, "cannot write %s", path);
    fputs(json, f);
    fclose(f);
    brg_bert_config bc;
    brg_vit_config vc;
    return vit ? brg_vit_config_load(path, &vc) : brg_bert_config_load(path, &bc);
}

static void test_config_errors(void) {
    CHECK_OK(load_json("{\"architectures\": [\"BertForSequenceClassification\"], \"id2label\": {\"0\": \"a\"}}",
                       false));
    CHECK_ERR(load_json("{\"architectures\": [\"BertLMHeadModel\"]}", false), BRG_ERR_UNSUPPORTED,
              "'BertLMHeadModel' is not supported");
    CHECK_ERR(load_json("{\"architectures\": [\"BertForQuestionAnswering\"], \"num_labels\": 3}", false),
              BRG_ERR_INVALID_ARG, "needs num_labels 2");
    CHECK_ERR(load_json("{\"hidden_act\": \"relu\"}", false), BRG_ERR_UNSUPPORTED, "hidden_act 'relu'");
    CHECK_ERR(load_json("{\"is_decoder\": true}", false), BRG_ERR_UNSUPPORTED, "is_decoder");
    CHECK_ERR(load_json("{\"position_embedding_type\": \"relative_key\"}", false), BRG_ERR_UNSUPPORTED,
              "position_embedding_type 'relative_key'");
    CHECK_ERR(load_json("{\"problem_type\": \"ranking\"}", false), BRG_ERR_FORMAT, "problem_type 'ranking'");
    CHECK_ERR(load_json("{\"num_labels\": 3, \"id2label\": {\"0\": \"a\"}}", false), BRG_ERR_FORMAT,
              "num_labels is 3 but id2label has 1 entries");
    CHECK_ERR(load_json("{\"hidden_size\": 10, \"num_attention_heads\": 3}", false), BRG_ERR_INVALID_ARG,
              "divisible by num_attention_heads");
    CHECK_OK(load_json("{\"image_size\": [32, 48], \"patch_size\": 16, \"hidden_size\": 8, "
                       "\"num_attention_heads\": 2}",
                       true));
    CHECK_ERR(load_json("{\"image_size\": [32], \"patch_size\": 16}", true), BRG_ERR_FORMAT, "image_size must be");
    CHECK_ERR(load_json("{\"architectures\": [\"ViTForMaskedImageModeling\"]}", true), BRG_ERR_UNSUPPORTED,
              "'ViTForMaskedImageModeling' is not supported");
    CHECK_ERR(load_json("{\"architectures\": [\"ViTModel\"], \"pooler_act\": \"mish\"}", true),
              BRG_ERR_UNSUPPORTED, "pooler_act 'mish' is not supported");
    CHECK_OK(load_json("{\"architectures\": [\"ViTForImageClassification\"], \"pooler_act\": \"mish\"}", true));
    CHECK_ERR(load_json("{\"num_labels\": 0}", true), BRG_ERR_INVALID_ARG, "num_labels must be at least 1");
}

/* A BertForPreTraining checkpoint (pooler and next-sentence head, old position_ids buffer) loads
 * into BertForMaskedLM; any other extra tensor is reported on stderr and not used (as
 * from_pretrained does); tests/test_bert_checkpoints.c checks the rest of the loading rules. */
static void test_checkpoint_extras(brg_arena *a) {
    brg_model *m = small_bert(BRG_BERT_MASKED_LM, 2, 0.0f);
    if (!m) return;
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/encoder_pretraining", test_tmp_dir());
    CHECK_OK(brg_model_save(m, dir));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    brg_tensor *extra = tensor(a, BRG_DTYPE_F32, 1, (int64_t[]){2});
    brg_named_tensor list[64];
    int n = 0;
    for (int p = 0; p < m->n_params && n < 60; p++)
        list[n++] = (brg_named_tensor){m->params[p].name, m->params[p].tensor};
    list[n++] = (brg_named_tensor){"cls.seq_relationship.bias", extra};
    list[n++] = (brg_named_tensor){"bert.pooler.dense.bias", extra};
    list[n++] = (brg_named_tensor){"bert.embeddings.position_ids", extra};
    brg_metadata_entry meta[1] = {{"format", "pt"}};
    CHECK_OK(brg_safetensors_write(path, list, (size_t)n, meta, 1));
    brg_model *back = NULL;
    CHECK_OK(brg_bert_load_dir(dir, &back));
    brg_model_destroy(back);
    back = NULL;
    list[n++] = (brg_named_tensor){"cls.unknown.weight", extra};
    CHECK_OK(brg_safetensors_write(path, list, (size_t)n, meta, 1));
    CHECK_OK(brg_bert_load_dir(dir, &back));
    brg_model_destroy(back);
    brg_model_destroy(m);
}

int main(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    if (!a) return test_finish();
    test_attention_dropout(a);
    test_problem_types(a);
    test_input_errors(a);
    test_vit_errors(a);
    test_config_errors();
    test_checkpoint_extras(a);
    brg_arena_destroy(a);
    return test_finish();
}
