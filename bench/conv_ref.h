/* conv_ref.h: float64 references for bench/conv_backends: the three directions of a
 * convolution and of a dense layer by their definitions, accumulated in double, so that every
 * backend's result is checked before it is timed. Written for clarity, not speed. */
#ifndef TFC_CONV_REF_H
#define TFC_CONV_REF_H

#include "conv_problem.h"

/* The first output index o in [0, n_out) whose input index o*stride + off is >= 0, and the
 * end of those whose input index is < n_in: the part of a row that padding leaves inside. */
static inline void conv_valid_range(int n_out, int n_in, int stride, int off, int *lo, int *hi)
{
    int a = off >= 0 ? 0 : (-off + stride - 1) / stride;
    int b = n_in - off <= 0 ? 0 : (n_in - off + stride - 1) / stride;
    *lo = a;
    *hi = b < n_out ? b : n_out;
    if (*hi < *lo) *hi = *lo;
}

static inline double *conv_ref_alloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) {
        fprintf(stderr, "conv_backends: out of memory for the reference\n");
        exit(1);
    }
    return p;
}

/* y[n,k,oh,ow] = sum over c,r,s of x[n,c,oh*st+r-pad,ow*st+s-pad] w[k,c,r,s]. */
static inline double *conv_ref_forward(const struct conv_problem *p)
{
    const struct conv_shape *s = &p->sh;
    double *y = conv_ref_alloc(conv_result_size(p, DIR_FWD));
    for (int n = 0; n < p->n; n++)
        for (int k = 0; k < s->k; k++) {
            double *yo = y + ((size_t)n * s->k + k) * p->oh * p->ow;
            for (int c = 0; c < s->c; c++)
                for (int r = 0; r < s->r; r++)
                    for (int q = 0; q < s->s; q++) {
                        double wv = p->w[(((size_t)k * s->c + c) * s->r + r) * s->s + q];
                        int h0, h1, w0, w1;
                        conv_valid_range(p->oh, s->h, s->stride, r - s->pad, &h0, &h1);
                        conv_valid_range(p->ow, s->w, s->stride, q - s->pad, &w0, &w1);
                        for (int oh = h0; oh < h1; oh++) {
                            const float *xi = p->x + (((size_t)n * s->c + c) * s->h +
                                                      oh * s->stride + r - s->pad) * s->w;
                            for (int ow = w0; ow < w1; ow++)
                                yo[oh * p->ow + ow] += wv * xi[ow * s->stride + q - s->pad];
                        }
                    }
        }
    return y;
}

/* dx[n,c,ih,iw] = sum over k,r,s of dy[n,k,oh,ow] w[k,c,r,s] where ih = oh*st+r-pad and
 * iw = ow*st+s-pad. */
static inline double *conv_ref_backward_data(const struct conv_problem *p)
{
    const struct conv_shape *s = &p->sh;
    double *dx = conv_ref_alloc(conv_result_size(p, DIR_BWD_DATA));
    for (int n = 0; n < p->n; n++)
        for (int c = 0; c < s->c; c++) {
            double *xo = dx + ((size_t)n * s->c + c) * s->h * s->w;
            for (int k = 0; k < s->k; k++)
                for (int r = 0; r < s->r; r++)
                    for (int q = 0; q < s->s; q++) {
                        double wv = p->w[(((size_t)k * s->c + c) * s->r + r) * s->s + q];
                        int h0, h1, w0, w1;
                        conv_valid_range(p->oh, s->h, s->stride, r - s->pad, &h0, &h1);
                        conv_valid_range(p->ow, s->w, s->stride, q - s->pad, &w0, &w1);
                        for (int oh = h0; oh < h1; oh++) {
                            const float *g = p->dy + (((size_t)n * s->k + k) * p->oh + oh) * p->ow;
                            double *xr = xo + (size_t)(oh * s->stride + r - s->pad) * s->w;
                            for (int ow = w0; ow < w1; ow++)
                                xr[ow * s->stride + q - s->pad] += wv * g[ow];
                        }
                    }
        }
    return dx;
}

/* dw[k,c,r,s] = sum over n,oh,ow of dy[n,k,oh,ow] x[n,c,oh*st+r-pad,ow*st+s-pad]. */
static inline double *conv_ref_backward_filter(const struct conv_problem *p)
{
    const struct conv_shape *s = &p->sh;
    double *dw = conv_ref_alloc(conv_result_size(p, DIR_BWD_FILTER));
    for (int k = 0; k < s->k; k++)
        for (int c = 0; c < s->c; c++)
            for (int r = 0; r < s->r; r++)
                for (int q = 0; q < s->s; q++) {
                    int h0, h1, w0, w1;
                    conv_valid_range(p->oh, s->h, s->stride, r - s->pad, &h0, &h1);
                    conv_valid_range(p->ow, s->w, s->stride, q - s->pad, &w0, &w1);
                    double acc = 0;
                    for (int n = 0; n < p->n; n++)
                        for (int oh = h0; oh < h1; oh++) {
                            const float *g = p->dy + (((size_t)n * s->k + k) * p->oh + oh) * p->ow;
                            const float *xi = p->x + (((size_t)n * s->c + c) * s->h +
                                                      oh * s->stride + r - s->pad) * s->w;
                            for (int ow = w0; ow < w1; ow++)
                                acc += (double)g[ow] * xi[ow * s->stride + q - s->pad];
                        }
                    dw[(((size_t)k * s->c + c) * s->r + r) * s->s + q] = acc;
                }
    return dw;
}

static inline double *conv_ref(const struct conv_problem *p, enum conv_dir d)
{
    if (d == DIR_FWD) return conv_ref_forward(p);
    if (d == DIR_BWD_DATA) return conv_ref_backward_data(p);
    return conv_ref_backward_filter(p);
}

/* C[m,n] = sum over k of A[m,k] B[k,n], with A and B read through (row, column) strides so
 * that one loop serves every transpose. */
static inline double *dense_ref_gemm(int m, int n, int kk, const float *a, size_t ar, size_t ac,
                                     const float *b, size_t br, size_t bc)
{
    double *c = conv_ref_alloc((size_t)m * n);
    for (int i = 0; i < m; i++)
        for (int l = 0; l < kk; l++) {
            double av = a[i * ar + l * ac];
            for (int j = 0; j < n; j++) c[(size_t)i * n + j] += av * b[l * br + j * bc];
        }
    return c;
}

static inline double *dense_ref(const struct dense_problem *p, enum conv_dir d)
{
    if (d == DIR_FWD) /* y = x w */
        return dense_ref_gemm(p->b, p->out, p->in, p->x, p->in, 1, p->w, p->out, 1);
    if (d == DIR_BWD_DATA) /* dx = dy w^T: w^T[o,i] = w[i,o] */
        return dense_ref_gemm(p->b, p->in, p->out, p->dy, p->out, 1, p->w, 1, p->out);
    /* dw = x^T dy: x^T[i,b] = x[b,i] */
    return dense_ref_gemm(p->in, p->out, p->b, p->x, 1, p->in, p->dy, p->out, 1);
}

#endif
