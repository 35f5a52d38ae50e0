/* Optimizers over a flat list of parameter slots.
 *
 * Each update loop reproduces torch.optim's _single_tensor_* code one element at a time: every
 * tensor op of the Python becomes one fp32 operation here, in the same order, with its Python
 * scalar computed in double and rounded to float where torch's fp32 kernel receives it. torch
 * runs each op over the whole tensor before the next; running them all on one element before
 * the next element gives the same values, since no op reads another element (LAMB's norms are
 * the exception and get a pass of their own). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/optim.h"
#include "kernels/backend.h"

#define MAX_STATE 3

typedef struct slot {
    float *value;
    const float *grad;
    int64_t n;
    int64_t first, whole; /* a shard: value[0] is the parameter's element `first` of `whole` */
    bool decay;
    char *name;
    float *state[MAX_STATE]; /* indexed as state_keys() lists them; NULL where absent */
} slot;

typedef struct state_ref {
    char *name; /* "<slot name>.<key>" */
    int slot;
    int which;
} state_ref;

struct brg_optimizer {
    brg_optimizer_config cfg;
    const brg_kernels *kernels; /* its backend's: the update loops */
    brg_arena *arena; /* owns the state buffers when non-NULL */
    slot *slots;
    int n_slots, cap_slots;
    state_ref *states;
    int n_states, cap_states;
    int64_t step;
};

/* ---- State layout ---------------------------------------------------------------------- */

/* torch's state keys per kind, at fixed indices so the update loops can address them. */
static void state_keys(const brg_optimizer_config *c, const char *keys[MAX_STATE]) {
    keys[0] = keys[1] = keys[2] = NULL;
    switch (c->kind) {
    case BRG_OPTIMIZER_SGD:
        if (c->momentum != 0.0) keys[0] = "momentum_buffer";
        break;
    case BRG_OPTIMIZER_RMSPROP:
        keys[0] = "square_avg";
        if (c->momentum > 0.0) keys[1] = "momentum_buffer";
        if (c->centered) keys[2] = "grad_avg";
        break;
    default:
        keys[0] = "exp_avg";
        keys[1] = "exp_avg_sq";
        break;
    }
}

static void update_slot(brg_optimizer *o, slot *s, double lr, int64_t t) {
    brg_k_optim_slot elems = {s->value, s->grad, s->n, s->decay, {s->state[0], s->state[1], s->state[2]}};
    o->kernels->optimizer_update(&o->cfg, &elems, lr, t);
}

/* Elements [n i / parts, n (i + 1) / parts) of a slot, as a slot of their own. */
static slot slot_part(const slot *s, int i, int parts) {
    int64_t first = s->n * i / parts, last = s->n * (i + 1) / parts;
    slot part = *s;
    part.value += first;
    part.grad += first;
    for (int k = 0; k < MAX_STATE; k++)
        if (part.state[k]) part.state[k] += first;
    part.n = last - first;
    return part;
}

typedef struct step_job {
    brg_optimizer *o;
    double lr;
    int64_t t;
} step_job;

static void step_slice(void *ctx, int i, int n) {
    const step_job *j = ctx;
    for (int k = 0; k < j->o->n_slots; k++) {
        slot part = slot_part(&j->o->slots[k], i, n);
        update_slot(j->o, &part, j->lr, j->t);
    }
}

/* Element-wise updates split across the intra-op threads bound to this thread (a device's
 * team), every slot in equal parts: each element is still updated by exactly the same
 * operations. LAMB's trust ratio needs whole-slot norms, so it runs on one thread. */
static bool step_on_team(brg_optimizer *o, double lr, int64_t t) {
    if (o->cfg.kind == BRG_OPTIMIZER_LAMB || brg_team_size() < 2) return false;
    int64_t total = 0;
    for (int k = 0; k < o->n_slots; k++) total += o->slots[k].n;
    if (total < (1 << 16)) return false; /* not worth waking the team */
    step_job job = {o, lr, t};
    return brg_team_run(step_slice, &job);
}

brg_status brg_optimizer_step(brg_optimizer *o, float lr) {
    if (!(lr >= 0.0f) || isinf(lr))
        return brg_error(BRG_ERR_INVALID_ARG, "%s step %lld: lr must be a finite number >= 0 (got %g)",
                         brg_optimizer_kind_name(o->cfg.kind), (long long)o->step + 1, (double)lr);
    int64_t t = o->step + 1;
    if (!step_on_team(o, (double)lr, t))
        for (int i = 0; i < o->n_slots; i++) update_slot(o, &o->slots[i], (double)lr, t);
    o->step = t;
    return BRG_OK;
}

