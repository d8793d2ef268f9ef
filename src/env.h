/* env.h: the TFC_ environment variables (src/env.c). Private to the library. */
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

#endif
