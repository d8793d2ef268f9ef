/* conv_op.c: the library's convolution op at the CNN's shapes (issue 12: conv1 5x5 SAME 1->32
 * on 28x28, conv2 5x5 SAME 32->64 on 14x14, batch 128), each direction a node of one graph
 * (tfc_conv, tfc_conv_backprop_input, tfc_conv_backprop_filter) run through a session, against
 * one cblas_sgemm of the same im2col GEMM shape (the whole batch in one call, as
 * bench/conv_backends' yardstick) on as many OpenBLAS threads as the session has CPU workers.
 * Interleaved repeats after warm-up runs, medians; GFLOP/s = 2 N K C R S OH OW / time for every
 * direction (padding included); ratio = the op's rate over the sgemm's. Each node's result is
 * first checked against a float64 sum at sampled elements. Lines are machine-readable:
 *   conv_op layer=conv2 dir=forward workers=2 batch=128 ms=... gflops=... sgemm_ms=... ratio=...
 *
 *   conv_op [--workers 1|2] [--batch B] [--repeats N] [--warmup N] [--settle-ms MS]
 * --workers sets STARPU_NCPU (it overrides the environment's). */
#include <errno.h>
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <starpu.h>
#include "../src/tfc.h"
#define BENCH_CBLAS
#include "benchutil.h"

enum { FWD, BWD_INPUT, BWD_FILTER, N_DIRS };
static const char *const dir_names[N_DIRS] = {"forward", "backprop_input", "backprop_filter"};

/* A 5x5 stride-1 SAME layer: the output is as large as the input. */
struct layer {
    const char *name;
    int c, h, w, k, r, s, pad;
};
static const struct layer layers[] = {{"conv1", 1, 28, 28, 32, 5, 5, 2},
                                      {"conv2", 32, 14, 14, 64, 5, 5, 2}};
#define N_LAYERS (int)(sizeof layers / sizeof layers[0])

struct options {
    int workers, batch, repeats, warmup;
    double settle_ms;
};

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "conv_op: %s: %s\n", what, msg);
    exit(1);
}

static int parse_int(const char *flag, const char *v, int lo, int hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "conv_op: %s '%s': want an integer in [%d, %d]\n", flag, v, lo, hi);
        exit(2);
    }
    return (int)x;
}

static void parse(int argc, char **argv, struct options *o)
{
    *o = (struct options){.workers = 2, .batch = 128, .repeats = 15, .warmup = 3,
                          .settle_ms = 150};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "conv_op: '%s' takes a value\nusage: conv_op [--workers 1|2] "
                            "[--batch B] [--repeats N] [--warmup N] [--settle-ms MS]\n", a);
            exit(2);
        }
        if (!strcmp(a, "--workers")) o->workers = parse_int(a, v, 1, 2);
        else if (!strcmp(a, "--batch")) o->batch = parse_int(a, v, 1, 4096);
        else if (!strcmp(a, "--repeats")) o->repeats = parse_int(a, v, 1, 10000);
        else if (!strcmp(a, "--warmup")) o->warmup = parse_int(a, v, 0, 10000);
        else if (!strcmp(a, "--settle-ms")) o->settle_ms = parse_int(a, v, 0, 10000);
        else {
            fprintf(stderr, "conv_op: unknown option '%s'\n", a);
            exit(2);
        }
    }
}

/* xorshift64* in [-1, 1): never all zeros, so a kernel that skips an input shows. */
static void fill_random(float *v, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t x = *state;
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        *state = x;
        v[i] = (float)((double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-52 - 1.0);
    }
}

/* One layer at one batch: host data, the graph's three nodes and their feeds. */
struct conv_case {
    const struct layer *l;
    int n;
    float *x, *w, *dy;                   /* [n,c,h,w], [k,c,r,s], [n,k,h,w] */
    tfc_graph *g;
    tfc_tensor *px, *pw, *pdy;           /* placeholders */
    tfc_tensor *node[N_DIRS];
    tfc_value *vx, *vw, *vdy;
};

static tfc_value *value_of(const float *data, int rank, const int64_t *dims)
{
    tfc_value *v;
    if (tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(rank, dims), data, &v))
        die("value", tfc_errmsg());
    return v;
}

