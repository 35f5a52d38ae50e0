/* brigade plan: where a model's blocks go under an IPUConfig, and what each device of a replica
 * holds and computes; --balance proposes a layers_per_ipu that evens them out. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "brigade/brigade.h"
#include "brigade/schedule.h"
#include "commands.h"
#include "plan_scale.h"
#include "precision_flag.h"

typedef struct plan_args {
    const char *model, *ipu_config, *mode_name, *overrides, *schedule, *balance_by, *precision;
    int64_t batch, seq;
    bool json, balance;
    brg_balance_goal goal; /* parsed from balance_by */
    plan_scale_args scale; /* --ranks, --replicas, --network-gbps ... */
} plan_args;

typedef struct plan {
    brg_model *m;
    brg_ipu_config *cfg;
    brg_ipu_mode mode;
    brg_block_cost *costs;
    brg_placement place;
    brg_device_plan *devices;
    bool half_products;    /* --precision with a 16-bit compute type */
    brg_dtype products;    /* that type (F32 without one) */
    bool half_activations; /* --precision 16.16 or bf16.16 (training) */
} plan;

/* Micro-batches each device holds at once: training, the schedule's most in flight on its stage
 * (of gradient_accumulation_steps); inference, every one of a host call (device_iterations). */
static brg_status in_flight(const plan *p, const char *schedule, int *out) {
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    int n = p->place.n_devices;
    if (p->mode != BRG_IPU_MODE_TRAINING) {
        for (int d = 0; d < n; d++) out[d] = (int)v.device_iterations;
        return BRG_OK;
    }
    brg_schedule_kind kind = BRG_SCHEDULE_1F1B;
    if (schedule) BRG_TRY(brg_schedule_kind_parse(schedule, &kind));
    brg_schedule s;
    BRG_TRY(brg_schedule_build(kind, n, (int)v.gradient_accumulation_steps, &s));
    for (int d = 0; d < n; d++) out[d] = brg_schedule_max_in_flight(&s, d);
    brg_schedule_free(&s);
    return BRG_OK;
}

/* replicated_tensor_sharding: each replica keeps 1/replication_factor of the optimizer state. */
static int optimizer_shards(const plan *p) {
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    return p->cfg->replicated_tensor_sharding && v.replication_factor > 1 ? (int)v.replication_factor : 1;
}

static brg_status compute(plan *p, const char *schedule) {
    brg_placement_free(&p->place);
    free(p->devices);
    p->devices = NULL;
    BRG_TRY(brg_model_parallelize(p->m, p->cfg, p->mode, &p->place));
    p->devices = calloc((size_t)p->place.n_devices, sizeof *p->devices);
    int *flight = calloc((size_t)p->place.n_devices, sizeof *flight);
    brg_status st = p->devices && flight ? BRG_OK
                                         : brg_error(BRG_ERR_OOM, "out of memory planning %d devices", p->place.n_devices);
    if (st == BRG_OK) st = in_flight(p, schedule, flight);
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    brg_plan_options o = {.mode = p->mode, .recompute = p->cfg->recompute_checkpoint_every_layer, .in_flight = flight,
                          .optimizer_state = 2, .optimizer_shards = optimizer_shards(p),
                          .optimizer_offchip = p->cfg->optimizer_state_offchip, .half_products = p->half_products,
                          .half_activations = p->half_activations,
                          .packed_weights = brg_plan_packs_weights((int)v.gradient_accumulation_steps, p->products)};
    if (st == BRG_OK)
        st = brg_plan_devices_with(p->costs, p->m->n_blocks, p->place.block_device, p->place.n_devices, &o, p->devices);
    free(flight);
    return st;
}

/* ---- text --------------------------------------------------------------------------------- */

