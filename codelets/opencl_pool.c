/* opencl_pool.c: OpenCL kernels of the pool codelet, every kind it has (max_pool, avg_pool,
 * max_pool_grad, max_pool_gather, avg_pool_grad) for float32 and float64, so the shared
 * support table's default (every step) holds for it. Windows and divisors follow pool_geom.h
 * (the host computes the geometry with it; the device loops repeat its two formulas). The
 * scatters run one work-item per image-channel plane, so no atomics on floats are needed. */
#include <limits.h>
#include "opencl_common.h"
#include "pool_geom.h"
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
static long TS(el)(long4 v, int i) { return i == 0 ? v.x : i == 1 ? v.y : v.z; }

/* pool_geom.h's tfc_pool_divisor */
static long TS(divisor)(int incl, long *lo, long4 in, long4 k, long4 pe)
{
    long n = 1;
    for (int i = 0; i < 3; i++) {
        long a = lo[i], b = lo[i] + TS(el)(k, i), m = TS(el)(in, i);
        if (incl) {
            if (b > m + TS(el)(pe, i)) b = m + TS(el)(pe, i);
        } else {
            if (a < 0) a = 0;
            if (b > m) b = m;
        }
        n *= b > a ? b - a : 0;
    }
    return n;
}

kernel void TS(pool)(int is_max, int incl, global T *x0, ulong xo, global T *y0, ulong yo,
                     global long *a0, ulong ao, int with_arg, long total, long4 in, long4 out,
                     long4 k, long4 s, long4 d, long4 pb, long4 pe)
{
    long g = get_global_id(0);
    if (g >= total) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    global long *arg = AT(a0, ao);
    long Q = out.x * out.y * out.z, P = in.x * in.y * in.z, plane = g / Q, q = g % Q;
    long o[3] = {q / (out.y * out.z), (q / out.z) % out.y, q % out.z}, lo[3];
    for (int i = 0; i < 3; i++) lo[i] = o[i] * TS(el)(s, i) - TS(el)(pb, i);
    double acc = is_max ? -INFINITY : 0;
    long best = -1;
    for (long j0 = 0; j0 < k.x; j0++)
        for (long j1 = 0; j1 < k.y; j1++)
            for (long j2 = 0; j2 < k.z; j2++) {
                long j[3] = {j0, j1, j2}, at = 0;
                int ok = 1;
                for (int i = 0; i < 3; i++) {
                    long p = lo[i] + j[i] * TS(el)(d, i);
                    ok &= p >= 0 && p < TS(el)(in, i);
                    at = at * TS(el)(in, i) + p;
                }
                if (!ok) continue;
                double v = x[plane * P + at];
                if (!is_max) {
                    acc += v;
                } else if (best < 0 || v > acc || (isnan(v) && !isnan(acc))) {
                    acc = v;
                    best = at;
                }
            }
    if (!is_max) {
        long n = TS(divisor)(incl, lo, in, k, pe);
        acc = n ? acc / (double)n : 0;
    } else if (with_arg) {
        arg[g] = best;
    }
    y[g] = (T)acc;
}

/* avg_pool_grad, one work-item per plane: dx[tap] += dy[o] / divisor(o) */
kernel void TS(avg_grad)(int incl, global T *g0, ulong go, global T *y0, ulong yo, long planes,
                         long4 in, long4 out, long4 k, long4 s, long4 pb, long4 pe)
{
    long pl = get_global_id(0);
    if (pl >= planes) return;
    long Q = out.x * out.y * out.z, P = in.x * in.y * in.z;
    global T *dy = (global T *)AT(g0, go) + pl * Q, *dx = (global T *)AT(y0, yo) + pl * P;
    for (long i = 0; i < P; i++) dx[i] = 0;
    for (long q = 0; q < Q; q++) {
        long o[3] = {q / (out.y * out.z), (q / out.z) % out.y, q % out.z}, lo[3];
        for (int i = 0; i < 3; i++) lo[i] = o[i] * TS(el)(s, i) - TS(el)(pb, i);
        long n = TS(divisor)(incl, lo, in, k, pe);
        double share = n ? (double)dy[q] / (double)n : 0;
        for (long j0 = 0; j0 < k.x; j0++)
            for (long j1 = 0; j1 < k.y; j1++)
                for (long j2 = 0; j2 < k.z; j2++) {
                    long j[3] = {j0, j1, j2}, at = 0;
                    int ok = 1;
                    for (int i = 0; i < 3; i++) {
                        long p = lo[i] + j[i];
                        ok &= p >= 0 && p < TS(el)(in, i);
                        at = at * TS(el)(in, i) + p;
                    }
                    if (ok) dx[at] = (T)((double)dx[at] + share);
                }
    }
}

/* max_pool_grad (scatter, one work-item per plane) and max_pool_gather (one per element) */
kernel void TS(route)(int scatter, global T *v0, ulong vo, global long *i0, ulong io,
                      global T *y0, ulong yo, long P, long Q, long n, global int *bad)
{
    long g = get_global_id(0);
    if (g >= n) return;
    global T *v = AT(v0, vo), *y = AT(y0, yo);
    global long *idx = AT(i0, io);
    if (!scatter) {
        long k = idx[g];
        if (k < 0 || k >= P) {
            atomic_min(bad, (int)g);
            y[g] = NAN;
        } else {
            y[g] = v[(g / Q) * P + k];
        }
        return;
    }
    for (long p = 0; p < P; p++) y[g * P + p] = 0;
    for (long q = 0; q < Q; q++) {
        long k = idx[g * Q + q];
        if (k == -1) continue; /* a window of padding only */
        if (k < 0 || k >= P) {
            atomic_min(bad, (int)(g * Q + q));
            continue;
        }
        y[g * P + k] += v[g * Q + q];
    }
}
);

