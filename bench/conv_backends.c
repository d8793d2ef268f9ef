/* conv_backends.c: which CPU convolution backend the runtime should use (issue 12), measured.
 * For the flagship CNN's two conv layers (Fashion-MNIST 28x28x1: 5x5 SAME convolutions 1->32
 * on 28x28 and 32->64 on 14x14) at batch 128 and at the batches of tile tasks, in the three
 * directions of a training step, it times
 *   (1) im2col + OpenBLAS sgemm (conv_im2col.h),
 *   (2) oneDNN's C API (conv_dnnl.h),
 *   (3) libxsmm's DNN API (conv_xsmm.h),
 * against one cblas_sgemm of the same im2col GEMM shape and one square 1024 sgemm (the
 * machine's rate); and the dense layers of the flagship MLP and CNN (cblas_sgemm, oneDNN
 * matmul, libxsmm JIT GEMM). Every variant's result is first checked against a float64
 * reference; a wrong one is reported and not timed. Each figure is
 * the median of --rounds interleaved rounds (one round runs every variant once, in a rotated
 * order), each round's sample the mean of enough calls to last --block-ms, after one untimed
 * call. With more than one thread, a variant waits before its block until the previous one's
 * idle threads have gone to sleep (OpenBLAS's spin about 0.1 s, libgomp's about 10 ms) so that
 * they do not steal its cores.
 *
 *   conv_backends [--threads 1,2] [--batches 128,64,32,16] [--rounds N] [--block-ms MS]
 *                 [--settle-blas-ms MS] [--settle-omp-ms MS] [--only conv|dense]
 *
 * OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are used as the environment sets them (printed).
 * Exit status: 0, or 1 when a backend gave a wrong result or failed to run. */
#include <errno.h>
#include <math.h>
#include <unistd.h>
#include "config.h"
#include "benchutil.h"
#include "conv_im2col.h"
#ifdef TFC_HAVE_DNNL
#include "conv_dnnl.h"
#endif
#ifdef TFC_HAVE_LIBXSMM
#include "conv_xsmm.h"
#endif

#define MAX_THREAD_COUNTS 8
#define MAX_BATCHES 8
#define MAX_ROUNDS 1001
#define TOLERANCE 1e-3 /* of conv_max_rel_error; the backends stay below 2e-4, a bug gives O(1) */

struct options {
    int threads[MAX_THREAD_COUNTS], n_threads;
    int batches[MAX_BATCHES], n_batches;
    int rounds;
    double block_ms, settle_blas_ms, settle_omp_ms;
    int conv, dense;
};

static const struct conv_shape conv_layers[] = {
    {"conv1", 1, 28, 28, 32, 5, 5, 1, 2},
    {"conv2", 32, 14, 14, 64, 5, 5, 1, 2},
};
#define N_CONV_LAYERS (int)(sizeof conv_layers / sizeof conv_layers[0])

/* Dense layers of the flagship MLP (examples/mlp_model.c: 784-256-128-10) and of the CNN. */
static const struct { const char *name; int in, out; } dense_layers[] = {
    {"mlp dense1", 784, 256}, {"mlp dense2", 256, 128}, {"mlp logits", 128, 10},
    {"cnn dense", 3136, 1024}, {"cnn logits", 1024, 10},
};
#define N_DENSE_LAYERS (int)(sizeof dense_layers / sizeof dense_layers[0])

/* Every table starts with the two yardsticks: one cblas_sgemm of the problem's GEMM shape, and
 * one of a square 1024 GEMM, this machine's sgemm rate at that thread count ("peak"). */
enum { V_SGEMM, V_PEAK, V_IM2COL, V_DNNL_ANY, V_DNNL_REORDER, V_DNNL_NCHW, V_XSMM, V_XSMM_COPY,
       N_CONV_V };
enum { DV_SGEMM, DV_PEAK, DV_DNNL, DV_XSMM, N_DENSE_V };
#define PEAK_N 1024
#define N_V_MAX N_CONV_V

/* One variant's outcome in one case: error, median and quartiles of the per-round samples. */
struct timing {
    int state; /* TIMED, or why not */
    double err, med, q25, q75;
    int reps;
};
enum { ABSENT, SETUP_FAILED, WRONG, RUN_FAILED, TIMED };

static int any_failure; /* a wrong result or a failed run: the exit status */

