/* chain.c: the chain codelet (chain.h): each step's CPU kernel in turn, its buffers the
 * chain task's or views of the worker's scratch memory. */
#include <inttypes.h>
#include "chain.h"
#include "kernel.h"
#include "thread_scratch.h"

void tfc_kargs_set_err(struct tfc_kargs *a, struct tfc_kerr *err)
{
    a->err = err;
    for (int i = 0; a->kind == TFC_K_CHAIN && i < tfc_chain_of(a)->n_steps; i++)
        tfc_chain_args(a, i)->err = err;
}

/* Step s's buffers: the task's, or vector views of scratch. */
static void step_buffers(const struct tfc_chain *c, const struct tfc_chain_step *s,
                         void *buffers[], char *scratch, struct starpu_vector_interface *views,
                         void *bufs[])
{
    const struct tfc_chain_buf *b = tfc_chain_bufs(c) + s->first_buf;
    for (int j = 0; j < s->n_buf; j++) {
        if (b[j].task_buf >= 0) {
            bufs[j] = buffers[b[j].task_buf];
            continue;
        }
        views[j] = (struct starpu_vector_interface){
            .id = STARPU_VECTOR_INTERFACE_ID, .ptr = (uintptr_t)(scratch + b[j].off),
            .nx = b[j].nx, .elemsize = (size_t)b[j].elemsize,
            .allocsize = (size_t)b[j].nx * (size_t)b[j].elemsize};
        bufs[j] = &views[j];
    }
}

static void chain_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_chain *c = tfc_chain_of(a);
    char *scratch = NULL;
    if (c->scratch_bytes &&
        !(scratch = tfc_thread_scratch(TFC_SCRATCH_CHAIN, (size_t)c->scratch_bytes))) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory for the %" PRIu64 " bytes of a "
                        "chain task's intermediates", c->scratch_bytes);
        return;
    }
    const struct tfc_chain_step *steps = tfc_chain_steps(c);
    double *t = c->step_us; /* a profiled run's: its steps' times */
    for (int i = 0; i < c->n_steps; i++) {
        struct starpu_vector_interface views[STARPU_NMAXBUFS];
        void *bufs[STARPU_NMAXBUFS];
        step_buffers(c, &steps[i], buffers, scratch, views, bufs);
        if (t) t[2 * i] = starpu_timing_now();
        steps[i].func(bufs, tfc_chain_args(a, i));
        if (t) t[2 * i + 1] = starpu_timing_now();
        if (a->err && __atomic_load_n(&a->err->set, __ATOMIC_ACQUIRE)) return; /* failed */
    }
}

static struct starpu_perfmodel chain_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_chain",
};

struct starpu_codelet tfc_cl_chain = {
    .where = STARPU_CPU,
    .cpu_funcs = {chain_cpu},
    .cpu_funcs_name = {"chain_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &chain_model,
    .name = "chain",
};
