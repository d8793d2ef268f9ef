/* opencl_optimizer.c: OpenCL kernels of the fused optimizer updates and the learning-rate
 * schedule, mirroring optimizer.c: every update computed in double and stored in the
 * variable's type (float32, float64), float32 Adam without weight decay in float as
 * optimizer.c's fast path does. The scalars (learning rate, Adam's step count) are read back to
 * the host and the bias corrections computed there with the CPU's own libm, so the device
 * applies the same constants; contraction into FMA is off so the arithmetic matches. */
#include <math.h>
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

static int n_slots(int kind)
{
    switch (kind) {
    case TFC_K_APPLY_SGD: return 1;
    case TFC_K_APPLY_MOMENTUM:
    case TFC_K_APPLY_ADAGRAD: return 2;
    case TFC_K_APPLY_ADAM: return 3;
    case TFC_K_APPLY_RMSPROP: return 4;
    default: return 0;
    }
}

int tfc_opencl_optimizer_ok(const struct tfc_kargs *a)
{
    if (a->kind == TFC_K_LR_SCHEDULE)
        return a->n_in == 1 && tfc_kdtype_size(a->d[0].dtype) != 0 &&
               tfc_kout_desc(a, 0)->dtype == TFC_FLOAT32;
    int ns = n_slots(a->kind), dt = a->d[0].dtype;
    if (!ns || (dt != TFC_FLOAT32 && dt != TFC_FLOAT64)) return 0;
    if (a->n_in != ns + 2 + (a->kind == TFC_K_APPLY_ADAM)) return 0;
    for (int i = 1; i <= ns; i++) /* the slots and the gradient */
        if (a->d[i].dtype != dt || a->d[i].numel != a->d[0].numel) return 0;
    for (int i = ns + 1; i < a->n_in; i++) /* learning rate, step */
        if (a->d[i].numel != 1 || !tfc_kdtype_size(a->d[i].dtype)) return 0;
    return 1;
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

/* which: 0 sgd, 1 momentum, 2 adagrad, 3 rmsprop, 4 adam. No contraction into FMA: the CPU
 * build does none. */
static const char body[] = "#pragma OPENCL FP_CONTRACT OFF\n" CL_SRC(
kernel void TS(apply)(int which, global T *w0, ulong wo, global T *a0, ulong ao, global T *b0,
                      ulong bo, global T *c0, ulong co, global T *g0, ulong go, double lr,
                      double wd, int decoupled, double mom, int nesterov, double b1, double b2,
                      double eps, int centered, double bc1, double bc2, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global T *pw = AT(w0, wo), *s1 = AT(a0, ao), *s2 = AT(b0, bo), *s3 = AT(c0, co);
    global T *pg = AT(g0, go);
    double w = pw[i], g = pg[i];
    if (wd != 0 && decoupled) w *= 1 - lr * wd;
    else if (wd != 0) g += wd * w;
    if (which == 0) {
        w -= lr * g;
    } else if (which == 1) {
        double buf = mom * (double)s1[i] + g;
        s1[i] = (T)buf;
        w -= lr * (nesterov ? g + mom * buf : buf);
    } else if (which == 2) {
        double sum = (double)s1[i] + g * g;
        s1[i] = (T)sum;
        w -= lr * g / (sqrt(sum) + eps);
    } else if (which == 3) {
        double alpha = b1;
        double sq = alpha * (double)s1[i] + (1 - alpha) * g * g, avg;
        s1[i] = (T)sq;
        if (centered) {
            double ga = alpha * (double)s3[i] + (1 - alpha) * g;
            s3[i] = (T)ga;
            avg = sqrt(sq - ga * ga) + eps;
        } else {
            avg = sqrt(sq) + eps;
        }
        if (mom > 0) {
            double buf = mom * (double)s2[i] + g / avg;
            s2[i] = (T)buf;
            w -= lr * buf;
        } else {
            w -= lr * g / avg;
        }
    } else {
        double m = b1 * (double)s1[i] + (1 - b1) * g;
        double v = b2 * (double)s2[i] + (1 - b2) * g * g;
        s1[i] = (T)m;
        s2[i] = (T)v;
        w -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps);
    }
    pw[i] = (T)w;
}
);

