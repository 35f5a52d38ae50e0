/* IPUConfig: the ipu_config.json of optimum-graphcore, with its attributes, defaults, derived
 * values, validation rules, training/inference modes, string overrides and JSON form.
 *
 * A brg_ipu_config is a plain value (no pointers): copy it with `=`, no free needed. Every
 * attribute keeps optimum-graphcore's name; docs/config.md says what each one does in brigade.
 * Functions that fail leave a message (brg_last_error) naming the attribute and the value. */
#ifndef BRIGADE_IPU_CONFIG_H
#define BRIGADE_IPU_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brigade/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest per-IPU list (and largest ipus_per_replica) brigade accepts. */
#define BRG_IPU_LIST_MAX 256
/* Room for executable_cache_dir and for each parallelize_kwargs object (compact JSON). */
#define BRG_IPU_TEXT_MAX 4096
#define BRG_IPU_MAX_WARNINGS 8
#define BRG_IPU_WARNING_LEN 256

typedef enum brg_ipu_mode { BRG_IPU_MODE_TRAINING = 0, BRG_IPU_MODE_INFERENCE } brg_ipu_mode;

typedef enum brg_output_mode {
    BRG_OUTPUT_MODE_ALL = 0, /* a result for every micro-batch */
    BRG_OUTPUT_MODE_SUM,     /* the sum over micro-batches */
    BRG_OUTPUT_MODE_FINAL,   /* the last micro-batch's result */
    BRG_OUTPUT_MODE_DEFAULT, /* "all" for inference, "final" for training */
} brg_output_mode;

/* A list of integers (layers_per_ipu, serialized_*_splits_per_ipu). `present` is false for a
 * null (Python None) value; only the optional split lists can be null. */
typedef struct brg_ipu_list {
    bool present;
    int n;
    int v[BRG_IPU_LIST_MAX];
} brg_ipu_list;

/* matmul_proportion: one float for every IPU (is_list false, n == 1) or one per IPU. */
typedef struct brg_ipu_proportion {
    bool is_list;
    int n;
    double v[BRG_IPU_LIST_MAX];
} brg_ipu_proportion;

typedef struct brg_ipu_config {
    int64_t replication_factor;
    int64_t inference_replication_factor;
    int64_t gradient_accumulation_steps;
    brg_ipu_list layers_per_ipu;           /* -1 entries are wildcards */
    brg_ipu_list inference_layers_per_ipu;
    int64_t ipus_per_replica;
    int64_t inference_ipus_per_replica;
    bool optimizer_state_offchip;
    bool replicated_tensor_sharding;
    brg_ipu_proportion matmul_proportion;
    brg_ipu_proportion inference_matmul_proportion;
    bool enable_half_partials;
    /* Serialization factors: 0 stands for null, which is only left when the matching
     * serialized_*_splits_per_ipu list is given (a valid factor is >= 1). */
    int64_t embedding_serialization_factor;
    int64_t inference_embedding_serialization_factor;
    brg_ipu_list serialized_embedding_splits_per_ipu;
    brg_ipu_list inference_serialized_embedding_splits_per_ipu;
    int64_t projection_serialization_factor;
    int64_t inference_projection_serialization_factor;
    brg_ipu_list serialized_projection_splits_per_ipu;
    brg_ipu_list inference_serialized_projection_splits_per_ipu;
    bool recompute_checkpoint_every_layer;
    int64_t device_iterations;
    int64_t inference_device_iterations;
    brg_output_mode output_mode;
    bool has_seed; /* false: null */
    int64_t seed;
    bool auto_loss_scaling;
    char executable_cache_dir[BRG_IPU_TEXT_MAX];
    bool explicit_ir_inference;
    char parallelize_kwargs[BRG_IPU_TEXT_MAX]; /* a JSON object, compact ("{}" by default) */
    char inference_parallelize_kwargs[BRG_IPU_TEXT_MAX];
    bool execute_encoder_on_cpu_for_generation; /* legacy; true is refused when a model is placed */

    /* Not saved: the mode the managed (training/inference) attributes resolve to. */
    brg_ipu_mode mode;
    /* Not saved: warnings raised while loading (deprecated keys, unused settings). The library
     * never prints them; the CLI shows them on stderr as "warning: ...". */
    int n_warnings;
    char warnings[BRG_IPU_MAX_WARNINGS][BRG_IPU_WARNING_LEN];
} brg_ipu_config;

/* The attribute names, in optimum-graphcore's __init__ order (NULL-terminated). */
extern const char *const brg_ipu_config_attributes[];

/* IPUConfig(): every default, derived values filled in, training mode. */
void brg_ipu_config_init(brg_ipu_config *cfg);

/* IPUConfig(**d) for the JSON object `json` (`ctx` names it in messages): attributes are set in
 * upstream's order with its fallbacks, every value is type-checked and validated, keys upstream
 * accepts and drops (transformers_version, optimum_version, ...) are ignored, deprecated keys
 * add a warning, any other key is an error naming it, then the cross-attribute checks run. */
