/* runtime.c: the StarPU lifecycle. StarPU reads its own environment variables (STARPU_SCHED,
 * STARPU_NCPU, ...); we never set or override them. */
#include <errno.h>
#include <string.h>
#include <starpu.h>
#include "sched.h"
#include "../codelets/kernel.h"
#include "../codelets/opencl_common.h"

tfc_status tfc_runtime_start(int *joined, char *msg)
{
    *joined = starpu_is_initialized();
    int ret = starpu_init(NULL);
    if (ret == -ENODEV)
        return tfc_fail(msg, TFC_ERR_NO_DEVICE,
                        "StarPU found no worker (check STARPU_NCPU, STARPU_NCUDA, STARPU_NOPENCL)");
    if (ret != 0)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "starpu_init failed: %s", strerror(-ret));
#ifdef STARPU_USE_CUDA
    if (!*joined) tfc_cuda_libs_init();
#endif
    return TFC_OK;
}

void tfc_runtime_stop(int joined)
{
#ifdef STARPU_USE_CUDA
    if (!joined) tfc_cuda_libs_shutdown(); /* a joined runtime keeps what its owner set up */
#endif
#ifdef STARPU_USE_OPENCL
    if (!joined) tfc_opencl_shutdown(); /* programs belong to this StarPU lifetime */
#endif
#if !defined(STARPU_USE_CUDA) && !defined(STARPU_USE_OPENCL)
    (void)joined;
#endif
    starpu_shutdown(); /* drops our reference; the application's keeps StarPU up */
}

void tfc_runtime_info(tfc_ctx_info *info)
{
    memset(info, 0, sizeof *info);
    info->n_cpu_workers = (int)starpu_cpu_worker_get_count();
    info->n_cuda_workers = (int)starpu_cuda_worker_get_count();
    info->n_opencl_workers = (int)starpu_opencl_worker_get_count();
    info->n_memory_nodes = (int)starpu_memory_nodes_get_count();
    info->min_priority = starpu_sched_get_min_priority();
    info->max_priority = starpu_sched_get_max_priority();
    struct starpu_sched_policy *p = starpu_sched_ctx_get_sched_policy(0);
    snprintf(info->sched_policy, sizeof info->sched_policy, "%s",
             p && p->policy_name ? p->policy_name : "unknown");
}

void tfc_runtime_describe(char *out, size_t size)
{
    tfc_ctx_info info;
    tfc_runtime_info(&info);
    size_t pos = (size_t)snprintf(out, size, "scheduler %s, priorities [%d, %d], %u workers, %d memory nodes\n",
                                  info.sched_policy, info.min_priority, info.max_priority,
                                  starpu_worker_get_count(), info.n_memory_nodes);
    for (unsigned w = 0; w < starpu_worker_get_count() && pos < size; w++) {
        char name[64];
        starpu_worker_get_name((int)w, name, sizeof name);
        enum starpu_worker_archtype t = starpu_worker_get_type((int)w);
        const char *kind = t == STARPU_CPU_WORKER ? "cpu" : t == STARPU_CUDA_WORKER ? "cuda"
                         : t == STARPU_OPENCL_WORKER ? "opencl" : "other";
        pos += (size_t)snprintf(out + pos, size - pos, "  worker %u: %s (%s), memory node %u\n", w,
                                name, kind, starpu_worker_get_memory_node(w));
    }
}
