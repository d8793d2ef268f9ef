/* matmul.cu: CUDA matmul and batched matmul through cuBLAS (StarPU's per-worker handle, bound
 * to the worker's stream). Row-major C[m,n] = op(A) op(B) is computed as the column-major
 * C^T = op(B)^T op(A)^T. Batches use one strided-batched call when each operand's batch is
 * either fully present (stride one matrix) or fully broadcast (stride 0), else one gemm per
 * batch. An empty inner dimension zeroes C, as matmul.c does. */
#include "cuda_common.h" /* first: starpu_config.h defines STARPU_USE_CUDA */
#include <cublas_v2.h>
#include <starpu_cublas_v2.h>

static const char *cublas_status_name(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "error";
    }
}

static int cublas_ok(const struct tfc_kargs *a, cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 1;
    tfc_kernel_fail(a, TFC_ERR_RUNTIME, "cuBLAS %s failed: %s (%d)", what,
                    cublas_status_name(st), (int)st);
    return 0;
}

/* One problem shape: C[m,n] = op(A) op(B), row-major, A [m,k] or [k,m] when ta; lda, ldb, ldc
 * are row strides (a tile of a larger matrix has a stride above its width). */
struct gemm_shape {
    int dtype, ta, tb;
    int m, n, k, lda, ldb, ldc;
};

static int gemm_one(const struct tfc_kargs *a, cublasHandle_t h, const struct gemm_shape *g,
                    const void *A, const void *B, void *C)
{
    cublasOperation_t opB = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g->dtype == TFC_FLOAT32) {
        const float one = 1.0f, zero = 0.0f;
        return cublas_ok(a,
                         cublasSgemm(h, opB, opA, g->n, g->m, g->k, &one, (const float *)B,
                                     g->ldb, (const float *)A, g->lda, &zero, (float *)C, g->ldc),
                         "sgemm");
    }
    const double one = 1.0, zero = 0.0;
    return cublas_ok(a,
                     cublasDgemm(h, opB, opA, g->n, g->m, g->k, &one, (const double *)B, g->ldb,
                                 (const double *)A, g->lda, &zero, (double *)C, g->ldc),
                     "dgemm");
}

static int gemm_strided(const struct tfc_kargs *a, cublasHandle_t h, const struct gemm_shape *g,
                        const void *A, long long sa, const void *B, long long sb, void *C,
                        long long sc, int batches)
{
    cublasOperation_t opB = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opA = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g->dtype == TFC_FLOAT32) {
        const float one = 1.0f, zero = 0.0f;
        return cublas_ok(a,
                         cublasSgemmStridedBatched(h, opB, opA, g->n, g->m, g->k, &one,
                                                   (const float *)B, g->ldb, sb,
                                                   (const float *)A, g->lda, sa, &zero,
                                                   (float *)C, g->ldc, sc, batches),
                         "sgemm strided batched");
    }
    const double one = 1.0, zero = 0.0;
    return cublas_ok(a,
                     cublasDgemmStridedBatched(h, opB, opA, g->n, g->m, g->k, &one,
                                               (const double *)B, g->ldb, sb, (const double *)A,
                                               g->lda, sa, &zero, (double *)C, g->ldc, sc,
                                               batches),
                     "dgemm strided batched");
}

/* The worker's cuBLAS handle, bound to stream s and to scalars in host memory; NULL after
 * recording a failure. */
static cublasHandle_t bound_handle(const struct tfc_kargs *a, cudaStream_t s)
{
    cublasHandle_t h = starpu_cublas_get_local_handle();
    if (!h) {
        tfc_kernel_fail(a, TFC_ERR_RUNTIME, "cuBLAS is not initialized on this worker");
        return NULL;
    }
    cudaStream_t cur = NULL;
    if (cublasGetStream(h, &cur) != CUBLAS_STATUS_SUCCESS || cur != s) {
        if (!cublas_ok(a, cublasSetStream(h, s), "set stream"))
            return NULL;
    }
    if (!cublas_ok(a, cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "set pointer mode"))
        return NULL;
    return h;
}