static const char plain[] = CL_SRC(
kernel void adam_f32(global float *w0, ulong wo, global float *m0, ulong mo, global float *v0,
                     ulong vo, global float *g0, ulong go, float b1, float b2, float eps,
                     float step, float inv_bc2, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global float *w = AT(w0, wo), *m = AT(m0, mo), *v = AT(v0, vo), *g = AT(g0, go);
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    w[i] -= step * m[i] / (sqrt(v[i]) * inv_bc2 + eps);
}

kernel void lr_schedule(global void *s0, ulong so, int sdt, global float *y0, ulong yo,
                        int kind, double base, double gamma, double period, double low)
{
    if (get_global_id(0) != 0) return;
    global void *p = AT(s0, so);
    double step = sdt == 0 ? (double)((global float *)p)[0]
                : sdt == 1 ? ((global double *)p)[0]
                : sdt == 2 ? (double)((global int *)p)[0]
                : sdt == 3 ? (double)((global long *)p)[0]
                           : (double)((global uchar *)p)[0];
    double lr;
    if (kind == 0) {
        lr = base * pow(gamma, floor(step / period));
    } else if (kind == 1) {
        lr = base * pow(gamma, step / period);
    } else {
        double t = step < period ? step : period;
        lr = low + 0.5 * (base - low) * (1 + cos(3.14159265358979323846 * t / period));
    }
    ((global float *)AT(y0, yo))[0] = (float)lr;
}
);

static struct tfc_ocl_prog prog = {.family = "optimizer", .body = body, .plain = plain};

/* Scalar input i read back from the device, converted as optimizer.c's scalar_in does. */
static int scalar_in(const struct tfc_kargs *a, void *buffers[], cl_command_queue q, int i,
                     double *out)
{
    cl_mem M;
    cl_ulong off;
    unsigned char raw[8] = {0};
    tfc_ocl_buf(buffers, a->d[i].buf, &M, &off);
    cl_int err = clEnqueueReadBuffer(q, M, CL_TRUE, off, tfc_kdtype_size(a->d[i].dtype), raw, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "clEnqueueReadBuffer", err);
    *out = tfc_load_f64(raw, a->d[i].dtype, 0);
    return 0;
}

static void lr_schedule_opencl(const struct tfc_kargs *a, void *buffers[])
{
    cl_mem S, Y;
    cl_ulong so, yo;
    tfc_ocl_buf(buffers, a->d[0].buf, &S, &so);
    tfc_ocl_buf(buffers, tfc_kout_desc(a, 0)->buf, &Y, &yo);
    /* the kernel source compares kind with LR_STEP_DECAY (0) and LR_EXPONENTIAL (1) */
    cl_int sdt = a->d[0].dtype, kind = (cl_int)a->attrs[LR_SCHEDULE_KIND].i;
    cl_double base = a->attrs[LR_SCHEDULE_BASE].f, gamma = a->attrs[LR_SCHEDULE_GAMMA].f;
    cl_double period = a->attrs[LR_SCHEDULE_PERIOD].f, low = a->attrs[LR_SCHEDULE_FLOOR].f;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "lr_schedule", -1, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, 1, 0, 10,
                (size_t[]){sizeof S, sizeof so, sizeof sdt, sizeof Y, sizeof yo, sizeof kind,
                           sizeof base, sizeof gamma, sizeof period, sizeof low},
                (const void *[]){&S, &so, &sdt, &Y, &yo, &kind, &base, &gamma, &period, &low});
    clReleaseKernel(k);
}

