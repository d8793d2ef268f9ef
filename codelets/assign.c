/* assign.c: CPU kernels of the stateful ops: assign (buffer 0 written), assign_add and
 * assign_sub (buffer 0 read and written). Buffer 0 is the variable's own StarPU handle. */
#include <string.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

static void assign_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    void *var = tfc_kin(buffers, a, 0);
    const void *val = tfc_kin(buffers, a, 1);
    const struct tfc_kdesc *d = &a->d[0];
    if (!var)
        return;
    if (a->kind == TFC_K_ASSIGN) {
        memcpy(var, val, (size_t)d->numel * tfc_kdtype_size(d->dtype));
        return;
    }
    double sign = a->kind == TFC_K_ASSIGN_SUB ? -1.0 : 1.0;
    if (d->dtype == TFC_FLOAT32) {
        float *v = var;
        const float *x = val;
        float s = (float)sign;
        for (int64_t i = 0; i < d->numel; i++) v[i] += s * x[i];
    } else if (d->dtype == TFC_FLOAT64) {
        double *v = var;
        const double *x = val;
        for (int64_t i = 0; i < d->numel; i++) v[i] += sign * x[i];
    } else {
        for (int64_t i = 0; i < d->numel; i++)
            tfc_store_i64(var, d->dtype, i,
                          tfc_load_i64(var, d->dtype, i) +
                              (int64_t)sign * tfc_load_i64(val, d->dtype, i));
    }
}

static struct starpu_perfmodel assign_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_assign",
};

struct starpu_codelet tfc_cl_assign = {
    .cpu_funcs = {assign_cpu},
    .cpu_funcs_name = {"assign_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_assign_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_assign_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &assign_model,
    .name = "assign",
};