brg_status brg_ipu_config_from_json(const char *json, const char *ctx, brg_ipu_config *cfg);

/* Loads `ref`: an ipu_config.json file, a folder holding one, or a hub id (optionally
 * "id@revision") found in the local Hugging Face cache (see brg_hf_resolve). */
brg_status brg_ipu_config_load(const char *ref, brg_ipu_config *cfg);

/* Sets one attribute from a JSON value ("[1, 2]", "0.3", "true", "\"all\"", "null"), with the
 * type check and the per-attribute validators that upstream's __setattr__ runs. The
 * cross-attribute checks are not re-run (call brg_ipu_config_validate). On failure `cfg` is
 * unchanged. */
brg_status brg_ipu_config_set(brg_ipu_config *cfg, const char *name, const char *json_value);

/* The cross-attribute checks of both modes (list lengths against ipus_per_replica, factor or
 * splits), defaulting a serialization factor to 1 when neither it nor its splits are given. */
brg_status brg_ipu_config_validate(brg_ipu_config *cfg);

/* update_from_string: "k1=v1,k2=[1 2 3],k3=true". The current value's type decides how a value
 * is read (bool: true/1/y/yes or false/0/n/no; int; float; list as "[a b c]"; string as is);
 * null and object attributes cannot be overridden. Unlike upstream, the cross-attribute checks
 * run again at the end, so an override cannot leave an inconsistent config. On failure `cfg`
 * is unchanged. */
brg_status brg_ipu_config_update_from_string(brg_ipu_config *cfg, const char *overrides);

/* Modes (upstream's train()/eval() and the mode setter). */
void brg_ipu_config_train(brg_ipu_config *cfg);
void brg_ipu_config_eval(brg_ipu_config *cfg);
/* "training" or "inference"; anything else is an error naming the value. */
brg_status brg_ipu_config_set_mode(brg_ipu_config *cfg, const char *mode);
brg_status brg_ipu_mode_parse(const char *name, brg_ipu_mode *out);
const char *brg_ipu_mode_name(brg_ipu_mode mode);
const char *brg_output_mode_name(brg_output_mode mode);

/* The attributes as one mode sees them: the managed ones (inference_* in inference mode) and
 * the settings a run of that mode uses (inference: gradient accumulation 1, output mode all). */
typedef struct brg_ipu_view {
    brg_ipu_mode mode;
    int64_t replication_factor;
    int64_t gradient_accumulation_steps;
    int64_t device_iterations;
    brg_output_mode output_mode;
    const brg_ipu_list *layers_per_ipu;
    int64_t ipus_per_replica;
    const brg_ipu_proportion *matmul_proportion;
    int64_t embedding_serialization_factor; /* 0: null */
    const brg_ipu_list *serialized_embedding_splits_per_ipu;
    int64_t projection_serialization_factor;
    const brg_ipu_list *serialized_projection_splits_per_ipu;
    const char *parallelize_kwargs;
} brg_ipu_view;

void brg_ipu_config_view(const brg_ipu_config *cfg, brg_ipu_mode mode, brg_ipu_view *out);

/* The name a managed attribute has in `mode`: "layers_per_ipu" or "inference_layers_per_ipu". */
const char *brg_ipu_config_mode_name(brg_ipu_mode mode, const char *attr, char *buf, size_t len);

/* Samples one host call consumes per micro-batch sample: replication_factor x
 * gradient_accumulation_steps (1 for inference) x device_iterations, of that mode. */
brg_status brg_ipu_config_batch_size_factor(const brg_ipu_config *cfg, brg_ipu_mode mode, int64_t *out);

/* Every attribute, keys sorted, two-space indent and a final newline: the layout
 * optimum-graphcore's save_pretrained writes. *out is malloc'd; free() it. */
brg_status brg_ipu_config_to_json(const brg_ipu_config *cfg, char **out);
/* The view of one mode as JSON ("mode", the resolved attributes under their plain names, the
 * mode-independent ones, and "batch_size_factor"). Not loadable as an ipu_config.json. */
brg_status brg_ipu_config_view_to_json(const brg_ipu_config *cfg, brg_ipu_mode mode, char **out);
/* Writes brg_ipu_config_to_json to `path`, atomically. */
brg_status brg_ipu_config_write_file(const brg_ipu_config *cfg, const char *path);
/* save_pretrained: creates `dir` if needed and writes dir/ipu_config.json; `dir` may not be a file. */
brg_status brg_ipu_config_save_pretrained(const brg_ipu_config *cfg, const char *dir);

/* True when every saved attribute is equal (mode and warnings are ignored). */
bool brg_ipu_config_equal(const brg_ipu_config *a, const brg_ipu_config *b);

#ifdef __cplusplus
}
#endif
#endif
