/* opencl_conv.c: OpenCL kernels of conv, conv_backprop_input and conv_backprop_filter, float32
 * and float64: direct, one work item per output element (y, dx or dw), summing in double over
 * the terms of the definition. Correct rather than fast; every step of the conv codelet is
 * implemented, so the generic support check (codelets/opencl_support.c) admits them all. */
#include "opencl_common.h"
#include "conv_geom.h"
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

/* Geometry vectors (x, y, z: the three spatial dims, w unused): in, kr (kernel), ou (output),
 * st (stride), dl (dilation), pd (padding before). ch: N, C, K, C/groups; kg: K/groups. */
static const char body[] = CL_SRC(
kernel void TS(conv)(int kind, global T *a0, ulong ao, global T *b0, ulong bo, global T *y0,
                     ulong yo, long total, long4 ch, long kg, long4 in, long4 kr, long4 ou,
                     long4 st, long4 dl, long4 pd)
{
    long g = get_global_id(0);
    if (g >= total) return;
    global T *A = AT(a0, ao), *B = AT(b0, bo), *Y = AT(y0, yo);
    long cin = ch.y, cout = ch.z, cg = ch.w;
    long ivol = in.x * in.y * in.z, kvol = kr.x * kr.y * kr.z, ovol = ou.x * ou.y * ou.z;
    double s = 0;
    if (kind == 0) { /* y[n,k,o] = sum x[n,c,i] w[k,c',kk]; A x, B w */
        long o = g % ovol, k = g / ovol % cout, n = g / ovol / cout;
        long o2 = o % ou.z, o1 = o / ou.z % ou.y, o0 = o / ou.z / ou.y;
        for (long cl = 0; cl < cg; cl++) {
            long c = k / kg * cg + cl;
            for (long k0 = 0; k0 < kr.x; k0++)
                for (long k1 = 0; k1 < kr.y; k1++)
                    for (long k2 = 0; k2 < kr.z; k2++) {
                        long i0 = o0 * st.x - pd.x + k0 * dl.x, i1 = o1 * st.y - pd.y + k1 * dl.y;
                        long i2 = o2 * st.z - pd.z + k2 * dl.z;
                        if (i0 < 0 || i0 >= in.x || i1 < 0 || i1 >= in.y || i2 < 0 || i2 >= in.z)
                            continue;
                        s += (double)A[(n * cin + c) * ivol + (i0 * in.y + i1) * in.z + i2] *
                             (double)B[(k * cg + cl) * kvol + (k0 * kr.y + k1) * kr.z + k2];
                    }
        }
    } else if (kind == 1) { /* dx[n,c,i] = sum dy[n,k,o] w[k,c',kk]; A dy, B w */
        long i = g % ivol, c = g / ivol % cin, n = g / ivol / cin;
        long i2 = i % in.z, i1 = i / in.z % in.y, i0 = i / in.z / in.y, cl = c % cg;
        for (long kl = 0; kl < kg; kl++) {
            long k = c / cg * kg + kl;
            for (long k0 = 0; k0 < kr.x; k0++)
                for (long k1 = 0; k1 < kr.y; k1++)
                    for (long k2 = 0; k2 < kr.z; k2++) {
                        long t0 = i0 + pd.x - k0 * dl.x, t1 = i1 + pd.y - k1 * dl.y;
                        long t2 = i2 + pd.z - k2 * dl.z;
                        if (t0 < 0 || t1 < 0 || t2 < 0 || t0 % st.x || t1 % st.y || t2 % st.z)
                            continue;
                        long o0 = t0 / st.x, o1 = t1 / st.y, o2 = t2 / st.z;
                        if (o0 >= ou.x || o1 >= ou.y || o2 >= ou.z) continue;
                        s += (double)A[(n * cout + k) * ovol + (o0 * ou.y + o1) * ou.z + o2] *
                             (double)B[(k * cg + cl) * kvol + (k0 * kr.y + k1) * kr.z + k2];
                    }
        }
    } else { /* dw[k,c',kk] = sum x[n,c,i] dy[n,k,o] over images and outputs; A x, B dy */
        long kk = g % kvol, cl = g / kvol % cg, k = g / kvol / cg, c = k / kg * cg + cl;
        long k2 = kk % kr.z, k1 = kk / kr.z % kr.y, k0 = kk / kr.z / kr.y;
        for (long n = 0; n < ch.x; n++)
            for (long o0 = 0; o0 < ou.x; o0++)
                for (long o1 = 0; o1 < ou.y; o1++)
                    for (long o2 = 0; o2 < ou.z; o2++) {
                        long i0 = o0 * st.x - pd.x + k0 * dl.x, i1 = o1 * st.y - pd.y + k1 * dl.y;
                        long i2 = o2 * st.z - pd.z + k2 * dl.z;
                        if (i0 < 0 || i0 >= in.x || i1 < 0 || i1 >= in.y || i2 < 0 || i2 >= in.z)
                            continue;
                        s += (double)A[(n * cin + c) * ivol + (i0 * in.y + i1) * in.z + i2] *
                             (double)B[(n * cout + k) * ovol + (o0 * ou.y + o1) * ou.z + o2];
                    }
    }
    Y[g] = (T)s;
}
);

static struct tfc_ocl_prog prog = {.family = "conv", .body = body};

static cl_long4 vec3(const int64_t *v)
{
    cl_long4 r = {{v[0], v[1], v[2], 0}};
    return r;
}

void tfc_conv_opencl(void *buffers[], void *cl_arg);

void tfc_conv_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    struct tfc_conv_geom g;
    struct tfc_conv_3d t;
    char msg[200];
    if (tfc_conv_geom_of(a, &g, msg, sizeof msg)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "convolution geometry: %s", msg);
        return;
    }
    tfc_conv_geom_3d(&g, &t);
    cl_mem A, B, Y;
    cl_ulong ao, bo, yo;
    tfc_ocl_buf(buffers, a->d[0].buf, &A, &ao);
    tfc_ocl_buf(buffers, a->d[1].buf, &B, &bo);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_int kind = a->kind == TFC_K_CONV ? 0 : a->kind == TFC_K_CONV_BP_INPUT ? 1 : 2;
    cl_long total = o->numel, kg = g.out_ch / g.groups;
    cl_long4 ch = {{g.batch, g.in_ch, g.out_ch, g.in_ch / g.groups}};
    cl_long4 in = vec3(t.in), kr = vec3(t.k), ou = vec3(t.o), st = vec3(t.s), dl = vec3(t.d);
    cl_long4 pd = vec3(t.p);
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "conv", o->dtype, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, (size_t)total, 0, 16,
                (size_t[]){sizeof kind, sizeof A, sizeof ao, sizeof B, sizeof bo, sizeof Y,
                           sizeof yo, sizeof total, sizeof ch, sizeof kg, sizeof in, sizeof kr,
                           sizeof ou, sizeof st, sizeof dl, sizeof pd},
                (const void *[]){&kind, &A, &ao, &B, &bo, &Y, &yo, &total, &ch, &kg, &in, &kr,
                                 &ou, &st, &dl, &pd});
    clReleaseKernel(k);
}
#endif
