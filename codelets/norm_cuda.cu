/* norm_cuda.cu: CUDA kernels of the norm codelet (batch_norm, batch_norm_grad,
 * batch_norm_update, layer_norm, layer_norm_grad), float32 and float64, as codelets/norm.c
 * computes them: one thread per channel (batch norm) or per row (layer norm), sums in double
 * in the CPU's order. The scalar `training` input is read on the device by every thread, so
 * nothing synchronizes, except the rare update of a batch with fewer than 2 values per
 * channel, which reads it on the host to decide whether that is an error. */
#include "cuda_common.h"

struct nc_geom {
    int64_t n, c, s;
};

static __device__ int64_t at(const nc_geom &g, int64_t n, int64_t c, int64_t s)
{
    return (n * g.c + c) * g.s + s;
}

static __global__ void bn_kernel(nc_geom g, int dt, const void *x, const void *gamma,
                                 const void *beta, const void *mm, const void *mv,
                                 const void *flag, int fdt, void *y, void *mo, void *vo,
                                 double eps)
{
    int training = tfc_cu_ld_f64(flag, fdt, 0) != 0;
    double m = (double)(g.n * g.s);
    TFC_CU_LOOP(c, g.c) {
        double mean, var;
        if (training) {
            double sum = 0, sq = 0;
            for (int64_t n = 0; n < g.n; n++)
                for (int64_t s = 0; s < g.s; s++) sum += tfc_cu_ld_f64(x, dt, at(g, n, c, s));
            mean = sum / m;
            for (int64_t n = 0; n < g.n; n++)
                for (int64_t s = 0; s < g.s; s++) {
                    double d = tfc_cu_ld_f64(x, dt, at(g, n, c, s)) - mean;
                    sq += d * d;
                }
            var = sq / m;
        } else {
            mean = tfc_cu_ld_f64(mm, dt, c);
            var = tfc_cu_ld_f64(mv, dt, c);
        }
        double scale = tfc_cu_ld_f64(gamma, dt, c) / sqrt(var + eps);
        double shift = tfc_cu_ld_f64(beta, dt, c);
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(g, n, c, s);
                tfc_cu_st_f64(y, dt, i, (tfc_cu_ld_f64(x, dt, i) - mean) * scale + shift);
            }
        tfc_cu_st_f64(mo, dt, c, mean);
        tfc_cu_st_f64(vo, dt, c, var);
    }
}

/* outputs: dx, dgamma, dbeta, dmoving_mean, dmoving_var */
static __global__ void bn_grad_kernel(nc_geom g, int dt, const void *dy, const void *x,
                                      const void *gamma, const void *mean, const void *var,
                                      const void *flag, int fdt, void *dx, void *dg, void *db,
                                      void *dm, void *dv, double eps)
{
    int training = tfc_cu_ld_f64(flag, fdt, 0) != 0;
    double m = (double)(g.n * g.s);
    TFC_CU_LOOP(c, g.c) {
        double mu = tfc_cu_ld_f64(mean, dt, c), invstd = 1 / sqrt(tfc_cu_ld_f64(var, dt, c) + eps);
        double gm = tfc_cu_ld_f64(gamma, dt, c), sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(g, n, c, s);
                double d = tfc_cu_ld_f64(dy, dt, i);
                sdy += d;
                sdyx += d * (tfc_cu_ld_f64(x, dt, i) - mu) * invstd;
            }
        for (int64_t n = 0; n < g.n; n++)
            for (int64_t s = 0; s < g.s; s++) {
                int64_t i = at(g, n, c, s);
                double v = tfc_cu_ld_f64(dy, dt, i);
                if (training) v = v - sdy / m - (tfc_cu_ld_f64(x, dt, i) - mu) * invstd * sdyx / m;
                tfc_cu_st_f64(dx, dt, i, gm * invstd * v);
            }
        tfc_cu_st_f64(dg, dt, c, sdyx);
        tfc_cu_st_f64(db, dt, c, sdy);
        tfc_cu_st_f64(dm, dt, c, training ? 0 : -gm * invstd * sdy);
        tfc_cu_st_f64(dv, dt, c, training ? 0 : -0.5 * gm * invstd * invstd * sdyx);
    }
}

