/* Pipeline schedules checked as tables and by simulation. */
#include "brigade/schedule.h"
#include "test_util.h"

static void expect_row(const brg_schedule *s, int stage, const char *want) {
    char got[512] = "";
    size_t o = 0;
    for (int i = 0; i < s->length[stage]; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%c%d", i ? " " : "",
                              s->steps[stage][i].pass == BRG_PASS_FORWARD ? 'F' : 'B', s->steps[stage][i].micro_batch);
    CHECK_MSG(strcmp(got, want) == 0, "%s stage %d: got '%s', want '%s'", brg_schedule_kind_name(s->kind), stage, got,
              want);
}

static void test_tables(void) {
    brg_schedule s;
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 4, 6, &s));
    expect_row(&s, 0, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
    expect_row(&s, 1, "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5");
    expect_row(&s, 2, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
    expect_row(&s, 3, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    brg_schedule_free(&s);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_1F1B, 4, 2, &s));
    expect_row(&s, 0, "F0 F1 B0 B1");
    expect_row(&s, 3, "F0 B0 F1 B1");
    brg_schedule_free(&s);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_GPIPE, 2, 3, &s));
    expect_row(&s, 0, "F0 F1 F2 B0 B1 B2");
    expect_row(&s, 1, "F0 F1 F2 B0 B1 B2");
    brg_schedule_free(&s);
    CHECK_OK(brg_schedule_build(BRG_SCHEDULE_INFERENCE, 3, 2, &s));
    expect_row(&s, 2, "F0 F1");
    brg_schedule_free(&s);
}

/* Every (stage, micro-batch) runs F then B exactly once; in-flight bounds; the simulated
 * length is the fill-drain optimum 2 (m + p - 1) for unit-cost steps. */
static void test_properties(void) {
    brg_schedule_kind kinds[2] = {BRG_SCHEDULE_GPIPE, BRG_SCHEDULE_1F1B};
    for (int k = 0; k < 2; k++)
        for (int p = 1; p <= 6; p++)
            for (int m = 1; m <= 9; m++) {
                brg_schedule s;
                CHECK_OK(brg_schedule_build(kinds[k], p, m, &s));
                for (int st = 0; st < p; st++) {
                    int fseen[16] = {0}, bseen[16] = {0}, ok = 1;
                    for (int i = 0; i < s.length[st]; i++) {
                        brg_schedule_step x = s.steps[st][i];
                        if (x.pass == BRG_PASS_FORWARD) fseen[x.micro_batch]++;
                        else {
                            ok &= fseen[x.micro_batch] == 1;
                            bseen[x.micro_batch]++;
                        }
                    }
                    for (int i = 0; i < m; i++) ok &= fseen[i] == 1 && bseen[i] == 1;
                    CHECK_MSG(ok, "%s p=%d m=%d stage %d", brg_schedule_kind_name(kinds[k]), p, m, st);
                    int inflight = brg_schedule_max_in_flight(&s, st);
                    if (kinds[k] == BRG_SCHEDULE_1F1B) CHECK(inflight == (p - st < m ? p - st : m));
                    else CHECK(inflight == m);
                }
                int slots = 0;
                CHECK_OK(brg_schedule_simulate(&s, &slots));
                CHECK_MSG(slots == 2 * (m + p - 1), "%s p=%d m=%d: %d slots", brg_schedule_kind_name(kinds[k]), p, m,
                          slots);
                brg_schedule_free(&s);
            }
}

static void test_errors_and_names(void) {
    brg_schedule s;
    CHECK_ERR(brg_schedule_build(BRG_SCHEDULE_1F1B, 0, 4, &s), BRG_ERR_INVALID_ARG, "at least 1 stage");
    brg_schedule_kind k;
    CHECK_OK(brg_schedule_kind_parse("gpipe", &k));
    CHECK(k == BRG_SCHEDULE_GPIPE);
    CHECK_ERR(brg_schedule_kind_parse("zigzag", &k), BRG_ERR_INVALID_ARG, "'zigzag'");
    CHECK_NEAR(brg_schedule_ideal_efficiency(2, 8), 8.0 / 9.0, 1e-12);
}

int main(void) {
    test_tables();
    test_properties();
    test_errors_and_names();
    return test_finish();
}
