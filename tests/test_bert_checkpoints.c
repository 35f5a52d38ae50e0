/* Loading checkpoints as the hub has them (from_pretrained's rules), for BERT and GPT-2: a base
 * checkpoint (no prefix) in a head model initialises the head; a head checkpoint (prefixed) loads
 * into the base model; buffers are skipped; F16/BF16 tensors are upcast; a wrong-shaped,
 * ambiguous or missing base tensor is a one-line error naming it. */
#include "brigade/rng.h"
#include "test_util.h"

#define MAX_T 96

typedef struct tensor_list {
    brg_named_tensor t[MAX_T];
    int n;
} tensor_list;

static brg_bert_config small_config(brg_bert_task task) {
    brg_bert_config c;
    brg_bert_config_default(&c, task);
    c.vocab_size = 19, c.hidden_size = 8, c.num_hidden_layers = 2, c.num_attention_heads = 2;
    c.intermediate_size = 12, c.max_position_embeddings = 8, c.initializer_range = 0.3f, c.num_labels = 3;
    return c;
}

static brg_model *bert(brg_bert_task task, uint64_t seed) {
    brg_bert_config c = small_config(task);
    brg_model *m = NULL;
    CHECK_OK(brg_bert_create(&c, &m));
    if (m) brg_bert_init_weights(m, seed);
    return m;
}

static tensor_list params_of(const brg_model *m) {
    tensor_list l = {.n = 0};
    for (int p = 0; p < m->n_params && l.n < MAX_T; p++) l.t[l.n++] = (brg_named_tensor){m->params[p].name, m->params[p].tensor};
    return l;
}

/* `config_from` saved in dir (config.json and its own weights), then model.safetensors replaced
 * by `list`. */
static void write_folder(const char *dir, const brg_model *config_from, const tensor_list *list) {
    CHECK_OK(brg_model_save(config_from, dir));
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    brg_metadata_entry meta[1] = {{"format", "pt"}};
    CHECK_OK(brg_safetensors_write(path, list->t, (size_t)list->n, meta, 1));
}

static void scratch(char *dir, size_t len, const char *name) { snprintf(dir, len, "%s/ckpt_%s", test_tmp_dir(), name); }

/* Parameter `name` of a equals parameter `other` of b, value for value (within tol). */
static bool same_param(const brg_model *a, const char *name, const brg_model *b, const char *other, double tol) {
    const brg_tensor *x = brg_model_param(a, name), *y = brg_model_param(b, other);
    if (!x || !y || !brg_tensor_same_shape(x, y)) return false;
    for (int64_t i = 0; i < brg_tensor_numel(x); i++)
        if (fabs((double)((const float *)x->data)[i] - ((const float *)y->data)[i]) > tol) return false;
    return true;
}

static bool all_zero(const brg_tensor *t) {
    for (int64_t i = 0; t && i < brg_tensor_numel(t); i++)
        if (((const float *)t->data)[i] != 0.0f) return false;
    return t != NULL;
}

/* A BertModel checkpoint (bare names, with pooler) into BertForTokenClassification and
 * BertForSequenceClassification: the encoder (and pooler) load, the classifier is initialised the
 * same way each time. */
static void test_base_into_heads(void) {
    brg_model *base = bert(BRG_BERT_BASE, 3), *tok_cfg = bert(BRG_BERT_TOKEN_CLASSIFICATION, 4);
    brg_model *cls_cfg = bert(BRG_BERT_SEQUENCE_CLASSIFICATION, 5);
    if (!base || !tok_cfg || !cls_cfg) return;
    CHECK(strcmp(base->params[0].name, "embeddings.word_embeddings.weight") == 0);
    CHECK(brg_model_find_param(base, "pooler.dense.weight") >= 0);
    tensor_list l = params_of(base);
    char dir[1024];
    scratch(dir, sizeof dir, "base_in_token");
    write_folder(dir, tok_cfg, &l);
    brg_model *a = NULL, *b = NULL;
    CHECK_OK(brg_model_load(dir, &a));
    CHECK_OK(brg_model_load(dir, &b));
    if (a && b) {
        CHECK(strcmp(a->ops->architecture, "BertForTokenClassification") == 0);
        CHECK(same_param(a, "bert.encoder.layer.1.output.dense.weight", base, "encoder.layer.1.output.dense.weight", 0));
        CHECK(same_param(a, "classifier.weight", b, "classifier.weight", 0));
        CHECK(!all_zero(brg_model_param(a, "classifier.weight")) && all_zero(brg_model_param(a, "classifier.bias")));
    }
    brg_model_destroy(a), brg_model_destroy(b);
    a = NULL;
    scratch(dir, sizeof dir, "base_in_cls");
    write_folder(dir, cls_cfg, &l);
    CHECK_OK(brg_model_load(dir, &a));
    if (a) CHECK(same_param(a, "bert.pooler.dense.weight", base, "pooler.dense.weight", 0));
    brg_model_destroy(a);
    brg_model_destroy(base), brg_model_destroy(tok_cfg), brg_model_destroy(cls_cfg);
}