static void die_usage(const char *msg)
{
    fprintf(stderr, "conv_backends: %s\nusage: conv_backends [--threads 1,2] [--batches "
                    "128,64,32,16] [--rounds N] [--block-ms MS] [--settle-blas-ms MS] "
                    "[--settle-omp-ms MS] [--only conv|dense]\n", msg);
    exit(2);
}

/* A comma-separated list of integers in [1, max]. */
static int parse_list(const char *flag, const char *s, int *out, int cap, int max)
{
    int n = 0;
    char *end;
    for (;;) {
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 1 || v > max || n == cap) {
            fprintf(stderr, "conv_backends: %s '%s': want up to %d integers in [1, %d], "
                            "comma-separated\n", flag, s, cap, max);
            exit(2);
        }
        out[n++] = (int)v;
        if (*end != ',') break;
        s = end + 1;
    }
    if (*end) die_usage("trailing characters in a list");
    return n;
}

static double parse_number(const char *flag, const char *s, double lo, double hi)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "conv_backends: %s '%s': want a number in [%g, %g]\n", flag, s, lo, hi);
        exit(2);
    }
    return v;
}

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.threads = {1, 2}, .n_threads = 2, .batches = {128, 64, 32, 16},
                          .n_batches = 4, .rounds = 9, .block_ms = 20, .settle_blas_ms = 150,
                          .settle_omp_ms = 20, .conv = 1, .dense = 1};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) die_usage("every option takes a value");
        if (!strcmp(a, "--threads"))
            o->n_threads = parse_list(a, v, o->threads, MAX_THREAD_COUNTS, 64);
        else if (!strcmp(a, "--batches"))
            o->n_batches = parse_list(a, v, o->batches, MAX_BATCHES, 4096);
        else if (!strcmp(a, "--rounds")) o->rounds = (int)parse_number(a, v, 1, MAX_ROUNDS);
        else if (!strcmp(a, "--block-ms")) o->block_ms = parse_number(a, v, 0, 10000);
        else if (!strcmp(a, "--settle-blas-ms")) o->settle_blas_ms = parse_number(a, v, 0, 10000);
        else if (!strcmp(a, "--settle-omp-ms")) o->settle_omp_ms = parse_number(a, v, 0, 10000);
        else if (!strcmp(a, "--only") && !strcmp(v, "conv")) o->dense = 0;
        else if (!strcmp(a, "--only") && !strcmp(v, "dense")) o->conv = 0;
        else if (!strcmp(a, "--only")) die_usage("--only takes conv or dense");
        else {
            fprintf(stderr, "conv_backends: unknown option '%s'\n", a);
            die_usage("options are listed below");
        }
    }
}

