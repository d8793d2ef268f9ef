/* cflow_cases.c: control-flow graphs and helpers that several test programs share
 * (cflow_cases.h says which). */
#include <CUnit/CUnit.h>
#include <string.h>
#include "cflow_cases.h"

tfc_status cf_then(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    const struct cf_caps *k = arg;
    out[0] = tfc_add(g, tfc_mul(g, k->a, k->b), tfc_tanh(g, k->a)); /* a*b + tanh(a) */
    return TFC_OK;
}

tfc_status cf_below3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    out[0] = tfc_less(g, v[0], tfc_scalar(g, TFC_INT32, 3));
    return TFC_OK;
}

tfc_status cf_step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    const struct cf_caps *k = arg;
    out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));
    out[1] = tfc_tanh(g, tfc_add(g, tfc_mul(g, v[1], k->b), k->a)); /* h' = tanh(h*b + a) */
    return TFC_OK;
}

tfc_status cf_tanh_loop(tfc_graph *g, struct cf_caps *k, tfc_tensor *h0, tfc_tensor **r)
{
    tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), h0};
    return tfc_while_loop(g, "loop", cf_below3, cf_step, k, 2, init, NULL, r);
}

tfc_value *scalar_value(enum tfc_dtype dt, double x)
{
    tfc_value *v = NULL;
    CU_ASSERT_FATAL(tfc_value_scalar(dt, x, &v) == TFC_OK);
    return v;
}

int count_prefix(const tfc_run_summary *sm, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < sm->n_tasks; i++) n += !strncmp(sm->tasks[i].node, prefix, strlen(prefix));
    return n;
}