/* A head checkpoint (bert.-prefixed, no pooler) into BertModel: no pooler, the classifier is
 * reported and unused, buffers are skipped. */
static void test_head_into_base(brg_arena *arena) {
    brg_model *tok = bert(BRG_BERT_TOKEN_CLASSIFICATION, 6), *base_cfg = bert(BRG_BERT_BASE, 7);
    if (!tok || !base_cfg) return;
    tensor_list l = params_of(tok);
    brg_tensor *pos = NULL, *types = NULL;
    CHECK_OK(brg_tensor_new(arena, BRG_DTYPE_I64, 2, (int64_t[]){1, 8}, "position_ids", &pos));
    CHECK_OK(brg_tensor_new(arena, BRG_DTYPE_I64, 2, (int64_t[]){1, 8}, "token_type_ids", &types));
    l.t[l.n++] = (brg_named_tensor){"bert.embeddings.position_ids", pos};
    l.t[l.n++] = (brg_named_tensor){"bert.embeddings.token_type_ids", types};
    char dir[1024];
    scratch(dir, sizeof dir, "token_in_base");
    write_folder(dir, base_cfg, &l);
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    if (m) {
        CHECK(strcmp(m->ops->architecture, "BertModel") == 0);
        CHECK(brg_model_find_param(m, "pooler.dense.weight") < 0);
        CHECK(same_param(m, "embeddings.LayerNorm.bias", tok, "bert.embeddings.LayerNorm.bias", 0));
        CHECK(same_param(m, "encoder.layer.0.attention.self.key.weight", tok,
                         "bert.encoder.layer.0.attention.self.key.weight", 0));
    }
    brg_model_destroy(m);
    brg_model_destroy(tok), brg_model_destroy(base_cfg);
}

/* F16 and BF16 tensors are upcast to F32 (to their rounding's precision). */
static void test_half_weights(brg_arena *arena) {
    brg_model *base = bert(BRG_BERT_BASE, 8);
    if (!base) return;
    const brg_dtype types[2] = {BRG_DTYPE_F16, BRG_DTYPE_BF16};
    for (int k = 0; k < 2; k++) {
        tensor_list l = params_of(base);
        for (int i = 0; i < l.n; i++) {
            brg_tensor *h = NULL;
            CHECK_OK(brg_tensor_new(arena, types[k], l.t[i].tensor->ndim, l.t[i].tensor->shape, "half", &h));
            if (h) CHECK_OK(brg_tensor_copy(h, l.t[i].tensor));
            l.t[i].tensor = h;
        }
        char dir[1024];
        scratch(dir, sizeof dir, k ? "bf16" : "f16");
        write_folder(dir, base, &l);
        brg_model *m = NULL;
        CHECK_OK(brg_model_load(dir, &m));
        /* |w| < 1.5 here: f16 keeps 11 bits, bf16 8 */
        double tol = k ? 1.5 / 128 : 1.5 / 1024;
        if (m)
            for (int p = 0; p < m->n_params; p++)
                CHECK_MSG(same_param(m, m->params[p].name, base, base->params[p].name, tol), "%s: %s not upcast",
                          brg_dtype_name(types[k]), m->params[p].name);
        brg_model_destroy(m);
    }
    brg_model_destroy(base);
}

