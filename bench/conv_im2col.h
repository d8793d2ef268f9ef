/* conv_im2col.h: backend (1) of bench/conv_backends, convolution as im2col + OpenBLAS sgemm on
 * NCHW data, one image at a time, the batch split over the threads as tile tasks would split
 * it (one-thread sgemm each, partial filter gradients summed at the end); and the yardstick,
 * one cblas_sgemm of the whole batch's im2col GEMM shape on the OpenBLAS threads. */
#ifndef TFC_CONV_IM2COL_H
#define TFC_CONV_IM2COL_H

#include <cblas.h>
#include <omp.h>
#include "conv_ref.h"

/* col[(c*R + r)*S + s][oh*OW + ow] = x[c][oh*st + r - pad][ow*st + s - pad], 0 in the padding:
 * one image x [C,H,W] unrolled so that the convolution is one GEMM with the filters [K, CRS]. */
static void im2col(const struct conv_shape *s, int oh_n, int ow_n, const float *x, float *col)
{
    size_t plane = (size_t)oh_n * ow_n;
    for (int c = 0; c < s->c; c++)
        for (int r = 0; r < s->r; r++)
            for (int q = 0; q < s->s; q++) {
                float *row = col + ((size_t)(c * s->r + r) * s->s + q) * plane;
                int h0, h1, w0, w1;
                conv_valid_range(oh_n, s->h, s->stride, r - s->pad, &h0, &h1);
                conv_valid_range(ow_n, s->w, s->stride, q - s->pad, &w0, &w1);
                memset(row, 0, (size_t)h0 * ow_n * sizeof *row);
                for (int oh = h0; oh < h1; oh++) {
                    float *dst = row + (size_t)oh * ow_n;
                    const float *src = x + ((size_t)c * s->h + oh * s->stride + r - s->pad) * s->w +
                                       q - s->pad;
                    for (int ow = 0; ow < w0; ow++) dst[ow] = 0;
                    for (int ow = w0; ow < w1; ow++) dst[ow] = src[ow * s->stride];
                    for (int ow = w1; ow < ow_n; ow++) dst[ow] = 0;
                }
                memset(row + (size_t)h1 * ow_n, 0, (size_t)(oh_n - h1) * ow_n * sizeof *row);
            }
}

/* The adjoint of im2col: dx [C,H,W] = the sum of every col entry into the input element it
 * was copied from (padding entries are dropped). */
static void col2im(const struct conv_shape *s, int oh_n, int ow_n, const float *col, float *dx)
{
    size_t plane = (size_t)oh_n * ow_n;
    memset(dx, 0, (size_t)s->c * s->h * s->w * sizeof *dx);
    for (int c = 0; c < s->c; c++)
        for (int r = 0; r < s->r; r++)
            for (int q = 0; q < s->s; q++) {
                const float *row = col + ((size_t)(c * s->r + r) * s->s + q) * plane;
                int h0, h1, w0, w1;
                conv_valid_range(oh_n, s->h, s->stride, r - s->pad, &h0, &h1);
                conv_valid_range(ow_n, s->w, s->stride, q - s->pad, &w0, &w1);
                for (int oh = h0; oh < h1; oh++) {
                    const float *src = row + (size_t)oh * ow_n;
                    float *dst = dx + ((size_t)c * s->h + oh * s->stride + r - s->pad) * s->w +
                                 q - s->pad;
                    for (int ow = w0; ow < w1; ow++) dst[ow * s->stride] += src[ow];
                }
            }
}

#define IM2COL_MAX_THREADS 64

struct im2col_state {
    const struct conv_problem *p;
    enum conv_dir dir;
    int threads;
    float *col[IM2COL_MAX_THREADS];     /* one [CRS, OH*OW] buffer per thread */
    float *partial[IM2COL_MAX_THREADS]; /* backward-filter: a [K, CRS] sum per thread but
                                         * the first (which writes the result) */
    float *out;             /* the result, plain layout */
};

