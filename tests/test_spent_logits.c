/* The LM heads' logits spent by backward: GPT-2, BERT's masked LM (alone and in pretraining) and T5
 * donate their logits to the cross-entropy, and on a tape whose outputs backward spends
 * (brg_tape_set_outputs_spent, as the runtime's devices set it) the loss writes the logits'
 * gradient over them. Each model's loss and every parameter gradient are bit for bit those of a
 * tape without the promise, the tape's peak is at least the logits' bytes lower, and the logits'
 * buffer holds their gradient after. */
#include <string.h>

#include "brigade/t5.h"
#include "test_util.h"

enum { B = 2, T = 8, VOCAB = 500 };

typedef enum arch { GPT2, BERT, BERT_PRETRAINING, T5, N_ARCHS } arch;
static const char *const names[N_ARCHS] = {"GPT-2", "BERT (masked LM)", "BERT (pretraining)", "T5"};

static brg_model *make_model(arch a) {
    brg_model *m = NULL;
    if (a == GPT2) {
        brg_gpt2_config c;
        brg_gpt2_config_default(&c);
        c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.n_positions = 16, c.vocab_size = VOCAB;
        CHECK_OK(brg_gpt2_create(&c, &m));
    } else if (a == BERT || a == BERT_PRETRAINING) {
        brg_bert_config c;
        brg_bert_config_default(&c, a == BERT ? BRG_BERT_MASKED_LM : BRG_BERT_PRETRAINING);
        c.vocab_size = VOCAB, c.hidden_size = 32, c.num_hidden_layers = 2, c.num_attention_heads = 2;
        c.intermediate_size = 64, c.max_position_embeddings = 16;
        CHECK_OK(brg_bert_create(&c, &m));
    } else {
        brg_t5_config c;
        brg_t5_config_default(&c);
        c.vocab_size = VOCAB, c.d_model = 32, c.d_kv = 16, c.num_heads = 2, c.d_ff = 64;
        c.num_layers = 2, c.num_decoder_layers = 2;
        c.relative_attention_num_buckets = 8, c.relative_attention_max_distance = 16;
        c.decoder_start_token_id = 0, c.pad_token_id = 0;
        CHECK_OK(brg_t5_create(&c, &m));
    }
    if (m) brg_model_init_weights(m, 3);
    return m;
}

typedef struct run_out {
    float loss;
    float **grads;      /* a copy of each parameter's gradient */
    size_t extra_peak;  /* the arena's peak past the forward */
    bool logits_spent;  /* the logits' buffer holds their gradient after backward (pretraining: a copy) */
} run_out;

/* One forward (dropout on) and backward of `a` on a fresh tape, `spent` or not. */
static run_out run(brg_model *m, arch a, bool spent) {
    run_out o = {.grads = calloc((size_t)m->n_params, sizeof(float *))};
    int32_t ids[B * T], labels[B * T], next[B] = {0, 1};
    float mask[B * T];
    for (int i = 0; i < B * T; i++) {
        ids[i] = 1 + (i * 37) % (VOCAB - 1);
        /* BERT: some positions are not masked */
        labels[i] = (a == BERT || a == BERT_PRETRAINING) && i % 3 ? -100 : (i * 11 + 5) % VOCAB;
        mask[i] = 1.0f;
    }
    int64_t shape[2] = {B, T};
    brg_tensor tid = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, ids);
    brg_tensor tl = brg_tensor_wrap(BRG_DTYPE_I32, 2, shape, labels);
    brg_tensor tm = brg_tensor_wrap(BRG_DTYPE_F32, 2, shape, mask);
    int64_t rows[1] = {B};
    brg_tensor tn = brg_tensor_wrap(BRG_DTYPE_I32, 1, rows, next);
    brg_arena *arena = NULL;
    brg_tape *tape = NULL;
    CHECK_OK(brg_arena_create("activations", 0, &arena));
    CHECK_OK(brg_tape_create(arena, &tape));
    brg_tape_set_outputs_spent(tape, spent);
    CHECK_OK(brg_model_zero_grad(m));
    brg_bundle b = {.inputs = TEST_MAP("input_ids", &tid, "attention_mask", &tm, "labels", &tl), .training = true,
                    .seed = 7};
    if (a == BERT_PRETRAINING) CHECK_OK(brg_tensor_map_put(&b.inputs, "next_sentence_label", &tn));
    CHECK_OK(brg_model_forward(m, tape, &b));
    if (b.loss && b.logits) {
        const size_t n = (size_t)brg_tensor_numel(b.logits);
        float *before = malloc(n * sizeof *before);
        memcpy(before, b.logits->data, n * sizeof *before);
        const size_t forward_used = brg_arena_used(arena);
        o.loss = ((float *)b.loss->data)[0];
        CHECK_OK(brg_tape_backward(tape, b.loss));
        o.extra_peak = brg_arena_peak(arena) - forward_used;
        o.logits_spent = memcmp(before, b.logits->data, n * sizeof *before) != 0;
        free(before);
    } else {
        CHECK_MSG(false, "%s: no loss or logits", names[a]);
    }
    for (int p = 0; p < m->n_params; p++) {
        const brg_tensor *t = m->params[p].tensor;
        const size_t bytes = (size_t)brg_tensor_numel(t) * sizeof(float);
        o.grads[p] = calloc(1, bytes);
        if (t->grad) memcpy(o.grads[p], t->grad, bytes);
    }
    brg_tape_destroy(tape);
    brg_arena_destroy(arena);
    return o;
}

static void check_arch(arch a) {
    brg_model *m = make_model(a);
    if (!m) return;
    run_out kept = run(m, a, false), spent = run(m, a, true);
    CHECK_MSG(memcmp(&kept.loss, &spent.loss, sizeof kept.loss) == 0, "%s: loss %.9g, spent %.9g", names[a],
              (double)kept.loss, (double)spent.loss);
    int differ = 0;
    for (int p = 0; p < m->n_params; p++) {
        const size_t bytes = (size_t)brg_tensor_numel(m->params[p].tensor) * sizeof(float);
        differ += memcmp(kept.grads[p], spent.grads[p], bytes) != 0;
    }
    CHECK_MSG(differ == 0, "%s: %d of %d parameter gradients differ with the logits spent", names[a], differ,
              m->n_params);
    const size_t logits_bytes = (size_t)B * T * VOCAB * sizeof(float);
    CHECK_MSG(spent.extra_peak + logits_bytes <= kept.extra_peak,
              "%s: backward peaked %zu bytes past the forward with the logits spent, %zu without", names[a],
              spent.extra_peak, kept.extra_peak);
    /* pretraining returns a copy of its scores (beside the next-sentence logits) and spends the scores */
    const bool copied = a == BERT_PRETRAINING;
    CHECK_MSG(spent.logits_spent == !copied && !kept.logits_spent, "%s: logits overwritten: spent %d, kept %d",
              names[a], spent.logits_spent, kept.logits_spent);
    for (int p = 0; p < m->n_params; p++) free(kept.grads[p]), free(spent.grads[p]);
    free(kept.grads), free(spent.grads);
    brg_model_destroy(m);
}

int main(void) {
    for (int a = 0; a < N_ARCHS; a++) check_arch((arch)a);
    return test_finish();
}
