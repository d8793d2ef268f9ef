/* matmul_small.c: the small dense products the float32 CPU matmul codelet sees, on one thread:
 * cblas_sgemm against libxsmm's JIT kernel (libxsmm_smmdispatch with beta 0 and the transposes
 * as flags, dispatched once per shape) and oneDNN's matmul primitive (created once per shape,
 * transposes as strides, one OpenMP thread), to choose the codelet's path (issue 14 item 6,
 * issue 12 item 2). Shapes: the imported MLP's inference products at row blocks of 128 and 64,
 * the flagship MLP's training products (batch 128: forward NN, input gradient NT, filter
 * gradient TN), the CNN's dense layers (3136->1024, 1024->10) in the same three directions,
 * and one TT. Every backend is checked against sgemm first (its output buffer filled with NaN:
 * beta 0 must not read it; the largest difference relative to the largest output is printed
 * and must stay under 1e-5). Rounds rotate the backends; a sample is the mean thread CPU time
 * of back-to-back calls over --block-ms; figures are medians over rounds.
 * Usage: matmul_small [--rounds 7] [--block-ms 20] */
#include "config.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "benchutil.h"
#ifdef TFC_HAVE_LIBXSMM
#include <libxsmm.h>
#endif
#ifdef TFC_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

enum { SGEMM, XSMM, DNNL, NBACK };
static const char *const back_names[NBACK] = {"cblas_sgemm", "libxsmm JIT", "oneDNN matmul"};

/* C[m,n] = op(A) op(B), row-major; A is [m,k] or [k,m] (ta), B [k,n] or [n,k] (tb). */
struct gemm {
    const char *what;
    int m, n, k, ta, tb;
    float *A, *B, *C;
    void *xsmm; /* libxsmm_smmfunction or NULL (not generated) */
#ifdef TFC_HAVE_DNNL
    dnnl_primitive_t mm;
    dnnl_memory_t mem[3];
#endif
    int have[NBACK];
    double diff[NBACK]; /* max |C - sgemm's C| / max |sgemm's C| */
};

static const struct gemm shapes[] = {
    {.what = "imported MLP dense1, 128 rows", .m = 128, .n = 256, .k = 784, .ta = 0, .tb = 0},
    {.what = "imported MLP dense2, 128 rows", .m = 128, .n = 128, .k = 256, .ta = 0, .tb = 0},
    {.what = "imported MLP logits, 128 rows", .m = 128, .n = 10, .k = 128, .ta = 0, .tb = 0},
    {.what = "imported MLP dense1, 64 rows", .m = 64, .n = 256, .k = 784, .ta = 0, .tb = 0},
    {.what = "imported MLP dense2, 64 rows", .m = 64, .n = 128, .k = 256, .ta = 0, .tb = 0},
    {.what = "imported MLP logits, 64 rows", .m = 64, .n = 10, .k = 128, .ta = 0, .tb = 0},
    {.what = "MLP dense2 dx = dy w^T", .m = 128, .n = 256, .k = 128, .ta = 0, .tb = 1},
    {.what = "MLP logits dx = dy w^T", .m = 128, .n = 128, .k = 10, .ta = 0, .tb = 1},
    {.what = "MLP dense1 dw = x^T dy", .m = 784, .n = 256, .k = 128, .ta = 1, .tb = 0},
    {.what = "MLP dense2 dw = x^T dy", .m = 256, .n = 128, .k = 128, .ta = 1, .tb = 0},
    {.what = "MLP logits dw = x^T dy", .m = 128, .n = 10, .k = 128, .ta = 1, .tb = 0},
    {.what = "CNN dense y = x w", .m = 128, .n = 1024, .k = 3136, .ta = 0, .tb = 0},
    {.what = "CNN logits y = x w", .m = 128, .n = 10, .k = 1024, .ta = 0, .tb = 0},
    {.what = "CNN dense dx = dy w^T", .m = 128, .n = 3136, .k = 1024, .ta = 0, .tb = 1},
    {.what = "CNN logits dx = dy w^T", .m = 128, .n = 1024, .k = 10, .ta = 0, .tb = 1},
    {.what = "CNN dense dw = x^T dy", .m = 3136, .n = 1024, .k = 128, .ta = 1, .tb = 0},
    {.what = "CNN logits dw = x^T dy", .m = 1024, .n = 10, .k = 128, .ta = 1, .tb = 0},
    {.what = "TT, MLP dense2's size", .m = 128, .n = 128, .k = 256, .ta = 1, .tb = 1},
};

