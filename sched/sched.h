/* sched.h: what src/ asks of the StarPU side: starting and stopping the runtime, and reading
 * back what it runs with. Sessions (sched/session.c) implement the public session API. */
#ifndef TFC_SCHED_H
#define TFC_SCHED_H

#include "../src/internal.h"

/* Starts StarPU (or joins a running one: starpu_init is reference-counted in 1.3, so the
 * application's runtime stays up when we stop). */
tfc_status tfc_runtime_start(int *joined, char *msg);
void tfc_runtime_stop(int joined);
void tfc_runtime_info(tfc_ctx_info *info);
void tfc_runtime_describe(char *out, size_t size);

#endif
