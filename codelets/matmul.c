/* matmul.c: CPU kernels for matmul and batched matmul through OpenBLAS (row-major cblas).
 * BLAS runs single-threaded inside a task (set process-wide when the context starts):
 * parallelism comes from StarPU's workers. */
#include <cblas.h>
#include <string.h>
#include "kernel.h"
#include "bcast.h"
#include "opencl_common.h"
#include "../src/tfc.h"

/* C[m,n] = op(A) op(B) for one matrix pair; A is [m,k] or [k,m] when ta, B [k,n] or [n,k]; lda,
 * ldb, ldc are the row strides (a tile of a larger matrix has a row stride above its width). */
static void gemm(int dtype, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *A,
                 int64_t lda, const void *B, int64_t ldb, void *C, int64_t ldc)
{
    if (k == 0) { /* an empty inner dimension sums nothing */
        size_t es = dtype == TFC_FLOAT32 ? 4 : 8;
        for (int64_t i = 0; i < m; i++)
            memset((char *)C + (size_t)(i * ldc) * es, 0, (size_t)n * es);
        return;
    }
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE TB = tb ? CblasTrans : CblasNoTrans;
    if (dtype == TFC_FLOAT32)
        cblas_sgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0f, A, (int)lda, B,
                    (int)ldb, 0.0f, C, (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, TA, TB, (int)m, (int)n, (int)k, 1.0, A, (int)lda, B, (int)ldb,
                    0.0, C, (int)ldc);
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
    if (a->kind == TFC_K_MATMUL) { /* the whole matrices, or tiles of them (strided views) */
        gemm(dc->dtype, ta, tb, m, n, k, A, tfc_kdesc_ld(buffers, da), B,
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
        gemm(dc->dtype, ta, tb, m, n, k, A + (size_t)off_a * es, ta ? m : k,
             B + (size_t)off_b * es, tb ? k : n, (char *)C + (size_t)(bi * m * n) * es, n);
    }
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
