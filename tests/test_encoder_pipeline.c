/* BERT (masked LM, classification, question answering, token classification, pretraining), the GPT-2
 * classification heads and ViT pipelined over stages and replicated give the single-device loss
 * and gradients (multiple choice too, on [B, choices, T] inputs): the carried hidden states, the tied masked-LM decoder's gradient summed across
 * stages, and the loss shares of sequence-level heads. The base models (BertModel, GPT2Model)
 * give the single-device outputs through an inference pipeline. */
#include "brigade/rng.h"
#include "brigade/runtime.h"
#include "runtime_util.h"

enum { ROWS = 8, T = 8, VOCAB = 31, LABELS = 3, IMG = 8, CH = 3 };
enum { IN_IDS, IN_MASK, IN_TYPES, IN_PIXELS, IN_LABELS, IN_EXTRA, N_IN };

typedef struct data {
    brg_tensor *in[N_IN]; /* whole-batch tensors; NULL where the model takes no such input */
    bool spans;           /* question answering: IN_LABELS and IN_EXTRA are start and end positions */
} data;

/* Input k's keyword name: IN_LABELS and IN_EXTRA are labels and next_sentence_label, or
 * start_positions and end_positions for question answering. */
static const char *input_name(const data *d, int k) {
    static const char *const names[N_IN] = {"input_ids",    "attention_mask", "token_type_ids",
                                            "pixel_values", "labels",         "next_sentence_label"};
    if (d->spans && k == IN_LABELS) return "start_positions";
    if (d->spans && k == IN_EXTRA) return "end_positions";
    return names[k];
}

/* LayerNorm weights and biases start at 1 and 0; move every parameter so each gradient matters. */
static void perturb(brg_model *m, uint64_t seed) {
    brg_rng rng;
    brg_rng_seed(&rng, seed);
    for (int p = 0; p < m->n_params; p++) {
        float *d = m->params[p].tensor->data;
        for (int64_t i = 0; i < brg_tensor_numel(m->params[p].tensor); i++) d[i] += 0.1f * (float)brg_rng_normal(&rng);
    }
}

static brg_model *tiny_bert(brg_bert_task task, float dropout) {
    brg_bert_config c;
    brg_bert_config_default(&c, task);
    c.vocab_size = VOCAB, c.hidden_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 24, c.max_position_embeddings = 16, c.initializer_range = 0.2f;
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = dropout;
    c.num_labels = task == BRG_BERT_SEQUENCE_CLASSIFICATION || task == BRG_BERT_TOKEN_CLASSIFICATION ? LABELS : 2;
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (!m) return NULL;
    brg_bert_init_weights(m, 5);
    perturb(m, 9);
    return m;
}

static brg_model *tiny_gpt2(brg_gpt2_task task) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.task = task, c.vocab_size = VOCAB, c.n_embd = 16, c.n_layer = 2, c.n_head = 2, c.n_positions = 16;
    c.initializer_range = 0.2f, c.num_labels = LABELS, c.pad_token_id = 0;
    c.embd_pdrop = c.attn_pdrop = c.resid_pdrop = 0.0f, c.classifier_dropout = 0.0f;
    brg_model *m = NULL;
    CHECK_OK(brg_gpt2_create(&c, &m));
    if (!m) return NULL;
    brg_model_init_weights(m, 7);
    perturb(m, 11);
    return m;
}

static brg_model *tiny_vit(void) {
    brg_vit_config c;
    brg_vit_config_default(&c);
    c.image_h = c.image_w = IMG, c.patch_h = c.patch_w = 4, c.num_channels = CH;
    c.hidden_size = 12, c.num_hidden_layers = 2, c.num_attention_heads = 2, c.intermediate_size = 20;
    c.initializer_range = 0.2f, c.num_labels = LABELS;
    brg_model *m = NULL;
    CHECK_OK(brg_vit_create(&c, &m));
    if (!m) return NULL;
    brg_model_init_weights(m, 6);
    perturb(m, 10);
    return m;
}

static brg_tensor *new_tensor(brg_arena *a, brg_dtype dt, int nd, const int64_t *shape) {
    brg_tensor *t = NULL;
    CHECK_OK(brg_tensor_new(a, dt, nd, shape, "data", &t));
    return t;
}

