/* norm.c: CPU kernels of batch normalization (per channel of x = [N, C, spatial...]; training or
 * inference mode read from a scalar input at run time), of its gradient, of the update of its
 * moving statistics (PyTorch's rule, unbiased variance), and of layer normalization over the
 * last axes with its gradient. Sums run in double; float32 and float64 share the loops. */
#include <math.h>
#include "kernel.h"
#include "bcast.h"
#include "opencl_common.h" /* tfc_opencl_can_execute */
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
void tfc_norm_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_norm.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_norm_cuda(void *buffers[], void *cl_arg); /* codelets/norm_cuda.cu */
#endif


/* x = [N, C, S...] seen as N x C x S: element (n, c, s) is at (n * C + c) * S + s. */
struct chan {
    int64_t n, c, s;
};

static struct chan chan_of(const struct tfc_kdesc *x)
{
    struct chan g = {x->dims[0], x->dims[1], 1};
    for (int d = 2; d < x->rank; d++) g.s *= x->dims[d];
    return g;
}

static int64_t at(const struct chan *g, int64_t n, int64_t c, int64_t s)
{
    return (n * g->c + c) * g->s + s;
}

static double scalar_in(void *buffers[], const struct tfc_kargs *a, int i)
{
    const void *p = tfc_kin(buffers, a, i);
    return p ? tfc_load_f64(p, a->d[i].dtype, 0) : 0.0;
}

/* Channel c's batch mean and biased variance (two passes). */
static void batch_stats(const void *x, int dt, const struct chan *g, int64_t c, double *mean,
                        double *var)
{
    double sum = 0, sq = 0, m = (double)(g->n * g->s);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t s = 0; s < g->s; s++) sum += tfc_load_f64(x, dt, at(g, n, c, s));
    *mean = sum / m;
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t s = 0; s < g->s; s++) {
            double d = tfc_load_f64(x, dt, at(g, n, c, s)) - *mean;
            sq += d * d;
        }
    *var = sq / m;
}

/* batch_norm(x, gamma, beta, moving_mean, moving_var, training) -> y, mean, var */
static void batch_norm(void *buffers[], const struct tfc_kargs *a)
{
    const struct tfc_kdesc *xd = &a->d[0];
    struct chan g = chan_of(xd);
    int dt = xd->dtype, training = scalar_in(buffers, a, 5) != 0;
    const void *x = tfc_kin(buffers, a, 0), *gamma = tfc_kin(buffers, a, 1);
    const void *beta = tfc_kin(buffers, a, 2), *mm = tfc_kin(buffers, a, 3);
    const void *mv = tfc_kin(buffers, a, 4);
    void *y = tfc_kout(buffers, a, 0), *mo = tfc_kout(buffers, a, 1), *vo = tfc_kout(buffers, a, 2);
    double eps = a->attrs[BATCH_NORM_EPSILON].f;
    if (training && g.n * g.s == 0 && g.c > 0) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "batch_norm in training mode: the batch "
                        "has no values per channel (x is empty), so it has no mean");
        return;
    }
    for (int64_t c = 0; c < g.c; c++) {
        double mean, var;
        if (training)
            batch_stats(x, dt, &g, c, &mean, &var);
        else
            mean = tfc_load_f64(mm, dt, c), var = tfc_load_f64(mv, dt, c);
        double scale = tfc_load_f64(gamma, dt, c) / sqrt(var + eps);
        double shift = tfc_load_f64(beta, dt, c);
        for (int64_t n = 0; n < g.n && y; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(&g, n, c, s);
                tfc_store_f64(y, dt, i, (tfc_load_f64(x, dt, i) - mean) * scale + shift);
            }
        tfc_store_f64(mo, dt, c, mean);
        tfc_store_f64(vo, dt, c, var);
    }
}

/* batch_norm_grad(dy, x, gamma, mean, var, training) -> dx, dgamma, dbeta, dmean, dvar; dmean
 * and dvar are the gradients of the moving statistics, which only inference mode reads. */
