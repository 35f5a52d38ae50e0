/* Per-block times for the scale-out model, measured: read from the trace of a short one-device
 * training run (brigade train --trace FILE), whose device track holds a span for every block's
 * forward, backward and recomputation of every micro-batch, and whose host track the step,
 * pipeline and optimizer spans. Lower quartiles (brigade/scale_model.h); the first step is left
 * out (it first touches the activation memory). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brigade/scale_model.h"

enum { MAX_TRACE_BYTES = 256 << 20 };

typedef struct samples {
    double *v;
    int n, cap;
} samples;

static bool push(samples *s, double x) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        double *v = realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        s->v = v, s->cap = cap;
    }
    s->v[s->n++] = x;
    return true;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The lower quartile: what a run takes when nothing else on the machine got in its way, which
 * the busy steps of a shared machine would otherwise inflate. */
static double quartile(samples *s) {
    if (!s->n) return 0;
    qsort(s->v, (size_t)s->n, sizeof *s->v, by_value);
    return s->v[(s->n - 1) / 4];
}

static brg_status read_all(const char *path, char **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return brg_error(BRG_ERR_IO, "cannot open the calibration trace %s", path);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    brg_status st = BRG_OK;
    for (;;) {
        if (len + 65536 + 1 > cap) {
            cap = cap ? 2 * cap : 1 << 20;
            char *b = cap > MAX_TRACE_BYTES ? NULL : realloc(buf, cap);
            if (!b) {
                st = brg_error(BRG_ERR_INVALID_ARG, "the calibration trace %s is larger than %d MiB: trace a few steps",
                               path, MAX_TRACE_BYTES >> 20);
                break;
            }
            buf = b;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0) break;
    }
    if (st == BRG_OK && ferror(f)) st = brg_error(BRG_ERR_IO, "cannot read the calibration trace %s", path);
    fclose(f);
    if (st != BRG_OK) {
        free(buf);
        return st;
    }
    buf[len] = '\0';
    *out = buf;
    return BRG_OK;
}

/* The numbers of one span event: its name, start and length (seconds), track, argument. */
typedef struct span {
    const char *name;
    double ts, dur;
    int tid, arg;
} span;

static bool span_of(const cJSON *e, const char *arg_name, span *out) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *ph = cJSON_GetObjectItemCaseSensitive(e, "ph");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts"), *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
    const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid"), *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    if (!cJSON_IsString(name) || !cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0 || !cJSON_IsNumber(ts) ||
        !cJSON_IsNumber(dur))
        return false;
    const cJSON *a = arg_name ? cJSON_GetObjectItemCaseSensitive(args, arg_name) : NULL;
    *out = (span){name->valuestring, ts->valuedouble * 1e-6, dur->valuedouble * 1e-6,
                  cJSON_IsNumber(tid) ? tid->valueint : -1, cJSON_IsNumber(a) ? a->valueint : -1};
    return true;
}

static bool starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* What the host track says of each step (index 1..n): its span, its pipeline and optimizer. */
typedef struct step_spans {
    double *start, *end, *pipeline, *optimizer; /* [n + 1] */
    int n;
} step_spans;

static brg_status host_steps(const cJSON *events, step_spans *out) {
    const cJSON *e;
    int n = 0;
    span sp;
    cJSON_ArrayForEach(e, events) {
        if (span_of(e, "index", &sp) && starts_with(sp.name, "step ") && sp.arg > n) n = sp.arg;
    }
    if (n < 2)
        return brg_error(BRG_ERR_INVALID_ARG, "the calibration trace has %d training step(s); it needs at least 2 (the "
                         "first is left out): trace a run of a few steps", n);
    double *all = calloc(4 * (size_t)(n + 1), sizeof *all);
    if (!all) return brg_error(BRG_ERR_OOM, "out of memory reading the calibration trace");
    *out = (step_spans){all, all + n + 1, all + 2 * (n + 1), all + 3 * (n + 1), n};
    cJSON_ArrayForEach(e, events) {
        if (!span_of(e, "index", &sp) || sp.arg < 1 || sp.arg > n) continue;
        if (starts_with(sp.name, "step ")) out->start[sp.arg] = sp.ts, out->end[sp.arg] = sp.ts + sp.dur;
        else if (starts_with(sp.name, "pipeline ")) out->pipeline[sp.arg] = sp.dur;
        else if (starts_with(sp.name, "optimizer ")) out->optimizer[sp.arg] = sp.dur;
    }
    return BRG_OK;
}

/* The step (2..n) a device span falls in, or 0. */
static int step_at(const step_spans *s, double ts) {
    int lo = 2, hi = s->n; /* steps run one after another: the last one starting at or before ts */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->start[mid] <= ts) lo = mid;
        else hi = mid - 1;
    }
    return ts >= s->start[lo] && ts < s->end[lo] ? lo : 0;
}

typedef struct gathered {
    samples *fwd, *bwd; /* [n_blocks] */
    double *compute;    /* [steps + 1]: every block span of the step, summed */
    int *micro_batches; /* [steps + 1]: forwards of the first block */
    int device;
} gathered;

