/* Reading a rank file and turning it into a runtime's device -> rank map (rank_file.h). */
#include "rank_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far more ranks and devices than any layout has (64 replicas x 4 stages is 256), small enough
 * that the map of a mistyped id stays small. */
enum { MAX_ID = 1 << 16 };

struct rank_file {
    char *path;
    int n_ranks, n_devices;  /* the highest rank and device listed, + 1 */
    int *device_rank;        /* [n_devices]: -1 where no line lists the device */
    int *device_line;        /* [n_devices]: the line that lists it */
    int *rank_line;          /* [n_ranks]: the rank's line, 0 where none */
    int cap_devices, cap_ranks; /* the arrays' room */
};

/* What one line is being read with: the file and the line, for the messages. */
typedef struct cursor {
    rank_file *f;
    int line;
    const char *p;
} cursor;

static brg_status line_error(const cursor *c, const char *what) {
    return brg_error(BRG_ERR_FORMAT, "rank file %s, line %d: %s", c->f->path, c->line, what);
}

static void skip_blanks(cursor *c) {
    while (*c->p == ' ' || *c->p == '\t') c->p++;
}

/* A decimal id in [0, MAX_ID), digits only; false when there is none there. */
static bool read_id(cursor *c, int *id) {
    if (!isdigit((unsigned char)*c->p)) return false;
    long v = 0;
    while (isdigit((unsigned char)*c->p)) {
        v = v * 10 + (*c->p++ - '0');
        if (v >= MAX_ID) return false;
    }
    *id = (int)v;
    return true;
}

/* An array of `cap` ints made `new_cap` long, the new entries set to `fill`. */
static bool grow(int **a, int cap, int new_cap, int fill) {
    int *b = realloc(*a, (size_t)new_cap * sizeof *b);
    if (!b) return false;
    for (int i = cap; i < new_cap; i++) b[i] = fill;
    *a = b;
    return true;
}

/* The room an array of `cap` needs for `id`: doubled until it fits. */
static int room_for(int cap, int id) {
    int n = cap ? cap : 16;
    while (n <= id) n *= 2;
    return n;
}

static brg_status place(cursor *c, int rank, int device) {
    rank_file *f = c->f;
    if (device >= f->cap_devices) {
        const int n = room_for(f->cap_devices, device);
        if (!grow(&f->device_rank, f->cap_devices, n, -1) || !grow(&f->device_line, f->cap_devices, n, 0))
            return brg_error(BRG_ERR_OOM, "cannot read rank file %s", f->path);
        f->cap_devices = n;
    }
    if (f->device_rank[device] >= 0) {
        char why[160];
        snprintf(why, sizeof why, "device %d is already on rank %d (line %d): each device runs on one rank", device,
                 f->device_rank[device], f->device_line[device]);
        return line_error(c, why);
    }
    f->device_rank[device] = rank;
    f->device_line[device] = c->line;
    if (device >= f->n_devices) f->n_devices = device + 1;
    return BRG_OK;
}

/* "rank R:" */
static brg_status read_rank(cursor *c, int *rank) {
    static const char usage[] = "expected 'rank R: DEVICE ...' (rank 0: 0 2), or a comment after #";
    if (strncmp(c->p, "rank", 4) != 0) return line_error(c, usage);
    c->p += 4;
    skip_blanks(c);
    if (!read_id(c, rank)) return line_error(c, usage);
    skip_blanks(c);
    if (*c->p != ':') return line_error(c, usage);
    c->p++;
    rank_file *f = c->f;
    if (*rank >= f->cap_ranks) {
        const int n = room_for(f->cap_ranks, *rank);
        if (!grow(&f->rank_line, f->cap_ranks, n, 0))
            return brg_error(BRG_ERR_OOM, "cannot read rank file %s", f->path);
        f->cap_ranks = n;
    }
    if (f->rank_line[*rank]) {
        char why[96];
        snprintf(why, sizeof why, "rank %d has a line already (line %d)", *rank, f->rank_line[*rank]);
        return line_error(c, why);
    }
    f->rank_line[*rank] = c->line;
    if (*rank >= f->n_ranks) f->n_ranks = *rank + 1;
    return BRG_OK;
}

