/* dist_mpi.c: StarPU-MPI's start and stop (built only with TFC_HAVE_MPI). MPI is initialized
 * here, not by StarPU-MPI, because StarPU-MPI finalizes an MPI it initialized at each
 * starpu_mpi_shutdown and MPI cannot start twice in a process: ours is finalized at exit. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <starpu_mpi.h>
#include "dist.h"

static void finalize_mpi(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

/* MPI with the thread level StarPU-MPI needs (its progress thread alone calls MPI). */
static tfc_status ensure_mpi(char *msg)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: MPI was finalized in "
                        "this process already (MPI cannot start twice)");
    if (initialized) return TFC_OK; /* the application's: it finalizes it */
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: this MPI gives thread "
                        "level %d, StarPU-MPI needs MPI_THREAD_SERIALIZED", provided);
    }
    atexit(finalize_mpi);
    return TFC_OK;
}

tfc_status tfc_dist_mpi_start(int *rank, int *size, char *msg)
{
    tfc_status st = ensure_mpi(msg);
    if (st) return st;
    int ret = starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, NULL);
    if (ret == -ENODEV)
        return tfc_fail(msg, TFC_ERR_NO_DEVICE, "StarPU-MPI found no worker (check STARPU_NCPU, "
                        "STARPU_NCUDA, STARPU_NOPENCL)");
    if (ret)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "starpu_mpi_init_conf failed: %s", strerror(-ret));
    starpu_mpi_comm_rank(MPI_COMM_WORLD, rank);
    starpu_mpi_comm_size(MPI_COMM_WORLD, size);
    return TFC_OK;
}

void tfc_dist_mpi_stop(void)
{
    starpu_mpi_shutdown();
}