static const char *mib(int64_t bytes, char *buf, size_t len) {
    double b = (double)bytes;
    if (b < 1024.0 * 1024.0) snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else if (b < 1024.0 * 1024.0 * 1024.0) snprintf(buf, len, "%.1f MiB", b / (1024.0 * 1024.0));
    else snprintf(buf, len, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

/* "embeddings, h.0..h.5": consecutive layers shown as a range. */
static void block_summary(const plan *p, int dev, char *buf, size_t len) {
    size_t at = 0;
    buf[0] = '\0';
    const brg_block *b = p->m->blocks;
    for (int i = 0; i < p->m->n_blocks; i++) {
        if (p->place.block_device[i] != dev) continue;
        int j = i;
        while (b[i].kind == BRG_BLOCK_LAYER && j + 1 < p->m->n_blocks && b[j + 1].kind == BRG_BLOCK_LAYER &&
               p->place.block_device[j + 1] == dev)
            j++;
        int n = j > i ? snprintf(buf + at, len - at, "%s%s..%s", at ? ", " : "", b[i].name, b[j].name)
                      : snprintf(buf + at, len - at, "%s%s", at ? ", " : "", b[i].name);
        if (n < 0 || (size_t)n >= len - at) return;
        at += (size_t)n;
        i = j;
    }
    if (!at) snprintf(buf, len, "(none)");
}

static void print_devices(const plan *p) {
    bool train = p->mode == BRG_IPU_MODE_TRAINING;
    printf("%-6s %-24s %12s %12s %12s %12s %12s %10s %10s %12s %8s\n", "device", "blocks", "parameters", "weights",
           "gradients", "optimizer", "activations", "scratch", "packed", "total", "compute");
    for (int d = 0; d < p->place.n_devices; d++) {
        const brg_device_plan *dp = &p->devices[d];
        char blocks[256], w[32], g[32], o[32], a[32], s[32], k[32], t[32];
        block_summary(p, d, blocks, sizeof blocks);
        printf("%-6d %-24s %12lld %12s %12s %12s %12s %10s %10s %12s %7.1f%%\n", d, blocks, (long long)dp->params,
               mib(dp->weight_bytes, w, sizeof w), train ? mib(dp->gradient_bytes, g, sizeof g) : "-",
               train ? mib(dp->optimizer_bytes, o, sizeof o) : "-", mib(dp->activation_bytes, a, sizeof a),
               mib(dp->scratch_bytes, s, sizeof s), train ? mib(dp->packed_bytes, k, sizeof k) : "-",
               mib(dp->total_bytes, t, sizeof t), 100.0 * dp->compute_share);
    }
}

static void print_notes(const plan *p, const plan_args *a) {
    int most = 0;
    for (int d = 0; d < p->place.n_devices; d++) most = p->devices[d].in_flight > most ? p->devices[d].in_flight : most;
    if (p->mode == BRG_IPU_MODE_TRAINING)
        printf("optimizer: AdamW, two FP32 moments per parameter; gradients FP32; activations: what a micro-batch of "
               "%lld x %lld tokens holds from its forward to the end of its backward (saved tensors and their "
               "gradients%s), times the micro-batches in flight on the device (up to %d, %s schedule); total: the "
               "device's peak (estimate: see docs/config.md)\n",
               (long long)a->batch, (long long)a->seq,
               p->cfg->recompute_checkpoint_every_layer ? "; layers recomputed from their inputs" : "", most,
               a->schedule ? a->schedule : "1f1b");
    else
        printf("inference: weights only; activations: every block's forward tensors for a micro-batch of %lld x %lld "
               "tokens, times the %d micro-batches of a host call (estimate: see docs/config.md)\n",
               (long long)a->batch, (long long)a->seq, most);
    if (p->mode == BRG_IPU_MODE_TRAINING && (optimizer_shards(p) > 1 || p->cfg->optimizer_state_offchip))
        printf("optimizer state:%s%s%s\n",
               optimizer_shards(p) > 1 ? " sharded over the replicas (replicated_tensor_sharding), each device keeps "
                                         "its 1/replication_factor"
                                       : "",
               optimizer_shards(p) > 1 && p->cfg->optimizer_state_offchip ? ";" : "",
               p->cfg->optimizer_state_offchip ? " off the device (optimizer_state_offchip), not in its total" : "");
    bool packs = false;
    for (int d = 0; d < p->place.n_devices; d++) packs |= p->devices[d].packed_bytes > 0;
    if (packs)
        printf("packed: each device packs its linear weights once a step for its micro-batches (the bf16 "
               "kernel's panels, for the forward and the input-gradient products), in its total; a --device-memory "
               "budget without room for them trains without them\n");
    printf("compute: share of forward FLOPs per micro-batch\n");
}

static void print_header(const plan *p, const plan_args *a) {
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    printf("model: %s, %d blocks, %lld parameters; mode: %s\n", p->m->ops->architecture, p->m->n_blocks,
           (long long)brg_model_num_parameters(p->m), brg_ipu_mode_name(p->mode));
    printf("devices: %lld replica(s) x %d stage(s) = %lld (device id = replica * %d + stage); "
           "micro-batch %lld x %lld tokens\n",
           (long long)v.replication_factor, p->place.n_devices, (long long)v.replication_factor * p->place.n_devices,
           p->place.n_devices, (long long)a->batch, (long long)a->seq);
}

/* ---- JSON --------------------------------------------------------------------------------- */

static cJSON *ints_json(const int *v, int n) {
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < n; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(v[i]));
    return arr;
}

static cJSON *devices_json(const plan *p) {
    cJSON *arr = cJSON_CreateArray();
    for (int d = 0; arr && d < p->place.n_devices; d++) {
        const brg_device_plan *dp = &p->devices[d];
        cJSON *o = cJSON_CreateObject(), *blocks = cJSON_CreateArray();
        cJSON_AddItemToArray(arr, o);
        cJSON_AddNumberToObject(o, "id", d);
        for (int b = 0; b < p->m->n_blocks; b++)
            if (p->place.block_device[b] == d) cJSON_AddItemToArray(blocks, cJSON_CreateString(p->m->blocks[b].name));
        cJSON_AddItemToObject(o, "blocks", blocks);
        cJSON_AddNumberToObject(o, "parameters", (double)dp->params);
        cJSON_AddNumberToObject(o, "weight_bytes", (double)dp->weight_bytes);
        cJSON_AddNumberToObject(o, "gradient_bytes", (double)dp->gradient_bytes);
        cJSON_AddNumberToObject(o, "optimizer_bytes", (double)dp->optimizer_bytes);
        cJSON_AddBoolToObject(o, "optimizer_offchip", dp->optimizer_offchip);
        cJSON_AddNumberToObject(o, "activation_bytes", (double)dp->activation_bytes);
        cJSON_AddNumberToObject(o, "micro_batch_bytes", (double)dp->micro_batch_bytes);
        cJSON_AddNumberToObject(o, "in_flight", dp->in_flight);
        cJSON_AddNumberToObject(o, "scratch_bytes", (double)dp->scratch_bytes);
        cJSON_AddNumberToObject(o, "packed_bytes", (double)dp->packed_bytes);
        cJSON_AddNumberToObject(o, "total_bytes", (double)dp->total_bytes);
        cJSON_AddNumberToObject(o, "flops", dp->flops);
        cJSON_AddNumberToObject(o, "compute_share", dp->compute_share);
    }
    return arr;
}

static cJSON *plan_json(const plan *p, const plan_args *a) {
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "model", p->m->ops->architecture);
    cJSON_AddStringToObject(o, "mode", brg_ipu_mode_name(p->mode));
    cJSON_AddNumberToObject(o, "micro_batch_size", (double)a->batch);
    cJSON_AddNumberToObject(o, "sequence_length", (double)a->seq);
    cJSON_AddNumberToObject(o, "replication_factor", (double)v.replication_factor);
    cJSON_AddNumberToObject(o, "ipus_per_replica", p->place.n_devices);
    cJSON_AddStringToObject(o, "optimizer", p->mode == BRG_IPU_MODE_TRAINING ? "AdamW, two FP32 moments per parameter"
                                                                             : "none (inference)");
    cJSON_AddItemToObject(o, "devices", devices_json(p));
    cJSON_AddItemToObject(o, "layer_ipu", ints_json(p->place.layer_device, p->place.n_layers));
    return o;
}