/* The variables that steer the libraries' threads and kernels, as the user set them. */
static void print_environment(void)
{
    static const char *const vars[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                       "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                       "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                                       "DNNL_MAX_CPU_ISA", "LIBXSMM_TARGET"};
    double load[3];
    bench_load_average(load);
    printf("# environment:");
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        printf(" %s=%s", vars[i], getenv(vars[i]) ? getenv(vars[i]) : "(unset)");
    printf("\n# load average at start: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
}

/* Starts the backends and prints what they are and what they chose for this CPU. */
static void init_libraries(void)
{
    openblas_set_num_threads(1);
    printf("# OpenBLAS: %s (core %s)\n", openblas_get_config(), openblas_get_corename());
#ifdef TFC_HAVE_DNNL
    if (conv_dnnl_init()) exit(1);
    const dnnl_version_t *dv = dnnl_version();
    printf("# oneDNN %d.%d.%d, CPU runtime %s, effective ISA 0x%x (dnnl_cpu_isa_t)\n", dv->major,
           dv->minor, dv->patch, dv->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP (libgomp)" : "other",
           (unsigned)dnnl_get_effective_cpu_isa());
#else
    printf("# oneDNN: not built in (configure did not find it)\n");
#endif
#ifdef TFC_HAVE_LIBXSMM
    int had_bind = getenv("OMP_PROC_BIND") != NULL;
    libxsmm_init();
    printf("# libxsmm %s, target %s\n", LIBXSMM_VERSION, libxsmm_get_target_arch());
    if (!had_bind && getenv("OMP_PROC_BIND")) /* libgomp read its variables before main */
        printf("# note: libxsmm_init put OMP_PROC_BIND=%s into the environment (no effect on "
               "this process's OpenMP threads: omp_get_proc_bind() = %d)\n",
               getenv("OMP_PROC_BIND"), (int)omp_get_proc_bind());
#else
    printf("# libxsmm: not built in (configure did not find it)\n");
#endif
}

/* ---- timing --------------------------------------------------------------------------- */

static void sleep_ms(double ms)
{
    if (ms > 0) usleep((useconds_t)(ms * 1e3));
}

/* Seconds per call of a block of reps calls (after one untimed call); -1 when a call fails. */
static double time_block(struct variant *v, int reps)
{
    if (v->run(v->st)) return -1;
    double t0 = bench_now();
    for (int r = 0; r < reps; r++)
        if (v->run(v->st)) return -1;
    return (bench_now() - t0) / reps;
}

/* Calls per block: enough for block_ms, from the time of one warm call. */
static int block_reps(struct variant *v, double block_ms)
{
    double t = time_block(v, 1);
    if (t < 0) return -1;
    double reps = ceil(block_ms * 1e-3 / (t > 1e-7 ? t : 1e-7));
    return reps < 1 ? 1 : reps > 100000 ? 100000 : (int)reps;
}

/* Times the variants whose state is TIMED (the others are skipped), interleaved. */
static void time_variants(struct variant *v, struct timing *tm, int nv, int threads,
                          const struct options *o)
{
    static double samples[N_V_MAX][MAX_ROUNDS];
    sleep_ms(o->settle_blas_ms); /* whatever ran before (checks, other thread counts) idles */
    for (int i = 0; i < nv; i++)
        if (tm[i].state == TIMED && (tm[i].reps = block_reps(&v[i], o->block_ms)) < 0)
            tm[i].state = RUN_FAILED, any_failure = 1;
    int prev = -1;
    for (int round = 0; round < o->rounds; round++)
        for (int j = 0; j < nv; j++) {
            int i = (j + round) % nv;
            if (tm[i].state != TIMED) continue;
            if (threads > 1 && prev >= 0)
                sleep_ms(v[prev].openblas_pool ? o->settle_blas_ms : o->settle_omp_ms);
            samples[i][round] = time_block(&v[i], tm[i].reps);
            if (samples[i][round] < 0) tm[i].state = RUN_FAILED, any_failure = 1;
            prev = i;
        }
    for (int i = 0; i < nv; i++)
        if (tm[i].state == TIMED) {
            tm[i].q25 = bench_quantile(samples[i], o->rounds, 0.25);
            tm[i].q75 = bench_quantile(samples[i], o->rounds, 0.75);
            tm[i].med = bench_median(samples[i], o->rounds);
        }
}

/* Runs variant v once and compares its result with ref (n values); sets tm's state and err. */
static void check_variant(struct variant *v, const double *ref, size_t n, float *scratch,
                          struct timing *tm)
{
    if (v->run(v->st) || v->fetch(v->st, scratch)) {
        tm->state = RUN_FAILED, any_failure = 1;
        return;
    }
    tm->err = conv_max_rel_error(scratch, ref, n);
    tm->state = tm->err <= TOLERANCE ? TIMED : WRONG;
    if (tm->state == WRONG) any_failure = 1;
}

/* Rows of one table: rates against the same-shape sgemm (row 0) and the square one (row 1). */
static void print_rows(const struct variant *v, const struct timing *tm, int nv, double flops)
{
    static const char *const why[] = {"not built", "setup failed (see above)",
                                      "WRONG RESULT: not timed", "run failed (see above)"};
    double rate[N_V_MAX];
    for (int i = 0; i < nv; i++)
        rate[i] = tm[i].state == TIMED ? (v[i].flops ? v[i].flops : flops) / tm[i].med : NAN;
    printf("  %-18s %11s %6s %10s %6s %8s %7s %6s  %s\n", "variant", "max rel err", "calls",
           "median ms", "IQR %", "GFLOP/s", "/sgemm", "/peak", "implementation");
    for (int i = 0; i < nv; i++) {
        char err[16] = "-";
        if (v[i].fetch && (tm[i].state == WRONG || tm[i].state == TIMED))
            snprintf(err, sizeof err, "%.1e", tm[i].err);
        if (tm[i].state != TIMED) {
            printf("  %-18s %11s  %s\n", v[i].name[0] ? v[i].name : "?", err, why[tm[i].state]);
            continue;
        }
        printf("  %-18s %11s %6d %10.3f %6.1f %8.1f %7.2f %6.2f  %s\n", v[i].name, err,
               tm[i].reps, tm[i].med * 1e3, 100 * (tm[i].q75 - tm[i].q25) / tm[i].med,
               rate[i] * 1e-9, rate[i] / rate[0], rate[i] / rate[1], v[i].impl);
    }
}

/* The square sgemm that stands for the machine's rate. */
static void peak_create(int threads, struct variant *v)
{
    sgemm_create(PEAK_N, PEAK_N, PEAK_N, 0, 0, threads, v);
    snprintf(v->name, sizeof v->name, "sgemm %d^3", PEAK_N);
    v->flops = 2.0 * PEAK_N * PEAK_N * PEAK_N;
}

/* ---- convolution cases ---------------------------------------------------------------- */

static int conv_variant_create(int slot, const struct conv_problem *p, enum conv_dir d,
                               int threads, struct variant *v)
{
    int m, n, k, ta, tb;
    memset(v, 0, sizeof *v);
    switch (slot) {
    case V_SGEMM:
        sgemm_shape(p, d, &m, &n, &k, &ta, &tb);
        sgemm_create(m, n, k, ta, tb, threads, v);
        return 0;
    case V_PEAK: peak_create(threads, v); return 0;
    case V_IM2COL: return im2col_create(p, d, threads, v);
#ifdef TFC_HAVE_DNNL
    case V_DNNL_ANY: return dnnl_conv_create(p, d, DNNL_ANY, threads, v);
    case V_DNNL_REORDER: return dnnl_conv_create(p, d, DNNL_ANY_REORDER, threads, v);
    case V_DNNL_NCHW: return dnnl_conv_create(p, d, DNNL_PLAIN, threads, v);
#endif
#ifdef TFC_HAVE_LIBXSMM
    case V_XSMM: return xsmm_conv_create(p, d, 0, threads, v);
    case V_XSMM_COPY: return xsmm_conv_create(p, d, 1, threads, v);
#endif
    default: {
        static const char *const names[N_CONV_V] = {[V_DNNL_ANY] = "dnnl any",
            [V_DNNL_REORDER] = "dnnl any+reorder", [V_DNNL_NCHW] = "dnnl nchw",
            [V_XSMM] = "xsmm", [V_XSMM_COPY] = "xsmm+copy"};
        snprintf(v->name, sizeof v->name, "%s", names[slot]);
        return -2;
    }
    }
}

/* A layer at a batch: its data, and the float64 reference of each direction once needed. */
struct conv_case {
    struct conv_problem p;
    double *ref[N_DIRS];
    float *scratch; /* a fetched result */
};

static void conv_case_init(struct conv_case *c, const struct conv_shape *sh, int batch)
{
    uint64_t seed = 0x9E3779B97F4A7C15ULL ^ (uint64_t)batch;
    memset(c, 0, sizeof *c);
    c->p.sh = *sh, c->p.n = batch;
    c->p.oh = conv_out_size(sh->h, sh->r, sh->stride, sh->pad);
    c->p.ow = conv_out_size(sh->w, sh->s, sh->stride, sh->pad);
    size_t nx = (size_t)batch * sh->c * sh->h * sh->w, nw = (size_t)sh->k * sh->c * sh->r * sh->s,
           ny = (size_t)batch * sh->k * c->p.oh * c->p.ow;
    c->p.x = conv_alloc(nx), c->p.w = conv_alloc(nw), c->p.dy = conv_alloc(ny);
    conv_fill_random(c->p.x, nx, &seed);
    conv_fill_random(c->p.w, nw, &seed);
    conv_fill_random(c->p.dy, ny, &seed);
    c->scratch = conv_alloc(nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw));
}

