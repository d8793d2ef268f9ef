/* dist.h: distribution over MPI ranks on StarPU-MPI (issue 15, ARCHITECTURE decision 10). The
 * MPI code lives in sched/dist_mpi.c, built only when configure found StarPU-MPI and MPI
 * (TFC_HAVE_MPI); sched/dist.c answers for both builds, so the rest of the library never
 * includes <mpi.h> and a build without MPI returns a clear error instead. */
#ifndef TFC_DIST_H
#define TFC_DIST_H

#include "../src/internal.h"

/* Starts StarPU through starpu_mpi_init_conf (initializing MPI first when nobody has, and
 * finalizing it at process exit, so that several distributed contexts may follow each other)
 * and gives this process's rank and the number of ranks. A build without MPI, or an MPI
 * finalized already, is an error naming what is missing. */
tfc_status tfc_dist_start(int *rank, int *size, char *msg);
/* Stops StarPU through starpu_mpi_shutdown (waits for pending communications first). */
void tfc_dist_stop(void);

/* Every rank calls these, in the same order (StarPU-MPI matches messages by tag and order).
 * gather: rank `owner` gets every rank's `bytes` bytes in rank order into all (size x bytes;
 * ignored elsewhere). broadcast: every rank gets the owner's buf. Without MPI: an error. */
tfc_status tfc_dist_gather(const void *mine, size_t bytes, int owner, void *all, char *msg);
tfc_status tfc_dist_broadcast(void *buf, size_t bytes, int owner, char *msg);

/* The training step the watchdog's message names (TFC_DIST_TIMEOUT). */
void tfc_dist_step_is(long long step);

#ifdef TFC_HAVE_MPI
void tfc_dist_set_step(long long step);
tfc_status tfc_dist_mpi_start(int *rank, int *size, char *msg);
void tfc_dist_mpi_stop(void);
tfc_status tfc_dist_mpi_gather(const void *mine, size_t bytes, int owner, void *all, char *msg);
tfc_status tfc_dist_mpi_broadcast(void *buf, size_t bytes, int owner, char *msg);
#endif

#endif