static brg_status block_spans(const cJSON *events, const step_spans *steps, int n_blocks, gathered *g) {
    const cJSON *e;
    span sp;
    g->device = -1;
    cJSON_ArrayForEach(e, events) {
        if (!span_of(e, "block", &sp)) continue;
        /* a recomputation runs inside the backward span that asked for it */
        bool fwd = starts_with(sp.name, "forward block "), bwd = starts_with(sp.name, "backward block ");
        if (!fwd && !bwd) continue;
        if (g->device >= 0 && sp.tid != g->device)
            return brg_error(BRG_ERR_INVALID_ARG,
                             "the calibration trace has blocks on devices %d and %d: calibrate with a one-device run "
                             "(ipus_per_replica 1, replication_factor 1)",
                             g->device, sp.tid);
        g->device = sp.tid;
        if (sp.arg < 0 || sp.arg >= n_blocks)
            return brg_error(BRG_ERR_INVALID_ARG, "the calibration trace has block %d, but the model has %d blocks: "
                             "trace a run of this model", sp.arg, n_blocks);
        int k = step_at(steps, sp.ts);
        if (!k) continue;
        g->compute[k] += sp.dur;
        if (fwd && sp.arg == 0) g->micro_batches[k]++;
        if (!push(fwd ? &g->fwd[sp.arg] : &g->bwd[sp.arg], sp.dur))
            return brg_error(BRG_ERR_OOM, "out of memory reading the calibration trace");
    }
    return BRG_OK;
}

static brg_status summarize(const gathered *g, const step_spans *s, int n_blocks, brg_scale_calibration *out) {
    for (int b = 0; b < n_blocks; b++) {
        if (!g->fwd[b].n || !g->bwd[b].n)
            return brg_error(BRG_ERR_INVALID_ARG, "the calibration trace has no %s of block %d after the first step: "
                             "trace a training run of this model", g->fwd[b].n ? "backward" : "forward", b);
        out->forward_s[b] = quartile(&g->fwd[b]);
        out->backward_s[b] = quartile(&g->bwd[b]);
    }
    samples over = {0}, opt = {0}, host = {0};
    brg_status st = BRG_OK;
    for (int k = 2; st == BRG_OK && k <= s->n; k++) {
        if (s->end[k] <= s->start[k] || g->micro_batches[k] < 1) continue;
        bool ok = push(&over, (s->pipeline[k] - g->compute[k]) / g->micro_batches[k]) && push(&opt, s->optimizer[k]) &&
                  push(&host, s->end[k] - s->start[k] - s->pipeline[k] - s->optimizer[k]);
        if (!ok) st = brg_error(BRG_ERR_OOM, "out of memory reading the calibration trace");
    }
    out->steps = over.n;
    out->micro_batch_overhead_s = fmax(0, quartile(&over));
    out->optimizer_s = quartile(&opt);
    out->host_step_s = fmax(0, quartile(&host));
    free(over.v), free(opt.v), free(host.v);
    return st;
}

static brg_status calibrate(const cJSON *events, int n_blocks, brg_scale_calibration *out) {
    step_spans steps = {0};
    BRG_TRY(host_steps(events, &steps));
    gathered g = {calloc((size_t)n_blocks, sizeof(samples)), calloc((size_t)n_blocks, sizeof(samples)),
                  calloc((size_t)steps.n + 1, sizeof(double)), calloc((size_t)steps.n + 1, sizeof(int)), -1};
    out->forward_s = calloc((size_t)n_blocks, sizeof(double));
    out->backward_s = calloc((size_t)n_blocks, sizeof(double));
    out->n_blocks = n_blocks;
    brg_status st = g.fwd && g.bwd && g.compute && g.micro_batches && out->forward_s && out->backward_s
                        ? BRG_OK
                        : brg_error(BRG_ERR_OOM, "out of memory reading the calibration trace");
    if (st == BRG_OK) st = block_spans(events, &steps, n_blocks, &g);
    if (st == BRG_OK) st = summarize(&g, &steps, n_blocks, out);
    for (int b = 0; b < n_blocks && g.fwd && g.bwd; b++) free(g.fwd[b].v), free(g.bwd[b].v);
    free(g.fwd), free(g.bwd), free(g.compute), free(g.micro_batches), free(steps.start);
    return st;
}

brg_status brg_scale_calibration_load(const char *trace_path, int n_blocks, brg_scale_calibration *out) {
    memset(out, 0, sizeof *out);
    if (n_blocks < 1) return brg_error(BRG_ERR_INVALID_ARG, "a calibration needs a model with blocks");
    char *text = NULL;
    BRG_TRY(read_all(trace_path, &text));
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    brg_status st = cJSON_IsArray(events) ? calibrate(events, n_blocks, out)
                                          : brg_error(BRG_ERR_INVALID_ARG, "%s is not a brigade trace (no traceEvents "
                                                      "array): write one with brigade train --trace FILE", trace_path);
    cJSON_Delete(root);
    if (st != BRG_OK) brg_scale_calibration_free(out);
    return st;
}

void brg_scale_calibration_free(brg_scale_calibration *c) {
    free(c->forward_s);
    free(c->backward_s);
    memset(c, 0, sizeof *c);
}
