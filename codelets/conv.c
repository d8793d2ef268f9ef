/* conv.c: CPU kernels of the N-D convolution and its adjoints through im2col (vol2col in 3-D)
 * and OpenBLAS GEMM, one GEMM per image and group: y_g = w_g col; dx: col = w_g^T dy_g then
 * col2im; dw_g += dy_g col^T. The gather/scatter index table is built once per task. Float32
 * tasks go to Winograd (codelets/conv_winograd.c) where it wins, else to oneDNN first when the
 * library has it (codelets/conv_dnnl.c); TFC_CONV_BACKEND overrides. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include "kernel.h"
#include "conv_geom.h"
#include "conv_dnnl.h"
#include "conv_winograd.h"
#include "opencl_common.h"
#include "../src/tfc.h"
#include "../src/env.h"

/* The geometry and the GEMM sizes of one task. */
struct conv_task {
    struct tfc_conv_geom g;
    struct tfc_conv_3d t3;
    int64_t cg, kg;        /* input and output channels per group */
    int64_t rows, cols;    /* im2col matrix: cg * kernel volume rows, output volume cols */
};

static int conv_task_make(const struct tfc_kargs *a, struct conv_task *t)
{
    char msg[200];
    if (tfc_conv_geom_of(a, &t->g, msg, sizeof msg)) {
        tfc_kernel_fail(a, TFC_ERR_INTERNAL, "convolution geometry: %s", msg);
        return -1;
    }
    tfc_conv_geom_3d(&t->g, &t->t3);
    t->cg = t->g.in_ch / t->g.groups, t->kg = t->g.out_ch / t->g.groups;
    t->rows = t->cg * t->t3.k_vol, t->cols = t->t3.o_vol;
    return 0;
}

/* idx[r * cols + p]: where im2col element (r, p) reads in one group's input, -1 in padding. */
static void im2col_index(const struct conv_task *t, int64_t *idx)
{
    const struct tfc_conv_3d *q = &t->t3;
    for (int64_t r = 0; r < t->rows; r++) {
        int64_t c = r / q->k_vol, kk = r % q->k_vol;
        int64_t k2 = kk % q->k[2], k1 = kk / q->k[2] % q->k[1], k0 = kk / q->k[2] / q->k[1];
        int64_t *row = idx + r * t->cols, p = 0;
        for (int64_t o0 = 0; o0 < q->o[0]; o0++) {
            int64_t i0 = o0 * q->s[0] - q->p[0] + k0 * q->d[0];
            for (int64_t o1 = 0; o1 < q->o[1]; o1++) {
                int64_t i1 = o1 * q->s[1] - q->p[1] + k1 * q->d[1];
                for (int64_t o2 = 0; o2 < q->o[2]; o2++, p++) {
                    int64_t i2 = o2 * q->s[2] - q->p[2] + k2 * q->d[2];
                    int inside = i0 >= 0 && i0 < q->in[0] && i1 >= 0 && i1 < q->in[1] &&
                                 i2 >= 0 && i2 < q->in[2];
                    row[p] = inside ? ((c * q->in[0] + i0) * q->in[1] + i1) * q->in[2] + i2
                                    : -1;
                }
            }
        }
    }
}

static void gather(int dtype, const int64_t *idx, int64_t n, const void *src, void *col)
{
    if (dtype == TFC_FLOAT32) {
        const float *s = src;
        float *c = col;
        for (int64_t i = 0; i < n; i++) c[i] = idx[i] < 0 ? 0.0f : s[idx[i]];
    } else {
        const double *s = src;
        double *c = col;
        for (int64_t i = 0; i < n; i++) c[i] = idx[i] < 0 ? 0.0 : s[idx[i]];
    }
}

/* col2im: every column element added back where im2col read it. */
static void scatter_add(int dtype, const int64_t *idx, int64_t n, const void *col, void *dst)
{
    if (dtype == TFC_FLOAT32) {
        const float *c = col;
        float *d = dst;
        for (int64_t i = 0; i < n; i++)
            if (idx[i] >= 0) d[idx[i]] += c[i];
    } else {
        const double *c = col;
        double *d = dst;
        for (int64_t i = 0; i < n; i++)
            if (idx[i] >= 0) d[idx[i]] += c[i];
    }
}

/* C[m,n] = beta C + op(A) op(B), row-major, dense operands. */
static void gemm(int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A,
                 int64_t lda, const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TFC_FLOAT32)
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B,
                    (int)ldb, (float)beta, C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb,
                    beta, C, (int)ldc);
}

