/* Per-device plans: memory and compute of each pipeline stage from per-block estimates, and a
 * proposed layers_per_ipu that evens them out. Pure arithmetic on brg_block_cost arrays, so it
 * needs no model. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/arena.h"
#include "brigade/placement.h"
#include "brigade/tensor.h"

#define F32 4 /* bytes: weights, gradients, moments and activations are FP32 */

static bool training(brg_ipu_mode m) { return m == BRG_IPU_MODE_TRAINING; }

static int64_t align_up(int64_t n) { return n < 1 ? BRG_ARENA_ALIGN : (n + BRG_ARENA_ALIGN - 1) / BRG_ARENA_ALIGN * BRG_ARENA_ALIGN; }
/* A tensor's header in the arena. */
static int64_t header(void) { return align_up((int64_t)sizeof(brg_tensor)); }

/* Costs that count parameters as the arena holds them (brg_model_block_costs): each tensor's data
 * rounded up, and its header; others: the plain FP32 bytes. */
static bool arena_counted(const brg_block_cost *c) { return c->param_bytes > 0 || c->param_tensors > 0; }
static int64_t owned_data(const brg_block_cost *c) { return arena_counted(c) ? c->param_bytes : F32 * c->params; }
static int64_t tied_data(const brg_block_cost *c) {
    return arena_counted(c) ? align_up(F32 * c->tied_params) : F32 * c->tied_params;
}

/* Bytes a device holds for one block's parameters (the balance's view). */
static int64_t param_bytes(const brg_block_cost *c, bool tied_copy, brg_ipu_mode m) {
    int64_t p = owned_data(c) + (tied_copy ? tied_data(c) : 0);
    if (!training(m)) return p;
    return p * 4; /* weight, gradient, two AdamW moments */
}

static brg_status check_map(int n_blocks, const int *block_device, int n_devices) {
    if (n_devices < 1) return brg_error(BRG_ERR_INVALID_ARG, "a plan needs at least one device, got %d", n_devices);
    for (int b = 0; b < n_blocks; b++)
        if (block_device[b] < 0 || block_device[b] >= n_devices)
            return brg_error(BRG_ERR_INVALID_ARG, "block %d is placed on device %d, outside 0..%d", b,
                             block_device[b], n_devices - 1);
    return BRG_OK;
}

static bool tied_elsewhere(const brg_block_cost *costs, int n_blocks, const int *block_device, int b) {
    int o = costs[b].tied_owner;
    return costs[b].tied_params > 0 && o >= 0 && o < n_blocks && block_device[o] != block_device[b];
}

/* The first block on the device before `b` that copies the same tied weights (one copy serves
 * them all), or -1. */
static int earlier_copy(const brg_block_cost *costs, const int *block_device, int b) {
    for (int e = 0; e < b; e++)
        if (block_device[e] == block_device[b] && costs[e].tied_owner == costs[b].tied_owner &&
            costs[e].tied_params > 0)
            return e;
    return -1;
}

static void add_params(brg_device_plan *d, const brg_block_cost *c, bool copy, const brg_plan_options *o) {
    int64_t p = c->params + (copy ? c->tied_params : 0);
    int64_t data = owned_data(c) + (copy ? tied_data(c) : 0);
    int64_t tensors = arena_counted(c) ? c->param_tensors + (copy ? 1 : 0) : 0;
    d->params += p;
    d->weight_bytes += data + tensors * header();
    if (training(o->mode)) {
        d->gradient_bytes += data;
        const int64_t state = (int64_t)(o->optimizer_state < 0 ? 2 : o->optimizer_state) * data;
        const int64_t shards = o->optimizer_shards > 1 ? o->optimizer_shards : 1;
        d->optimizer_bytes += (state + shards - 1) / shards; /* each replica's shard, rounded up */
    }
}

/* One micro-batch's activations on device `dev`: what it keeps to the end of its backward
 * (*kept) and, with recomputation, what rebuilding one layer adds at its worst (*transient); the
 * kernel scratch (*scratch). A layer is rebuilt during the backward, after the blocks behind it
 * on the device got their gradients and before the blocks in front of it do (the stage's input
 * may get its gradient earlier, from a later layer it also reaches, as T5's encoder output). */
