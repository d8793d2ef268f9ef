/* env.h: the TFC_ environment variables, and the STARPU_ ones the README documents, checked
 * before StarPU starts (src/env.c). Private to the library. */
#ifndef TFC_ENV_H
#define TFC_ENV_H

#include "internal.h"

/* Checks every TFC_ variable in the environment against the table: a bad value, or a TFC_
 * name the table does not know (a typo would otherwise be ignored), fails with a message
 * naming the variable, its value and what it takes. tfc_ctx_create calls it. */
tfc_status tfc_env_check(char *msg);
/* The value of a 0/1 variable, def when it is unset; a bad value fails with a message. */
tfc_status tfc_env_bool(const char *name, int def, int *out, char *msg);
/* The value of an integer variable within its table bounds, def when unset. */
tfc_status tfc_env_int(const char *name, long long def, long long *out, char *msg);
/* The index of a choice variable's word in its table entry ("auto|dnnl|im2col": 0, 1, 2),
 * 0 when it is unset; a word not listed fails with a message (and gives 0). */
tfc_status tfc_env_choice(const char *name, int *out, char *msg);

/* What the StarPU we link allows, for checking its variables before starpu_init (filled by
 * sched/runtime.c, which may include <starpu.h>; this file may not). */
struct tfc_starpu_facts {
    int max_cpus, max_cuda, max_opencl; /* STARPU_MAXCPUS, STARPU_MAXCUDADEVS, ... */
    const char *policies[64];           /* scheduling policy names, NULL after the last */
    /* OpenCL devices StarPU would find with the environment as it is; -1 when unknown. Only
     * called when STARPU_WORKERS_OPENCLID is set (it starts the OpenCL platform). */
    int (*opencl_devices)(void);
};

/* Checks the STARPU_ variables of the README's table that are set (a value StarPU 1.3 would
 * abort on, wrap around, or silently replace by a default): the first bad one fails with a
 * message naming it, its value and what it takes (for STARPU_SCHED, the policies). */
tfc_status tfc_env_check_starpu(const struct tfc_starpu_facts *facts, char *msg);

#endif
