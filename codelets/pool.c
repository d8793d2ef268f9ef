/* pool.c: CPU kernels of max and average pooling over 1-3 spatial dims and of their gradient
 * ops (max_pool_grad scatters dy to the argmax, max_pool_gather takes x at the argmax,
 * avg_pool_grad spreads dy over each window). Every tensor is [N, C, spatial...]; a plane is one
 * image-channel. The window geometry is pool_geom.h, shared with the other devices. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"
#include "bcast.h"
#include "pool_geom.h"
#include "ew_vexpf.h" /* TFC_EW_VECTOR_CLONES */
#include "opencl_common.h" /* tfc_opencl_can_execute */
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
void tfc_pool_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_pool.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_pool_cuda(void *buffers[], void *cl_arg); /* codelets/pool_cuda.cu */
#endif

/* Pooling of one plane: out[o] = max or mean of its window; for max, arg[o] is the flat index
 * of the maximum in the plane (the first in row-major window order on ties; a NaN wins), or -1
 * for a window of padding only (its value is then -inf). */
static void pool_plane(const struct tfc_pool_geom *g, int is_max, int dt, const void *x,
                       int64_t xoff, void *y, int64_t yoff, int64_t *arg)
{
    int64_t o[3], lo[3], j[3];
    for (o[0] = 0; o[0] < g->out[0]; o[0]++)
        for (o[1] = 0; o[1] < g->out[1]; o[1]++)
            for (o[2] = 0; o[2] < g->out[2]; o[2]++) {
                for (int i = 0; i < 3; i++) lo[i] = tfc_pool_win_lo(g, i, o[i]);
                double acc = is_max ? -INFINITY : 0;
                int64_t best = -1;
                for (j[0] = 0; j[0] < g->k[0]; j[0]++)
                    for (j[1] = 0; j[1] < g->k[1]; j[1]++)
                        for (j[2] = 0; j[2] < g->k[2]; j[2]++) {
                            int64_t at = 0, ok = 1;
                            for (int i = 0; i < 3; i++) {
                                int64_t p = lo[i] + j[i] * g->d[i];
                                ok &= p >= 0 && p < g->in[i];
                                at = at * g->in[i] + p;
                            }
                            if (!ok) continue;
                            double v = tfc_load_f64(x, dt, xoff + at);
                            if (!is_max)
                                acc += v;
                            else if (best < 0 || v > acc || (isnan(v) && !isnan(acc)))
                                acc = v, best = at;
                        }
                int64_t q = (o[0] * g->out[1] + o[1]) * g->out[2] + o[2];
                if (!is_max) {
                    int64_t n = tfc_pool_divisor(g, lo);
                    acc = n ? acc / (double)n : 0;
                } else if (arg) {
                    arg[yoff + q] = best;
                }
                tfc_store_f64(y, dt, yoff + q, acc);
            }
}

/* avg_pool_grad of one plane: dx[i] += dy[o] / divisor(o) for each tap i of window o,
 * accumulated in double. Returns -1 when out of memory. */
static int avg_grad_plane(const struct tfc_pool_geom *g, int dt, const void *dy, int64_t yoff,
                           void *dx, int64_t xoff)
{
    int64_t o[3], lo[3], j[3], n_in = tfc_pool_in_size(g);
    double *acc = calloc((size_t)(n_in ? n_in : 1), sizeof *acc);
    if (!acc) return -1;
    for (o[0] = 0; o[0] < g->out[0]; o[0]++)
        for (o[1] = 0; o[1] < g->out[1]; o[1]++)
            for (o[2] = 0; o[2] < g->out[2]; o[2]++) {
                for (int i = 0; i < 3; i++) lo[i] = tfc_pool_win_lo(g, i, o[i]);
                int64_t n = tfc_pool_divisor(g, lo);
                int64_t q = (o[0] * g->out[1] + o[1]) * g->out[2] + o[2];
                double share = n ? tfc_load_f64(dy, dt, yoff + q) / (double)n : 0;
                for (j[0] = 0; j[0] < g->k[0]; j[0]++)
                    for (j[1] = 0; j[1] < g->k[1]; j[1]++)
                        for (j[2] = 0; j[2] < g->k[2]; j[2]++) {
                            int64_t at = 0, ok = 1;
                            for (int i = 0; i < 3; i++) {
                                int64_t p = lo[i] + j[i];
                                ok &= p >= 0 && p < g->in[i];
                                at = at * g->in[i] + p;
                            }
                            if (ok) acc[at] += share;
                        }
            }
    for (int64_t i = 0; i < n_in; i++) tfc_store_f64(dx, dt, xoff + i, acc[i]);
    free(acc);
    return 0;
}

