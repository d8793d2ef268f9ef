/* benchutil.h: what the benchmark programs share: a monotonic clock and order statistics
 * (timings here vary about 25% run to run, so figures are medians of repeats), the load
 * average, and (BENCH_CBLAS) a cblas reference and one matmul node to time against it. */
#ifndef TFC_BENCHUTIL_H
#define TFC_BENCHUTIL_H

#include <stdio.h>
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
#include <math.h>
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

/* One float32 matmul node c = a @ b over placeholders a [m, k] and b [k, n], fed with copies of
 * A and B: what bench/tiled_matmul and bench/split_k time in sessions with and without tiling.
 * Failures print a message and exit. */
struct bench_matmul {
    tfc_graph *g;
    tfc_tensor *c;
    tfc_tensor *feeds[2];
    tfc_value *values[2];
};

static inline void bench_matmul_create(struct bench_matmul *mm, const float *A, const float *B,
                                       int m, int k, int n)
{
    int64_t da[2] = {m, k}, db[2] = {k, n};
    tfc_graph_create(&mm->g);
    mm->feeds[0] = tfc_placeholder(mm->g, "a", TFC_FLOAT32, tfc_shape_of(2, da));
    mm->feeds[1] = tfc_placeholder(mm->g, "b", TFC_FLOAT32, tfc_shape_of(2, db));
    mm->c = tfc_matmul(mm->g, mm->feeds[0], mm->feeds[1], 0, 0);
    if (tfc_graph_status(mm->g) ||
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, da), A, &mm->values[0]) ||
        tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, db), B, &mm->values[1])) {
        fprintf(stderr, "setup: %s\n", tfc_errmsg());
        exit(1);
    }
}

static inline void bench_matmul_destroy(struct bench_matmul *mm)
{
    tfc_value_destroy(mm->values[0]);
    tfc_value_destroy(mm->values[1]);
    tfc_graph_destroy(mm->g);
}

/* Seconds of one run of s targeting the node (no fetch: no copy-out). */
static inline double bench_matmul_run(tfc_session *s, struct bench_matmul *mm)
{
    double t0 = bench_now();
    if (tfc_session_run(s, 2, mm->feeds, mm->values, 0, NULL, NULL, 1, &mm->c)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    return bench_now() - t0;
}

/* Runs the node once in s, fetching it: returns the tasks the run took (from the session's
 * counters) and sets *err to the largest relative error against one 2-thread cblas_sgemm,
 * whose result goes to R. */
static inline int bench_matmul_check(tfc_session *s, struct bench_matmul *mm, const float *A,
                                     const float *B, float *R, int m, int k, int n, double *err)
{
    tfc_session_stats st0, st1;
    tfc_session_get_stats(s, &st0);
    tfc_value *out = NULL;
    if (tfc_session_run(s, 2, mm->feeds, mm->values, 1, &mm->c, &out, 0, NULL)) {
        fprintf(stderr, "run: %s\n", tfc_session_errmsg(s));
        exit(1);
    }
    tfc_session_get_stats(s, &st1);
    bench_cblas_sgemm(A, B, R, m, k, n, 2);
    const float *O = tfc_value_cdata(out);
    *err = 0;
    for (size_t i = 0; i < (size_t)m * (size_t)n; i++)
        *err = fmax(*err, fabs(O[i] - R[i]) / (1 + fabs(R[i])));
    tfc_value_destroy(out);
    return (int)(st1.tasks - st0.tasks);
}
#endif

/* The 1-, 5- and 15-minute load averages (-1 when /proc/loadavg cannot be read): how busy the
 * shared machine was, printed beside timings. */
static inline void bench_load_average(double load[3])
{
    load[0] = load[1] = load[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    fclose(f);
}

#endif