static void case_create(struct conv_case *cc, const struct layer *l, int n, uint64_t seed)
{
    int64_t dx[4] = {n, l->c, l->h, l->w}, dw[4] = {l->k, l->c, l->r, l->s},
            ddy[4] = {n, l->k, l->h, l->w};
    size_t nx = (size_t)n * l->c * l->h * l->w, nw = (size_t)l->k * l->c * l->r * l->s,
           ndy = (size_t)n * l->k * l->h * l->w;
    *cc = (struct conv_case){.l = l, .n = n};
    cc->x = malloc(nx * sizeof(float)), cc->w = malloc(nw * sizeof(float));
    cc->dy = malloc(ndy * sizeof(float));
    if (!cc->x || !cc->w || !cc->dy) die("memory", "out of memory for the layer's data");
    fill_random(cc->x, nx, &seed), fill_random(cc->w, nw, &seed), fill_random(cc->dy, ndy, &seed);
    tfc_conv_params p = {.pads_begin = {l->pad, l->pad}, .pads_end = {l->pad, l->pad}};
    tfc_graph_create(&cc->g);
    cc->px = tfc_placeholder(cc->g, "x", TFC_FLOAT32, tfc_shape_of(4, dx));
    cc->pw = tfc_placeholder(cc->g, "w", TFC_FLOAT32, tfc_shape_of(4, dw));
    cc->pdy = tfc_placeholder(cc->g, "dy", TFC_FLOAT32, tfc_shape_of(4, ddy));
    cc->node[FWD] = tfc_conv(cc->g, cc->px, cc->pw, &p);
    cc->node[BWD_INPUT] = tfc_conv_backprop_input(cc->g, cc->pdy, cc->pw, cc->px, &p);
    cc->node[BWD_FILTER] = tfc_conv_backprop_filter(cc->g, cc->px, cc->pdy, cc->pw, &p);
    if (tfc_graph_status(cc->g)) die(l->name, tfc_graph_errmsg(cc->g));
    cc->vx = value_of(cc->x, 4, dx), cc->vw = value_of(cc->w, 4, dw);
    cc->vdy = value_of(cc->dy, 4, ddy);
}

static void case_destroy(struct conv_case *cc)
{
    tfc_value_destroy(cc->vx), tfc_value_destroy(cc->vw), tfc_value_destroy(cc->vdy);
    tfc_graph_destroy(cc->g);
    free(cc->x), free(cc->w), free(cc->dy);
}

/* Runs one direction's node, fetching it when out is not NULL; returns the seconds. All three
 * inputs are fed: each node reads the third for its shape (feeds are registered in place, not
 * copied). */
static double case_run(tfc_session *s, struct conv_case *cc, int d, tfc_value **out)
{
    tfc_tensor *feeds[3] = {cc->px, cc->pw, cc->pdy};
    tfc_value *values[3] = {cc->vx, cc->vw, cc->vdy};
    double t0 = bench_now();
    tfc_status st = out ? tfc_session_run(s, 3, feeds, values, 1, &cc->node[d], out, 0, NULL)
                        : tfc_session_run(s, 3, feeds, values, 0, NULL, NULL, 1, &cc->node[d]);
    if (st) die(dir_names[d], tfc_session_errmsg(s));
    return bench_now() - t0;
}

/* Element i of one direction's result as a float64 sum over its terms; *scale gets the sum of
 * the terms' magnitudes (what float32 rounding is relative to). Stride 1: output o reads
 * input o - pad + r. */
static double reference(const struct conv_case *cc, int d, size_t i, double *scale)
{
    const struct layer *l = cc->l;
    int H = l->h, W = l->w, P = l->pad;
    double sum = 0;
    *scale = 0;
#define TERM(a, b) \
    do { double t_ = (double)(a) * (double)(b); sum += t_, *scale += fabs(t_); } while (0)
    if (d == FWD) { /* y[n,k,oh,ow] */
        int ow = (int)(i % W), oh = (int)(i / W % H), k = (int)(i / W / H % l->k);
        int n = (int)(i / W / H / l->k);
        for (int c = 0; c < l->c; c++)
            for (int r = 0; r < l->r; r++)
                for (int s = 0; s < l->s; s++) {
                    int ih = oh - P + r, iw = ow - P + s;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    TERM(cc->x[(((size_t)n * l->c + c) * H + ih) * W + iw],
                         cc->w[(((size_t)k * l->c + c) * l->r + r) * l->s + s]);
                }
    } else if (d == BWD_INPUT) { /* dx[n,c,ih,iw] */
        int iw = (int)(i % W), ih = (int)(i / W % H), c = (int)(i / W / H % l->c);
        int n = (int)(i / W / H / l->c);
        for (int k = 0; k < l->k; k++)
            for (int r = 0; r < l->r; r++)
                for (int s = 0; s < l->s; s++) {
                    int oh = ih + P - r, ow = iw + P - s;
                    if (oh < 0 || oh >= H || ow < 0 || ow >= W) continue;
                    TERM(cc->dy[(((size_t)n * l->k + k) * H + oh) * W + ow],
                         cc->w[(((size_t)k * l->c + c) * l->r + r) * l->s + s]);
                }
    } else { /* dw[k,c,r,s] */
        int s = (int)(i % l->s), r = (int)(i / l->s % l->r), c = (int)(i / l->s / l->r % l->c);
        int k = (int)(i / l->s / l->r / l->c);
        for (int n = 0; n < cc->n; n++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    int ih = oh - P + r, iw = ow - P + s;
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    TERM(cc->dy[(((size_t)n * l->k + k) * H + oh) * W + ow],
                         cc->x[(((size_t)n * l->c + c) * H + ih) * W + iw]);
                }
    }
#undef TERM
    return sum;
}