static struct tfc_ocl_prog prog = {.family = "pool", .body = body};

static cl_long4 l4(const int64_t *v) { return (cl_long4){{v[0], v[1], v[2], 0}}; }

static int64_t plane_of(const struct tfc_kdesc *d)
{
    int64_t n = 1;
    for (int i = 2; i < d->rank; i++) n *= d->dims[i];
    return n;
}

static void route_opencl(void *buffers[], const struct tfc_kargs *a)
{
    cl_int scatter = a->kind == TFC_K_MAX_POOL_GRAD;
    const struct tfc_kdesc *dv = &a->d[0], *di = &a->d[1], *o = tfc_kout_desc(a, 0);
    cl_long P = plane_of(scatter ? o : dv), Q = plane_of(di);
    cl_long n = scatter ? (Q ? di->numel / Q : 0) : o->numel;
    cl_mem V, I, Y;
    cl_ulong vo, io, yo;
    tfc_ocl_buf(buffers, dv->buf, &V, &vo);
    tfc_ocl_buf(buffers, di->buf, &I, &io);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_mem B = tfc_ocl_bad_create(a);
    if (!B) return;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "route", dv->dtype, a, &q);
    if (k && !tfc_ocl_run(a, k, q, (size_t)n, 0, 11,
                          (size_t[]){sizeof scatter, sizeof V, sizeof vo, sizeof I, sizeof io,
                                     sizeof Y, sizeof yo, sizeof P, sizeof Q, sizeof n, sizeof B},
                          (const void *[]){&scatter, &V, &vo, &I, &io, &Y, &yo, &P, &Q, &n,
                                           &B})) {
        int64_t pos, value;
        if (tfc_ocl_bad_read(a, q, B, I, io, TFC_INT64, &pos, &value) == 1)
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE,
                            "index %lld at position %lld is outside [0, %lld)", (long long)value,
                            (long long)pos, (long long)P);
    }
    if (k) clReleaseKernel(k);
    clReleaseMemObject(B);
}

static void avg_grad_opencl(void *buffers[], const struct tfc_kargs *a,
                            const struct tfc_pool_geom *g)
{
    cl_mem G, Y;
    cl_ulong go, yo;
    tfc_ocl_buf(buffers, a->d[0].buf, &G, &go);
    tfc_ocl_buf(buffers, tfc_kout_desc(a, 0)->buf, &Y, &yo);
    cl_int incl = g->include_pad;
    cl_long planes = g->planes;
    cl_long4 in = l4(g->in), out = l4(g->out), k = l4(g->k), s = l4(g->s), pb = l4(g->pb),
             pe = l4(g->pe);
    cl_command_queue q;
    cl_kernel kr = tfc_ocl_kernel(&prog, "avg_grad", a->d[0].dtype, a, &q);
    if (!kr) return;
    tfc_ocl_run(a, kr, q, (size_t)planes, 0, 12,
                (size_t[]){sizeof incl, sizeof G, sizeof go, sizeof Y, sizeof yo, sizeof planes,
                           sizeof in, sizeof out, sizeof k, sizeof s, sizeof pb, sizeof pe},
                (const void *[]){&incl, &G, &go, &Y, &yo, &planes, &in, &out, &k, &s, &pb, &pe});
    clReleaseKernel(kr);
}

void tfc_pool_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (a->kind == TFC_K_MAX_POOL_GRAD || a->kind == TFC_K_MAX_POOL_GATHER) {
        route_opencl(buffers, a);
        return;
    }
    const struct tfc_kdesc *xd = a->kind == TFC_K_AVG_POOL_GRAD ? &a->d[1] : &a->d[0];
    struct tfc_pool_geom g;
    if (tfc_pool_geom_make(a->attrs, xd->rank, xd->dims, &g)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "pooling attributes do not fit the input");
        return;
    }
    if (a->kind == TFC_K_AVG_POOL_GRAD) {
        avg_grad_opencl(buffers, a, &g);
        return;
    }
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    cl_mem X, Y, A;
    cl_ulong xo, yo, ao = 0;
    tfc_ocl_buf(buffers, a->d[0].buf, &X, &xo);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_int is_max = a->kind == TFC_K_MAX_POOL, incl = g.include_pad, with_arg = a->n_out > 1;
    if (with_arg)
        tfc_ocl_buf(buffers, tfc_kout_desc(a, 1)->buf, &A, &ao);
    else
        A = Y; /* unused */
    cl_long total = o->numel;
    cl_long4 in = l4(g.in), out = l4(g.out), k = l4(g.k), s = l4(g.s), d = l4(g.d),
             pb = l4(g.pb), pe = l4(g.pe);
    cl_command_queue q;
    cl_kernel kr = tfc_ocl_kernel(&prog, "pool", xd->dtype, a, &q);
    if (!kr) return;
    tfc_ocl_run(a, kr, q, (size_t)total, 0, 17,
                (size_t[]){sizeof is_max, sizeof incl, sizeof X, sizeof xo, sizeof Y, sizeof yo,
                           sizeof A, sizeof ao, sizeof with_arg, sizeof total, sizeof in,
                           sizeof out, sizeof k, sizeof s, sizeof d, sizeof pb, sizeof pe},
                (const void *[]){&is_max, &incl, &X, &xo, &Y, &yo, &A, &ao, &with_arg, &total,
                                 &in, &out, &k, &s, &d, &pb, &pe});
    clReleaseKernel(kr);
}
#endif
