/* optimizer.c: CPU kernels of the fused optimizer updates, with torch.optim's formulas, and of
 * the learning-rate schedules. Inputs: the variable and its slots (updated in place), then the
 * gradient, the learning rate (a scalar), and for Adam the number of completed steps. */
#include <math.h>
#ifdef __SSE2__
#include <immintrin.h>
#endif
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

static double scalar_in(void *buffers[], const struct tfc_kargs *a, int i)
{
    const void *p = tfc_kin(buffers, a, i);
    return p ? tfc_load_f64(p, a->d[i].dtype, 0) : 0.0;
}

/* One element of every update; float32 and float64 share it (the loop is memory bound). */
static void apply(const struct tfc_kargs *a, void *buffers[], int64_t n)
{
    int dt = a->d[0].dtype, ns = a->kind == TFC_K_APPLY_SGD ? 1
                              : a->kind == TFC_K_APPLY_RMSPROP ? 4
                              : a->kind == TFC_K_APPLY_ADAM ? 3 : 2;
    void *var = tfc_kin(buffers, a, 0), *s1 = ns > 1 ? tfc_kin(buffers, a, 1) : NULL;
    void *s2 = ns > 2 ? tfc_kin(buffers, a, 2) : NULL, *s3 = ns > 3 ? tfc_kin(buffers, a, 3) : NULL;
    const void *grad = tfc_kin(buffers, a, ns);
    double lr = scalar_in(buffers, a, ns + 1);
    double wd = a->attrs[APPLY_WEIGHT_DECAY].f, mom = a->attrs[APPLY_MOMENTUM].f;
    double eps = a->attrs[APPLY_EPS].f;
    double b1 = a->attrs[APPLY_BETA1].f, b2 = a->attrs[APPLY_BETA2].f;
    int decoupled = a->attrs[APPLY_DECOUPLED].i != 0, nesterov = a->attrs[APPLY_NESTEROV].i != 0;
    double bc1 = 1, bc2 = 1;
    if (a->kind == TFC_K_APPLY_ADAM) {
        double t = scalar_in(buffers, a, ns + 2) + 1; /* steps done before this one, plus one */
        bc1 = 1 - pow(b1, t);
        bc2 = 1 - pow(b2, t);
    }
    for (int64_t i = 0; i < n; i++) {
        double w = tfc_load_f64(var, dt, i), g = tfc_load_f64(grad, dt, i);
        if (wd != 0 && decoupled) w *= 1 - lr * wd;     /* AdamW */
        else if (wd != 0) g += wd * w;                    /* L2, as torch.optim's weight_decay */
        switch (a->kind) {
        case TFC_K_APPLY_SGD:
            w -= lr * g;
            break;
        case TFC_K_APPLY_MOMENTUM: {
            double buf = mom * tfc_load_f64(s1, dt, i) + g;
            tfc_store_f64(s1, dt, i, buf);
            w -= lr * (nesterov ? g + mom * buf : buf);
            break;
        }
        case TFC_K_APPLY_ADAGRAD: {
            double sum = tfc_load_f64(s1, dt, i) + g * g;
            tfc_store_f64(s1, dt, i, sum);
            w -= lr * g / (sqrt(sum) + eps);
            break;
        }
        case TFC_K_APPLY_RMSPROP: { /* slots: square_avg, momentum buffer, grad_avg */
            double alpha = b1;
            double sq = alpha * tfc_load_f64(s1, dt, i) + (1 - alpha) * g * g, avg;
            tfc_store_f64(s1, dt, i, sq);
            if (a->attrs[APPLY_CENTERED].i) {
                double ga = alpha * tfc_load_f64(s3, dt, i) + (1 - alpha) * g;
                tfc_store_f64(s3, dt, i, ga);
                avg = sqrt(sq - ga * ga) + eps;
            } else {
                avg = sqrt(sq) + eps;
            }
            if (mom > 0) {
                double buf = mom * tfc_load_f64(s2, dt, i) + g / avg;
                tfc_store_f64(s2, dt, i, buf);
                w -= lr * buf;
            } else {
                w -= lr * g / avg;
            }
            break;
        }
        default: { /* Adam: eps after the square root of the bias-corrected second moment */
            double m = b1 * tfc_load_f64(s1, dt, i) + (1 - b1) * g;
            double v = b2 * tfc_load_f64(s2, dt, i) + (1 - b2) * g * g;
            tfc_store_f64(s1, dt, i, m);
            tfc_store_f64(s2, dt, i, v);
            w -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps);
            break;
        }
        }
        tfc_store_f64(var, dt, i, w);
    }
}

