/* The op table: every autograd op and every kernel family once, on every backend this CPU has, in
 * the style of ggml's test-backend-ops.
 *
 * An entry declares the buffers of one shape (layout), runs its kernels' forward and backward on
 * them (kernel) and, for an autograd op, the op itself on a tape (graph: inputs and parameter
 * gradients are the same buffers, wrapped). Every buffer lies against a PROT_NONE guard page, at
 * its end or (every other run) at its start, so reading or writing one element past either end
 * faults; the fault handler names the buffer and the byte, and the run is marked FAIL. Shapes are
 * odd (1, 7, 17, 33, 65, ...: every tail of the 8- and 16-wide steps) plus one large enough to
 * split across a team. For each configuration (SIMD bodies x GEMM backend x team size) the entry
 * depends on:
 *   (a) every output and gradient against the reference configuration (scalar bodies,
 *       brg_gemm_ref, one thread) within the entry's tolerance, and bit for bit where the project
 *       promises the same bits: a team of 2 against one thread (always), AVX2 against AVX-512
 *       bodies (EX_SIMD), every level against the scalar one (EX_SCALAR), tolerance 0 against the
 *       reference; plus each entry's own checks (a fused path against the separate kernels, a
 *       kernel against its documented scalar formula or _ref function);
 *   (b) the op's gradients against central finite differences (in double) of sum(y * r) through
 *       the op on a grad-free tape, on the shapes with at most FD_MAX parameters;
 *   (c) the guard pages, on every run;
 *   (d) NaN and inf inputs in one shape per entry: every configuration must give the reference's
 *       NaN/inf pattern, and (unless the entry says otherwise) a NaN must reach an output.
 *   (e) half activations (column half): the op's graph on a tape that stores activations in bf16
 *       and in fp16, on inputs rounded to the type and passed as half tensors, against the fp32
 *       graph on the same values (see run_half); then again with staging bounded to one row.
 * The registry check: every op in ops_registry (src/autograd/ops_registry.c) needs a table entry,
 * and every `brg_status brg_NAME(brg_tape *...)` declared in include/brigade/ops.h or in
 * src/autograd needs a registry line; the run fails naming the missing ones.
 *
 * The table printed at the end gives entry x backend: PASS, FAIL, KNOWN (an expected failure, its
 * reason printed), SKIP (the CPU, or BRIGADE_ISA, lacks the ISA) or - (the entry does not use it).
 * The scalar column is also where entries with a single (plain C) body report. OPS_TABLE_VERBOSE=1
 * prints each entry's worst error against its tolerance; OPS_TABLE_ONLY=name runs one entry.
 * docs/kernels.md describes how to add an entry. */
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "autograd/ops_internal.h"
#include "autograd/ops_pack.h"
#include "autograd/ops_registry.h"
#include "brigade/optim.h"
#include "kernels/cpu_isa.h"
#include "kernels/gemm_half.h"
#include "kernels/gemv.h"
#include "kernels/half.h"
#include "kernels/simd.h"
#include "test_kernels_util.h"

/* ==== configurations ======================================================================== */

enum { AX_SIMD = 1, AX_GEMM = 2, AX_TEAM = 4 };
enum { EX_SIMD = 1, EX_SCALAR = 2 };

enum { G_REF, G_BLAS, G_AVX2, G_AVX512, N_GEMM };
static const char *const gemm_names[N_GEMM] = {"ref", "openblas", "avx2", "avx512"};

typedef struct config {
    brg_isa simd;
    int gemm, team;
} config;

#define MAX_CFG 25 /* 3 x 4 x 2, and the reference again */

/* ==== table cells =========================================================================== */

enum { COL_SCALAR, COL_AVX2, COL_AVX512, COL_BLAS, COL_GAVX2, COL_GAVX512, COL_GREF, COL_TEAM2, COL_FD, COL_HALF,
       N_COLS };
static const char *const col_names[N_COLS] = {"scalar", "avx2", "avx512", "blas", "g-avx2", "g-avx512", "g-ref",
                                              "team2",  "fd",   "half"};
/* In rising precedence: a cell shows the worst of what its runs gave. */
enum { CELL_NA, CELL_SKIP, CELL_PASS, CELL_KNOWN, CELL_FAIL };
static const char *const cell_names[] = {"-", "SKIP", "PASS", "KNOWN", "FAIL"};

static int simd_col(brg_isa isa) { return COL_SCALAR + (int)isa; }
static int gemm_col(int g) {
    static const int cols[N_GEMM] = {COL_GREF, COL_BLAS, COL_GAVX2, COL_GAVX512};
    return cols[g];
}

/* ==== buffers =============================================================================== */

enum { TY_F32, TY_I32, TY_U16 };
/* IN: filled from the seed, never compared. OUT: filled with POISON, must be written. ACC: filled
 * from the seed and accumulated into. INOUT: filled from the seed, updated in place. GRAD: an op
 * parameter's gradient buffer (the harness adds them). */
enum { R_IN, R_OUT, R_ACC, R_INOUT, R_GRAD };
#define B_PARAM 1u   /* differentiable input of the op: its gradient is compared and FD-checked */
#define B_SPECIAL 2u /* NaN, +inf and -inf land here in the special shape */
#define B_AWAY0 4u   /* values at least 0.05 away from 0 (ReLU's kink) */
#define B_BITS 8u    /* random bit patterns (every float class) in every other element */
#define B_F16 16u    /* U16 holds fp16 values (otherwise bf16) */

#define MAX_BUFS 28
#define POISON_BITS 0x7fc0deadu

typedef struct gbuf {
    const char *name;
    char own_name[40];
    int type, role;
    unsigned flags;
    int ndim;
    int64_t shape[4], n;
    double lo, hi;
    char *map;   /* guard page | room | guard page */
    size_t room; /* the usable bytes between the guards, a whole number of pages */
    void *p;     /* where the data starts this run */
    brg_tensor t;
    int grad; /* index of its R_GRAD buffer, or -1 */
} gbuf;

/* ==== shapes and entries ==================================================================== */

/* Variant bits of a shape (their meaning is the entry's), and the harness's own. */
enum { V0 = 1u << 0, V1 = 1u << 1, V2 = 1u << 2, V3 = 1u << 3, V4 = 1u << 4 };
#define S_SPECIAL (1u << 30) /* NaN/inf inputs */
#define S_BIG (1u << 29)     /* large enough to split across the team */

typedef struct shape {
    int64_t d[6];
    unsigned v;
} shape;

typedef struct opcase opcase;

typedef struct entry {
    const char *name;
    const char *covers[3]; /* the registry ops its graph runs */
    unsigned axes, exact;
    double tol; /* against the reference configuration, relative to max(1, max |reference|); 0: bits */
    const shape *shapes;
    int n_shapes;
    const char *variants; /* what V0, V1, ... mean, for messages */
    void (*layout)(opcase *c);
    void (*prepare)(opcase *c); /* optional: adjusts the seeded inputs */
    void (*kernel)(opcase *c);  /* optional */
    brg_tensor *(*graph)(brg_tape *tape, opcase *c); /* optional; NULL result: not for this shape */
    bool no_nan_out; /* a NaN input need not reach an output (dropout drops it) */
    unsigned fd_needs; /* finite differences only on shapes with these variant bits */
    const char *known; /* a known failure: why */
} entry;

struct opcase {
    const entry *e;
    int si;
    const int64_t *d;
    unsigned v;
    int nb;
    gbuf b[MAX_BUFS];
    const config *cfg;
    float *seed; /* the op output's gradient */
    int64_t seed_n;
};

static size_t page;

static size_t elem_size(int type) { return type == TY_F32 || type == TY_I32 ? 4 : 2; }

static gbuf *add_buf(opcase *c, const char *name, int type, int role, unsigned flags, int ndim, const int64_t *shape,
                     double lo, double hi) {
    BRG_ASSERT(c->nb < MAX_BUFS && ndim <= 4);
    gbuf *b = &c->b[c->nb++];
    memset(b, 0, sizeof *b);
    b->name = name;
    b->type = type, b->role = role, b->flags = flags, b->ndim = ndim, b->lo = lo, b->hi = hi, b->grad = -1;
    b->n = 1;
    for (int i = 0; i < ndim; i++) b->shape[i] = shape[i], b->n *= shape[i];
    const size_t bytes = (size_t)b->n * elem_size(type);
    b->room = (bytes + page - 1) / page * page;
    if (!b->room) b->room = page;
    b->map = mmap(NULL, b->room + 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    BRG_ASSERT(b->map != MAP_FAILED);
    BRG_ASSERT(mprotect(b->map, page, PROT_NONE) == 0);
    BRG_ASSERT(mprotect(b->map + page + b->room, page, PROT_NONE) == 0);
    b->p = b->map + page;
    return b;
}

static void free_bufs(opcase *c) {
    for (int i = 0; i < c->nb; i++) munmap(c->b[i].map, c->b[i].room + 2 * page);
    c->nb = 0;
    free(c->seed);
    c->seed = NULL;
}

#define DIMS(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__}
/* In a layout function (its opcase is `c`). */
#define IN(name, fl, lo, hi, ...) add_buf(c, name, TY_F32, R_IN, fl, DIMS(__VA_ARGS__), lo, hi)
#define INOUT(name, fl, lo, hi, ...) add_buf(c, name, TY_F32, R_INOUT, fl, DIMS(__VA_ARGS__), lo, hi)
#define OUT(name, ...) add_buf(c, name, TY_F32, R_OUT, 0, DIMS(__VA_ARGS__), 0, 0)
#define ACC(name, ...) add_buf(c, name, TY_F32, R_ACC, 0, DIMS(__VA_ARGS__), -1, 1)
#define IDS(name, lo, hi, ...) add_buf(c, name, TY_I32, R_IN, 0, DIMS(__VA_ARGS__), lo, hi)
#define IOUT(name, ...) add_buf(c, name, TY_I32, R_OUT, 0, DIMS(__VA_ARGS__), 0, 0)
#define HIN(name, fl, lo, hi, ...) add_buf(c, name, TY_U16, R_IN, fl, DIMS(__VA_ARGS__), lo, hi)
#define HOUT(name, ...) add_buf(c, name, TY_U16, R_OUT, 0, DIMS(__VA_ARGS__), 0, 0)

static gbuf *find_buf(opcase *c, const char *name) {
    for (int i = 0; i < c->nb; i++)
        if (strcmp(c->b[i].name, name) == 0) return &c->b[i];
    return NULL;
}

static gbuf *get_buf(opcase *c, const char *name, int type) {
    gbuf *b = find_buf(c, name);
    if (!b || b->type != type) {
        fprintf(stderr, "op table: entry %s has no %s buffer '%s'\n", c->e->name, type == TY_F32 ? "F32" : "int",
                name);
        abort();
    }
    return b;
}

static float *F(opcase *c, const char *name) { return get_buf(c, name, TY_F32)->p; }
static float *Fopt(opcase *c, const char *name) {
    gbuf *b = find_buf(c, name);
    return b ? b->p : NULL;
}
static int32_t *I(opcase *c, const char *name) { return get_buf(c, name, TY_I32)->p; }
static uint16_t *U(opcase *c, const char *name) { return get_buf(c, name, TY_U16)->p; }
static brg_tensor *T(opcase *c, const char *name) {
    gbuf *b = find_buf(c, name);
    BRG_ASSERT(b != NULL && b->role == R_IN);
    return &b->t;
}
static brg_tensor *Topt(opcase *c, const char *name) { return find_buf(c, name) ? T(c, name) : NULL; }
static int64_t N(opcase *c, const char *name) { return find_buf(c, name)->n; }

static float poison(void) {
    float f;
    uint32_t u = POISON_BITS;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t tk_bits(void) { return (uint64_t)(tk_uniform() * 18446744073709551616.0); }

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static uint16_t to_half(float f, unsigned flags) { return flags & B_F16 ? brg_f32_to_f16(f) : brg_f32_to_bf16(f); }

/* Every buffer from the seed of (entry, shape, buffer), the same in every configuration. */
static void fill(opcase *c) {
    const bool special = c->v & S_SPECIAL;
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        tk_seed(name_hash(c->e->name) ^ (uint64_t)c->si * 1000003u ^ (uint64_t)i * 7919u);
        const int64_t n = b->n;
        const bool seeded = b->role == R_IN || b->role == R_INOUT || b->role == R_ACC;
        if (b->type == TY_F32) {
            float *x = b->p;
            for (int64_t k = 0; k < n; k++) {
                if (!seeded) {
                    x[k] = poison();
                    continue;
                }
                double u = b->lo + (b->hi - b->lo) * tk_uniform();
                if (b->flags & B_AWAY0) u = u < 0 ? u - 0.05 : u + 0.05;
                x[k] = (b->flags & B_BITS) && (k & 1) ? float_of((uint32_t)tk_bits()) : (float)u;
            }
            if (special && (b->flags & B_SPECIAL) && n > 0) {
                x[0] = NAN;
                if (n >= 3) x[n / 2] = INFINITY, x[n - 1] = -INFINITY;
            }
        } else if (b->type == TY_I32) {
            int32_t *x = b->p;
            for (int64_t k = 0; k < n; k++)
                x[k] = seeded ? (int32_t)(b->lo + floor((b->hi - b->lo) * tk_uniform())) : (int32_t)0x5a5a5a5a;
        } else {
            uint16_t *x = b->p;
            for (int64_t k = 0; k < n; k++)
                x[k] = !seeded                           ? 0x5a5a
                       : (b->flags & B_BITS) && (k & 1) ? (uint16_t)tk_bits()
                                                         : to_half((float)(b->lo + (b->hi - b->lo) * tk_uniform()),
                                                                   b->flags);
            if (special && (b->flags & B_SPECIAL) && n > 0) {
                x[0] = to_half(NAN, b->flags);
                if (n >= 3) x[n / 2] = to_half(INFINITY, b->flags), x[n - 1] = to_half(-INFINITY, b->flags);
            }
        }
    }
}

/* Data right after the front guard or right before the back one. */
static void place(opcase *c, bool at_end) {
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        const size_t bytes = (size_t)b->n * elem_size(b->type);
        b->p = at_end ? b->map + page + b->room - bytes : b->map + page;
    }
}

static brg_dtype dtype_of(const gbuf *b) {
    return b->type == TY_F32 ? BRG_DTYPE_F32 : b->type == TY_I32 ? BRG_DTYPE_I32 : b->flags & B_F16 ? BRG_DTYPE_F16
                                                                                                      : BRG_DTYPE_BF16;
}

/* The op's input tensors over the buffers; parameters get their gradient buffer, poisoned, with its
 * zeroing pending (so writers that overwrite must overwrite all of it). */
static void wrap_tensors(opcase *c) {
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        if (b->role != R_IN) continue;
        b->t = brg_tensor_wrap(dtype_of(b), b->ndim, b->shape, b->p);
        b->t.name = b->name;
        if (b->grad >= 0) {
            gbuf *g = &c->b[b->grad];
            float *d = g->p;
            for (int64_t k = 0; k < g->n; k++) d[k] = poison();
            b->t.requires_grad = true;
            b->t.grad = d;
            b->t.grad_zero_pending = true;
        }
    }
}

/* ==== snapshots and comparisons ============================================================= */

typedef struct arr {
    const char *name;
    int type;
    int64_t n;
    void *data;
} arr;

typedef struct snap {
    int n;
    bool valid;
    arr a[2 * MAX_BUFS];
} snap;

static void snap_add(snap *s, const char *name, int type, const void *p, int64_t n) {
    BRG_ASSERT(s->n < 2 * MAX_BUFS);
    arr *a = &s->a[s->n++];
    a->name = name, a->type = type, a->n = n;
    const size_t bytes = (size_t)n * elem_size(type);
    a->data = malloc(bytes ? bytes : 1);
    memcpy(a->data, p, bytes);
}

static void snap_free(snap *s) {
    for (int i = 0; i < s->n; i++) free(s->a[i].data);
    s->n = 0;
    s->valid = false;
}

static const arr *snap_find(const snap *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->a[i].name, name) == 0) return &s->a[i];
    return NULL;
}

static int fclass(float x) { return isnan(x) ? 3 : isinf(x) ? (x > 0 ? 1 : 2) : 0; }

/* Worst error against tolerance seen per entry (OPS_TABLE_VERBOSE). */
static double worst_ratio;

/* Whether got matches want: same NaN/inf pattern, finite elements within tol * max(1, max |want|)
 * (tol 0: the same bits; any NaN equals any NaN). *msg says where they first part. */
