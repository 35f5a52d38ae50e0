/* Optimizer configuration: torch's defaults per kind, validation with torch's rules, names. */
#include <math.h>
#include <string.h>

#include "brigade/optim.h"

static const char *const kind_names[BRG_OPTIMIZER_KIND_COUNT] = {
    [BRG_OPTIMIZER_SGD] = "sgd",         [BRG_OPTIMIZER_ADAM] = "adam", [BRG_OPTIMIZER_ADAMW] = "adamw",
    [BRG_OPTIMIZER_RMSPROP] = "rmsprop", [BRG_OPTIMIZER_LAMB] = "lamb",
};

static bool kind_valid(brg_optimizer_kind kind) { return (int)kind >= 0 && kind < BRG_OPTIMIZER_KIND_COUNT; }

const char *brg_optimizer_kind_name(brg_optimizer_kind kind) {
    return kind_valid(kind) ? kind_names[kind] : "unknown";
}

brg_status brg_optimizer_kind_parse(const char *name, brg_optimizer_kind *out) {
    if (!name) return brg_error(BRG_ERR_INVALID_ARG, "optimizer: no name given");
    for (int k = 0; k < BRG_OPTIMIZER_KIND_COUNT; k++) {
        if (strcmp(name, kind_names[k]) == 0) {
            *out = (brg_optimizer_kind)k;
            return BRG_OK;
        }
    }
    /* transformers' TrainingArguments.optim spelling of torch.optim.AdamW */
    if (strcmp(name, "adamw_torch") == 0) {
        *out = BRG_OPTIMIZER_ADAMW;
        return BRG_OK;
    }
    return brg_error(BRG_ERR_INVALID_ARG,
                     "unknown optimizer '%s'; expected one of: sgd, adam, adamw (adamw_torch), rmsprop, lamb",
                     name);
}

brg_optimizer_config brg_optimizer_config_default(brg_optimizer_kind kind) {
    brg_optimizer_config c = {
        .kind = kind,
        .lr = 1e-3,
        .betas = {0.9, 0.999},
        .eps = 1e-8,
        .weight_decay = 0.0,
        .momentum = 0.0,
        .dampening = 0.0,
        .nesterov = false,
        .alpha = 0.99,
        .centered = false,
        .bias_correction = true,
        .max_weight_norm = 65500.0, /* poptorch: the fp16 maximum */
    };
    if (kind == BRG_OPTIMIZER_ADAMW || kind == BRG_OPTIMIZER_LAMB) c.weight_decay = 1e-2;
    if (kind == BRG_OPTIMIZER_RMSPROP) c.lr = 1e-2;
    return c;
}

/* `!(x >= 0)` so that NaN fails too. */
static brg_status check_nonneg(const char *kind, const char *field, double x) {
    if (!(x >= 0.0) || isinf(x))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: %s must be a finite number >= 0 (got %g)", kind, field, x);
    return BRG_OK;
}

static brg_status check_beta(const char *kind, int i, double b) {
    if (!(b >= 0.0 && b < 1.0))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: betas[%d] = %g is outside [0, 1)", kind, i, b);
    return BRG_OK;
}

static brg_status validate_adam_like(const brg_optimizer_config *c, const char *kind) {
    BRG_TRY(check_nonneg(kind, "eps", c->eps));
    BRG_TRY(check_beta(kind, 0, c->betas[0]));
    BRG_TRY(check_beta(kind, 1, c->betas[1]));
    if (c->kind == BRG_OPTIMIZER_LAMB && !(c->max_weight_norm >= 0.0))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: max_weight_norm must be >= 0 or INFINITY (got %g)", kind,
                         c->max_weight_norm);
    return BRG_OK;
}

static brg_status validate_sgd(const brg_optimizer_config *c, const char *kind) {
    BRG_TRY(check_nonneg(kind, "momentum", c->momentum));
    if (!isfinite(c->dampening))
        return brg_error(BRG_ERR_INVALID_ARG, "%s: dampening must be finite (got %g)", kind, c->dampening);
    if (c->nesterov && (c->momentum <= 0.0 || c->dampening != 0.0))
        return brg_error(BRG_ERR_INVALID_ARG,
                         "%s: nesterov requires momentum > 0 and dampening == 0 (got momentum %g, dampening %g)",
                         kind, c->momentum, c->dampening);
    return BRG_OK;
}

static brg_status validate_rmsprop(const brg_optimizer_config *c, const char *kind) {
    BRG_TRY(check_nonneg(kind, "eps", c->eps));
    BRG_TRY(check_nonneg(kind, "momentum", c->momentum));
    BRG_TRY(check_nonneg(kind, "alpha", c->alpha));
    return BRG_OK;
}

brg_status brg_optimizer_config_validate(const brg_optimizer_config *c) {
    if (!c) return brg_error(BRG_ERR_INVALID_ARG, "optimizer: no config given");
    if (!kind_valid(c->kind))
        return brg_error(BRG_ERR_INVALID_ARG, "optimizer: kind %d is not an optimizer kind", (int)c->kind);
    const char *kind = kind_names[c->kind];
    BRG_TRY(check_nonneg(kind, "lr", c->lr));
    BRG_TRY(check_nonneg(kind, "weight_decay", c->weight_decay));
    switch (c->kind) {
    case BRG_OPTIMIZER_SGD: return validate_sgd(c, kind);
    case BRG_OPTIMIZER_RMSPROP: return validate_rmsprop(c, kind);
    default: return validate_adam_like(c, kind);
    }
}

int brg_optimizer_state_floats(const brg_optimizer_config *c) {
    switch (c->kind) {
    case BRG_OPTIMIZER_SGD: return c->momentum != 0.0f ? 1 : 0;
    case BRG_OPTIMIZER_RMSPROP: return 1 + (c->momentum > 0.0f) + (c->centered ? 1 : 0);
    default: return 2; /* Adam, AdamW, LAMB: two moments */
    }
}