/* ---- The fast path: 1-D or 2-D pooling of float or double without dilation. The window of
 * an output is a rectangle of the plane clipped once per row and per column (no per-tap bounds
 * test or index decoding); taps are visited in the same row-major order and summed in double as
 * the generic path does, so values, indices and ties are bit-identical to it. */

/* A 1-D or 2-D plane (dim 0 of the geometry is unit) with dilation 1, of float or double. */
static int pool_fast_case(const struct tfc_pool_geom *g, int dt)
{
    return (dt == TFC_FLOAT32 || dt == TFC_FLOAT64) && g->in[0] == 1 && g->out[0] == 1 &&
           g->k[0] == 1 && g->pb[0] == 0 && g->d[1] == 1 && g->d[2] == 1;
}

static inline double fast_ld(const void *p, int f32, int64_t i)
{
    return f32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}

static inline void fast_st(void *p, int f32, int64_t i, double v)
{
    if (f32)
        ((float *)p)[i] = (float)v;
    else
        ((double *)p)[i] = v;
}

/* The taps [*a, *b) of window o along spatial dim i, clipped to the input. */
static inline void fast_span(const struct tfc_pool_geom *g, int i, int64_t o, int64_t *a,
                             int64_t *b)
{
    int64_t lo = tfc_pool_win_lo(g, i, o), hi = lo + g->k[i];
    *a = lo < 0 ? 0 : lo;
    *b = hi > g->in[i] ? g->in[i] : hi;
}

/* Max of one window, the rule of pool_plane: the first tap, then a greater value or a NaN over a
 * number. Returns the flat index of the maximum (-1 for an empty window) and sets *acc. */
static inline int64_t fast_max_window(const void *x, int f32, int64_t W, int64_t ha, int64_t hb,
                                      int64_t wa, int64_t wb, double *acc)
{
    double m = -INFINITY;
    int64_t best = -1;
    for (int64_t h = ha; h < hb; h++)
        for (int64_t w = wa, at = h * W + wa; w < wb; w++, at++) {
            double v = fast_ld(x, f32, at);
            if (best < 0 || v > m || (isnan(v) && !isnan(m))) m = v, best = at;
        }
    *acc = m;
    return best;
}

/* One tap of a max after the first, without branches (random data mispredicts them): a greater
 * value or a NaN over a number takes the place, i.e. any v not <= a max that is not NaN (two
 * compares instead of three: half the time of the 2x2 window). */
static inline void fast_max_step(double v, int64_t at, double *m, int64_t *best)
{
    uint64_t take = (uint64_t)0 - (uint64_t)(!(v <= *m) & (*m == *m)), vb, mb;
    memcpy(&vb, &v, sizeof vb); /* a select on the bits: GCC branches on a ?: of doubles */
    memcpy(&mb, m, sizeof mb);
    mb = (vb & take) | (mb & ~take);
    memcpy(m, &mb, sizeof mb);
    *best = (int64_t)(((uint64_t)at & take) | ((uint64_t)*best & ~take));
}

/* The 2x2 window at (h, w), all inside: the common case of CNNs, unrolled. */
static inline int64_t fast_max_2x2(const void *x, int f32, int64_t W, int64_t h, int64_t w,
                                   double *acc)
{
    int64_t at = h * W + w, best = at;
    double m = fast_ld(x, f32, at);
    fast_max_step(fast_ld(x, f32, at + 1), at + 1, &m, &best);
    fast_max_step(fast_ld(x, f32, at + W), at + W, &m, &best);
    fast_max_step(fast_ld(x, f32, at + W + 1), at + W + 1, &m, &best);
    *acc = m;
    return best;
}

