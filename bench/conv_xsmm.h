/* conv_xsmm.h: backend (3) of bench/conv_backends, libxsmm 1.17 (Debian's libxsmm-dev, a static
 * library without OpenMP inside: the caller's threads each run libxsmm_dnn_execute_st).
 * Convolution through its DNN API, direct kernels on its blocked layout [N][C/cb][H][W][cb]
 * with the padding stored in the buffers (its fast backward path needs that):
 *   xsmm:       the data already in that layout;
 *   xsmm+copy:  NCHW packed in and the result unpacked inside the timed call (own loops for
 *               activations, libxsmm's copy-in/out for filters).
 * Dense shapes through its JIT GEMM kernels; 1.17 generates no kernel for a transposed A, so
 * backward-data transposes w first (libxsmm_otrans, timed). */
#ifndef TFC_CONV_XSMM_H
#define TFC_CONV_XSMM_H

#include <libxsmm.h>
#include <omp.h>
#include "conv_problem.h"

/* 1 when s is success, else prints what failed and returns 0. */
static int xsmm_good(libxsmm_dnn_err_t s, const char *what)
{
    if (s == LIBXSMM_DNN_SUCCESS) return 1;
    fprintf(stderr, "conv_backends: libxsmm %s: %s\n", what, libxsmm_dnn_get_error(s));
    return 0;
}

enum { XT_IN, XT_DIN, XT_OUT, XT_DOUT, XT_FILT, XT_DFILT, XT_FILT_TR, XT_N };

struct xsmm_conv_state {
    const struct conv_problem *p;
    enum conv_dir dir;
    int threads, with_copy;
    libxsmm_dnn_layer *h;
    libxsmm_dnn_tensor *t[XT_N];
    float *buf[XT_N];            /* in libxsmm's layouts */
    unsigned in_dim[5], out_dim[5]; /* cb, W padded, H padded, C/cb, N */
    void *scratch;
    float *result;               /* plain layout */
};

/* Activations [N,C,H,W] into the blocked layout of dims dim (the padding rim untouched), or
 * back when unpack. */
static void xsmm_pack(const unsigned dim[5], int h, int w, float *plain, float *blocked,
                      int unpack)
{
    int cb = dim[0], wp = dim[1], hp = dim[2], nb = dim[3], n = dim[4];
    int ph = (hp - h) / 2, pw = (wp - w) / 2, c = cb * nb;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < nb; b++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    size_t at = (((size_t)i * nb + b) * hp + y + ph) * wp + x + pw;
                    float *blk = blocked + at * cb;
                    float *pl = plain + (((size_t)i * c + (size_t)b * cb) * h + y) * w + x;
                    for (int k = 0; k < cb; k++) {
                        if (unpack) pl[(size_t)k * h * w] = blk[k];
                        else blk[k] = pl[(size_t)k * h * w];
                    }
                }
}

/* The inputs of this direction into libxsmm's buffers. */
static int xsmm_copy_in(struct xsmm_conv_state *st)
{
    const struct conv_problem *p = st->p;
    if (st->dir != DIR_BWD_DATA) xsmm_pack(st->in_dim, p->sh.h, p->sh.w, p->x, st->buf[XT_IN], 0);
    if (st->dir != DIR_FWD) xsmm_pack(st->out_dim, p->oh, p->ow, p->dy, st->buf[XT_DOUT], 0);
    if (st->dir != DIR_BWD_FILTER &&
        !xsmm_good(libxsmm_dnn_copyin_tensor(st->t[XT_FILT], p->w, LIBXSMM_DNN_TENSOR_FORMAT_KCRS),
                   "filter copy-in"))
        return -1;
    return 0;
}

/* The result of this direction into st->result, in the plain layout. */
static int xsmm_copy_out(struct xsmm_conv_state *st)
{
    const struct conv_problem *p = st->p;
    if (st->dir == DIR_FWD) xsmm_pack(st->out_dim, p->oh, p->ow, st->result, st->buf[XT_OUT], 1);
    else if (st->dir == DIR_BWD_DATA)
        xsmm_pack(st->in_dim, p->sh.h, p->sh.w, st->result, st->buf[XT_DIN], 1);
    else if (!xsmm_good(libxsmm_dnn_copyout_tensor(st->t[XT_DFILT], st->result,
                                                   LIBXSMM_DNN_TENSOR_FORMAT_KCRS),
                        "filter copy-out"))
        return -1;
    return 0;
}

