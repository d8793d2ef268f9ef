/* kernel.h: what every codelet file needs: buffer accessors that work for StarPU's vector and
 * matrix interfaces (tiling hands kernels 2-D views: pointer, ld, nx, ny), the codelets of
 * each op family, and the shared perfmodel hooks. Included only by codelets/ and sched/. */
#ifndef TFC_KERNEL_H
#define TFC_KERNEL_H

#include <starpu.h>
#include "kargs.h"
#include "op_attrs.h"
#include "../src/internal.h" /* TFC_INTERNAL, TFC_CHECK with tfc_kernel_fail */

#ifdef __cplusplus
extern "C" {
#endif

/* The base pointer of a vector or matrix interface (CPU address, CUDA device pointer, or for
 * OpenCL the cl_mem handle). */
static inline uintptr_t tfc_buf_ptr(void *iface)
{
    switch (*(enum starpu_data_interface_id *)iface) {
    case STARPU_MATRIX_INTERFACE_ID:
        return STARPU_MATRIX_GET_PTR(iface);
    case STARPU_VECTOR_INTERFACE_ID:
        return STARPU_VECTOR_GET_PTR(iface);
    default:
        return 0;
    }
}

/* The 2-D geometry of a buffer viewed as a row-major array: nx elements per row (StarPU's
 * contiguous dimension), ny rows, ld elements from one row to the next. A matrix interface (a
 * tile of a larger tensor, sched/tiling.c) says all three; a vector interface is a whole
 * contiguous tensor, so the caller gives its row length (`cols`, the last dimension) and ld is
 * that. Sizes are in elements. */
static inline int64_t tfc_buf_ld(void *iface, int64_t cols)
{
    if (*(enum starpu_data_interface_id *)iface == STARPU_MATRIX_INTERFACE_ID)
        return (int64_t)STARPU_MATRIX_GET_LD(iface);
    return cols;
}

static inline int64_t tfc_buf_nx(void *iface, int64_t cols)
{
    if (*(enum starpu_data_interface_id *)iface == STARPU_MATRIX_INTERFACE_ID)
        return (int64_t)STARPU_MATRIX_GET_NX(iface);
    return cols;
}

static inline int64_t tfc_buf_ny(void *iface, int64_t cols)
{
    if (*(enum starpu_data_interface_id *)iface == STARPU_MATRIX_INTERFACE_ID)
        return (int64_t)STARPU_MATRIX_GET_NY(iface);
    int64_t nx = (int64_t)STARPU_VECTOR_GET_NX(iface);
    return cols > 0 ? nx / cols : 0;
}

/* The row stride (elements) of operand d (an input or output descriptor) in this task: the
 * leading dimension of its tile, or its last dimension for a whole buffer (and without one). */
static inline int64_t tfc_kdesc_ld(void *buffers[], const struct tfc_kdesc *d)
{
    int64_t cols = d->rank ? d->dims[d->rank - 1] : 1;
    return d->buf < 0 ? cols : tfc_buf_ld(buffers[d->buf], cols);
}

/* Input i's data, or NULL when it has zero elements. */
static inline void *tfc_kin(void *buffers[], const struct tfc_kargs *a, int i)
{
    int b = a->d[i].buf;
    return b < 0 ? NULL : (void *)tfc_buf_ptr(buffers[b]);
}

/* Output i's data, or NULL when it has zero elements. */
static inline void *tfc_kout(void *buffers[], const struct tfc_kargs *a, int i)
{
    int b = a->d[a->n_in + i].buf;
    return b < 0 ? NULL : (void *)tfc_buf_ptr(buffers[b]);
}

/* Element size of a dtype value (float32 .. bool). */
static inline size_t tfc_kdtype_size(int dtype)
{
    static const size_t sizes[] = {4, 8, 4, 8, 1, 1};
    return dtype >= 0 && dtype < 6 ? sizes[dtype] : 0;
}

/* Concat and split see the whole tensor as outer x (len_axis x inner) blocks: the whole
 * tensor's descriptor (output 0 of concat, input 0 of split), its axis, outer and inner. */
static inline const struct tfc_kdesc *tfc_concat_geometry(const struct tfc_kargs *a, int is_split,
                                                          int *axis, int64_t *outer,
                                                          int64_t *inner)
{
    const struct tfc_kdesc *whole = is_split ? &a->d[0] : tfc_kout_desc(a, 0);
    int ax = (int)(is_split ? a->attrs[SPLIT_AXIS].i : a->attrs[CONCAT_AXIS].i);
    if (ax < 0) ax += whole->rank;
    *axis = ax;
    *outer = *inner = 1;
    for (int i = 0; i < ax; i++) *outer *= whole->dims[i];
    for (int i = ax + 1; i < whole->rank; i++) *inner *= whole->dims[i];
    return whole;
}

/* The codelets, one per op family. */
extern struct starpu_codelet tfc_cl_elementwise;
extern struct starpu_codelet tfc_cl_matmul;
extern struct starpu_codelet tfc_cl_softmax;
extern struct starpu_codelet tfc_cl_reduce;
extern struct starpu_codelet tfc_cl_layout;
extern struct starpu_codelet tfc_cl_assign;
extern struct starpu_codelet tfc_cl_optimizer;
extern struct starpu_codelet tfc_cl_hop;
extern struct starpu_codelet tfc_cl_chain; /* codelets/chain.h */

/* Perfmodel hooks (codelets/perfmodel.c): the footprint computed at plan time, and an analytic
 * cost for light families (bytes over a nominal bandwidth plus flops over a nominal rate). */
uint32_t tfc_model_footprint(struct starpu_task *task);
double tfc_model_analytic_cost(struct starpu_task *task, unsigned nimpl);
/* Sets the footprint, flops and bytes of kernel arguments from their kind, operands and
 * attributes (sched/ calls it when it builds a step, and again when tiling changes dims). */
void tfc_kargs_finish(struct tfc_kargs *a);
/* Points a's error slot at err, and those of the steps it chains (codelets/chain.c): what a
 * run instance does to its copy of each step's kargs. */
void tfc_kargs_set_err(struct tfc_kargs *a, struct tfc_kerr *err);

/* CUDA entry points (the .cu files), present when built with CUDA. */
#ifdef STARPU_USE_CUDA
void tfc_elementwise_cuda(void *buffers[], void *cl_arg);
void tfc_matmul_cuda(void *buffers[], void *cl_arg);
void tfc_softmax_cuda(void *buffers[], void *cl_arg);
void tfc_reduce_cuda(void *buffers[], void *cl_arg);
void tfc_layout_cuda(void *buffers[], void *cl_arg);
void tfc_assign_cuda(void *buffers[], void *cl_arg);
void tfc_optimizer_cuda(void *buffers[], void *cl_arg);
/* Creates/destroys per-worker cuDNN handles (called at context start/stop). */
void tfc_cuda_libs_init(void);
void tfc_cuda_libs_shutdown(void);
/* A run instance's device error record (mapped pinned host memory), or NULL when StarPU has
 * no CUDA worker or it cannot be allocated; freed by tfc_cuda_kerr_dev_free. */
struct tfc_kerr_dev *tfc_cuda_kerr_dev_alloc(void);
void tfc_cuda_kerr_dev_free(struct tfc_kerr_dev *d);
#endif

#ifdef __cplusplus
}
#endif

#endif