static bool compare_arrays(const void *got, const void *want, int type, int64_t n, double tol, char *msg,
                           size_t len) {
    if (type != TY_F32) {
        const size_t es = elem_size(type);
        for (int64_t i = 0; i < n; i++)
            if (memcmp((const char *)got + i * es, (const char *)want + i * es, es) != 0) {
                long long g = type == TY_I32 ? ((const int32_t *)got)[i] : ((const uint16_t *)got)[i];
                long long w = type == TY_I32 ? ((const int32_t *)want)[i] : ((const uint16_t *)want)[i];
                snprintf(msg, len, "element %lld is %lld (0x%llx), reference %lld (0x%llx)", (long long)i, g, g, w, w);
                return false;
            }
        return true;
    }
    const float *g = got, *w = want;
    double scale = 1.0;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(w[i]) && fabs(w[i]) > scale) scale = fabs(w[i]);
    double worst = 0.0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) {
        if (fclass(g[i]) != fclass(w[i])) {
            snprintf(msg, len, "element %lld is %.9g, reference %.9g (NaN/inf pattern differs%s)", (long long)i,
                     (double)g[i], (double)w[i], bits_of(g[i]) == POISON_BITS ? "; never written" : "");
            return false;
        }
        if (fclass(g[i]) == 3) continue;
        if (tol == 0.0) {
            if (bits_of(g[i]) != bits_of(w[i])) {
                snprintf(msg, len, "element %lld is %.9g (0x%08x), reference %.9g (0x%08x): bits differ", (long long)i,
                         (double)g[i], bits_of(g[i]), (double)w[i], bits_of(w[i]));
                return false;
            }
            continue;
        }
        double err = fabs((double)g[i] - (double)w[i]);
        if (fclass(g[i]) == 0 && err > worst) worst = err, at = i;
    }
    if (tol > 0.0 && worst / (tol * scale) > worst_ratio) worst_ratio = worst / (tol * scale);
    if (tol > 0.0 && worst > tol * scale) {
        snprintf(msg, len, "element %lld is %.9g, reference %.9g: off by %.3g > %.3g (tol %.3g x scale %.3g)",
                 (long long)at, (double)g[at], (double)w[at], worst, tol * scale, tol, scale);
        return false;
    }
    return true;
}

/* ==== reporting ============================================================================= */

#define MAX_ENTRIES 64
static int cells[MAX_ENTRIES][N_COLS];
static int entry_failures[MAX_ENTRIES], known_failures, fixed_known;
static const entry *cur_entry;
static int cur_ei;
static unsigned cur_cells; /* the columns the running configuration counts for */
static char cur_desc[256];
static bool verbose;

static void mark(int ei, unsigned cols, int status) {
    for (int k = 0; k < N_COLS; k++)
        if ((cols >> k) & 1u)
            if (status > cells[ei][k]) cells[ei][k] = status;
}

/* One check of the running configuration. */
static void report(bool ok, const char *fmt, ...) {
    if (ok) {
        test_passed_++;
        mark(cur_ei, cur_cells, CELL_PASS);
        return;
    }
    const bool known = cur_entry->known != NULL;
    if (known) known_failures++;
    else test_failed_++;
    mark(cur_ei, cur_cells, known ? CELL_KNOWN : CELL_FAIL);
    if (entry_failures[cur_ei]++ >= 8) {
        if (entry_failures[cur_ei] == 10) fprintf(stderr, "  (%s: further failures not shown)\n", cur_entry->name);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s: ", known ? "KNOWN FAIL" : "FAIL", cur_desc);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* For kernels and graphs: their own checks. */
static void expect_bits(opcase *c, const char *what, const float *got, const float *want, int64_t n) {
    char msg[300] = "";
    report(compare_arrays(got, want, TY_F32, n, 0.0, msg, sizeof msg), "%s: %s", what, msg);
}

static void expect_close(opcase *c, const char *what, const float *got, const float *want, int64_t n, double tol) {
    char msg[300] = "";
    report(compare_arrays(got, want, TY_F32, n, tol, msg, sizeof msg), "%s: %s", what, msg);
}

#define OPCHK(expr)                                                                                   \
    do {                                                                                              \
        brg_status st_ = (expr);                                                                      \
        if (st_ != BRG_OK) {                                                                          \
            report(false, "%s -> %s: %s", #expr, brg_status_name(st_), brg_last_error());           \
            return NULL;                                                                              \
        }                                                                                             \
    } while (0)

static float *dup_floats(const float *x, int64_t n) {
    float *y = malloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    if (n > 0) memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

/* ==== faults ================================================================================ */

static sigjmp_buf fault_jmp;
static volatile sig_atomic_t fault_armed;
static pthread_t main_thread;
static opcase *volatile fault_case;
static char fault_msg[320];

static void describe_fault(const char *addr, char *out, size_t len) {
    snprintf(out, len, "at %p, outside the op table's buffers", (const void *)addr);
    opcase *c = fault_case;
    if (!c) return;
    for (int i = 0; i < c->nb; i++) {
        const gbuf *b = &c->b[i];
        const char *front = b->map, *data = b->p, *end = data + (size_t)b->n * elem_size(b->type);
        const char *back = b->map + page + b->room;
        if (addr >= front && addr < front + page)
            snprintf(out, len, "%lld bytes before the start of '%s' (%lld elements)", (long long)(data - addr),
                     b->name, (long long)b->n);
        else if (addr >= back && addr < back + page)
            snprintf(out, len, "%lld bytes past the end of '%s' (%lld elements; byte 0 is the first one past it)",
                     (long long)(addr - end), b->name, (long long)b->n);
    }
}

static void on_fault(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    char where[240];
    describe_fault(si->si_addr, where, sizeof where);
    snprintf(fault_msg, sizeof fault_msg, "%s: an access %s", sig == SIGSEGV ? "SIGSEGV" : "SIGBUS", where);
    if (fault_armed && pthread_equal(pthread_self(), main_thread)) {
        fault_armed = 0;
        siglongjmp(fault_jmp, 1);
    }
    /* A team thread, or outside a run: say what and where, then die of the signal. */
    char line[640];
    int len = snprintf(line, sizeof line, "FATAL %s%s: %s\n", cur_desc,
                       pthread_equal(pthread_self(), main_thread) ? "" : " (on a team thread)", fault_msg);
    if (len > 0 && write(2, line, (size_t)len) < 0) _exit(3);
    signal(sig, SIG_DFL);
}

static void install_fault_handler(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

/* ==== entries =============================================================================== */

#define SHAPES(s) s, (int)(sizeof s / sizeof s[0])

/* ---- gemm: brg_gemm, all four transposes, padded leading dimensions, beta 0 over poison ---- */
static const shape gemm_shapes[] = {
    {{1, 1, 1}, 0},       {{7, 17, 33}, V0},         {{33, 65, 17}, V1},           {{17, 7, 65}, V0 | V1 | V2},
    {{65, 33, 7}, V2},    {{2, 129, 16}, 0},         {{5, 9, 0}, 0},               {{7, 17, 9}, S_SPECIAL | V1},
    {{130, 97, 90}, S_BIG | V0},
};

static void gemm_layout(opcase *c) {
    const int64_t M = c->d[0], Nn = c->d[1], K = c->d[2], pad = c->v & V2 ? 3 : 0;
    const bool ta = c->v & V0, tb = c->v & V1;
    IN("A", B_SPECIAL, -1, 1, ta ? K : M, (ta ? M : K) + pad);
    IN("B", 0, -1, 1, tb ? Nn : K, (tb ? K : Nn) + pad);
    ACC("C", M, Nn + pad);
    OUT("C0", M, Nn);
}

static void gemm_kernel(opcase *c) {
    const int64_t M = c->d[0], Nn = c->d[1], K = c->d[2], pad = c->v & V2 ? 3 : 0;
    const bool ta = c->v & V0, tb = c->v & V1;
    const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : Nn) + pad;
    brg_gemm(ta, tb, M, Nn, K, 1.25f, F(c, "A"), lda, F(c, "B"), ldb, 0.75f, F(c, "C"), Nn + pad);
    brg_gemm(ta, tb, M, Nn, K, 1.0f, F(c, "A"), lda, F(c, "B"), ldb, 0.0f, F(c, "C0"), Nn);
}

/* ---- linear ---- */
static const shape linear_shapes[] = {
    {{1, 1, 1}, 0},  {{7, 17, 33}, 0}, {{17, 33, 7}, V0}, {{33, 7, 65}, V1}, {{7, 65, 17}, V0 | V1},
    {{5, 17, 9}, S_SPECIAL}, {{257, 33, 129}, S_BIG | V0},
};

static void linear_layout(opcase *c) {
    const int64_t n = c->d[0], in = c->d[1], out = c->d[2];
    const bool wio = c->v & V0;
    IN("x", B_PARAM | B_SPECIAL, -1, 1, n, in);
    IN("w", B_PARAM, -0.5, 0.5, wio ? in : out, wio ? out : in);
    if (!(c->v & V1)) IN("b", B_PARAM, -0.5, 0.5, out);
    IN("dy", 0, -1, 1, n, out);
    OUT("y", n, out);
    ACC("dx", n, in);
    ACC("dw", wio ? in : out, wio ? out : in);
    if (!(c->v & V1)) ACC("db", out);
    OUT("dw0", wio ? in : out, wio ? out : in); /* dw_overwrite: written over the poison */
    OUT("dx0", n, in);                           /* dx_overwrite, the same */
}

static void linear_kernel(opcase *c) {
    const int64_t n = c->d[0], in = c->d[1], out = c->d[2];
    const bool wio = c->v & V0;
    brg_k_linear_fwd(F(c, "y"), F(c, "x"), F(c, "w"), Fopt(c, "b"), n, in, out, wio);
    brg_k_linear_bwd(F(c, "dx"), false, F(c, "dw"), false, Fopt(c, "db"), F(c, "dy"), F(c, "x"), F(c, "w"), n, in,
                     out, wio);
    brg_k_linear_bwd(F(c, "dx0"), true, F(c, "dw0"), true, NULL, F(c, "dy"), F(c, "x"), F(c, "w"), n, in, out, wio);
}

static brg_tensor *linear_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_linear(tape, T(c, "x"), T(c, "w"), Topt(c, "b"), c->v & V0, &y));
    return y;
}

/* ---- linear_act: the fused bias + GELU passes, bit for bit the separate kernels ---- */
static const shape linear_act_shapes[] = {
    {{1, 1, 1}, 0},           {{7, 17, 33}, V2},        {{17, 33, 7}, V0}, {{9, 7, 65}, V1 | V2},
    {{7, 65, 17}, V0 | V1},   {{5, 17, 9}, S_SPECIAL},  {{257, 33, 129}, S_BIG | V0 | V2},
};

static void linear_act_layout(opcase *c) {
    linear_layout(c);
    for (int drop = 0; drop < 2; drop++) { /* no dx0, dw0 */
        c->nb--;
        munmap(c->b[c->nb].map, c->b[c->nb].room + 2 * page);
    }
    OUT("h", c->d[0], c->d[2]);
    OUT("dh", c->d[0], c->d[2]);
}

static void linear_act_kernel(opcase *c) {
    const int64_t n = c->d[0], in = c->d[1], out = c->d[2], nw = in * out;
    const bool wio = c->v & V0;
    const brg_gelu_kind kind = c->v & V2 ? BRG_GELU_TANH : BRG_GELU_ERF;
    float *x = F(c, "x"), *w = F(c, "w"), *b = Fopt(c, "b"), *dy = F(c, "dy");
    float *dx = F(c, "dx"), *dw = F(c, "dw"), *db = Fopt(c, "db"), *h = F(c, "h"), *y = F(c, "y"), *dh = F(c, "dh");
    /* the separate kernels first, from the same starting gradients */
    float *dx2 = dup_floats(dx, n * in), *dw2 = dup_floats(dw, nw), *db2 = db ? dup_floats(db, out) : NULL;
    float *h2 = tk_zeros(n * out), *y2 = tk_zeros(n * out), *dh2 = tk_zeros(n * out);
    brg_k_linear_fwd(h2, x, w, b, n, in, out, wio);
    brg_k_gelu_fwd(y2, h2, n * out, kind);
    brg_k_gelu_bwd(dh2, dy, h2, n * out, kind);
    brg_k_linear_bwd(dx2, false, dw2, false, db2, dh2, x, w, n, in, out, wio);
    /* what brg_linear_act runs */
    brg_k_linear_fwd(h, x, w, NULL, n, in, out, wio);
    brg_k_bias_gelu_fwd(h, y, b, n, out, kind);
    brg_k_bias_gelu_bwd(dh, db, dy, h, n, out, kind);
    brg_k_linear_bwd(dx, false, dw, false, NULL, dh, x, w, n, in, out, wio);
    expect_bits(c, "fused h vs linear + bias", h, h2, n * out);
    expect_bits(c, "fused y vs brg_k_gelu_fwd", y, y2, n * out);
    expect_bits(c, "fused dh vs brg_k_gelu_bwd", dh, dh2, n * out);
    expect_bits(c, "fused dx vs the separate kernels", dx, dx2, n * in);
    expect_bits(c, "fused dw vs the separate kernels", dw, dw2, nw);
    if (db) expect_bits(c, "fused db vs brg_k_linear_bwd's column sums", db, db2, out);
    free(dx2), free(dw2), free(db2), free(h2), free(y2), free(dh2);
}

static brg_tensor *linear_act_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_linear_act(tape, T(c, "x"), T(c, "w"), Topt(c, "b"), c->v & V0,
                         c->v & V2 ? BRG_ACT_GELU_TANH : BRG_ACT_GELU_ERF, &y));
    return y;
}

/* ---- matmul / bmm ---- */
static const shape matmul_shapes[] = {
    {{1, 1, 1, 1}, 0},        {{2, 7, 9, 5}, 0},         {{3, 17, 7, 9}, V0},    {{2, 9, 33, 17}, V1},
    {{1, 33, 17, 7}, V0 | V1}, {{2, 7, 17, 33}, 0},      {{2, 5, 7, 3}, S_SPECIAL}, {{2, 97, 130, 90}, S_BIG | V1},
};

static void matmul_layout(opcase *c) {
    const int64_t bt = c->d[0], M = c->d[1], Nn = c->d[2], K = c->d[3];
    const bool ta = c->v & V0, tb = c->v & V1;
    IN("a", B_PARAM | B_SPECIAL, -1, 1, bt, ta ? K : M, ta ? M : K);
    IN("b", B_PARAM, -1, 1, bt, tb ? Nn : K, tb ? K : Nn);
    IN("dc", 0, -1, 1, bt, M, Nn);
    OUT("c", bt, M, Nn);
    ACC("da", bt, ta ? K : M, ta ? M : K);
    ACC("db", bt, tb ? Nn : K, tb ? K : Nn);
}

static void matmul_kernel(opcase *c) {
    const int64_t bt = c->d[0], M = c->d[1], Nn = c->d[2], K = c->d[3];
    const bool ta = c->v & V0, tb = c->v & V1;
    brg_k_bmm_fwd(F(c, "c"), F(c, "a"), F(c, "b"), bt, M, Nn, K, ta, tb);
    brg_k_bmm_bwd(F(c, "da"), F(c, "db"), F(c, "dc"), F(c, "a"), F(c, "b"), bt, M, Nn, K, ta, tb);
}

static brg_tensor *matmul_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_matmul(tape, T(c, "a"), T(c, "b"), c->v & V0, c->v & V1, &y));
    return y;
}

/* ---- attention: causal, key mask, additive bias, dropout, a KV cache's row stride ---- */
#define KV_EXTRA 3
static const shape attention_shapes[] = {
    {{1, 1, 1, 1, 1}, 0},
    {{1, 2, 7, 7, 4}, V0},
    {{2, 1, 5, 9, 3}, V1},
    {{1, 2, 7, 7, 5}, V0 | V1 | V2},
    {{2, 2, 3, 5, 4}, V2 | V3},
    {{1, 1, 9, 17, 8}, V0 | V4},
    {{1, 2, 17, 9, 3}, V0}, /* Tq > Tk: the first rows see no key */
    {{1, 2, 5, 5, 3}, S_SPECIAL | V1},
    {{1, 2, 33, 65, 17}, V0 | V1 | V4}, /* two row blocks */
    {{1, 3, 97, 97, 40}, S_BIG | V0 | V1 | V2 | V3},
    /* one query row, a decode step's: without a log-sum-exp to keep it reads the keys and values
     * as rows (gemv.c) instead of through GEMMs; heads split across a team from fewer bytes */
    {{1, 2, 1, 9, 4}, V0},
    {{2, 2, 1, 7, 5}, V1 | V2 | V3},
    {{1, 3, 1, 40, 17}, V0 | V4},
    {{2, 12, 1, 300, 64}, S_BIG | V0 | V1 | V4},
};

static brg_attn_args attention_args(opcase *c) {
    brg_attn_args a = {.B = c->d[0], .H = c->d[1], .Tq = c->d[2], .Tk = c->d[3], .D = c->d[4],
                       .scale = 1.0f / sqrtf((float)c->d[4]), .causal = c->v & V0,
                       .dropout = c->v & V3 ? 0.2f : 0.0f, .seed = 7, .offset = 11};
    a.key_mask = Fopt(c, "mask");
    a.bias = Fopt(c, "bias");
    return a;
}