static __global__ void bn_update_kernel(int64_t C, int dt, void *mm, void *mv, const void *mean,
                                        const void *var, const void *flag, int fdt, double mom,
                                        double count)
{
    if (tfc_cu_ld_f64(flag, fdt, 0) == 0) return; /* inference: the statistics stay */
    TFC_CU_LOOP(c, C) {
        double nm = (1 - mom) * tfc_cu_ld_f64(mm, dt, c) + mom * tfc_cu_ld_f64(mean, dt, c);
        double nv = (1 - mom) * tfc_cu_ld_f64(mv, dt, c) +
                    mom * tfc_cu_ld_f64(var, dt, c) * count / (count - 1);
        tfc_cu_st_f64(mm, dt, c, nm);
        tfc_cu_st_f64(mv, dt, c, nv);
    }
}

static __global__ void ln_kernel(int64_t rows, int64_t len, int dt, const void *x, void *y,
                                 void *mo, void *vo, double eps)
{
    TFC_CU_LOOP(r, rows) {
        double sum = 0, sq = 0;
        for (int64_t j = 0; j < len; j++) sum += tfc_cu_ld_f64(x, dt, r * len + j);
        double mean = sum / (double)len;
        for (int64_t j = 0; j < len; j++) {
            double d = tfc_cu_ld_f64(x, dt, r * len + j) - mean;
            sq += d * d;
        }
        double var = sq / (double)len, invstd = 1 / sqrt(var + eps);
        for (int64_t j = 0; j < len && y; j++)
            tfc_cu_st_f64(y, dt, r * len + j, (tfc_cu_ld_f64(x, dt, r * len + j) - mean) * invstd);
        tfc_cu_st_f64(mo, dt, r, mean);
        tfc_cu_st_f64(vo, dt, r, var);
    }
}

static __global__ void ln_grad_kernel(int64_t rows, int64_t len, int dt, const void *dy,
                                      const void *x, const void *mean, const void *var, void *dx,
                                      double eps)
{
    TFC_CU_LOOP(r, rows) {
        double mu = tfc_cu_ld_f64(mean, dt, r), invstd = 1 / sqrt(tfc_cu_ld_f64(var, dt, r) + eps);
        double sdy = 0, sdyx = 0;
        for (int64_t j = 0; j < len; j++) {
            double d = tfc_cu_ld_f64(dy, dt, r * len + j);
            sdy += d;
            sdyx += d * (tfc_cu_ld_f64(x, dt, r * len + j) - mu) * invstd;
        }
        sdy /= (double)len;
        sdyx /= (double)len;
        for (int64_t j = 0; j < len; j++) {
            double xh = (tfc_cu_ld_f64(x, dt, r * len + j) - mu) * invstd;
            tfc_cu_st_f64(dx, dt, r * len + j,
                          invstd * (tfc_cu_ld_f64(dy, dt, r * len + j) - sdy - xh * sdyx));
        }
    }
}

static nc_geom geom_of(const struct tfc_kdesc *x)
{
    nc_geom g = {x->dims[0], x->dims[1], 1};
    for (int d = 2; d < x->rank; d++) g.s *= x->dims[d];
    return g;
}

/* The scalar input i (the training flag) read on the host: only for the rare batches that
 * are an error in training mode. -1 when the read failed (recorded). */
static int host_flag(void *buffers[], const struct tfc_kargs *a, int i, cudaStream_t s)
{
    unsigned char raw[8] = {0};
    if (tfc_cu_check(a, cudaMemcpyAsync(raw, tfc_kin(buffers, a, i),
                                        tfc_kdtype_size(a->d[i].dtype), cudaMemcpyDeviceToHost,
                                        s), "cudaMemcpyAsync") ||
        tfc_cu_check(a, cudaStreamSynchronize(s), "cudaStreamSynchronize"))
        return -1;
    return tfc_cu_ld_f64(raw, a->d[i].dtype, 0) != 0;
}