/* Where batch bi of C reads A and B, in whole matrices: a batch dim of size 1 broadcasts. */
static void batch_offsets(const struct tfc_kdesc *da, const struct tfc_kdesc *db,
                          const struct tfc_kdesc *dc, int64_t bi, int64_t *off_a, int64_t *off_b)
{
    int ra = da->rank, rb = db->rank, nb = dc->rank - 2;
    int64_t rem = bi, st_a = 1, st_b = 1;
    *off_a = 0;
    *off_b = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t idx = rem % dc->dims[d];
        rem /= dc->dims[d];
        int ia = (ra - 2) - (nb - d), ib = (rb - 2) - (nb - d);
        int64_t dima = ia >= 0 ? da->dims[ia] : 1, dimb = ib >= 0 ? db->dims[ib] : 1;
        if (dima != 1) *off_a += idx * st_a;
        if (dimb != 1) *off_b += idx * st_b;
        st_a *= dima;
        st_b *= dimb;
    }
}

/* Batched: the batch dims of A and B broadcast to those of C. */
static void gemm_batched(const struct tfc_kargs *a, cublasHandle_t h, const struct gemm_shape *g,
                         const char *A, const char *B, void *C, size_t es)
{
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = tfc_kout_desc(a, 0);
    int ra = da->rank, rb = db->rank, nb = dc->rank - 2;
    int64_t batches = 1, batches_a = 1, batches_b = 1;
    int full_a = 1, full_b = 1;
    for (int d = 0; d < nb; d++) {
        batches *= dc->dims[d];
        int ia = (ra - 2) - (nb - d), ib = (rb - 2) - (nb - d);
        int64_t dima = ia >= 0 ? da->dims[ia] : 1, dimb = ib >= 0 ? db->dims[ib] : 1;
        batches_a *= dima;
        batches_b *= dimb;
        if (dima != dc->dims[d]) full_a = 0;
        if (dimb != dc->dims[d]) full_b = 0;
    }
    int64_t mat_a = da->dims[ra - 2] * da->dims[ra - 1];
    int64_t mat_b = db->dims[rb - 2] * db->dims[rb - 1];
    int64_t mat_c = dc->dims[nb] * dc->dims[nb + 1];
    if ((full_a || batches_a == 1) && (full_b || batches_b == 1) && batches <= 0x7fffffff) {
        gemm_strided(a, h, g, A, batches_a == 1 ? 0 : (long long)mat_a, B,
                     batches_b == 1 ? 0 : (long long)mat_b, C, (long long)mat_c, (int)batches);
        return;
    }
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t off_a, off_b;
        batch_offsets(da, db, dc, bi, &off_a, &off_b);
        if (!gemm_one(a, h, g, A + (size_t)(off_a * mat_a) * es, B + (size_t)(off_b * mat_b) * es,
                      (char *)C + (size_t)(bi * mat_c) * es))
            return;
    }
}

extern "C" void tfc_matmul_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = tfc_kout_desc(a, 0);
    void *C = tfc_kout(buffers, a, 0);
    if (!C)
        return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    const char *A = (const char *)tfc_kin(buffers, a, 0), *B = (const char *)tfc_kin(buffers, a, 1);
    int ta = a->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = a->attrs[MATMUL_TRANSPOSE_B].i != 0;
    int ra = da->rank, rc = dc->rank;
    int64_t m = dc->dims[rc - 2], n = dc->dims[rc - 1];
    int64_t k = ta ? da->dims[ra - 2] : da->dims[ra - 1];
    size_t es = dc->dtype == TFC_FLOAT32 ? 4 : 8;
    if (k == 0) { /* an empty inner dimension sums nothing (C may be a strided tile) */
        int64_t ldc = a->kind == TFC_K_MATMUL ? tfc_kdesc_ld(buffers, dc) : n;
        int64_t rows = a->kind == TFC_K_MATMUL ? m : dc->numel / (n ? n : 1);
        tfc_cu_check(a, cudaMemset2DAsync(C, (size_t)ldc * es, 0, (size_t)n * es, (size_t)rows, s),
                     "matmul zero fill");
        return;
    }
    cublasHandle_t h = bound_handle(a, s);
    if (!h)
        return;
    struct gemm_shape g;
    g.dtype = dc->dtype;
    g.ta = ta;
    g.tb = tb;
    g.m = (int)m;
    g.n = (int)n;
    g.k = (int)k;
    g.lda = (int)(ta ? m : k);
    g.ldb = (int)(tb ? k : n);
    g.ldc = (int)n;
    if (a->kind == TFC_K_MATMUL) { /* the whole matrices, or tiles of them (strided views) */
        g.lda = (int)tfc_kdesc_ld(buffers, da);
        g.ldb = (int)tfc_kdesc_ld(buffers, db);
        g.ldc = (int)tfc_kdesc_ld(buffers, dc);
        gemm_one(a, h, &g, A, B, C);
        return;
    }
    gemm_batched(a, h, &g, A, B, C, es);
}