static void attention_layout(opcase *c) {
    const int64_t B = c->d[0], H = c->d[1], Tq = c->d[2], Tk = c->d[3], D = c->d[4], S = Tk + KV_EXTRA;
    IN("q", B_PARAM | B_SPECIAL, -1.5, 1.5, B, H, Tq, D);
    IN("k", B_PARAM, -1.5, 1.5, B, H, Tk, D);
    IN("v", B_PARAM, -1, 1, B, H, Tk, D);
    if (c->v & V1) IN("mask", 0, 0, 1, B, Tk);
    if (c->v & V2) IN("bias", B_PARAM, -1, 1, H, Tq, Tk);
    IN("dout", 0, -1, 1, B, H, Tq, D);
    OUT("out", B, H, Tq, D);
    OUT("lse", B, H, Tq);
    ACC("dq", B, H, Tq, D);
    ACC("dk", B, H, Tk, D);
    ACC("dv", B, H, Tk, D);
    if (c->v & V2) ACC("dbias", H, Tq, Tk);
    if (Tq == 1) OUT("outs", B, H, Tq, D);
    if (Tq == 1 && (c->v & V4)) OUT("outsc", B, H, Tq, D);
    if (c->v & V4) {
        IN("kc", 0, -1, 1, B, H, S, D);
        IN("vc", 0, -1, 1, B, H, S, D);
        OUT("outc", B, H, Tq, D);
        OUT("lsec", B, H, Tq);
        ACC("dqc", B, H, Tq, D);
        ACC("dkc", B, H, S, D);
        ACC("dvc", B, H, S, D);
    }
}

/* Padding: keys j = 3 mod 4, and the last two of batch row 1 (which then has none left when
 * Tk <= 2... that is the all-padded case). With a KV stride the first Tk rows of each (b, h) of
 * the cache copies are k and v, and the gradients start from the same values. */
static void attention_prepare(opcase *c) {
    const int64_t B = c->d[0], H = c->d[1], Tk = c->d[3], D = c->d[4], S = Tk + KV_EXTRA;
    float *m = Fopt(c, "mask");
    for (int64_t b = 0; m && b < B; b++)
        for (int64_t j = 0; j < Tk; j++) m[b * Tk + j] = (j % 4 == 3 || (b == 1 && j >= Tk - 2)) ? 0.0f : 1.0f;
    if (!(c->v & V4)) return;
    memcpy(F(c, "dqc"), F(c, "dq"), (size_t)N(c, "dq") * sizeof(float));
    const char *pairs[4][2] = {{"k", "kc"}, {"v", "vc"}, {"dk", "dkc"}, {"dv", "dvc"}};
    for (int p = 0; p < 4; p++) {
        const float *src = F(c, pairs[p][0]);
        float *dst = F(c, pairs[p][1]);
        for (int64_t bh = 0; bh < B * H; bh++) {
            memcpy(dst + bh * S * D, src + bh * Tk * D, (size_t)(Tk * D) * sizeof(float));
            if (p >= 2)
                for (int64_t r = Tk * D; r < S * D; r++) dst[bh * S * D + r] = 777.0f;
        }
    }
}

static void attention_kernel(opcase *c) {
    brg_attn_args a = attention_args(c);
    const int64_t B = a.B, H = a.H, Tq = a.Tq, Tk = a.Tk, D = a.D, S = Tk + KV_EXTRA, nq = B * H * Tq * D;
    float *q = F(c, "q"), *k = F(c, "k"), *v = F(c, "v"), *out = F(c, "out"), *lse = F(c, "lse");
    brg_k_attention_fwd(out, lse, q, k, v, &a);
    brg_k_attention_bwd(F(c, "dq"), F(c, "dk"), F(c, "dv"), Fopt(c, "dbias"), F(c, "dout"), out, lse, q, k, v, &a);
    if (a.dropout == 0.0f && !(c->v & S_SPECIAL)) {
        float *ref = tk_zeros(nq);
        brg_k_attention_fwd_ref(ref, q, k, v, &a);
        expect_close(c, "out vs brg_k_attention_fwd_ref", out, ref, nq, 2e-6);
        free(ref);
    }
    if (Tq == 1) { /* the single-row path: as close to the GEMMs' output as they are to the reference */
        brg_k_attention_fwd(F(c, "outs"), NULL, q, k, v, &a);
        if (!(c->v & S_SPECIAL)) expect_close(c, "single row (no lse) vs with lse", F(c, "outs"), out, nq, 2e-6);
    }
    if (!(c->v & V4)) return;
    /* A KV cache's layout: the same bits as the packed keys and values. */
    brg_attn_args s = a;
    s.kv_stride = S;
    float *kc = F(c, "kc"), *vc = F(c, "vc"), *dkc = F(c, "dkc"), *dvc = F(c, "dvc");
    brg_k_attention_fwd(F(c, "outc"), F(c, "lsec"), q, kc, vc, &s);
    brg_k_attention_bwd(F(c, "dqc"), dkc, dvc, NULL, F(c, "dout"), F(c, "outc"), F(c, "lsec"), q, kc, vc, &s);
    expect_bits(c, "kv_stride out", F(c, "outc"), out, nq);
    if (Tq == 1) {
        brg_k_attention_fwd(F(c, "outsc"), NULL, q, kc, vc, &s);
        expect_bits(c, "kv_stride single-row out", F(c, "outsc"), F(c, "outs"), nq);
    }
    expect_bits(c, "kv_stride lse", F(c, "lsec"), lse, B * H * Tq);
    expect_bits(c, "kv_stride dq", F(c, "dqc"), F(c, "dq"), nq);
    bool rows_ok = true, rest_ok = true;
    for (int64_t bh = 0; bh < B * H; bh++) {
        rows_ok = rows_ok && memcmp(dkc + bh * S * D, F(c, "dk") + bh * Tk * D, (size_t)(Tk * D) * 4) == 0 &&
                  memcmp(dvc + bh * S * D, F(c, "dv") + bh * Tk * D, (size_t)(Tk * D) * 4) == 0;
        for (int64_t r = Tk * D; r < S * D; r++)
            rest_ok = rest_ok && dkc[bh * S * D + r] == 777.0f && dvc[bh * S * D + r] == 777.0f;
    }
    report(rows_ok, "kv_stride dk/dv rows differ from the packed run");
    report(rest_ok, "kv_stride backward wrote into the cache rows past Tk");
}

static brg_tensor *attention_graph(brg_tape *tape, opcase *c) {
    brg_attention_opts o = {.scale = 1.0f / sqrtf((float)c->d[4]), .causal = c->v & V0, .key_mask = Topt(c, "mask"),
                            .bias = Topt(c, "bias"), .dropout = c->v & V3 ? 0.2f : 0.0f, .seed = 7, .offset = 11};
    brg_tensor *y;
    OPCHK(brg_attention(tape, T(c, "q"), T(c, "k"), T(c, "v"), &o, &y));
    return y;
}

/* ---- softmax ---- */
static const shape softmax_shapes[] = {
    {{1, 1}, 0},  {{3, 7}, 0},  {{2, 16}, 0},   {{2, 17}, 0},
    {{5, 33}, 0}, {{1, 65}, 0}, {{3, 1000}, 0}, {{3, 17}, S_SPECIAL},
};

static void softmax_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL, -4, 4, c->d[0], c->d[1]);
    IN("dy", 0, -1, 1, c->d[0], c->d[1]);
    OUT("y", c->d[0], c->d[1]);
    ACC("dx", c->d[0], c->d[1]);
}

static void softmax_kernel(opcase *c) {
    brg_k_softmax_fwd(F(c, "y"), F(c, "x"), c->d[0], c->d[1]);
    brg_k_softmax_bwd(F(c, "dx"), F(c, "dy"), F(c, "y"), c->d[0], c->d[1]);
}

static brg_tensor *softmax_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_softmax(tape, T(c, "x"), &y));
    return y;
}

/* ---- layer norm (V0: no affine parameters, a kernel-only case) ---- */
static const shape layer_norm_shapes[] = {
    {{1, 1}, 0}, {{3, 7}, 0}, {{3, 8}, 0}, {{2, 16}, 0}, {{2, 17}, 0}, {{4, 33}, V0}, {{2, 65}, 0},
    {{1, 1000}, 0}, {{3, 17}, S_SPECIAL}, {{257, 129}, S_BIG},
};

static void layer_norm_layout(opcase *c) {
    const int64_t n = c->d[0], w = c->d[1];
    IN("x", B_PARAM | B_SPECIAL, -2, 2, n, w);
    if (!(c->v & V0)) {
        IN("gamma", B_PARAM, 0.5, 1.5, w);
        IN("beta", B_PARAM, -0.5, 0.5, w);
    }
    IN("dy", 0, -1, 1, n, w);
    OUT("y", n, w);
    OUT("mean", n);
    OUT("rstd", n);
    ACC("dx", n, w);
    if (!(c->v & V0)) {
        ACC("dgamma", w);
        ACC("dbeta", w);
    }
}

static void layer_norm_kernel(opcase *c) {
    const int64_t n = c->d[0], w = c->d[1];
    brg_k_layernorm_fwd(F(c, "y"), F(c, "mean"), F(c, "rstd"), F(c, "x"), Fopt(c, "gamma"), Fopt(c, "beta"), n, w,
                        1e-5f);
    brg_k_layernorm_bwd(F(c, "dx"), Fopt(c, "dgamma"), Fopt(c, "dbeta"), F(c, "dy"), F(c, "x"), Fopt(c, "gamma"),
                        F(c, "mean"), F(c, "rstd"), n, w);
}

static brg_tensor *layer_norm_graph(brg_tape *tape, opcase *c) {
    if (c->v & V0) return NULL;
    brg_tensor *y;
    OPCHK(brg_layer_norm(tape, T(c, "x"), T(c, "gamma"), T(c, "beta"), 1e-5f, &y));
    return y;
}

/* ---- RMS norm (T5) ---- */
static const shape rms_norm_shapes[] = {
    {{1, 1}, 0}, {{3, 7}, 0}, {{2, 17}, 0}, {{4, 33}, 0}, {{1, 65}, 0}, {{3, 1000}, 0}, {{3, 17}, S_SPECIAL},
};

static void rms_norm_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL, -2, 2, c->d[0], c->d[1]);
    IN("w", B_PARAM, 0.5, 1.5, c->d[1]);
    IN("dy", 0, -1, 1, c->d[0], c->d[1]);
    OUT("y", c->d[0], c->d[1]);
    OUT("rstd", c->d[0]);
    ACC("dx", c->d[0], c->d[1]);
    ACC("dw", c->d[1]);
}

static void rms_norm_kernel(opcase *c) {
    brg_k_rmsnorm_fwd(F(c, "y"), F(c, "rstd"), F(c, "x"), F(c, "w"), c->d[0], c->d[1], 1e-6f);
    brg_k_rmsnorm_bwd(F(c, "dx"), F(c, "dw"), F(c, "dy"), F(c, "x"), F(c, "w"), F(c, "rstd"), c->d[0], c->d[1]);
}

static brg_tensor *rms_norm_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_rms_norm(tape, T(c, "x"), T(c, "w"), 1e-6f, &y));
    return y;
}

/* ---- element-wise ops over one flat length ---- */
static const shape flat_shapes[] = {
    {{1}, 0}, {{7}, 0}, {{16}, 0}, {{17}, 0}, {{33}, 0}, {{65}, 0}, {{1000}, 0}, {{17}, S_SPECIAL},
};

static void unary_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL | (strcmp(c->e->name, "relu") == 0 ? B_AWAY0 : 0), -3, 3, c->d[0]);
    IN("dy", 0, -1, 1, c->d[0]);
    OUT("y", c->d[0]);
    ACC("dx", c->d[0]);
}

/* GELU, erf (V0 clear) and tanh (V0) */
static const shape gelu_shapes[] = {
    {{1}, 0},  {{7}, V0},   {{8}, 0},   {{9}, V0},   {{15}, 0},        {{16}, V0},         {{17}, 0},
    {{31}, V0}, {{33}, 0},  {{65}, V0}, {{1000}, 0}, {{17}, S_SPECIAL}, {{17}, S_SPECIAL | V0},
    {{40000}, S_BIG},       {{40000}, S_BIG | V0},
};

static void gelu_kernel(opcase *c) {
    const brg_gelu_kind kind = c->v & V0 ? BRG_GELU_TANH : BRG_GELU_ERF;
    brg_k_gelu_fwd(F(c, "y"), F(c, "x"), c->d[0], kind);
    brg_k_gelu_bwd(F(c, "dx"), F(c, "dy"), F(c, "x"), c->d[0], kind);
}

static brg_tensor *gelu_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_activation_op(tape, T(c, "x"), c->v & V0 ? BRG_ACT_GELU_TANH : BRG_ACT_GELU_ERF, &y));
    return y;
}

static void relu_kernel(opcase *c) {
    brg_k_relu_fwd(F(c, "y"), F(c, "x"), c->d[0]);
    brg_k_relu_bwd(F(c, "dx"), false, F(c, "dy"), F(c, "x"), c->d[0]);
}

static brg_tensor *relu_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_relu(tape, T(c, "x"), &y));
    return y;
}

static void tanh_kernel(opcase *c) {
    brg_k_tanh_fwd(F(c, "y"), F(c, "x"), c->d[0]);
    brg_k_tanh_bwd(F(c, "dx"), F(c, "dy"), F(c, "y"), c->d[0]);
}

static brg_tensor *tanh_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_tanh(tape, T(c, "x"), &y));
    return y;
}

/* clamp: [0, 10] (V0: [-10, 0]); inputs stay 0.05 away from the kink at 0, the far bound is
 * out of their reach */
static const shape clamp_shapes[] = {
    {{1}, 0}, {{7}, V0}, {{17}, 0}, {{33}, V0}, {{1000}, 0}, {{17}, S_SPECIAL}, {{17}, S_SPECIAL | V0},
};

static void clamp_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL | B_AWAY0, -3, 3, c->d[0]);
    IN("dy", 0, -1, 1, c->d[0]);
    OUT("y", c->d[0]);
    ACC("dx", c->d[0]);
}

static float clamp_lo(const opcase *c) { return c->v & V0 ? -10.0f : 0.0f; }
static float clamp_hi(const opcase *c) { return c->v & V0 ? 0.0f : 10.0f; }

static void clamp_kernel(opcase *c) {
    brg_k_clamp_fwd(F(c, "y"), F(c, "x"), c->d[0], clamp_lo(c), clamp_hi(c));
    brg_k_clamp_bwd(F(c, "dx"), F(c, "dy"), F(c, "x"), c->d[0], clamp_lo(c), clamp_hi(c));
}

static brg_tensor *clamp_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_clamp(tape, T(c, "x"), clamp_lo(c), clamp_hi(c), &y));
    return y;
}

/* fp16 overflow guard on x * 0.5 (a new tensor, so the graph's output is never its input): the
 * seeded values are moved so the guard acts. V0: every |x| >= 67000 (fp16 inf: clamped to
 * 64504, no gradient passes); V1: one element at 2 * 65510 (past 65504, not inf: only it is
 * clamped, to 65504); V2: |x| <= 3, the guard passes its input on. Finite differences only on V2:
 * steps on values near 1e5 are lost to rounding, so V0 and V1 are checked against the kernel. */
static const shape guard_shapes[] = {
    {{1}, V2}, {{7}, V0}, {{17}, V1}, {{33}, V2}, {{1000}, V0}, {{1000}, V1},
};

static void guard_layout(opcase *c) {
    IN("x", B_PARAM, -3, 3, c->d[0]);
    IN("dy", 0, -1, 1, c->d[0]);
    OUT("y", c->d[0]);
    ACC("dx", c->d[0]);
}

static void guard_prepare(opcase *c) {
    float *x = F(c, "x");
    for (int64_t i = 0; c->v & V0 && i < c->d[0]; i++) x[i] = x[i] < 0 ? x[i] * 1000 - 134000 : x[i] * 1000 + 134000;
    if (c->v & V1) x[c->d[0] / 2] = 2 * 65510.0f;
}

static void guard_kernel(opcase *c) {
    const int64_t n = c->d[0];
    const float *x = F(c, "x");
    float *y = F(c, "y"), *dx = F(c, "dx");
    const float *dy = F(c, "dy");
    float h[1000];
    for (int64_t i = 0; i < n; i++) h[i] = x[i] * 0.5f;
    const float m = brg_k_max_abs(h, n), bound = m >= 65520.0f ? 64504.0f : 65504.0f;
    if (m > 65504.0f) brg_k_clamp_fwd(y, h, n, -bound, bound);
    else memcpy(y, h, (size_t)n * sizeof *y);
    float g[1000] = {0};
    if (m > 65504.0f) brg_k_clamp_bwd(g, dy, h, n, -bound, bound);
    else memcpy(g, dy, (size_t)n * sizeof *g);
    for (int64_t i = 0; i < n; i++) dx[i] += g[i] * 0.5f;
}

