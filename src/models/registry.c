/* The model registry: config.json's architectures[0] (or model_type) -> the code that builds the
 * model, and loading a model through it. Placing the blocks on devices is parallelize.c, the
 * device-allocation log placement_log.c, the per-block cost table block_costs.c. */
#include "brigade/registry.h"

#include <cJSON.h>
#include <pthread.h>
#include <string.h>

#include "brigade/bert.h"
#include "brigade/gpt2.h"
#include "brigade/t5.h"
#include "brigade/vit.h"
#include "io/json.h"
#include "models/gpt2_internal.h"
#include "models/model_cost.h"

/* ---- GPT-2 ------------------------------------------------------------------------------- */

static brg_status gpt2_create_dir(const char *dir, brg_model **out) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    return gpt2_create_path(path, out);
}

/* GPT-2's block costs: gpt2_cost.c. */

static const brg_model_arch gpt2_arch = {
    .architecture = "GPT2LMHeadModel",
    .model_type = "gpt2",
    .load_dir = brg_gpt2_load_dir,
    .create_dir = gpt2_create_dir,
    .block_cost = gpt2_block_cost,
    /* upstream's PipelinedGPT2LMHeadModel wording and alignment */
    .labels = {{"Token Embedding     ", "Position Embedding  ", NULL}, "Layer", "            ",
               "Head                ", NULL, NULL, NULL, NULL},
};

/* The GPT-2 heads beyond the LM head: the same blocks and costs. */
#define GPT2_ARCH(name, head_label)                                                                               \
    {.architecture = name, .model_type = NULL, .load_dir = brg_gpt2_load_dir, .create_dir = gpt2_create_dir,      \
     .block_cost = gpt2_block_cost,                                                                               \
     .labels = {{"Token Embedding     ", "Position Embedding  ", NULL}, "Layer", "            ",                  \
                head_label, NULL, NULL, NULL, NULL}}
static const brg_model_arch gpt2_heads[] = {
    GPT2_ARCH("GPT2Model", "ln_f                "),
    GPT2_ARCH("GPT2ForSequenceClassification", "Score               "),
    GPT2_ARCH("GPT2ForTokenClassification", "Classifier          "),
};

/* ---- other built-in architectures (their labels follow upstream's Pipelined* classes) ----- */

static const brg_model_arch other_builtins[] = {
    {.architecture = "BertForMaskedLM", .model_type = "bert", .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "Classifier ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertForSequenceClassification", .model_type = "bert", .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Classifier Output ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertForQuestionAnswering", .model_type = "bert", .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding ", NULL, NULL}, "Encoder", " ", "QA Outputs ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertModel", .model_type = NULL, .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Pooler ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertForTokenClassification", .model_type = NULL, .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Classifier Output ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertForMultipleChoice", .model_type = NULL, .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Classifier Output ", NULL, NULL, NULL, NULL}},
    {.architecture = "BertForPreTraining", .model_type = NULL, .load_dir = brg_bert_load_dir,
     .create_dir = brg_bert_create_dir, .block_cost = bert_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "Pretraining Heads ", NULL, NULL, NULL, NULL}},
    {.architecture = "ViTForImageClassification", .model_type = "vit", .load_dir = brg_vit_load_dir,
     .create_dir = brg_vit_create_dir, .block_cost = vit_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "Head       ", NULL, NULL,
                "---------- Device Allocation -----------", "---------------------------------------"}},
    {.architecture = "T5ForConditionalGeneration", .model_type = "t5", .load_dir = brg_t5_load_dir,
     .create_dir = brg_t5_create_dir, .block_cost = brg_t5_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "LM Head Output ", "Decoder", "decoder.", NULL, NULL}},
    /* the base models: ViT's and T5's encoder alone */
    {.architecture = "ViTModel", .model_type = NULL, .load_dir = brg_vit_load_dir, .create_dir = brg_vit_create_dir,
     .block_cost = vit_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "Pooler     ", NULL, NULL,
                "---------- Device Allocation -----------", "---------------------------------------"}},
    {.architecture = "T5EncoderModel", .model_type = NULL, .load_dir = brg_t5_load_dir,
     .create_dir = brg_t5_create_dir, .block_cost = brg_t5_block_cost,
     .labels = {{"Embedding  ", NULL, NULL}, "Encoder", " ", "Encoder Output ", NULL, NULL, NULL, NULL}},
};

/* ---- the table ---------------------------------------------------------------------------- */

#define MAX_ARCHS 64

