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

#endif