static brg_tensor *guard_graph(brg_tape *tape, opcase *c) {
    brg_tensor *h, *y;
    OPCHK(brg_scale(tape, T(c, "x"), 0.5f, &h));
    OPCHK(brg_fp16_overflow_guard(tape, h, &y));
    return y;
}

#define SCALE_S 0.37f

static void scale_kernel(opcase *c) { brg_k_scale(F(c, "y"), F(c, "x"), SCALE_S, c->d[0]); }

static brg_tensor *scale_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_scale(tape, T(c, "x"), SCALE_S, &y));
    return y;
}

static void binary_layout(opcase *c) {
    IN("a", B_PARAM | B_SPECIAL, -2, 2, c->d[0]);
    IN("b", B_PARAM, -2, 2, c->d[0]);
    IN("dy", 0, -1, 1, c->d[0]);
    OUT("y", c->d[0]);
    ACC("da", c->d[0]);
    ACC("db", c->d[0]);
}

static void mul_kernel(opcase *c) {
    brg_k_mul_fwd(F(c, "y"), F(c, "a"), F(c, "b"), c->d[0]);
    brg_k_mul_bwd(F(c, "da"), F(c, "db"), F(c, "dy"), F(c, "a"), F(c, "b"), c->d[0]);
}

static brg_tensor *mul_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_mul(tape, T(c, "a"), T(c, "b"), &y));
    return y;
}

static void add_kernel(opcase *c) {
    brg_k_add_fwd(F(c, "y"), F(c, "a"), F(c, "b"), c->d[0]);
    brg_k_accumulate(F(c, "da"), false, F(c, "dy"), c->d[0]);
    brg_k_accumulate(F(c, "db"), false, F(c, "dy"), c->d[0]);
}

static brg_tensor *add_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_add(tape, T(c, "a"), T(c, "b"), &y));
    return y;
}

/* ---- dropout: the mask bits of every body are brg_k_dropout_keep's (V0: p = 0.5, V1: an offset) */
static const shape dropout_shapes[] = {
    {{1}, 0}, {{7}, V0}, {{17}, V1}, {{33}, 0}, {{65}, V0 | V1}, {{1000}, 0}, {{17}, S_SPECIAL}, {{70000}, S_BIG | V1},
};

static float dropout_p(const opcase *c) { return c->v & V0 ? 0.5f : 0.1f; }
static uint64_t dropout_offset(const opcase *c) { return c->v & V1 ? 12345 : 0; }

static void dropout_kernel(opcase *c) {
    const int64_t n = c->d[0];
    const float p = dropout_p(c), scale = 1.0f / (1.0f - p);
    const uint64_t off = dropout_offset(c);
    float *x = F(c, "x"), *y = F(c, "y"), *dy = F(c, "dy"), *dx = F(c, "dx");
    float *want_y = tk_zeros(n), *want_dx = dup_floats(dx, n);
    for (int64_t i = 0; i < n; i++)
        if (brg_k_dropout_keep(p, 99, off + (uint64_t)i)) {
            want_y[i] = x[i] * scale;
            want_dx[i] = want_dx[i] + dy[i] * scale;
        }
    brg_k_dropout_fwd(y, x, n, p, 99, off);
    brg_k_dropout_bwd(dx, false, dy, n, p, 99, off);
    expect_bits(c, "y vs brg_k_dropout_keep ? x * scale : 0", y, want_y, n);
    expect_bits(c, "dx vs dx + (keep ? dy * scale : 0)", dx, want_dx, n);
    free(want_y), free(want_dx);
}

static brg_tensor *dropout_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_dropout(tape, T(c, "x"), dropout_p(c), true, 99, dropout_offset(c), &y));
    return y;
}

/* ---- embedding: lookup and the scatter-add of repeated ids (V0: no padding row) ---- */
static const shape embedding_shapes[] = {
    {{1, 1, 1}, 0}, {{7, 5, 17}, 0}, {{17, 3, 33}, V0}, {{33, 40, 7}, 0}, {{9, 9, 65}, 0},
    {{7, 5, 17}, S_SPECIAL}, {{300, 50, 129}, S_BIG},
};

static void embedding_layout(opcase *c) {
    const int64_t n = c->d[0], rows = c->d[1], dim = c->d[2];
    IDS("ids", 0, (double)rows, n);
    IN("table", B_PARAM | B_SPECIAL, -1, 1, rows, dim);
    IN("dy", 0, -1, 1, n, dim);
    OUT("y", n, dim);
    ACC("dtable", rows, dim);
}

/* Row 0 looked up first (the special shape's NaN is there), repeats, and the padding row 1. */
static void embedding_prepare(opcase *c) {
    const int64_t n = c->d[0], rows = c->d[1];
    int32_t *ids = I(c, "ids");
    ids[0] = 0;
    if (n > 2) ids[n - 1] = ids[1];
    if (n > 3 && rows > 1) ids[2] = 1;
}

static void embedding_kernel(opcase *c) {
    const int64_t n = c->d[0], dim = c->d[2];
    brg_k_embedding_fwd(F(c, "y"), I(c, "ids"), F(c, "table"), n, dim);
    brg_k_embedding_bwd(F(c, "dtable"), F(c, "dy"), I(c, "ids"), n, dim);
}

static brg_tensor *embedding_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_embedding(tape, T(c, "ids"), T(c, "table"), &y));
    return y;
}

static int32_t padding_idx(const opcase *c) { return c->v & V0 ? -1 : 1; }

static void embedding_padded_kernel(opcase *c) {
    const int64_t n = c->d[0], dim = c->d[2];
    brg_k_embedding_fwd(F(c, "y"), I(c, "ids"), F(c, "table"), n, dim);
    brg_k_embedding_pad_bwd(F(c, "dtable"), F(c, "dy"), I(c, "ids"), n, dim, padding_idx(c));
}

static brg_tensor *embedding_padded_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_embedding_padded(tape, T(c, "ids"), T(c, "table"), padding_idx(c), &y));
    return y;
}

/* ---- cross-entropy with ignore_index -100 (V0: every row ignored, V1: a global denominator) ---- */
static const shape cross_entropy_shapes[] = {
    {{1, 1}, 0},  {{3, 7}, 0},  {{5, 17}, 0}, {{7, 33}, V1}, {{4, 65}, 0}, {{3, 17}, V0}, {{2, 1000}, V1},
    {{3, 17}, S_SPECIAL}, {{65, 513}, S_BIG},
};

static void cross_entropy_layout(opcase *c) {
    const int64_t n = c->d[0], v = c->d[1];
    IN("logits", B_PARAM | B_SPECIAL, -4, 4, n, v);
    IDS("targets", 0, (double)v, n);
    OUT("loss", 1);
    OUT("lse", n);
    IOUT("count", 1);
    ACC("dlogits", n, v);
}

static void cross_entropy_prepare(opcase *c) {
    int32_t *t = I(c, "targets");
    for (int64_t i = 0; i < c->d[0]; i++)
        if (i % 3 == 2 || (c->v & V0)) t[i] = -100;
}

static void cross_entropy_kernel(opcase *c) {
    const int64_t n = c->d[0], v = c->d[1];
    int64_t count = -1;
    F(c, "loss")[0] = brg_k_cross_entropy_fwd(F(c, "lse"), &count, F(c, "logits"), I(c, "targets"), n, v, -100);
    I(c, "count")[0] = (int32_t)count;
    brg_k_cross_entropy_bwd(F(c, "dlogits"), false, 0.7f, F(c, "logits"), F(c, "lse"), I(c, "targets"), n, v, -100,
                            count);
}

static brg_tensor *cross_entropy_graph(brg_tape *tape, opcase *c) {
    brg_tensor *loss;
    if (c->v & V1) {
        int64_t counted = 0;
        for (int64_t i = 0; i < c->d[0]; i++) counted += I(c, "targets")[i] != -100;
        OPCHK(brg_cross_entropy_share(tape, T(c, "logits"), T(c, "targets"), -100, (double)(counted + 2), &loss));
    } else {
        OPCHK(brg_cross_entropy(tape, T(c, "logits"), T(c, "targets"), -100, &loss));
    }
    return loss;
}

/* ---- MSE and BCE with logits (V0: a global denominator) ---- */
static const shape loss_shapes[] = {
    {{1}, 0}, {{7}, V0}, {{17}, 0}, {{33}, V0}, {{65}, 0}, {{1000}, 0}, {{17}, S_SPECIAL},
};

static void pointwise_loss_layout(opcase *c) {
    const bool bce = strcmp(c->e->name, "bce_with_logits") == 0;
    IN("x", B_PARAM | B_SPECIAL, -3, 3, c->d[0]);
    IN("target", 0, bce ? 0 : -2, bce ? 1 : 2, c->d[0]);
    OUT("loss", 1);
    ACC("dx", c->d[0]);
}

static double loss_denominator(const opcase *c) { return c->v & V0 ? (double)c->d[0] + 5.0 : 0.0; }

static void mse_kernel(opcase *c) {
    const int64_t n = c->d[0];
    const double denom = c->v & V0 ? loss_denominator(c) : (double)n;
    F(c, "loss")[0] = (float)(brg_k_mse_sum_fwd(F(c, "x"), F(c, "target"), n) / denom);
    brg_k_mse_bwd(F(c, "dx"), (float)(1.0 / denom), F(c, "x"), F(c, "target"), n);
}

static brg_tensor *mse_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_mse_loss_share(tape, T(c, "x"), T(c, "target"), loss_denominator(c), &y));
    return y;
}

static void bce_kernel(opcase *c) {
    const int64_t n = c->d[0];
    const double denom = c->v & V0 ? loss_denominator(c) : (double)n;
    F(c, "loss")[0] = (float)(brg_k_bce_logits_sum_fwd(F(c, "x"), F(c, "target"), n) / denom);
    brg_k_bce_logits_bwd(F(c, "dx"), (float)(1.0 / denom), F(c, "x"), F(c, "target"), n);
}

static brg_tensor *bce_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_bce_with_logits_share(tape, T(c, "x"), T(c, "target"), loss_denominator(c), &y));
    return y;
}

/* ---- encoder structure: select, prepend a token, broadcast add, patch unfold ---- */
static const shape select_shapes[] = {
    {{1, 1, 1, 0}, 0}, {{3, 7, 17, 6}, 0}, {{2, 17, 1, 0}, 0}, {{5, 4, 33, 3}, 0}, {{2, 3, 7, 0}, S_SPECIAL},
};

static void select_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL, -1, 1, c->d[0], c->d[1], c->d[2]);
    IN("dy", 0, -1, 1, c->d[0], c->d[2]);
    OUT("y", c->d[0], c->d[2]);
    ACC("dx", c->d[0], c->d[1], c->d[2]);
}

static void select_kernel(opcase *c) {
    brg_k_select_fwd(F(c, "y"), F(c, "x"), c->d[0], c->d[1], c->d[2], c->d[3]);
    brg_k_select_bwd(F(c, "dx"), F(c, "dy"), c->d[0], c->d[1], c->d[2], c->d[3]);
}

static brg_tensor *select_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_select(tape, T(c, "x"), 1, c->d[3], &y));
    return y;
}

static const shape bnc_shapes[] = {
    {{1, 1, 1}, 0}, {{2, 7, 17}, 0}, {{3, 17, 1}, 0}, {{1, 33, 7}, 0}, {{2, 5, 65}, 0}, {{2, 3, 7}, S_SPECIAL},
};

static void prepend_layout(opcase *c) {
    const int64_t B = c->d[0], n = c->d[1], w = c->d[2];
    IN("token", B_PARAM, -1, 1, w);
    IN("x", B_PARAM | B_SPECIAL, -1, 1, B, n, w);
    IN("dy", 0, -1, 1, B, n + 1, w);
    OUT("y", B, n + 1, w);
    ACC("dtoken", w);
    ACC("dx", B, n, w);
}

static void prepend_kernel(opcase *c) {
    brg_k_prepend_token_fwd(F(c, "y"), F(c, "token"), F(c, "x"), c->d[0], c->d[1], c->d[2]);
    brg_k_prepend_token_bwd(F(c, "dtoken"), F(c, "dx"), F(c, "dy"), c->d[0], c->d[1], c->d[2]);
}

static brg_tensor *prepend_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_prepend_token(tape, T(c, "token"), T(c, "x"), &y));
    return y;
}

static void add_bcast_layout(opcase *c) {
    const int64_t A = c->d[0], M = c->d[1], In = c->d[2];
    IN("x", B_PARAM | B_SPECIAL, -1, 1, A, M, In);
    IN("p", B_PARAM, -1, 1, A, 1, In);
    IN("dy", 0, -1, 1, A, M, In);
    OUT("y", A, M, In);
    ACC("dx", A, M, In);
    ACC("dp", A, 1, In);
}

static void add_bcast_kernel(opcase *c) {
    brg_k_add_bcast_fwd(F(c, "y"), F(c, "x"), F(c, "p"), c->d[0], c->d[1], c->d[2]);
    brg_k_add_bcast_bwd(F(c, "dx"), F(c, "dp"), F(c, "dy"), c->d[0], c->d[1], c->d[2]);
}

static brg_tensor *add_bcast_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_add_broadcast(tape, T(c, "x"), T(c, "p"), &y));
    return y;
}

/* d = B, C, H, W, ph, pw */
static const shape patch_shapes[] = {
    {{1, 1, 1, 1, 1, 1}, 0}, {{1, 3, 7, 9, 2, 3}, 0}, {{2, 2, 8, 8, 4, 4}, 0}, {{1, 1, 17, 5, 4, 1}, 0},
    {{1, 2, 5, 5, 2, 2}, S_SPECIAL},
};

static brg_patch_dims patch_dims(const opcase *c) {
    return (brg_patch_dims){c->d[0], c->d[1], c->d[2], c->d[3], c->d[4], c->d[5]};
}

static void patch_layout(opcase *c) {
    const brg_patch_dims d = patch_dims(c);
    const int64_t np = (d.H / d.ph) * (d.W / d.pw), row = d.C * d.ph * d.pw;
    IN("pixels", B_PARAM | B_SPECIAL, -1, 1, d.B, d.C, d.H, d.W);
    IN("dy", 0, -1, 1, d.B, np, row);
    IN("w", 0, -1, 1, 5, row); /* a convolution weight for the reference check */
    OUT("patches", d.B, np, row);
    ACC("dpixels", d.B, d.C, d.H, d.W);
}

/* patches @ w^T is the strided convolution brg_k_patch_conv_ref computes directly. */
static void patch_kernel(opcase *c) {
    const brg_patch_dims d = patch_dims(c);
    const int64_t np = (d.H / d.ph) * (d.W / d.pw), row = d.C * d.ph * d.pw;
    brg_k_patch_unfold_fwd(F(c, "patches"), F(c, "pixels"), &d);
    brg_k_patch_unfold_bwd(F(c, "dpixels"), F(c, "dy"), &d);
    if (c->v & S_SPECIAL) return;
    float *want = tk_zeros(d.B * np * 5), *got = tk_zeros(d.B * np * 5);
    brg_k_patch_conv_ref(want, F(c, "pixels"), F(c, "w"), NULL, 5, &d);
    brg_gemm_ref(false, true, d.B * np, 5, row, 1.0f, F(c, "patches"), row, F(c, "w"), row, 0.0f, got, 5);
    expect_close(c, "patches @ w^T vs brg_k_patch_conv_ref", got, want, d.B * np * 5, 1e-6);
    free(want), free(got);
}

static brg_tensor *patch_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_patch_unfold(tape, T(c, "pixels"), c->d[4], c->d[5], &y));
    return y;
}

/* ---- T5's relative position bias and buckets (d = H, Tq, Tk, buckets; V0: bidirectional) ---- */
static const shape relpos_shapes[] = {
    {{1, 1, 1, 4}, 0}, {{2, 7, 9, 8}, V0}, {{3, 17, 17, 32}, 0}, {{1, 33, 5, 16}, V0}, {{2, 5, 5, 8}, S_SPECIAL},
};

static void relpos_layout(opcase *c) {
    const int64_t H = c->d[0], Tq = c->d[1], Tk = c->d[2], nb = c->d[3];
    IN("table", B_PARAM | B_SPECIAL, -1, 1, nb, H);
    IDS("buckets", 0, 1, Tq, Tk);
    IN("dy", 0, -1, 1, H, Tq, Tk);
    OUT("bias", H, Tq, Tk);
    ACC("dtable", nb, H);
}

static void relpos_prepare(opcase *c) {
    brg_k_relative_position_buckets(I(c, "buckets"), c->d[1], c->d[2], c->v & V0, c->d[3], 2 * c->d[3]);
}

