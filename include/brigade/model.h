/* Models: a list of parameters named as in transformers' state dict, and a list of blocks (the
 * unit of placement: embeddings, layer 0..L-1, head). Architectures plug in through
 * brg_model_ops. */
#ifndef BRIGADE_MODEL_H
#define BRIGADE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "brigade/arena.h"
#include "brigade/checkpoint.h"
#include "brigade/safetensors.h"
#include "brigade/tape.h"
#include "brigade/tensor.h"
#include "brigade/tensor_map.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BRG_NAME_MAX 128

typedef struct brg_checkpoint brg_checkpoint;

typedef enum brg_init_kind {
    BRG_INIT_NORMAL = 0, /* N(0, std) */
    BRG_INIT_ZEROS,
    BRG_INIT_ONES,
} brg_init_kind;

typedef struct brg_param {
    char name[BRG_NAME_MAX]; /* transformers' state-dict name */
    brg_tensor *tensor;      /* F32 value with a persistent gradient buffer */
    int block;               /* the block that owns it */
    brg_init_kind init;
    float init_std;
    bool no_decay; /* biases and LayerNorm weights: Trainer skips weight decay for them */
} brg_param;

/* A second name for a parameter that is stored once (a tied LM head). */
typedef struct brg_param_alias {
    char name[BRG_NAME_MAX];
    int param;
    int block; /* the block that reads the parameter under this name */
} brg_param_alias;

typedef enum brg_block_kind { BRG_BLOCK_EMBEDDINGS = 0, BRG_BLOCK_LAYER, BRG_BLOCK_HEAD } brg_block_kind;

typedef struct brg_block {
    char name[48]; /* "embeddings", "h.0", ..., "head" */
    brg_block_kind kind;
    int layer; /* layer index for BRG_BLOCK_LAYER, else -1 */
} brg_block;

/* What flows through the blocks of one micro-batch. `inputs` come from the host to every stage,
 * named as the model declares them (brg_model_ops.inputs); `carried` is what travels from stage
 * to stage (brg_model_ops.carried: "hidden", T5's "encoder_hidden"), with its gradients
 * travelling back. */
typedef struct brg_bundle {
    brg_tensor_map inputs;
    brg_tensor_map carried;
    brg_tensor *logits;         /* set by the head */
    brg_tensor *loss;           /* set by the head when targets are given */
    double loss_denominator;    /* counted items of the whole global batch for the first loss; 0: this batch's own */
    double extra_loss_denominator; /* the same for a head's second loss (end_positions, next_sentence_label) */
    bool training;              /* dropout on */
    uint64_t seed;              /* dropout key of this micro-batch */
} brg_bundle;

/* The bundle's input called `name` (NULL when the batch has none). */
static inline brg_tensor *brg_bundle_input(const brg_bundle *b, const char *name) {
    return brg_tensor_map_get(&b->inputs, name);
}
/* The carried tensor called `name` (NULL when none). */
static inline brg_tensor *brg_bundle_carried(const brg_bundle *b, const char *name) {
    return brg_tensor_map_get(&b->carried, name);
}
/* Hands `t` on under `name` (a name of brg_model_ops.carried). */
static inline brg_status brg_bundle_carry(brg_bundle *b, const char *name, brg_tensor *t) {
    return brg_tensor_map_put(&b->carried, name, t);
}

/* How an input is checked and stored (brg_inputs_load, the datasets, the pipelines). Ids are
 * range-checked while still 64-bit; every input's first dimension is the batch's. */
typedef enum brg_input_kind {
    BRG_INPUT_TOKENS = 1, /* token ids in [0, vocab_size), stored I32: [B, T] ([B, num_choices, T] for
                           * choice heads) */
    BRG_INPUT_TYPE_IDS,   /* integers >= 0, stored I32, shaped as `like` */
    BRG_INPUT_MASK,       /* 0 or 1, stored F32, shaped as `like` */
    BRG_INPUT_PIXELS,     /* floats [B, C, H, W], stored F32 */
    BRG_INPUT_LABELS,     /* targets: integers >= 0 (-100 ignored), stored I32, or floats, stored F32 */
    BRG_INPUT_CLASSES,    /* [B] integers in [0, classes) or -100, stored I32 */
    BRG_INPUT_POSITIONS,  /* [B] any integers (the head clamps them), stored I32 */
    BRG_INPUT_FLOATS,     /* floats [B, ...] of any rank (audio features, extra embeddings), stored F32 */
} brg_input_kind;

typedef struct brg_input_decl {
    const char *name;    /* transformers' keyword name */
    brg_input_kind kind;
    const char *like;    /* TYPE_IDS and MASK: the input whose shape this one has */
    const char *needs;   /* an input that must be given with this one, or NULL */
    int64_t classes;     /* CLASSES: how many */
    bool target;         /* a loss target: a batch that has one has a loss */
} brg_input_decl;

