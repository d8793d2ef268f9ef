/* sched.h: what src/ asks of the StarPU side: starting and stopping the runtime, and reading
 * back what it runs with. Sessions (sched/session.c) implement the public session API. */
#ifndef TFC_SCHED_H
#define TFC_SCHED_H

#include "../src/internal.h"

struct tfc_starpu_facts;
struct tfc_starpu_home;

/* What the linked StarPU allows (maximum workers per kind, policy names), for src/env.c. */
void tfc_runtime_facts(struct tfc_starpu_facts *f);
/* Readies the environment StarPU reads at starpu_init; may make a private home (else NULL). */
typedef tfc_status (*tfc_runtime_prepare_fn)(struct tfc_starpu_home **home, char *msg);
/* Starts StarPU (or joins a running one: starpu_init is reference-counted in 1.3, so the
 * application's runtime stays up when we stop). When it is the one starting StarPU, calls
 * prepare first (a failure is returned as is) and keeps the home it made until StarPU stops. */
tfc_status tfc_runtime_start(int *joined, tfc_runtime_prepare_fn prepare, char *msg);
/* The same through StarPU-MPI (sched/dist.h): starts it, or joins one a distributed context
 * started; a StarPU running without MPI is an error. Gives this rank and the number of ranks. */
tfc_status tfc_runtime_start_dist(int *rank, int *size, tfc_runtime_prepare_fn prepare, char *msg);
/* Drops one context's hold; the last one also drops what was built for this StarPU. */
void tfc_runtime_stop(void);
void tfc_runtime_info(tfc_ctx_info *info);
void tfc_runtime_describe(char *out, size_t size);

#endif