static void activations(const brg_block_cost *costs, int n_blocks, const int *block_device, int dev,
                        const brg_plan_options *o, int64_t *kept, int64_t *transient, int64_t *scratch) {
    const bool train = training(o->mode);
    *kept = *transient = *scratch = 0;
    int64_t slot[BRG_PLAN_SCRATCH_SLOTS] = {0}, team[BRG_PLAN_SCRATCH_SLOTS] = {0}, grads_before = 0;
    bool first = true;
    for (int b = 0; b < n_blocks; b++) {
        if (block_device[b] != dev) continue;
        const brg_block_cost *c = &costs[b];
        const bool half = train && o->half_activations;
        const int64_t saved = half ? c->half_saved_bytes : c->saved_bytes;
        const int64_t input = half ? c->half_input_bytes : c->input_bytes;
        const int64_t recompute = half ? c->half_recompute_bytes : c->recompute_bytes;
        const int64_t grads = half ? c->half_grad_bytes : c->grad_bytes;
        const int64_t released = half ? c->half_released_grad_bytes : c->released_grad_bytes;
        if (first && b > 0) /* the stage's copy of what the device before it sent */
            *kept += input + (train ? c->input_grad_bytes : 0);
        first = false;
        for (int k = 0; k < BRG_PLAN_SCRATCH_SLOTS; k++) {
            int64_t s = train ? c->scratch_bytes[k] : c->forward_scratch_bytes[k];
            int64_t t = train ? c->team_scratch_bytes[k] : c->forward_team_scratch_bytes[k];
            if (s > slot[k]) slot[k] = s;
            if (t > team[k]) team[k] = t;
        }
        if (!train) {
            *kept += c->forward_bytes;
            continue;
        }
        int64_t full = saved + grads;
        if (!o->recompute || c->layer < 0) {
            /* the gradients it hands on stay; the rest are released when its backward ends, so
             * only one block's of them exist at a time */
            const int64_t handed_on = grads - released;
            *kept += saved + handed_on;
            if (released > *transient) *transient = released;
            grads_before += handed_on;
            continue;
        }
        *kept += recompute > 0 ? recompute : input;
        if (full - grads_before > *transient) *transient = full - grads_before;
    }
    for (int k = 0; k < BRG_PLAN_SCRATCH_SLOTS; k++) {
        if (!o->half_products && (k == BRG_PLAN_SCRATCH_ROUNDED_A || k == BRG_PLAN_SCRATCH_ROUNDED_B)) continue;
        if (!(train && o->half_activations) && k >= BRG_PLAN_SCRATCH_STAGE) continue;
        *scratch += slot[k] + (o->threads > 1 ? (int64_t)(o->threads - 1) * team[k] : 0);
    }
}

brg_status brg_plan_devices_with(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                                 const brg_plan_options *opts, brg_device_plan *out) {
    BRG_TRY(check_map(n_blocks, block_device, n_devices));
    memset(out, 0, (size_t)n_devices * sizeof *out);
    double total = 0;
    for (int b = 0; b < n_blocks; b++) {
        brg_device_plan *d = &out[block_device[b]];
        d->n_blocks++;
        bool copy = tied_elsewhere(costs, n_blocks, block_device, b) && earlier_copy(costs, block_device, b) < 0;
        add_params(d, &costs[b], copy, opts);
        d->flops += costs[b].flops;
        total += costs[b].flops;
        if (training(opts->mode) && opts->packed_weights) d->packed_bytes += costs[b].packed_bytes;
    }
    for (int i = 0; i < n_devices; i++) {
        brg_device_plan *d = &out[i];
        d->id = i;
        d->in_flight = opts->in_flight && opts->in_flight[i] > 0 ? opts->in_flight[i] : 1;
        int64_t kept, transient;
        activations(costs, n_blocks, block_device, i, opts, &kept, &transient, &d->scratch_bytes);
        d->micro_batch_bytes = kept + transient;
        d->activation_bytes = kept * d->in_flight + transient;
        d->optimizer_offchip = opts->optimizer_offchip && training(opts->mode);
        d->total_bytes = d->weight_bytes + d->gradient_bytes + (d->optimizer_offchip ? 0 : d->optimizer_bytes) +
                         d->activation_bytes + d->scratch_bytes + d->packed_bytes;
        d->compute_share = total > 0 ? d->flops / total : 0;
    }
    return BRG_OK;
}

