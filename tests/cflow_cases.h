/* cflow_cases.h: control-flow graphs and helpers that several test programs share
 * (tests/cflow_cases.c, linked into each): the cond branch and the while loop
 * h' = tanh(h*b + a) of 3 iterations that tests/test_grad.c differentiates and tests/test_ops.c
 * runs in each dtype, and the value and report helpers of tests/test_control_flow.c and
 * tests/test_cflow_count.c. */
#ifndef TFC_TEST_CFLOW_CASES_H
#define TFC_TEST_CFLOW_CASES_H

#include "../src/tfc.h"

struct cf_caps { tfc_tensor *a, *b; }; /* the tensors the regions capture (arg: struct cf_caps *) */

/* A then branch: a*b + tanh(a). */
tfc_status cf_then(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out);
/* The loop's predicate: counter v[0] < 3. */
tfc_status cf_below3(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out);
/* The loop's body: counter + 1, h' = tanh(h*b + a). */
tfc_status cf_step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out);
/* Builds while loop "loop" from a counter 0 and h0 with cf_below3 and cf_step on k's a and b
 * (3 iterations); r[0] receives the counter, r[1] h. Returns tfc_while_loop's status. */
tfc_status cf_tanh_loop(tfc_graph *g, struct cf_caps *k, tfc_tensor *h0, tfc_tensor **r);

/* A scalar value of dtype dt (caller destroys); a CUnit fatal assertion on failure. */
tfc_value *scalar_value(enum tfc_dtype dt, double x);
/* How many of the summary's tasks belong to nodes whose names start with prefix. */
int count_prefix(const tfc_run_summary *sm, const char *prefix);

#endif
