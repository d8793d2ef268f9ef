/* chain.h: one task that runs several steps' CPU kernels in turn. Consecutive nodes split over
 * the same blocks (a row-split plan, sched/tiling_rows.c; an inference plan's convolution
 * layers over blocks of images) run each block's steps as one task (sched/chain_blocks.c
 * builds it): one task per block instead of one per step and block, and the intermediates
 * between the steps in the worker's scratch memory instead of StarPU handles. The imported
 * MLP's run at batch 128 had submitted 14 tasks and kept 8 partitions for its 2 blocks. A
 * plan pinned to one worker (its steps a chain, sched/passes.c) is one such task too.
 *
 * The chain's kargs is one block (instances copy it whole, so offsets, not pointers): the
 * tfc_kargs header (kind TFC_K_CHAIN, no descriptors), then struct tfc_chain, its steps, its
 * buffer table, then each step's own kargs at args_off from the header. */
#ifndef TFC_CHAIN_H
#define TFC_CHAIN_H

#include <starpu.h>
#include "kargs.h"

/* Where buffer j of a chained step is: the chain task's buffer `task_buf`, or when that is -1
 * nx elements of elemsize bytes at offset `off` of the worker's scratch. */
struct tfc_chain_buf {
    int32_t task_buf;
    uint32_t nx;
    uint64_t off;
    uint64_t elemsize;
};

struct tfc_chain_step {
    void (*func)(void *buffers[], void *cl_arg); /* the step's CPU kernel */
    uint64_t args_off;  /* its kargs, from the chain's kargs */
    int32_t n_buf;      /* at most STARPU_NMAXBUFS */
    int32_t first_buf;  /* its buffers: entries first_buf .. first_buf + n_buf - 1 */
};

struct tfc_chain {
    int32_t n_steps, n_bufs;
    uint64_t scratch_bytes;
    double *step_us; /* NULL, or where a profiled run wants each step's start and end (StarPU's
                      * clock, us: 2 per step): set on the instance's copy per run */
    /* then: struct tfc_chain_step [n_steps], struct tfc_chain_buf [n_bufs] */
};

/* The chain of kargs a (the header's size rounded up to 16 bytes), its steps and buffers. */
#define TFC_CHAIN_HEAD ((sizeof(struct tfc_kargs) + 15) & ~(size_t)15)

static inline struct tfc_chain *tfc_chain_of(const struct tfc_kargs *a)
{
    return (struct tfc_chain *)(void *)((char *)(uintptr_t)a + TFC_CHAIN_HEAD);
}

static inline struct tfc_chain_step *tfc_chain_steps(const struct tfc_chain *c)
{
    return (struct tfc_chain_step *)(void *)(c + 1);
}

static inline struct tfc_chain_buf *tfc_chain_bufs(const struct tfc_chain *c)
{
    return (struct tfc_chain_buf *)(void *)(tfc_chain_steps(c) + c->n_steps);
}

/* Step i's kargs within chain kargs a. */
static inline struct tfc_kargs *tfc_chain_args(const struct tfc_kargs *a, int i)
{
    return (struct tfc_kargs *)(void *)((char *)(uintptr_t)a +
                                        tfc_chain_steps(tfc_chain_of(a))[i].args_off);
}

#endif
