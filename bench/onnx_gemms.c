/* onnx_gemms.c: the imported MLP's inference products (784->256->128->10) on one thread, to
 * choose the matmul codelet's CPU path (issue 14, item 6): at batch 128 and at 64 (a half of
 * the batch per core) cblas_sgemm against libxsmm's JIT kernel (libxsmm_smmdispatch, beta 0);
 * at batch 1 (one row) cblas_sgemm against cblas_sgemv, with the imported CNN's dense layer
 * [1,3136]x[3136,1024] too. Row-major, no transposes (the codelet's case for these layers).
 * Each figure is the median over rounds of the thread's CPU time per call, a round timing
 * back-to-back calls over --block-ms. Usage: onnx_gemms [--rounds 9] [--block-ms 20] */
#include "config.h"
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "benchutil.h"
#ifdef TFC_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

struct prod {
    int m, k, n;
    float *A, *B, *C;
};

enum { SGEMM, XSMM, SGEMV };

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void call(int how, const struct prod *p, void *kernel)
{
    if (how == SGEMM)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->n, p->k, 1.0f, p->A,
                    p->k, p->B, p->n, 0.0f, p->C, p->n);
    else if (how == SGEMV) /* one row: C = B^T a */
        cblas_sgemv(CblasRowMajor, CblasTrans, p->k, p->n, 1.0f, p->B, p->n, p->A, 1, 0.0f,
                    p->C, 1);
#ifdef TFC_HAVE_LIBXSMM
    else /* row-major C = A B is column-major C^T = B^T A^T */
        ((libxsmm_smmfunction)kernel)(p->B, p->A, p->C);
#else
    (void)kernel;
#endif
}

/* The median over rounds of the CPU microseconds of one call. */
static double time_us(int how, const struct prod *p, void *kernel, int rounds, double block_ms)
{
    double *us = calloc((size_t)rounds, sizeof *us);
    call(how, p, kernel); /* warm the caches and the kernel */
    for (int r = 0; r < rounds; r++) {
        double t0 = cpu_now(), t = t0;
        long calls = 0;
        while ((t = cpu_now()) - t0 < block_ms * 1e-3 || calls == 0) {
            call(how, p, kernel);
            calls++;
        }
        us[r] = (t - t0) * 1e6 / (double)calls;
    }
    double med = bench_median(us, rounds);
    free(us);
    return med;
}

static float *filled(size_t n)
{
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return x;
}

int main(int argc, char **argv)
{
    int rounds = 9;
    double block_ms = 20;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--block-ms")) block_ms = atof(argv[i + 1]);
    if (rounds < 1 || block_ms <= 0) {
        fprintf(stderr, "usage: onnx_gemms [--rounds N >= 1] [--block-ms MS > 0]\n");
        return 2;
    }
    openblas_set_num_threads(1); /* as in a StarPU worker */
    static const int shapes[][3] = {{128, 784, 256}, {128, 256, 128}, {128, 128, 10},
                                    {64, 784, 256},  {64, 256, 128},  {64, 128, 10},
                                    {1, 784, 256},   {1, 256, 128},   {1, 128, 10},
                                    {1, 3136, 1024}, {1, 1024, 10}};
    printf("onnx_gemms: median of %d rounds of %.0f ms, thread CPU us per call\n", rounds,
           block_ms);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct prod p = {shapes[s][0], shapes[s][1], shapes[s][2], NULL, NULL, NULL};
        p.A = filled((size_t)p.m * p.k), p.B = filled((size_t)p.k * p.n);
        p.C = filled((size_t)p.m * p.n);
        if (!p.A || !p.B || !p.C) return 1;
        double base = time_us(SGEMM, &p, NULL, rounds, block_ms);
        printf("[%d,%d]x[%d,%d]: cblas_sgemm %.2f", p.m, p.k, p.k, p.n, base);
        if (p.m == 1) {
            double v = time_us(SGEMV, &p, NULL, rounds, block_ms);
            printf(", cblas_sgemv %.2f (sgemm / sgemv %.2f)", v, base / v);
        }
#ifdef TFC_HAVE_LIBXSMM
        float zero = 0.0f;
        libxsmm_smmfunction f = libxsmm_smmdispatch(p.n, p.m, p.k, NULL, NULL, NULL, NULL, &zero,
                                                    NULL, NULL);
        if (p.m > 1 && f) {
            double x = time_us(XSMM, &p, (void *)f, rounds, block_ms);
            printf(", libxsmm JIT %.2f (sgemm / libxsmm %.2f)", x, base / x);
        }
#endif
        printf("\n");
        free(p.A), free(p.B), free(p.C);
    }
    return 0;
}
