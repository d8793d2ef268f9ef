/* opencl_support.c: the one table of which OpenCL family implements which step. The support
 * predicate asks each family's own check (tfc_opencl_*_ok, in the family files), and every
 * codelet with an OpenCL variant uses the can_execute hook here; it sits above the families so
 * that the helpers in opencl_common.c depend on none of them. */
#include "opencl_common.h"

int tfc_opencl_supports(const struct starpu_codelet *cl, const struct tfc_kargs *a)
{
#ifdef STARPU_USE_OPENCL
    if (!cl || !a || !cl->opencl_funcs[0]) return 0;
    if (cl == &tfc_cl_layout) return tfc_opencl_layout_ok(a); /* concat skips empty parts */
    /* empty operands stay on the CPU path; an input with elements but no buffer is a
     * shape-only input (zeros_like, broadcast_like, sum_to_like, ...) */
    for (int i = 0; i < a->n_in + a->n_out; i++)
        if (a->d[i].buf < 0 && (i >= a->n_in || a->d[i].numel == 0)) return 0;
    if (cl == &tfc_cl_elementwise) return tfc_opencl_elementwise_ok(a);
    if (cl == &tfc_cl_matmul) return tfc_opencl_matmul_ok(a);
    if (cl == &tfc_cl_reduce) return tfc_opencl_reduce_ok(a);
    if (cl == &tfc_cl_softmax) return tfc_opencl_softmax_ok(a);
    if (cl == &tfc_cl_assign) return tfc_opencl_assign_ok(a);
    if (cl == &tfc_cl_optimizer) return tfc_opencl_optimizer_ok(a);
    return 1; /* other codelets (hop) implement every step */
#else
    (void)cl;
    (void)a;
    return 0;
#endif
}

int tfc_opencl_can_execute(unsigned workerid, struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    if (starpu_worker_get_type((int)workerid) != STARPU_OPENCL_WORKER) return 1;
    return tfc_opencl_supports(task->cl, task->cl_arg);
}