/* ---- Creation and slots ---------------------------------------------------------------- */

brg_status brg_optimizer_create(const brg_optimizer_config *cfg, brg_arena *arena, brg_optimizer **out) {
    *out = NULL;
    BRG_TRY(brg_optimizer_config_validate(cfg));
    brg_optimizer *o = calloc(1, sizeof *o);
    if (!o) return brg_error(BRG_ERR_OOM, "%s: out of host memory for the optimizer", brg_optimizer_kind_name(cfg->kind));
    o->cfg = *cfg;
    o->kernels = brg_backend_cpu()->f32;
    o->arena = arena;
    *out = o;
    return BRG_OK;
}

void brg_optimizer_set_backend(brg_optimizer *o, const brg_backend *backend) { o->kernels = backend->f32; }

void brg_optimizer_destroy(brg_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_slots; i++) {
        if (!o->arena)
            for (int k = 0; k < MAX_STATE; k++) free(o->slots[i].state[k]);
        free(o->slots[i].name);
    }
    for (int i = 0; i < o->n_states; i++) free(o->states[i].name);
    free(o->slots);
    free(o->states);
    free(o);
}

const brg_optimizer_config *brg_optimizer_get_config(const brg_optimizer *o) { return &o->cfg; }

int brg_optimizer_param_count(const brg_optimizer *o) { return o->n_slots; }

/* Grows *items (of `size` bytes each) so that one more fits. */
static brg_status reserve_one(void **items, int *cap, int count, size_t size, const char *what) {
    if (count < *cap) return BRG_OK;
    int new_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*items, (size_t)new_cap * size);
    if (!grown) return brg_error(BRG_ERR_OOM, "optimizer: out of host memory for %s", what);
    *items = grown;
    *cap = new_cap;
    return BRG_OK;
}

static char *join_name(const char *a, const char *b) {
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *s = malloc(la + (b ? lb + 1 : 0) + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    if (b) {
        s[la] = '.';
        memcpy(s + la + 1, b, lb);
        la += lb + 1;
    }
    s[la] = '\0';
    return s;
}

static brg_status alloc_state(brg_optimizer *o, const char *what, int64_t n, float **out) {
    *out = NULL;
    if (n == 0) return BRG_OK;
    if ((uint64_t)n > SIZE_MAX / sizeof(float))
        return brg_error(BRG_ERR_OOM, "optimizer state %s: %lld floats do not fit in memory", what, (long long)n);
    size_t bytes = (size_t)n * sizeof(float);
    if (o->arena) return brg_arena_alloc_into(o->arena, bytes, what, (void **)out);
    *out = calloc((size_t)n, sizeof(float));
    if (!*out) return brg_error(BRG_ERR_OOM, "optimizer state %s: out of host memory for %zu bytes", what, bytes);
    return BRG_OK;
}

/* Allocates the slot's buffers and records them in the state list. On failure the caller
 * discards the slot; entries already appended are removed by truncating n_states. */
static brg_status add_slot_state(brg_optimizer *o, slot *s, int slot_index) {
    const char *keys[MAX_STATE];
    state_keys(&o->cfg, keys);
    for (int k = 0; k < MAX_STATE; k++) {
        if (!keys[k]) continue;
        BRG_TRY(reserve_one((void **)&o->states, &o->cap_states, o->n_states, sizeof(state_ref), "state names"));
        char *name = join_name(s->name, keys[k]);
        if (!name) return brg_error(BRG_ERR_OOM, "optimizer: out of host memory for state names");
        brg_status st = alloc_state(o, name, s->n, &s->state[k]);
        if (st != BRG_OK) {
            free(name);
            return st;
        }
        o->states[o->n_states++] = (state_ref){.name = name, .slot = slot_index, .which = k};
    }
    return BRG_OK;
}

static brg_status check_new_slot(const brg_optimizer *o, const float *value, const float *grad, int64_t n,
                                 const char *name) {
    const char *kind = brg_optimizer_kind_name(o->cfg.kind);
    if (!name || !*name) return brg_error(BRG_ERR_INVALID_ARG, "%s: a parameter needs a non-empty name", kind);
    if (o->step > 0)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%s: cannot add parameter '%s' after step %lld; add every parameter before the first step",
                         kind, name, (long long)o->step);
    if (n < 0) return brg_error(BRG_ERR_INVALID_ARG, "%s: parameter '%s' has a negative size %lld", kind, name, (long long)n);
    if (n > 0 && (!value || !grad))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: parameter '%s' has no %s buffer", kind, name,
                         value ? "gradient" : "value");
    for (int i = 0; i < o->n_slots; i++)
        if (strcmp(o->slots[i].name, name) == 0)
            return brg_error(BRG_ERR_INVALID_ARG, "%s: parameter '%s' was added twice", kind, name);
    return BRG_OK;
}