static int xsmm_conv_run(void *arg)
{
    struct xsmm_conv_state *st = arg;
    static const libxsmm_dnn_compute_kind kinds[N_DIRS] = {
        LIBXSMM_DNN_COMPUTE_KIND_FWD, LIBXSMM_DNN_COMPUTE_KIND_BWD, LIBXSMM_DNN_COMPUTE_KIND_UPD};
    if (st->with_copy && xsmm_copy_in(st)) return -1;
    libxsmm_dnn_err_t first = LIBXSMM_DNN_SUCCESS;
#pragma omp parallel num_threads(st->threads)
    {
        int t = omp_get_thread_num();
        libxsmm_dnn_err_t s = libxsmm_dnn_execute_st(st->h, kinds[st->dir], 0, t);
        if (s != LIBXSMM_DNN_SUCCESS) {
#pragma omp critical
            first = s;
        }
    }
    if (!xsmm_good(first, "execute")) return -1;
    return st->with_copy ? xsmm_copy_out(st) : 0;
}

static int xsmm_conv_fetch(void *arg, float *out)
{
    struct xsmm_conv_state *st = arg;
    if (!st->with_copy && xsmm_copy_out(st)) return -1;
    memcpy(out, st->result, conv_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void xsmm_conv_destroy(void *arg)
{
    static const libxsmm_dnn_tensor_type types[XT_N] = {
        LIBXSMM_DNN_REGULAR_INPUT, LIBXSMM_DNN_GRADIENT_INPUT, LIBXSMM_DNN_REGULAR_OUTPUT,
        LIBXSMM_DNN_GRADIENT_OUTPUT, LIBXSMM_DNN_REGULAR_FILTER, LIBXSMM_DNN_GRADIENT_FILTER,
        LIBXSMM_DNN_REGULAR_FILTER_TRANS};
    struct xsmm_conv_state *st = arg;
    for (int i = 0; i < XT_N; i++) {
        if (st->h && st->t[i]) libxsmm_dnn_release_tensor(st->h, types[i]);
        if (st->t[i]) libxsmm_dnn_destroy_tensor(st->t[i]);
        free(st->buf[i]);
    }
    if (st->h && st->scratch) libxsmm_dnn_release_scratch(st->h, LIBXSMM_DNN_COMPUTE_KIND_ALL);
    if (st->h) libxsmm_dnn_destroy_conv_layer(st->h);
    free(st->scratch);
    free(st->result);
    free(st);
}

/* A buffer in the layout libxsmm wants for tensor type `layout_type`, linked and bound as
 * `bind_type`; dim gets the layout's dimensions (activations). */
static int xsmm_tensor(struct xsmm_conv_state *st, int i, libxsmm_dnn_tensor_type layout_type,
                       libxsmm_dnn_tensor_type bind_type, unsigned dim[5])
{
    libxsmm_dnn_err_t s;
    libxsmm_dnn_tensor_datalayout *l = libxsmm_dnn_create_tensor_datalayout(st->h, layout_type, &s);
    if (!l || !xsmm_good(s, "tensor layout")) return -1;
    size_t bytes = libxsmm_dnn_get_tensor_size(l, &s);
    if (dim)
        for (int d = 0; d < 5 && d < (int)l->num_dims; d++) dim[d] = l->dim_size[d];
    st->buf[i] = conv_alloc(bytes / sizeof(float)); /* zeroed: the padding rims stay 0 */
    st->t[i] = libxsmm_dnn_link_tensor(l, st->buf[i], &s);
    libxsmm_dnn_destroy_tensor_datalayout(l);
    if (!st->t[i] || !xsmm_good(s, "link tensor")) return -1;
    return xsmm_good(libxsmm_dnn_bind_tensor(st->h, st->t[i], bind_type), "bind tensor") ? 0 : -1;
}

static int xsmm_conv_setup(struct xsmm_conv_state *st)
{
    const struct conv_problem *p = st->p;
    const struct conv_shape *s = &p->sh;
    libxsmm_dnn_conv_desc d = {
        .N = p->n, .C = s->c, .H = s->h, .W = s->w, .K = s->k, .R = s->r, .S = s->s,
        .u = s->stride, .v = s->stride, .pad_h = s->pad, .pad_w = s->pad,
        .pad_h_in = s->pad, .pad_w_in = s->pad, .pad_h_out = s->pad, .pad_w_out = s->pad,
        .threads = st->threads, .datatype_in = LIBXSMM_DNN_DATATYPE_F32,
        .datatype_out = LIBXSMM_DNN_DATATYPE_F32,
        .buffer_format = LIBXSMM_DNN_TENSOR_FORMAT_LIBXSMM,
        .filter_format = LIBXSMM_DNN_TENSOR_FORMAT_LIBXSMM, .algo = LIBXSMM_DNN_CONV_ALGO_DIRECT,
        .options = LIBXSMM_DNN_CONV_OPTION_OVERWRITE, .fuse_ops = LIBXSMM_DNN_CONV_FUSE_NONE};
    libxsmm_dnn_err_t status;
    st->h = libxsmm_dnn_create_conv_layer(d, &status);
    if (!st->h || !xsmm_good(status, "create conv layer")) return -1;
    if (xsmm_tensor(st, XT_IN, LIBXSMM_DNN_INPUT, LIBXSMM_DNN_REGULAR_INPUT, st->in_dim) ||
        xsmm_tensor(st, XT_DIN, LIBXSMM_DNN_INPUT, LIBXSMM_DNN_GRADIENT_INPUT, NULL) ||
        xsmm_tensor(st, XT_OUT, LIBXSMM_DNN_OUTPUT, LIBXSMM_DNN_REGULAR_OUTPUT, st->out_dim) ||
        xsmm_tensor(st, XT_DOUT, LIBXSMM_DNN_OUTPUT, LIBXSMM_DNN_GRADIENT_OUTPUT, NULL) ||
        xsmm_tensor(st, XT_FILT, LIBXSMM_DNN_FILTER, LIBXSMM_DNN_REGULAR_FILTER, NULL) ||
        xsmm_tensor(st, XT_DFILT, LIBXSMM_DNN_FILTER, LIBXSMM_DNN_GRADIENT_FILTER, NULL) ||
        xsmm_tensor(st, XT_FILT_TR, LIBXSMM_DNN_REGULAR_FILTER_TRANS,
                    LIBXSMM_DNN_REGULAR_FILTER_TRANS, NULL))
        return -1;
    size_t bytes = libxsmm_dnn_get_scratch_size(st->h, LIBXSMM_DNN_COMPUTE_KIND_ALL, &status);
    if (!xsmm_good(status, "scratch size")) return -1;
    st->scratch = conv_alloc(bytes / sizeof(float) + 1);
    if (!xsmm_good(libxsmm_dnn_bind_scratch(st->h, LIBXSMM_DNN_COMPUTE_KIND_ALL, st->scratch),
                   "bind scratch"))
        return -1;
    return xsmm_copy_in(st);
}

static int xsmm_conv_create(const struct conv_problem *p, enum conv_dir d, int with_copy,
                            int threads, struct variant *v)
{
    struct xsmm_conv_state *st = calloc(1, sizeof *st);
    *st = (struct xsmm_conv_state){.p = p, .dir = d, .threads = threads, .with_copy = with_copy};
    st->result = conv_alloc(conv_result_size(p, d));
    *v = (struct variant){.run = xsmm_conv_run, .fetch = xsmm_conv_fetch,
                          .destroy = xsmm_conv_destroy, .st = st};
    snprintf(v->name, sizeof v->name, with_copy ? "xsmm+copy" : "xsmm");
    if (xsmm_conv_setup(st)) {
        xsmm_conv_destroy(st);
        return -1;
    }
    snprintf(v->impl, sizeof v->impl, "direct, %s; blocks x:%uc y:%uc", libxsmm_get_target_arch(),
             st->in_dim[0], st->out_dim[0]);
    return 0;
}

/* ---- dense layers: one JIT kernel per thread's block of output columns -------------------- */

#define XSMM_MAX_THREADS 64

/* Column-major C [m,n] = op(A) [m,k] op(B) [k,n]; the row-major problem read column-major:
 * forward y^T = w^T x^T, backward-data dx^T = (w^T)^T dy^T, backward-filter dw^T = dy^T x. */
struct xsmm_mm_state {
    const struct dense_problem *p;
    enum conv_dir dir;
    int threads, m, n, k, lda, ldb, ldc, trans_b;
    const float *a, *b;
    libxsmm_smmfunction kern[XSMM_MAX_THREADS];
    float *wt; /* backward-data: w transposed, because 1.17 has no TRANS_A kernel */
    float *out;
};

static int xsmm_mm_run(void *arg)
{
    struct xsmm_mm_state *st = arg;
    const struct dense_problem *p = st->p;
#pragma omp parallel num_threads(st->threads)
    {
        int t = omp_get_thread_num(), lo, hi;
        if (st->wt) { /* w [in,out] row-major is [out,in] column-major: make it [in,out], each
                       * thread a block of columns (libxsmm_otrans_thread itself divides by zero
                       * with several threads on AVX-512 when the matrix is under its tile) */
            conv_split(p->in, st->threads, t, &lo, &hi);
            if (hi > lo)
                libxsmm_otrans(st->wt + lo, p->w + (size_t)lo * p->out, sizeof(float), p->out,
                               hi - lo, p->out, p->in);
#pragma omp barrier
        }
        conv_split(st->n, st->threads, t, &lo, &hi);
        if (hi > lo)
            st->kern[t](st->a, st->b + (size_t)lo * (st->trans_b ? 1 : st->ldb),
                        st->out + (size_t)lo * st->ldc);
    }
    return 0;
}

static int xsmm_mm_fetch(void *arg, float *out)
{
    struct xsmm_mm_state *st = arg;
    memcpy(out, st->out, dense_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void xsmm_mm_destroy(void *arg)
{
    struct xsmm_mm_state *st = arg;
    free(st->wt), free(st->out), free(st);
}

/* The GEMM of direction d, column-major. */
static void xsmm_mm_shape(struct xsmm_mm_state *st)
{
    const struct dense_problem *p = st->p;
    if (st->dir == DIR_FWD)
        st->m = p->out, st->n = p->b, st->k = p->in, st->a = p->w, st->lda = p->out,
        st->b = p->x, st->ldb = p->in, st->ldc = p->out;
    else if (st->dir == DIR_BWD_DATA)
        st->m = p->in, st->n = p->b, st->k = p->out, st->a = st->wt, st->lda = p->in,
        st->b = p->dy, st->ldb = p->out, st->ldc = p->in;
    else
        st->m = p->out, st->n = p->in, st->k = p->b, st->a = p->dy, st->lda = p->out,
        st->b = p->x, st->ldb = p->in, st->ldc = p->out, st->trans_b = 1;
}

static int xsmm_mm_create(const struct dense_problem *p, enum conv_dir d, int threads,
                          struct variant *v)
{
    if (threads > XSMM_MAX_THREADS) return -1;
    struct xsmm_mm_state *st = calloc(1, sizeof *st);
    *st = (struct xsmm_mm_state){.p = p, .dir = d, .threads = threads};
    st->out = conv_alloc(dense_result_size(p, d));
    if (d == DIR_BWD_DATA) st->wt = conv_alloc((size_t)p->in * p->out);
    xsmm_mm_shape(st);
    *v = (struct variant){.run = xsmm_mm_run, .fetch = xsmm_mm_fetch, .destroy = xsmm_mm_destroy,
                          .st = st};
    snprintf(v->name, sizeof v->name, "xsmm jit");
    const float alpha = 1, beta = 0;
    const int flags = st->trans_b ? LIBXSMM_GEMM_FLAG_TRANS_B : LIBXSMM_GEMM_FLAG_NONE;
    for (int t = 0; t < threads; t++) {
        int lo, hi;
        conv_split(st->n, threads, t, &lo, &hi);
        libxsmm_blasint lda = st->lda, ldb = st->ldb, ldc = st->ldc;
        if (hi > lo && !(st->kern[t] = libxsmm_smmdispatch(st->m, hi - lo, st->k, &lda, &ldb,
                                                           &ldc, &alpha, &beta, &flags, NULL))) {
            fprintf(stderr, "conv_backends: libxsmm has no kernel for m=%d n=%d k=%d%s\n",
                    st->m, hi - lo, st->k, st->trans_b ? " B^T" : "");
            xsmm_mm_destroy(st);
            return -1;
        }
    }
    snprintf(v->impl, sizeof v->impl, "JIT %s, m=%d n=%d/%d k=%d%s%s", libxsmm_get_target_arch(),
             st->m, st->n, threads, st->k, st->trans_b ? " B^T" : "",
             st->wt ? " after libxsmm_otrans(w)" : "");
    return 0;
}

#endif