static void relpos_kernel(opcase *c) {
    const int64_t H = c->d[0], Tq = c->d[1], Tk = c->d[2];
    brg_k_relpos_bias_fwd(F(c, "bias"), F(c, "table"), I(c, "buckets"), H, Tq, Tk);
    brg_k_relpos_bias_bwd(F(c, "dtable"), F(c, "dy"), I(c, "buckets"), H, Tq, Tk);
}

static brg_tensor *relpos_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_relative_position_bias(tape, T(c, "table"), T(c, "buckets"), &y));
    return y;
}

/* d = Tq, Tk, buckets, max distance */
static const shape buckets_shapes[] = {
    {{1, 1, 4, 3}, 0}, {{7, 9, 8, 20}, V0}, {{17, 33, 32, 128}, 0}, {{65, 17, 32, 128}, V0},
};

static void buckets_layout(opcase *c) { IOUT("buckets", c->d[0], c->d[1]); }

static void buckets_kernel(opcase *c) {
    const int64_t Tq = c->d[0], Tk = c->d[1];
    int32_t *b = I(c, "buckets");
    brg_k_relative_position_buckets(b, Tq, Tk, c->v & V0, c->d[2], c->d[3]);
    int64_t bad = 0;
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++)
            bad += b[i * Tk + j] != brg_k_relative_position_bucket(j - i, c->v & V0, c->d[2], c->d[3]);
    report(bad == 0, "%lld buckets differ from brg_k_relative_position_bucket(j - i)", (long long)bad);
}

static brg_tensor *buckets_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_relative_position_buckets(tape, c->d[0], c->d[1], c->v & V0, c->d[2], c->d[3], &y));
    return y;
}

/* ---- heads: split out of a fused projection's columns, merge back; reshape ---- */
/* d = B, T, H, D, first column, row width */
static const shape split_shapes[] = {
    {{1, 1, 1, 1, 0, 1}, 0}, {{2, 7, 3, 5, 4, 21}, 0}, {{1, 17, 2, 8, 0, 48}, 0}, {{3, 5, 4, 3, 12, 24}, 0},
    {{2, 3, 2, 3, 0, 6}, S_SPECIAL},
};

static void split_layout(opcase *c) {
    const int64_t B = c->d[0], Tt = c->d[1], H = c->d[2], D = c->d[3], W = c->d[5];
    IN("x", B_PARAM | B_SPECIAL, -1, 1, B, Tt, W);
    IN("dy", 0, -1, 1, B, H, Tt, D);
    OUT("y", B, H, Tt, D);
    ACC("dx", B, Tt, W);
}

static void split_kernel(opcase *c) {
    const int64_t B = c->d[0], Tt = c->d[1], H = c->d[2], D = c->d[3], col = c->d[4], W = c->d[5];
    brg_k_split_heads(F(c, "y"), F(c, "x") + col, B, Tt, H, D, W);
    brg_k_merge_heads(F(c, "dx") + col, F(c, "dy"), B, Tt, H, D, W, true);
}

static brg_tensor *split_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_split_heads(tape, T(c, "x"), c->d[4], c->d[2], c->d[3], &y));
    return y;
}

/* d = B, H, T, D */
static const shape merge_shapes[] = {
    {{1, 1, 1, 1}, 0}, {{2, 3, 7, 5}, 0}, {{1, 2, 17, 8}, 0}, {{3, 4, 5, 3}, 0}, {{2, 2, 3, 3}, S_SPECIAL},
};

static void merge_layout(opcase *c) {
    const int64_t B = c->d[0], H = c->d[1], Tt = c->d[2], D = c->d[3];
    IN("x", B_PARAM | B_SPECIAL, -1, 1, B, H, Tt, D);
    OUT("y", B, Tt, H * D);
    ACC("y_acc", B, Tt, H * D);
}

static void merge_kernel(opcase *c) {
    const int64_t B = c->d[0], H = c->d[1], Tt = c->d[2], D = c->d[3];
    brg_k_merge_heads(F(c, "y"), F(c, "x"), B, Tt, H, D, H * D, false);
    brg_k_merge_heads(F(c, "y_acc"), F(c, "x"), B, Tt, H, D, H * D, true);
}

static brg_tensor *merge_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_merge_heads(tape, T(c, "x"), &y));
    return y;
}

static const shape two_dim_shapes[] = {
    {{1, 1}, 0}, {{3, 7}, 0}, {{2, 17}, 0}, {{5, 33}, 0}, {{3, 7}, S_SPECIAL},
};

static void reshape_layout(opcase *c) { IN("x", B_PARAM | B_SPECIAL, -1, 1, c->d[0], c->d[1]); }

static brg_tensor *reshape_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_reshape(tape, T(c, "x"), 3, (int64_t[]){c->d[1], 1, c->d[0]}, &y));
    return y;
}

/* ---- the base models' packing ops (autograd/ops_pack.h) ---- */
static void concat_layout(opcase *c) {
    IN("a", B_PARAM | B_SPECIAL, -1, 1, c->d[0], c->d[1]);
    IN("b", B_PARAM, -1, 1, c->d[0], c->d[2]);
}

static brg_tensor *concat_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_concat_rows(tape, T(c, "a"), T(c, "b"), &y));
    return y;
}

static void gather_layout(opcase *c) {
    IN("x", B_PARAM | B_SPECIAL, -1, 1, c->d[0], c->d[1], c->d[2]);
    IDS("index", 0, (double)c->d[1], c->d[0]);
}

static void gather_prepare(opcase *c) { I(c, "index")[0] = 0; }

static brg_tensor *gather_graph(brg_tape *tape, opcase *c) {
    brg_tensor *y;
    OPCHK(brg_gather_positions(tape, T(c, "x"), T(c, "index"), &y));
    return y;
}

/* ---- fp32 <-> fp16/bf16 rows: every body is the scalar reference, bit for bit ---- */
static const shape half_shapes[] = {
    {{1}, 0},  {{7}, 0},  {{8}, 0},  {{9}, 0},  {{15}, 0},  {{16}, 0}, {{17}, 0},   {{31}, 0},
    {{32}, 0}, {{33}, 0}, {{63}, 0}, {{64}, 0}, {{65}, 0},  {{1000}, 0}, {{33}, S_SPECIAL},
};

static void half_layout(opcase *c) {
    const int64_t n = c->d[0];
    IN("f", B_SPECIAL | B_BITS, -70000, 70000, n);
    HIN("u", B_BITS | B_F16, -4, 4, n);
    HOUT("to_f16", n);
    HOUT("to_bf16", n);
    OUT("from_f16", n);
    OUT("from_bf16", n);
}

static void half_kernel(opcase *c) {
    const int64_t n = c->d[0];
    const float *f = F(c, "f");
    const uint16_t *u = U(c, "u");
    uint16_t *h = U(c, "to_f16"), *hb = U(c, "to_bf16");
    float *fh = F(c, "from_f16"), *fb = F(c, "from_bf16");
    brg_f32_to_f16_row(h, f, n);
    brg_f32_to_bf16_row(hb, f, n);
    brg_f16_to_f32_row(fh, u, n);
    brg_bf16_to_f32_row(fb, u, n);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        bad += h[i] != brg_f32_to_f16(f[i]) || hb[i] != brg_f32_to_bf16(f[i]);
        bad += bits_of(fh[i]) != bits_of(brg_f16_to_f32(u[i])) || bits_of(fb[i]) != bits_of(brg_bf16_to_f32(u[i]));
    }
    report(bad == 0, "%lld conversions differ from the scalar brg_f32_to_f16 / bf16 / widening (path %s)",
           (long long)bad, brg_half_path_name(brg_half_path_active()));
}

/* ---- brg_gemm_half: each kernel against the fp32 kernel of its family on the widened operands
 * (the same bits), the dispatching entry (team split) against its kernel, and on AVX512_BF16 CPUs
 * the VDPBF16PS kernel against the double reference. V0/V1: transposes; operand types
 * (V2, V3): f16 x f16, bf16 x bf16, f16 x bf16, f32 x bf16. ---- */
static const shape gemm_half_shapes[] = {
    {{1, 1, 1}, 0},          {{7, 17, 33}, V0 | V2},          {{33, 7, 17}, V1 | V3},    {{17, 33, 65}, V2 | V3},
    {{9, 65, 7}, V0 | V1},   {{7, 9, 17}, S_SPECIAL | V2},    {{130, 97, 90}, S_BIG | V2},
};

static void gemm_half_types(const opcase *c, brg_dtype *at, brg_dtype *bt) {
    switch ((c->v >> 2) & 3u) {
    case 0: *at = BRG_DTYPE_F16, *bt = BRG_DTYPE_F16; break;
    case 1: *at = BRG_DTYPE_BF16, *bt = BRG_DTYPE_BF16; break;
    case 2: *at = BRG_DTYPE_F16, *bt = BRG_DTYPE_BF16; break;
    default: *at = BRG_DTYPE_F32, *bt = BRG_DTYPE_BF16; break;
    }
}

static void gemm_half_layout(opcase *c) {
    const int64_t M = c->d[0], Nn = c->d[1], K = c->d[2];
    const bool ta = c->v & V0, tb = c->v & V1;
    brg_dtype at, bt;
    gemm_half_types(c, &at, &bt);
    if (at == BRG_DTYPE_F32) IN("A", B_SPECIAL, -1, 1, ta ? K : M, ta ? M : K);
    else HIN("A", B_SPECIAL | (at == BRG_DTYPE_F16 ? B_F16 : 0), -1, 1, ta ? K : M, ta ? M : K);
    HIN("B", bt == BRG_DTYPE_F16 ? B_F16 : 0, -1, 1, tb ? Nn : K, tb ? K : Nn);
    ACC("C", M, Nn);
    OUT("C0", M, Nn);
    OUT("Cd", M, Nn);
}

static float *widen(const void *x, brg_dtype t, int64_t n) {
    float *y = tk_zeros(n);
    for (int64_t i = 0; i < n; i++)
        y[i] = t == BRG_DTYPE_F32 ? ((const float *)x)[i]
               : t == BRG_DTYPE_F16 ? brg_f16_to_f32(((const uint16_t *)x)[i])
                                    : brg_bf16_to_f32(((const uint16_t *)x)[i]);
    return y;
}

static void gemm_half_kernel(opcase *c) {
    static const brg_gemm_half_kernel kernels[N_GEMM] = {BRG_GEMM_HALF_REF, BRG_GEMM_HALF_OPENBLAS,
                                                         BRG_GEMM_HALF_AVX2, BRG_GEMM_HALF_AVX512};
    const int64_t M = c->d[0], Nn = c->d[1], K = c->d[2];
    const bool ta = c->v & V0, tb = c->v & V1;
    const int64_t lda = ta ? M : K, ldb = tb ? K : Nn;
    brg_dtype at, bt;
    gemm_half_types(c, &at, &bt);
    gbuf *ga = find_buf(c, "A");
    const void *A = ga->p, *B = U(c, "B");
    const brg_gemm_half_kernel k = kernels[c->cfg->gemm];
    float *C = F(c, "C"), *C0 = F(c, "C0"), *Cd = F(c, "Cd");
    report(brg_gemm_half_kernel_supported(k, at, bt), "half kernel %s does not take %s x %s",
           brg_gemm_half_kernel_name(k), brg_dtype_name(at), brg_dtype_name(bt));
    report(brg_gemm_half_with(k, ta, tb, M, Nn, K, 1.25f, at, A, lda, bt, B, ldb, 0.75f, C, Nn),
           "brg_gemm_half_with(%s) declined", brg_gemm_half_kernel_name(k));
    brg_gemm_half_with(k, ta, tb, M, Nn, K, 1.0f, at, A, lda, bt, B, ldb, 0.0f, C0, Nn);
    float *Aw = widen(A, at, M * K), *Bw = widen(B, bt, K * Nn), *want = tk_zeros(M * Nn);
    brg_gemm(ta, tb, M, Nn, K, 1.0f, Aw, lda, Bw, ldb, 0.0f, want, Nn);
    expect_bits(c, "brg_gemm_half_with vs brg_gemm on the widened operands", C0, want, M * Nn);
    /* the dispatching entry: the process's kernel, split across the bound team */
    brg_gemm_half(ta, tb, M, Nn, K, 1.0f, at, A, lda, bt, B, ldb, 0.0f, Cd, Nn);
    brg_gemm_half_with(brg_gemm_half_kernel_for(at, bt), ta, tb, M, Nn, K, 1.0f, at, A, lda, bt, B, ldb, 0.0f, want,
                       Nn);
    expect_bits(c, "brg_gemm_half (bound team) vs its kernel alone", Cd, want, M * Nn);
    /* the bf16 instruction kernels, whose sums are in their own order: close to the reference */
    const brg_gemm_half_kernel bf16_kernels[] = {BRG_GEMM_HALF_AVX512BF16, BRG_GEMM_HALF_AMXBF16};
    for (int i = 0; i < 2; i++) {
        if (c->cfg->gemm != G_AVX512 || !brg_gemm_half_kernel_supported(bf16_kernels[i], at, bt) || (c->v & S_SPECIAL))
            continue;
        float *ref = tk_zeros(M * Nn);
        brg_gemm_half_with(bf16_kernels[i], ta, tb, M, Nn, K, 1.0f, at, A, lda, bt, B, ldb, 0.0f, want, Nn);
        brg_gemm_half_ref(ta, tb, M, Nn, K, 1.0f, at, A, lda, bt, B, ldb, 0.0f, ref, Nn);
        char what[96];
        snprintf(what, sizeof what, "%s kernel vs brg_gemm_half_ref", brg_gemm_half_kernel_name(bf16_kernels[i]));
        expect_close(c, what, want, ref, M * Nn, 1e-5);
        free(ref);
    }
    free(Aw), free(Bw), free(want);
}

/* ---- the decode step's small-row linear: row by row the same bits as all rows at once ---- */
static const shape linear_rows_shapes[] = {
    {{1, 1, 1}, 0}, {{1, 17, 33}, 0}, {{3, 33, 7}, V0}, {{4, 7, 65}, V1}, {{2, 65, 17}, V0 | V1},
    {{5, 130, 70}, 0}, {{5, 17, 9}, S_SPECIAL},
    /* past one 256-column tile, and big enough for a team to split the columns */
    {{8, 40, 600}, V0}, {{8, 40, 600}, 0}, {{8, 700, 600}, V0 | S_BIG}, {{3, 700, 600}, S_BIG},
    /* more rows than one register block of the AVX-512 bodies */
    {{11, 33, 50}, V0}, {{11, 33, 50}, 0},
    /* W [in, out] tiles as wide as the rows' partial outputs allow: 2048 columns for 2 rows,
     * 4096 for one, so the rows at once and one at a time cut 5000 columns differently */
    {{2, 20, 5000}, V0},
    /* below 4 rows (BLOCK_ROWS) W [in, out] adds 16 weight rows per pass, from 4 rows four (then the
     * rest one at a time): the rows at once and one at a time group 53 = 3 x 16 + 5 differently */
    {{5, 53, 70}, V0}, {{3, 53, 70}, V0 | V1},
};

static void linear_rows_layout(opcase *c) {
    const int64_t m = c->d[0], in = c->d[1], out = c->d[2];
    const bool wio = c->v & V0;
    IN("x", B_SPECIAL, -1, 1, m, in);
    IN("w", 0, -0.5, 0.5, wio ? in : out, wio ? out : in);
    if (!(c->v & V1)) IN("b", 0, -0.5, 0.5, out);
    OUT("y", m, out);
}

static void linear_rows_kernel(opcase *c) {
    const int64_t m = c->d[0], in = c->d[1], out = c->d[2];
    const bool wio = c->v & V0;
    float *x = F(c, "x"), *w = F(c, "w"), *b = Fopt(c, "b"), *y = F(c, "y");
    brg_k_linear_rows_fwd(y, x, w, b, m, in, out, wio);
    float *rows = tk_zeros(m * out), *ref = tk_zeros(m * out);
    for (int64_t r = 0; r < m; r++) brg_k_linear_rows_fwd(rows + r * out, x + r * in, w, b, 1, in, out, wio);
    expect_bits(c, "one row at a time vs all rows", rows, y, m * out);
    brg_gemm_ref(false, !wio, m, out, in, 1.0f, x, in, w, wio ? out : in, 0.0f, ref, out);
    for (int64_t r = 0; b && r < m; r++)
        for (int64_t j = 0; j < out; j++) ref[r * out + j] += b[j];
    if (!(c->v & S_SPECIAL)) expect_close(c, "vs brg_gemm_ref + bias", y, ref, m * out, 1e-5);
    free(rows), free(ref);
}

/* ---- optimizer updates: the element loops' clone this CPU runs (target_clones) against the same
 * operations in portable C, bit for bit; a team splits the slot. ---- */
