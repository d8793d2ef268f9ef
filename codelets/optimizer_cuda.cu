/* optimizer.cu: CUDA kernels of the fused optimizer updates and the learning-rate schedules,
 * computing what optimizer.c computes: inputs are the variable and its slots (updated in
 * place), then the gradient, the learning rate (a scalar) and for Adam the number of completed
 * steps. The learning rate and the step stay on the device: each block's thread 0 reads them
 * and computes the bias corrections into shared memory (nothing is copied to the host, nothing
 * synchronizes). Arithmetic uses round-to-nearest intrinsics (no contraction into fused
 * multiply-adds), so results round as the CPU's x86-64 code does. */
#include "cuda_common.h"

struct opt_params {
    int kind, dt;      /* dt: the variable's, slots' and gradient's dtype */
    int lr_dt, step_dt;
    int decoupled, nesterov, centered;
    double wd, mom, b1, b2, eps;
};

static __device__ __forceinline__ double rn_add(double x, double y) { return __dadd_rn(x, y); }
static __device__ __forceinline__ double rn_sub(double x, double y) { return __dsub_rn(x, y); }
static __device__ __forceinline__ double rn_mul(double x, double y) { return __dmul_rn(x, y); }
static __device__ __forceinline__ double rn_div(double x, double y) { return __ddiv_rn(x, y); }

/* Learning rate and Adam's bias corrections, from the device scalars (NULL reads as 0). */
static __device__ __forceinline__ void opt_scalars(const struct opt_params &p, const void *lrp,
                                                   const void *stp, double *lr, double *bc1,
                                                   double *bc2)
{
    *lr = lrp ? tfc_cu_ld_f64(lrp, p.lr_dt, 0) : 0.0;
    *bc1 = 1;
    *bc2 = 1;
    if (p.kind == TFC_K_APPLY_ADAM) {
        /* steps done before this one, plus one */
        double t = (stp ? tfc_cu_ld_f64(stp, p.step_dt, 0) : 0.0) + 1;
        *bc1 = 1 - pow(p.b1, t);
        *bc2 = 1 - pow(p.b2, t);
    }
}

/* Every update, one element per iteration, in double (optimizer.c's apply). DT is the dtype
 * when known at compile time (0 float32, 1 float64), -1 for any other (p.dt at run time). */
