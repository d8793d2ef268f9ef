/* conv_problem.h: what bench/conv_backends measures, shared by its backends: a convolution or
 * dense layer at one batch size with its inputs in plain layouts (NCHW, KCRS, row-major), the
 * three directions of a training step, and the interface every timed variant implements. */
#ifndef TFC_CONV_PROBLEM_H
#define TFC_CONV_PROBLEM_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum conv_dir { DIR_FWD, DIR_BWD_DATA, DIR_BWD_FILTER, N_DIRS };

static const char *const conv_dir_names[N_DIRS] = {"forward", "backward-data", "backward-filter"};

/* One convolution layer: NCHW activations, KCRS (OIHW) filters, the same stride and zero
 * padding on both axes. */
struct conv_shape {
    const char *name;
    int c, h, w;       /* input channels, height, width */
    int k, r, s;       /* output channels, filter height, width */
    int stride, pad;   /* in elements */
};

/* A layer at a batch with random inputs: x [n,c,h,w], w [k,c,r,s], dy [n,k,oh,ow]. Forward
 * makes y [n,k,oh,ow] from x and w, backward-data dx [n,c,h,w] from dy and w, backward-filter
 * dw [k,c,r,s] from x and dy. */
struct conv_problem {
    struct conv_shape sh;
    int n, oh, ow;
    float *x, *w, *dy;
};

/* A dense layer at a batch, row-major: x [b,in], w [in,out], dy [b,out]. Forward y = x w
 * [b,out], backward-data dx = dy w^T [b,in], backward-filter dw = x^T dy [in,out]. */
struct dense_problem {
    const char *name;
    int b, in, out;
    float *x, *w, *dy;
};

/* One way of computing one direction of one problem, set up once and then run many times.
 * fetch copies the last result, in the plain layout, to out (untimed). */
struct variant {
    char name[24];
    char impl[96];                     /* what the backend chose, or how it is threaded */
    int (*run)(void *st);              /* 0, or -1 with a message printed */
    int (*fetch)(void *st, float *out);
    void (*destroy)(void *st);
    void *st;
    int openblas_pool;                 /* runs multi-threaded OpenBLAS, whose idle threads
                                        * keep spinning for about 0.1 s afterwards */
    double flops;                      /* of one call, when not the problem's (a reference) */
};

/* Zeroed memory aligned for AVX-512 loads; exits when out of memory (a benchmark). */
static inline float *conv_alloc(size_t n_floats)
{
    size_t bytes = (n_floats * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p) {
        fprintf(stderr, "conv_backends: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

/* Uniform in [-1, 1) from a xorshift64* stream; never exactly zero in practice, so a kernel
 * that skips an input shows up in the error. */
static inline void conv_fill_random(float *v, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t x = *state;
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        *state = x;
        v[i] = (float)((double)((x * 0x2545F4914F6CDD1DULL) >> 11) * 0x1.0p-52 - 1.0);
    }
}

static inline int conv_out_size(int in, int r, int stride, int pad)
{
    return (in + 2 * pad - r) / stride + 1;
}

/* Elements of the result of direction d. */
static inline size_t conv_result_size(const struct conv_problem *p, enum conv_dir d)
{
    const struct conv_shape *s = &p->sh;
    if (d == DIR_FWD) return (size_t)p->n * s->k * p->oh * p->ow;
    if (d == DIR_BWD_DATA) return (size_t)p->n * s->c * s->h * s->w;
    return (size_t)s->k * s->c * s->r * s->s;
}

/* Every direction does the same multiply-adds: 2 n k c r s oh ow, padding included. */
static inline double conv_flops(const struct conv_problem *p)
{
    const struct conv_shape *s = &p->sh;
    return 2.0 * p->n * s->k * s->c * s->r * s->s * p->oh * p->ow;
}

static inline size_t dense_result_size(const struct dense_problem *p, enum conv_dir d)
{
    if (d == DIR_FWD) return (size_t)p->b * p->out;
    if (d == DIR_BWD_DATA) return (size_t)p->b * p->in;
    return (size_t)p->in * p->out;
}

static inline double dense_flops(const struct dense_problem *p)
{
    return 2.0 * p->b * p->in * p->out;
}

/* The largest of |o - r| / (|r| + 0.01 max|r|) over the result: relative error, with a floor
 * so that entries that cancel to almost zero do not dominate. */
static inline double conv_max_rel_error(const float *o, const double *r, size_t n)
{
    double rmax = 0, err = 0;
    for (size_t i = 0; i < n; i++)
        rmax = r[i] > rmax ? r[i] : -r[i] > rmax ? -r[i] : rmax;
    for (size_t i = 0; i < n; i++) {
        double d = (double)o[i] - r[i], a = r[i] < 0 ? -r[i] : r[i];
        double e = (d < 0 ? -d : d) / (a + 0.01 * rmax);
        if (!(e <= err)) err = e;   /* NaN counts as the largest error */
    }
    return err;
}

/* The share of n items that thread t of nt takes: [*lo, *hi). */
static inline void conv_split(int n, int nt, int t, int *lo, int *hi)
{
    *lo = (int)((long)n * t / nt);
    *hi = (int)((long)n * (t + 1) / nt);
}

#endif