/* Only bf16 panels pay in training: they are half the bytes of the fp32 weight the plain product
 * reads and rounds on every call. fp32 panels hold the weight's own bytes, so a product reads as
 * much from them as it would from the weight, and packing a whole copy every step only adds its
 * writes (GPT-2 small, 1 x 64 tokens, 8 micro-batches a step on one Intel core: 82-96 tokens/s
 * packing against 106-111 plain; pipe2bal at 4x64 and 8x128 within the noise). */
bool brg_plan_packs_weights(int micro_batches, brg_dtype compute) {
    return micro_batches >= 2 && compute == BRG_DTYPE_BF16;
}

brg_status brg_plan_devices(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                            brg_ipu_mode mode, bool recompute, brg_device_plan *out) {
    brg_plan_options o = {.mode = mode, .recompute = recompute, .in_flight = NULL, .optimizer_state = -1};
    return brg_plan_devices_with(costs, n_blocks, block_device, n_devices, &o, out);
}

/* ---- balance ------------------------------------------------------------------------------ */

typedef struct load {
    double flops, bytes;
} load;

/* A block's memory as the plan counts it (one micro-batch), with recomputation keeping only what
 * a layer needs to rebuild itself. A
 * tied copy counts when both blocks have fixed devices (a tied head); for layers, where it
 * lands depends on the answer, so it is left out. */
static double block_bytes(const brg_block_cost *c, bool tied_copy, brg_ipu_mode m, bool recompute) {
    int64_t keep = c->recompute_bytes > 0 ? c->recompute_bytes : c->input_bytes;
    int64_t act = !training(m) ? c->forward_bytes : recompute && c->layer >= 0 ? keep : c->saved_bytes + c->grad_bytes;
    return (double)(param_bytes(c, tied_copy, m) + act);
}

typedef struct balancer {
    int n_layers, n_devices;
    const load *fixed;   /* [n_devices]: blocks that are not layers */
    const double *pre_f; /* prefix sums over layers: [n_layers + 1] */
    const double *pre_b;
    double total_f, total_b;
    brg_balance_goal goal;
} balancer;

/* A device's load: its compute share, its memory share, or the larger of the two. A single
 * goal breaks ties by the other share, so equal-compute splits still prefer the lighter memory. */
static double device_load(const balancer *s, int dev, int first, int end) {
    double f = s->fixed[dev].flops + s->pre_f[end] - s->pre_f[first];
    double b = s->fixed[dev].bytes + s->pre_b[end] - s->pre_b[first];
    double lf = s->total_f > 0 ? f / s->total_f : 0, lb = s->total_b > 0 ? b / s->total_b : 0;
    switch (s->goal) {
    case BRG_BALANCE_COMPUTE: return lf + 1e-6 * lb;
    case BRG_BALANCE_MEMORY: return lb + 1e-6 * lf;
    default: return lf > lb ? lf : lb;
    }
}

/* best[d][i]: the smallest possible largest load when devices 0..d take layers 0..i-1. */
static void solve(const balancer *s, double *best, int *choice) {
    int L = s->n_layers, W = L + 1;
    for (int i = 0; i <= L; i++) best[i] = device_load(s, 0, 0, i), choice[i] = 0;
    for (int d = 1; d < s->n_devices; d++)
        for (int i = 0; i <= L; i++) {
            double b = DBL_MAX;
            int c = 0;
            for (int j = 0; j <= i; j++) {
                double prev = best[(d - 1) * W + j], here = device_load(s, d, j, i);
                double v = prev > here ? prev : here;
                if (v < b - 1e-12) b = v, c = j;
            }
            best[d * W + i] = b;
            choice[d * W + i] = c;
        }
}