/* Token inputs with right padding of 0-2 positions and a second segment; labels per task. */
static void text_data(brg_arena *a, brg_bert_task task, data *d) {
    brg_rng rng;
    brg_rng_seed(&rng, 1);
    int64_t bt[2] = {ROWS, T}, b1[1] = {ROWS};
    d->spans = task == BRG_BERT_QUESTION_ANSWERING;
    d->in[IN_IDS] = new_tensor(a, BRG_DTYPE_I32, 2, bt);
    d->in[IN_MASK] = new_tensor(a, BRG_DTYPE_F32, 2, bt);
    d->in[IN_TYPES] = new_tensor(a, BRG_DTYPE_I32, 2, bt);
    int32_t *ids = d->in[IN_IDS]->data, *types = d->in[IN_TYPES]->data;
    float *mask = d->in[IN_MASK]->data;
    for (int i = 0; i < ROWS * T; i++) {
        int row = i / T, t = i % T;
        mask[i] = t < T - (row % 3) ? 1.0f : 0.0f;
        ids[i] = mask[i] == 0.0f ? 0 : 1 + (int32_t)(brg_rng_next(&rng) % (VOCAB - 1));
        types[i] = t >= T / 2;
    }
    if (task == BRG_BERT_BASE) return;
    if (task == BRG_BERT_PRETRAINING) { /* next_sentence_label, one ignored */
        d->in[IN_EXTRA] = new_tensor(a, BRG_DTYPE_I32, 1, b1);
        int32_t *e = d->in[IN_EXTRA]->data;
        for (int i = 0; i < ROWS; i++) e[i] = i == 3 ? -100 : (i * 7) % 2;
    }
    if (task == BRG_BERT_MASKED_LM || task == BRG_BERT_TOKEN_CLASSIFICATION || task == BRG_BERT_PRETRAINING) {
        d->in[IN_LABELS] = new_tensor(a, BRG_DTYPE_I32, 2, bt);
        int32_t *l = d->in[IN_LABELS]->data;
        bool mlm = task != BRG_BERT_TOKEN_CLASSIFICATION;
        for (int i = 0; i < ROWS * T; i++)
            l[i] = mask[i] != 0.0f && i % (mlm ? 3 : 2) == 0 ? (mlm ? ids[i] : ids[i] % LABELS) : -100;
        return;
    }
    d->in[IN_LABELS] = new_tensor(a, BRG_DTYPE_I32, 1, b1);
    int32_t *l = d->in[IN_LABELS]->data;
    for (int i = 0; i < ROWS; i++) l[i] = task == BRG_BERT_SEQUENCE_CLASSIFICATION ? i % LABELS : (i * 3) % T;
    if (task != BRG_BERT_QUESTION_ANSWERING) return;
    d->in[IN_EXTRA] = new_tensor(a, BRG_DTYPE_I32, 1, b1);
    int32_t *e = d->in[IN_EXTRA]->data;
    for (int i = 0; i < ROWS; i++) e[i] = (i * 5 + 1) % T;
}

/* Multiple choice: [ROWS, 2, T] inputs, each choice padded as text_data pads, labels in {0, 1}. */
static void choice_data(brg_arena *a, data *d) {
    brg_rng rng;
    brg_rng_seed(&rng, 3);
    int64_t shape[3] = {ROWS, 2, T}, b1[1] = {ROWS};
    d->in[IN_IDS] = new_tensor(a, BRG_DTYPE_I32, 3, shape);
    d->in[IN_MASK] = new_tensor(a, BRG_DTYPE_F32, 3, shape);
    d->in[IN_TYPES] = new_tensor(a, BRG_DTYPE_I32, 3, shape);
    d->in[IN_LABELS] = new_tensor(a, BRG_DTYPE_I32, 1, b1);
    int32_t *ids = d->in[IN_IDS]->data, *types = d->in[IN_TYPES]->data, *l = d->in[IN_LABELS]->data;
    float *mask = d->in[IN_MASK]->data;
    for (int i = 0; i < ROWS * 2 * T; i++) {
        int row = i / T, t = i % T;
        mask[i] = t < T - (row % 3) ? 1.0f : 0.0f;
        ids[i] = mask[i] == 0.0f ? 0 : 1 + (int32_t)(brg_rng_next(&rng) % (VOCAB - 1));
        types[i] = t >= T / 2;
    }
    for (int i = 0; i < ROWS; i++) l[i] = i % 2;
}

