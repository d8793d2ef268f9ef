/* perfmodel.c: the hooks every codelet's perfmodel shares, and the kernels' error reporting.
 * The footprint is computed once per plan node (kind, dtypes, shapes, attributes: StarPU's
 * default ignores the element size); light families get an analytic cost instead of a
 * history, since tasks of a few microseconds are too noisy to calibrate. */
#include <stdarg.h>
#include <stdio.h>
#include "conv_geom.h"
#include "kernel.h"
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

/* Estimated flops: one per output element (element-wise, copies, pad and pad_grad, gathers),
 * multiply-adds counted twice for the GEMM families, a window per pooled element. */
static double kargs_flops(const struct tfc_kargs *a)
{
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

void tfc_kargs_finish(struct tfc_kargs *a)
{
    /* footprint: everything that changes the cost (kind, dtypes, shapes, attributes) */
    uint32_t h = starpu_hash_crc32c_be_n(&a->kind, sizeof a->kind, 0);
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        h = starpu_hash_crc32c_be_n(&d->dtype, sizeof d->dtype, h);
        h = starpu_hash_crc32c_be_n(&d->rank, sizeof d->rank, h);
        h = starpu_hash_crc32c_be_n(d->dims, sizeof(int64_t) * (size_t)d->rank, h);
    }
    h = starpu_hash_crc32c_be_n(a->attrs, sizeof a->attrs, h);
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
    if (!e || !__atomic_compare_exchange_n(&e->set, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
        return;
    e->status = status;
    e->node = a->node;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
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
        e->set = 1;
        e->status = TFC_ERR_OUT_OF_RANGE;
        e->node = d->node;
        tfc_kerr_format(d->kind, (long long)d->pos, (long long)d->value, (long long)d->bound,
                        e->msg, sizeof e->msg);
    }
    d->set = 0;
}
