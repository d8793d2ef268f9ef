/* opencl_norm.c: OpenCL kernels of batch normalization (one work item per channel), its
 * gradient and moving-statistics update, and of layer normalization and its gradient (one work
 * item per row), float32 and float64, summing in double as codelets/norm.c does. The scalar
 * `training` input is read on the host (a blocking read of one value, as the optimizers read
 * their learning rate) and passed to the kernels as an int. */
#include "opencl_common.h"
#include "bcast.h" /* tfc_load_f64 */
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
kernel void TS(bn)(global T *x0, ulong xo, global T *g0, ulong go, global T *b0, ulong bo,
                   global T *m0, ulong mo, global T *v0, ulong vo, global T *y0, ulong yo,
                   global T *om0, ulong omo, global T *ov0, ulong ovo, long N, long C, long S,
                   double eps, int training)
{
    long c = get_global_id(0);
    if (c >= C) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    double mean, var;
    if (training) {
        double sum = 0, sq = 0;
        for (long n = 0; n < N; n++)
            for (long s = 0; s < S; s++) sum += x[(n * C + c) * S + s];
        mean = sum / (double)(N * S);
        for (long n = 0; n < N; n++)
            for (long s = 0; s < S; s++) {
                double d = x[(n * C + c) * S + s] - mean;
                sq += d * d;
            }
        var = sq / (double)(N * S);
    } else {
        mean = ((global T *)AT(m0, mo))[c];
        var = ((global T *)AT(v0, vo))[c];
    }
    double scale = ((global T *)AT(g0, go))[c] / sqrt(var + eps);
    double shift = ((global T *)AT(b0, bo))[c];
    for (long n = 0; n < N; n++)
        for (long s = 0; s < S; s++) {
            long i = (n * C + c) * S + s;
            y[i] = (T)(((double)x[i] - mean) * scale + shift);
        }
    ((global T *)AT(om0, omo))[c] = (T)mean;
    ((global T *)AT(ov0, ovo))[c] = (T)var;
}

kernel void TS(bn_grad)(global T *dy0, ulong dyo, global T *x0, ulong xo, global T *g0,
                        ulong go, global T *m0, ulong mo, global T *v0, ulong vo,
                        global T *dx0, ulong dxo, global T *o10, ulong o1o, global T *o20,
                        ulong o2o, global T *o30, ulong o3o, global T *o40, ulong o4o, long N,
                        long C, long S, double eps, int training)
{
    long c = get_global_id(0);
    if (c >= C) return;
    global T *dy = AT(dy0, dyo), *x = AT(x0, xo), *dx = AT(dx0, dxo);
    double mu = ((global T *)AT(m0, mo))[c];
    double invstd = 1 / sqrt((double)((global T *)AT(v0, vo))[c] + eps);
    double gm = ((global T *)AT(g0, go))[c], sdy = 0, sdyx = 0, m = (double)(N * S);
    for (long n = 0; n < N; n++)
        for (long s = 0; s < S; s++) {
            long i = (n * C + c) * S + s;
            sdy += dy[i];
            sdyx += (double)dy[i] * ((double)x[i] - mu) * invstd;
        }
    for (long n = 0; n < N; n++)
        for (long s = 0; s < S; s++) {
            long i = (n * C + c) * S + s;
            double v = dy[i];
            if (training) v = v - sdy / m - ((double)x[i] - mu) * invstd * sdyx / m;
            dx[i] = (T)(gm * invstd * v);
        }
    ((global T *)AT(o10, o1o))[c] = (T)sdyx;
    ((global T *)AT(o20, o2o))[c] = (T)sdy;
    ((global T *)AT(o30, o3o))[c] = (T)(training ? 0 : -gm * invstd * sdy);
    ((global T *)AT(o40, o4o))[c] = (T)(training ? 0 : -0.5 * gm * invstd * invstd * sdyx);
}