static void batch_norm_grad(void *buffers[], const struct tfc_kargs *a)
{
    const struct tfc_kdesc *xd = &a->d[1];
    struct chan g = chan_of(xd);
    int dt = xd->dtype, training = scalar_in(buffers, a, 5) != 0;
    const void *dy = tfc_kin(buffers, a, 0), *x = tfc_kin(buffers, a, 1);
    const void *gamma = tfc_kin(buffers, a, 2), *mean = tfc_kin(buffers, a, 3);
    const void *var = tfc_kin(buffers, a, 4);
    void *dx = tfc_kout(buffers, a, 0), *out[4];
    for (int k = 0; k < 4; k++) out[k] = tfc_kout(buffers, a, 1 + k);
    double eps = a->attrs[BATCH_NORM_EPSILON].f, m = (double)(g.n * g.s);
    for (int64_t c = 0; c < g.c; c++) {
        double mu = tfc_load_f64(mean, dt, c), invstd = 1 / sqrt(tfc_load_f64(var, dt, c) + eps);
        double gm = tfc_load_f64(gamma, dt, c), sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(&g, n, c, s);
                double d = tfc_load_f64(dy, dt, i);
                sdy += d;
                sdyx += d * (tfc_load_f64(x, dt, i) - mu) * invstd;
            }
        for (int64_t n = 0; n < g.n && dx; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(&g, n, c, s);
                double d = tfc_load_f64(dy, dt, i), v = d;
                if (training)
                    v = d - sdy / m - (tfc_load_f64(x, dt, i) - mu) * invstd * sdyx / m;
                tfc_store_f64(dx, dt, i, gm * invstd * v);
            }
        tfc_store_f64(out[0], dt, c, sdyx);
        tfc_store_f64(out[1], dt, c, sdy);
        tfc_store_f64(out[2], dt, c, training ? 0 : -gm * invstd * sdy);
        tfc_store_f64(out[3], dt, c, training ? 0 : -0.5 * gm * invstd * invstd * sdyx);
    }
}

/* batch_norm_update(moving_mean, moving_var, mean, var, training, x): in training mode only,
 * moving = (1 - momentum) moving + momentum batch, the variance made unbiased (M / (M - 1)). */
static void batch_norm_update(void *buffers[], const struct tfc_kargs *a)
{
    if (scalar_in(buffers, a, 4) == 0) return; /* inference: the statistics stay */
    const struct tfc_kdesc *xd = &a->d[5];
    struct chan g = chan_of(xd);
    int dt = a->d[0].dtype;
    void *mm = tfc_kin(buffers, a, 0), *mv = tfc_kin(buffers, a, 1);
    const void *mean = tfc_kin(buffers, a, 2), *var = tfc_kin(buffers, a, 3);
    double mom = a->attrs[BATCH_NORM_UPDATE_MOMENTUM].f, m = (double)(g.n * g.s);
    if (g.c > 0 && m < 2) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "batch_norm in training mode: %lld value "
                        "per channel in this batch; the unbiased variance of the moving "
                        "statistics needs at least 2", (long long)(g.n * g.s));
        return;
    }
    for (int64_t c = 0; c < g.c; c++) {
        double nm = (1 - mom) * tfc_load_f64(mm, dt, c) + mom * tfc_load_f64(mean, dt, c);
        double nv = (1 - mom) * tfc_load_f64(mv, dt, c) +
                    mom * tfc_load_f64(var, dt, c) * m / (m - 1);
        tfc_store_f64(mm, dt, c, nm);
        tfc_store_f64(mv, dt, c, nv);
    }
}

/* Layer norm's rows: `rows` leading indices of `len` normalized elements each. */
static void layer_rows(const struct tfc_kargs *a, int xi, int64_t *rows, int64_t *len)
{
    const struct tfc_kdesc *xd = &a->d[xi];
    int k = (int)a->attrs[LAYER_NORM_N_AXES].i;
    *rows = *len = 1;
    for (int d = 0; d < xd->rank; d++) *(d < xd->rank - k ? rows : len) *= xd->dims[d];
}

