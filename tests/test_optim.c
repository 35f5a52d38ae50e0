/* Optimizers against PyTorch: every case in tests/fixtures/optim (written by
 * tools/optim_fixtures.py) is replayed for its 10 steps, with its stored gradients, its schedule
 * (through brg_lr_at) and its gradient clipping (through brg_clip_grad_norm); parameters after
 * every step and the final optimizer state must match within 1e-5 (relative above 1 in
 * magnitude, absolute below). */
#include <dirent.h>

#include "test_util.h"

#include "brigade/lr_schedule.h"
#include "brigade/optim.h"

#define FIXTURE_DIR "tests/fixtures/optim/"
#define MAX_PARAMS 8
#define TOL 1e-5

/* Files in FIXTURE_DIR that are not optimizer runs. */
static const char *const other_fixtures[] = {"lr_schedules.safetensors", "clip_grad_norm.safetensors"};
#define MIN_CASES 11 /* what tools/optim_fixtures.py writes today */

typedef struct fixture {
    brg_safetensors *st;
    brg_optimizer_config cfg;
    int n_params;
    char names[MAX_PARAMS][64];
    bool no_decay[MAX_PARAMS];
    float *value[MAX_PARAMS];
    float *grad[MAX_PARAMS];
    int64_t numel[MAX_PARAMS];
    int steps;
    bool scheduled;
    brg_lr_schedule schedule;
    float max_grad_norm; /* 0: no clipping */
} fixture;

static const char *meta(const fixture *f, const char *key) { return brg_safetensors_metadata(f->st, key); }

static void meta_double(const fixture *f, const char *key, double *out) {
    const char *v = meta(f, key);
    if (v) *out = strtod(v, NULL);
}

static void meta_bool(const fixture *f, const char *key, bool *out) {
    const char *v = meta(f, key);
    if (v) *out = strcmp(v, "True") == 0;
}

static bool list_contains(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

static void parse_config(fixture *f) {
    brg_optimizer_kind kind = BRG_OPTIMIZER_SGD;
    CHECK_OK(brg_optimizer_kind_parse(meta(f, "kind"), &kind));
    f->cfg = brg_optimizer_config_default(kind);
    meta_double(f, "lr", &f->cfg.lr);
    meta_double(f, "beta1", &f->cfg.betas[0]);
    meta_double(f, "beta2", &f->cfg.betas[1]);
    meta_double(f, "eps", &f->cfg.eps);
    meta_double(f, "weight_decay", &f->cfg.weight_decay);
    meta_double(f, "momentum", &f->cfg.momentum);
    meta_double(f, "dampening", &f->cfg.dampening);
    meta_double(f, "alpha", &f->cfg.alpha);
    meta_double(f, "max_weight_norm", &f->cfg.max_weight_norm);
    meta_bool(f, "nesterov", &f->cfg.nesterov);
    meta_bool(f, "centered", &f->cfg.centered);
    meta_bool(f, "bias_correction", &f->cfg.bias_correction);
}

static void parse_run(fixture *f) {
    f->steps = atoi(meta(f, "steps"));
    const char *sched = meta(f, "schedule");
    f->scheduled = sched != NULL;
    if (sched) {
        CHECK_OK(brg_lr_schedule_kind_parse(sched, &f->schedule.kind));
        f->schedule.warmup_steps = atoll(meta(f, "warmup_steps"));
        f->schedule.total_steps = atoll(meta(f, "total_steps"));
        CHECK_OK(brg_lr_schedule_validate(&f->schedule));
    }
    const char *mgn = meta(f, "max_grad_norm");
    f->max_grad_norm = mgn ? strtof(mgn, NULL) : 0.0f;
}

static void parse_params(fixture *f) {
    const char *list = meta(f, "params");
    f->n_params = 0;
    for (const char *p = list; p && *p && f->n_params < MAX_PARAMS;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        snprintf(f->names[f->n_params], sizeof f->names[0], "%.*s", (int)len, p);
        f->no_decay[f->n_params] = list_contains(meta(f, "no_decay"), f->names[f->n_params]);
        f->n_params++;
        p = end ? end + 1 : NULL;
    }
    for (int i = 0; i < f->n_params; i++) {
        char key[128];
        snprintf(key, sizeof key, "init.%s", f->names[i]);
        f->value[i] = test_read_f32(f->st, key, &f->numel[i]);
        f->grad[i] = calloc((size_t)f->numel[i], sizeof(float));
    }
}

static bool fixture_open(fixture *f, const char *name) {
    memset(f, 0, sizeof *f);
    char path[256];
    snprintf(path, sizeof path, FIXTURE_DIR "%s.safetensors", name);
    brg_status s = brg_safetensors_open(path, &f->st);
    CHECK_MSG(s == BRG_OK, "%s", brg_last_error());
    if (s != BRG_OK) return false;
    parse_config(f);
    parse_run(f);
    parse_params(f);
    return f->n_params > 0 && f->steps > 0;
}

static void fixture_close(fixture *f) {
    for (int i = 0; i < f->n_params; i++) {
        free(f->value[i]);
        free(f->grad[i]);
    }
    brg_safetensors_close(f->st);
}

/* |a-b| scaled by max(1, |b|): absolute for small values, relative for large ones. */
static double scaled_diff(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= m)) m = d;
    }
    return m;
}

static void load_grads(fixture *f, int step) {
    for (int i = 0; i < f->n_params; i++) {
        char key[128];
        snprintf(key, sizeof key, "grad.%d.%s", step, f->names[i]);
        float *g = test_read_f32(f->st, key, NULL);
        if (g) memcpy(f->grad[i], g, (size_t)f->numel[i] * sizeof(float));
        free(g);
    }
}