/* One tap of a float max after the first: fast_max_step's rule on floats (a float's compares
 * are those of its double, and a float max stored as float is the same bits). */
static inline void f32_max_step(float v, int64_t at, float *m, int64_t *best)
{
    int take = !(v <= *m) & (*m == *m);
    *m = take ? v : *m;
    *best = take ? at : *best;
}

/* The float 2x2 windows of stride 2 along one output row, one window at a time: rows r0 and r1
 * of the input, windows [w0, w1) of the row, every tap inside; at0 is the flat index of r0[0].
 * The same values and indices as through doubles (f32_max_step). */
static void f32_max_2x2_scalar(const float *r0, const float *r1, int64_t at0, int64_t W,
                               int64_t w0, int64_t w1, float *y, int64_t *arg)
{
    for (int64_t ow = w0; ow < w1; ow++) {
        int64_t c = 2 * ow, best = at0 + c;
        float m = r0[c];
        f32_max_step(r0[c + 1], at0 + c + 1, &m, &best);
        f32_max_step(r1[c], at0 + W + c, &m, &best);
        f32_max_step(r1[c + 1], at0 + W + c + 1, &m, &best);
        y[ow] = m;
        if (arg) arg[ow] = best;
    }
}

/* N windows from ow side by side (vector types of gcc and clang: one register per row of taps on
 * AVX-512 and AVX2, two SSE2 halves on the baseline): the taps' even and odd columns split by
 * shuffles, then f32_max_step's rule per lane on the bits (take v where !(v <= m) and m is not
 * NaN), tap for tap in the same order, so values, ties and NaNs match the scalar loop. The
 * index is kept as the tap (0-3) and turned into the flat index at the end. Vectors go by
 * pointer (no vector arguments: the baseline ABI differs). */
#define F32_MAX_2X2_LANES(N, EVEN, ODD)                                                       \
    typedef float f32x##N __attribute__((vector_size(4 * N)));                               \
    typedef int32_t i32x##N __attribute__((vector_size(4 * N)));                             \
    typedef int64_t i64x##N __attribute__((vector_size(8 * N)));                             \
    static inline void f32x##N##_step(const f32x##N *v, int32_t tap, f32x##N *m,              \
                                      i32x##N *best)                                          \
    {                                                                                         \
        i32x##N take = ~(*v <= *m) & (*m == *m);                                              \
        *m = (f32x##N)(((i32x##N)*v & take) | ((i32x##N)*m & ~take));                         \
        *best = (take & tap) | (*best & ~take);                                               \
    }                                                                                         \
    static inline void f32_max_2x2_x##N(const float *r0, const float *r1, int64_t at0,        \
                                        int64_t W, int64_t ow, float *y, int64_t *arg)        \
    {                                                                                         \
        f32x##N a0, a1, b0, b1, m, t;                                                         \
        i32x##N best = {0};                                                                   \
        memcpy(&a0, r0 + 2 * ow, sizeof a0), memcpy(&a1, r0 + 2 * ow + N, sizeof a1);         \
        memcpy(&b0, r1 + 2 * ow, sizeof b0), memcpy(&b1, r1 + 2 * ow + N, sizeof b1);         \
        m = __builtin_shufflevector(a0, a1, EVEN);                                            \
        t = __builtin_shufflevector(a0, a1, ODD), f32x##N##_step(&t, 1, &m, &best);           \
        t = __builtin_shufflevector(b0, b1, EVEN), f32x##N##_step(&t, 2, &m, &best);          \
        t = __builtin_shufflevector(b0, b1, ODD), f32x##N##_step(&t, 3, &m, &best);           \
        memcpy(y + ow, &m, sizeof m);                                                         \
        if (arg) {                                                                            \
            i64x##N tap = __builtin_convertvector(best, i64x##N), at = {0};                   \
            for (int l = 0; l < N; l++) at[l] = at0 + 2 * (ow + l);                           \
            at += (tap & 1) + (tap >> 1) * W;                                                 \
            memcpy(arg + ow, &at, sizeof at);                                                 \
        }                                                                                     \
    }
