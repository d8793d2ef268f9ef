/* chain_records.h: a profiled run's records of the steps inside its chain tasks (a pinned plan,
 * a block of rows): the chain kernel times each step when the run asks (codelets/chain.h's
 * step_us), and the run turns the times into records after every task ended. */
#ifndef TFC_CHAIN_RECORDS_H
#define TFC_CHAIN_RECORDS_H

#include "plan.h"

/* The doubles a run of p passes its chain tasks for their steps' times: 2 per chained step (0
 * when p has no chain task). */
size_t tfc_chain_times_len(const struct plan *p);

/* Points the chain tasks of instance in at their parts of times (tfc_chain_times_len(p)
 * doubles, zeroed), or with times NULL at nothing: a run that does not profile. */
void tfc_chain_times_attach(const struct plan *p, struct instance *in, double *times);

/* Writes to out (room for tfc_chain_times_len(p) / 2 records) a record per step that ran inside
 * one of p's chain tasks: its node and op, the chain task's worker (from task_records, the
 * run's records by step), its start and end from times. Returns how many. */
int tfc_chain_step_records(const struct plan *p, const tfc_graph *g,
                           const tfc_task_record *task_records, const double *times,
                           tfc_task_record *out);

#endif
