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

#ifdef TFC_HAVE_MPI
tfc_status tfc_dist_mpi_start(int *rank, int *size, char *msg);
void tfc_dist_mpi_stop(void);
#endif

#endif