/* the even and odd lanes of two vectors (__builtin_shufflevector: gcc 12 and clang) */
#define POOL_EVEN8 0, 2, 4, 6, 8, 10, 12, 14
#define POOL_ODD8 1, 3, 5, 7, 9, 11, 13, 15
F32_MAX_2X2_LANES(8, POOL_EVEN8, POOL_ODD8)
#define POOL_EVEN4 0, 2, 4, 6
#define POOL_ODD4 1, 3, 5, 7
F32_MAX_2X2_LANES(4, POOL_EVEN4, POOL_ODD4)

/* The row in blocks of 8 windows (4 for rows of 4 to 7: pool2's 7), the last block placed to
 * end at w1 (it may redo windows of the one before: the same values); shorter rows one window
 * at a time. About 10x the scalar loop's speed on random data (whose compares mispredict). */
TFC_EW_VECTOR_CLONES static void f32_max_2x2_row(const float *r0, const float *r1, int64_t at0,
                                                 int64_t W, int64_t w0, int64_t w1, float *y,
                                                 int64_t *arg)
{
    int64_t n = w1 - w0, lanes = n >= 8 ? 8 : n >= 4 ? 4 : 0;
    if (!lanes) {
        f32_max_2x2_scalar(r0, r1, at0, W, w0, w1, y, arg);
        return;
    }
    for (int64_t ow = w0;; ow += lanes) {
        int64_t at = ow + lanes <= w1 ? ow : w1 - lanes;
        if (lanes == 8)
            f32_max_2x2_x8(r0, r1, at0, W, at, y, arg);
        else
            f32_max_2x2_x4(r0, r1, at0, W, at, y, arg);
        if (at + lanes >= w1) break;
    }
}

/* max_pool of one plane; x, y and arg point at the plane (arg may be NULL). */
static void fast_max_plane(const struct tfc_pool_geom *g, int f32, const void *x, void *y,
                           int64_t *arg)
{
    int64_t W = g->in[2], OW = g->out[2];
    int k22 = g->k[1] == 2 && g->k[2] == 2;
    /* float 2x2 of stride 2: the first ow_b windows of a row lie inside it */
    int f22 = f32 && k22 && g->s[2] == 2 && g->pb[2] == 0;
    int64_t ow_b = f22 ? (W / 2 < OW ? W / 2 : OW) : 0;
    for (int64_t oh = 0, q = 0; oh < g->out[1]; oh++) {
        int64_t ha, hb;
        fast_span(g, 1, oh, &ha, &hb);
        int64_t ow = 0;
        if (f22 && hb - ha == 2 && ow_b > 0) {
            const float *r0 = (const float *)x + ha * W;
            f32_max_2x2_row(r0, r0 + W, ha * W, W, 0, ow_b, (float *)y + q,
                            arg ? arg + q : NULL);
            ow = ow_b, q += ow_b;
        }
        for (; ow < OW; ow++, q++) {
            int64_t wa, wb, best;
            double m;
            fast_span(g, 2, ow, &wa, &wb);
            if (k22 && hb - ha == 2 && wb - wa == 2)
                best = fast_max_2x2(x, f32, W, ha, wa, &m);
            else
                best = fast_max_window(x, f32, W, ha, hb, wa, wb, &m);
            fast_st(y, f32, q, m);
            if (arg) arg[q] = best;
        }
    }
}

/* avg_pool of one plane: the taps' sum in double over tfc_pool_divisor, as pool_plane. */
static void fast_avg_plane(const struct tfc_pool_geom *g, int f32, const void *x, void *y)
{
    int64_t W = g->in[2], OW = g->out[2], lo[3] = {0, 0, 0};
    for (int64_t oh = 0, q = 0; oh < g->out[1]; oh++) {
        int64_t ha, hb;
        fast_span(g, 1, oh, &ha, &hb);
        lo[1] = tfc_pool_win_lo(g, 1, oh);
        for (int64_t ow = 0; ow < OW; ow++, q++) {
            int64_t wa, wb;
            fast_span(g, 2, ow, &wa, &wb);
            lo[2] = tfc_pool_win_lo(g, 2, ow);
            double acc = 0;
            for (int64_t h = ha; h < hb; h++)
                for (int64_t at = h * W + wa; at < h * W + wb; at++) acc += fast_ld(x, f32, at);
            int64_t n = tfc_pool_divisor(g, lo);
            fast_st(y, f32, q, n ? acc / (double)n : 0);
        }
    }
}

