/* dist_bind_mpi.c: a rank's place among the ranks that share its node and its launcher
 * binding (built only with TFC_HAVE_MPI), from which sched/dist_bind.c shares the cores out.
 * Ranks bound by the launcher to cores of their own (srun --cpu-bind=cores, mpirun --bind-to
 * core) each form a group of one and keep their cores; ranks left on the same set split it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <string.h>
#include <mpi.h>
#include "dist_bind.h"

tfc_status tfc_dist_bind_start(char *msg)
{
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS) /* binding is an optimisation: go on without it */
        return tfc_dist_bind_apply(0, 0, 0, msg);
    int me = 0, ranks = 1;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &ranks);
    cpu_set_t mine, all[ranks];
    CPU_ZERO(&mine);
    if (sched_getaffinity(0, sizeof mine, &mine)) CPU_ZERO(&mine);
    MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, node);
    MPI_Comm_free(&node);
    int index = 0, size = 0;
    for (int r = 0; r < ranks; r++)
        if (CPU_EQUAL(&all[r], &mine)) index += r < me, size++;
    return tfc_dist_bind_apply(index, size, me, msg);
}
