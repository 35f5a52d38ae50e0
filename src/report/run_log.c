/* A training run's history for the report: the JSON-lines log brigade train --log writes
 * ({"step", "loss", "lr", "tokens_per_s", ...} and {"step", "eval_loss", ...} lines), or, when
 * the run kept no log, the log_history of its newest checkpoint's trainer_state.json (no
 * tokens/s there). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "report/report.h"
#include "train/checkpoint_dir.h"

enum { MAX_LOG_LINE = 1 << 20 };

static brg_status append(report_series *s, double x, double y) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        double *nx = realloc(s->x, cap * sizeof *nx);
        if (nx) s->x = nx;
        double *ny = nx ? realloc(s->y, cap * sizeof *ny) : NULL;
        if (!ny) return brg_error(BRG_ERR_OOM, "out of memory reading the log");
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return BRG_OK;
}

static void series_free(report_series *s) {
    free(s->x);
    free(s->y);
    *s = (report_series){0};
}

void report_log_free(report_log *log) {
    series_free(&log->loss);
    series_free(&log->eval_loss);
    series_free(&log->lr);
    series_free(&log->tokens_per_s);
}

/* A value the entry has (null: a gap in the line, as the trainer writes a non-finite loss) goes
 * on the series; an absent one adds nothing. */
static brg_status take(const cJSON *e, const char *ctx, const char *key, double step, report_series *s) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, key);
    if (!v) return BRG_OK;
    if (cJSON_IsNull(v)) return append(s, step, NAN);
    double d;
    BRG_TRY(brg_json_get_double(e, ctx, key, true, 0, &d));
    return append(s, step, d);
}

static brg_status take_entry(const cJSON *e, const char *ctx, const char *lr_key, report_log *log) {
    if (!cJSON_IsObject(e)) return brg_error(BRG_ERR_FORMAT, "%s: not a JSON object", ctx);
    double step;
    BRG_TRY(brg_json_get_double(e, ctx, "step", true, 0, &step));
    BRG_TRY(take(e, ctx, "loss", step, &log->loss));
    BRG_TRY(take(e, ctx, "eval_loss", step, &log->eval_loss));
    BRG_TRY(take(e, ctx, lr_key, step, &log->lr));
    return take(e, ctx, "tokens_per_s", step, &log->tokens_per_s);
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return false;
    return true;
}

static brg_status read_lines(FILE *f, const char *path, report_log *log) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    brg_status st = BRG_OK;
    for (long number = 1; st == BRG_OK && (len = getline(&line, &cap, f)) >= 0; number++) {
        if (blank(line, (size_t)len)) continue;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--; /* the error's column is the line's */
        char ctx[600];
        snprintf(ctx, sizeof ctx, "--log %s line %ld", path, number);
        if (len > MAX_LOG_LINE) {
            st = brg_error(BRG_ERR_FORMAT, "%s: a line of %zd bytes is not a log line", ctx, len);
            break;
        }
        cJSON *e = NULL;
        st = brg_json_parse(line, (size_t)len, ctx, &e);
        if (st == BRG_OK) st = take_entry(e, ctx, "lr", log);
        cJSON_Delete(e);
    }
    if (st == BRG_OK && ferror(f)) st = brg_error(BRG_ERR_IO, "cannot read --log %s: %s", path, strerror(errno));
    free(line);
    return st;
}

brg_status report_log_read(const char *path, report_log *log) {
    *log = (report_log){0};
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open --log %s: %s", path, strerror(errno));
    brg_status st = read_lines(f, path, log);
    fclose(f);
    if (st != BRG_OK) report_log_free(log);
    snprintf(log->source, sizeof log->source, "%s", path);
    return st;
}

brg_status report_log_from_checkpoint(const char *out_dir, report_log *log, bool *found) {
    *log = (report_log){0};
    *found = false;
    char ckpt[4096], path[4200];
    if (brg_ckpt_dir_find(out_dir, ckpt, sizeof ckpt) != BRG_OK) {
        brg_clear_error();
        return BRG_OK;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/trainer_state.json", ckpt) >= sizeof path) return BRG_OK;
    cJSON *j = NULL;
    BRG_TRY(brg_json_load_file(path, BRG_JSON_DEFAULT_MAX_BYTES, &j));
    const cJSON *history = cJSON_GetObjectItemCaseSensitive(j, "log_history");
    brg_status st = cJSON_IsArray(history) ? BRG_OK
                                           : brg_error(BRG_ERR_FORMAT, "%s: log_history is not an array", path);
    int i = 0;
    for (const cJSON *e = history ? history->child : NULL; st == BRG_OK && e; e = e->next, i++) {
        char ctx[4300];
        snprintf(ctx, sizeof ctx, "%s: log_history[%d]", path, i);
        st = take_entry(e, ctx, "learning_rate", log);
    }
    cJSON_Delete(j);
    if (st != BRG_OK) {
        report_log_free(log);
        return st;
    }
    snprintf(log->source, sizeof log->source, "%s (log_history)", path);
    *found = true;
    return BRG_OK;
}