/* Images [lo, hi) of one direction on the calling thread, one-thread sgemm per image. */
static void im2col_images(struct im2col_state *st, int t, int lo, int hi)
{
    const struct conv_problem *p = st->p;
    const struct conv_shape *s = &p->sh;
    int crs = s->c * s->r * s->s, ohw = p->oh * p->ow;
    size_t in_img = (size_t)s->c * s->h * s->w, out_img = (size_t)s->k * ohw;
    float *col = st->col[t], *dw = t ? st->partial[t] : st->out;
    if (st->dir == DIR_BWD_FILTER && lo == hi) memset(dw, 0, (size_t)s->k * crs * sizeof *dw);
    for (int n = lo; n < hi; n++) {
        if (st->dir == DIR_FWD) { /* y_n [K, OHW] = w [K, CRS] col [CRS, OHW] */
            im2col(s, p->oh, p->ow, p->x + n * in_img, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->k, ohw, crs, 1.0f, p->w,
                        crs, col, ohw, 0.0f, st->out + n * out_img, ohw);
        } else if (st->dir == DIR_BWD_DATA) { /* col [CRS, OHW] = w^T dy_n, then col2im */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, crs, ohw, s->k, 1.0f, p->w, crs,
                        p->dy + n * out_img, ohw, 0.0f, col, ohw);
            col2im(s, p->oh, p->ow, col, st->out + n * in_img);
        } else { /* dw [K, CRS] += dy_n [K, OHW] col^T */
            im2col(s, p->oh, p->ow, p->x + n * in_img, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->k, crs, ohw, 1.0f,
                        p->dy + n * out_img, ohw, col, ohw, n == lo ? 0.0f : 1.0f, dw, crs);
        }
    }
}

static int im2col_run(void *arg)
{
    struct im2col_state *st = arg;
    const struct conv_shape *s = &st->p->sh;
    size_t nw = (size_t)s->k * s->c * s->r * s->s;
    openblas_set_num_threads(1); /* threads come from splitting the batch, as in the runtime */
#pragma omp parallel num_threads(st->threads)
    {
        int t = omp_get_thread_num(), lo, hi;
        conv_split(st->p->n, st->threads, t, &lo, &hi);
        im2col_images(st, t, lo, hi);
        if (st->dir == DIR_BWD_FILTER && st->threads > 1) {
#pragma omp barrier
            size_t a, b; /* sum the partial filter gradients, each thread a slice */
            a = nw * t / st->threads, b = nw * (t + 1) / st->threads;
            for (int u = 1; u < st->threads; u++)
                for (size_t i = a; i < b; i++) st->out[i] += st->partial[u][i];
        }
    }
    return 0;
}

