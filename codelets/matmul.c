/* matmul.c: CPU kernels for matmul and batched matmul through OpenBLAS (row-major cblas),
 * float32 products of the sizes where it measured faster through oneDNN's matmul
 * (codelets/matmul_dnnl.c; TFC_MATMUL_BACKEND overrides). BLAS runs single-threaded inside a
 * task (set process-wide when the context starts): parallelism comes from StarPU's workers. */
#include <cblas.h>
#include <string.h>
#include "kernel.h"
#include "bcast.h"
#include "matmul_dnnl.h"
#include "matmul_epilogue.h"
#include "fused.h"
#include "ew_vexpf.h" /* TFC_EW_VECTOR_CLONES */
#include "../src/env.h"
#include "opencl_common.h"
#include "../src/tfc.h"

/* The matrix operand's size (elements) from which a one-row or one-column product goes to
 * gemv: OpenBLAS 0.3.21's sgemm with m = 1 packs the whole matrix, 6.4x slower than sgemv on
 * the imported CNN's [1,3136]x[3136,1024] (1.77 ms against 0.28, thread CPU), 1.14x on
 * [1,784]x[784,256]; the same at [1,256]x[256,128]; sgemm 1.9x faster on [1,1024]x[1024,10]. */
#define GEMV_MIN_ELEMS 65536

/* One output row (m == 1) or one output column (n == 1) of a large enough matrix is a
 * matrix-vector product. Returns 0 when the shape is not one for gemv. y is zeroed first:
 * OpenBLAS's beta == 0 scales y, so stale NaNs in the output buffer could leak. */
static int gemv(int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A,
                int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    enum CBLAS_TRANSPOSE tr;
    const void *M, *x;
    int64_t rows, cols, ld, incx, incy, len;
    if (m == 1) { /* C row = a op(B): op(B)^T a, with B [k,n] (Trans) or [n,k] (NoTrans) */
        M = B, ld = ldb, x = A, incx = ta ? lda : 1, incy = 1, len = n;
        tr = tb ? CblasNoTrans : CblasTrans;
        rows = tb ? n : k, cols = tb ? k : n;
    } else if (n == 1) { /* C column = op(A) b, with A [m,k] (NoTrans) or [k,m] (Trans) */
        M = A, ld = lda, x = B, incx = tb ? 1 : ldb, incy = ldc, len = m;
        tr = ta ? CblasTrans : CblasNoTrans;
        rows = ta ? k : m, cols = ta ? m : k;
    } else
        return 0;
    if (rows * cols < GEMV_MIN_ELEMS)
        return 0;
    size_t es = dtype == TFC_FLOAT32 ? 4 : 8;
    for (int64_t i = 0; i < len; i++)
        memset((char *)C + (size_t)(i * incy) * es, 0, es);
    if (dtype == TFC_FLOAT32)
        cblas_sgemv(CblasRowMajor, tr, (int)rows, (int)cols, 1.0f, M, (int)ld, x, (int)incx, 0.0f,
                    C, (int)incy);
    else
        cblas_dgemv(CblasRowMajor, tr, (int)rows, (int)cols, 1.0, M, (int)ld, x, (int)incx, 0.0,
                    C, (int)incy);
    return 1;
}

/* TFC_MATMUL_BACKEND's words, in src/env.c's order */
enum { BACKEND_AUTO, BACKEND_DNNL, BACKEND_BLAS };

/* C[m,n] = op(A) op(B) for one matrix pair; A is [m,k] or [k,m] when ta, B [k,n] or [n,k]; lda,
 * ldb, ldc are the row strides (a tile of a larger matrix has a row stride above its width).
 * backend: TFC_MATMUL_BACKEND's value for the task. */
static void gemm(int backend, int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                 const void *A, int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (k == 0) { /* an empty inner dimension sums nothing */
        size_t es = dtype == TFC_FLOAT32 ? 4 : 8;
        for (int64_t i = 0; i < m; i++)
            memset((char *)C + (size_t)(i * ldc) * es, 0, (size_t)n * es);
        return;
    }
    if (gemv(dtype, ta, tb, m, n, k, A, lda, B, ldb, C, ldc))
        return;
    if (dtype == TFC_FLOAT32 && backend != BACKEND_BLAS &&
        (backend == BACKEND_DNNL || tfc_matmul_dnnl_wins(m, n, k)) &&
        tfc_matmul_dnnl_sgemm(ta, tb, m, n, k, A, lda, B, ldb, C, ldc))
        return;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TFC_FLOAT32)
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B,
                    (int)ldb, 0.0f, C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb,
                    0.0, C, (int)ldc);
}

/* The task's TFC_MATMUL_BACKEND (read per task: tfc_ctx_create has checked it; a getenv,
 * cheap next to a product); -1 after recording why the task fails. */
static int matmul_backend(const struct tfc_kargs *a)
{
    char msg[TFC_MSG_LEN];
    int backend;
    if (tfc_env_choice("TFC_MATMUL_BACKEND", &backend, msg)) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "%s", msg);
        return -1;
    }
    if (backend == BACKEND_DNNL && !tfc_matmul_dnnl_present()) {
        tfc_kernel_fail(a, TFC_ERR_INVALID_ARGUMENT, "TFC_MATMUL_BACKEND is dnnl but this "
                        "library was built without oneDNN (install libdnnl-dev and configure "
                        "--with-dnnl), so only auto or blas can run");
        return -1;
    }
    return backend;
}