static void conv_case_free(struct conv_case *c)
{
    for (int d = 0; d < N_DIRS; d++) free(c->ref[d]);
    free(c->p.x), free(c->p.w), free(c->p.dy), free(c->scratch);
}

/* One direction of one case on `threads` threads: set up, check, time, print, tear down.
 * ms[slot] gets each variant's median in ms (NaN when not timed). */
static void conv_direction(struct conv_case *c, enum conv_dir d, int threads,
                           const struct options *o, double ms[N_CONV_V])
{
    struct variant v[N_CONV_V];
    struct timing tm[N_CONV_V] = {{0}};
    int m, n, k, ta, tb;
    sgemm_shape(&c->p, d, &m, &n, &k, &ta, &tb);
    printf("\n== %s (%d->%d channels, %dx%d input, %dx%d filter, pad %d), batch %d, %d thread%s: "
           "%s\n   im2col GEMM M=%d N=%d K=%d, %.3f GFLOP\n", c->p.sh.name, c->p.sh.c, c->p.sh.k,
           c->p.sh.h, c->p.sh.w, c->p.sh.r, c->p.sh.s, c->p.sh.pad, c->p.n, threads,
           threads > 1 ? "s" : "", conv_dir_names[d], m, n, k, conv_flops(&c->p) * 1e-9);
    if (!c->ref[d]) c->ref[d] = conv_ref(&c->p, d);
    for (int i = 0; i < N_CONV_V; i++) {
        int rc = conv_variant_create(i, &c->p, d, threads, &v[i]);
        tm[i].state = rc == -2 ? ABSENT : rc ? SETUP_FAILED : TIMED;
        if (rc == 0 && i != V_SGEMM && i != V_PEAK) /* the yardsticks compute no convolution */
            check_variant(&v[i], c->ref[d], conv_result_size(&c->p, d), c->scratch, &tm[i]);
    }
    time_variants(v, tm, N_CONV_V, threads, o);
    print_rows(v, tm, N_CONV_V, conv_flops(&c->p));
    fflush(stdout);
    for (int i = 0; i < N_CONV_V; i++) {
        ms[i] = tm[i].state == TIMED ? tm[i].med * 1e3 : NAN;
        if (tm[i].state != ABSENT && tm[i].state != SETUP_FAILED) v[i].destroy(v[i].st);
    }
}