/* ---- running ------------------------------------------------------------------------------ */

static brg_status load(plan *p, plan_args *a) {
    BRG_TRY(brg_ipu_mode_parse(a->mode_name, &p->mode));
    brg_dtype products = BRG_DTYPE_F32;
    if (p->mode == BRG_IPU_MODE_TRAINING) {
        brg_precision precision = BRG_PRECISION_32_32;
        if (a->precision) BRG_TRY(brg_precision_parse(a->precision, &precision));
        products = brg_precision_compute_dtype(precision);
        p->half_activations = brg_precision_activation_dtype(precision) != BRG_DTYPE_F32;
    } else {
        BRG_TRY(cli_forward_precision(a->precision, &products)); /* as brigade forward takes it */
    }
    p->half_products = products != BRG_DTYPE_F32;
    p->products = products;
    p->cfg = malloc(sizeof *p->cfg);
    if (!p->cfg) return brg_error(BRG_ERR_OOM, "out of memory loading %s", a->ipu_config);
    BRG_TRY(brg_ipu_config_load(a->ipu_config, p->cfg));
    for (int i = 0; i < p->cfg->n_warnings; i++) fprintf(stderr, "warning: %s: %s\n", a->ipu_config, p->cfg->warnings[i]);
    if (a->overrides) BRG_TRY(brg_ipu_config_update_from_string(p->cfg, a->overrides));
    BRG_TRY(brg_model_create_from_config(a->model, &p->m));
    if (a->seq == 0) a->seq = p->m->max_positions > 0 ? p->m->max_positions : 128;
    if (a->batch < 1 || a->seq < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "--micro-batch-size and --sequence-length must be >= 1");
    if (p->m->max_positions > 0 && a->seq > p->m->max_positions)
        return brg_error(BRG_ERR_INVALID_ARG, "--sequence-length %lld exceeds the model's %lld positions",
                         (long long)a->seq, (long long)p->m->max_positions);
    p->costs = calloc((size_t)p->m->n_blocks, sizeof *p->costs);
    if (!p->costs) return brg_error(BRG_ERR_OOM, "out of memory planning %d blocks", p->m->n_blocks);
    BRG_TRY(brg_model_block_costs(p->m, a->batch, a->seq, p->costs));
    return compute(p, a->schedule);
}