template <int DT>
static __global__ void apply_kernel(struct opt_params p, void *var, void *s1, void *s2,
                                    void *s3, const void *grad, const void *lrp,
                                    const void *stp, int64_t n)
{
    __shared__ double sh[3];
    if (threadIdx.x == 0)
        opt_scalars(p, lrp, stp, &sh[0], &sh[1], &sh[2]);
    __syncthreads();
    const double lr = sh[0], bc1 = sh[1], bc2 = sh[2];
    const int dt = DT >= 0 ? DT : p.dt;
    TFC_CU_LOOP(i, n)
    {
        double w = tfc_cu_ld_f64(var, dt, i), g = tfc_cu_ld_f64(grad, dt, i);
        if (p.wd != 0 && p.decoupled)
            w = rn_mul(w, rn_sub(1, rn_mul(lr, p.wd))); /* AdamW */
        else if (p.wd != 0)
            g = rn_add(g, rn_mul(p.wd, w)); /* L2, as torch.optim's weight_decay */
        switch (p.kind) {
        case TFC_K_APPLY_SGD:
            w = rn_sub(w, rn_mul(lr, g));
            break;
        case TFC_K_APPLY_MOMENTUM: {
            double buf = rn_add(rn_mul(p.mom, tfc_cu_ld_f64(s1, dt, i)), g);
            tfc_cu_st_f64(s1, dt, i, buf);
            w = rn_sub(w, rn_mul(lr, p.nesterov ? rn_add(g, rn_mul(p.mom, buf)) : buf));
            break;
        }
        case TFC_K_APPLY_ADAGRAD: {
            double sum = rn_add(tfc_cu_ld_f64(s1, dt, i), rn_mul(g, g));
            tfc_cu_st_f64(s1, dt, i, sum);
            w = rn_sub(w, rn_div(rn_mul(lr, g), rn_add(sqrt(sum), p.eps)));
            break;
        }
        case TFC_K_APPLY_RMSPROP: { /* slots: square_avg, momentum buffer, grad_avg */
            double alpha = p.b1, beta = rn_sub(1, alpha), avg;
            double sq = rn_add(rn_mul(alpha, tfc_cu_ld_f64(s1, dt, i)), rn_mul(rn_mul(beta, g), g));
            tfc_cu_st_f64(s1, dt, i, sq);
            if (p.centered) {
                double ga = rn_add(rn_mul(alpha, tfc_cu_ld_f64(s3, dt, i)), rn_mul(beta, g));
                tfc_cu_st_f64(s3, dt, i, ga);
                avg = rn_add(sqrt(rn_sub(sq, rn_mul(ga, ga))), p.eps);
            } else {
                avg = rn_add(sqrt(sq), p.eps);
            }
            if (p.mom > 0) {
                double buf = rn_add(rn_mul(p.mom, tfc_cu_ld_f64(s2, dt, i)), rn_div(g, avg));
                tfc_cu_st_f64(s2, dt, i, buf);
                w = rn_sub(w, rn_mul(lr, buf));
            } else {
                w = rn_sub(w, rn_div(rn_mul(lr, g), avg));
            }
            break;
        }
        default: { /* Adam: eps after the square root of the bias-corrected second moment */
            double m = rn_add(rn_mul(p.b1, tfc_cu_ld_f64(s1, dt, i)), rn_mul(rn_sub(1, p.b1), g));
            double v = rn_add(rn_mul(p.b2, tfc_cu_ld_f64(s2, dt, i)),
                              rn_mul(rn_mul(rn_sub(1, p.b2), g), g));
            tfc_cu_st_f64(s1, dt, i, m);
            tfc_cu_st_f64(s2, dt, i, v);
            double den = rn_add(rn_div(sqrt(v), sqrt(bc2)), p.eps);
            w = rn_sub(w, rn_div(rn_mul(rn_div(lr, bc1), m), den));
            break;
        }
        }
        tfc_cu_st_f64(var, dt, i, w);
    }
}

/* optimizer.c's typed case: float32 Adam without weight decay, in float arithmetic. */
static __global__ void adam_f32_kernel(struct opt_params p, float *w, float *m, float *v,
                                       const float *__restrict__ g, const void *lrp,
                                       const void *stp, int64_t n)
{
    __shared__ float sh[2];
    if (threadIdx.x == 0) {
        double lr, bc1, bc2;
        opt_scalars(p, lrp, stp, &lr, &bc1, &bc2);
        sh[0] = (float)(lr / bc1);             /* step */
        sh[1] = (float)(1 / sqrt(bc2));        /* inv_bc2 */
    }
    __syncthreads();
    const float step = sh[0], inv_bc2 = sh[1];
    const float b1 = (float)p.b1, b2 = (float)p.b2, eps = (float)p.eps;
    const float c1 = 1 - b1, c2 = 1 - b2;
    TFC_CU_LOOP(i, n)
    {
        float gi = g[i];
        float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(c1, gi));
        float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(c2, gi), gi));
        m[i] = mi;
        v[i] = vi;
        w[i] = __fsub_rn(w[i], __fdiv_rn(__fmul_rn(step, mi),
                                         __fadd_rn(__fmul_rn(__fsqrt_rn(vi), inv_bc2), eps)));
    }
}

/* kind: LR_STEP_DECAY, LR_EXPONENTIAL or (otherwise) LR_COSINE */
static __global__ void lr_schedule_kernel(int kind, double base, double gamma, double period,
                                          double low, const void *stp, int step_dt, void *out,
                                          int out_dt)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double step = stp ? tfc_cu_ld_f64(stp, step_dt, 0) : 0.0, lr;
    switch (kind) {
    case LR_STEP_DECAY: lr = base * pow(gamma, floor(step / period)); break;
    case LR_EXPONENTIAL: lr = base * pow(gamma, step / period); break;
    default: { /* LR_COSINE */
        double t = step < period ? step : period;
        lr = rn_add(low, rn_mul(rn_mul(0.5, rn_sub(base, low)),
                            rn_add(1, cos(rn_div(rn_mul(3.14159265358979323846, t), period)))));
        break;
    }
    }
    tfc_cu_st_f64(out, out_dt, 0, lr);
}