/* batch_norm_update: a batch of fewer than 2 values per channel fails in training mode only. */
static void update_cuda(void *buffers[], const struct tfc_kargs *a, cudaStream_t s)
{
    nc_geom g = geom_of(&a->d[5]);
    double count = (double)(g.n * g.s);
    if (g.c > 0 && count < 2) {
        if (host_flag(buffers, a, 4, s) == 1)
            tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "batch_norm in training mode: %lld "
                            "value per channel in this batch; the unbiased variance of the "
                            "moving statistics needs at least 2", (long long)count);
        return;
    }
    bn_update_kernel<<<tfc_cu_blocks(g.c), TFC_CU_THREADS, 0, s>>>(
        g.c, a->d[0].dtype, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1),
        tfc_kin(buffers, a, 2), tfc_kin(buffers, a, 3), tfc_kin(buffers, a, 4), a->d[4].dtype,
        a->attrs[BATCH_NORM_UPDATE_MOMENTUM].f, count);
    tfc_cu_check_launch(a, "batch_norm_update");
}

/* Layer norm's rows and their length (the last n_axes dims) for x = operand xi. */
static void rows_of(const struct tfc_kargs *a, int xi, int64_t *rows, int64_t *len)
{
    const struct tfc_kdesc *xd = &a->d[xi];
    int k = (int)a->attrs[LAYER_NORM_N_AXES].i;
    *rows = *len = 1;
    for (int d = 0; d < xd->rank; d++) *(d < xd->rank - k ? rows : len) *= xd->dims[d];
}

extern "C" void tfc_norm_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    double eps = a->attrs[BATCH_NORM_EPSILON].f; /* LAYER_NORM_EPSILON is slot 0 too */
    void *o[5] = {0};
    for (int k = 0; k < a->n_out && k < 5; k++) o[k] = tfc_kout(buffers, a, k);
    int64_t rows, len;
    switch (a->kind) {
    case TFC_K_BATCH_NORM: {
        nc_geom g = geom_of(&a->d[0]);
        int flag = g.n * g.s == 0 && g.c > 0 ? host_flag(buffers, a, 5, s) : 0;
        if (flag) { /* an empty batch has no mean (norm.c's message) */
            if (flag == 1)
                tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "batch_norm in training mode: the "
                                "batch has no values per channel (x is empty), so it has no "
                                "mean");
            return;
        }
        bn_kernel<<<tfc_cu_blocks(g.c), TFC_CU_THREADS, 0, s>>>(
            g, a->d[0].dtype, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1),
            tfc_kin(buffers, a, 2), tfc_kin(buffers, a, 3), tfc_kin(buffers, a, 4),
            tfc_kin(buffers, a, 5), a->d[5].dtype, o[0], o[1], o[2], eps);
        break;
    }
    case TFC_K_BATCH_NORM_GRAD: {
        nc_geom g = geom_of(&a->d[1]);
        bn_grad_kernel<<<tfc_cu_blocks(g.c), TFC_CU_THREADS, 0, s>>>(
            g, a->d[1].dtype, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1),
            tfc_kin(buffers, a, 2), tfc_kin(buffers, a, 3), tfc_kin(buffers, a, 4),
            tfc_kin(buffers, a, 5), a->d[5].dtype, o[0], o[1], o[2], o[3], o[4], eps);
        break;
    }
    case TFC_K_BATCH_NORM_UPDATE:
        update_cuda(buffers, a, s);
        return;
    case TFC_K_LAYER_NORM:
        rows_of(a, 0, &rows, &len);
        ln_kernel<<<tfc_cu_blocks(rows), TFC_CU_THREADS, 0, s>>>(
            rows, len, a->d[0].dtype, tfc_kin(buffers, a, 0), o[0], o[1], o[2], eps);
        break;
    case TFC_K_LAYER_NORM_GRAD:
        rows_of(a, 1, &rows, &len);
        if (!o[0]) return;
        ln_grad_kernel<<<tfc_cu_blocks(rows), TFC_CU_THREADS, 0, s>>>(
            rows, len, a->d[1].dtype, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1),
            tfc_kin(buffers, a, 2), tfc_kin(buffers, a, 3), o[0], eps);
        break;
    default:
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "norm codelet: kind %d is not its", a->kind);
        return;
    }
    tfc_cu_check_launch(a, "norm");
}