/* Replaces the mode's layers_per_ipu by the balanced proposal and plans again. */
static brg_status balance(plan *p, const plan_args *a, brg_ipu_list *proposal) {
    BRG_TRY(brg_plan_balance_for(p->costs, p->m->n_blocks, p->place.block_device, p->place.n_devices, p->mode,
                                 p->cfg->recompute_checkpoint_every_layer, a->goal, proposal));
    if (p->mode == BRG_IPU_MODE_INFERENCE) p->cfg->inference_layers_per_ipu = *proposal;
    else p->cfg->layers_per_ipu = *proposal;
    return compute(p, a->schedule);
}

/* The pipeline schedule of one step (training: gradient_accumulation_steps micro-batches) or
 * host call (inference: device_iterations), as a table or as JSON. */
static brg_status schedule_report(const plan *p, const plan_args *a, cJSON *root) {
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    brg_schedule_kind kind = BRG_SCHEDULE_INFERENCE;
    if (p->mode == BRG_IPU_MODE_TRAINING) BRG_TRY(brg_schedule_kind_parse(a->schedule, &kind));
    int m = (int)(p->mode == BRG_IPU_MODE_TRAINING ? v.gradient_accumulation_steps : v.device_iterations);
    brg_schedule s;
    BRG_TRY(brg_schedule_build(kind, p->place.n_devices, m, &s));
    if (!root) {
        printf("\n");
        brg_schedule_print(&s, stdout);
        printf("ideal pipeline efficiency m/(m+p-1) = %.1f%%\n",
               100 * brg_schedule_ideal_efficiency(p->place.n_devices, m));
    } else {
        cJSON *o = cJSON_CreateObject(), *stages = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "kind", brg_schedule_kind_name(kind));
        cJSON_AddNumberToObject(o, "micro_batches", m);
        for (int st = 0; st < s.stages; st++) {
            cJSON *row = cJSON_CreateArray();
            for (int i = 0; i < s.length[st]; i++) {
                char step[16];
                snprintf(step, sizeof step, "%c%d", s.steps[st][i].pass == BRG_PASS_FORWARD ? 'F' : 'B',
                         s.steps[st][i].micro_batch);
                cJSON_AddItemToArray(row, cJSON_CreateString(step));
            }
            cJSON_AddItemToArray(stages, row);
        }
        cJSON_AddItemToObject(o, "stages", stages);
        cJSON_AddItemToObject(root, "schedule", o);
    }
    brg_schedule_free(&s);
    return BRG_OK;
}

/* The scale-out model of the training pipeline (plan_scale.c). */
static brg_status scale_prepare(const plan *p, const plan_args *a, plan_scale **out) {
    if (p->mode != BRG_IPU_MODE_TRAINING)
        return brg_error(BRG_ERR_INVALID_ARG, "--ranks, --replicas and the other scale-out flags model training steps: "
                         "drop --mode inference");
    brg_ipu_view v;
    brg_ipu_config_view(p->cfg, p->mode, &v);
    plan_scale_inputs in = {p->m, p->costs, p->place.block_device, p->devices, p->place.n_devices,
                            (int)v.gradient_accumulation_steps, (int)v.replication_factor, a->schedule, a->batch * a->seq};
    return plan_scale_prepare(&a->scale, &in, out);
}