/* conv1's input is the image, which needs no gradient: its backward-data is timed but left out
 * of the step totals. */
static const int conv_needs_input_grad[N_CONV_LAYERS] = {0, 1};

static double conv_ms[N_CONV_LAYERS][MAX_BATCHES][MAX_THREAD_COUNTS][N_DIRS][N_CONV_V];
static double conv_case_flops[N_CONV_LAYERS][MAX_BATCHES]; /* of one direction */

/* The share of the square sgemm's rate (the mean of its rates in the case's three tables)
 * that `flops` in `ms` reach. */
static double peak_share(double flops, double ms, const double peak_ms[N_DIRS])
{
    double peak_rate = 0;
    for (int d = 0; d < N_DIRS; d++) peak_rate += 2.0 * PEAK_N * PEAK_N * PEAK_N / peak_ms[d];
    return flops / ms / (peak_rate / N_DIRS);
}

/* Per layer, batch and thread count: the time of the directions a training step needs, per
 * variant, and in brackets the share of the machine's sgemm rate that it reaches. */
static void conv_summary(const struct options *o)
{
    static const char *const names[N_CONV_V] = {"sgemm same shape", "", "im2col+sgemm",
                                                "dnnl any", "dnnl any+reorder", "dnnl nchw",
                                                "xsmm", "xsmm+copy"};
    printf("\n== Summary: convolution time per training step, ms (forward + backward-filter, "
           "+ backward-data for conv2;\n   conv1's input is the image), and in brackets the "
           "share of the sgemm %d^3 rate it reaches\n%-6s %5s %3s", PEAK_N, "layer", "batch",
           "thr");
    for (int i = 0; i < N_CONV_V; i++)
        if (i != V_PEAK) printf(" %17s", names[i]);
    printf("\n");
    for (int l = 0; l < N_CONV_LAYERS; l++)
        for (int b = 0; b < o->n_batches; b++)
            for (int t = 0; t < o->n_threads; t++) {
                double peak_ms[N_DIRS], n_dirs = 2 + conv_needs_input_grad[l];
                for (int d = 0; d < N_DIRS; d++) peak_ms[d] = conv_ms[l][b][t][d][V_PEAK];
                printf("%-6s %5d %3d", conv_layers[l].name, o->batches[b], o->threads[t]);
                for (int i = 0; i < N_CONV_V; i++) {
                    double sum = 0;
                    for (int d = 0; d < N_DIRS; d++)
                        if (d != DIR_BWD_DATA || conv_needs_input_grad[l])
                            sum += conv_ms[l][b][t][d][i];
                    if (i == V_PEAK) continue;
                    if (isnan(sum)) printf(" %17s", "-");
                    else printf(" %9.3f (%5.2f)", sum,
                                peak_share(n_dirs * conv_case_flops[l][b], sum, peak_ms));
                }
                printf("\n");
            }
}

static void run_conv(const struct options *o)
{
    for (int l = 0; l < N_CONV_LAYERS; l++)
        for (int b = 0; b < o->n_batches; b++) {
            struct conv_case c;
            conv_case_init(&c, &conv_layers[l], o->batches[b]);
            conv_case_flops[l][b] = conv_flops(&c.p);
            for (int t = 0; t < o->n_threads; t++) {
                omp_set_num_threads(o->threads[t]); /* oneDNN's threads */
                for (int d = 0; d < N_DIRS; d++)
                    conv_direction(&c, d, o->threads[t], o, conv_ms[l][b][t][d]);
            }
            conv_case_free(&c);
        }
    conv_summary(o);
}

