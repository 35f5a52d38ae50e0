/* brigade init: a random-init model folder that transformers loads, for any architecture the
 * registry knows. The sizes become a config.json in the architecture's own keys (GPT-2's n_embd,
 * BERT's hidden_size, T5's d_model, ...); the registry builds the model from it as it builds any
 * folder's (brg_model_create_from_config), its weights are initialised as transformers does, and
 * the folder is saved by the model itself (its config.json in full, then the weights). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "brigade/brigade.h"
#include "commands.h"

typedef struct init_flags {
    const char *arch, *output, *activation;
    int64_t layers, hidden, heads, vocab, positions, seed, inner, labels, image_size, patch_size, channels;
    bool untied;
} init_flags;

static void add_int(cJSON *j, const char *key, int64_t v) { cJSON_AddNumberToObject(j, key, (double)v); }

static int64_t inner_of(const init_flags *f) { return f->inner > 0 ? f->inner : 4 * f->hidden; }

static brg_status need(int64_t v, const char *flag, const char *arch) {
    if (v > 0) return BRG_OK;
    return brg_error(BRG_ERR_INVALID_ARG, "--arch %s needs --%s (a positive number)", arch, flag);
}

/* ---- the sizes in each model type's config.json keys ---- */

static brg_status gpt2_keys(cJSON *j, const init_flags *f, const char *arch) {
    BRG_TRY(need(f->vocab, "vocab", arch));
    BRG_TRY(need(f->positions, "positions", arch));
    add_int(j, "n_layer", f->layers);
    add_int(j, "n_embd", f->hidden);
    add_int(j, "n_head", f->heads);
    add_int(j, "vocab_size", f->vocab);
    add_int(j, "n_positions", f->positions);
    if (f->inner > 0) add_int(j, "n_inner", f->inner);
    cJSON_AddStringToObject(j, "activation_function", f->activation ? f->activation : "gelu_new");
    add_int(j, "bos_token_id", f->vocab - 1);
    add_int(j, "eos_token_id", f->vocab - 1);
    /* A sequence-classification head reads each row at its last token that is not padding: with a
     * pad token it takes batches of more than one row (the usual choice is the end-of-text token). */
    if (strcmp(arch, "GPT2ForSequenceClassification") == 0) add_int(j, "pad_token_id", f->vocab - 1);
    return BRG_OK;
}

static brg_status bert_keys(cJSON *j, const init_flags *f, const char *arch) {
    BRG_TRY(need(f->vocab, "vocab", arch));
    BRG_TRY(need(f->positions, "positions", arch));
    add_int(j, "num_hidden_layers", f->layers);
    add_int(j, "hidden_size", f->hidden);
    add_int(j, "num_attention_heads", f->heads);
    add_int(j, "intermediate_size", inner_of(f));
    add_int(j, "vocab_size", f->vocab);
    add_int(j, "max_position_embeddings", f->positions);
    cJSON_AddStringToObject(j, "hidden_act", f->activation ? f->activation : "gelu");
    add_int(j, "pad_token_id", 0);
    return BRG_OK;
}

static brg_status vit_keys(cJSON *j, const init_flags *f, const char *arch) {
    BRG_TRY(need(f->image_size, "image-size", arch));
    BRG_TRY(need(f->patch_size, "patch-size", arch));
    BRG_TRY(need(f->channels, "channels", arch));
    add_int(j, "num_hidden_layers", f->layers);
    add_int(j, "hidden_size", f->hidden);
    add_int(j, "num_attention_heads", f->heads);
    add_int(j, "intermediate_size", inner_of(f));
    add_int(j, "image_size", f->image_size);
    add_int(j, "patch_size", f->patch_size);
    add_int(j, "num_channels", f->channels);
    cJSON_AddStringToObject(j, "hidden_act", f->activation ? f->activation : "gelu");
    return BRG_OK;
}