/* layer_norm(x) -> y, mean, var over the last n_axes dims */
static void layer_norm(void *buffers[], const struct tfc_kargs *a)
{
    int64_t rows, len;
    layer_rows(a, 0, &rows, &len);
    int dt = a->d[0].dtype;
    const void *x = tfc_kin(buffers, a, 0);
    void *y = tfc_kout(buffers, a, 0), *mo = tfc_kout(buffers, a, 1), *vo = tfc_kout(buffers, a, 2);
    double eps = a->attrs[LAYER_NORM_EPSILON].f;
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) sum += tfc_load_f64(x, dt, r * len + j);
        double mean = sum / (double)len; /* NaN for empty rows, as a mean of nothing */
        for (int64_t j = 0; j < len; j++) {
            double d = tfc_load_f64(x, dt, r * len + j) - mean;
            sq += d * d;
        }
        double var = sq / (double)len, invstd = 1 / sqrt(var + eps);
        for (int64_t j = 0; j < len && y; j++)
            tfc_store_f64(y, dt, r * len + j, (tfc_load_f64(x, dt, r * len + j) - mean) * invstd);
        tfc_store_f64(mo, dt, r, mean);
        tfc_store_f64(vo, dt, r, var);
    }
}

/* layer_norm_grad(dy, x, mean, var) -> dx = invstd (dy - mean(dy) - xhat mean(dy xhat)) */
static void layer_norm_grad(void *buffers[], const struct tfc_kargs *a)
{
    int64_t rows, len;
    layer_rows(a, 1, &rows, &len);
    int dt = a->d[1].dtype;
    const void *dy = tfc_kin(buffers, a, 0), *x = tfc_kin(buffers, a, 1);
    const void *mean = tfc_kin(buffers, a, 2), *var = tfc_kin(buffers, a, 3);
    void *dx = tfc_kout(buffers, a, 0);
    double eps = a->attrs[LAYER_NORM_EPSILON].f;
    for (int64_t r = 0; r < rows && dx; r++) {
        double mu = tfc_load_f64(mean, dt, r), invstd = 1 / sqrt(tfc_load_f64(var, dt, r) + eps);
        double sdy = 0, sdyx = 0;
        for (int64_t j = 0; j < len; j++) {
            double d = tfc_load_f64(dy, dt, r * len + j);
            sdy += d;
            sdyx += d * (tfc_load_f64(x, dt, r * len + j) - mu) * invstd;
        }
        sdy /= (double)len;
        sdyx /= (double)len;
        for (int64_t j = 0; j < len; j++) {
            double xh = (tfc_load_f64(x, dt, r * len + j) - mu) * invstd;
            double d = tfc_load_f64(dy, dt, r * len + j);
            tfc_store_f64(dx, dt, r * len + j, invstd * (d - sdy - xh * sdyx));
        }
    }
}

static void norm_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    switch (a->kind) {
    case TFC_K_BATCH_NORM: batch_norm(buffers, a); break;
    case TFC_K_BATCH_NORM_GRAD: batch_norm_grad(buffers, a); break;
    case TFC_K_BATCH_NORM_UPDATE: batch_norm_update(buffers, a); break;
    case TFC_K_LAYER_NORM: layer_norm(buffers, a); break;
    case TFC_K_LAYER_NORM_GRAD: layer_norm_grad(buffers, a); break;
    default: tfc_kernel_fail(a, TFC_ERR_INTERNAL, "norm codelet: kind %d is not its", a->kind);
    }
}

static struct starpu_perfmodel norm_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_norm",
};

struct starpu_codelet tfc_cl_norm = {
    .cpu_funcs = {norm_cpu},
    .cpu_funcs_name = {"norm_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_norm_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    /* every kind, float32 and float64: tfc_opencl_supports' default for unlisted codelets */
    .opencl_funcs = {tfc_norm_opencl},
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &norm_model,
    .name = "norm",
};