static const shape optim_shapes[] = {
    {{1}, 0}, {{7}, V0}, {{17}, V1 | V0}, {{33}, V2}, {{65}, V0 | V2 | V3}, {{1000}, V1 | V2}, {{17}, S_SPECIAL | V0},
    {{70000}, S_BIG | V0 | V2},
};

static brg_optimizer_kind optim_kind(const opcase *c) {
    const char *n = c->e->name;
    return strcmp(n, "sgd") == 0       ? BRG_OPTIMIZER_SGD
           : strcmp(n, "adam") == 0    ? BRG_OPTIMIZER_ADAM
           : strcmp(n, "adamw") == 0   ? BRG_OPTIMIZER_ADAMW
           : strcmp(n, "rmsprop") == 0 ? BRG_OPTIMIZER_RMSPROP
                                       : BRG_OPTIMIZER_LAMB;
}

/* SGD: V0 momentum, V1 nesterov, V2 weight decay, V3 dampening (not with nesterov). Adam, AdamW,
 * LAMB: V0 weight decay, V1 no bias correction, V2 beta1 0.3 (lerp's other formula), V3 LAMB's
 * max_weight_norm 0.5. RMSprop: V0 centered, V1 momentum, V2 weight decay. */
static brg_optimizer_config optim_config(const opcase *c) {
    const brg_optimizer_kind kind = optim_kind(c);
    brg_optimizer_config k = brg_optimizer_config_default(kind);
    k.lr = 0.05;
    switch (kind) {
    case BRG_OPTIMIZER_SGD:
        k.momentum = c->v & (V0 | V1) ? 0.9 : 0.0;
        k.nesterov = c->v & V1;
        k.weight_decay = c->v & V2 ? 0.01 : 0.0;
        k.dampening = (c->v & V3) && !(c->v & V1) ? 0.1 : 0.0;
        break;
    case BRG_OPTIMIZER_RMSPROP:
        k.centered = c->v & V0;
        k.momentum = c->v & V1 ? 0.9 : 0.0;
        k.weight_decay = c->v & V2 ? 0.01 : 0.0;
        break;
    default:
        k.weight_decay = c->v & V0 ? 0.02 : 0.0;
        k.bias_correction = !(c->v & V1);
        if (c->v & V2) k.betas[0] = 0.3;
        if (kind == BRG_OPTIMIZER_LAMB && (c->v & V3)) k.max_weight_norm = 0.5;
        break;
    }
    return k;
}

static void optim_layout(opcase *c) {
    const brg_optimizer_config k = optim_config(c);
    static const char *const names[3] = {"state0", "state1", "state2"};
    INOUT("p", 0, -1, 1, c->d[0]);
    IN("g", B_SPECIAL, -1, 1, c->d[0]);
    for (int i = 0; i < brg_optimizer_state_floats(&k); i++) OUT(names[i], c->d[0]);
}

/* The references round every multiply and add (clang: the pragma, for the rest of the file). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#define FP_EXACT __attribute__((noinline))
#else
#define FP_EXACT __attribute__((optimize("fp-contract=off"), noinline))
#endif

static FP_EXACT float ref_lerp(float start, float end, float weight) {
    return fabsf(weight) < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.0f - weight);
}

/* torch.optim's single-tensor updates in the order of operations optim.c documents; st[] in the
 * order of the optimizer's state tensors. */
static FP_EXACT void ref_optim_step(const brg_optimizer_config *k, float *p, const float *grad, float **st, int64_t n,
                                    int64_t t, double lr) {
    const double wd = k->weight_decay;
    const float wdf = (float)wd;
    double bc1 = 1.0, bc2 = 1.0;
    if (k->bias_correction) bc1 = 1.0 - pow(k->betas[0], (double)t), bc2 = 1.0 - pow(k->betas[1], (double)t);
    switch (k->kind) {
    case BRG_OPTIMIZER_SGD: {
        const float mom = (float)k->momentum, keep = (float)(1.0 - k->dampening), neg_lr = (float)-lr;
        for (int64_t i = 0; i < n; i++) {
            float g = grad[i];
            if (wd != 0.0) g = g + wdf * p[i];
            if (k->momentum != 0.0) {
                st[0][i] = t == 1 ? g : st[0][i] * mom + keep * g;
                g = k->nesterov ? g + mom * st[0][i] : st[0][i];
            }
            p[i] = p[i] + neg_lr * g;
        }
        break;
    }
    case BRG_OPTIMIZER_ADAM:
    case BRG_OPTIMIZER_ADAMW: {
        const bool decoupled = k->kind == BRG_OPTIMIZER_ADAMW && wd != 0.0;
        const bool l2 = k->kind == BRG_OPTIMIZER_ADAM && wd != 0.0;
        const float decay = (float)(1.0 - lr * wd), w1 = (float)(1.0 - k->betas[0]), rest = 1.0f - w1;
        const float b2 = (float)k->betas[1], w2 = (float)(1.0 - k->betas[1]);
        const float step = (float)-(lr / bc1), bc2_sqrt = (float)sqrt(bc2), eps = (float)k->eps;
        const bool low = fabsf(w1) < 0.5f;
        float *m = st[0], *v = st[1];
        for (int64_t i = 0; i < n; i++) {
            float g = grad[i], w = p[i];
            if (decoupled) w = w * decay;
            if (l2) g = g + wdf * w;
            m[i] = low ? m[i] + w1 * (g - m[i]) : g - (g - m[i]) * rest;
            v[i] = v[i] * b2 + w2 * g * g;
            float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            p[i] = w + step * m[i] / denom;
        }
        break;
    }
    case BRG_OPTIMIZER_RMSPROP: {
        const float alpha = (float)k->alpha, w_avg = (float)(1.0 - k->alpha), eps = (float)k->eps;
        const float mom = (float)k->momentum, neg_lr = (float)-lr;
        float *sq = st[0], *buf = k->momentum > 0.0 ? st[1] : NULL, *gavg = k->centered ? st[buf ? 2 : 1] : NULL;
        for (int64_t i = 0; i < n; i++) {
            float g = grad[i];
            if (wd != 0.0) g = g + wdf * p[i];
            sq[i] = sq[i] * alpha + w_avg * g * g;
            float avg;
            if (gavg) {
                gavg[i] = ref_lerp(gavg[i], g, w_avg);
                avg = sqrtf(sq[i] + -1.0f * gavg[i] * gavg[i]);
            } else {
                avg = sqrtf(sq[i]);
            }
            avg = avg + eps;
            if (buf) {
                buf[i] = buf[i] * mom + 1.0f * g / avg;
                p[i] = p[i] + neg_lr * buf[i];
            } else {
                p[i] = p[i] + neg_lr * g / avg;
            }
        }
        break;
    }
    default: { /* LAMB */
        const float b1 = (float)k->betas[0], w1 = (float)(1.0 - k->betas[0]);
        const float b2 = (float)k->betas[1], w2 = (float)(1.0 - k->betas[1]);
        const float fbc1 = (float)bc1, bc2_sqrt = (float)sqrt(bc2), eps = (float)k->eps;
        float *m = st[0], *v = st[1];
        double w_sq = 0.0, u_sq = 0.0;
        for (int64_t i = 0; i < n; i++) {
            m[i] = m[i] * b1 + w1 * grad[i];
            v[i] = v[i] * b2 + w2 * grad[i] * grad[i];
            float u = m[i] / fbc1 / (sqrtf(v[i]) / bc2_sqrt + eps) + wdf * p[i];
            w_sq += (double)p[i] * p[i];
            u_sq += (double)u * u;
        }
        double w_norm = fmin(sqrt(w_sq), k->max_weight_norm), u_norm = sqrt(u_sq);
        double trust = (w_norm == 0.0 || u_norm == 0.0) ? 1.0 : w_norm / u_norm;
        const float scale = (float)(-lr * trust);
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] + scale * (m[i] / fbc1 / (sqrtf(v[i]) / bc2_sqrt + eps) + wdf * p[i]);
        break;
    }
    }
}

static void optim_kernel(opcase *c) {
    const brg_optimizer_config k = optim_config(c);
    const int64_t n = c->d[0];
    const int ns = brg_optimizer_state_floats(&k);
    float *p = F(c, "p"), *g = F(c, "g"), *pr = dup_floats(p, n), *st[3] = {NULL, NULL, NULL};
    for (int i = 0; i < ns; i++) st[i] = tk_zeros(n);
    brg_optimizer *o = NULL;
    brg_status s = brg_optimizer_create(&k, NULL, &o);
    if (s == BRG_OK) s = brg_optimizer_add_param(o, p, g, n, true, "p");
    const float lrs[3] = {0.05f, 0.03f, 0.01f};
    for (int t = 1; s == BRG_OK && t <= 3; t++) {
        s = brg_optimizer_step(o, lrs[t - 1]);
        ref_optim_step(&k, pr, g, st, n, t, (double)lrs[t - 1]);
    }
    report(s == BRG_OK, "optimizer: %s", brg_last_error());
    if (s == BRG_OK) {
        expect_bits(c, "parameters vs the portable update", p, pr, n);
        report(brg_optimizer_state_count(o) == ns, "%d state tensors, expected %d", brg_optimizer_state_count(o), ns);
        static const char *const names[3] = {"state0", "state1", "state2"};
        for (int i = 0; i < ns && i < brg_optimizer_state_count(o); i++) {
            memcpy(F(c, names[i]), brg_optimizer_state_data(o, i), (size_t)n * sizeof(float));
            char what[96];
            snprintf(what, sizeof what, "%s vs the portable update", brg_optimizer_state_name(o, i));
            expect_bits(c, what, F(c, names[i]), st[i], n);
        }
    }
    brg_optimizer_destroy(o);
    free(pr);
    for (int i = 0; i < ns; i++) free(st[i]);
}

/* ---- gradient-norm clipping: the total in double, the scale in fp32, the split path ---- */
static const shape clip_shapes[] = {
    {{1, 1}, 0}, {{7, 17}, 0}, {{33, 65}, 0}, {{1000, 3}, V0}, {{7, 17}, S_SPECIAL},
};

static void clip_layout(opcase *c) {
    INOUT("g0", B_SPECIAL, -1, 1, c->d[0]);
    INOUT("g1", 0, -1, 1, c->d[1]);
    OUT("norm", 1);
}

static void clip_kernel(opcase *c) {
    const float max_norm = c->v & V0 ? INFINITY : 0.5f;
    float *g[2] = {F(c, "g0"), F(c, "g1")};
    const int64_t counts[2] = {c->d[0], c->d[1]};
    float *orig[2] = {dup_floats(g[0], counts[0]), dup_floats(g[1], counts[1])};
    float *split[2] = {dup_floats(g[0], counts[0]), dup_floats(g[1], counts[1])};
    double want = 0.0, total = -1.0, part[2];
    for (int b = 0; b < 2; b++)
        for (int64_t i = 0; i < counts[b]; i++) want += (double)orig[b][i] * orig[b][i];
    want = sqrt(want);
    report(brg_clip_grad_norm(g, counts, 2, max_norm, &total) == BRG_OK, "brg_clip_grad_norm: %s", brg_last_error());
    F(c, "norm")[0] = (float)total;
    report(isfinite(want) ? fabs(total - want) <= 1e-12 * want : !isfinite(total), "total norm %.17g, want %.17g",
           total, want);
    const float coef = brg_clip_coef(max_norm, total);
    for (int b = 0; b < 2; b++) {
        float *scaled = dup_floats(orig[b], counts[b]);
        if (coef < 1.0f)
            for (int64_t i = 0; i < counts[b]; i++) scaled[i] = orig[b][i] * coef;
        expect_bits(c, "clipped gradients vs g * brg_clip_coef", g[b], scaled, counts[b]);
        free(scaled);
        const float *one[1] = {split[b]};
        report(brg_grad_sum_squares(one, &counts[b], 1, &part[b]) == BRG_OK, "brg_grad_sum_squares failed");
    }
    report(brg_clip_grad_norm_from_total(split, counts, 2, max_norm, sqrt(part[0] + part[1])) == BRG_OK,
           "brg_clip_grad_norm_from_total failed");
    for (int b = 0; b < 2; b++) expect_bits(c, "the split path vs one call", split[b], g[b], counts[b]);
    for (int b = 0; b < 2; b++) free(orig[b]), free(split[b]);
}

/* ==== the table ============================================================================= */

#define FLAT(name_, cov, kern, gr)                                                                     \
    {.name = name_, .covers = {cov}, .tol = 1e-6, .shapes = SHAPES(flat_shapes), .layout = unary_layout, \
     .kernel = kern, .graph = gr}

