/* opencl_dropout.c: OpenCL kernels of the dropout codelet, both kinds (dropout, dropout_grad),
 * float32 and float64: one work-item per element, each recomputing its word from philox.h's
 * own text, so the OpenCL worker drops exactly the CPU's units and multiplies by the same
 * dtype-rounded scale (a single IEEE multiply: the same bits). The step and training are read
 * on the device. It covers every step, so tfc_opencl_supports' default holds for it. */
#include "opencl_common.h"
#include "philox.h"
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = TFC_PHILOX_CL_SOURCE CL_SRC(
kernel void TS(dropout)(global T *x0, ulong xo, global T *y0, ulong yo, global long *s0,
                        ulong so, global float *t0, ulong to, long n, ulong seed,
                        uint threshold, T scale)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    ulong step = (ulong)*(global long *)AT(s0, so);
    float training = *(global float *)AT(t0, to);
    if (training == 0)
        y[i] = x[i];
    else
        y[i] = tfc_dropout_keep(seed, step, (ulong)i, threshold) ? x[i] * scale : (T)0;
}
);

static struct tfc_ocl_prog prog = {.family = "dropout", .body = body};

void tfc_dropout_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *out = tfc_kout_desc(a, 0);
    cl_mem X, Y, S, R;
    cl_ulong xo, yo, so, ro;
    tfc_ocl_buf(buffers, a->d[0].buf, &X, &xo);
    tfc_ocl_buf(buffers, out->buf, &Y, &yo);
    tfc_ocl_buf(buffers, a->d[1].buf, &S, &so);
    tfc_ocl_buf(buffers, a->d[2].buf, &R, &ro);
    double rate = a->attrs[DROPOUT_RATE].f, scale = 1.0 / (1.0 - rate);
    cl_float scale32 = (cl_float)scale;
    cl_double scale64 = scale;
    int f32 = out->dtype == TFC_FLOAT32;
    cl_long n = out->numel;
    cl_ulong seed = (cl_ulong)a->attrs[DROPOUT_SEED].i;
    cl_uint threshold = tfc_dropout_threshold(rate);
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "dropout", f32 ? 0 : 1, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, (size_t)n, 0, 12,
                (size_t[]){sizeof X, sizeof xo, sizeof Y, sizeof yo, sizeof S, sizeof so,
                           sizeof R, sizeof ro, sizeof n, sizeof seed, sizeof threshold,
                           f32 ? sizeof scale32 : sizeof scale64},
                (const void *[]){&X, &xo, &Y, &yo, &S, &so, &R, &ro, &n, &seed, &threshold,
                                 f32 ? (const void *)&scale32 : (const void *)&scale64});
    clReleaseKernel(k);
}
#endif