static void discard_slot(brg_optimizer *o, slot *s, int first_state) {
    for (int i = first_state; i < o->n_states; i++) free(o->states[i].name);
    o->n_states = first_state;
    if (!o->arena)
        for (int k = 0; k < MAX_STATE; k++) free(s->state[k]);
    free(s->name);
}

static brg_status add_slot(brg_optimizer *o, float *value, const float *grad, int64_t n, int64_t first,
                           int64_t count, bool apply_weight_decay, const char *name) {
    BRG_TRY(check_new_slot(o, value, grad, n, name));
    BRG_TRY(reserve_one((void **)&o->slots, &o->cap_slots, o->n_slots, sizeof(slot), "parameters"));
    slot s = {.value = value ? value + first : NULL, .grad = grad ? grad + first : NULL, .n = count,
              .first = first, .whole = n, .decay = apply_weight_decay};
    s.name = join_name(name, NULL);
    if (!s.name) return brg_error(BRG_ERR_OOM, "optimizer: out of host memory for parameter names");
    int first_state = o->n_states;
    brg_status st = add_slot_state(o, &s, o->n_slots);
    if (st != BRG_OK) {
        discard_slot(o, &s, first_state);
        return st;
    }
    o->slots[o->n_slots++] = s;
    return BRG_OK;
}

brg_status brg_optimizer_add_param(brg_optimizer *o, float *value, const float *grad, int64_t n,
                                   bool apply_weight_decay, const char *name) {
    return add_slot(o, value, grad, n, 0, n, apply_weight_decay, name);
}

brg_status brg_optimizer_add_param_shard(brg_optimizer *o, float *value, const float *grad, int64_t n, int64_t first,
                                         int64_t count, bool apply_weight_decay, const char *name) {
    const char *kind = brg_optimizer_kind_name(o->cfg.kind);
    if (first < 0 || count < 0 || first > n || count > n - first)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: shard [%lld, %lld) of parameter '%s' lies outside its %lld elements",
                         kind, (long long)first, (long long)(first + count), name ? name : "", (long long)n);
    if (o->cfg.kind == BRG_OPTIMIZER_LAMB && count != n)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "LAMB cannot shard its state (replicated_tensor_sharding): its trust ratio needs the whole "
                         "parameter '%s'",
                         name ? name : "");
    return add_slot(o, value, grad, n, first, count, apply_weight_decay, name);
}

/* ---- Step count and state access ------------------------------------------------------- */

int64_t brg_optimizer_get_step(const brg_optimizer *o) { return o->step; }

brg_status brg_optimizer_set_step(brg_optimizer *o, int64_t step) {
    if (step < 0)
        return brg_error(BRG_ERR_INVALID_ARG, "%s: step must be >= 0 (got %lld)", brg_optimizer_kind_name(o->cfg.kind),
                         (long long)step);
    o->step = step;
    return BRG_OK;
}

int brg_optimizer_state_count(const brg_optimizer *o) { return o->n_states; }

const char *brg_optimizer_state_name(const brg_optimizer *o, int i) {
    BRG_ASSERT(i >= 0 && i < o->n_states);
    return o->states[i].name;
}

float *brg_optimizer_state_data(brg_optimizer *o, int i) {
    BRG_ASSERT(i >= 0 && i < o->n_states);
    return o->slots[o->states[i].slot].state[o->states[i].which];
}

int64_t brg_optimizer_state_numel(const brg_optimizer *o, int i) {
    BRG_ASSERT(i >= 0 && i < o->n_states);
    return o->slots[o->states[i].slot].n;
}

int64_t brg_optimizer_state_offset(const brg_optimizer *o, int i) {
    BRG_ASSERT(i >= 0 && i < o->n_states);
    return o->slots[o->states[i].slot].first;
}

int64_t brg_optimizer_state_param_numel(const brg_optimizer *o, int i) {
    BRG_ASSERT(i >= 0 && i < o->n_states);
    return o->slots[o->states[i].slot].whole;
}

size_t brg_optimizer_state_bytes(const brg_optimizer *o) {
    size_t bytes = 0;
    for (int i = 0; i < o->n_states; i++) bytes += (size_t)o->slots[o->states[i].slot].n * sizeof(float);
    return bytes;
}

int brg_optimizer_state_find(const brg_optimizer *o, const char *name) {
    for (int i = 0; i < o->n_states; i++)
        if (strcmp(o->states[i].name, name) == 0) return i;
    return -1;
}