static void matmul_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = tfc_kout_desc(a, 0);
    void *C = tfc_kout(buffers, a, 0);
    if (!C)
        return;
    const char *A = tfc_kin(buffers, a, 0), *B = tfc_kin(buffers, a, 1);
    int ta = a->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = a->attrs[MATMUL_TRANSPOSE_B].i != 0;
    int ra = da->rank, rc = dc->rank;
    int64_t m = dc->dims[rc - 2], n = dc->dims[rc - 1];
    int64_t k = ta ? da->dims[ra - 2] : da->dims[ra - 1];
    size_t es = dc->dtype == TFC_FLOAT32 ? 4 : 8;
    int backend = matmul_backend(a);
    if (backend < 0)
        return;
    if (a->kind == TFC_K_MATMUL) { /* the whole matrices, or tiles of them (strided views) */
        gemm(backend, dc->dtype, ta, tb, m, n, k, A, tfc_kdesc_ld(buffers, da), B,
             tfc_kdesc_ld(buffers, db), C, tfc_kdesc_ld(buffers, dc));
        return;
    }
    /* Batched: the batch dims of A and B broadcast to those of C. */
    int nb = rc - 2;
    int64_t batches = 1;
    for (int d = 0; d < nb; d++) batches *= dc->dims[d];
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t off_a = 0, off_b = 0;
        if (nb) tfc_batch_offsets(da, db, dc, bi, &off_a, &off_b);
        gemm(backend, dc->dtype, ta, tb, m, n, k, A + (size_t)off_a * es, ta ? m : k,
             B + (size_t)off_b * es, tb ? k : n, (char *)C + (size_t)(bi * m * n) * es, n);
    }
}

/* ---- a product with its bias add and activation (matmul_epilogue.h) ------------------- */

/* The epilogue's row chunk: the biased values of one chunk wait on the stack for the
 * activation (the fused kernel's block length, which its op loops are compiled for). */
#define EPILOGUE_CHUNK 512

static long epilogue_runs; /* (atomic) */

long tfc_matmul_epilogue_runs(void)
{
    return __atomic_load_n(&epilogue_runs, __ATOMIC_RELAXED);
}

/* o = x + b (tfc_ew_add_f32's formula), then vectorized */
TFC_EW_VECTOR_CLONES
static void add_bias(float *restrict o, const float *x, const float *restrict b, int n)
{
    for (int i = 0; i < n; i++) o[i] = x[i] + b[i];
}

TFC_EW_VECTOR_CLONES
static void add_bias_in_place(float *restrict x, const float *restrict b, int n)
{
    for (int i = 0; i < n; i++) x[i] = x[i] + b[i];
}

/* C's m rows (row stride ldc, n columns) become act(C + bias), chunk by chunk. */
static void epilogue_rows(const struct tfc_kargs *a, float *C, int64_t m, int64_t n, int64_t ldc,
                          const float *bias)
{
    const struct tfc_kattr *act = &a->attrs[MATMUL_EPILOGUE_ACT];
    struct tfc_fused_op op = {.kind = (int32_t)act->i, .a = 0, .b = -1, .p0 = act->f,
                              .p1 = a->attrs[MATMUL_EPILOGUE_P1].f};
    float biased[EPILOGUE_CHUNK];
    for (int64_t r = 0; r < m; r++) {
        float *row = C + r * ldc;
        for (int64_t j = 0; j < n; j += EPILOGUE_CHUNK) {
            int len = n - j < EPILOGUE_CHUNK ? (int)(n - j) : EPILOGUE_CHUNK;
            if (!op.kind) {
                add_bias_in_place(row + j, bias + j, len);
                continue;
            }
            add_bias(biased, row + j, bias + j, len);
            tfc_fused_unary_f32(&op, row + j, biased, len);
        }
    }
}

/* The product is matmul_cpu's (its kargs read the same: A, B, then the output after the
 * inputs); then the epilogue over the rows it wrote. */
void tfc_matmul_epilogue_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *dc = tfc_kout_desc(a, 0);
    float *C = tfc_kout(buffers, a, 0);
    if (!C)
        return;
    matmul_cpu(buffers, cl_arg);
    if (a->err && __atomic_load_n(&a->err->set, __ATOMIC_ACQUIRE))
        return; /* (TFC_MATMUL_BACKEND refused: recorded) */
    epilogue_rows(a, C, dc->dims[0], dc->dims[1], tfc_kdesc_ld(buffers, dc),
                  tfc_kin(buffers, a, 2));
    __atomic_add_fetch(&epilogue_runs, 1, __ATOMIC_RELAXED);
}

static struct starpu_perfmodel matmul_model = {
    .type = STARPU_HISTORY_BASED,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_matmul",
};

struct starpu_codelet tfc_cl_matmul = {
    .cpu_funcs = {matmul_cpu},
    .cpu_funcs_name = {"matmul_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_matmul_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_matmul_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &matmul_model,
    .name = "matmul",
};
