/* The progress reporter's formatting (src/cli/progress.c) with an injected clock: durations,
 * rates, the bar, the plain lines and how often they come. */
#include <unistd.h>

#include "cli/progress.h"
#include "test_util.h"

static double fake_now;
static double fake_clock(void *ctx) {
    (void)ctx;
    return fake_now;
}

static void test_pieces(void) {
    char b[256];
    cli_progress_duration(b, sizeof b, 19.4); CHECK(strcmp(b, "0:19") == 0);
    cli_progress_duration(b, sizeof b, 725); CHECK(strcmp(b, "12:05") == 0);
    cli_progress_duration(b, sizeof b, 3723); CHECK(strcmp(b, "1:02:03") == 0);
    cli_progress_duration(b, sizeof b, -1); CHECK(strcmp(b, "?") == 0);
    cli_progress_duration(b, sizeof b, NAN); CHECK(strcmp(b, "?") == 0);
    cli_progress_rate(b, sizeof b, 3.14159); CHECK(strcmp(b, "3.1") == 0);
    cli_progress_rate(b, sizeof b, 0.25); CHECK(strcmp(b, "0.25") == 0);
    cli_progress_rate(b, sizeof b, 42.4); CHECK(strcmp(b, "42") == 0);
    cli_progress_rate(b, sizeof b, -1); CHECK(strcmp(b, "?") == 0);
    cli_progress_format_bar(b, sizeof b, 42, 100, "steps", 3.1, 19, NULL, 10);
    CHECK_MSG(strcmp(b, "[====>     ] 42/100 steps  3.1 steps/s  ETA 0:19") == 0, "bar '%s'", b);
    cli_progress_format_bar(b, sizeof b, 100, 100, "steps", 3.1, 0, "loss 2.5", 10);
    CHECK_MSG(strcmp(b, "[==========] 100/100 steps  3.1 steps/s  ETA 0:00  loss 2.5") == 0, "bar '%s'", b);
    cli_progress_format_bar(b, sizeof b, 0, 100, "steps", -1, -1, NULL, 4);
    CHECK_MSG(strcmp(b, "[>   ] 0/100 steps  ? steps/s  ETA ?") == 0, "bar '%s'", b);
    cli_progress_format_bar(b, sizeof b, 12, 0, "lines", 2.5, -1, NULL, 10); /* no total: no bar */
    CHECK_MSG(strcmp(b, "12 lines  2.5 lines/s") == 0, "bar '%s'", b);
    cli_progress_format_plain(b, sizeof b, "embed", 42, 100, "lines", 3.1, 19, NULL);
    CHECK_MSG(strcmp(b, "embed: 42/100 lines  3.1 lines/s  ETA 0:19") == 0, "plain '%s'", b);
}

/* Reads back what a reporter wrote to a temporary file. */
static void run_reporter(double interval, int64_t total, char *out, size_t n) {
    char env[32];
    snprintf(env, sizeof env, "%g", interval);
    setenv("BRIGADE_PROGRESS_INTERVAL", env, 1);
    FILE *f = tmpfile();
    cli_progress p;
    cli_progress_init(&p, f, "embed", "lines", total);
    fake_now = 100;
    cli_progress_set_clock(&p, fake_clock, NULL);
    CHECK(!p.tty);
    for (int i = 1; i <= 10; i++) {
        fake_now = 100 + 2.0 * i; /* a line every 2 s: 0.5 lines/s */
        cli_progress_update(&p, i, NULL);
    }
    cli_progress_finish(&p);
    rewind(f);
    size_t len = fread(out, 1, n - 1, f);
    out[len] = 0;
    fclose(f);
    unsetenv("BRIGADE_PROGRESS_INTERVAL");
}

static void test_plain_lines(void) {
    char got[4096];
    /* Every 5 s: after 6, 10 and 16... s; the last update is the end, which finish reports. */
    run_reporter(5, 10, got, sizeof got);
    const char *want = "embed: 3/10 lines  0.5 lines/s  ETA 0:14\n"
                       "embed: 6/10 lines  0.5 lines/s  ETA 0:08\n"
                       "embed: 9/10 lines  0.5 lines/s  ETA 0:02\n"
                       "embed: 10 lines in 0:20 (0.5 lines/s)\n";
    CHECK_MSG(strcmp(got, want) == 0, "plain output:\n%s", got);
    /* Work shorter than the interval leaves no trace. */
    run_reporter(60, 10, got, sizeof got);
    CHECK_MSG(got[0] == 0, "short work printed:\n%s", got);
    /* Without a total: the count and the rate. */
    run_reporter(7, 0, got, sizeof got);
    CHECK_MSG(strncmp(got, "embed: 4 lines  0.5 lines/s\nembed: 8 lines  0.5 lines/s\nembed: 10 lines in 0:20", 79) == 0,
              "no total:\n%s", got);
    /* Silent: nothing, whatever is asked of it. */
    cli_progress p;
    cli_progress_init(&p, NULL, "embed", "lines", 3);
    cli_progress_update(&p, 1, NULL);
    cli_progress_finish(&p);
    CHECK(p.plain_lines == 0);
}

/* A resumed run's rate counts the steps it ran, not the ones before it. */
static void test_first(void) {
    setenv("BRIGADE_PROGRESS_INTERVAL", "0", 1);
    FILE *f = tmpfile();
    cli_progress p;
    cli_progress_init(&p, f, "train", "steps", 100);
    fake_now = 0;
    cli_progress_set_clock(&p, fake_clock, NULL);
    p.first = 50;
    fake_now = 10;
    cli_progress_update(&p, 60, NULL);
    rewind(f);
    char got[256] = "";
    size_t len = fread(got, 1, sizeof got - 1, f);
    got[len] = 0;
    CHECK_MSG(strcmp(got, "train: 60/100 steps  1 steps/s  ETA 0:40\n") == 0, "resumed: '%s'", got);
    fclose(f);
    unsetenv("BRIGADE_PROGRESS_INTERVAL");
}

int main(void) {
    test_pieces();
    test_plain_lines();
    test_first();
    return test_finish();
}