kernel void TS(bn_update)(global T *mm0, ulong mmo, global T *mv0, ulong mvo, global T *m0,
                          ulong mo, global T *v0, ulong vo, long C, double mom, double count)
{
    long c = get_global_id(0);
    if (c >= C) return;
    global T *mm = AT(mm0, mmo), *mv = AT(mv0, mvo);
    double mean = ((global T *)AT(m0, mo))[c], var = ((global T *)AT(v0, vo))[c];
    mm[c] = (T)((1 - mom) * (double)mm[c] + mom * mean);
    mv[c] = (T)((1 - mom) * (double)mv[c] + mom * var * count / (count - 1));
}

kernel void TS(ln)(global T *x0, ulong xo, global T *y0, ulong yo, global T *om0, ulong omo,
                   global T *ov0, ulong ovo, long rows, long len, double eps)
{
    long r = get_global_id(0);
    if (r >= rows) return;
    global T *x = AT(x0, xo), *y = AT(y0, yo);
    double sum = 0, sq = 0;
    for (long j = 0; j < len; j++) sum += x[r * len + j];
    double mean = sum / (double)len;
    for (long j = 0; j < len; j++) {
        double d = x[r * len + j] - mean;
        sq += d * d;
    }
    double var = sq / (double)len, invstd = 1 / sqrt(var + eps);
    for (long j = 0; j < len; j++) y[r * len + j] = (T)(((double)x[r * len + j] - mean) * invstd);
    ((global T *)AT(om0, omo))[r] = (T)mean;
    ((global T *)AT(ov0, ovo))[r] = (T)var;
}

kernel void TS(ln_grad)(global T *dy0, ulong dyo, global T *x0, ulong xo, global T *m0,
                        ulong mo, global T *v0, ulong vo, global T *dx0, ulong dxo, long rows,
                        long len, double eps)
{
    long r = get_global_id(0);
    if (r >= rows) return;
    global T *dy = AT(dy0, dyo), *x = AT(x0, xo), *dx = AT(dx0, dxo);
    double mu = ((global T *)AT(m0, mo))[r];
    double invstd = 1 / sqrt((double)((global T *)AT(v0, vo))[r] + eps), sdy = 0, sdyx = 0;
    for (long j = 0; j < len; j++) {
        sdy += dy[r * len + j];
        sdyx += (double)dy[r * len + j] * ((double)x[r * len + j] - mu) * invstd;
    }
    sdy /= (double)len;
    sdyx /= (double)len;
    for (long j = 0; j < len; j++) {
        double xh = ((double)x[r * len + j] - mu) * invstd;
        dx[r * len + j] = (T)(invstd * ((double)dy[r * len + j] - sdy - xh * sdyx));
    }
}
);

static struct tfc_ocl_prog prog = {.family = "norm", .body = body};

/* Kernel arguments: (cl_mem, offset) for each listed operand, then the scalars. */
struct args {
    int n;
    size_t sizes[32];
    const void *vals[32];
    cl_mem mem[12];
    cl_ulong off[12];
    int nm;
};

static void add_buf(struct args *g, void *buffers[], int buf)
{
    tfc_ocl_buf(buffers, buf, &g->mem[g->nm], &g->off[g->nm]);
    g->sizes[g->n] = sizeof(cl_mem), g->vals[g->n++] = &g->mem[g->nm];
    g->sizes[g->n] = sizeof(cl_ulong), g->vals[g->n++] = &g->off[g->nm++];
}

static void add_val(struct args *g, size_t size, const void *val)
{
    g->sizes[g->n] = size, g->vals[g->n++] = val;
}