typedef struct brg_model brg_model;

/* Counted loss items of a batch: for its first target (labels, or question answering's
 * start_positions), and for a head's second one (end_positions, next_sentence_label; 0 otherwise). */
typedef struct brg_loss_items {
    double labels, extra;
} brg_loss_items;

typedef struct brg_model_ops {
    const char *architecture; /* config.json architectures[0], e.g. "GPT2LMHeadModel" */
    brg_status (*forward_block)(brg_model *model, int block, brg_tape *tape, brg_bundle *bundle);
    /* Writes config.json into dir. */
    brg_status (*save_config)(const brg_model *model, const char *dir);
    void (*free_config)(void *config);
    /* How many labels of a batch count towards its loss (e.g. GPT-2 shifts labels by one; a
     * question-answering head ignores positions past the sequence): the denominators that make
     * micro-batches' loss shares add up to the batch's mean. */
    brg_loss_items (*count_loss_items)(const brg_model *model, const brg_tensor_map *batch);
    /* The forward keywords the model takes, in order, ended by an entry with a NULL name; every
     * batch has the first (input_ids or pixel_values), whose first dimension is the batch and
     * (for token ids) whose last is bounded by max_positions. brigade forward rejects any other
     * tensor. NULL: input_ids, attention_mask, labels. Adding an input is a line here and the
     * code of the blocks that read it. */
    const brg_input_decl *inputs;
    /* What a pipeline stage hands the next (NULL-terminated); the executor sends these and their
     * gradients back. NULL: "hidden" alone. */
    const char *const *carried;
    /* Causal LMs train on their inputs: labels default to input_ids (-100 where masked), as
     * transformers' DataCollatorForLanguageModeling(mlm=False) makes them. */
    bool labels_from_inputs;
    /* The loss is a mean cross-entropy over tokens (language models, masked or causal, and
     * seq2seq): the trainer reports its perplexity, exp(loss). */
    bool token_loss;
    /* Heads whose logits' last dimension holds several named outputs (question answering:
     * start_logits, end_logits), NULL-terminated; NULL: one output called "logits". */
    const char *const *logits_names;
    /* Models whose forward returns several tensors of different shapes (base models:
     * last_hidden_state and pooler_output; pretraining heads) pack them row by row into the
     * logits tensor ([B, ...], so pipelines move and gather it as any logits); this unpacks up
     * to `max` named outputs for a batch of inputs `batch` into out[0..*n). NULL: logits_names. */
    brg_status (*outputs)(const brg_model *model, const brg_tensor_map *batch, const brg_tensor *logits,
                          brg_arena *arena, brg_named_tensor *out, int max, int *n);
    /* Multiple-choice heads: input_ids, attention_mask and token_type_ids are [B, num_choices, T]
     * (labels [B]); every other model takes [B, T]. */
    bool choices;
} brg_model_ops;

struct brg_model {
    const brg_model_ops *ops;
    void *config; /* architecture-specific */
    brg_arena *arena; /* parameters and their gradients */
    brg_param *params;
    int n_params;
    brg_param_alias *aliases;
    int n_aliases;
    brg_block *blocks;
    int n_blocks;
    int64_t vocab_size;
    int64_t max_positions;
};

/* Building (for architecture code). */
brg_status brg_model_create(const brg_model_ops *ops, void *config, brg_model **out);
brg_status brg_model_add_block(brg_model *m, const char *name, brg_block_kind kind, int layer);
/* Parameters a block reads: those it owns and those it reads through an alias. */
bool brg_model_block_uses(const brg_model *m, int block, int param);

/* Adds a parameter owned by the last added block; returns its index in *index (may be NULL). */
brg_status brg_model_add_param(brg_model *m, const char *name, int ndim, const int64_t *shape, brg_init_kind init,
                               float init_std, bool no_decay, int *index);
brg_status brg_model_add_alias(brg_model *m, const char *name, int param);
void brg_model_destroy(brg_model *m);

/* Index of the parameter called `name` (aliases included), or -1. */
int brg_model_find_param(const brg_model *m, const char *name);
brg_tensor *brg_model_param(const brg_model *m, const char *name);

/* Random initialisation as transformers' _init_weights does, from a seed. */
void brg_model_init_weights(brg_model *m, uint64_t seed);
/* Loads every parameter from a checkpoint (converting F16/BF16 to F32). Names may lack the
 * base-model prefix (GPT2Model checkpoints); `ignore_suffixes` lists buffers that are skipped.
 * Missing or unexpected tensors and shape mismatches are errors naming the tensor. */
