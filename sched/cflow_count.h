/* cflow_count.h: count-known while loops (sched/cflow_count.c). A loop whose predicate compares
 * a scalar counter with a loop-invariant bound, and whose body adds a loop-invariant step to
 * that counter, runs a number of times that follows from the counter's first value, the bound
 * and the step: read once before the loop, they let the runner submit every iteration without
 * reading the predicate back (XLA's trip-count analysis; TF's maximum_iterations). */
#ifndef TFC_CFLOW_COUNT_H
#define TFC_CFLOW_COUNT_H

#include <stdint.h>
#include "../graph/control_flow.h"

/* The predicate, as "counter REL bound". */
enum tfc_cf_rel { TFC_REL_LT, TFC_REL_LE, TFC_REL_GT, TFC_REL_GE, TFC_REL_NE, TFC_REL_EQ };

/* Where a loop-invariant scalar comes from. */
struct tfc_cf_operand {
    const tfc_value *value;  /* a constant's data, or NULL ... */
    int input;               /* ... then the while node's input holding it (a capture) */
};

/* The counter pattern of a while loop. */
struct tfc_cf_counter {
    int var;                 /* the counter's loop variable */
    enum tfc_cf_rel rel;
    enum tfc_dtype dtype;    /* the counter's, the bound's and the step's */
    struct tfc_cf_operand bound, step;
    int negate_step;         /* the body subtracts the step */
};

/* 1 when forward while loop cf has the counter pattern (filled in *out), else 0. Looks only at
 * the graph: the values are read when the loop runs. */
int tfc_cf_counter_find(const struct tfc_cflow *cf, struct tfc_cf_counter *out);

/* The iterations of a counter loop from its counter's first value i0, its bound n and its
 * step c (each one element of k->dtype), at most max_iter when max_iter > 0. 1 and *count
 * when the count is exact; 0 when it cannot be computed (a step of the wrong sign or zero for
 * a loop that runs, a float that is not an integer or beyond the exactly representable
 * integers, an integer counter that would wrap): the loop then tests its predicate. */
int tfc_cf_trip_count(const struct tfc_cf_counter *k, const void *i0, const void *n,
                      const void *c, int64_t max_iter, int64_t *count);

#endif
