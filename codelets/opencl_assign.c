/* opencl_assign.c: OpenCL kernels of the stateful ops, as assign.c does them: assign (a buffer
 * copy, any dtype), assign_add and assign_sub (float32/float64 in their own type, int32/int64
 * and uint8 through 64-bit integer arithmetic, wrapping on the store as the CPU does). */
#include "opencl_common.h"
#include "../src/tfc.h"

int tfc_opencl_assign_ok(const struct tfc_kargs *a)
{
    const struct tfc_kdesc *v = &a->d[0], *x = &a->d[1];
    if (a->n_in != 2 || x->dtype != v->dtype || x->numel != v->numel) return 0;
    if (a->kind == TFC_K_ASSIGN) return tfc_kdtype_size(v->dtype) != 0;
    if (a->kind != TFC_K_ASSIGN_ADD && a->kind != TFC_K_ASSIGN_SUB) return 0;
    return v->dtype == TFC_FLOAT32 || v->dtype == TFC_FLOAT64 || v->dtype == TFC_INT32 ||
           v->dtype == TFC_INT64 || v->dtype == TFC_UINT8;
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
kernel void TS(assign_arith)(global T *v0, ulong vo, global T *x0, ulong xo, T sign, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global T *v = AT(v0, vo), *x = AT(x0, xo);
    v[i] += sign * x[i];
}
);

static const char plain[] = CL_SRC(
kernel void assign_arith_int(global void *v0, ulong vo, global void *x0, ulong xo, int dt,
                             long sign, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    if (dt == 3) {
        global long *v = AT(v0, vo), *x = AT(x0, xo);
        v[i] = v[i] + sign * x[i];
    } else if (dt == 2) {
        global int *v = AT(v0, vo), *x = AT(x0, xo);
        v[i] = (int)((long)v[i] + sign * (long)x[i]);
    } else {
        global uchar *v = AT(v0, vo), *x = AT(x0, xo);
        v[i] = (uchar)((long)v[i] + sign * (long)x[i]);
    }
}
);

static struct tfc_ocl_prog prog = {.family = "assign", .body = body, .plain = plain};

void tfc_assign_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *d = &a->d[0];
    cl_mem V, X;
    cl_ulong vo, xo;
    tfc_ocl_buf(buffers, d->buf, &V, &vo);
    tfc_ocl_buf(buffers, a->d[1].buf, &X, &xo);
    cl_long n = d->numel;
    cl_command_queue q;
    if (a->kind == TFC_K_ASSIGN) {
        if (a->d[1].buf == d->buf) return; /* v = v: nothing to move (and no overlapping copy) */
        tfc_ocl_copy(a, buffers, a->d[1].buf, d->buf, (size_t)n * tfc_kdtype_size(d->dtype));
        return;
    }
    int sub = a->kind == TFC_K_ASSIGN_SUB;
    cl_kernel k;
    if (d->dtype == TFC_FLOAT32 || d->dtype == TFC_FLOAT64) {
        float sf = sub ? -1.0f : 1.0f;
        double sd = sub ? -1.0 : 1.0;
        int f32 = d->dtype == TFC_FLOAT32;
        if (!(k = tfc_ocl_kernel(&prog, "assign_arith", d->dtype, a, &q))) return;
        tfc_ocl_run(a, k, q, (size_t)n, 0, 6,
                    (size_t[]){sizeof V, sizeof vo, sizeof X, sizeof xo,
                               f32 ? sizeof sf : sizeof sd, sizeof n},
                    (const void *[]){&V, &vo, &X, &xo, f32 ? (void *)&sf : (void *)&sd, &n});
    } else {
        cl_int dt = d->dtype;
        cl_long sign = sub ? -1 : 1;
        if (!(k = tfc_ocl_kernel(&prog, "assign_arith_int", -1, a, &q))) return;
        tfc_ocl_run(a, k, q, (size_t)n, 0, 7,
                    (size_t[]){sizeof V, sizeof vo, sizeof X, sizeof xo, sizeof dt, sizeof sign,
                               sizeof n},
                    (const void *[]){&V, &vo, &X, &xo, &dt, &sign, &n});
    }
    clReleaseKernel(k);
}
#endif
