/* perfmodel.c: the hooks every codelet's perfmodel shares, and the kernels' error reporting.
 * The footprint is computed once per plan node (kind, dtypes, shapes, attributes: StarPU's
 * default ignores the element size); light families get an analytic cost instead of a
 * history, since tasks of a few microseconds are too noisy to calibrate. */
#ifdef HAVE_CONFIG_H /* configure's TFC_HAVE_DNNL; scripts/fuzz.sh builds without: no oneDNN */
#include "config.h"
#endif
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "conv_geom.h"
#include "conv_winograd.h"
#include "kernel.h"
#include "matmul_dnnl.h"
#include "../src/env.h"
#include "../src/tfc.h"

/* 2 N K C/groups kvol ovol: one multiply-add per (output element, filter tap of its group).
 * Both adjoints do the same multiply-adds (the same GEMMs, transposed); -1 when the arguments
 * give no geometry (the kernel reports that). */
static double conv_flops(const struct tfc_kargs *a)
{
    struct tfc_conv_geom g;
    struct tfc_conv_3d t;
    char msg[200];
    if (tfc_conv_geom_of(a, &g, msg, sizeof msg)) return -1;
    tfc_conv_geom_3d(&g, &t);
    return 2.0 * (double)g.batch * (double)g.out_ch * (double)(g.in_ch / g.groups) *
           (double)t.k_vol * (double)t.o_vol;
}

/* The window volume of a pooling op (the product of its kernel attribute). */
static double pool_window(const struct tfc_kargs *a)
{
    double v = 1;
    for (int i = 0; i < a->attrs[POOL_KERNEL].n; i++) v *= (double)a->attrs[POOL_KERNEL].v[i];
    return v;
}

/* Flops per element of x of the normalizations (codelets/norm.c), counted in training mode
 * (whether a batch_norm trains is a run-time input, so the count takes the costlier case):
 * batch_norm: the mean (1), the variance (3), y (3); its gradient: the two sums (5), dx (7);
 * layer_norm: the same passes without gamma and beta (1 + 3 + 2); its gradient 5 + 6.
 * Dropout: a Philox-4x32-10 block per 4 elements (10 rounds of 2 multiplies, 4 xors and 2 key
 * adds: 20 integer ops per element), then a compare and a multiply. */
#define BATCH_NORM_FLOPS 7
#define BATCH_NORM_GRAD_FLOPS 12
#define BATCH_NORM_UPDATE_FLOPS 8 /* per channel: two blends and the unbiased variance */
#define LAYER_NORM_FLOPS 6
#define LAYER_NORM_GRAD_FLOPS 11
#define DROPOUT_FLOPS 22

/* The flops of the normalization and dropout families, or -1 for other kinds. */
static double norm_dropout_flops(const struct tfc_kargs *a)
{
    switch (a->kind) {
    case TFC_K_BATCH_NORM: return BATCH_NORM_FLOPS * (double)a->d[0].numel;
    case TFC_K_BATCH_NORM_GRAD: return BATCH_NORM_GRAD_FLOPS * (double)a->d[1].numel;
    case TFC_K_BATCH_NORM_UPDATE: return BATCH_NORM_UPDATE_FLOPS * (double)a->d[0].numel;
    case TFC_K_LAYER_NORM: return LAYER_NORM_FLOPS * (double)a->d[0].numel;
    case TFC_K_LAYER_NORM_GRAD: return LAYER_NORM_GRAD_FLOPS * (double)a->d[1].numel;
    case TFC_K_DROPOUT:
    case TFC_K_DROPOUT_GRAD: return DROPOUT_FLOPS * (double)a->d[0].numel;
    default: return -1;
    }
}

/* Estimated flops: one per output element (element-wise, copies, pad and pad_grad, gathers),
 * multiply-adds counted twice for the GEMM families, a window per pooled element, and the
 * counts above for normalizations and dropout. */