static void image_data(brg_arena *a, data *d) {
    brg_rng rng;
    brg_rng_seed(&rng, 2);
    int64_t px[4] = {ROWS, CH, IMG, IMG}, b1[1] = {ROWS};
    d->in[IN_PIXELS] = new_tensor(a, BRG_DTYPE_F32, 4, px);
    float *p = d->in[IN_PIXELS]->data;
    for (int64_t i = 0; i < brg_tensor_numel(d->in[IN_PIXELS]); i++) p[i] = (float)brg_rng_normal(&rng);
    d->in[IN_LABELS] = new_tensor(a, BRG_DTYPE_I32, 1, b1);
    int32_t *l = d->in[IN_LABELS]->data;
    for (int i = 0; i < ROWS; i++) l[i] = (i * 2) % LABELS;
}

/* Rows [first, first + rows) of t, sharing its memory. */
static brg_tensor slice(const brg_tensor *t, int64_t first, int64_t rows) {
    int64_t shape[BRG_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    shape[0] = rows;
    size_t row_bytes = brg_tensor_nbytes(t) / (size_t)t->shape[0];
    return brg_tensor_wrap(t->dtype, t->ndim, shape, (char *)t->data + (size_t)first * row_bytes);
}

/* Splits the rows into replicas x micro-batches (PopTorch's [accumulation, replica, micro] order). */
static void run(brg_model *m, const data *d, const layout *l, result *out) {
    brg_runtime_options o = layout_options(l);
    brg_runtime *rt = NULL;
    memset(out, 0, sizeof *out);
    CHECK_OK(brg_runtime_create(m, &o, &rt));
    if (!rt) return;
    int n_mb = l->replicas * l->micro_batches, rows = ROWS / n_mb;
    brg_micro_batch mbs[8];
    brg_tensor parts[8][N_IN];
    for (int r = 0; r < l->replicas; r++)
        for (int a = 0; a < l->micro_batches; a++) {
            int slot = r * l->micro_batches + a, first = (a * l->replicas + r) * rows;
            memset(&mbs[slot], 0, sizeof mbs[slot]);
            for (int k = 0; k < N_IN; k++) {
                if (!d->in[k]) continue;
                parts[slot][k] = slice(d->in[k], first, rows);
                TEST_PUT(&mbs[slot], input_name(d, k), &parts[slot][k]);
            }
        }
    brg_tensor_map whole = TEST_MAP("input_ids", d->in[IN_IDS], input_name(d, IN_LABELS), d->in[IN_LABELS],
                                    input_name(d, IN_EXTRA), d->in[IN_EXTRA]);
    brg_loss_items denom = brg_model_count_loss_items(m, &whole);
    float losses[8];
    CHECK_OK(brg_runtime_run(rt, mbs, &denom, 3, losses));
    for (int i = 0; i < n_mb; i++) out->loss += losses[i];
    collect_grads(rt, m, out);
    brg_runtime_destroy(rt);
}

static const int ONE[4] = {0, 0, 0, 0}, FOUR[4] = {0, 1, 2, 3}, TWO[4] = {0, 0, 1, 1};

/* One device against: 4 stages (1F1B), 2 replicas, 2 replicas x 2 stages (GPipe), and 2 stages
 * that recompute their layers in backward. */
static void check_layouts(brg_model *m, const data *d, const char *name) {
    result single;
    run(m, d, &(layout){1, 1, 1, ONE, BRG_SCHEDULE_1F1B, .what = "one device"}, &single);
    CHECK_MSG(single.loss > 0.1, "%s: loss %g", name, single.loss);
    const layout others[4] = {
        {1, 4, 4, FOUR, BRG_SCHEDULE_1F1B, .what = "4 stages, 1F1B, 4 micro-batches"},
        {2, 1, 1, ONE, BRG_SCHEDULE_1F1B, .what = "2 replicas"},
        {2, 2, 2, TWO, BRG_SCHEDULE_GPIPE, .what = "2 replicas x 2 stages, GPipe"},
        {1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .recompute = true, .what = "2 stages, recomputation"},
    };
    check_layouts_against(m, d, run, &single, others, 4, name);
    free_result(m, &single);
}

/* With dropout on (hidden states and attention probabilities) the masks follow each
 * micro-batch's seed, so a pipeline matches one device over the same micro-batches. */
static void check_dropout(brg_arena *a) {
    brg_model *m = tiny_bert(BRG_BERT_MASKED_LM, 0.2f), *plain = tiny_bert(BRG_BERT_MASKED_LM, 0.0f);
    data d = {0};
    text_data(a, BRG_BERT_MASKED_LM, &d);
    result single, piped, recomputed, off;
    layout one = {1, 1, 2, ONE, BRG_SCHEDULE_1F1B, .what = "one device"};
    layout four = {1, 4, 2, FOUR, BRG_SCHEDULE_GPIPE, .what = "4 stages"};
    layout again = {1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .recompute = true, .what = "2 stages, recomputation"};
    run(m, &d, &one, &single);
    run(m, &d, &four, &piped);
    run(m, &d, &again, &recomputed);
    run(plain, &d, &one, &off);
    compare(m, &single, &piped, "BERT masked LM with dropout: 4 stages");
    compare(m, &single, &recomputed, "BERT masked LM with dropout: 2 stages, recomputation");
    CHECK_MSG(fabs(single.loss - off.loss) > 1e-4, "dropout changed nothing (loss %.6f vs %.6f)", single.loss,
              off.loss);
    free_result(m, &single), free_result(m, &piped), free_result(m, &recomputed), free_result(plain, &off);
    brg_model_destroy(m), brg_model_destroy(plain);
}

/* A base model through an inference pipeline (2 stages, 2 micro-batches; and 2 replicas) gives
 * the packed outputs of one forward over the whole batch, and loading the outputs by name works on
 * the gathered tensor. */
static void check_inference(brg_model *m, const data *d, const char *name, int expected_outputs) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("single", 0, &a));
    brg_tape *tape = NULL;
    if (a) CHECK_OK(brg_tape_create(a, &tape));
    if (!tape) return;
    brg_tape_set_grad_enabled(tape, false);
    brg_bundle whole = {.inputs = TEST_MAP("input_ids", d->in[IN_IDS], "attention_mask", d->in[IN_MASK],
                                           "token_type_ids", d->in[IN_TYPES])};
    CHECK_OK(brg_model_forward(m, tape, &whole));
    const brg_tensor *ref = whole.logits;
    int64_t numel = ref ? brg_tensor_numel(ref) : 0;
    const layout layouts[2] = {{1, 2, 2, TWO, BRG_SCHEDULE_1F1B, .what = "2 stages, 2 micro-batches"},
                               {2, 2, 1, TWO, BRG_SCHEDULE_GPIPE, .what = "2 replicas x 2 stages"}};
    for (int li = 0; ref && li < 2; li++) {
        const layout *l = &layouts[li];
        brg_runtime_options o = layout_options(l);
        o.training = false;
        brg_runtime *rt = NULL;
        CHECK_OK(brg_runtime_create(m, &o, &rt));
        if (!rt) continue;
        int n_mb = l->replicas * l->micro_batches, rows = ROWS / n_mb;
        float *got = calloc((size_t)numel, sizeof *got), *sinks[8];
        brg_micro_batch mbs[8];
        brg_tensor parts[8][N_IN];
        for (int r = 0; r < l->replicas; r++)
            for (int k = 0; k < l->micro_batches; k++) {
                int slot = r * l->micro_batches + k, first = (k * l->replicas + r) * rows;
                memset(&mbs[slot], 0, sizeof mbs[slot]);
                for (int in = 0; in < N_IN; in++) {
                    if (!d->in[in]) continue;
                    parts[slot][in] = slice(d->in[in], first, rows);
                    TEST_PUT(&mbs[slot], input_name(d, in), &parts[slot][in]);
                }
                sinks[slot] = got + (int64_t)first * (numel / ROWS);
            }
        brg_loss_items none = {0, 0};
        float losses[8];
        CHECK_OK(brg_runtime_infer(rt, mbs, &none, sinks, losses));
        double worst = test_max_abs_diff(ref->data, got, (long)numel);
        CHECK_MSG(worst <= 1e-5, "%s, %s: outputs differ from one device by %.3g", name, l->what, worst);
        brg_tensor gathered = brg_tensor_wrap(BRG_DTYPE_F32, ref->ndim, ref->shape, got);
        brg_named_tensor outs[8];
        int n = 0;
        CHECK_OK(brg_model_outputs(m, &whole.inputs, &gathered, a, outs, 8, &n));
        CHECK_MSG(n == expected_outputs && outs[0].tensor->shape[0] == ROWS && outs[0].tensor->shape[1] == T,
                  "%s: %d outputs, the first of %lld x %lld", name, n, (long long)outs[0].tensor->shape[0],
                  (long long)outs[0].tensor->shape[1]);
        free(got);
        brg_runtime_destroy(rt);
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(a);
}

