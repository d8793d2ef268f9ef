/* starpu_home.h: the directory where StarPU writes its performance models, checked before
 * starpu_init and replaced by a private one when it cannot be written (src/starpu_home.c).
 * Private to the library. */
#ifndef TFC_STARPU_HOME_H
#define TFC_STARPU_HOME_H

#include "internal.h"

/* A private StarPU home made for one StarPU lifetime. */
struct tfc_starpu_home;

/* Checks that StarPU can write its sampling directory: $STARPU_PERF_MODEL_DIR when set (an
 * error naming it when it cannot), else .starpu/sampling under the home StarPU 1.3 picks
 * (XDG_CACHE_HOME, STARPU_HOME, HOME, TMPDIR, in that order). When that home cannot hold it,
 * makes a private directory under $TMPDIR (or /tmp), points StarPU at it (sets STARPU_HOME, and
 * XDG_CACHE_HOME when that is where the home came from), prints one warning on stderr and
 * gives it in *out; else *out is NULL. */
tfc_status tfc_starpu_home_prepare(struct tfc_starpu_home **out, char *msg);
/* The private directory. */
const char *tfc_starpu_home_path(const struct tfc_starpu_home *h);
/* Once StarPU has stopped: puts the variables back as they were and removes the directory.
 * NULL: nothing. */
void tfc_starpu_home_release(struct tfc_starpu_home *h);
/* StarPU still runs (the application started it too, after us): it keeps reading the
 * variables and writes its models at its own shutdown, so both stay; frees the rest. */
void tfc_starpu_home_abandon(struct tfc_starpu_home *h);

#endif