#ifdef TFC_HAVE_DNNL
static dnnl_engine_t engine;
static dnnl_stream_t stream;

static int ok(dnnl_status_t s)
{
    return s == dnnl_success;
}

/* A [rows, cols] operand stored row-major, or transposed (stored [cols, rows]). */
static int md_of(dnnl_memory_desc_t *md, int rows, int cols, int transposed)
{
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : cols, transposed ? rows : 1};
    return ok(dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides));
}

static int dnnl_make(struct gemm *g)
{
    dnnl_memory_desc_t md[3];
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    if (!md_of(&md[0], g->m, g->k, g->ta) || !md_of(&md[1], g->k, g->n, g->tb) ||
        !md_of(&md[2], g->m, g->n, 0) ||
        !ok(dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2])) ||
        !ok(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL)))
        return 0;
    int made = ok(dnnl_primitive_create(&g->mm, pd));
    dnnl_primitive_desc_destroy(pd);
    float *bufs[3] = {g->A, g->B, g->C};
    for (int i = 0; made && i < 3; i++)
        made = ok(dnnl_memory_create(&g->mem[i], &md[i], engine, bufs[i]));
    return made;
}
#endif

static void run(struct gemm *g, int how)
{
    int lda = g->ta ? g->m : g->k, ldb = g->tb ? g->k : g->n;
    if (how == SGEMM)
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f, g->A, lda, g->B,
                    ldb, 0.0f, g->C, g->n);
#ifdef TFC_HAVE_LIBXSMM
    else if (how == XSMM) /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
        ((libxsmm_smmfunction)g->xsmm)(g->B, g->A, g->C);
#endif
#ifdef TFC_HAVE_DNNL
    else if (how == DNNL) {
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, g->mem[0]}, {DNNL_ARG_WEIGHTS, g->mem[1]},
                                   {DNNL_ARG_DST, g->mem[2]}};
        dnnl_primitive_execute(g->mm, stream, 3, args);
        dnnl_stream_wait(stream);
    }
#endif
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double sample_us(struct gemm *g, int how, double block_s)
{
    run(g, how);
    long calls = 0;
    double c0 = cpu_now(), t;
    do {
        run(g, how);
        calls++;
    } while ((t = cpu_now() - c0) < block_s);
    return t / (double)calls * 1e6;
}

static float *rand_floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) p[i] = (float)rand() / (float)RAND_MAX * 2 - 1;
    return p;
}

/* Makes each backend that can run g and checks it against sgemm (relative max difference
 * 1e-5 of the largest output; NaN in the output before the call must not survive). */