static double kargs_flops(const struct tfc_kargs *a)
{
    double nd = norm_dropout_flops(a);
    if (nd >= 0) return nd;
    const struct tfc_kdesc *o = &a->d[a->n_in];
    double f = (double)o->numel;
    switch (a->kind) {
    case TFC_K_MATMUL:
    case TFC_K_BATCH_MATMUL: {
        const struct tfc_kdesc *x = &a->d[0];
        int64_t k = a->attrs[MATMUL_TRANSPOSE_A].i ? x->dims[x->rank - 2] : x->dims[x->rank - 1];
        return 2.0 * (double)o->numel * (double)k;
    }
    case TFC_K_CONV:
    case TFC_K_CONV_BP_INPUT:
    case TFC_K_CONV_BP_FILTER: {
        double c = conv_flops(a);
        return c >= 0 ? c : f;
    }
    case TFC_K_MAX_POOL:
    case TFC_K_AVG_POOL: /* a window read per pooled value */
        return (double)o->numel * pool_window(a);
    case TFC_K_AVG_POOL_GRAD: /* each dy element spread over its window */
        return (double)a->d[0].numel * pool_window(a);
    case TFC_K_MAX_POOL_GRAD: /* each dy element added at its argmax (the output is zeroed) */
        return (double)a->d[0].numel + f;
    default:
        return f;
    }
}

uint32_t tfc_model_footprint(struct starpu_task *task)
{
    const struct tfc_kargs *a = task->cl_arg;
    return a->footprint;
}

/* The kernels a CPU worker runs for a convolution task: 2 Winograd, 1 oneDNN, 0 im2col +
 * OpenBLAS (what TFC_CONV_BACKEND, the task's geometry and the build select, as
 * codelets/conv.c decides). Read when the plan is built: a plan is not meant to outlive a
 * change of the variable. */
static int32_t conv_cpu_backend(const struct tfc_kargs *a)
{
    /* the words' order in src/env.c */
    enum { BACKEND_AUTO, BACKEND_DNNL, BACKEND_IM2COL, BACKEND_WINOGRAD };
    char msg[TFC_MSG_LEN];
    int backend;
    if (tfc_env_choice("TFC_CONV_BACKEND", &backend, msg)) return -1; /* the task fails */
    struct tfc_conv_geom g;
    if ((backend == BACKEND_AUTO || backend == BACKEND_WINOGRAD) &&
        !tfc_conv_geom_of(a, &g, msg, sizeof msg) && tfc_conv_winograd_fits(a, &g) &&
        (backend == BACKEND_WINOGRAD || tfc_conv_winograd_auto(&g)))
        return 2;
#ifdef TFC_HAVE_DNNL
    return backend != BACKEND_IM2COL;
#else
    return 0; /* auto runs im2col; dnnl fails the task */
#endif
}

/* The attributes as far as they change the cost: dropout's seed picks which units drop, not
 * how many, so the layers and seeds of one shape and rate share one history. */
static void cost_attrs(const struct tfc_kargs *a, struct tfc_kattr out[TFC_K_MAX_ATTRS])
{
    memcpy(out, a->attrs, sizeof a->attrs);
    if (a->kind == TFC_K_DROPOUT || a->kind == TFC_K_DROPOUT_GRAD)
        memset(&out[DROPOUT_SEED], 0, sizeof out[DROPOUT_SEED]);
}

/* The library the CPU matmul kernel runs a float32 product through (codelets/matmul.c decides:
 * TFC_MATMUL_BACKEND's dnnl or blas, or auto's pick by the shape), read when the plan is built
 * as conv_cpu_backend is; -1 for a value the task will refuse. */
static int32_t matmul_cpu_backend(const struct tfc_kargs *a)
{
    enum { BACKEND_AUTO, BACKEND_DNNL, BACKEND_BLAS }; /* the words' order in src/env.c */
    char msg[TFC_MSG_LEN];
    int backend;
    if (tfc_env_choice("TFC_MATMUL_BACKEND", &backend, msg)) return -1;
    const struct tfc_kdesc *da = &a->d[0], *dc = &a->d[a->n_in];
    if (dc->dtype != TFC_FLOAT32 || da->rank < 2 || dc->rank < 2) return BACKEND_BLAS;
    if (backend != BACKEND_AUTO) return backend;
    int ta = a->attrs[MATMUL_TRANSPOSE_A].i != 0;
    int64_t k = da->dims[da->rank - (ta ? 2 : 1)];
    return tfc_matmul_dnnl_wins(dc->dims[dc->rank - 2], dc->dims[dc->rank - 1], k) ? BACKEND_DNNL
                                                                                   : BACKEND_BLAS;
}