extern "C" void tfc_optimizer_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (a->kind == TFC_K_LR_SCHEDULE) {
        void *out = tfc_kout(buffers, a, 0);
        if (!out)
            return;
        const struct tfc_kattr *at = a->attrs;
        lr_schedule_kernel<<<1, 1, 0, s>>>(
            (int)at[LR_SCHEDULE_KIND].i, at[LR_SCHEDULE_BASE].f, at[LR_SCHEDULE_GAMMA].f,
            at[LR_SCHEDULE_PERIOD].f, at[LR_SCHEDULE_FLOOR].f, tfc_kin(buffers, a, 0),
            a->d[0].dtype, out, tfc_kout_desc(a, 0)->dtype);
        tfc_cu_check_launch(a, "lr_schedule");
        return;
    }
    int64_t n = a->d[0].numel;
    if (!n)
        return;
    int ns = a->kind == TFC_K_APPLY_SGD ? 1
           : a->kind == TFC_K_APPLY_RMSPROP ? 4
           : a->kind == TFC_K_APPLY_ADAM ? 3 : 2;
    struct opt_params p;
    p.kind = a->kind;
    p.dt = a->d[0].dtype;
    p.lr_dt = a->d[ns + 1].dtype;
    p.step_dt = a->kind == TFC_K_APPLY_ADAM ? a->d[ns + 2].dtype : 0;
    p.decoupled = a->attrs[APPLY_DECOUPLED].i != 0;
    p.nesterov = a->attrs[APPLY_NESTEROV].i != 0;
    p.centered = a->attrs[APPLY_CENTERED].i != 0;
    p.wd = a->attrs[APPLY_WEIGHT_DECAY].f;
    p.mom = a->attrs[APPLY_MOMENTUM].f;
    p.b1 = a->attrs[APPLY_BETA1].f;
    p.b2 = a->attrs[APPLY_BETA2].f;
    p.eps = a->attrs[APPLY_EPS].f;
    void *var = tfc_kin(buffers, a, 0);
    void *s1 = ns > 1 ? tfc_kin(buffers, a, 1) : NULL;
    void *s2 = ns > 2 ? tfc_kin(buffers, a, 2) : NULL;
    void *s3 = ns > 3 ? tfc_kin(buffers, a, 3) : NULL;
    const void *grad = tfc_kin(buffers, a, ns);
    const void *lrp = tfc_kin(buffers, a, ns + 1);
    const void *stp = a->kind == TFC_K_APPLY_ADAM ? tfc_kin(buffers, a, ns + 2) : NULL;
    unsigned g = tfc_cu_blocks(n);
    if (a->kind == TFC_K_APPLY_ADAM && p.dt == TFC_FLOAT32 && p.wd == 0)
        adam_f32_kernel<<<g, TFC_CU_THREADS, 0, s>>>(p, (float *)var, (float *)s1, (float *)s2,
                                                     (const float *)grad, lrp, stp, n);
    else if (p.dt == TFC_FLOAT32)
        apply_kernel<0><<<g, TFC_CU_THREADS, 0, s>>>(p, var, s1, s2, s3, grad, lrp, stp, n);
    else if (p.dt == TFC_FLOAT64)
        apply_kernel<1><<<g, TFC_CU_THREADS, 0, s>>>(p, var, s1, s2, s3, grad, lrp, stp, n);
    else
        apply_kernel<-1><<<g, TFC_CU_THREADS, 0, s>>>(p, var, s1, s2, s3, grad, lrp, stp, n);
    tfc_cu_check_launch(a, "optimizer update");
}