/* avg_pool_grad of one plane into the zeroed double buffer acc (the plane's size), then dx:
 * the shares are added in the generic path's order (outputs row-major, taps row-major). */
static void fast_avg_grad_plane(const struct tfc_pool_geom *g, int f32, const void *dy,
                                double *acc, void *dx)
{
    int64_t W = g->in[2], OW = g->out[2], lo[3] = {0, 0, 0};
    for (int64_t oh = 0, q = 0; oh < g->out[1]; oh++) {
        int64_t ha, hb;
        fast_span(g, 1, oh, &ha, &hb);
        lo[1] = tfc_pool_win_lo(g, 1, oh);
        for (int64_t ow = 0; ow < OW; ow++, q++) {
            int64_t wa, wb;
            fast_span(g, 2, ow, &wa, &wb);
            lo[2] = tfc_pool_win_lo(g, 2, ow);
            int64_t n = tfc_pool_divisor(g, lo);
            double share = n ? fast_ld(dy, f32, q) / (double)n : 0;
            for (int64_t h = ha; h < hb; h++)
                for (int64_t at = h * W + wa; at < h * W + wb; at++) acc[at] += share;
        }
    }
    for (int64_t i = 0, n_in = tfc_pool_in_size(g); i < n_in; i++) fast_st(dx, f32, i, acc[i]);
}

/* The fast path over every plane. Returns -1 when out of memory (avg_pool_grad's buffer). */
static int pool_fast(const struct tfc_pool_geom *g, enum tfc_kernel_kind kind, int dt,
                     const void *x, void *y, int64_t *arg)
{
    int f32 = dt == TFC_FLOAT32;
    size_t es = f32 ? sizeof(float) : sizeof(double);
    int64_t P = tfc_pool_in_size(g), Q = tfc_pool_out_size(g);
    if (kind == TFC_K_AVG_POOL_GRAD) { /* x is dy, y is dx */
        double *acc = malloc((size_t)(P ? P : 1) * sizeof *acc);
        if (!acc) return -1;
        for (int64_t p = 0; p < g->planes; p++) {
            memset(acc, 0, (size_t)P * sizeof *acc);
            fast_avg_grad_plane(g, f32, (const char *)x + p * Q * es, acc, (char *)y + p * P * es);
        }
        free(acc);
        return 0;
    }
    for (int64_t p = 0; p < g->planes; p++) {
        const char *xp = (const char *)x + p * P * es;
        char *yp = (char *)y + p * Q * es;
        if (kind == TFC_K_MAX_POOL)
            fast_max_plane(g, f32, xp, yp, arg ? arg + p * Q : NULL);
        else
            fast_avg_plane(g, f32, xp, yp);
    }
    return 0;
}

static int64_t plane_size(const struct tfc_kdesc *d)
{
    int64_t n = 1;
    for (int i = 2; i < d->rank; i++) n *= d->dims[i];
    return n;
}

/* max_pool_grad of float dy into float dx (zeroed), the generic loop's order: a float sum of
 * two floats is their double sum rounded, so the bits are the same. Returns the position of
 * the first index outside [0, P) other than -1 (a window of padding only), or -1 when none. */
static int64_t scatter_f32(const float *dy, const int64_t *idx, float *dx, int64_t planes,
                           int64_t P, int64_t Q)
{
    for (int64_t p = 0; p < planes; p++, dy += Q, idx += Q, dx += P)
        for (int64_t q = 0; q < Q; q++) {
            int64_t k = idx[q];
            if (k >= 0 && k < P)
                dx[k] += dy[q];
            else if (k != -1)
                return p * Q + q;
        }
    return -1;
}

