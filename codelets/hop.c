/* hop.c: a copy op with CPU and OpenCL codelets, used by the device-coherence tests: the plan
 * inserts it after every node, pinned to the OpenCL worker, so every value crosses memory
 * nodes and a host read of a stale buffer shows up as a wrong result. */
#include <string.h>
#include "kernel.h"
#ifdef STARPU_USE_OPENCL
#include <starpu_opencl.h>
#endif

static void hop_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    if (a->d[0].numel)
        memcpy(tfc_kout(buffers, a, 0), tfc_kin(buffers, a, 0),
               (size_t)a->d[0].numel * tfc_kdtype_size(a->d[0].dtype));
}

#ifdef STARPU_USE_OPENCL
/* Device-to-device copy inside the OpenCL worker's memory node. */
static void hop_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    size_t bytes = (size_t)a->d[0].numel * tfc_kdtype_size(a->d[0].dtype);
    cl_mem src = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[0]);
    cl_mem dst = (cl_mem)STARPU_VECTOR_GET_DEV_HANDLE(buffers[1]);
    size_t soff = STARPU_VECTOR_GET_OFFSET(buffers[0]), doff = STARPU_VECTOR_GET_OFFSET(buffers[1]);
    cl_command_queue queue;
    starpu_opencl_get_current_queue(&queue);
    cl_int err = clEnqueueCopyBuffer(queue, src, dst, soff, doff, bytes, 0, NULL, NULL);
    if (err == CL_SUCCESS)
        err = clFinish(queue);
    if (err != CL_SUCCESS)
        tfc_kernel_fail(a, 7 /* TFC_ERR_RUNTIME */, "OpenCL copy failed (error %d)", (int)err);
}
#endif

static struct starpu_perfmodel hop_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_hop",
};

struct starpu_codelet tfc_cl_hop = {
    .cpu_funcs = {hop_cpu},
    .cpu_funcs_name = {"hop_cpu"},
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {hop_opencl},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &hop_model,
    .name = "hop",
};