static const entry entries[] = {
    {.name = "gemm", .axes = AX_GEMM | AX_TEAM, .tol = 3e-6, .shapes = SHAPES(gemm_shapes),
     .variants = "V0 trans_a, V1 trans_b, V2 padded leading dims", .layout = gemm_layout, .kernel = gemm_kernel},
    {.name = "linear", .covers = {"brg_linear"}, .axes = AX_GEMM | AX_TEAM, .tol = 3e-6,
     .shapes = SHAPES(linear_shapes),
     .variants = "V0 w [in,out], V1 no bias", .layout = linear_layout, .kernel = linear_kernel, .graph = linear_graph},
    {.name = "linear_act", .covers = {"brg_linear_act"}, .axes = AX_SIMD | AX_GEMM | AX_TEAM, .exact = EX_SIMD,
     .tol = 3e-6, .shapes = SHAPES(linear_act_shapes), .variants = "V0 w [in,out], V1 no bias, V2 tanh GELU",
     .layout = linear_act_layout, .kernel = linear_act_kernel, .graph = linear_act_graph},
    {.name = "matmul", .covers = {"brg_matmul"}, .axes = AX_GEMM | AX_TEAM, .tol = 3e-6,
     .shapes = SHAPES(matmul_shapes), .variants = "V0 trans_a, V1 trans_b", .layout = matmul_layout,
     .kernel = matmul_kernel, .graph = matmul_graph},
    {.name = "attention", .covers = {"brg_attention"}, .axes = AX_SIMD | AX_GEMM | AX_TEAM, .exact = EX_SIMD,
     .tol = 4e-6, .shapes = SHAPES(attention_shapes),
     .variants = "V0 causal, V1 key mask, V2 bias, V3 dropout, V4 kv_stride",
     .layout = attention_layout, .prepare = attention_prepare, .kernel = attention_kernel, .graph = attention_graph},
    {.name = "softmax", .covers = {"brg_softmax"}, .axes = AX_SIMD, .exact = EX_SIMD, .tol = 5e-7,
     .shapes = SHAPES(softmax_shapes), .layout = softmax_layout, .kernel = softmax_kernel, .graph = softmax_graph},
    {.name = "layer_norm", .covers = {"brg_layer_norm"}, .axes = AX_SIMD | AX_TEAM, .exact = EX_SIMD, .tol = 1e-6,
     .shapes = SHAPES(layer_norm_shapes), .variants = "V0 no gamma/beta (kernel only)", .layout = layer_norm_layout,
     .kernel = layer_norm_kernel, .graph = layer_norm_graph},
    {.name = "rms_norm", .covers = {"brg_rms_norm"}, .tol = 1e-6, .shapes = SHAPES(rms_norm_shapes),
     .layout = rms_norm_layout, .kernel = rms_norm_kernel, .graph = rms_norm_graph},
    {.name = "gelu", .covers = {"brg_activation_op"}, .axes = AX_SIMD | AX_TEAM, .exact = EX_SIMD, .tol = 4e-6,
     .shapes = SHAPES(gelu_shapes), .variants = "V0 tanh form", .layout = unary_layout, .kernel = gelu_kernel,
     .graph = gelu_graph},
    FLAT("relu", "brg_relu", relu_kernel, relu_graph),
    {.name = "clamp", .covers = {"brg_clamp"}, .tol = 0, .shapes = SHAPES(clamp_shapes),
     .variants = "V0 bounds [-10, 0] (else [0, 10])", .layout = clamp_layout, .kernel = clamp_kernel,
     .graph = clamp_graph},
    {.name = "fp16_overflow_guard", .covers = {"brg_fp16_overflow_guard", "brg_clamp", "brg_scale"}, .tol = 0,
     .shapes = SHAPES(guard_shapes), .variants = "V0 all past fp16's range, V1 one past 65504, V2 within it",
     .layout = guard_layout, .prepare = guard_prepare, .kernel = guard_kernel, .graph = guard_graph, .fd_needs = V2},
    FLAT("tanh", "brg_tanh", tanh_kernel, tanh_graph),
    FLAT("scale", "brg_scale", scale_kernel, scale_graph),
    {.name = "mul", .covers = {"brg_mul"}, .tol = 1e-6, .shapes = SHAPES(flat_shapes), .layout = binary_layout,
     .kernel = mul_kernel, .graph = mul_graph},
    {.name = "add", .covers = {"brg_add"}, .tol = 1e-6, .shapes = SHAPES(flat_shapes), .layout = binary_layout,
     .kernel = add_kernel, .graph = add_graph},
    {.name = "dropout", .covers = {"brg_dropout"}, .axes = AX_SIMD | AX_TEAM, .exact = EX_SIMD | EX_SCALAR, .tol = 0,
     .shapes = SHAPES(dropout_shapes), .variants = "V0 p 0.5 (else 0.1), V1 offset 12345", .layout = unary_layout,
     .kernel = dropout_kernel, .graph = dropout_graph, .no_nan_out = true},
    {.name = "embedding", .covers = {"brg_embedding"}, .axes = AX_TEAM, .tol = 1e-6, .shapes = SHAPES(embedding_shapes),
     .layout = embedding_layout, .prepare = embedding_prepare, .kernel = embedding_kernel, .graph = embedding_graph},
    {.name = "embedding_padded", .covers = {"brg_embedding_padded"}, .tol = 1e-6, .shapes = SHAPES(embedding_shapes),
     .variants = "V0 padding_idx -1 (else 1)", .layout = embedding_layout, .prepare = embedding_prepare,
     .kernel = embedding_padded_kernel, .graph = embedding_padded_graph,
     .fd_needs = V0 /* the padding row's gradient is 0 by definition, not the derivative */},
    {.name = "cross_entropy", .covers = {"brg_cross_entropy", "brg_cross_entropy_share"},
     .axes = AX_SIMD | AX_TEAM, .exact = EX_SIMD, .tol = 5e-7, .shapes = SHAPES(cross_entropy_shapes),
     .variants = "V0 every row ignored, V1 a global denominator (share)", .layout = cross_entropy_layout,
     .prepare = cross_entropy_prepare, .kernel = cross_entropy_kernel, .graph = cross_entropy_graph},
    {.name = "mse_loss", .covers = {"brg_mse_loss_share"}, .tol = 1e-6, .shapes = SHAPES(loss_shapes),
     .variants = "V0 a global denominator", .layout = pointwise_loss_layout, .kernel = mse_kernel, .graph = mse_graph},
    {.name = "bce_with_logits", .covers = {"brg_bce_with_logits_share"}, .tol = 1e-6, .shapes = SHAPES(loss_shapes),
     .variants = "V0 a global denominator", .layout = pointwise_loss_layout, .kernel = bce_kernel, .graph = bce_graph},
    {.name = "select", .covers = {"brg_select"}, .tol = 0, .shapes = SHAPES(select_shapes), .layout = select_layout,
     .kernel = select_kernel, .graph = select_graph},
    {.name = "prepend_token", .covers = {"brg_prepend_token"}, .tol = 0, .shapes = SHAPES(bnc_shapes),
     .layout = prepend_layout, .kernel = prepend_kernel, .graph = prepend_graph},
    {.name = "add_broadcast", .covers = {"brg_add_broadcast"}, .tol = 0, .shapes = SHAPES(bnc_shapes),
     .layout = add_bcast_layout, .kernel = add_bcast_kernel, .graph = add_bcast_graph},
    {.name = "patch_unfold", .covers = {"brg_patch_unfold"}, .tol = 0, .shapes = SHAPES(patch_shapes),
     .layout = patch_layout, .kernel = patch_kernel, .graph = patch_graph},
    {.name = "relative_position_bias", .covers = {"brg_relative_position_bias"}, .tol = 0,
     .shapes = SHAPES(relpos_shapes), .variants = "V0 bidirectional", .layout = relpos_layout,
     .prepare = relpos_prepare, .kernel = relpos_kernel, .graph = relpos_graph},
    {.name = "relative_position_buckets", .covers = {"brg_relative_position_buckets"}, .tol = 0,
     .shapes = SHAPES(buckets_shapes), .variants = "V0 bidirectional", .layout = buckets_layout,
     .kernel = buckets_kernel, .graph = buckets_graph},
    {.name = "split_heads", .covers = {"brg_split_heads"}, .tol = 0, .shapes = SHAPES(split_shapes),
     .layout = split_layout, .kernel = split_kernel, .graph = split_graph},
    {.name = "merge_heads", .covers = {"brg_merge_heads"}, .tol = 0, .shapes = SHAPES(merge_shapes),
     .layout = merge_layout, .kernel = merge_kernel, .graph = merge_graph},
    {.name = "reshape", .covers = {"brg_reshape"}, .tol = 0, .shapes = SHAPES(two_dim_shapes),
     .layout = reshape_layout, .graph = reshape_graph},
    {.name = "concat_rows", .covers = {"brg_concat_rows"}, .tol = 0, .shapes = SHAPES(bnc_shapes),
     .layout = concat_layout, .graph = concat_graph},
    {.name = "gather_positions", .covers = {"brg_gather_positions"}, .tol = 0, .shapes = SHAPES(bnc_shapes),
     .layout = gather_layout, .prepare = gather_prepare, .graph = gather_graph},
    {.name = "half_convert", .axes = AX_SIMD, .exact = EX_SIMD | EX_SCALAR, .tol = 0, .shapes = SHAPES(half_shapes),
     .layout = half_layout, .kernel = half_kernel, .no_nan_out = true /* 16-bit outputs: checked element-wise */},
    {.name = "gemm_half", .axes = AX_GEMM | AX_TEAM, .tol = 3e-6, .shapes = SHAPES(gemm_half_shapes),
     .variants = "V0 trans_a, V1 trans_b, V2|V3 operand types", .layout = gemm_half_layout, .kernel = gemm_half_kernel},
    {.name = "linear_rows", .axes = AX_SIMD | AX_TEAM, .exact = EX_SIMD | EX_SCALAR, .tol = 0,
     .shapes = SHAPES(linear_rows_shapes), .variants = "V0 w [in,out], V1 no bias",
     .layout = linear_rows_layout, .kernel = linear_rows_kernel},
    {.name = "sgd", .axes = AX_TEAM, .tol = 0, .shapes = SHAPES(optim_shapes),
     .variants = "V0 momentum, V1 nesterov, V2 weight decay, V3 dampening", .layout = optim_layout,
     .kernel = optim_kernel},
    {.name = "adam", .axes = AX_TEAM, .tol = 0, .shapes = SHAPES(optim_shapes),
     .variants = "V0 weight decay, V1 no bias correction, V2 beta1 0.3", .layout = optim_layout,
     .kernel = optim_kernel},
    {.name = "adamw", .axes = AX_TEAM, .tol = 0, .shapes = SHAPES(optim_shapes),
     .variants = "V0 weight decay, V1 no bias correction, V2 beta1 0.3", .layout = optim_layout,
     .kernel = optim_kernel},
    {.name = "rmsprop", .axes = AX_TEAM, .tol = 0, .shapes = SHAPES(optim_shapes),
     .variants = "V0 centered, V1 momentum, V2 weight decay", .layout = optim_layout, .kernel = optim_kernel},
    {.name = "lamb", .tol = 0, .shapes = SHAPES(optim_shapes),
     .variants = "V0 weight decay, V1 no bias correction, V2 beta1 0.3, V3 max_weight_norm 0.5",
     .layout = optim_layout, .kernel = optim_kernel},
    {.name = "clip_grad_norm", .tol = 0, .shapes = SHAPES(clip_shapes), .variants = "V0 max_norm inf (measure only)",
     .layout = clip_layout, .kernel = clip_kernel},
};
#define N_ENTRIES ((int)(sizeof entries / sizeof entries[0]))

/* ==== running =============================================================================== */

/* Finite differences on shapes with at most this many parameter elements. */
#define FD_MAX 800

static brg_arena *arena;
static brg_gemm_team *team;
static bool fd_every_config;

static bool simd_available(brg_isa l) { return l <= brg_isa_detected(); }

static bool gemm_available(int g) {
    if (g == G_AVX512) return brg_isa_detected() >= BRG_ISA_AVX512;
    if (g == G_AVX2) return brg_isa_detected() >= BRG_ISA_AVX2;
    return true;
}

/* The configurations an entry runs, the reference (scalar, ref, one thread) first; the columns of
 * the axis values this CPU lacks are marked SKIP. */
static int configs_for(const entry *e, int ei, config *out) {
    int n = 0;
    const int n_simd = e->axes & AX_SIMD ? 3 : 1, n_gemm = e->axes & AX_GEMM ? N_GEMM : 1;
    const int n_team = e->axes & AX_TEAM ? 2 : 1;
    for (int s = 0; s < n_simd; s++) {
        if (!simd_available((brg_isa)s)) {
            mark(ei, 1u << simd_col((brg_isa)s), CELL_SKIP);
            continue;
        }
        for (int g = 0; g < n_gemm; g++) {
            if (!gemm_available(g)) {
                mark(ei, 1u << gemm_col(g), CELL_SKIP);
                continue;
            }
            for (int t = 1; t <= n_team; t++) out[n++] = (config){(brg_isa)s, g, t};
        }
    }
    out[n++] = out[0]; /* the reference again, its buffers against the other guard */
    return n;
}

static int find_config(const config *cfgs, int n, brg_isa s, int g, int t) {
    for (int i = 0; i < n; i++)
        if (cfgs[i].simd == s && cfgs[i].gemm == g && cfgs[i].team == t) return i;
    return -1;
}

/* The columns a configuration counts for: those where it differs from the reference (all of
 * them for the reference itself). */
static unsigned config_cells(const entry *e, const config *k, bool reference) {
    unsigned m = 0;
    if (reference || k->simd != BRG_ISA_SCALAR) m |= 1u << simd_col(k->simd);
    if ((e->axes & AX_GEMM) && (reference || k->gemm != G_REF)) m |= 1u << gemm_col(k->gemm);
    if (k->team == 2) m |= 1u << COL_TEAM2;
    return m;
}

static bool apply_config(const config *k) {
    brg_simd_force(k->simd);
    const char *got = brg_gemm_force_backend(gemm_names[k->gemm]);
    brg_gemm_team_bind(k->team == 2 ? team : NULL);
    return brg_simd_isa() == k->simd && got && strcmp(got, gemm_names[k->gemm]) == 0;
}

static double fd_loss(void *p) {
    opcase *c = p;
    const size_t mark_at = brg_arena_mark(arena);
    brg_tape *tape = NULL;
    double loss = NAN;
    if (brg_tape_create(arena, &tape) == BRG_OK) {
        brg_tape_set_grad_enabled(tape, false);
        brg_tensor *y = c->e->graph(tape, c);
        if (y && brg_tensor_numel(y) == c->seed_n) loss = tk_dot(y->data, c->seed, c->seed_n);
    }
    brg_tape_destroy(tape);
    brg_arena_reset(arena, mark_at);
    return loss;
}

/* (b): each parameter's gradient from the op against central differences of sum(y * seed). */
static void run_fd(opcase *c, const snap *s) {
    const unsigned saved = cur_cells;
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        if (b->grad < 0) continue;
        const arr *g = snap_find(s, c->b[b->grad].name);
        if (!g) continue;
        char what[400];
        snprintf(what, sizeof what, "%s: finite differences of d%s", cur_desc, b->name);
        const int failed = test_failed_, passed = test_passed_;
        tk_gradcheck_tol(what, c, fd_loss, b->p, b->n, g->data, 1e-3, 1e-2, 1e-3);
        const bool ok = test_failed_ == failed;
        test_failed_ = failed, test_passed_ = passed; /* counted once, below */
        cur_cells = saved | (1u << COL_FD);
        report(ok, "d%s disagrees with finite differences (see above)", b->name);
        cur_cells = saved;
    }
}

/* The op on a tape over the buffers: its output and every parameter's gradient. */
static void op_run(opcase *c, snap *s, bool fd) {
    const size_t mark_at = brg_arena_mark(arena);
    brg_tape *tape = NULL;
    if (brg_tape_create(arena, &tape) != BRG_OK) {
        report(false, "brg_tape_create: %s", brg_last_error());
        return;
    }
    wrap_tensors(c);
    brg_tensor *y = c->e->graph(tape, c);
    if (y) {
        const int64_t ny = brg_tensor_numel(y);
        if (y->dtype == BRG_DTYPE_F32) {
            if (c->seed_n != ny) {
                free(c->seed);
                tk_seed(name_hash(c->e->name) ^ 0x5eedULL ^ (uint64_t)c->si);
                c->seed = tk_rand(ny, -1, 1);
                c->seed_n = ny;
            }
            if (y->requires_grad) {
                brg_status st = brg_tape_backward_from(tape, y, c->seed);
                report(st == BRG_OK, "backward: %s", brg_last_error());
            }
            snap_add(s, "op:y", TY_F32, y->data, ny);
        } else {
            snap_add(s, "op:y", TY_I32, y->data, ny);
        }
        for (int i = 0; i < c->nb; i++) {
            gbuf *b = &c->b[i];
            if (b->grad < 0) continue;
            brg_tensor_settle_grad(&b->t);
            snap_add(s, c->b[b->grad].name, TY_F32, b->t.grad, b->n);
        }
    }
    brg_tape_destroy(tape);
    brg_arena_reset(arena, mark_at);
    if (y && y->dtype == BRG_DTYPE_F32 && fd) run_fd(c, s);
}

/* ---- (e) half activations: the op on a tape that stores its outputs in bf16 or fp16 ----
 * The float inputs are first rounded to the type, so the fp32 run and the half run see the same
 * values. The half run gets them as half tensors (as the activations of a .16 run reach an op),
 * its output must come out in the type (a loss: F32) and equal the fp32 output rounded to it, bit
 * for bit when the graph is one op (one rounding, at the store); gradients stay F32 and equal
 * the fp32 run's up to the rounding of what a backward reads back (an op's own output:
 * softmax, tanh, attention), or of a composed graph's intermediate outputs. */
static void round_inputs(opcase *c, brg_dtype type) {
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        if (b->role != R_IN || b->type != TY_F32) continue;
        float *x = b->p;
        for (int64_t k = 0; k < b->n; k++)
            x[k] =
                type == BRG_DTYPE_BF16 ? brg_bf16_to_f32(brg_f32_to_bf16(x[k])) : brg_f16_to_f32(brg_f32_to_f16(x[k]));
    }
}

/* Each float input as a tensor of `type` in the arena (its gradient buffer as wrap_tensors sets it). */
static bool wrap_half(opcase *c, brg_dtype type) {
    wrap_tensors(c);
    for (int i = 0; i < c->nb; i++) {
        gbuf *b = &c->b[i];
        if (b->role != R_IN || b->type != TY_F32) continue;
        brg_tensor *h = NULL;
        if (brg_tensor_new(arena, type, b->ndim, b->shape, b->name, &h) != BRG_OK) return false;
        brg_tensor src = brg_tensor_wrap(BRG_DTYPE_F32, b->ndim, b->shape, b->p);
        if (brg_tensor_copy(h, &src) != BRG_OK) return false;
        b->t.dtype = type;
        b->t.data = h->data;
    }
    return true;
}

static int covered_ops(const entry *e) {
    int n = 0;
    while (n < 3 && e->covers[n]) n++;
    return n;
}

static float rounded(float x, brg_dtype type) {
    return type == BRG_DTYPE_BF16 ? brg_bf16_to_f32(brg_f32_to_bf16(x)) : brg_f16_to_f32(brg_f32_to_f16(x));
}

/* The graph's output (widened) and gradients on a tape whose activations are `type`. */
static bool half_graph_run(opcase *c, brg_dtype type, snap *s, brg_dtype *stored) {
    const size_t mark_at = brg_arena_mark(arena);
    brg_tape *tape = NULL;
    bool ok = brg_tape_create(arena, &tape) == BRG_OK && wrap_half(c, type);
    brg_tensor *y = NULL;
    if (ok) {
        brg_tape_set_activation_dtype(tape, type);
        y = c->e->graph(tape, c);
    }
    if (y && (y->dtype == BRG_DTYPE_F32 || y->dtype == type)) {
        const int64_t ny = brg_tensor_numel(y);
        *stored = y->dtype;
        report(y->dtype == type || ny == 1, "the output is %s, not %s", brg_dtype_name(y->dtype), brg_dtype_name(type));
        float *wide = malloc((size_t)ny * sizeof *wide);
        brg_tensor w = brg_tensor_wrap(BRG_DTYPE_F32, y->ndim, y->shape, wide);
        ok = wide && brg_tensor_copy(&w, y) == BRG_OK;
        if (ok && y->requires_grad && ny == c->seed_n) ok = brg_tape_backward_from(tape, y, c->seed) == BRG_OK;
        if (ok) snap_add(s, "op:y", TY_F32, wide, ny);
        for (int i = 0; ok && i < c->nb; i++) {
            gbuf *b = &c->b[i];
            if (b->grad < 0) continue;
            brg_tensor_settle_grad(&b->t);
            snap_add(s, c->b[b->grad].name, TY_F32, b->t.grad, b->n);
        }
        free(wide);
    } else if (y) {
        ok = false; /* integer outputs: nothing to store in half */
    }
    brg_tape_destroy(tape);
    brg_arena_reset(arena, mark_at);
    return ok && y;
}

