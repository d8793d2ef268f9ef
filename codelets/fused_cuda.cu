/* fused_cuda.cu: the CUDA kernel of fused element-wise steps (codelets/fused.h), computing
 * what fused.c computes: one thread per output element (grid-stride) loads its broadcast
 * inputs, evaluates the op list in registers and writes the outputs (a tile of a larger tensor,
 * sched/tiling.c, with its buffers' row strides). The program, pointers,
 * dims and strides go by value as one kernel parameter; enqueued on the worker's stream. */
#include <string.h>
#include "cuda_common.h"
#include "fused.h"

struct fused_params {
    struct tfc_fused_prog prog;
    int n_in, n_out, rank, contig;
    int64_t cols;                     /* the output's row length */
    int64_t out_ld[TFC_FUSED_MAX_OUT]; /* row strides of the outputs (tiles: leading dims) */
    int64_t dims[TFC_K_MAX_RANK];
    int64_t st[TFC_FUSED_MAX_IN][TFC_K_MAX_RANK];
    const void *in[TFC_FUSED_MAX_IN];
    void *out[TFC_FUSED_MAX_OUT];
};

template <typename T>
static __global__ void fused_kernel(const struct fused_params p, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        T r[TFC_FUSED_MAX_REGS];
        for (int k = 0; k < p.n_in; k++) {
            int64_t rem = i, off = 0;
            for (int d = p.rank - 1; d >= 0; d--) {
                int64_t dim = p.dims[d], q = rem / dim;
                off += (rem - q * dim) * p.st[k][d];
                rem = q;
            }
            r[k] = ((const T *)p.in[k])[off];
        }
        for (int k = 0; k < p.prog.n_ops; k++) {
            const struct tfc_fused_op &op = p.prog.ops[k];
            r[p.n_in + k] = op.b >= 0 ? tfc_ew_binary(op.kind, r[op.a], r[op.b])
                                      : tfc_ew_unary(op.kind, r[op.a], (T)op.p0, (T)op.p1);
        }
        int64_t row = p.contig ? 0 : i / p.cols, col = i - row * p.cols;
        for (int j = 0; j < p.n_out; j++)
            ((T *)p.out[j])[p.contig ? i : row * p.out_ld[j] + col] = r[p.prog.out_reg[j]];
    }
}

extern "C" void tfc_fused_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct fused_params p;
    memset(&p, 0, sizeof p);
    p.prog = *tfc_fused_prog_of(a);
    p.n_in = a->n_in;
    p.n_out = a->n_out;
    p.rank = tfc_fused_strides(a, p.dims, p.st);
    int64_t ld_in[TFC_FUSED_MAX_IN];
    p.cols = p.dims[p.rank - 1];
    p.contig = 1;
    for (int k = 0; k < a->n_in; k++) {
        p.in[k] = tfc_kin(buffers, a, k);
        ld_in[k] = tfc_kdesc_ld(buffers, &a->d[k]);
    }
    tfc_fused_apply_ld(a, p.rank, ld_in, p.st); /* tiles (sched/tiling.c): row strides */
    for (int j = 0; j < a->n_out; j++) {
        if (!(p.out[j] = tfc_kout(buffers, a, j))) return;
        p.out_ld[j] = tfc_kdesc_ld(buffers, tfc_kout_desc(a, j));
        if (p.out_ld[j] != p.cols) p.contig = 0;
    }
    int64_t n = od->numel;
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (od->dtype == TFC_FLOAT32)
        fused_kernel<float><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(p, n);
    else
        fused_kernel<double><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(p, n);
    tfc_cu_check_launch(a, "fused");
}
