/* Per-device plans: memory and compute of each pipeline stage from per-block estimates, and a
 * proposed layers_per_ipu that evens them out. Pure arithmetic on brg_block_cost arrays, so it
 * needs no model. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/placement.h"

#define F32 4 /* bytes: weights, gradients, moments and activations are FP32 */

static bool training(brg_ipu_mode m) { return m == BRG_IPU_MODE_TRAINING; }

/* Bytes a device holds for one block's parameters. */
static int64_t param_bytes(const brg_block_cost *c, bool tied_copy, brg_ipu_mode m) {
    int64_t p = c->params + (tied_copy ? c->tied_params : 0);
    if (!training(m)) return F32 * p;
    return F32 * p * 2 + F32 * c->params * 2; /* weight + gradient, and two AdamW moments when owned */
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

static void add_params(brg_device_plan *d, const brg_block_cost *c, bool copy, brg_ipu_mode m) {
    int64_t p = c->params + (copy ? c->tied_params : 0);
    d->params += p;
    d->weight_bytes += F32 * p;
    if (training(m)) {
        d->gradient_bytes += F32 * p;
        d->optimizer_bytes += 2 * F32 * c->params;
    }
}

/* Activation bytes of the blocks on device `dev` (see brg_device_plan). */
static int64_t activations(const brg_block_cost *costs, int n_blocks, const int *block_device, int dev,
                           brg_ipu_mode m, bool recompute) {
    int64_t sum = 0, largest = 0;
    for (int b = 0; b < n_blocks; b++) {
        if (block_device[b] != dev) continue;
        const brg_block_cost *c = &costs[b];
        if (c->saved_bytes > largest && (!training(m) || (recompute && c->layer >= 0))) largest = c->saved_bytes;
        if (!training(m)) continue;
        sum += recompute && c->layer >= 0 ? c->input_bytes : c->saved_bytes;
    }
    return training(m) ? sum + (recompute ? largest : 0) : largest;
}

brg_status brg_plan_devices(const brg_block_cost *costs, int n_blocks, const int *block_device, int n_devices,
                            brg_ipu_mode mode, bool recompute, brg_device_plan *out) {
    BRG_TRY(check_map(n_blocks, block_device, n_devices));
    memset(out, 0, (size_t)n_devices * sizeof *out);
    double total = 0;
    for (int b = 0; b < n_blocks; b++) {
        brg_device_plan *d = &out[block_device[b]];
        d->n_blocks++;
        add_params(d, &costs[b], tied_elsewhere(costs, n_blocks, block_device, b), mode);
        d->flops += costs[b].flops;
        total += costs[b].flops;
    }
    for (int i = 0; i < n_devices; i++) {
        brg_device_plan *d = &out[i];
        d->id = i;
        d->activation_bytes = activations(costs, n_blocks, block_device, i, mode, recompute);
        d->total_bytes = d->weight_bytes + d->gradient_bytes + d->optimizer_bytes + d->activation_bytes;
        d->compute_share = total > 0 ? d->flops / total : 0;
    }
    return BRG_OK;
}

/* ---- balance ------------------------------------------------------------------------------ */

typedef struct load {
    double flops, bytes;
} load;

/* A block's memory as the plan counts it, with recomputation keeping only a layer's input. A
 * tied copy counts when both blocks have fixed devices (a tied head); for layers, where it
 * lands depends on the answer, so it is left out. */
static double block_bytes(const brg_block_cost *c, bool tied_copy, brg_ipu_mode m, bool recompute) {
    int64_t act = !training(m) ? 0 : recompute && c->layer >= 0 ? c->input_bytes : c->saved_bytes;
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
