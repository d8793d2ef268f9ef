/* opencl_softmax.c: OpenCL softmax / log_softmax over one axis and softmax cross-entropy with
 * dense (float) or sparse (int32/int64) labels, float32 and float64, computed in double as
 * softmax.c does. A sparse label out of range marks its row in a small device buffer (atomic
 * minimum: the first bad row), read back synchronously and recorded with tfc_kernel_fail. */
#include <limits.h>
#include "opencl_common.h"
#include "../src/tfc.h"

int tfc_opencl_softmax_ok(const struct tfc_kargs *a)
{
    int dt = a->d[0].dtype, ot = tfc_kout_desc(a, 0)->dtype;
    if ((dt != TFC_FLOAT32 && dt != TFC_FLOAT64) || ot != dt) return 0;
    switch (a->kind) {
    case TFC_K_SOFTMAX:
    case TFC_K_LOG_SOFTMAX: return 1;
    case TFC_K_XENT: return a->d[1].dtype == dt && a->d[0].rank >= 1;
    case TFC_K_SPARSE_XENT:
        return (a->d[1].dtype == TFC_INT32 || a->d[1].dtype == TFC_INT64) &&
               a->d[0].rank >= 1 && tfc_kout_desc(a, 0)->numel < INT_MAX;
    default: return 0;
    }
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
kernel void TS(softmax)(int log_out, global T *x0, ulong xo, global T *y0, ulong yo, long outer,
                        long len, long inner)
{
    long g = get_global_id(0);
    if (g >= outer * inner) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    long base = (g / inner) * len * inner + g % inner;
    double mx = -INFINITY, sum = 0;
    for (long j = 0; j < len; j++) {
        double v = x[base + j * inner];
        if (v > mx) mx = v;
    }
    for (long j = 0; j < len; j++) sum += exp((double)x[base + j * inner] - mx);
    double lse = log(sum);
    for (long j = 0; j < len; j++) {
        double v = (double)x[base + j * inner] - mx;
        y[base + j * inner] = (T)(log_out ? v - lse : exp(v) / sum);
    }
}

kernel void TS(xent)(int sparse, global T *x0, ulong xo, global void *l0, ulong lo, int l64,
                     global T *y0, ulong yo, long rows, long classes, global int *bad)
{
    long b = get_global_id(0);
    if (b >= rows) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    global T *lab = AT(l0, lo);
    double mx = -INFINITY, sum = 0;
    for (long c = 0; c < classes; c++) {
        double v = x[b * classes + c];
        if (v > mx) mx = v;
    }
    for (long c = 0; c < classes; c++) sum += exp((double)x[b * classes + c] - mx);
    double lse = mx + log(sum), l = 0;
    if (sparse) {
        long id = l64 ? ((global long *)AT(l0, lo))[b] : (long)((global int *)AT(l0, lo))[b];
        if (id < 0 || id >= classes) {
            atomic_min(bad, (int)b);
            l = NAN;
        } else {
            l = lse - (double)x[b * classes + id];
        }
    } else {
        for (long c = 0; c < classes; c++) {
            double p = lab[b * classes + c];
            if (p != 0) l -= p * ((double)x[b * classes + c] - lse);
        }
    }
    y[b] = (T)l;
}
);

static struct tfc_ocl_prog prog = {.family = "softmax", .body = body};

static void xent_opencl(void *buffers[], const struct tfc_kargs *a)
{
    const struct tfc_kdesc *d = &a->d[0], *dl = &a->d[1], *o = tfc_kout_desc(a, 0);
    cl_mem X, L, Y;
    cl_ulong xo, lo, yo;
    tfc_ocl_buf(buffers, d->buf, &X, &xo);
    tfc_ocl_buf(buffers, dl->buf, &L, &lo);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_long classes = d->dims[d->rank - 1], rows = o->numel;
    cl_int sparse = a->kind == TFC_K_SPARSE_XENT, l64 = dl->dtype == TFC_INT64;
    cl_mem B = tfc_ocl_bad_create(a);
    if (!B) return;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "xent", d->dtype, a, &q);
    if (k && !tfc_ocl_run(a, k, q, (size_t)rows, 0, 11,
                          (size_t[]){sizeof sparse, sizeof X, sizeof xo, sizeof L, sizeof lo,
                                     sizeof l64, sizeof Y, sizeof yo, sizeof rows,
                                     sizeof classes, sizeof B},
                          (const void *[]){&sparse, &X, &xo, &L, &lo, &l64, &Y, &yo, &rows,
                                           &classes, &B}) && sparse) {
        int64_t row, id;
        if (tfc_ocl_bad_read(a, q, B, L, lo, dl->dtype, &row, &id) == 1)
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE, "label %lld of row %lld is outside [0, %lld)",
                            (long long)id, (long long)row, (long long)classes);
    }
    if (k) clReleaseKernel(k);
    clReleaseMemObject(B);
}

void tfc_softmax_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (a->kind == TFC_K_XENT || a->kind == TFC_K_SPARSE_XENT) {
        xent_opencl(buffers, a);
        return;
    }
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    int axis = (int)a->attrs[SOFTMAX_AXIS].i;
    if (axis < 0) axis += d->rank;
    cl_long outer = 1, len = d->rank ? d->dims[axis] : 1, inner = 1;
    for (int i = 0; i < axis; i++) outer *= d->dims[i];
    for (int i = axis + 1; i < d->rank; i++) inner *= d->dims[i];
    cl_int log_out = a->kind == TFC_K_LOG_SOFTMAX;
    cl_mem X, Y;
    cl_ulong xo, yo;
    tfc_ocl_buf(buffers, d->buf, &X, &xo);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "softmax", d->dtype, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, (size_t)(outer * inner), 0, 8,
                (size_t[]){sizeof log_out, sizeof X, sizeof xo, sizeof Y, sizeof yo,
                           sizeof outer, sizeof len, sizeof inner},
                (const void *[]){&log_out, &X, &xo, &Y, &yo, &outer, &len, &inner});
    clReleaseKernel(k);
}
#endif