/* ---- dense cases ---------------------------------------------------------------------- */

#define DENSE_BATCH 128

static int dense_variant_create(int slot, const struct dense_problem *p, enum conv_dir d,
                                int threads, struct variant *v)
{
    memset(v, 0, sizeof *v);
    switch (slot) {
    case DV_SGEMM: dense_blas_create(p, d, threads, v); return 0;
    case DV_PEAK: peak_create(threads, v); return 0;
#ifdef TFC_HAVE_DNNL
    case DV_DNNL: return dnnl_mm_create(p, d, v);
#endif
#ifdef TFC_HAVE_LIBXSMM
    case DV_XSMM: return xsmm_mm_create(p, d, threads, v);
#endif
    default:
        snprintf(v->name, sizeof v->name, slot == DV_DNNL ? "dnnl matmul" : "xsmm jit");
        return -2;
    }
}

static void dense_direction(const struct dense_problem *p, enum conv_dir d, int threads,
                            const struct options *o)
{
    static const char *const gemm[N_DIRS] = {"y = x w", "dx = dy w^T", "dw = x^T dy"};
    struct variant v[N_DENSE_V];
    struct timing tm[N_DENSE_V] = {{0}};
    size_t n = dense_result_size(p, d);
    double *ref = dense_ref(p, d);
    float *scratch = conv_alloc(n);
    printf("\n== %s (%d->%d), batch %d, %d thread%s: %s, %s, %.4f GFLOP\n", p->name, p->in,
           p->out, p->b, threads, threads > 1 ? "s" : "", conv_dir_names[d], gemm[d],
           dense_flops(p) * 1e-9);
    for (int i = 0; i < N_DENSE_V; i++) {
        int rc = dense_variant_create(i, p, d, threads, &v[i]);
        tm[i].state = rc == -2 ? ABSENT : rc ? SETUP_FAILED : TIMED;
        if (rc == 0 && i != DV_PEAK) check_variant(&v[i], ref, n, scratch, &tm[i]);
    }
    time_variants(v, tm, N_DENSE_V, threads, o);
    print_rows(v, tm, N_DENSE_V, dense_flops(p));
    fflush(stdout);
    for (int i = 0; i < N_DENSE_V; i++)
        if (tm[i].state != ABSENT && tm[i].state != SETUP_FAILED) v[i].destroy(v[i].st);
    free(ref), free(scratch);
}

static void run_dense(const struct options *o)
{
    for (int l = 0; l < N_DENSE_LAYERS; l++) {
        struct dense_problem p = {dense_layers[l].name, DENSE_BATCH, dense_layers[l].in,
                                  dense_layers[l].out, NULL, NULL, NULL};
        uint64_t seed = 0xD1B54A32D192ED03ULL ^ (uint64_t)l;
        p.x = conv_alloc((size_t)p.b * p.in), p.w = conv_alloc((size_t)p.in * p.out);
        p.dy = conv_alloc((size_t)p.b * p.out);
        conv_fill_random(p.x, (size_t)p.b * p.in, &seed);
        conv_fill_random(p.w, (size_t)p.in * p.out, &seed);
        conv_fill_random(p.dy, (size_t)p.b * p.out, &seed);
        for (int t = 0; t < o->n_threads; t++) {
            omp_set_num_threads(o->threads[t]);
            for (int d = 0; d < N_DIRS; d++) dense_direction(&p, d, o->threads[t], o);
        }
        free(p.x), free(p.w), free(p.dy);
    }
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    print_environment();
    init_libraries();
    printf("# each figure: median of %d interleaved rounds, a round's sample the mean of enough "
           "calls for %.0f ms after one untimed call;\n# with threads, %.0f ms pause after "
           "multi-threaded OpenBLAS and %.0f ms after OpenMP before the next variant\n",
           o.rounds, o.block_ms, o.settle_blas_ms, o.settle_omp_ms);
    if (o.conv) run_conv(&o);
    if (o.dense) run_dense(&o);
    double load[3];
    bench_load_average(load);
    printf("\n# load average at end: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
#ifdef TFC_HAVE_DNNL
    conv_dnnl_fini();
#endif
#ifdef TFC_HAVE_LIBXSMM
    libxsmm_finalize();
#endif
    return any_failure;
}