/* max_pool_grad (scatter: dx[plane, idx] += v) and max_pool_gather (y = x[plane, idx]). */
static void argmax_route(const struct tfc_kargs *a, void *buffers[])
{
    int scatter = a->kind == TFC_K_MAX_POOL_GRAD;
    const struct tfc_kdesc *dv = &a->d[0], *di = &a->d[1], *out = tfc_kout_desc(a, 0);
    const struct tfc_kdesc *big = scatter ? out : dv; /* the pooled input's shape */
    const void *v = tfc_kin(buffers, a, 0);
    const int64_t *idx = tfc_kin(buffers, a, 1);
    void *y = tfc_kout(buffers, a, 0);
    int64_t P = plane_size(big), Q = plane_size(di), planes = Q ? di->numel / Q : 0;
    if (scatter) memset(y, 0, (size_t)out->numel * tfc_kdtype_size(out->dtype));
    if (scatter && idx && dv->dtype == TFC_FLOAT32 && out->dtype == TFC_FLOAT32) {
        int64_t bad = scatter_f32(v, idx, y, planes, P, Q); /* 2-3x the generic loop */
        if (bad < 0) return;
        memset(y, 0, (size_t)out->numel * sizeof(float)); /* the generic loop reports it */
    }
    for (int64_t p = 0; p < planes && idx; p++)
        for (int64_t q = 0; q < Q; q++) {
            int64_t k = idx[p * Q + q];
            if (k < 0 || k >= P) {
                if (k == -1 && scatter) continue; /* a window of padding only */
                tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE,
                                "index %lld at position %lld is outside [0, %lld)", (long long)k,
                                (long long)(p * Q + q), (long long)P);
                if (!scatter) tfc_store_f64(y, out->dtype, p * Q + q, NAN);
                continue;
            }
            if (scatter)
                tfc_store_f64(y, out->dtype, p * P + k,
                              tfc_load_f64(y, out->dtype, p * P + k) +
                                  tfc_load_f64(v, dv->dtype, p * Q + q));
            else
                tfc_store_f64(y, out->dtype, p * Q + q, tfc_load_f64(v, dv->dtype, p * P + k));
        }
}

static void pool_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *y = tfc_kout(buffers, a, 0);
    if (!y) return;
    if (a->kind == TFC_K_MAX_POOL_GRAD || a->kind == TFC_K_MAX_POOL_GATHER) {
        argmax_route(a, buffers);
        return;
    }
    int grad = a->kind == TFC_K_AVG_POOL_GRAD;
    const struct tfc_kdesc *xd = grad ? &a->d[1] : &a->d[0];
    struct tfc_pool_geom g;
    if (tfc_pool_geom_make(a->attrs, xd->rank, xd->dims, &g)) { /* inference checked it */
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "pooling attributes do not fit the input");
        return;
    }
    const void *x = tfc_kin(buffers, a, 0);
    int64_t P = tfc_pool_in_size(&g), Q = tfc_pool_out_size(&g);
    int dt = a->d[0].dtype;
    int64_t *arg = a->n_out > 1 ? tfc_kout(buffers, a, 1) : NULL;
    if (pool_fast_case(&g, dt) && x) {
        if (pool_fast(&g, a->kind, dt, x, y, arg))
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "avg_pool_grad: no memory for a plane "
                            "of %lld elements", (long long)P);
        return;
    }
    if (grad) {
        memset(y, 0, (size_t)xd->numel * tfc_kdtype_size(dt));
        for (int64_t p = 0; p < g.planes && x; p++)
            if (avg_grad_plane(&g, dt, x, p * Q, y, p * P)) {
                tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "avg_pool_grad: no memory for a "
                                "plane of %lld elements", (long long)P);
                return;
            }
        return;
    }
    for (int64_t p = 0; p < g.planes; p++)
        pool_plane(&g, a->kind == TFC_K_MAX_POOL, dt, x, p * P, y, p * Q, arg);
}

static struct starpu_perfmodel pool_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_pool",
};

struct starpu_codelet tfc_cl_pool = {
    .cpu_funcs = {pool_cpu},
    .cpu_funcs_name = {"pool_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_pool_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    /* every kind and dtype: tfc_opencl_supports' default for codelets it does not list */
    .opencl_funcs = {tfc_pool_opencl},
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &pool_model,
    .name = "pool",
};
