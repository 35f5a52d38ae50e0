/* LR schedules against transformers (tests/fixtures/optim/lr_schedules.safetensors: the lr of
 * every step as LambdaLR with transformers' lambdas gives it), hand-computed lambdas, and name
 * parsing and validation. */
#include <float.h>

#include "test_util.h"

#include "brigade/lr_schedule.h"

#define FIXTURE "tests/fixtures/optim/lr_schedules.safetensors"

/* Relative difference in units of float's epsilon (0 when both are 0). */
static double ulps(float a, float b) {
    if (a == b) return 0;
    return fabs((double)a - b) / (fmax(fabs((double)a), fabs((double)b)) * FLT_EPSILON);
}

static void check_fixture_entry(const brg_safetensors *st, size_t index) {
    const char *name = brg_safetensors_name(st, index);
    const char *meta = brg_safetensors_metadata(st, name);
    char kind_name[48];
    long long warmup = 0, total = 0;
    double base_lr = 0;
    int got = meta ? sscanf(meta, "kind=%47s warmup=%lld total=%lld base_lr=%lf", kind_name, &warmup, &total, &base_lr) : 0;
    CHECK_MSG(got == 4, "%s: bad metadata '%s'", name, meta ? meta : "(none)");
    if (got != 4) return;
    brg_lr_schedule s = {.warmup_steps = warmup, .total_steps = total};
    CHECK_OK(brg_lr_schedule_kind_parse(kind_name, &s.kind));
    CHECK_OK(brg_lr_schedule_validate(&s));
    brg_tensor t;
    CHECK_OK(brg_safetensors_get(st, name, &t));
    double worst = 0;
    int64_t steps = brg_tensor_numel(&t);
    for (int64_t k = 0; k < steps; k++) {
        float want = (float)brg_tensor_get(&t, k);
        float lr = brg_lr_at(&s, (float)base_lr, k);
        worst = fmax(worst, ulps(lr, want));
        /* the lambda itself is transformers' to the last bit: with torch's double base lr the
         * product rounds to exactly the stored value */
        CHECK_MSG((float)(base_lr * brg_lr_lambda(&s, k)) == want, "%s step %lld: lambda %.17g", name, (long long)k,
                  brg_lr_lambda(&s, k));
        /* the base lr is rounded to float before scaling, so allow one rounding more than torch */
        CHECK_MSG(ulps(lr, want) <= 2.0, "%s step %lld: lr %.9g vs transformers %.9g", name, (long long)k, (double)lr,
                  (double)want);
    }
    printf("%-24s %-20s W=%-3lld T=%-3lld %3lld steps, max diff %.1f ulp\n", name, kind_name, warmup, total,
           (long long)steps, worst);
}

static void check_fixture(void) {
    brg_safetensors *st = NULL;
    brg_status s = brg_safetensors_open(FIXTURE, &st);
    CHECK_MSG(s == BRG_OK, "%s", brg_last_error());
    if (s != BRG_OK) return;
    CHECK(brg_safetensors_count(st) >= 4);
    for (size_t i = 0; i < brg_safetensors_count(st); i++) check_fixture_entry(st, i);
    brg_safetensors_close(st);
}

