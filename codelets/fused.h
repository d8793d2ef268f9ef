/* fused.h: the fused element-wise kernel's program. Plan-time fusion (sched/passes.c) turns a
 * chain or tree of element-wise steps into one task whose kernel arguments carry, after the
 * operand descriptors, a tiny op list: registers 0..n_in-1 hold the inputs (broadcast to the
 * output shape), op k writes register n_in+k from one or two earlier registers, and output j
 * is register out_reg[j]. Every operand has the same float dtype; every output has the shape
 * of output 0. Plain C, shared by the CPU (fused.c), CUDA (fused_cuda.cu) and OpenCL
 * (opencl_fused.c) hosts. */
#ifndef TFC_FUSED_H
#define TFC_FUSED_H

#include <stdint.h>
#include "kargs.h"
#include "ew_math.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TFC_FUSED_MAX_IN 8   /* distinct external inputs */
#define TFC_FUSED_MAX_OUT 4  /* the root and the intermediates that must stay visible */
#define TFC_FUSED_MAX_OPS 24 /* instructions */
#define TFC_FUSED_MAX_REGS (TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OPS)

struct tfc_fused_op {
    int32_t kind;  /* a unary or binary arithmetic kind (ew_math.h: tfc_ew_is_unary/binary) */
    int32_t a, b;  /* operand registers (b = -1 for unary kinds) */
    int32_t pad_;
    double p0, p1; /* a unary kind's float attributes (leaky_relu's alpha, clip's bounds) */
};

struct tfc_fused_prog {
    int32_t n_ops;
    int32_t pad_;
    int32_t out_reg[TFC_FUSED_MAX_OUT];
    struct tfc_fused_op ops[TFC_FUSED_MAX_OPS];
};

/* The program stored after the n_in + n_out operand descriptors of a fused step's kargs. */
static inline const struct tfc_fused_prog *tfc_fused_prog_of(const struct tfc_kargs *a)
{
    return (const struct tfc_fused_prog *)(const void *)&a->d[a->n_in + a->n_out];
}

/* Element strides of input k in the output's index space (0 where it broadcasts), over the
 * output's dims; a scalar output iterates as [1]. Returns the rank used (>= 1). */
static inline int tfc_fused_strides(const struct tfc_kargs *a, int64_t dims[TFC_K_MAX_RANK],
                                    int64_t st[][TFC_K_MAX_RANK])
{
    const struct tfc_kdesc *o = &a->d[a->n_in];
    int rank = o->rank > 0 ? o->rank : 1;
    for (int d = 0; d < rank; d++) dims[d] = o->rank > 0 ? o->dims[d] : 1;
    for (int k = 0; k < a->n_in; k++) {
        int64_t stride = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int id = a->d[k].rank - (rank - d); /* right-aligned input axis */
            int64_t dim = id >= 0 ? a->d[k].dims[id] : 1;
            st[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    return rank;
}

/* Tiling (sched/tiling.c) hands the kernel 2-D tiles of larger tensors: rows of a rank-2
 * input are ld[k] elements apart in its buffer (its leading dimension; its row length for a
 * whole buffer), so its row stride in st (from tfc_fused_strides) becomes ld[k]. */
static inline void tfc_fused_apply_ld(const struct tfc_kargs *a, int rank, const int64_t *ld,
                                      int64_t st[][TFC_K_MAX_RANK])
{
    if (rank < 2) return;
    for (int k = 0; k < a->n_in; k++)
        if (a->d[k].rank == 2 && st[k][rank - 2] != 0) st[k][rank - 2] = ld[k];
}

/* One unary op of a fused program over m floats, as the fused kernel applies it (o and x do
 * not overlap); for codelets/matmul.c's epilogue. */
void tfc_fused_unary_f32(const struct tfc_fused_op *op, float *o, const float *x, int m);

/* The codelet (codelets/fused.c) and its device entry points. */
struct starpu_codelet;
extern struct starpu_codelet tfc_cl_fused;
void tfc_fused_cuda(void *buffers[], void *cl_arg);   /* fused_cuda.cu, CUDA builds */
void tfc_fused_opencl(void *buffers[], void *cl_arg); /* opencl_fused.c, OpenCL builds */

#ifdef __cplusplus
}
#endif

#endif
