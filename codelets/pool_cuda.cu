/* pool_cuda.cu: CUDA kernels of the pool codelet (max_pool, avg_pool, max_pool_grad,
 * max_pool_gather, avg_pool_grad), float32 and float64, as codelets/pool.c computes them: the
 * host builds the geometry with pool_geom.h, the device repeats its window and divisor
 * formulas. max_pool_grad's scatter runs one warp per image-channel plane (no float atomics,
 * and the same summation order as the CPU). Argmax indices out of range are reported like gather's. */
#include "cuda_common.h"
#include "pool_geom.h"

/* pool_geom.h's tfc_pool_divisor */
static __device__ int64_t divisor(const struct tfc_pool_geom &g, const int64_t *lo)
{
    int64_t n = 1;
    for (int i = 0; i < 3; i++) {
        int64_t a = lo[i], b = lo[i] + g.k[i];
        if (g.include_pad) {
            if (b > g.in[i] + g.pe[i]) b = g.in[i] + g.pe[i];
        } else {
            if (a < 0) a = 0;
            if (b > g.in[i]) b = g.in[i];
        }
        n *= b > a ? b - a : 0;
    }
    return n;
}

static __device__ void window(const struct tfc_pool_geom &g, int64_t q, int64_t *lo)
{
    int64_t o[3] = {q / (g.out[1] * g.out[2]), (q / g.out[2]) % g.out[1], q % g.out[2]};
    for (int i = 0; i < 3; i++) lo[i] = o[i] * g.s[i] - g.pb[i];
}

/* The flat in-plane index of tap (j0, j1, j2) of a window at lo with dilation dil, or -1. */
static __device__ int64_t tap(const struct tfc_pool_geom &g, const int64_t *lo, int64_t j0,
                              int64_t j1, int64_t j2, int dil)
{
    int64_t j[3] = {j0, j1, j2}, at = 0;
    for (int i = 0; i < 3; i++) {
        int64_t p = lo[i] + j[i] * (dil ? g.d[i] : 1);
        if (p < 0 || p >= g.in[i]) return -1;
        at = at * g.in[i] + p;
    }
    return at;
}

static __global__ void pool_kernel(struct tfc_pool_geom g, int dt, int is_max, const void *x,
                                   void *y, int64_t *arg, int64_t total)
{
    int64_t Q = g.out[0] * g.out[1] * g.out[2], P = g.in[0] * g.in[1] * g.in[2];
    TFC_CU_LOOP(i, total) {
        int64_t plane = i / Q, lo[3];
        window(g, i % Q, lo);
        double acc = is_max ? -INFINITY : 0;
        int64_t best = -1;
        for (int64_t j0 = 0; j0 < g.k[0]; j0++)
            for (int64_t j1 = 0; j1 < g.k[1]; j1++)
                for (int64_t j2 = 0; j2 < g.k[2]; j2++) {
                    int64_t at = tap(g, lo, j0, j1, j2, 1);
                    if (at < 0) continue;
                    double v = tfc_cu_ld_f64(x, dt, plane * P + at);
                    if (!is_max)
                        acc += v;
                    else if (best < 0 || v > acc || (isnan(v) && !isnan(acc)))
                        acc = v, best = at;
                }
        if (!is_max) {
            int64_t n = divisor(g, lo);
            acc = n ? acc / (double)n : 0;
        } else if (arg) {
            arg[i] = best;
        }
        tfc_cu_st_f64(y, dt, i, acc);
    }
}

/* avg_pool_grad: one thread per plane, dx[tap] += dy[o] / divisor(o), in the CPU's order. */
static __global__ void avg_grad_kernel(struct tfc_pool_geom g, int dt, const void *dy, void *dx)
{
    int64_t Q = g.out[0] * g.out[1] * g.out[2], P = g.in[0] * g.in[1] * g.in[2];
    TFC_CU_LOOP(pl, g.planes) {
        for (int64_t i = 0; i < P; i++) tfc_cu_st_f64(dx, dt, pl * P + i, 0);
        for (int64_t q = 0; q < Q; q++) {
            int64_t lo[3];
            window(g, q, lo);
            int64_t n = divisor(g, lo);
            double share = n ? tfc_cu_ld_f64(dy, dt, pl * Q + q) / (double)n : 0;
            for (int64_t j0 = 0; j0 < g.k[0]; j0++)
                for (int64_t j1 = 0; j1 < g.k[1]; j1++)
                    for (int64_t j2 = 0; j2 < g.k[2]; j2++) {
                        int64_t at = tap(g, lo, j0, j1, j2, 0);
                        if (at >= 0)
                            tfc_cu_st_f64(dx, dt, pl * P + at,
                                          tfc_cu_ld_f64(dx, dt, pl * P + at) + share);
                    }
        }
    }
}

/* max_pool_gather: one thread per element, y = v[plane, idx]. */
static __global__ void gather_kernel(int dt, const void *v, const int64_t *idx, void *y,
                                     int64_t P, int64_t Q, int64_t n, struct tfc_cu_err *e)
{
    TFC_CU_LOOP(g, n) {
        int64_t k = idx[g];
        if (k < 0 || k >= P) {
            tfc_cu_raise(e, g);
            tfc_cu_st_f64(y, dt, g, NAN);
        } else {
            tfc_cu_st_f64(y, dt, g, tfc_cu_ld_f64(v, dt, (g / Q) * P + k));
        }
    }
}

#define SCATTER_WARPS 8 /* warps per block of scatter_kernel */