static brg_status layer_order(const brg_block_cost *costs, int n_blocks, int **order, int *n_layers) {
    int L = 0;
    for (int b = 0; b < n_blocks; b++) L += costs[b].layer >= 0;
    *order = malloc((size_t)(L ? L : 1) * sizeof **order);
    if (!*order) return brg_error(BRG_ERR_OOM, "out of memory balancing layers");
    for (int b = 0; b < n_blocks; b++) {
        int l = costs[b].layer;
        if (l < 0) continue;
        if (l >= L) {
            free(*order);
            return brg_error(BRG_ERR_INVALID_ARG, "block %d has layer index %d, but there are %d layers", b, l, L);
        }
        (*order)[l] = b;
    }
    *n_layers = L;
    return BRG_OK;
}

brg_status brg_plan_balance(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                            brg_ipu_mode mode, bool recompute, brg_ipu_list *out) {
    return brg_plan_balance_for(costs, n_blocks, block_device, n_devices, mode, recompute, BRG_BALANCE_BOTH, out);
}

brg_status brg_balance_goal_parse(const char *name, brg_balance_goal *out) {
    static const char *const names[] = {"both", "compute", "memory"};
    for (int i = 0; i < 3; i++)
        if (name && strcmp(name, names[i]) == 0) {
            *out = (brg_balance_goal)i;
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARG, "unknown balance goal '%s' (expected both, compute or memory)",
                     name ? name : "(null)");
}

brg_status brg_plan_balance_for(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                                brg_ipu_mode mode, bool recompute, brg_balance_goal goal, brg_ipu_list *out) {
    if (goal != BRG_BALANCE_BOTH && goal != BRG_BALANCE_COMPUTE && goal != BRG_BALANCE_MEMORY)
        return brg_error(BRG_ERR_INVALID_ARG, "unknown balance goal %d", (int)goal);
    BRG_TRY(check_map(n_blocks, block_device, n_devices));
    if (n_devices > BRG_IPU_LIST_MAX)
        return brg_error(BRG_ERR_INVALID_ARG, "cannot balance over %d devices (at most %d)", n_devices, BRG_IPU_LIST_MAX);
    int *order = NULL, L = 0;
    BRG_TRY(layer_order(costs, n_blocks, &order, &L));
    load *fixed = calloc((size_t)n_devices, sizeof *fixed);
    double *pre = calloc(2 * (size_t)(L + 1), sizeof *pre);
    double *best = malloc((size_t)n_devices * (size_t)(L + 1) * sizeof *best);
    int *choice = malloc((size_t)n_devices * (size_t)(L + 1) * sizeof *choice);
    brg_status st = fixed && pre && best && choice ? BRG_OK : brg_error(BRG_ERR_OOM, "out of memory balancing layers");
    if (st == BRG_OK) {
        balancer s = {L, n_devices, fixed, pre, pre + L + 1, 0, 0, goal};
        for (int b = 0; b < n_blocks; b++)
            if (costs[b].layer < 0) {
                int o = costs[b].tied_owner;
                bool copy = o >= 0 && o < n_blocks && costs[o].layer < 0 &&
                            tied_elsewhere(costs, n_blocks, block_device, b);
                fixed[block_device[b]].flops += costs[b].flops;
                fixed[block_device[b]].bytes += block_bytes(&costs[b], copy, mode, recompute);
            }
        for (int l = 0; l < L; l++) {
            pre[l + 1] = pre[l] + costs[order[l]].flops;
            pre[L + 1 + l + 1] = pre[L + 1 + l] + block_bytes(&costs[order[l]], false, mode, recompute);
        }
        for (int d = 0; d < n_devices; d++) s.total_f += fixed[d].flops, s.total_b += fixed[d].bytes;
        s.total_f += pre[L];
        s.total_b += pre[2 * L + 1];
        solve(&s, best, choice);
        *out = (brg_ipu_list){.present = true, .n = n_devices};
        for (int d = n_devices - 1, end = L; d >= 0; d--) { /* walk the choices back */
            int start = d ? choice[d * (L + 1) + end] : 0;
            out->v[d] = end - start;
            end = start;
        }
    }
    free(order);
    free(fixed);
    free(pre);
    free(best);
    free(choice);
    return st;
}