/* Bad checkpoints: each a one-line error naming the tensor. */
static void test_bad_checkpoints(brg_arena *arena) {
    brg_model *base = bert(BRG_BERT_BASE, 9), *tok = bert(BRG_BERT_TOKEN_CLASSIFICATION, 10);
    if (!base || !tok) return;
    char dir[1024];
    brg_model *m = NULL;
    tensor_list l = params_of(base);
    brg_tensor *wrong = NULL;
    CHECK_OK(brg_tensor_new(arena, BRG_DTYPE_F32, 2, (int64_t[]){19, 9}, "wrong", &wrong));
    l.t[0].tensor = wrong;
    scratch(dir, sizeof dir, "wrong_shape");
    write_folder(dir, base, &l);
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_FORMAT,
              "tensor embeddings.word_embeddings.weight has shape [19, 9] in the checkpoint, the config implies [19, 8]");
    CHECK(strchr(brg_last_error(), '\n') == NULL);
    /* the wrong shape under the other name (a head checkpoint's) is the same error */
    l = params_of(tok);
    l.t[1] = (brg_named_tensor){"bert.embeddings.position_embeddings.weight", wrong};
    scratch(dir, sizeof dir, "wrong_shape_prefixed");
    write_folder(dir, base, &l);
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_FORMAT, "tensor bert.embeddings.position_embeddings.weight has shape");
    l = params_of(base);
    l.t[l.n++] = (brg_named_tensor){"bert.embeddings.LayerNorm.weight", brg_model_param(base, "embeddings.LayerNorm.weight")};
    scratch(dir, sizeof dir, "ambiguous");
    write_folder(dir, base, &l);
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_FORMAT,
              "holds both 'embeddings.LayerNorm.weight' and 'bert.embeddings.LayerNorm.weight'");
    l = params_of(base);
    l.t[5] = l.t[--l.n]; /* drops an encoder tensor: not a head, so not initialised */
    scratch(dir, sizeof dir, "missing");
    write_folder(dir, tok, &l);
    CHECK_ERR(brg_model_load(dir, &m), BRG_ERR_FORMAT, "the checkpoint has no tensor 'bert.encoder.layer.0.");
    brg_model_destroy(base), brg_model_destroy(tok);
}

/* GPT2Model (bare names) into GPT2ForSequenceClassification: score initialised; and a
 * transformer.-prefixed checkpoint into GPT2Model. */
static void test_gpt2(void) {
    brg_gpt2_config c;
    brg_gpt2_config_default(&c);
    c.n_layer = 1, c.n_head = 2, c.n_embd = 8, c.n_positions = 8, c.vocab_size = 17, c.initializer_range = 0.3f;
    c.task = BRG_GPT2_BASE;
    brg_model *base = NULL, *cls = NULL;
    CHECK_OK(brg_gpt2_create(&c, &base));
    c.task = BRG_GPT2_SEQUENCE_CLASSIFICATION, c.num_labels = 3, c.pad_token_id = 16;
    CHECK_OK(brg_gpt2_create(&c, &cls));
    if (!base || !cls) return;
    brg_model_init_weights(base, 1), brg_model_init_weights(cls, 2);
    CHECK(strcmp(base->params[0].name, "wte.weight") == 0 && brg_model_find_param(cls, "score.weight") >= 0);
    tensor_list l = params_of(base);
    char dir[1024];
    scratch(dir, sizeof dir, "gpt2_base_in_cls");
    write_folder(dir, cls, &l);
    brg_model *m = NULL;
    CHECK_OK(brg_model_load(dir, &m));
    if (m) {
        CHECK(strcmp(m->ops->architecture, "GPT2ForSequenceClassification") == 0);
        CHECK(same_param(m, "transformer.h.0.mlp.c_fc.weight", base, "h.0.mlp.c_fc.weight", 0));
        CHECK(!all_zero(brg_model_param(m, "score.weight")));
    }
    brg_model_destroy(m);
    m = NULL;
    l = params_of(cls);
    scratch(dir, sizeof dir, "gpt2_cls_in_base");
    write_folder(dir, base, &l);
    CHECK_OK(brg_model_load(dir, &m));
    if (m) CHECK(same_param(m, "ln_f.weight", cls, "transformer.ln_f.weight", 0));
    brg_model_destroy(m);
    /* the head's config (task, labels, pad token) survives save and load */
    m = NULL;
    scratch(dir, sizeof dir, "gpt2_cls_saved");
    CHECK_OK(brg_model_save(cls, dir));
    CHECK_OK(brg_model_load(dir, &m));
    if (m) {
        const brg_gpt2_config *got = m->config;
        CHECK(got->task == BRG_GPT2_SEQUENCE_CLASSIFICATION && got->num_labels == 3 && got->pad_token_id == 16);
        CHECK(same_param(m, "score.weight", cls, "score.weight", 0));
    }
    brg_model_destroy(m);
    brg_model_destroy(base), brg_model_destroy(cls);
}

int main(void) {
    brg_arena *a = NULL;
    CHECK_OK(brg_arena_create("host", 0, &a));
    if (!a) return test_finish();
    test_base_into_heads();
    test_head_into_base(a);
    test_half_weights(a);
    test_bad_checkpoints(a);
    test_gpt2();
    brg_arena_destroy(a);
    return test_finish();
}