static void run_half(opcase *c, brg_dtype type) {
    const unsigned saved = cur_cells;
    cur_cells = 1u << COL_HALF;
    place(c, false);
    fill(c);
    if (c->e->prepare) c->e->prepare(c);
    round_inputs(c, type);
    snap full = {0}, half = {0};
    op_run(c, &full, false);
    brg_dtype stored = BRG_DTYPE_F32;
    const bool floats = full.n > 0 && full.a[0].type == TY_F32; /* an op with a float output ran */
    const bool ran = floats && half_graph_run(c, type, &half, &stored);
    if (floats) report(ran, "with %s activations the op failed: %s", brg_dtype_name(type), brg_last_error());
    if (ran) {
        const double unit = type == BRG_DTYPE_BF16 ? 0x1p-8 : 0x1p-11; /* the type's unit roundoff */
        const bool one_op = covered_ops(c->e) == 1;
        report(half.n == full.n, "%d outputs with half activations, %d without", half.n, full.n);
        for (int i = 0; i < half.n && i < full.n; i++) {
            const arr *a = &half.a[i], *w = &full.a[i];
            const float *got = a->data, *want = w->data;
            float *expect = dup_floats(want, w->n);
            const bool output = i == 0;
            if (output && stored == type)
                for (int64_t k = 0; k < w->n; k++) expect[k] = rounded(want[k], type);
            char msg[320] = "";
            const double tol = output && one_op ? 0.0 : 16 * unit;
            const bool ok = compare_arrays(got, expect, TY_F32, a->n, tol, msg, sizeof msg);
            report(ok, "%s in %s vs fp32 (rounded): %s", a->name, brg_dtype_name(type), msg);
            free(expect);
        }
    }
    snap_free(&half);
    snap_free(&full);
    cur_cells = saved;
}

static void rebuild_team(void) {
    brg_gemm_team_bind(NULL);
    brg_gemm_team_destroy(team);
    team = NULL;
    CHECK_OK(brg_gemm_team_create(2, &team));
}

/* One configuration: kernels, then the op; false when it faulted. */
static bool run_config(opcase *c, int ki, snap *s, bool fd) {
    place(c, ((c->si + ki) & 1) != 0);
    fill(c);
    if (c->e->prepare) c->e->prepare(c);
    fault_case = c;
    if (sigsetjmp(fault_jmp, 1) != 0) {
        fault_case = NULL;
        report(false, "%s", fault_msg);
        if (c->cfg->team == 2) rebuild_team();
        return false;
    }
    fault_armed = 1;
    if (c->e->kernel) {
        c->e->kernel(c);
        for (int i = 0; i < c->nb; i++) {
            gbuf *b = &c->b[i];
            if (b->role == R_OUT || b->role == R_ACC || b->role == R_INOUT) snap_add(s, b->name, b->type, b->p, b->n);
        }
    }
    if (c->e->graph) {
        fill(c);
        if (c->e->prepare) c->e->prepare(c);
        op_run(c, s, fd);
    }
    fault_armed = 0;
    fault_case = NULL;
    return true;
}

static bool has_nan(const snap *s) {
    for (int i = 0; i < s->n; i++) {
        if (s->a[i].type != TY_F32) continue;
        const float *x = s->a[i].data;
        for (int64_t k = 0; k < s->a[i].n; k++)
            if (isnan(x[k]) && bits_of(x[k]) != POISON_BITS) return true;
    }
    return false;
}

static void compare_snaps(const snap *got, const snap *want, double tol, const char *against) {
    if (!want->valid) return;
    report(got->n == want->n, "%d outputs, %s has %d", got->n, against, want->n);
    for (int i = 0; i < got->n && i < want->n; i++) {
        const arr *a = &got->a[i], *w = &want->a[i];
        char msg[320] = "";
        bool ok = strcmp(a->name, w->name) == 0 && a->n == w->n && a->type == w->type;
        if (ok) ok = compare_arrays(a->data, w->data, a->type, a->n, tol, msg, sizeof msg);
        report(ok, "%s vs %s: %s", a->name, against, msg);
    }
}

static void shape_desc(const entry *e, int si, char *out, size_t len) {
    const shape *s = &e->shapes[si];
    int n = 0, used = snprintf(out, len, "(");
    for (int k = 5; k >= 0 && n == 0; k--)
        if (s->d[k]) n = k + 1;
    if (n == 0) n = 1;
    for (int k = 0; k < n; k++)
        used += snprintf(out + used, len - (size_t)used, "%s%lld", k ? "," : "", (long long)s->d[k]);
    used += snprintf(out + used, len - (size_t)used, ")");
    for (int k = 0; k < 5; k++)
        if (s->v & (1u << k)) used += snprintf(out + used, len - (size_t)used, " V%d", k);
    if (s->v & S_SPECIAL) used += snprintf(out + used, len - (size_t)used, " nan/inf");
    if (s->v & S_BIG) snprintf(out + used, len - (size_t)used, " big");
}

static void run_shape(const entry *e, int ei, int si, const config *cfgs, int ncfg) {
    opcase c;
    memset(&c, 0, sizeof c);
    c.e = e, c.si = si, c.d = e->shapes[si].d, c.v = e->shapes[si].v;
    e->layout(&c);
    int64_t params = 0;
    const int n_declared = c.nb;
    for (int i = 0; e->graph && i < n_declared; i++) {
        if (!(c.b[i].flags & B_PARAM)) continue;
        gbuf *g = add_buf(&c, "", TY_F32, R_GRAD, 0, c.b[i].ndim, c.b[i].shape, 0, 0);
        snprintf(g->own_name, sizeof g->own_name, "op:d%s", c.b[i].name);
        g->name = g->own_name;
        c.b[i].grad = (int)(g - c.b);
        params += c.b[i].n;
    }
    char sdesc[96];
    shape_desc(e, si, sdesc, sizeof sdesc);
    const bool fd = e->graph && params > 0 && params <= FD_MAX && !(c.v & S_SPECIAL) &&
                    (c.v & e->fd_needs) == e->fd_needs;
    snap *snaps = calloc(MAX_CFG, sizeof *snaps);
    for (int ki = 0; ki < ncfg; ki++) {
        const config *k = &cfgs[ki];
        const bool reference = ki == 0 || ki == ncfg - 1;
        cur_cells = config_cells(e, k, reference);
        snprintf(cur_desc, sizeof cur_desc, "%s %s [simd %s, gemm %s, team %d]", e->name, sdesc, brg_isa_name(k->simd),
                 gemm_names[k->gemm], k->team);
        if (!apply_config(k)) {
            report(false, "cannot select this configuration");
            continue;
        }
        c.cfg = k;
        snaps[ki].valid = run_config(&c, ki, &snaps[ki], fd && (fd_every_config || ki == 0 || ki == ncfg - 2));
        if (!snaps[ki].valid) continue;
        if (ki == 0) {
            if ((c.v & S_SPECIAL) && !e->no_nan_out)
                report(has_nan(&snaps[0]), "the NaN input reaches no output");
            continue;
        }
        compare_snaps(&snaps[ki], &snaps[0], reference ? 0.0 : e->tol,
                      reference ? "the reference run against the other guard" : "the reference configuration");
        int p;
        if (reference) continue;
        if (k->team == 2 && (p = find_config(cfgs, ncfg, k->simd, k->gemm, 1)) >= 0)
            compare_snaps(&snaps[ki], &snaps[p], 0.0, "one thread");
        if ((e->exact & EX_SIMD) && k->simd == BRG_ISA_AVX512 &&
            (p = find_config(cfgs, ncfg, BRG_ISA_AVX2, k->gemm, k->team)) >= 0)
            compare_snaps(&snaps[ki], &snaps[p], 0.0, "the AVX2 bodies");
        if ((e->exact & EX_SCALAR) && k->simd != BRG_ISA_SCALAR &&
            (p = find_config(cfgs, ncfg, BRG_ISA_SCALAR, k->gemm, k->team)) >= 0)
            compare_snaps(&snaps[ki], &snaps[p], 0.0, "the scalar bodies");
    }
    for (int ki = 0; ki < ncfg; ki++) snap_free(&snaps[ki]);
    free(snaps);
    if (e->graph && !(c.v & S_SPECIAL) && apply_config(&cfgs[0])) {
        snprintf(cur_desc, sizeof cur_desc, "%s %s [half activations]", e->name, sdesc);
        run_half(&c, BRG_DTYPE_BF16);
        run_half(&c, BRG_DTYPE_F16);
        /* again with staging bounded to a few rows: the ops that stage wide half operands a
         * block of rows at a time (linear, cross-entropy) take that path even here */
        const int64_t bound = ops_set_stage_block_floats(1);
        snprintf(cur_desc, sizeof cur_desc, "%s %s [half activations, one row staged at a time]", e->name, sdesc);
        run_half(&c, BRG_DTYPE_BF16);
        run_half(&c, BRG_DTYPE_F16);
        ops_set_stage_block_floats(bound);
    }
    free_bufs(&c);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void run_entry(const entry *e, int ei) {
    const double t0 = now_s();
    cur_entry = e, cur_ei = ei, worst_ratio = 0.0;
    config cfgs[MAX_CFG];
    const int ncfg = configs_for(e, ei, cfgs);
    for (int si = 0; si < e->n_shapes; si++) run_shape(e, ei, si, cfgs, ncfg);
    if (e->known && entry_failures[ei] == 0) {
        fixed_known++;
        test_failed_++;
        fprintf(stderr, "FAIL %s: listed as a known failure (%s) but every check passed: drop the note\n", e->name,
                e->known);
    }
    if (verbose)
        printf("  %-26s %2d configs, %2d shapes, worst error %.2f of its tolerance, %.2f s\n", e->name, ncfg,
               e->n_shapes, worst_ratio, now_s() - t0);
}

/* ==== the registry ========================================================================== */

static bool in_registry(const char *name) {
    for (int i = 0; i < ops_registry_count; i++)
        if (strcmp(ops_registry[i].name, name) == 0) return true;
    return false;
}

static const entry *entry_covering(const char *op) {
    for (int i = 0; i < N_ENTRIES; i++)
        for (int k = 0; k < 3 && entries[i].covers[k]; k++)
            if (strcmp(entries[i].covers[k], op) == 0) return &entries[i];
    return NULL;
}

#define MAX_FOUND 128
static char found[MAX_FOUND][64];
static int n_found;

/* Every `brg_status brg_NAME(brg_tape *` in the text (an op's declaration or definition). */
static void scan_ops(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECK_MSG(f != NULL, "cannot read %s to find the autograd ops", path);
    if (!f) return;
    static char text[1 << 20];
    const size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[len] = 0;
    for (const char *p = strstr(text, "brg_status"); p; p = strstr(p + 1, "brg_status")) {
        const char *q = p + strlen("brg_status");
        if (!isspace((unsigned char)*q)) continue;
        while (isspace((unsigned char)*q)) q++;
        char name[64];
        int k = 0;
        while ((isalnum((unsigned char)*q) || *q == '_') && k < 63) name[k++] = *q++;
        name[k] = 0;
        while (isspace((unsigned char)*q)) q++;
        if (*q++ != '(') continue;
        while (isspace((unsigned char)*q)) q++;
        if (strncmp(q, "brg_tape", 8) != 0 || (q[8] != ' ' && q[8] != '*')) continue;
        if (strncmp(name, "brg_", 4) != 0 || strncmp(name, "brg_tape_", 9) == 0) continue;
        bool seen = false;
        for (int i = 0; i < n_found; i++) seen = seen || strcmp(found[i], name) == 0;
        if (!seen && n_found < MAX_FOUND) snprintf(found[n_found++], sizeof found[0], "%s", name);
        CHECK_MSG(in_registry(name),
                  "%s declares or defines the autograd op %s, which ops_registry (src/autograd/ops_registry.c) does "
                  "not list: add it there and an entry to the op table (docs/kernels.md)",
                  path, name);
    }
}

/* The source tree this file was compiled from. */
static void source_root(char *out, size_t len) {
    snprintf(out, len, "%s", __FILE__);
    char *slash = strstr(out, "tests/test_ops_table.c");
    if (slash) *slash = 0;
    if (!*out) snprintf(out, len, "./");
}

static void check_registry(void) {
    for (int i = 0; i < ops_registry_count; i++) {
        const char *name = ops_registry[i].name;
        CHECK_MSG(ops_registry[i].fn != NULL, "ops_registry: %s has no function", name);
        for (int k = 0; k < i; k++)
            CHECK_MSG(strcmp(ops_registry[k].name, name) != 0, "ops_registry lists %s twice", name);
        CHECK_MSG(entry_covering(name) != NULL,
                  "the autograd op %s (ops_registry) has no entry in the op table (tests/test_ops_table.c)", name);
    }
    for (int i = 0; i < N_ENTRIES; i++)
        for (int k = 0; k < 3 && entries[i].covers[k]; k++)
            CHECK_MSG(in_registry(entries[i].covers[k]), "op table entry %s covers %s, which ops_registry does not list",
                      entries[i].name, entries[i].covers[k]);
    char root[1024], path[1400];
    source_root(root, sizeof root);
    snprintf(path, sizeof path, "%sinclude/brigade/ops.h", root);
    scan_ops(path);
    snprintf(path, sizeof path, "%ssrc/autograd", root);
    DIR *dir = opendir(path);
    CHECK_MSG(dir != NULL, "cannot list %s to find the autograd ops", path);
    for (struct dirent *d; dir && (d = readdir(dir));) {
        const size_t n = strlen(d->d_name);
        if (n < 3 || (strcmp(d->d_name + n - 2, ".c") != 0 && strcmp(d->d_name + n - 2, ".h") != 0)) continue;
        if (strncmp(d->d_name, "ops_registry.", 13) == 0) continue;
        snprintf(path, sizeof path, "%ssrc/autograd/%s", root, d->d_name);
        scan_ops(path);
    }
    if (dir) closedir(dir);
    /* the scan itself works: it finds every registered op */
    for (int i = 0; i < ops_registry_count; i++) {
        bool seen = false;
        for (int k = 0; k < n_found; k++) seen = seen || strcmp(found[k], ops_registry[i].name) == 0;
        CHECK_MSG(seen, "ops_registry lists %s, which no header or source in src/autograd declares as an op",
                  ops_registry[i].name);
    }
}

/* ==== the summary =========================================================================== */

static void print_table(void) {
    printf("\nop table: simd bodies up to %s, gemm backends available here, a team of 2 threads%s\n",
           brg_isa_name(brg_isa_detected()), getenv("BRIGADE_ISA") ? " (capped by BRIGADE_ISA)" : "");
    printf("%-26s", "entry");
    for (int k = 0; k < N_COLS; k++) printf(" %-8s", col_names[k]);
    printf(" exact\n");
    for (int i = 0; i < N_ENTRIES; i++) {
        const entry *e = &entries[i];
        printf("%-26s", e->name);
        for (int k = 0; k < N_COLS; k++) printf(" %-8s", cell_names[cells[i][k]]);
        printf(" %s%s%s\n", (e->axes & AX_TEAM) ? "team " : "", (e->exact & EX_SIMD) ? "avx2=avx512 " : "",
               (e->exact & EX_SCALAR) ? "=scalar" : "");
    }
    for (int i = 0; i < N_ENTRIES; i++)
        if (entries[i].known) printf("KNOWN %s: %s\n", entries[i].name, entries[i].known);
    printf("%d known failures\n", known_failures);
}

int main(void) {
    page = (size_t)sysconf(_SC_PAGESIZE);
    main_thread = pthread_self();
    install_fault_handler();
    verbose = getenv("OPS_TABLE_VERBOSE") && *getenv("OPS_TABLE_VERBOSE") == '1';
    fd_every_config = !(getenv("OPS_TABLE_FD") && strcmp(getenv("OPS_TABLE_FD"), "ends") == 0);
    const char *only = getenv("OPS_TABLE_ONLY");
    BRG_ASSERT(N_ENTRIES <= MAX_ENTRIES);
    CHECK_OK(brg_arena_create("op table", 0, &arena));
    CHECK_OK(brg_gemm_team_create(2, &team));
    check_registry();
    const double t0 = now_s();
    for (int i = 0; i < N_ENTRIES; i++)
        if (!only || strcmp(only, entries[i].name) == 0) run_entry(&entries[i], i);
    brg_simd_reset();
    brg_gemm_force_backend(NULL);
    brg_gemm_team_bind(NULL);
    brg_gemm_team_destroy(team);
    brg_arena_destroy(arena);
    print_table();
    printf("%.1f s\n", now_s() - t0);
    return test_finish();
}