static brg_status t5_keys(cJSON *j, const init_flags *f, const char *arch) {
    BRG_TRY(need(f->vocab, "vocab", arch));
    if (f->hidden % f->heads != 0)
        return brg_error(BRG_ERR_INVALID_ARG, "--hidden %lld must be divisible by --heads %lld (d_kv = hidden / heads)",
                         (long long)f->hidden, (long long)f->heads);
    add_int(j, "num_layers", f->layers);
    add_int(j, "num_decoder_layers", f->layers);
    add_int(j, "d_model", f->hidden);
    add_int(j, "num_heads", f->heads);
    add_int(j, "d_kv", f->hidden / f->heads);
    add_int(j, "d_ff", inner_of(f));
    add_int(j, "vocab_size", f->vocab);
    if (f->positions > 0) add_int(j, "n_positions", f->positions);
    cJSON_AddStringToObject(j, "feed_forward_proj", f->activation ? f->activation : "relu");
    add_int(j, "pad_token_id", 0);
    add_int(j, "decoder_start_token_id", 0);
    add_int(j, "eos_token_id", 1);
    return BRG_OK;
}

typedef struct family {
    const char *model_type;
    brg_status (*keys)(cJSON *j, const init_flags *f, const char *arch);
    void (*init_weights)(brg_model *m, uint64_t seed);
    bool has_vocab; /* the model reads token ids (the summary line says how many) */
} family;

static const family families[] = {
    {"gpt2", gpt2_keys, brg_model_init_weights, true},
    {"bert", bert_keys, brg_bert_init_weights, true},
    {"vit", vit_keys, brg_model_init_weights, false},
    {"t5", t5_keys, brg_model_init_weights, true},
};

/* The model type of a registered architecture: its own, else that of the registered entry that
 * loads folders with the same code (GPT2Model is loaded as GPT2LMHeadModel is). */
static const char *model_type_of(const brg_model_arch *a) {
    if (a->model_type) return a->model_type;
    char names[2048];
    brg_model_arch_names(names, sizeof names);
    for (char *save = NULL, *name = strtok_r(names, ", ", &save); name; name = strtok_r(NULL, ", ", &save)) {
        const brg_model_arch *other = brg_model_arch_find(name, NULL);
        if (other && other->model_type && other->load_dir == a->load_dir) return other->model_type;
    }
    return NULL;
}

static brg_status find_family(const char *arch, const brg_model_arch **entry, const family **fam) {
    char names[2048];
    *entry = brg_model_arch_find(arch, NULL);
    if (!*entry) *entry = brg_model_arch_find(NULL, arch); /* a model type: its first architecture */
    if (!*entry)
        return brg_error(BRG_ERR_INVALID_ARG, "--arch %s is not a registered architecture or model type (%s)", arch,
                         brg_model_arch_names(names, sizeof names));
    const char *type = model_type_of(*entry);
    for (size_t i = 0; type && i < sizeof families / sizeof families[0]; i++)
        if (strcmp(type, families[i].model_type) == 0) {
            *fam = &families[i];
            return BRG_OK;
        }
    return brg_error(BRG_ERR_UNSUPPORTED, "--arch %s: brigade init does not know the config.json keys of model type %s",
                     (*entry)->architecture, type ? type : "(none)");
}

static brg_status write_config(const char *dir, const brg_model_arch *entry, const family *fam, const init_flags *f) {
    cJSON *j = cJSON_CreateObject(), *archs = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(archs, cJSON_CreateString(entry->architecture));
    cJSON_AddStringToObject(j, "model_type", fam->model_type);
    cJSON_AddBoolToObject(j, "tie_word_embeddings", !f->untied);
    if (f->labels > 0) add_int(j, "num_labels", f->labels);
    brg_status st = fam->keys(j, f, entry->architecture);
    char *text = st == BRG_OK ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (st != BRG_OK) return st;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *out = text ? fopen(path, "w") : NULL;
    bool written = out && fputs(text, out) >= 0;
    if (out && fclose(out) != 0) written = false;
    free(text);
    return written ? BRG_OK : brg_error(BRG_ERR_IO, "cannot write the configuration in %s", dir);
}

/* The model the registry builds from the sizes, through a config.json in a scratch folder; its
 * messages name the flags' model rather than the scratch file. */