/* max_pool_grad into a zeroed dx: one warp per image-channel plane, its lanes taking 32
 * consecutive dy elements at a time (coalesced reads; one thread per plane, looping over it,
 * took 224 us per CNN task on an H200). Lanes whose argmax coincide (overlapping windows)
 * leave the adding to the first of them, which adds their values one by one in lane order:
 * every dx element gets its contributions in dy's order with the dtype's rounding at each
 * add, as the CPU computes it, and with no float atomics. */
static __global__ void scatter_kernel(int dt, const void *v, const int64_t *idx, void *y,
                                      int64_t P, int64_t Q, int64_t planes, struct tfc_cu_err *e)
{
    __shared__ int64_t sk[SCATTER_WARPS][32];
    __shared__ double sv[SCATTER_WARPS][32];
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t g = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < planes;
         g += nwarps) {
        for (int64_t q0 = 0; q0 < Q; q0 += 32) {
            int64_t q = q0 + lane, k = -1; /* -1: nothing to add (past the end, padding only) */
            double val = 0;
            if (q < Q) {
                k = idx[g * Q + q];
                if (k != -1 && (k < 0 || k >= P)) {
                    tfc_cu_raise(e, g * Q + q);
                    k = -1;
                } else if (k != -1) {
                    val = tfc_cu_ld_f64(v, dt, g * Q + q);
                }
            }
            sk[w][lane] = k;
            sv[w][lane] = val;
            __syncwarp();
            int first = k != -1;
            for (int j = 0; j < lane && first; j++) first = sk[w][j] != k;
            if (first)
                for (int j = lane; j < 32; j++)
                    if (sk[w][j] == k)
                        tfc_cu_st_f64(y, dt, g * P + k, tfc_cu_ld_f64(y, dt, g * P + k) + sv[w][j]);
            __syncwarp();
        }
    }
}

static int64_t plane_of(const struct tfc_kdesc *d)
{
    int64_t n = 1;
    for (int i = 2; i < d->rank; i++) n *= d->dims[i];
    return n;
}

static void route_cuda(void *buffers[], const struct tfc_kargs *a, cudaStream_t s)
{
    int scatter = a->kind == TFC_K_MAX_POOL_GRAD;
    const struct tfc_kdesc *dv = &a->d[0], *di = &a->d[1], *o = tfc_kout_desc(a, 0);
    int64_t P = plane_of(scatter ? o : dv), Q = plane_of(di);
    int64_t n = scatter ? (Q ? di->numel / Q : 0) : o->numel;
    const int64_t *idx = (const int64_t *)tfc_kin(buffers, a, 1);
    void *y = tfc_kout(buffers, a, 0);
    if (scatter && !idx) { /* no window: dx is zeros */
        tfc_cu_check(a, cudaMemsetAsync(y, 0, (size_t)o->numel * tfc_kdtype_size(o->dtype), s),
                     "cudaMemsetAsync");
        return;
    }
    if (scatter && tfc_cu_check(a, cudaMemsetAsync(y, 0, (size_t)o->numel *
                                                   tfc_kdtype_size(o->dtype), s),
                                "cudaMemsetAsync"))
        return;
    struct tfc_cu_err *e = tfc_cu_err_begin(a, s);
    if (scatter)
        scatter_kernel<<<tfc_cu_blocks(n * 32, SCATTER_WARPS * 32), SCATTER_WARPS * 32, 0, s>>>(
            o->dtype, tfc_kin(buffers, a, 0), idx, y, P, Q, n, e);
    else
        gather_kernel<<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(
            o->dtype, tfc_kin(buffers, a, 0), idx, y, P, Q, n, e);
    if (!tfc_cu_check_launch(a, "max_pool_grad") && e)
        tfc_cu_err_end(a, s, e, TFC_CU_ERR_GATHER, P, idx, TFC_INT64);
}

extern "C" void tfc_pool_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    void *y = tfc_kout(buffers, a, 0);
    if (!y) return;
    if (a->kind == TFC_K_MAX_POOL_GRAD || a->kind == TFC_K_MAX_POOL_GATHER) {
        route_cuda(buffers, a, s);
        return;
    }
    int grad = a->kind == TFC_K_AVG_POOL_GRAD;
    const struct tfc_kdesc *xd = grad ? &a->d[1] : &a->d[0];
    struct tfc_pool_geom g;
    if (tfc_pool_geom_make(a->attrs, xd->rank, xd->dims, &g)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "pooling attributes do not fit the input");
        return;
    }
    const void *x = tfc_kin(buffers, a, 0);
    int dt = a->d[0].dtype;
    if (grad) {
        if (!x) {
            tfc_cu_check(a, cudaMemsetAsync(y, 0, (size_t)xd->numel * tfc_kdtype_size(dt), s),
                         "cudaMemsetAsync");
            return;
        }
        avg_grad_kernel<<<tfc_cu_blocks(g.planes), TFC_CU_THREADS, 0, s>>>(g, dt, x, y);
        tfc_cu_check_launch(a, "avg_pool_grad");
        return;
    }
    int64_t *arg = a->n_out > 1 ? (int64_t *)tfc_kout(buffers, a, 1) : NULL;
    int64_t total = tfc_kout_desc(a, 0)->numel;
    pool_kernel<<<tfc_cu_blocks(total), TFC_CU_THREADS, 0, s>>>(
        g, dt, a->kind == TFC_K_MAX_POOL, x, y, arg, total);
    tfc_cu_check_launch(a, "pool");
}
