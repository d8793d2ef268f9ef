/* matmul_dnnl.c: the flagship MLP's dense layers (batch 128: 784->256, 256->128, 128->10) in
 * the three directions of a training step, on one thread: one cblas_sgemm with the transposes
 * as the library's matmul codelet passes them, against oneDNN's matmul primitive on the same
 * row-major buffers (transposes as strides; created once, one OpenMP thread), to decide
 * whether small dense matmuls should go to oneDNN too (issue 12: "the same measurement decides
 * small dense matmuls"). Rounds interleave the two in a rotated order; a sample is the mean of
 * back-to-back calls over --block-ms; figures are medians over rounds of the thread's CPU time
 * and of wall-clock. Usage: matmul_dnnl [--rounds 15] [--block-ms 20] */
#include "config.h"
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "benchutil.h"

#ifndef TFC_HAVE_DNNL
int main(void)
{
    fprintf(stderr, "matmul_dnnl: built without oneDNN (configure --with-dnnl)\n");
    return 77;
}
#else
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

static const struct { const char *name; int in, out; } layers[] = {
    {"dense1 784->256", 784, 256}, {"dense2 256->128", 256, 128}, {"logits 128->10", 128, 10}};
static const char *const dir_names[3] = {"forward y = x w", "backward-data dx = dy w^T",
                                         "backward-filter dw = x^T dy"};
#define BATCH 128

static dnnl_engine_t engine;
static dnnl_stream_t stream;

/* C[m,n] = op(A) op(B), row-major; op(A) is [m,k], op(B) [k,n]. */
struct gemm {
    int m, n, k, ta, tb;
    float *A, *B, *C, *C2;
    dnnl_primitive_t mm;
    dnnl_memory_t mem[3];
};

static float *rand_floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand() / RAND_MAX * 2 - 1;
    return p;
}

static void check(dnnl_status_t s, const char *what)
{
    if (s == dnnl_success) return;
    fprintf(stderr, "matmul_dnnl: oneDNN %s failed (%d)\n", what, (int)s);
    exit(1);
}

/* A [rows, cols] matrix stored row-major, or transposed (stored [cols, rows]). */
static void md_of(dnnl_memory_desc_t *md, int rows, int cols, int transposed)
{
    dnnl_dims_t dims = {rows, cols}, strides = {transposed ? 1 : cols, transposed ? rows : 1};
    check(dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides), "memory desc");
}

static void gemm_make(struct gemm *g, int m, int n, int k, int ta, int tb)
{
    *g = (struct gemm){.m = m, .n = n, .k = k, .ta = ta, .tb = tb};
    g->A = rand_floats((size_t)m * k), g->B = rand_floats((size_t)k * n);
    g->C = rand_floats((size_t)m * n), g->C2 = rand_floats((size_t)m * n);
    dnnl_memory_desc_t md[3];
    md_of(&md[0], m, k, ta), md_of(&md[1], k, n, tb), md_of(&md[2], m, n, 0);
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    check(dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2]), "matmul desc");
    check(dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL), "matmul pd");
    check(dnnl_primitive_create(&g->mm, pd), "matmul");
    dnnl_primitive_desc_destroy(pd);
    float *bufs[3] = {g->A, g->B, g->C2};
    for (int i = 0; i < 3; i++) check(dnnl_memory_create(&g->mem[i], &md[i], engine, bufs[i]), "memory");
}

static void gemm_free(struct gemm *g)
{
    for (int i = 0; i < 3; i++) dnnl_memory_destroy(g->mem[i]);
    dnnl_primitive_destroy(g->mm);
    free(g->A), free(g->B), free(g->C), free(g->C2);
}

static void run(struct gemm *g, int dnnl)
{
    if (!dnnl) {
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, g->m, g->n, g->k, 1.0f, g->A,
                    g->ta ? g->m : g->k, g->B, g->tb ? g->k : g->n, 0.0f, g->C, g->n);
        return;
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, g->mem[0]}, {DNNL_ARG_WEIGHTS, g->mem[1]},
                               {DNNL_ARG_DST, g->mem[2]}};
    check(dnnl_primitive_execute(g->mm, stream, 3, args), "execute");
    check(dnnl_stream_wait(stream), "stream wait");
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sample(struct gemm *g, int dnnl, double block_s, double *wall, double *cpu)
{
    run(g, dnnl);
    int calls = 0;
    double t0 = bench_now(), c0 = cpu_now(), t;
    do {
        run(g, dnnl);
        calls++;
    } while ((t = bench_now() - t0) < block_s);
    *wall = t / calls, *cpu = (cpu_now() - c0) / calls;
}

static void bench_one(int li, int dir, int rounds, double block_s)
{
    int in = layers[li].in, out = layers[li].out;
    struct gemm g; /* fwd x[B,in] w[in,out]; bwd-data dy[B,out] w^T; bwd-filter x^T dy[B,out] */
    if (dir == 0) gemm_make(&g, BATCH, out, in, 0, 0);
    else if (dir == 1) gemm_make(&g, BATCH, in, out, 0, 1);
    else gemm_make(&g, in, out, BATCH, 1, 0);
    run(&g, 0), run(&g, 1);
    double diff = 0, big = 1e-30;
    for (size_t i = 0; i < (size_t)g.m * g.n; i++)
        diff = fmax(diff, fabs((double)g.C[i] - g.C2[i])), big = fmax(big, fabs((double)g.C[i]));
    if (diff / big > 1e-4) {
        fprintf(stderr, "matmul_dnnl: %s %s: oneDNN differs by %.3g\n", layers[li].name,
                dir_names[dir], diff / big);
        exit(1);
    }
    double w[2][64], c[2][64];
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < 2; j++) {
            int v = (j + r) % 2;
            sample(&g, v, block_s, &w[v][r], &c[v][r]);
        }
    double mw[2], mc[2], flops = 2.0 * g.m * g.n * g.k;
    for (int v = 0; v < 2; v++) mw[v] = bench_median(w[v], rounds), mc[v] = bench_median(c[v], rounds);
    printf("| %s | %s | %d x %d x %d | %.1f us, %.0f | %.1f us, %.0f | %.2f | %.2f |\n",
           layers[li].name, dir_names[dir], g.m, g.n, g.k, mc[0] * 1e6, flops / mc[0] * 1e-9,
           mc[1] * 1e6, flops / mc[1] * 1e-9, mc[0] / mc[1], mw[0] / mw[1]);
    fflush(stdout);
    gemm_free(&g);
}

int main(int argc, char **argv)
{
    int rounds = 15;
    double block_ms = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-ms")) block_ms = atof(argv[i + 1]);
    }
    if (rounds < 1 || rounds > 64) rounds = 15;
    openblas_set_num_threads(1);
    omp_set_num_threads(1); /* as in a StarPU worker (codelets/conv_dnnl.c) */
    check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine");
    check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream");
    srand(7);
    printf("one thread, batch %d; CPU time per call and GFLOP/s, medians of %d rounds\n\n",
           BATCH, rounds);
    printf("| layer | direction | m x n x k | cblas_sgemm | oneDNN matmul | sgemm / oneDNN "
           "(CPU) | (wall) |\n|---|---|---|---|---|---|---|\n");
    for (int li = 0; li < 3; li++)
        for (int dir = 0; dir < 3; dir++) bench_one(li, dir, rounds, block_ms * 1e-3);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
#endif
