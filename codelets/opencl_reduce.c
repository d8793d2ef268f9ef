/* opencl_reduce.c: OpenCL reductions (sum, mean, max, min over axes, sum_to; float32 and
 * float64, accumulated in double in the order reduce.c uses) and argmax (int64 output): one
 * work-item per output element. */
#include <string.h>
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

int tfc_opencl_reduce_ok(const struct tfc_kargs *a)
{
    int dt = a->d[0].dtype, ot = tfc_kout_desc(a, 0)->dtype;
    if (dt != TFC_FLOAT32 && dt != TFC_FLOAT64) return 0;
    if (a->kind == TFC_K_ARGMAX) return ot == TFC_INT64 && a->d[0].rank >= 1;
    return ot == dt && (a->kind == TFC_K_SUM_TO ||
                        (a->kind >= TFC_K_REDUCE_SUM && a->kind <= TFC_K_REDUCE_MIN));
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
kernel void TS(reduce)(int kind, global T *x0, ulong xo, global T *y0, ulong yo, red_t r,
                       long nout, long count, long div)
{
    long o = get_global_id(0);
    if (o >= nout) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    long rem = o, base = 0;
    for (int d = (int)r.nk - 1; d >= 0; d--) {
        base += (rem % r.kd[d]) * r.ks[d];
        rem /= r.kd[d];
    }
    double acc = kind == TFC_K_REDUCE_MAX ? -INFINITY : kind == TFC_K_REDUCE_MIN ? INFINITY : 0.0;
    for (long e = 0; e < count; e++) {
        long off = base;
        rem = e;
        for (int d = (int)r.nr - 1; d >= 0; d--) {
            off += (rem % r.rd[d]) * r.rs[d];
            rem /= r.rd[d];
        }
        double v = x[off];
        if (kind == TFC_K_REDUCE_MAX) { if (v > acc || isnan(v)) acc = v; }
        else if (kind == TFC_K_REDUCE_MIN) { if (v < acc || isnan(v)) acc = v; }
        else acc += v;
    }
    if (kind == TFC_K_REDUCE_MEAN) acc = div ? acc / (double)div : NAN;
    y[o] = (T)acc;
}

kernel void TS(argmax)(global T *x0, ulong xo, global long *y0, ulong yo, long outer, long len,
                       long inner)
{
    long g = get_global_id(0);
    if (g >= outer * inner) return;
    global T *x = AT(x0, xo);
    global long *y = AT(y0, yo);
    long o = g / inner, in = g % inner, base = o * len * inner + in, best = 0;
    double bv = -INFINITY;
    for (long j = 0; j < len; j++) {
        double v = x[base + j * inner];
        if (v > bv || j == 0) { bv = v; best = j; }
    }
    y[g] = best;
}
);

static struct tfc_ocl_prog prog = {.family = "reduce", .body = body};

struct red_cl {
    cl_long nk, nr;
    cl_long kd[TFC_K_MAX_RANK], ks[TFC_K_MAX_RANK], rd[TFC_K_MAX_RANK], rs[TFC_K_MAX_RANK];
};

void tfc_reduce_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    cl_mem X, Y;
    cl_ulong xo, yo;
    tfc_ocl_buf(buffers, d->buf, &X, &xo);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_command_queue q;
    cl_kernel k;
    if (a->kind == TFC_K_ARGMAX) {
        int axis = (int)a->attrs[ARGMAX_AXIS].i;
        if (axis < 0) axis += d->rank;
        cl_long outer = 1, len = d->dims[axis], inner = 1;
        for (int i = 0; i < axis; i++) outer *= d->dims[i];
        for (int i = axis + 1; i < d->rank; i++) inner *= d->dims[i];
        if (!(k = tfc_ocl_kernel(&prog, "argmax", d->dtype, a, &q))) return;
        tfc_ocl_run(a, k, q, (size_t)(outer * inner), 0, 7,
                    (size_t[]){sizeof X, sizeof xo, sizeof Y, sizeof yo, sizeof outer,
                               sizeof len, sizeof inner},
                    (const void *[]){&X, &xo, &Y, &yo, &outer, &len, &inner});
        clReleaseKernel(k);
        return;
    }
    int reduced[TFC_K_MAX_RANK];
    tfc_reduced_axes(a, reduced);
    struct red_cl r;
    memset(&r, 0, sizeof r);
    int64_t st[TFC_K_MAX_RANK]; /* a 2-D tile's rows are ld apart (sched/tiling.c) */
    tfc_reduce_input_strides(d, tfc_kdesc_ld(buffers, d), st);
    for (int i = 0; i < d->rank; i++) {
        if (reduced[i]) {
            r.rd[r.nr] = d->dims[i];
            r.rs[r.nr++] = st[i];
        } else {
            r.kd[r.nk] = d->dims[i];
            r.ks[r.nk++] = st[i];
        }
    }
    cl_long nout = o->numel, count = nout ? d->numel / nout : 0;
    cl_long div = tfc_reduce_divisor(a, count);
    cl_int kind = a->kind;
    if (!(k = tfc_ocl_kernel(&prog, "reduce", d->dtype, a, &q))) return;
    tfc_ocl_run(a, k, q, (size_t)nout, 0, 9,
                (size_t[]){sizeof kind, sizeof X, sizeof xo, sizeof Y, sizeof yo, sizeof r,
                           sizeof nout, sizeof count, sizeof div},
                (const void *[]){&kind, &X, &xo, &Y, &yo, &r, &nout, &count, &div});
    clReleaseKernel(k);
}
#endif
