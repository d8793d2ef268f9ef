/* opencl_pad.c: OpenCL kernels of the pad codelet, every kind it has: pad for any dtype (elements
 * copied as bytes, the constant given as the dtype's bytes) and pad_grad for float32 and
 * float64 (one work-item loops as the CPU does: a work-item per element of dy would need float
 * atomics). Sources follow pad_src.h, whose formula the device code repeats. It covers every
 * step, so tfc_opencl_supports' default for codelets it does not list holds. */
#include <string.h>
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

/* pad_src.h's tfc_pad_src, and the flat source of output element `flat` (-1: the constant).
 * pad_bytes ignores T: the host always takes its _f32 instance, for every dtype. */
static const char body[] = CL_SRC(
static long TS(pad_el)(long8 v, int i)
{
    switch (i) {
    case 0: return v.s0; case 1: return v.s1; case 2: return v.s2; case 3: return v.s3;
    case 4: return v.s4; case 5: return v.s5; case 6: return v.s6; default: return v.s7;
    }
}

static long TS(pad_source)(long flat, int rank, long8 in, long8 out, long8 begin, int mode)
{
    long src = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
        long n = TS(pad_el)(in, d), o = flat % TS(pad_el)(out, d), i;
        flat /= TS(pad_el)(out, d);
        i = o - TS(pad_el)(begin, d);
        if (i < 0 || i >= n) {
            if (mode == 1) i = i < 0 ? -i : 2 * (n - 1) - i;
            else if (mode == 2) i = i < 0 ? 0 : n - 1;
            else return -1;
        }
        src += i * stride;
        stride *= n;
    }
    return src;
}

kernel void TS(pad_bytes)(global uchar *x0, ulong xo, global uchar *y0, ulong yo, int es,
                          ulong value, long total, int rank, long8 in, long8 out,
                          long8 begin, int mode)
{
    long g = get_global_id(0);
    if (g >= total) return;
    global uchar *x = x0 + xo, *y = y0 + yo + g * es;
    long s = TS(pad_source)(g, rank, in, out, begin, mode);
    for (int b = 0; b < es; b++)
        y[b] = s >= 0 ? x[s * es + b] : (uchar)(value >> (8 * b));
}

kernel void TS(pad_grad)(global T *g0, ulong go, global T *y0, ulong yo, long n_dy, long n_dx,
                         int rank, long8 in, long8 out, long8 begin, int mode)
{
    if (get_global_id(0) != 0) return;
    global T *dy = AT(g0, go), *dx = AT(y0, yo);
    for (long i = 0; i < n_dx; i++) dx[i] = 0;
    for (long k = 0; k < n_dy; k++) {
        long s = TS(pad_source)(k, rank, in, out, begin, mode);
        if (s >= 0) dx[s] += dy[k];
    }
}
);

static struct tfc_ocl_prog prog = {.family = "pad", .body = body};

static cl_long8 l8(const struct tfc_kdesc *d)
{
    cl_long8 v = {{0}};
    for (int i = 0; i < d->rank; i++) v.s[i] = d->dims[i];
    return v;
}

void tfc_pad_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    int grad = a->kind == TFC_K_PAD_GRAD;
    const struct tfc_kdesc *x = grad ? tfc_kout_desc(a, 0) : &a->d[0];
    const struct tfc_kdesc *y = grad ? &a->d[0] : tfc_kout_desc(a, 0);
    cl_long8 in = l8(x), out = l8(y), begin = {{0}};
    for (int i = 0; i < x->rank; i++) begin.s[i] = a->attrs[PAD_BEGIN].v[i];
    cl_int rank = x->rank, mode = (cl_int)a->attrs[PAD_MODE].i;
    cl_mem I, O;
    cl_ulong io, oo;
    tfc_ocl_buf(buffers, a->d[0].buf, &I, &io);
    tfc_ocl_buf(buffers, tfc_kout_desc(a, 0)->buf, &O, &oo);
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, grad ? "pad_grad" : "pad_bytes", grad ? y->dtype : 0, a,
                                 &q);
    if (!k) return;
    if (grad) {
        cl_long n_dy = y->numel, n_dx = x->numel;
        tfc_ocl_run(a, k, q, 1, 0, 11,
                    (size_t[]){sizeof I, sizeof io, sizeof O, sizeof oo, sizeof n_dy,
                               sizeof n_dx, sizeof rank, sizeof in, sizeof out, sizeof begin,
                               sizeof mode},
                    (const void *[]){&I, &io, &O, &oo, &n_dy, &n_dx, &rank, &in, &out, &begin,
                                     &mode});
    } else {
        cl_int es = (cl_int)tfc_kdtype_size(y->dtype);
        unsigned char raw[8] = {0};
        tfc_store_f64(raw, y->dtype, 0, a->attrs[PAD_VALUE].f);
        cl_ulong value = 0;
        for (int b = 0; b < 8; b++) value |= (cl_ulong)raw[b] << (8 * b); /* little-endian */
        cl_long total = y->numel;
        tfc_ocl_run(a, k, q, (size_t)total, 0, 12,
                    (size_t[]){sizeof I, sizeof io, sizeof O, sizeof oo, sizeof es, sizeof value,
                               sizeof total, sizeof rank, sizeof in, sizeof out, sizeof begin,
                               sizeof mode},
                    (const void *[]){&I, &io, &O, &oo, &es, &value, &total, &rank, &in, &out,
                                     &begin, &mode});
    }
    clReleaseKernel(k);
}
#endif
