/* benchutil.h: what the benchmark programs share: a monotonic clock and order statistics
 * (timings here vary about 25% run to run, so figures are medians of repeats). */
#ifndef TFC_BENCHUTIL_H
#define TFC_BENCHUTIL_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts v; its q-quantile by nearest rank (0 when n is 0). */
static inline double bench_quantile(double *v, int n, double q)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, bench_cmp);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* Sorts v; its median (the upper middle value for an even count). */
static inline double bench_median(double *v, int n)
{
    return bench_quantile(v, n, 0.5);
}

#ifdef BENCH_CBLAS
#include <cblas.h>
#include <starpu.h>
/* Seconds of one row-major float32 cblas_sgemm C[m,n] = A[m,k] B[k,n] on `threads` OpenBLAS
 * threads, StarPU's workers paused meanwhile (idle workers poll in a tight loop: they would
 * take the cores from OpenBLAS's threads); OpenBLAS goes back to one thread, the runtime's
 * setting inside tasks. */
static inline double bench_cblas_sgemm(const float *A, const float *B, float *C, int m, int k,
                                       int n, int threads)
{
    starpu_pause();
    openblas_set_num_threads(threads);
    double t0 = bench_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A, k, B, n, 0.0f, C,
                n);
    double t = bench_now() - t0;
    openblas_set_num_threads(1);
    starpu_resume();
    return t;
}
#endif

#endif