static void lr_schedule(const struct tfc_kargs *a, void *buffers[], void *out)
{
    double step = scalar_in(buffers, a, 0), base = a->attrs[LR_SCHEDULE_BASE].f;
    double gamma = a->attrs[LR_SCHEDULE_GAMMA].f, period = a->attrs[LR_SCHEDULE_PERIOD].f;
    double low = a->attrs[LR_SCHEDULE_FLOOR].f, lr;
    switch (a->attrs[LR_SCHEDULE_KIND].i) {
    case LR_STEP_DECAY: lr = base * pow(gamma, floor(step / period)); break;
    case LR_EXPONENTIAL: lr = base * pow(gamma, step / period); break;
    default: { /* LR_COSINE */
        double t = step < period ? step : period;
        lr = low + 0.5 * (base - low) * (1 + cos(3.14159265358979323846 * t / period));
        break;
    }
    }
    tfc_store_f64(out, tfc_kout_desc(a, 0)->dtype, 0, lr);
}

/* Adam's float32 formula on elements [i0, n), one at a time. */
static void adam_f32_scalar(float *w, float *m, float *v, const float *g, int64_t i0, int64_t n,
                            float b1, float b2, float eps, float step, float inv_bc2)
{
    for (int64_t i = i0; i < n; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        w[i] -= step * m[i] / (sqrtf(v[i]) * inv_bc2 + eps);
    }
}

/* The same formula 4 elements at a time with SSE (every x86-64 has it): gcc left the loop
 * scalar (sqrtf's errno, -O2's cost model), bound by sqrtss and divss, about 9 cycles an
 * element: 971 us a task of the CNN's 3136x1024 kernel in 8 blocks. Each lane does the scalar
 * loop's operations in its order (mulps, addps, sqrtps, divps: no FMA), so the bits are the
 * same; 3x faster in a standalone timing. */
static void adam_f32_loop(float *w, float *m, float *v, const float *g, int64_t n, float b1,
                          float b2, float eps, float step, float inv_bc2)
{
    int64_t i = 0;
#ifdef __SSE2__
    const __m128 B1 = _mm_set1_ps(b1), C1 = _mm_set1_ps(1 - b1), B2 = _mm_set1_ps(b2);
    const __m128 C2 = _mm_set1_ps(1 - b2), E = _mm_set1_ps(eps), S = _mm_set1_ps(step);
    const __m128 R = _mm_set1_ps(inv_bc2);
    for (; i + 4 <= n; i += 4) {
        __m128 gi = _mm_loadu_ps(g + i);
        __m128 mi = _mm_add_ps(_mm_mul_ps(B1, _mm_loadu_ps(m + i)), _mm_mul_ps(C1, gi));
        __m128 vi = _mm_add_ps(_mm_mul_ps(B2, _mm_loadu_ps(v + i)),
                               _mm_mul_ps(_mm_mul_ps(C2, gi), gi));
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        __m128 den = _mm_add_ps(_mm_mul_ps(_mm_sqrt_ps(vi), R), E);
        _mm_storeu_ps(w + i, _mm_sub_ps(_mm_loadu_ps(w + i), _mm_div_ps(_mm_mul_ps(S, mi), den)));
    }
#endif
    adam_f32_scalar(w, m, v, g, i, n, b1, b2, eps, step, inv_bc2);
}

/* The flagship case, typed: float32 Adam without weight decay. */
static int adam_f32(const struct tfc_kargs *a, void *buffers[])
{
    if (a->kind != TFC_K_APPLY_ADAM || a->d[0].dtype != TFC_FLOAT32 ||
        a->attrs[APPLY_WEIGHT_DECAY].f != 0)
        return 0;
    double lr = scalar_in(buffers, a, 4), t = scalar_in(buffers, a, 5) + 1;
    float b1 = (float)a->attrs[APPLY_BETA1].f, b2 = (float)a->attrs[APPLY_BETA2].f;
    float eps = (float)a->attrs[APPLY_EPS].f;
    float step = (float)(lr / (1 - pow(b1, t))), inv_bc2 = (float)(1 / sqrt(1 - pow(b2, t)));
    adam_f32_loop(tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), tfc_kin(buffers, a, 2),
                  tfc_kin(buffers, a, 3), a->d[0].numel, b1, b2, eps, step, inv_bc2);
    return 1;
}

static void optimizer_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (a->kind == TFC_K_LR_SCHEDULE)
        lr_schedule(a, buffers, tfc_kout(buffers, a, 0));
    else if (a->d[0].numel && !adam_f32(a, buffers))
        apply(a, buffers, a->d[0].numel);
}

static struct starpu_perfmodel optimizer_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_optimizer",
};

struct starpu_codelet tfc_cl_optimizer = {
    .cpu_funcs = {optimizer_cpu},
    .cpu_funcs_name = {"optimizer_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_optimizer_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_optimizer_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &optimizer_model,
    .name = "optimizer",
};