/* Fetches each direction once and compares 97 sampled elements (the first, the last, the rest
 * spread by a stride prime to the sizes) with the float64 sums; returns the largest error
 * relative to the terms' magnitudes. */
static double case_check(tfc_session *s, struct conv_case *cc, int d)
{
    tfc_value *out = NULL;
    case_run(s, cc, d, &out);
    size_t numel = (size_t)tfc_value_numel(out), step = numel / 97 + 1;
    const float *y = tfc_value_cdata(out);
    double worst = 0;
    for (size_t j = 0; j < 97; j++) {
        size_t i = j == 96 ? numel - 1 : j * step * 7919 % numel;
        double scale, ref = reference(cc, d, i, &scale);
        double err = fabs((double)y[i] - ref) / (scale > 0 ? scale : 1);
        if (err > worst) worst = err;
    }
    tfc_value_destroy(out);
    return worst;
}

/* ---- the yardstick: one cblas_sgemm of the direction's im2col GEMM over the whole batch --- */

struct gemm {
    int m, n, k, ta, tb;
    float *a, *b, *c;
};

/* Forward w [K,CRS] col [CRS,N*HW]; backprop_input w^T dy [K,N*HW]; backprop_filter
 * dy [K,N*HW] col^T. Operands hold random values: only the time matters. */
static void gemm_create(struct gemm *q, const struct layer *l, int batch, int d, uint64_t seed)
{
    int crs = l->c * l->r * l->s, cols = batch * l->h * l->w;
    *q = (struct gemm){0};
    if (d == FWD) q->m = l->k, q->n = cols, q->k = crs;
    else if (d == BWD_INPUT) q->m = crs, q->n = cols, q->k = l->k, q->ta = 1;
    else q->m = l->k, q->n = crs, q->k = cols, q->tb = 1;
    q->a = malloc((size_t)q->m * q->k * sizeof(float));
    q->b = malloc((size_t)q->k * q->n * sizeof(float));
    q->c = malloc((size_t)q->m * q->n * sizeof(float));
    if (!q->a || !q->b || !q->c) die("memory", "out of memory for the sgemm operands");
    fill_random(q->a, (size_t)q->m * q->k, &seed), fill_random(q->b, (size_t)q->k * q->n, &seed);
}

static void gemm_destroy(struct gemm *q)
{
    free(q->a), free(q->b), free(q->c);
}

/* Seconds of one call on `threads` OpenBLAS threads with StarPU's workers paused (idle workers
 * poll: they would take the cores); then OpenBLAS goes back to the runtime's one thread and,
 * after a multi-thread call, the program sleeps settle_ms before resuming StarPU: OpenBLAS's
 * idle pool threads spin about 0.1 s after a call and would slow the next session run. */
static double gemm_run(const struct gemm *q, int threads, double settle_ms)
{
    starpu_pause();
    openblas_set_num_threads(threads);
    double t0 = bench_now();
    cblas_sgemm(CblasRowMajor, q->ta ? CblasTrans : CblasNoTrans,
                q->tb ? CblasTrans : CblasNoTrans, q->m, q->n, q->k, 1.0f, q->a,
                q->ta ? q->m : q->k, q->b, q->tb ? q->k : q->n, 0.0f, q->c, q->n);
    double t = bench_now() - t0;
    openblas_set_num_threads(1);
    if (threads > 1 && settle_ms > 0) {
        struct timespec ts = {(time_t)(settle_ms / 1e3),
                              (long)(fmod(settle_ms, 1e3) * 1e6)};
        nanosleep(&ts, NULL);
    }
    starpu_resume();
    return t;
}

/* ---- one layer: check, warm up, interleaved repeats --------------------------------------- */

/* Medians in seconds of the op and the sgemm per direction; the op's step share (the
 * directions a training step needs: conv1's input gradient is not one) goes to *step_s. */