static brg_status create_model(const brg_model_arch *entry, const family *fam, const init_flags *f, brg_model **out) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/brigade-init-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return brg_error(BRG_ERR_IO, "cannot create a scratch folder in %s", tmp && *tmp ? tmp : "/tmp");
    brg_status st = write_config(dir, entry, fam, f);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (st == BRG_OK && (st = brg_model_create_from_config(dir, out)) != BRG_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", brg_last_error());
        const size_t n = strlen(path);
        const bool scratch = strncmp(msg, path, n) == 0 && strncmp(msg + n, ": ", 2) == 0;
        st = brg_error(st, "--arch %s: %s", entry->architecture, scratch ? msg + n + 2 : msg);
    }
    unlink(path);
    rmdir(dir);
    return st;
}

static int fail_usage(const char *msg) {
    fprintf(stderr, "brigade init: %s\n", msg);
    return 2;
}

int cmd_init(int argc, char **argv) {
    init_flags f = {.channels = 3};
    arg_spec specs[] = {
        {"arch", ARG_STRING, &f.arch, true,
         "a registered architecture (GPT2LMHeadModel, BertForMaskedLM, ViTForImageClassification, ...) or model type "
         "(gpt2, bert, vit, t5: its first architecture)", false},
        {"layers", ARG_INT, &f.layers, true, "number of transformer layers (T5: in the encoder and in the decoder)", false},
        {"hidden", ARG_INT, &f.hidden, true, "hidden size (n_embd, hidden_size, d_model)", false},
        {"heads", ARG_INT, &f.heads, true, "attention heads", false},
        {"vocab", ARG_INT, &f.vocab, false, "vocabulary size (every model that reads token ids)", false},
        {"positions", ARG_INT, &f.positions, false, "maximum sequence length (GPT-2, BERT; T5: optional)", false},
        {"seed", ARG_INT, &f.seed, false, "initialisation seed (default 0)", false},
        {"output", ARG_STRING, &f.output, true, "folder to write config.json and model.safetensors into", false},
        {"activation", ARG_STRING, &f.activation, false,
         "GPT-2: gelu_new (default), gelu, gelu_pytorch_tanh; BERT, ViT: hidden_act (default gelu); T5: "
         "feed_forward_proj (default relu)", false},
        {"inner", ARG_INT, &f.inner, false, "MLP width (default 4 x hidden)", false},
        {"untied", ARG_FLAG, &f.untied, false, "give the LM head its own weights", false},
        {"labels", ARG_INT, &f.labels, false, "classification heads: num_labels (default 2)", false},
        {"image-size", ARG_INT, &f.image_size, false, "ViT: image height and width", false},
        {"patch-size", ARG_INT, &f.patch_size, false, "ViT: patch height and width", false},
        {"channels", ARG_INT, &f.channels, false, "ViT: image channels (default 3)", false},
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("init", "Writes a random-init Hugging Face model folder (config.json + model.safetensors).", specs, n);
        return 0;
    }
    if (!args_parse("init", argc, argv, 2, specs, n)) return 2;
    if (f.seed < 0) return fail_usage("--seed must be non-negative");
    if (f.layers < 1 || f.hidden < 1 || f.heads < 1) return fail_usage("--layers, --hidden and --heads must be positive");

    const brg_model_arch *entry = NULL;
    const family *fam = NULL;
    brg_model *m = NULL;
    brg_status st = find_family(f.arch, &entry, &fam);
    if (st == BRG_OK) st = create_model(entry, fam, &f, &m);
    if (st != BRG_OK) return cli_fail("init");
    fam->init_weights(m, (uint64_t)f.seed);
    st = brg_model_save(m, f.output);
    if (st == BRG_OK) {
        printf("wrote %s: %s, %lld parameters, %lld layers, hidden %lld, %lld heads", f.output, m->ops->architecture,
               (long long)brg_model_num_parameters(m), (long long)f.layers, (long long)f.hidden, (long long)f.heads);
        if (fam->has_vocab) printf(", vocab %lld", (long long)f.vocab);
        printf("\n");
    }
    brg_model_destroy(m);
    return st == BRG_OK ? 0 : cli_fail("init");
}