/* One line, its comment already cut off. */
static brg_status read_line(cursor *c) {
    skip_blanks(c);
    if (!*c->p) return BRG_OK;
    int rank, n = 0;
    BRG_TRY(read_rank(c, &rank));
    for (;;) {
        skip_blanks(c);
        if (!*c->p) break;
        int lo, hi;
        if (!read_id(c, &lo)) return line_error(c, "devices are ids (0 2) or ranges (4-7), apart by spaces");
        hi = lo;
        if (*c->p == '-') {
            c->p++;
            if (!read_id(c, &hi) || hi < lo) return line_error(c, "a range of devices is LOW-HIGH (4-7)");
        }
        if (*c->p && *c->p != ' ' && *c->p != '\t')
            return line_error(c, "devices are ids (0 2) or ranges (4-7), apart by spaces");
        for (int d = lo; d <= hi; d++, n++) BRG_TRY(place(c, rank, d));
    }
    if (n == 0) {
        char why[96];
        snprintf(why, sizeof why, "rank %d has no devices: every rank needs one", rank);
        return line_error(c, why);
    }
    return BRG_OK;
}

/* What the whole file must say: no rank and no device left out, device 0 on the host's rank. */
static brg_status check_whole(const rank_file *f) {
    if (f->n_ranks == 0)
        return brg_error(BRG_ERR_FORMAT, "rank file %s lists no ranks: one line per rank, 'rank 0: 0 2'", f->path);
    for (int r = 0; r < f->n_ranks; r++)
        if (!f->rank_line[r])
            return brg_error(BRG_ERR_FORMAT, "rank file %s has no line for rank %d (it lists ranks up to %d)", f->path,
                             r, f->n_ranks - 1);
    for (int d = 0; d < f->n_devices; d++)
        if (f->device_rank[d] < 0)
            return brg_error(BRG_ERR_FORMAT, "rank file %s puts device %d on no rank (it lists devices up to %d)",
                             f->path, d, f->n_devices - 1);
    if (f->device_rank[0] != 0)
        return brg_error(BRG_ERR_FORMAT,
                         "rank file %s, line %d: device 0 is on rank %d; it must be on rank 0, the host, which "
                         "gathers the weights through it",
                         f->path, f->device_line[0], f->device_rank[0]);
    return BRG_OK;
}

static brg_status read_all(FILE *in, rank_file *f) {
    char *buf = NULL;
    size_t cap = 0;
    brg_status st = BRG_OK;
    cursor c = {f, 0, NULL};
    while (st == BRG_OK && getline(&buf, &cap, in) >= 0) {
        c.line++;
        buf[strcspn(buf, "#\r\n")] = '\0';
        c.p = buf;
        st = read_line(&c);
    }
    if (st == BRG_OK && ferror(in))
        st = brg_error(BRG_ERR_IO, "cannot read rank file %s: %s", f->path, strerror(errno));
    free(buf);
    return st == BRG_OK ? check_whole(f) : st;
}

brg_status rank_file_read(const char *path, rank_file **out) {
    *out = NULL;
    FILE *in = fopen(path, "r");
    if (!in) return brg_error(BRG_ERR_IO, "cannot open rank file %s: %s", path, strerror(errno));
    rank_file *f = calloc(1, sizeof *f);
    if (f) f->path = strdup(path);
    brg_status st = f && f->path ? read_all(in, f) : brg_error(BRG_ERR_OOM, "cannot read rank file %s", path);
    fclose(in);
    if (st != BRG_OK) {
        rank_file_free(f);
        return st;
    }
    *out = f;
    return BRG_OK;
}

void rank_file_free(rank_file *f) {
    if (!f) return;
    free(f->path);
    free(f->device_rank);
    free(f->device_line);
    free(f->rank_line);
    free(f);
}

brg_status rank_file_layout(const rank_file *f, int n_ranks, int n_devices, int *device_rank) {
    if (f->n_ranks != n_ranks)
        return brg_error(BRG_ERR_INVALID_ARG, "rank file %s lists %d ranks, and mpirun started %d", f->path,
                         f->n_ranks, n_ranks);
    if (f->n_devices > n_devices)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "rank file %s, line %d: device %d, but the run has %d devices (replication_factor x "
                         "ipus_per_replica: 0 to %d)",
                         f->path, f->device_line[n_devices], n_devices, n_devices, n_devices - 1);
    if (f->n_devices < n_devices)
        return brg_error(BRG_ERR_INVALID_ARG,
                         "rank file %s places devices 0 to %d, but the run has %d (replication_factor x "
                         "ipus_per_replica): device %d is on no rank",
                         f->path, f->n_devices - 1, n_devices, f->n_devices);
    memcpy(device_rank, f->device_rank, (size_t)n_devices * sizeof *device_rank);
    return BRG_OK;
}