static int im2col_fetch(void *arg, float *out)
{
    struct im2col_state *st = arg;
    memcpy(out, st->out, conv_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void im2col_destroy(void *arg)
{
    struct im2col_state *st = arg;
    for (int t = 0; t < st->threads; t++) free(st->col[t]), free(st->partial[t]);
    free(st->out);
    free(st);
}

static int im2col_create(const struct conv_problem *p, enum conv_dir d, int threads,
                         struct variant *v)
{
    const struct conv_shape *s = &p->sh;
    size_t crs = (size_t)s->c * s->r * s->s;
    if (threads > IM2COL_MAX_THREADS) return -1;
    struct im2col_state *st = calloc(1, sizeof *st);
    *st = (struct im2col_state){.p = p, .dir = d, .threads = threads};
    for (int t = 0; t < threads; t++) {
        st->col[t] = conv_alloc(crs * p->oh * p->ow);
        if (d == DIR_BWD_FILTER && t) st->partial[t] = conv_alloc(crs * s->k);
    }
    st->out = conv_alloc(conv_result_size(p, d));
    *v = (struct variant){.run = im2col_run, .fetch = im2col_fetch, .destroy = im2col_destroy,
                          .st = st};
    snprintf(v->name, sizeof v->name, "im2col+sgemm");
    snprintf(v->impl, sizeof v->impl, "per image, batch split over %d thread%s", threads,
             threads > 1 ? "s" : "");
    return 0;
}

/* ---- the yardstick: one cblas_sgemm of the im2col GEMM of the whole batch ----------------- */

/* Row-major C [m,n] = op(A) op(B) as the three directions need it, for m, n, k see
 * sgemm_shape. Operands hold random values: only the time matters. */
struct sgemm_state {
    int m, n, k, trans_a, trans_b, threads;
    float *a, *b, *c;
};

/* The im2col GEMM of the whole batch: forward w [K,CRS] col [CRS, N*OHW]; backward-data
 * w^T dy [K, N*OHW]; backward-filter dy col^T. */
static void sgemm_shape(const struct conv_problem *p, enum conv_dir d, int *m, int *n, int *k,
                        int *ta, int *tb)
{
    const struct conv_shape *s = &p->sh;
    int crs = s->c * s->r * s->s, cols = p->n * p->oh * p->ow;
    *ta = *tb = 0;
    if (d == DIR_FWD) *m = s->k, *n = cols, *k = crs;
    else if (d == DIR_BWD_DATA) *m = crs, *n = cols, *k = s->k, *ta = 1;
    else *m = s->k, *n = crs, *k = cols, *tb = 1;
}

static int sgemm_run(void *arg)
{
    struct sgemm_state *st = arg;
    openblas_set_num_threads(st->threads);
    cblas_sgemm(CblasRowMajor, st->trans_a ? CblasTrans : CblasNoTrans,
                st->trans_b ? CblasTrans : CblasNoTrans, st->m, st->n, st->k, 1.0f, st->a,
                st->trans_a ? st->m : st->k, st->b, st->trans_b ? st->k : st->n, 0.0f, st->c,
                st->n);
    openblas_set_num_threads(1);
    return 0;
}

static void sgemm_destroy(void *arg)
{
    struct sgemm_state *st = arg;
    free(st->a), free(st->b), free(st->c), free(st);
}

static void sgemm_create(int m, int n, int k, int ta, int tb, int threads, struct variant *v)
{
    struct sgemm_state *st = calloc(1, sizeof *st);
    uint64_t seed = 42;
    *st = (struct sgemm_state){.m = m, .n = n, .k = k, .trans_a = ta, .trans_b = tb,
                               .threads = threads};
    st->a = conv_alloc((size_t)m * k), st->b = conv_alloc((size_t)k * n);
    st->c = conv_alloc((size_t)m * n);
    conv_fill_random(st->a, (size_t)m * k, &seed);
    conv_fill_random(st->b, (size_t)k * n, &seed);
    *v = (struct variant){.run = sgemm_run, .destroy = sgemm_destroy, .st = st,
                          .openblas_pool = threads > 1};
    snprintf(v->name, sizeof v->name, "sgemm (one call)");
    snprintf(v->impl, sizeof v->impl, "M=%d N=%d K=%d %s%s, %d OpenBLAS thread%s", m, n, k,
             ta ? "A^T" : "A", tb ? "B^T" : "B", threads, threads > 1 ? "s" : "");
}

/* ---- dense layers: cblas_sgemm itself is the backend (and the yardstick) ------------------ */

struct dense_blas_state {
    const struct dense_problem *p;
    enum conv_dir dir;
    int threads;
    float *out;
};

static int dense_blas_run(void *arg)
{
    struct dense_blas_state *st = arg;
    const struct dense_problem *p = st->p;
    openblas_set_num_threads(st->threads);
    if (st->dir == DIR_FWD) /* y [b,out] = x [b,in] w [in,out] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->b, p->out, p->in, 1.0f, p->x,
                    p->in, p->w, p->out, 0.0f, st->out, p->out);
    else if (st->dir == DIR_BWD_DATA) /* dx [b,in] = dy [b,out] w^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->b, p->in, p->out, 1.0f, p->dy,
                    p->out, p->w, p->out, 0.0f, st->out, p->in);
    else /* dw [in,out] = x^T dy */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->in, p->out, p->b, 1.0f, p->x,
                    p->in, p->dy, p->out, 0.0f, st->out, p->out);
    openblas_set_num_threads(1);
    return 0;
}

static int dense_blas_fetch(void *arg, float *out)
{
    struct dense_blas_state *st = arg;
    memcpy(out, st->out, dense_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void dense_blas_destroy(void *arg)
{
    struct dense_blas_state *st = arg;
    free(st->out), free(st);
}

static void dense_blas_create(const struct dense_problem *p, enum conv_dir d, int threads,
                              struct variant *v)
{
    struct dense_blas_state *st = calloc(1, sizeof *st);
    *st = (struct dense_blas_state){.p = p, .dir = d, .threads = threads};
    st->out = conv_alloc(dense_result_size(p, d));
    *v = (struct variant){.run = dense_blas_run, .fetch = dense_blas_fetch,
                          .destroy = dense_blas_destroy, .st = st, .openblas_pool = threads > 1};
    snprintf(v->name, sizeof v->name, "sgemm (one call)");
    snprintf(v->impl, sizeof v->impl, "cblas_sgemm, %d OpenBLAS thread%s", threads,
             threads > 1 ? "s" : "");
}

#endif