static brg_model_arch table[MAX_ARCHS];
static int n_archs = -1; /* -1 until the built-ins are in */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static void ensure_builtins(void) {
    if (n_archs >= 0) return;
    table[0] = gpt2_arch;
    n_archs = 1;
    for (size_t i = 0; i < sizeof other_builtins / sizeof other_builtins[0]; i++) table[n_archs++] = other_builtins[i];
    for (size_t i = 0; i < sizeof gpt2_heads / sizeof gpt2_heads[0]; i++) table[n_archs++] = gpt2_heads[i];
}

brg_status brg_register_model(const brg_model_arch *arch) {
    if (!arch || !arch->architecture || !arch->architecture[0] || !arch->load_dir)
        return brg_error(BRG_ERR_INVALID_ARG, "brg_register_model: an architecture needs a name and load_dir");
    pthread_mutex_lock(&table_lock);
    ensure_builtins();
    int slot = n_archs;
    for (int i = 0; i < n_archs; i++)
        if (strcmp(table[i].architecture, arch->architecture) == 0) slot = i;
    brg_status st = BRG_OK;
    if (slot == MAX_ARCHS) st = brg_error(BRG_ERR_INVALID_ARG, "cannot register %s: the registry holds %d "
                                          "architectures at most", arch->architecture, MAX_ARCHS);
    else table[slot] = *arch;
    if (st == BRG_OK && slot == n_archs) n_archs++;
    pthread_mutex_unlock(&table_lock);
    return st;
}

const brg_model_arch *brg_model_arch_find(const char *architecture, const char *model_type) {
    const brg_model_arch *found = NULL;
    pthread_mutex_lock(&table_lock);
    ensure_builtins();
    bool by_arch = architecture && architecture[0];
    for (int i = 0; i < n_archs && !found; i++) {
        const brg_model_arch *a = &table[i];
        if (by_arch ? strcmp(a->architecture, architecture) == 0
                    : model_type && a->model_type && strcmp(a->model_type, model_type) == 0)
            found = a;
    }
    pthread_mutex_unlock(&table_lock);
    return found;
}

const brg_model_arch *brg_model_arch_of(const brg_model *m) {
    return m && m->ops && m->ops->architecture ? brg_model_arch_find(m->ops->architecture, NULL) : NULL;
}

const char *brg_model_arch_names(char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    pthread_mutex_lock(&table_lock);
    ensure_builtins();
    for (int i = 0; i < n_archs && at < len; i++) {
        int n = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", table[i].architecture);
        at += n > 0 ? (size_t)n : 0;
    }
    pthread_mutex_unlock(&table_lock);
    return buf;
}

/* ---- loading ------------------------------------------------------------------------------ */

static brg_status architecture_of(const char *config_path, char *arch, size_t arch_len, char *type, size_t type_len) {
    cJSON *j;
    BRG_TRY(brg_json_load_file(config_path, 16u << 20, &j));
    arch[0] = type[0] = '\0';
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(j, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    if (cJSON_IsString(first)) snprintf(arch, arch_len, "%s", first->valuestring);
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
    if (cJSON_IsString(mt)) snprintf(type, type_len, "%s", mt->valuestring);
    cJSON_Delete(j);
    if (!arch[0] && !type[0])
        return brg_error(BRG_ERR_FORMAT, "%s: neither 'architectures' nor 'model_type' says what model this is",
                         config_path);
    return BRG_OK;
}

static brg_status find_arch(const char *ref, char *dir, size_t dir_len, const brg_model_arch **out) {
    char path[4200];
    BRG_TRY(brg_hf_resolve(ref, dir, dir_len));
    snprintf(path, sizeof path, "%s/config.json", dir);
    char arch[128], type[64], names[512];
    BRG_TRY(architecture_of(path, arch, sizeof arch, type, sizeof type));
    *out = brg_model_arch_find(arch, type);
    if (*out) return BRG_OK;
    return brg_error(BRG_ERR_UNSUPPORTED, "%s: architecture '%s' (model_type '%s') is not supported; supported: %s",
                     path, arch[0] ? arch : "?", type[0] ? type : "?", brg_model_arch_names(names, sizeof names));
}

brg_status brg_model_load(const char *ref, brg_model **out) {
    char dir[4096];
    const brg_model_arch *a;
    BRG_TRY(find_arch(ref, dir, sizeof dir, &a));
    return a->load_dir(dir, out);
}

brg_status brg_model_create_from_config(const char *ref, brg_model **out) {
    char dir[4096];
    const brg_model_arch *a;
    BRG_TRY(find_arch(ref, dir, sizeof dir, &a));
    return a->create_dir ? a->create_dir(dir, out) : a->load_dir(dir, out);
}