void tfc_kargs_finish(struct tfc_kargs *a)
{
    /* footprint: everything that changes the cost (kind, dtypes, shapes, attributes, and for
     * convolutions and products the CPU kernels, so one backend's history is not used for
     * another) */
    uint32_t h = starpu_hash_crc32c_be_n(&a->kind, sizeof a->kind, 0);
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        h = starpu_hash_crc32c_be_n(&d->dtype, sizeof d->dtype, h);
        h = starpu_hash_crc32c_be_n(&d->rank, sizeof d->rank, h);
        h = starpu_hash_crc32c_be_n(d->dims, sizeof(int64_t) * (size_t)d->rank, h);
    }
    struct tfc_kattr attrs[TFC_K_MAX_ATTRS];
    cost_attrs(a, attrs);
    h = starpu_hash_crc32c_be_n(attrs, sizeof attrs, h);
    if (a->kind == TFC_K_CONV || a->kind == TFC_K_CONV_BP_INPUT ||
        a->kind == TFC_K_CONV_BP_FILTER) {
        int32_t backend = conv_cpu_backend(a);
        h = starpu_hash_crc32c_be_n(&backend, sizeof backend, h);
    }
    if (a->kind == TFC_K_MATMUL || a->kind == TFC_K_BATCH_MATMUL) {
        int32_t backend = matmul_cpu_backend(a);
        h = starpu_hash_crc32c_be_n(&backend, sizeof backend, h);
    }
    a->footprint = h;
    double bytes = 0;
    for (int i = 0; i < a->n_in + a->n_out; i++)
        bytes += (double)a->d[i].numel * (double)tfc_kdtype_size(a->d[i].dtype);
    a->bytes = bytes;
    a->flops = kargs_flops(a);
}

/* Nominal rates of one CPU core: 10 GB/s and 5 GFLOP/s; a task costs at least 2 us. */
double tfc_model_analytic_cost(struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    const struct tfc_kargs *a = task->cl_arg;
    return 2.0 + a->bytes / 1e4 + a->flops / 5e3;
}

void tfc_kernel_fail(const struct tfc_kargs *a, int status, const char *fmt, ...)
{
    struct tfc_kerr *e = a->err;
    int expected = 0;
    if (!e || !__atomic_compare_exchange_n(&e->claimed, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
        return;
    e->status = status;
    e->node = a->node;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    /* last: a loop's predicate check reads a record while later kernels may still run (it
     * had seen the status of a division by zero with the message not yet written) */
    __atomic_store_n(&e->set, 1, __ATOMIC_RELEASE);
}

void tfc_kerr_format(int kind, long long pos, long long value, long long bound, char *msg,
                     size_t len)
{
    switch (kind) {
    case TFC_CU_ERR_DIV0: snprintf(msg, len, "integer division by zero"); break;
    case TFC_CU_ERR_GATHER:
        snprintf(msg, len, "index %lld at position %lld is outside [0, %lld)", value, pos, bound);
        break;
    default:
        snprintf(msg, len, "label %lld of row %lld is outside [0, %lld)", value, pos, bound);
        break;
    }
}

void tfc_kerr_take_device(struct tfc_kerr *e)
{
    struct tfc_kerr_dev *d = e->dev;
    if (!d || !d->set) return;
    __atomic_thread_fence(__ATOMIC_ACQUIRE); /* the record's fields before its flag */
    if (!e->set) {
        e->claimed = e->set = 1;
        e->status = TFC_ERR_OUT_OF_RANGE;
        e->node = d->node;
        tfc_kerr_format(d->kind, (long long)d->pos, (long long)d->value, (long long)d->bound,
                        e->msg, sizeof e->msg);
    }
    d->set = 0;
}