/* One image n and group gi of the kernel's kind; col is rows x cols. */
static void conv_one(const struct tfc_kargs *a, const struct conv_task *t, const int64_t *idx,
                     void *col, const char *in0, const char *in1, char *out, int64_t n,
                     int64_t gi)
{
    int dt = a->d[0].dtype;
    size_t es = tfc_kdtype_size(dt);
    int64_t nel = t->rows * t->cols;
    size_t x_off = (size_t)((n * t->g.in_ch + gi * t->cg) * t->t3.in_vol) * es;
    size_t y_off = (size_t)((n * t->g.out_ch + gi * t->kg) * t->cols) * es;
    size_t w_off = (size_t)(gi * t->kg * t->rows) * es;
    if (a->kind == TFC_K_CONV) { /* in0 x, in1 w, out y */
        gather(dt, idx, nel, in0 + x_off, col);
        gemm(dt, 0, 0, t->kg, t->cols, t->rows, in1 + w_off, t->rows, col, t->cols, 0.0,
             out + y_off, t->cols);
    } else if (a->kind == TFC_K_CONV_BP_INPUT) { /* in0 dy, in1 w, out dx */
        gemm(dt, 1, 0, t->rows, t->cols, t->kg, in1 + w_off, t->rows, in0 + y_off, t->cols, 0.0,
             col, t->cols);
        scatter_add(dt, idx, nel, col, out + x_off);
    } else { /* in0 x, in1 dy, out dw: summed over the images */
        gather(dt, idx, nel, in0 + x_off, col);
        gemm(dt, 0, 1, t->kg, t->rows, t->cols, in1 + y_off, t->cols, col, t->cols, 1.0,
             out + w_off, t->rows);
    }
}

/* TFC_CONV_BACKEND picks the kernels: auto (Winograd where tfc_conv_winograd_auto says it
 * wins, else oneDNN when the library has it), dnnl, im2col, winograd (every task the Winograd
 * kernels fit; the others as auto without Winograd).
 * 1 when Winograd or oneDNN ran the task (or recorded its failure); 0 when the im2col kernels
 * must: the variable says so, or oneDNN declines the task (float64, a geometry it has no fast
 * code for). Read per task (tfc_ctx_create has checked it): cheap next to a convolution. */
static int conv_ran_fast(void *buffers[], const struct tfc_kargs *a)
{
    /* the words' order in src/env.c */
    enum { BACKEND_AUTO, BACKEND_DNNL, BACKEND_IM2COL, BACKEND_WINOGRAD };
    char msg[TFC_MSG_LEN];
    int backend;
    if (tfc_env_choice("TFC_CONV_BACKEND", &backend, msg)) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "%s", msg);
        return 1;
    }
    if (backend == BACKEND_IM2COL) return 0;
    struct tfc_conv_geom g;
    if ((backend == BACKEND_AUTO || backend == BACKEND_WINOGRAD) &&
        !tfc_conv_geom_of(a, &g, msg, sizeof msg) && tfc_conv_winograd_fits(a, &g) &&
        (backend == BACKEND_WINOGRAD || tfc_conv_winograd_auto(&g))) {
        tfc_conv_winograd_cpu(buffers, a);
        return 1;
    }
    enum tfc_conv_dnnl_result r = tfc_conv_dnnl_cpu(buffers, a);
    if (r == TFC_CONV_DNNL_ABSENT && backend == BACKEND_DNNL) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "TFC_CONV_BACKEND is dnnl but this "
                        "library was built without oneDNN (install libdnnl-dev and configure "
                        "--with-dnnl), so only auto, im2col or winograd can run");
        return 1;
    }
    return r == TFC_CONV_DNNL_RAN;
}

static void conv_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (conv_ran_fast(buffers, a)) return;
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    char *out = tfc_kout(buffers, a, 0);
    if (!out) return;
    const char *in0 = tfc_kin(buffers, a, 0), *in1 = tfc_kin(buffers, a, 1);
    /* the outputs that sum (dx, dw) start at zero, and so does any output of empty operands */
    memset(out, 0, (size_t)o->numel * tfc_kdtype_size(o->dtype));
    struct conv_task t;
    if (!in0 || !in1 || conv_task_make(a, &t)) return;
    if (t.rows == 0 || t.cols == 0) return;
    int64_t *idx = malloc((size_t)(t.rows * t.cols) * sizeof *idx);
    void *col = malloc((size_t)(t.rows * t.cols) * tfc_kdtype_size(o->dtype));
    if (!idx || !col) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory for the %lld x %lld im2col matrix",
                        (long long)t.rows, (long long)t.cols);
    } else {
        im2col_index(&t, idx);
        for (int64_t n = 0; n < t.g.batch; n++)
            for (int64_t gi = 0; gi < t.g.groups; gi++)
                conv_one(a, &t, idx, col, in0, in1, out, n, gi);
    }
    free(idx);
    free(col);
}

static struct starpu_perfmodel conv_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_conv",
};

#ifdef STARPU_USE_OPENCL
void tfc_conv_opencl(void *buffers[], void *cl_arg); /* codelets/opencl_conv.c */
#endif
#ifdef STARPU_USE_CUDA
void tfc_conv_cuda(void *buffers[], void *cl_arg); /* codelets/conv_cuda.cu */
#endif

struct starpu_codelet tfc_cl_conv = {
    .cpu_funcs = {conv_cpu},
    .cpu_funcs_name = {"conv_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_conv_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_conv_opencl}, /* synchronous; direct, one work item per output */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &conv_model,
    .name = "conv",
};