static brg_status report(plan *p, const plan_args *a) {
    plan_scale *scale = NULL;
    if (a->scale.wanted) {
        brg_status st = scale_prepare(p, a, &scale);
        if (st != BRG_OK) {
            plan_scale_free(scale);
            return st;
        }
    }
    cJSON *root = a->json ? plan_json(p, a) : NULL;
    if (a->json && !root) {
        plan_scale_free(scale);
        return brg_error(BRG_ERR_OOM, "out of memory formatting the plan");
    }
    if (!a->json) {
        print_header(p, a);
        brg_placement_print(stdout, p->m, &p->place);
        print_devices(p);
        print_notes(p, a);
    }
    brg_status st = a->schedule ? schedule_report(p, a, root) : BRG_OK;
    if (st == BRG_OK && scale) st = plan_scale_print(scale, root);
    if (st == BRG_OK && (a->balance || a->balance_by)) {
        brg_ipu_list proposal;
        st = balance(p, a, &proposal);
        char name[64];
        brg_ipu_config_mode_name(p->mode, "layers_per_ipu", name, sizeof name);
        if (st == BRG_OK && a->json) {
            cJSON *b = cJSON_CreateObject();
            cJSON_AddItemToObject(root, "balance", b);
            cJSON_AddItemToObject(b, name, ints_json(proposal.v, proposal.n));
            cJSON_AddItemToObject(b, "devices", devices_json(p));
            cJSON_AddItemToObject(b, "layer_ipu", ints_json(p->place.layer_device, p->place.n_layers));
        } else if (st == BRG_OK) {
            printf("\nbalanced: \"%s\": [", name);
            for (int i = 0; i < proposal.n; i++) printf("%s%d", i ? ", " : "", proposal.v[i]);
            printf("]\n");
            print_devices(p);
        }
    }
    if (st == BRG_OK && root) {
        char *text = cJSON_Print(root);
        if (text) printf("%s\n", text);
        else st = brg_error(BRG_ERR_OOM, "out of memory formatting the plan");
        free(text);
    }
    cJSON_Delete(root);
    plan_scale_free(scale);
    return st;
}

int cmd_plan(int argc, char **argv) {
    plan_args a = {.mode_name = "training", .batch = 1, .scale = PLAN_SCALE_ARGS_DEFAULT};
    arg_spec specs[] = {
        {"model", ARG_STRING, &a.model, true, "model folder or hub id (config.json is enough)", false},
        {"ipu-config", ARG_STRING, &a.ipu_config, true, "ipu_config.json, a folder holding one, or a hub id", false},
        {"mode", ARG_STRING, &a.mode_name, false, "training (default) or inference", false},
        {"ipu-config-overrides", ARG_STRING, &a.overrides, false, "\"k1=v1,k2=[1 2 3]\" applied to the config", false},
        {"micro-batch-size", ARG_INT, &a.batch, false, "sequences per micro-batch (default 1)", false},
        {"precision", ARG_STRING, &a.precision, false,
         "as brigade train takes it (32.32 default, 16.32, 16.16, bf16.32, bf16.16); inference: as forward", false},
        {"sequence-length", ARG_INT, &a.seq, false, "tokens per sequence (default: the model's positions)", false},
        {"balance", ARG_FLAG, &a.balance, false, "propose a layers_per_ipu that evens compute and memory", false},
        {"balance-by", ARG_STRING, &a.balance_by, false,
         "what --balance evens: both (default), compute (fastest pipeline) or memory; implies --balance", false},
        {"json", ARG_FLAG, &a.json, false, "print the plan as JSON", false},
        {"schedule", ARG_STRING, &a.schedule, false, "print the pipeline schedule table: 1f1b or gpipe", false},
        PLAN_SCALE_SPECS(a.scale),
    };
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (args_wants_help(argc, argv, 2)) {
        args_usage("plan", "Places a model's blocks on devices as the IPU config says and estimates what each device "
                   "of one replica holds (weights, gradients, AdamW state, activations) and computes.",
                   specs, n);
        return 0;
    }
    if (!args_parse("plan", argc, argv, 2, specs, n)) return 2;
    a.scale.wanted = plan_scale_seen(specs, n);
    if (a.balance_by && brg_balance_goal_parse(a.balance_by, &a.goal) != BRG_OK) return cli_fail("plan");
    plan p = {0};
    brg_status st = load(&p, &a);
    if (st == BRG_OK) st = report(&p, &a);
    brg_placement_free(&p.place);
    free(p.devices);
    free(p.costs);
    free(p.cfg);
    brg_model_destroy(p.m);
    return st == BRG_OK ? 0 : cli_fail("plan");
}
