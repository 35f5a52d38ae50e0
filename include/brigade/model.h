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

/* What flows through the blocks of one micro-batch. Inputs come from the host to every stage;
 * the carried tensors (hidden, encoder_hidden) are what travels from stage to stage, with their
 * gradients travelling back. */
typedef struct brg_bundle {
    brg_tensor *input_ids;      /* I32 [B, T] */
    brg_tensor *attention_mask; /* F32 [B, T] (1 attend, 0 padding) or NULL */
    brg_tensor *labels;         /* I32 [B, T] (or [B] for sequence classification) or NULL */
    brg_tensor *token_type_ids; /* I32 [B, T] or NULL (BERT) */
    brg_tensor *pixel_values;   /* F32 [B, C, H, W] or NULL (ViT) */
    brg_tensor *decoder_input_ids;      /* I32 [B, Td] or NULL (T5) */
    brg_tensor *decoder_attention_mask; /* F32 [B, Td] or NULL (T5) */
    brg_tensor *extra_labels;   /* a second target, e.g. end_positions for question answering */
    brg_tensor *hidden;         /* carried: F32 [B, T, C] between blocks */
    brg_tensor *encoder_hidden; /* carried: the encoder's output, for cross-attention (T5) */
    brg_tensor *logits;         /* set by the head */
    brg_tensor *loss;           /* set by the head when labels are given */
    double loss_denominator;    /* counted labels of the whole global batch; 0: this batch's own */
    double extra_loss_denominator; /* the same for extra_labels */
    bool training;              /* dropout on */
    uint64_t seed;              /* dropout key of this micro-batch */
} brg_bundle;

typedef struct brg_model brg_model;

/* Counted loss items of a batch: for its labels, and for its extra_labels where a head has a
 * second loss (question answering's end positions; 0 otherwise). */
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
    brg_loss_items (*count_loss_items)(const brg_model *model, const brg_bundle *batch);
    /* The forward keyword names the model takes (NULL-terminated), e.g. input_ids,
     * attention_mask, labels; brigade forward rejects any other tensor. */
    const char *const *inputs;
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
    brg_status (*outputs)(const brg_model *model, const brg_bundle *batch, const brg_tensor *logits,
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
brg_status brg_model_outputs(const brg_model *m, const brg_bundle *batch, const brg_tensor *logits, brg_arena *arena,
                             brg_named_tensor *out, int max, int *n);
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

/* The model's count for a batch (zeros when it has no labels). */
brg_loss_items brg_model_count_loss_items(const brg_model *m, const brg_bundle *batch);

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