static void prepare(struct gemm *g)
{
    size_t mn = (size_t)g->m * g->n;
    g->A = rand_floats((size_t)g->m * g->k), g->B = rand_floats((size_t)g->k * g->n);
    g->C = malloc(mn * sizeof *g->C);
    float *ref = malloc(mn * sizeof *ref);
    if (!g->A || !g->B || !g->C || !ref) exit(1);
    g->have[SGEMM] = 1;
#ifdef TFC_HAVE_LIBXSMM
    float zero = 0.0f, one = 1.0f;
    int flags = (g->tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (g->ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
    libxsmm_blasint lda = g->tb ? g->k : g->n, ldb = g->ta ? g->m : g->k, ldc = g->n;
    g->xsmm = (void *)libxsmm_smmdispatch(g->n, g->m, g->k, &lda, &ldb, &ldc, &one, &zero,
                                          &flags, NULL);
    g->have[XSMM] = g->xsmm != NULL;
#endif
#ifdef TFC_HAVE_DNNL
    g->have[DNNL] = dnnl_make(g);
#endif
    run(g, SGEMM);
    memcpy(ref, g->C, mn * sizeof *ref);
    double big = 1e-30;
    for (size_t i = 0; i < mn; i++) big = fmax(big, fabs((double)ref[i]));
    for (int b = 1; b < NBACK; b++) {
        if (!g->have[b]) continue;
        for (size_t i = 0; i < mn; i++) g->C[i] = NAN;
        run(g, b);
        double diff = 0;
        for (size_t i = 0; i < mn; i++) {
            double d = fabs((double)g->C[i] - ref[i]);
            diff = isnan(d) ? INFINITY : fmax(diff, d);
        }
        g->diff[b] = diff / big;
        if (diff / big > 1e-5) {
            fprintf(stderr, "matmul_small: %s: %s differs from sgemm by %.3g\n", g->what,
                    back_names[b], diff / big);
            exit(1);
        }
    }
    free(ref);
}

static void bench_one(struct gemm *g, int rounds, double block_s)
{
    double us[NBACK][64], med[NBACK];
    prepare(g);
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < NBACK; j++) {
            int b = (j + r) % NBACK;
            if (g->have[b]) us[b][r] = sample_us(g, b, block_s);
        }
    for (int b = 0; b < NBACK; b++) med[b] = g->have[b] ? bench_median(us[b], rounds) : 0;
    printf("| %s | %c%c | %d x %d x %d | %.1f |", g->what, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N',
           g->m, g->n, g->k, med[SGEMM]);
    for (int b = 1; b < NBACK; b++)
        if (g->have[b]) printf(" %.1f (%.2f) |", med[b], med[SGEMM] / med[b]);
        else printf(" - |");
    for (int b = 1; b < NBACK; b++)
        if (g->have[b]) printf(" %.1e |", g->diff[b]);
        else printf(" - |");
    printf("\n");
    fflush(stdout);
#ifdef TFC_HAVE_DNNL
    if (g->have[DNNL]) {
        for (int i = 0; i < 3; i++) dnnl_memory_destroy(g->mem[i]);
        dnnl_primitive_destroy(g->mm);
    }
#endif
    free(g->A), free(g->B), free(g->C);
}

int main(int argc, char **argv)
{
    int rounds = 7;
    double block_ms = 20;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-ms")) block_ms = atof(argv[i + 1]);
    if (rounds < 1 || rounds > 64 || block_ms <= 0) {
        fprintf(stderr, "usage: matmul_small [--rounds 1..64] [--block-ms MS > 0]\n");
        return 2;
    }
    openblas_set_num_threads(1); /* as in a StarPU worker */
#ifdef TFC_HAVE_DNNL
    omp_set_num_threads(1);
    if (!ok(dnnl_engine_create(&engine, dnnl_cpu, 0)) ||
        !ok(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags)))
        return 1;
#endif
    srand(7);
    printf("one thread; thread CPU us per call, medians of %d rotated rounds of %.0f ms; "
           "(sgemm / backend); the last two: max |C - sgemm's| / max |sgemm's C|\n\n"
           "| product | op | m x n x k | %s | %s | %s | libxsmm diff | oneDNN diff |\n"
           "|---|---|---|---|---|---|---|---|\n",
           rounds, block_ms, back_names[0], back_names[1], back_names[2]);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct gemm g = shapes[s];
        bench_one(&g, rounds, block_ms * 1e-3);
    }
#ifdef TFC_HAVE_DNNL
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
#endif
#ifdef TFC_HAVE_LIBXSMM
    libxsmm_finalize();
#endif
    return 0;
}