/* GPT-2's classification heads pipelined (sequence classification reads each row's last non-pad
 * token, pad id 0 where the mask is 0) and GPT2Model through the inference pipeline. */
static void check_gpt2(brg_arena *a) {
    data d = {0};
    text_data(a, BRG_BERT_TOKEN_CLASSIFICATION, &d);
    d.in[IN_TYPES] = NULL;
    brg_model *tok = tiny_gpt2(BRG_GPT2_TOKEN_CLASSIFICATION);
    if (tok) check_layouts(tok, &d, "GPT-2 token classification");
    brg_model_destroy(tok);
    data s = {0};
    text_data(a, BRG_BERT_SEQUENCE_CLASSIFICATION, &s);
    s.in[IN_TYPES] = NULL;
    brg_model *seq = tiny_gpt2(BRG_GPT2_SEQUENCE_CLASSIFICATION);
    if (seq) check_layouts(seq, &s, "GPT-2 sequence classification");
    brg_model_destroy(seq);
    brg_model *base = tiny_gpt2(BRG_GPT2_BASE);
    s.in[IN_LABELS] = NULL;
    if (base) check_inference(base, &s, "GPT2Model", 1);
    brg_model_destroy(base);
}

int main(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    if (!a) return test_finish();
    const brg_bert_task tasks[5] = {BRG_BERT_MASKED_LM, BRG_BERT_SEQUENCE_CLASSIFICATION, BRG_BERT_QUESTION_ANSWERING,
                                    BRG_BERT_TOKEN_CLASSIFICATION, BRG_BERT_PRETRAINING};
    const char *names[5] = {"BERT masked LM", "BERT classification", "BERT question answering",
                            "BERT token classification", "BERT pretraining"};
    for (int t = 0; t < 5; t++) {
        brg_model *m = tiny_bert(tasks[t], 0.0f);
        data d = {0};
        text_data(a, tasks[t], &d);
        if (m) check_layouts(m, &d, names[t]);
        brg_model_destroy(m);
    }
    brg_model *choice = tiny_bert(BRG_BERT_MULTIPLE_CHOICE, 0.0f);
    data cd = {0};
    choice_data(a, &cd);
    if (choice) check_layouts(choice, &cd, "BERT multiple choice");
    brg_model_destroy(choice);
    brg_model *base = tiny_bert(BRG_BERT_BASE, 0.0f);
    data bd = {0};
    text_data(a, BRG_BERT_BASE, &bd);
    if (base) check_inference(base, &bd, "BertModel", 2);
    brg_model_destroy(base);
    check_gpt2(a);
    brg_model *vit = tiny_vit();
    data d = {0};
    image_data(a, &d);
    if (vit) check_layouts(vit, &d, "ViT");
    brg_model_destroy(vit);
    check_dropout(a);
    brg_arena_destroy(a);
    return test_finish();
}