static void clip_step(fixture *f, const char *name, int step, const float *ref_norms) {
    double total = 0;
    CHECK_OK(brg_clip_grad_norm(f->grad, f->numel, f->n_params, f->max_grad_norm, &total));
    CHECK_MSG(fabs(total - ref_norms[step]) <= 1e-6 * ref_norms[step], "%s step %d: grad norm %.9g vs torch %.9g",
              name, step, total, (double)ref_norms[step]);
}

static float step_lr(const fixture *f, const char *name, int step, const float *ref_lrs) {
    if (!f->scheduled) return ref_lrs[step];
    float lr = brg_lr_at(&f->schedule, (float)f->cfg.lr, step);
    CHECK_MSG(fabs((double)lr - ref_lrs[step]) <= 2.5e-7 * fabs((double)ref_lrs[step]),
              "%s step %d: lr %.9g vs transformers %.9g", name, step, (double)lr, (double)ref_lrs[step]);
    return lr;
}

static double compare_params(const fixture *f, int step) {
    double worst = 0;
    for (int i = 0; i < f->n_params; i++) {
        char key[128];
        snprintf(key, sizeof key, "param.%d.%s", step, f->names[i]);
        float *ref = test_read_f32(f->st, key, NULL);
        if (!ref) return INFINITY;
        double d = scaled_diff(f->value[i], ref, f->numel[i]);
        worst = d > worst || d != d ? d : worst;
        free(ref);
    }
    return worst;
}

static int count_fixture_states(const fixture *f) {
    int n = 0;
    for (size_t i = 0; i < brg_safetensors_count(f->st); i++)
        if (strncmp(brg_safetensors_name(f->st, i), "state.", 6) == 0) n++;
    return n;
}

static double compare_state(const fixture *f, brg_optimizer *opt, const char *name) {
    CHECK_MSG(brg_optimizer_state_count(opt) == count_fixture_states(f), "%s: %d state tensors, torch has %d", name,
              brg_optimizer_state_count(opt), count_fixture_states(f));
    double worst = 0;
    for (int i = 0; i < brg_optimizer_state_count(opt); i++) {
        char key[160];
        snprintf(key, sizeof key, "state.%s", brg_optimizer_state_name(opt, i));
        float *ref = test_read_f32(f->st, key, NULL);
        if (!ref) return INFINITY;
        double d = scaled_diff(brg_optimizer_state_data(opt, i), ref, brg_optimizer_state_numel(opt, i));
        worst = d > worst || d != d ? d : worst;
        free(ref);
    }
    return worst;
}

static void run_case(const char *name) {
    fixture f;
    if (!fixture_open(&f, name)) {
        CHECK_MSG(false, "fixture %s could not be read", name);
        fixture_close(&f);
        return;
    }
    brg_optimizer *opt = NULL;
    CHECK_OK(brg_optimizer_create(&f.cfg, NULL, &opt));
    for (int i = 0; opt && i < f.n_params; i++)
        CHECK_OK(brg_optimizer_add_param(opt, f.value[i], f.grad[i], f.numel[i], !f.no_decay[i], f.names[i]));
    float *ref_lrs = test_read_f32(f.st, "lr", NULL);
    float *ref_norms = f.max_grad_norm > 0 ? test_read_f32(f.st, "grad_norm", NULL) : NULL;
    double worst = 0;
    for (int k = 0; opt && ref_lrs && k < f.steps; k++) {
        load_grads(&f, k);
        if (ref_norms) clip_step(&f, name, k, ref_norms);
        CHECK_OK(brg_optimizer_step(opt, step_lr(&f, name, k, ref_lrs)));
        double d = compare_params(&f, k);
        worst = d > worst || d != d ? d : worst;
    }
    double state_diff = opt ? compare_state(&f, opt, name) : INFINITY;
    CHECK_MSG(worst <= TOL, "%s: parameters differ from torch by %.3g", name, worst);
    CHECK_MSG(state_diff <= TOL, "%s: optimizer state differs from torch by %.3g", name, state_diff);
    CHECK(opt && brg_optimizer_get_step(opt) == f.steps);
    printf("%-28s params max diff %.3g, state max diff %.3g\n", name, worst, state_diff);
    free(ref_lrs);
    free(ref_norms);
    brg_optimizer_destroy(opt);
    fixture_close(&f);
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every <case>.safetensors in FIXTURE_DIR, sorted, as malloc'd names without the extension. */
static int list_cases(char **names, int max) {
    DIR *dir = opendir(FIXTURE_DIR);
    CHECK_MSG(dir != NULL, "cannot open %s (run from the source root)", FIXTURE_DIR);
    if (!dir) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL && n < max;) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || strcmp(dot, ".safetensors") != 0) continue;
        bool other = false;
        for (size_t i = 0; i < sizeof other_fixtures / sizeof other_fixtures[0]; i++)
            other = other || strcmp(e->d_name, other_fixtures[i]) == 0;
        if (!other) names[n++] = strndup(e->d_name, (size_t)(dot - e->d_name));
    }
    closedir(dir);
    qsort(names, (size_t)n, sizeof names[0], compare_names);
    return n;
}

int main(void) {
    char *names[64];
    int n = list_cases(names, 64);
    CHECK_MSG(n >= MIN_CASES, "%d optimizer fixtures in %s, expected at least %d", n, FIXTURE_DIR, MIN_CASES);
    for (int i = 0; i < n; i++) {
        run_case(names[i]);
        free(names[i]);
    }
    return test_finish();
}
