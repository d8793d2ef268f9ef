/* dist_place_mpi.c: the transfers of a plan split across ranks (sched/dist_place.c), built
 * only with MPI. Detached requests on the values' own handles: StarPU acquires the handle
 * (read to send, write to receive) in submission order, so the transfers wait for their
 * producer task and the consuming tasks wait for them. */
#include <starpu_mpi.h>
#include "dist_place.h"

void tfc_mp_isend(starpu_data_handle_t h, int dest, int64_t tag, void (*done)(void *), void *arg)
{
    starpu_mpi_isend_detached(h, dest, (starpu_mpi_tag_t)tag, MPI_COMM_WORLD, done, arg);
}

void tfc_mp_irecv(starpu_data_handle_t h, int src, int64_t tag, void (*done)(void *), void *arg)
{
    starpu_mpi_irecv_detached(h, src, (starpu_mpi_tag_t)tag, MPI_COMM_WORLD, done, arg);
}