static void check_by_hand(void) {
    brg_lr_schedule lin = {BRG_LR_SCHEDULE_LINEAR, 4, 12};
    CHECK(brg_lr_lambda(&lin, 0) == 0.0);
    CHECK(brg_lr_lambda(&lin, 2) == 0.5);
    CHECK(brg_lr_lambda(&lin, 4) == 1.0);
    CHECK(brg_lr_lambda(&lin, 8) == 0.5);
    CHECK(brg_lr_lambda(&lin, 12) == 0.0);
    CHECK(brg_lr_lambda(&lin, 20) == 0.0); /* clamped at 0 past the end */

    brg_lr_schedule cos_s = {BRG_LR_SCHEDULE_COSINE, 2, 12};
    CHECK(brg_lr_lambda(&cos_s, 1) == 0.5);
    CHECK(brg_lr_lambda(&cos_s, 2) == 1.0);
    CHECK_NEAR(brg_lr_lambda(&cos_s, 7), 0.5, 1e-15);
    CHECK(brg_lr_lambda(&cos_s, 12) == 0.0);
    /* num_cycles 0.5: past the end the cosine comes back up, as in transformers */
    CHECK_NEAR(brg_lr_lambda(&cos_s, 17), 0.5, 1e-15);

    brg_lr_schedule cw = {BRG_LR_SCHEDULE_CONSTANT_WITH_WARMUP, 10, 0};
    CHECK(brg_lr_lambda(&cw, 5) == 0.5);
    CHECK(brg_lr_lambda(&cw, 10) == 1.0);
    CHECK(brg_lr_lambda(&cw, 1000000) == 1.0);

    brg_lr_schedule c = {BRG_LR_SCHEDULE_CONSTANT, 10, 100};
    CHECK(brg_lr_lambda(&c, 0) == 1.0); /* CONSTANT has no warmup */
    CHECK(brg_lr_at(&c, 3e-4f, 50) == 3e-4f);

    brg_lr_schedule edge = {BRG_LR_SCHEDULE_LINEAR, 0, 0}; /* max(1, T - W) keeps it finite */
    CHECK(brg_lr_lambda(&edge, 0) == 0.0);
    CHECK(brg_lr_at(&lin, 1e-3f, 2) == (float)(1e-3f * 0.5));
}

static void check_names(void) {
    const char *names[] = {"constant", "constant_with_warmup", "linear", "cosine"};
    for (int i = 0; i < BRG_LR_SCHEDULE_KIND_COUNT; i++) {
        brg_lr_schedule_kind k = BRG_LR_SCHEDULE_KIND_COUNT;
        CHECK_OK(brg_lr_schedule_kind_parse(names[i], &k));
        CHECK(k == (brg_lr_schedule_kind)i);
        CHECK(strcmp(brg_lr_schedule_kind_name(k), names[i]) == 0);
    }
    brg_lr_schedule_kind k;
    CHECK_ERR(brg_lr_schedule_kind_parse("linaer", &k), BRG_ERR_INVALID_ARG, "unknown lr schedule 'linaer'");
    CHECK_ERR(brg_lr_schedule_kind_parse("Linear", &k), BRG_ERR_INVALID_ARG, "'Linear'");
    CHECK_ERR(brg_lr_schedule_kind_parse("", &k), BRG_ERR_INVALID_ARG, "''");
    CHECK_ERR(brg_lr_schedule_kind_parse("cosine_with_restarts", &k), BRG_ERR_UNSUPPORTED,
              "'cosine_with_restarts' is not implemented");
    CHECK_ERR(brg_lr_schedule_kind_parse(NULL, &k), BRG_ERR_INVALID_ARG, "lr schedule");
}

static void check_validate(void) {
    brg_lr_schedule s = {BRG_LR_SCHEDULE_LINEAR, -1, 10};
    CHECK_ERR(brg_lr_schedule_validate(&s), BRG_ERR_INVALID_ARG, "warmup_steps must be >= 0 (got -1)");
    s = (brg_lr_schedule){BRG_LR_SCHEDULE_COSINE, 0, -5};
    CHECK_ERR(brg_lr_schedule_validate(&s), BRG_ERR_INVALID_ARG, "total_steps must be >= 0 (got -5)");
    s = (brg_lr_schedule){(brg_lr_schedule_kind)9, 0, 0};
    CHECK_ERR(brg_lr_schedule_validate(&s), BRG_ERR_INVALID_ARG, "kind 9");
    s = (brg_lr_schedule){BRG_LR_SCHEDULE_COSINE, 100, 10}; /* warmup past the end: allowed, as upstream */
    CHECK_OK(brg_lr_schedule_validate(&s));
    CHECK(brg_lr_lambda(&s, 50) == 0.5);
    CHECK(brg_lr_lambda(&s, 100) == 1.0);
}

int main(void) {
    check_fixture();
    check_by_hand();
    check_names();
    check_validate();
    return test_finish();
}
