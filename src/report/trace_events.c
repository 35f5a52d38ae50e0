/* A --trace file read for the report: the device tracks (thread_name "device N ..."), on each its
 * forward, backward and recomputation passes (args block, micro_batch), optimizer steps,
 * transfers and its "memory device N" counter; and the host's "step N" spans, which say where
 * each pipeline step begins and ends. Events of other tracks are skipped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/json.h"
#include "report/report.h"

/* Traces of long runs are large; the recorder caps a thread at about a million events. */
#define MAX_TRACE_BYTES ((size_t)4 << 30)

void report_trace_free(report_trace *t) {
    for (int i = 0; i < t->n_devices; i++) {
        free(t->devices[i].spans);
        free(t->devices[i].memory);
    }
    free(t->devices);
    free(t->steps);
    *t = (report_trace){0};
}

static bool grow(void **p, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return true;
    size_t c = *cap ? *cap * 2 : 64;
    void *q = realloc(*p, c * size);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static report_device *device_of(report_trace *t, int tid) {
    for (int i = 0; i < t->n_devices; i++)
        if (t->devices[i].tid == tid) return &t->devices[i];
    return NULL;
}

static double number(const cJSON *o, const char *key, double def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const char *string(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The first pass: every event is an object with a "ph"; the device tracks by their names. */
static brg_status find_devices(const cJSON *events, const char *path, report_trace *t) {
    size_t cap = 0;
    int i = 0;
    for (const cJSON *e = events->child; e; e = e->next, i++) {
        const char *ph = cJSON_IsObject(e) ? string(e, "ph") : NULL;
        if (!ph) return brg_error(BRG_ERR_FORMAT, "--trace %s: event %d is not a trace event (no \"ph\")", path, i);
        const char *name = string(e, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        const char *track = args ? string(args, "name") : NULL;
        if (strcmp(ph, "M") || !name || strcmp(name, "thread_name") || !track || strncmp(track, "device ", 7)) continue;
        const int tid = (int)number(e, "tid", -1);
        if (tid < 0 || device_of(t, tid)) continue;
        if (!grow((void **)&t->devices, &cap, (size_t)t->n_devices, sizeof *t->devices))
            return brg_error(BRG_ERR_OOM, "out of memory reading --trace %s", path);
        report_device *d = &t->devices[t->n_devices++];
        *d = (report_device){.tid = tid};
        snprintf(d->name, sizeof d->name, "%s", track);
    }
    return BRG_OK;
}

static bool starts(const char *s, const char *prefix) { return s && strncmp(s, prefix, strlen(prefix)) == 0; }

/* A device track's span, or false when it is none the report draws. */
static bool classify(const char *cat, const char *name, report_span_kind *kind) {
    if (!cat || !name) return false;
    if (!strcmp(cat, "compute")) {
        *kind = starts(name, "backward") ? REPORT_BACKWARD : starts(name, "recompute") ? REPORT_RECOMPUTE : REPORT_FORWARD;
        return true;
    }
    if (!strcmp(cat, "optimizer")) return *kind = REPORT_OPTIMIZER, true;
    if (!strcmp(cat, "transport")) return *kind = starts(name, "send") ? REPORT_SEND : REPORT_WAIT, true;
    return false;
}

static brg_status add_span(report_device *d, const cJSON *e, report_span_kind kind, double ts) {
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    report_span s = {.t0 = ts, .t1 = ts + number(e, "dur", 0), .kind = kind, .block = -1, .micro_batch = -1};
    if (kind <= REPORT_RECOMPUTE && args) {
        s.block = (int)number(args, "block", -1);
        s.micro_batch = (int)number(args, "micro_batch", -1);
    }
    if (!grow((void **)&d->spans, &d->cap_spans, d->n_spans, sizeof *d->spans))
        return brg_error(BRG_ERR_OOM, "out of memory reading the trace");
    d->spans[d->n_spans++] = s;
    return BRG_OK;
}

static brg_status add_memory(report_device *d, const cJSON *e, double ts) {
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!args) return BRG_OK;
    if (!grow((void **)&d->memory, &d->cap_memory, d->n_memory, sizeof *d->memory))
        return brg_error(BRG_ERR_OOM, "out of memory reading the trace");
    d->memory[d->n_memory++] = (report_sample){ts, number(args, "bytes", 0)};
    return BRG_OK;
}

static brg_status add_step(report_trace *t, size_t *cap, const cJSON *e, double ts) {
    const char *name = string(e, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!name || strcmp(name, "step ") == 0 || !starts(name, "step ") || !args) return BRG_OK;
    if (!grow((void **)&t->steps, cap, (size_t)t->n_steps, sizeof *t->steps))
        return brg_error(BRG_ERR_OOM, "out of memory reading the trace");
    t->steps[t->n_steps++] = (report_window){ts, ts + number(e, "dur", 0), (int)number(args, "index", -1)};
    return BRG_OK;
}

static brg_status take_event(report_trace *t, size_t *step_cap, const cJSON *e, const char *path, int i) {
    const char *ph = string(e, "ph");
    if (strcmp(ph, "X") && strcmp(ph, "C")) return BRG_OK;
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
    if (!cJSON_IsNumber(ts))
        return brg_error(BRG_ERR_FORMAT, "--trace %s: event %d (\"ph\": \"%s\") has no numeric \"ts\"", path, i, ph);
    report_device *d = device_of(t, (int)number(e, "tid", -1));
    if (!strcmp(ph, "C")) return d && starts(string(e, "name"), "memory device") ? add_memory(d, e, ts->valuedouble) : BRG_OK;
    const char *cat = string(e, "cat");
    report_span_kind kind;
    if (d) return classify(cat, string(e, "name"), &kind) ? add_span(d, e, kind, ts->valuedouble) : BRG_OK;
    return cat && !strcmp(cat, "host") ? add_step(t, step_cap, e, ts->valuedouble) : BRG_OK;
}

static int by_tid(const void *a, const void *b) {
    const report_device *x = a, *y = b;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

static int by_start(const void *a, const void *b) {
    const report_window *x = a, *y = b;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static brg_status read_events(const cJSON *root, const char *path, report_trace *t) {
    const cJSON *events = cJSON_IsArray(root) ? root : cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    if (!cJSON_IsArray(events))
        return brg_error(BRG_ERR_FORMAT, "--trace %s: not a Chrome trace-event file (no \"traceEvents\" array)", path);
    BRG_TRY(find_devices(events, path, t));
    qsort(t->devices, (size_t)t->n_devices, sizeof *t->devices, by_tid);
    size_t step_cap = 0;
    int i = 0;
    for (const cJSON *e = events->child; e; e = e->next, i++) BRG_TRY(take_event(t, &step_cap, e, path, i));
    qsort(t->steps, (size_t)t->n_steps, sizeof *t->steps, by_start);
    return BRG_OK;
}

brg_status report_trace_read(const char *path, report_trace *t) {
    *t = (report_trace){0};
    cJSON *root = NULL;
    brg_status st = brg_json_load_file(path, MAX_TRACE_BYTES, &root);
    if (st != BRG_OK) return brg_error_wrap(st, "--trace");
    st = read_events(root, path, t);
    cJSON_Delete(root);
    if (st != BRG_OK) report_trace_free(t);
    else snprintf(t->source, sizeof t->source, "%s", path);
    return st;
}

/* Everything the device tracks hold, for a trace without steps (an inference run). */
static report_window whole(const report_trace *t) {
    report_window w = {0, 0, -1};
    bool any = false;
    for (int d = 0; d < t->n_devices; d++)
        for (size_t i = 0; i < t->devices[d].n_spans; i++) {
            const report_span *s = &t->devices[d].spans[i];
            if (!any || s->t0 < w.t0) w.t0 = s->t0;
            if (!any || s->t1 > w.t1) w.t1 = s->t1;
            any = true;
        }
    return w;
}

brg_status report_trace_window(const report_trace *t, int step, report_window *w) {
    if (t->n_steps == 0) {
        if (step > 0)
            return brg_error(BRG_ERR_INVALID_ARG, "--step %d: the trace %s has no training steps", step, t->source);
        *w = whole(t);
        return BRG_OK;
    }
    if (step <= 0) {
        *w = t->steps[t->n_steps - 1];
        return BRG_OK;
    }
    for (int i = 0; i < t->n_steps; i++)
        if (t->steps[i].index == step) {
            *w = t->steps[i];
            return BRG_OK;
        }
    return brg_error(BRG_ERR_INVALID_ARG, "--step %d: the trace %s holds steps %d to %d", step, t->source,
                     t->steps[0].index, t->steps[t->n_steps - 1].index);
}