/* The scalar input i (the training flag), read on the host. */
static int read_flag(const struct tfc_kargs *a, void *buffers[], cl_command_queue q, int i,
                     cl_int *flag)
{
    cl_mem M;
    cl_ulong off;
    unsigned char raw[8] = {0};
    tfc_ocl_buf(buffers, a->d[i].buf, &M, &off);
    cl_int err = clEnqueueReadBuffer(q, M, CL_TRUE, off, tfc_kdtype_size(a->d[i].dtype), raw, 0,
                                     NULL, NULL);
    if (err != CL_SUCCESS) return tfc_ocl_fail(a, "clEnqueueReadBuffer", err);
    *flag = tfc_load_f64(raw, a->d[i].dtype, 0) != 0;
    return 0;
}

static void launch(const struct tfc_kargs *a, const char *name, int dtype, size_t items,
                   const struct args *g)
{
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, name, dtype, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, items, 0, g->n, g->sizes, g->vals);
    clReleaseKernel(k);
}

void tfc_norm_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    struct args g = {0};
    cl_command_queue q;
    starpu_opencl_get_current_queue(&q);
    int bn = a->kind != TFC_K_LAYER_NORM && a->kind != TFC_K_LAYER_NORM_GRAD;
    int xi = a->kind == TFC_K_BATCH_NORM_UPDATE ? 5 : a->kind == TFC_K_BATCH_NORM ||
             a->kind == TFC_K_LAYER_NORM ? 0 : 1;
    const struct tfc_kdesc *xd = &a->d[xi];
    cl_long N = xd->dims[0], C = bn ? xd->dims[1] : 0, S = 1, rows = 1, len = 1;
    for (int d = 2; bn && d < xd->rank; d++) S *= xd->dims[d];
    int k = (int)a->attrs[LAYER_NORM_N_AXES].i;
    for (int d = 0; !bn && d < xd->rank; d++) *(d < xd->rank - k ? &rows : &len) *= xd->dims[d];
    cl_double eps = a->attrs[BATCH_NORM_EPSILON].f; /* LAYER_NORM_EPSILON is slot 0 too */
    cl_double mom = a->attrs[BATCH_NORM_UPDATE_MOMENTUM].f, count = (double)(N * S);
    cl_int training = 0;
    if (bn && read_flag(a, buffers, q, a->kind == TFC_K_BATCH_NORM_UPDATE ? 4 : 5, &training))
        return;
    int n_bufs = a->kind == TFC_K_BATCH_NORM_UPDATE ? 4 : a->n_in - (bn ? 1 : 0);
    for (int i = 0; i < n_bufs; i++) add_buf(&g, buffers, a->d[i].buf);
    for (int o = 0; a->kind != TFC_K_BATCH_NORM_UPDATE && o < a->n_out; o++)
        add_buf(&g, buffers, tfc_kout_desc(a, o)->buf);
    switch (a->kind) {
    case TFC_K_BATCH_NORM_UPDATE:
        if (!training) return; /* inference: the statistics stay */
        if (C > 0 && count < 2) {
            tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "batch_norm in training mode: %lld "
                            "value per channel in this batch; the unbiased variance of the "
                            "moving statistics needs at least 2", (long long)count);
            return;
        }
        add_val(&g, sizeof C, &C), add_val(&g, sizeof mom, &mom);
        add_val(&g, sizeof count, &count);
        launch(a, "bn_update", a->d[0].dtype, (size_t)C, &g);
        return;
    case TFC_K_BATCH_NORM:
    case TFC_K_BATCH_NORM_GRAD:
        add_val(&g, sizeof N, &N), add_val(&g, sizeof C, &C), add_val(&g, sizeof S, &S);
        add_val(&g, sizeof eps, &eps), add_val(&g, sizeof training, &training);
        launch(a, a->kind == TFC_K_BATCH_NORM ? "bn" : "bn_grad", xd->dtype, (size_t)C, &g);
        return;
    default:
        add_val(&g, sizeof rows, &rows), add_val(&g, sizeof len, &len);
        add_val(&g, sizeof eps, &eps);
        launch(a, a->kind == TFC_K_LAYER_NORM ? "ln" : "ln_grad", xd->dtype, (size_t)rows, &g);
    }
}
#endif
