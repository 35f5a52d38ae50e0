/* GPipe and 1F1B schedules. Both run backwards in micro-batch order on every stage, so the
 * parameter gradients accumulate in the same order whatever the schedule or stage count. */
#include "brigade/schedule.h"

#include <stdlib.h>
#include <string.h>

static void put(brg_schedule_step *row, int *n, brg_pass pass, int mb) { row[(*n)++] = (brg_schedule_step){pass, mb}; }

static void fill_gpipe(brg_schedule_step *row, int *n, int m, bool backward) {
    for (int i = 0; i < m; i++) put(row, n, BRG_PASS_FORWARD, i);
    if (backward)
        for (int i = 0; i < m; i++) put(row, n, BRG_PASS_BACKWARD, i);
}

/* Stage s warms up with p - s - 1 forwards, alternates one forward and one backward, then
 * drains the remaining backwards: at most p - s micro-batches are in flight on stage s. */
static void fill_1f1b(brg_schedule_step *row, int *n, int p, int s, int m) {
    int warmup = p - s - 1 < m ? p - s - 1 : m;
    int f = 0, b = 0;
    for (; f < warmup; f++) put(row, n, BRG_PASS_FORWARD, f);
    for (; f < m; f++, b++) {
        put(row, n, BRG_PASS_FORWARD, f);
        put(row, n, BRG_PASS_BACKWARD, b);
    }
    for (; b < m; b++) put(row, n, BRG_PASS_BACKWARD, b);
}

brg_status brg_schedule_build(brg_schedule_kind kind, int stages, int micro_batches, brg_schedule *out) {
    memset(out, 0, sizeof *out);
    if (stages < 1 || micro_batches < 1)
        return brg_error(BRG_ERR_INVALID_ARG, "a schedule needs at least 1 stage and 1 micro-batch (got %d, %d)", stages,
                         micro_batches);
    out->kind = kind;
    out->stages = stages;
    out->micro_batches = micro_batches;
    out->length = calloc((size_t)stages, sizeof *out->length);
    out->steps = calloc((size_t)stages, sizeof *out->steps);
    if (!out->length || !out->steps) {
        brg_schedule_free(out);
        return brg_error(BRG_ERR_OOM, "cannot allocate a schedule");
    }
    for (int s = 0; s < stages; s++) {
        out->steps[s] = calloc((size_t)micro_batches * 2, sizeof **out->steps);
        if (!out->steps[s]) {
            brg_schedule_free(out);
            return brg_error(BRG_ERR_OOM, "cannot allocate a schedule");
        }
        int n = 0;
        if (kind == BRG_SCHEDULE_1F1B) fill_1f1b(out->steps[s], &n, stages, s, micro_batches);
        else fill_gpipe(out->steps[s], &n, micro_batches, kind == BRG_SCHEDULE_GPIPE);
        out->length[s] = n;
    }
    return BRG_OK;
}

void brg_schedule_free(brg_schedule *s) {
    if (s->steps)
        for (int i = 0; i < s->stages; i++) free(s->steps[i]);
    free(s->steps);
    free(s->length);
    memset(s, 0, sizeof *s);
}

brg_status brg_schedule_kind_parse(const char *name, brg_schedule_kind *out) {
    if (strcmp(name, "1f1b") == 0 || strcmp(name, "1F1B") == 0) *out = BRG_SCHEDULE_1F1B;
    else if (strcmp(name, "gpipe") == 0 || strcmp(name, "GPipe") == 0) *out = BRG_SCHEDULE_GPIPE;
    else return brg_error(BRG_ERR_INVALID_ARG, "unknown pipeline schedule '%s' (use 1f1b or gpipe)", name);
    return BRG_OK;
}

const char *brg_schedule_kind_name(brg_schedule_kind kind) {
    switch (kind) {
    case BRG_SCHEDULE_GPIPE: return "gpipe";
    case BRG_SCHEDULE_1F1B: return "1f1b";
    case BRG_SCHEDULE_INFERENCE: return "inference";
    }
    return "?";
}

int brg_schedule_max_in_flight(const brg_schedule *s, int stage) {
    int live = 0, most = 0;
    for (int i = 0; i < s->length[stage]; i++) {
        live += s->steps[stage][i].pass == BRG_PASS_FORWARD ? 1 : -1;
        if (live > most) most = live;
    }
    return most;
}

/* Slot at which each (stage, pass, micro-batch) ran; -1 before it has. */
typedef struct sim {
    int *fwd, *bwd; /* [stage * m + mb] */
    int *pos;       /* next step index per stage */
} sim;

static bool ready(const brg_schedule *s, const sim *st, int stage, brg_schedule_step step, int slot) {
    int m = s->micro_batches, mb = step.micro_batch;
    if (step.pass == BRG_PASS_FORWARD)
        return stage == 0 || (st->fwd[(stage - 1) * m + mb] >= 0 && st->fwd[(stage - 1) * m + mb] < slot);
    if (st->fwd[stage * m + mb] < 0 || st->fwd[stage * m + mb] >= slot) return false;
    return stage == s->stages - 1 || (st->bwd[(stage + 1) * m + mb] >= 0 && st->bwd[(stage + 1) * m + mb] < slot);
}

brg_status brg_schedule_simulate(const brg_schedule *s, int *slots) {
    int p = s->stages, m = s->micro_batches;
    sim st = {calloc((size_t)(p * m), sizeof(int)), calloc((size_t)(p * m), sizeof(int)), calloc((size_t)p, sizeof(int))};
    if (!st.fwd || !st.bwd || !st.pos) {
        free(st.fwd), free(st.bwd), free(st.pos);
        return brg_error(BRG_ERR_OOM, "cannot simulate the schedule");
    }
    for (int i = 0; i < p * m; i++) st.fwd[i] = st.bwd[i] = -1;
    int slot = 0, done = 0, total = 0;
    for (int i = 0; i < p; i++) total += s->length[i];
    brg_status status = BRG_OK;
    while (done < total) {
        int progressed = 0;
        for (int stage = 0; stage < p; stage++) {
            if (st.pos[stage] >= s->length[stage]) continue;
            brg_schedule_step step = s->steps[stage][st.pos[stage]];
            if (!ready(s, &st, stage, step, slot)) continue;
            (step.pass == BRG_PASS_FORWARD ? st.fwd : st.bwd)[stage * m + step.micro_batch] = slot;
            st.pos[stage]++;
            progressed++;
        }
        done += progressed;
        slot++;
        if (slot > 4 * total + 4) {
            status = brg_error(BRG_ERR_INTERNAL, "%s schedule over %d stages deadlocks", brg_schedule_kind_name(s->kind), p);
            break;
        }
    }
    *slots = slot;
    free(st.fwd), free(st.bwd), free(st.pos);
    return status;
}

double brg_schedule_ideal_efficiency(int stages, int micro_batches) {
    return (double)micro_batches / (double)(micro_batches + stages - 1);
}

void brg_schedule_print(const brg_schedule *s, FILE *out) {
    fprintf(out, "%s schedule, %d stages, %d micro-batches\n", brg_schedule_kind_name(s->kind), s->stages,
            s->micro_batches);
    for (int stage = 0; stage < s->stages; stage++) {
        fprintf(out, "stage %d:", stage);
        for (int i = 0; i < s->length[stage]; i++)
            fprintf(out, " %c%d", s->steps[stage][i].pass == BRG_PASS_FORWARD ? 'F' : 'B', s->steps[stage][i].micro_batch);
        fputc('\n', out);
    }
}