void tfc_optimizer_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (a->kind == TFC_K_LR_SCHEDULE) {
        lr_schedule_opencl(a, buffers);
        return;
    }
    int ns = n_slots(a->kind), dt = a->d[0].dtype;
    cl_mem M[5];
    cl_ulong off[5];
    for (int i = 0; i < 4; i++) /* the variable and up to three slots; unused ones alias w */
        tfc_ocl_buf(buffers, a->d[i < ns ? i : 0].buf, &M[i], &off[i]);
    tfc_ocl_buf(buffers, a->d[ns].buf, &M[4], &off[4]); /* the gradient */
    cl_command_queue q;
    starpu_opencl_get_current_queue(&q);
    double lr, steps = 0;
    if (scalar_in(a, buffers, q, ns + 1, &lr)) return;
    if (a->kind == TFC_K_APPLY_ADAM && scalar_in(a, buffers, q, ns + 2, &steps)) return;
    double b1 = a->attrs[APPLY_BETA1].f, b2 = a->attrs[APPLY_BETA2].f, t = steps + 1;
    cl_long n = a->d[0].numel;
    cl_kernel k;
    if (a->kind == TFC_K_APPLY_ADAM && dt == TFC_FLOAT32 && a->attrs[APPLY_WEIGHT_DECAY].f == 0) {
        /* optimizer.c's adam_f32, constants rounded the same way */
        cl_float fb1 = (float)b1, fb2 = (float)b2, feps = (float)a->attrs[APPLY_EPS].f;
        cl_float step = (float)(lr / (1 - pow(fb1, t))), inv_bc2 = (float)(1 / sqrt(1 - pow(fb2, t)));
        if (!(k = tfc_ocl_kernel(&prog, "adam_f32", -1, a, &q))) return;
        tfc_ocl_run(a, k, q, (size_t)n, 0, 14,
                    (size_t[]){sizeof M[0], sizeof off[0], sizeof M[1], sizeof off[1],
                               sizeof M[2], sizeof off[2], sizeof M[4], sizeof off[4],
                               sizeof fb1, sizeof fb2, sizeof feps, sizeof step, sizeof inv_bc2,
                               sizeof n},
                    (const void *[]){&M[0], &off[0], &M[1], &off[1], &M[2], &off[2], &M[4],
                                     &off[4], &fb1, &fb2, &feps, &step, &inv_bc2, &n});
        clReleaseKernel(k);
        return;
    }
    cl_double bc1 = 1, bc2 = 1;
    if (a->kind == TFC_K_APPLY_ADAM) {
        bc1 = 1 - pow(b1, t);
        bc2 = 1 - pow(b2, t);
    }
    cl_int which = a->kind == TFC_K_APPLY_SGD ? 0 : a->kind == TFC_K_APPLY_MOMENTUM ? 1
                 : a->kind == TFC_K_APPLY_ADAGRAD ? 2 : a->kind == TFC_K_APPLY_RMSPROP ? 3 : 4;
    cl_int decoupled = a->attrs[APPLY_DECOUPLED].i != 0;
    cl_int nesterov = a->attrs[APPLY_NESTEROV].i != 0, centered = a->attrs[APPLY_CENTERED].i != 0;
    cl_double clr = lr, wd = a->attrs[APPLY_WEIGHT_DECAY].f, mom = a->attrs[APPLY_MOMENTUM].f;
    cl_double cb1 = b1, cb2 = b2;
    cl_double eps = a->attrs[APPLY_EPS].f;
    if (!(k = tfc_ocl_kernel(&prog, "apply", dt, a, &q))) return;
    tfc_ocl_run(a, k, q, (size_t)n, 0, 23,
                (size_t[]){sizeof which, sizeof M[0], sizeof off[0], sizeof M[1], sizeof off[1],
                           sizeof M[2], sizeof off[2], sizeof M[3], sizeof off[3], sizeof M[4],
                           sizeof off[4], sizeof clr, sizeof wd, sizeof decoupled, sizeof mom,
                           sizeof nesterov, sizeof cb1, sizeof cb2, sizeof eps, sizeof centered,
                           sizeof bc1, sizeof bc2, sizeof n},
                (const void *[]){&which, &M[0], &off[0], &M[1], &off[1], &M[2], &off[2], &M[3],
                                 &off[3], &M[4], &off[4], &clr, &wd, &decoupled, &mom,
                                 &nesterov, &cb1, &cb2, &eps, &centered, &bc1, &bc2, &n});
    clReleaseKernel(k);
}
#endif
