/* The model registry: config.json's architectures[0] (or model_type) -> the code that builds the
 * model; and placing a model's blocks on devices from an IPUConfig. */
#include "brigade/registry.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdlib.h>
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

/* ---- placement ---------------------------------------------------------------------------- */

static int count_layers(const brg_model *m) {
    int n = 0;
    for (int b = 0; b < m->n_blocks; b++) n += m->blocks[b].kind == BRG_BLOCK_LAYER;
    return n;
}

static brg_status place_blocks(const brg_model *m, brg_placement *p) {
    for (int b = 0; b < m->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        switch (blk->kind) {
        case BRG_BLOCK_EMBEDDINGS: p->block_device[b] = 0; break;
        case BRG_BLOCK_HEAD: p->block_device[b] = p->n_devices - 1; break;
        case BRG_BLOCK_LAYER:
            if (blk->layer < 0 || blk->layer >= p->n_layers)
                return brg_error(BRG_ERR_INTERNAL, "block %s has layer index %d of %d", blk->name, blk->layer,
                                 p->n_layers);
            p->block_device[b] = p->layer_device[blk->layer];
            break;
        }
    }
    return BRG_OK;
}

/* An IPU with no block would be a pipeline stage with nothing to run. */
static brg_status check_every_device_used(const brg_model *m, const brg_ipu_config *c, const brg_placement *p) {
    for (int d = 0; d < p->n_devices; d++) {
        bool used = false;
        for (int b = 0; b < m->n_blocks && !used; b++) used = p->block_device[b] == d;
        if (used) continue;
        brg_ipu_list counts;
        BRG_TRY(brg_ipu_config_expand_layers(c, p->n_layers, &counts));
        return brg_ipu_config_empty_ipu_error(c, &counts, p->n_layers, d);
    }
    return BRG_OK;
}

brg_status brg_model_parallelize(const brg_model *m, const brg_ipu_config *cfg, brg_ipu_mode mode,
                                 brg_placement *out) {
    if (cfg->execute_encoder_on_cpu_for_generation)
        return brg_error(BRG_ERR_UNSUPPORTED, "execute_encoder_on_cpu_for_generation=true is not supported");
    brg_ipu_config *c = malloc(sizeof *c);
    brg_placement p = {.mode = mode, .n_blocks = m->n_blocks, .n_layers = count_layers(m)};
    p.block_device = calloc((size_t)m->n_blocks + 1, sizeof *p.block_device);
    p.layer_device = calloc((size_t)p.n_layers + 1, sizeof *p.layer_device);
    brg_status st = c && p.block_device && p.layer_device ? BRG_OK : brg_error(BRG_ERR_OOM, "out of memory placing blocks");
    if (st == BRG_OK) {
        *c = *cfg;
        c->mode = mode;
        brg_ipu_view v;
        brg_ipu_config_view(c, mode, &v);
        p.n_devices = (int)v.ipus_per_replica;
        int count;
        st = brg_ipu_config_get_layer_ipu(c, p.n_layers, p.layer_device, p.n_layers, &count);
        if (st == BRG_OK && count != p.n_layers)
            st = brg_error(BRG_ERR_INTERNAL, "placed %d of %d layers", count, p.n_layers);
        if (st == BRG_OK) st = place_blocks(m, &p);
        if (st == BRG_OK) st = check_every_device_used(m, c, &p);
    }
    free(c);
    if (st != BRG_OK) brg_placement_free(&p);
    else *out = p;
    return st;
}

static void print_layer(FILE *out, const brg_alloc_labels *l, const brg_block *blk, int *n_decoder, int dev) {
    const char *label = l->layer;
    int index = blk->layer;
    if (l->decoder_layer && l->decoder_prefix && strncmp(blk->name, l->decoder_prefix, strlen(l->decoder_prefix)) == 0) {
        label = l->decoder_layer;
        index = (*n_decoder)++;
    }
    fprintf(out, "%s %-2d%s--> IPU %d\n", label, index, l->layer_gap ? l->layer_gap : " ", dev);
}

void brg_placement_print(FILE *out, const brg_model *m, const brg_placement *p) {
    static const brg_alloc_labels defaults = {{"Embedding ", NULL, NULL}, "Encoder", " ", "Head ", NULL, NULL, NULL, NULL};
    const brg_model_arch *a = brg_model_arch_of(m);
    const brg_alloc_labels *l = a && a->labels.layer ? &a->labels : &defaults;
    fprintf(out, "%s\n", l->header ? l->header : "-------------------- Device Allocation --------------------");
    int n_decoder = 0;
    for (int b = 0; b < m->n_blocks && b < p->n_blocks; b++) {
        const brg_block *blk = &m->blocks[b];
        int dev = p->block_device[b];
        if (blk->kind == BRG_BLOCK_EMBEDDINGS)
            for (int i = 0; i < 3 && l->embeddings[i]; i++) fprintf(out, "%s--> IPU %d\n", l->embeddings[i], dev);
        else if (blk->kind == BRG_BLOCK_LAYER)
            print_layer(out, l, blk, &n_decoder, dev);
        else
            fprintf(out, "%s--> IPU %d\n", l->head ? l->head : "Head ", dev);
    }
    fprintf(out, "%s\n", l->footer ? l->footer : "-----------------------------------------------------------");
}

brg_status brg_model_deparallelize(const brg_model *m, brg_named_tensor **out, size_t *n) {
    brg_named_tensor *t = malloc(((size_t)m->n_params + 1) * sizeof *t);
    if (!t) return brg_error(BRG_ERR_OOM, "out of memory listing %d parameters", m->n_params);
    for (int i = 0; i < m->n_params; i++) t[i] = (brg_named_tensor){m->params[i].name, m->params[i].tensor};
    *out = t;
    *n = (size_t)m->n_params;
    return BRG_OK;
}

brg_status brg_model_block_costs(const brg_model *m, int64_t batch, int64_t seq, brg_block_cost *out) {
    if (batch < 1 || seq < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "micro-batch size %lld and sequence length %lld must be >= 1",
                         (long long)batch, (long long)seq);
    const brg_model_arch *a = brg_model_arch_of(m);
    for (int b = 0; b < m->n_blocks; b++) {
        memset(&out[b], 0, sizeof out[b]);
        out[b].tied_owner = -1;
        if (a && a->block_cost) BRG_TRY(a->block_cost(m, b, batch, seq, &out[b]));
        out[b].layer = m->blocks[b].kind == BRG_BLOCK_LAYER ? m->blocks[b].layer : -1;
        out[b].params = 0;
    }
    for (int i = 0; i < m->n_params; i++) {
        brg_block_cost *c = &out[m->params[i].block];
        int64_t n = brg_tensor_numel(m->params[i].tensor);
        c->params += n;
        c->param_bytes += (int64_t)ops_cost_align((double)n * sizeof(float));
        c->param_tensors++;
    }
    /* Weights a block reads through an alias from another block (a tied LM head or decoder, a
     * shared position-bias table): a device without the owner holds a copy. */
    for (int b = 0; b < m->n_blocks; b++) out[b].tied_params = 0, out[b].tied_owner = -1;
    for (int i = 0; i < m->n_aliases; i++) {
        const brg_param_alias *al = &m->aliases[i];
        int owner = m->params[al->param].block;
        brg_block_cost *c = &out[al->block];
        if (owner == al->block || (c->tied_owner >= 0 && c->tied_owner != owner)) continue;
        c->tied_owner = owner;
        c->tied_params += brg_tensor_numel(m->params[al->param].tensor);
    }
    return BRG_OK;
}