brg_status brg_model_load_weights(brg_model *m, const brg_checkpoint *ckpt, const char *base_prefix,
                                  const char *const *ignore_suffixes);
/* How a model folder from the hub loads (transformers' from_pretrained): names with or without
 * base_prefix; tensors ending in one of ignore_suffixes (buffers such as
 * embeddings.position_ids, other heads' tensors transformers drops silently) skipped; any other
 * tensor that is not a parameter is reported on stderr and not used; a shape mismatch, or a
 * tensor stored both with and without the prefix, is an error naming it. Parameters missing from
 * the checkpoint are an error, except the task head's (the last block's parameters outside
 * base_prefix) when init_missing_head is set (a base-model checkpoint in a head model): those get transformers' initialisation from `seed` and are
 * reported on stderr as from_pretrained reports newly initialised weights. */
typedef struct brg_load_options {
    const char *base_prefix;
    const char *const *ignore_suffixes;
    bool init_missing_head;
    uint64_t seed;
    /* Tensors whose name contains one of these are skipped without a word as well (a model's
     * _keys_to_ignore_on_load_unexpected: T5EncoderModel drops a full checkpoint's "decoder"). */
    const char *const *ignore_containing;
} brg_load_options;
brg_status brg_model_load_pretrained(brg_model *m, const brg_checkpoint *ckpt, const char *source,
                                     const brg_load_options *opts);
/* brg_model_load_pretrained from the checkpoint in `dir`, then hands `m` to *out; on failure `m`
 * is destroyed and the error names `dir`. */
brg_status brg_model_load_dir_pretrained(brg_model *m, const char *dir, const brg_load_options *opts,
                                         brg_model **out);
/* Initialises the parameters whose which[i] is true, as brg_model_init_weights does. */
void brg_model_init_some(brg_model *m, uint64_t seed, const bool *which);

/* The model's named outputs for logits a forward of `batch` returned, as transformers names them:
 * ops->outputs, else one tensor per logits_names column, else "logits" itself (not copied). */
brg_status brg_model_outputs(const brg_model *m, const brg_tensor_map *batch, const brg_tensor *logits,
                             brg_arena *arena, brg_named_tensor *out, int max, int *n);
/* A new tensor of shape [B, shape...] holding elements [offset, offset + prod(shape)) of each row
 * of packed [B, ...] (for ops->outputs). */
brg_status brg_model_output_span(brg_arena *arena, const brg_tensor *packed, const char *name, int64_t offset,
                                 int ndim, const int64_t *shape, brg_tensor **out);

/* brg_model_load_weights from the checkpoint in `dir` (a safetensors file or shards), then hands
 * `m` to *out; on failure `m` is destroyed and the error names `dir`. */
brg_status brg_model_load_dir_weights(brg_model *m, const char *dir, const char *base_prefix,
                                      const char *const *ignore_suffixes, brg_model **out);
/* Writes dir/config.json and dir/model.safetensors (tied weights once), atomically. */
brg_status brg_model_save(const brg_model *m, const char *dir);
/* The same with the weights stored as `dtype` (F32, F16 or BF16, rounded to nearest even) and
 * config.json's torch_dtype saying so, as transformers saves a half model. */
brg_status brg_model_save_as(const brg_model *m, const char *dir, brg_dtype dtype);

/* The model's count for a batch (zeros when it has no targets). */
brg_loss_items brg_model_count_loss_items(const brg_model *m, const brg_tensor_map *batch);
/* The model's input declarations (brg_model_ops.inputs or the default), ended by a NULL name. */
const brg_input_decl *brg_model_inputs(const brg_model *m);
/* The declaration of input `name`, or NULL when the model does not take it. */
const brg_input_decl *brg_model_input(const brg_model *m, const char *name);
/* Whether the batch holds one of the model's loss targets. */
bool brg_model_has_targets(const brg_model *m, const brg_tensor_map *batch);
/* What a stage hands the next (brg_model_ops.carried or the default), NULL-terminated. */
const char *const *brg_model_carried(const brg_model *m);

/* Every parameter's gradient, allocated if no backward has made it yet, set to zero (host-side
 * training; the runtime's devices keep their own gradients). */
brg_status brg_model_zero_grad(brg_model *m);
int64_t brg_model_num_parameters(const brg_model *m);

/* Runs blocks [first, last] on the bundle. */
brg_status brg_model_forward_blocks(brg_model *m, int first, int last, brg_tape *tape, brg_bundle *bundle);
brg_status brg_model_forward(brg_model *m, brg_tape *tape, brg_bundle *bundle);

/* Loads a model folder (config.json + weights) or a hub id from the local cache. */
brg_status brg_model_load(const char *ref, brg_model **out);

#ifdef __cplusplus
}
#endif
#endif