static void time_layer(tfc_ctx *ctx, const struct options *o, const struct layer *l,
                       double *step_s, int *failed)
{
    struct conv_case cc;
    case_create(&cc, l, o->batch, 1234 + (uint64_t)(l - layers));
    tfc_session *s;
    if (tfc_session_create(ctx, cc.g, &s)) die("session", tfc_errmsg());
    struct gemm q[N_DIRS];
    double err[N_DIRS], *t_op = malloc(sizeof(double) * N_DIRS * (size_t)o->repeats);
    double *t_gemm = malloc(sizeof(double) * N_DIRS * (size_t)o->repeats);
    if (!t_op || !t_gemm) die("memory", "out of memory for the timings");
    for (int d = 0; d < N_DIRS; d++) {
        gemm_create(&q[d], l, o->batch, d, 99 + (uint64_t)d);
        err[d] = case_check(s, &cc, d);
        for (int i = 0; i < o->warmup; i++) {
            case_run(s, &cc, d, NULL);
            gemm_run(&q[d], o->workers, o->settle_ms);
        }
    }
    tfc_session_stats st0, st1;
    tfc_session_get_stats(s, &st0);
    for (int i = 0; i < o->repeats; i++)
        for (int d = 0; d < N_DIRS; d++) {
            t_op[d * o->repeats + i] = case_run(s, &cc, d, NULL);
            t_gemm[d * o->repeats + i] = gemm_run(&q[d], o->workers, o->settle_ms);
        }
    tfc_session_get_stats(s, &st1);
    double tasks = (double)(st1.tasks - st0.tasks) / (N_DIRS * (double)o->repeats);
    double flop = 2.0 * o->batch * l->k * l->c * l->r * l->s * l->h * l->w;
    for (int d = 0; d < N_DIRS; d++) {
        double op = bench_median(t_op + d * o->repeats, o->repeats);
        double ref = bench_median(t_gemm + d * o->repeats, o->repeats);
        double p10 = bench_quantile(t_op + d * o->repeats, o->repeats, 0.1);
        double p90 = bench_quantile(t_op + d * o->repeats, o->repeats, 0.9);
        if (!(err[d] < 1e-5)) *failed = 1;
        if (!(l == &layers[0] && d == BWD_INPUT)) *step_s += op;
        printf("conv_op layer=%s dir=%s workers=%d batch=%d ms=%.3f p10_ms=%.3f p90_ms=%.3f "
               "gflops=%.1f sgemm_ms=%.3f sgemm_gflops=%.1f ratio=%.2f sgemm_shape=%dx%dx%d%s%s "
               "tasks_per_run=%.1f max_rel_err=%.2g%s\n",
               l->name, dir_names[d], o->workers, o->batch, op * 1e3, p10 * 1e3, p90 * 1e3,
               flop / op * 1e-9, ref * 1e3, flop / ref * 1e-9, ref / op, q[d].m, q[d].n, q[d].k,
               q[d].ta ? ",A^T" : "", q[d].tb ? ",B^T" : "", tasks, err[d],
               err[d] < 1e-5 ? "" : " WRONG");
        gemm_destroy(&q[d]);
    }
    free(t_op), free(t_gemm);
    tfc_session_destroy(s);
    case_destroy(&cc);
}

int main(int argc, char **argv)
{
    struct options o;
    parse(argc, argv, &o);
    char ncpu[8];
    snprintf(ncpu, sizeof ncpu, "%d", o.workers);
    setenv("STARPU_NCPU", ncpu, 1);

    tfc_ctx *ctx;
    if (tfc_ctx_create(&ctx)) die("context", tfc_errmsg());
    tfc_ctx_info info;
    tfc_ctx_info_get(ctx, &info);
    double load[3];
    bench_load_average(load);
    printf("# conv_op: %d CPU workers, %d OpenCL, %d CUDA, scheduler %s; batch %d, %d warm-up "
           "runs and %d repeats per direction, interleaved with the sgemm on %d OpenBLAS "
           "thread%s; load average %.2f\n", info.n_cpu_workers, info.n_opencl_workers,
           info.n_cuda_workers, info.sched_policy, o.batch, o.warmup, o.repeats, o.workers,
           o.workers > 1 ? "s" : "", load[0]);
    int failed = 0;
    double step_s = 0;
    for (int i = 0; i < N_LAYERS; i++) time_layer(ctx, &o, &layers[i], &step_s, &failed);
    bench_load_average(load);
    printf("conv_op_step workers=%d batch=%d conv_ms=%.3f load_end=%.2f\n", o.workers, o.batch,
           step_s * 1e3, load[0]);
    tfc_ctx_destroy(ctx);
    if (failed) fprintf(stderr, "conv_op: a result differs from the float64 reference\n");
    return failed;
}
