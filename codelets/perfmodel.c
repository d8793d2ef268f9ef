/* perfmodel.c: the hooks every codelet's perfmodel shares, and the kernels' error reporting.
 * The footprint is computed once per plan node (kind, dtypes, shapes, attributes: StarPU's
 * default ignores the element size); light families get an analytic cost instead of a
 * history, since tasks of a few microseconds are too noisy to calibrate. */
#include <stdarg.h>
#include <stdio.h>
#include "kernel.h"

uint32_t tfc_model_footprint(struct starpu_task *task)
{
    const struct tfc_kargs *a = task->cl_arg;
    return a->footprint;
}

/* Nominal rates of one CPU core: 10 GB/s and 5 GFLOP/s; a task costs at least 2 us. */
double tfc_model_analytic_cost(struct starpu_task *task, unsigned nimpl)
{
    (void)nimpl;
    const struct tfc_kargs *a = task->cl_arg;
    return 2.0 + a->bytes / 1e4 + a->flops / 5e3;
}

void tfc_kernel_fail(const struct tfc_kargs *a, int status, const char *fmt, ...)
{
    struct tfc_kerr *e = a->err;
    int expected = 0;
    if (!e || !__atomic_compare_exchange_n(&e->set, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE))
        return;
    e->status = status;
    e->node = a->node;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}
