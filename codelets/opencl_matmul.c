/* opencl_matmul.c: OpenCL matmul and batched matmul (float32, float64): a naive kernel, one
 * work-item per output element, with row strides (tiles of a larger matrix); batches (with
 * broadcast batch dims, as in matmul.c) are enqueued one by one with buffer offsets. */
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

int tfc_opencl_matmul_ok(const struct tfc_kargs *a)
{
    int dt = a->d[0].dtype;
    return (dt == TFC_FLOAT32 || dt == TFC_FLOAT64) && a->d[1].dtype == dt &&
           tfc_kout_desc(a, 0)->dtype == dt && tfc_kout_desc(a, 0)->rank >= 2;
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
kernel void TS(matmul)(global T *a0, ulong ao, global T *b0, ulong bo, global T *c0, ulong co,
                       int ta, int tb, long m, long n, long k, long lda, long ldb, long ldc)
{
    long j = get_global_id(0), i = get_global_id(1);
    if (i >= m || j >= n) return;
    global T *A = AT(a0, ao), *B = AT(b0, bo), *C = AT(c0, co);
    T acc = 0;
    for (long p = 0; p < k; p++)
        acc += (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
    C[i * ldc + j] = acc;
}
);

static struct tfc_ocl_prog prog = {.family = "matmul", .body = body};

void tfc_matmul_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = tfc_kout_desc(a, 0);
    cl_int ta = a->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = a->attrs[MATMUL_TRANSPOSE_B].i != 0;
    int ra = da->rank, rc = dc->rank;
    cl_long m = dc->dims[rc - 2], n = dc->dims[rc - 1];
    cl_long k = ta ? da->dims[ra - 2] : da->dims[ra - 1];
    size_t es = tfc_kdtype_size(dc->dtype);
    cl_mem A, B, C;
    cl_ulong a0, b0, c0;
    tfc_ocl_buf(buffers, da->buf, &A, &a0);
    tfc_ocl_buf(buffers, db->buf, &B, &b0);
    tfc_ocl_buf(buffers, dc->buf, &C, &c0);
    cl_command_queue q;
    cl_kernel kern = tfc_ocl_kernel(&prog, "matmul", dc->dtype, a, &q);
    if (!kern) return;
    int nb = a->kind == TFC_K_MATMUL ? 0 : rc - 2;
    /* row strides: a tile (matrix interface) has its own; whole buffers are contiguous */
    cl_long lda = nb ? (ta ? m : k) : tfc_kdesc_ld(buffers, da);
    cl_long ldb = nb ? (tb ? k : n) : tfc_kdesc_ld(buffers, db);
    cl_long ldc = nb ? n : tfc_kdesc_ld(buffers, dc);
    int64_t batches = 1;
    for (int d = 0; d < nb; d++) batches *= dc->dims[d];
    for (int64_t bi = 0; bi < batches; bi++) {
        int64_t off_a = 0, off_b = 0;
        if (nb) tfc_batch_offsets(da, db, dc, bi, &off_a, &off_b);
        cl_ulong ao = a0 + (cl_ulong)off_a * es, bo = b0 + (cl_ulong)off_b * es;
        cl_ulong co = c0 + (cl_ulong)(bi * m * n) * es;
        if (tfc_ocl_run(a, kern, q, (size_t)n, (size_t)m, 14,
                        (size_t[]){sizeof A, sizeof ao, sizeof B, sizeof bo, sizeof C, sizeof co,
                                   sizeof ta, sizeof tb, sizeof m, sizeof n, sizeof k,
                                   sizeof lda, sizeof ldb, sizeof ldc},
                        (const void *[]){&A, &ao, &B, &bo, &C, &co, &ta, &tb, &m, &n, &k, &lda,
                                         &ldb, &ldc}))
            break;
    }
    clReleaseKernel(kern);
}
#endif
