/* dist.c: the distribution entry points for both builds (see dist.h): with MPI they lead to
 * sched/dist_mpi.c, without it they say how to get a build that has it. */
#ifdef HAVE_CONFIG_H /* configure's; scripts/fuzz.sh builds without it: then no MPI */
#include "config.h"
#endif
#include "dist.h"

int tfc_dist_available(void)
{
#ifdef TFC_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

tfc_status tfc_dist_start(int *rank, int *size, char *msg)
{
    *rank = 0;
    *size = 1;
#ifdef TFC_HAVE_MPI
    return tfc_dist_mpi_start(rank, size, msg);
#else
    return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "distribution TFC_DIST_MPI: this "
                    "libtfc-starpu was built without StarPU-MPI (configure --enable-mpi=yes "
                    "needs libstarpumpi-1.3 and Open MPI: openmpi-bin, libopenmpi-dev)");
#endif
}

void tfc_dist_stop(void)
{
#ifdef TFC_HAVE_MPI
    tfc_dist_mpi_stop();
#endif
}


#ifndef TFC_HAVE_MPI
static tfc_status no_mpi(char *msg)
{
    return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "distribution: this libtfc-starpu was built "
                    "without StarPU-MPI (configure --enable-mpi)");
}
#endif

tfc_status tfc_dist_sum(const float *mine, size_t n, int owner, int64_t global_rows, float *out,
                        char *msg)
{
#ifdef TFC_HAVE_MPI
    return tfc_dist_mpi_sum(mine, n, owner, global_rows, out, msg);
#else
    (void)mine, (void)n, (void)owner, (void)global_rows, (void)out;
    return no_mpi(msg);
#endif
}

tfc_status tfc_dist_broadcast(float *buf, size_t n, int owner, char *msg)
{
#ifdef TFC_HAVE_MPI
    return tfc_dist_mpi_broadcast(buf, n, owner, msg);
#else
    (void)buf, (void)n, (void)owner;
    return no_mpi(msg);
#endif
}

tfc_status tfc_dist_copy(void *buf, size_t bytes, int from, int to, char *msg)
{
#ifdef TFC_HAVE_MPI
    return tfc_dist_mpi_copy(buf, bytes, from, to, msg);
#else
    (void)buf, (void)bytes, (void)from, (void)to;
    return no_mpi(msg);
#endif
}

#ifndef TFC_HAVE_MPI
tfc_status tfc_dist_backup_sum(const float *mine, size_t n, int need, long long step,
                               int64_t global_rows, unsigned long long replay,
                               unsigned long long *chosen, float *out, char *msg)
{
    (void)mine, (void)n, (void)need, (void)step, (void)global_rows, (void)replay, (void)chosen;
    (void)out;
    return no_mpi(msg);
}

tfc_status tfc_dist_backup_values(float *buf, size_t n, long long step, char *msg)
{
    (void)buf, (void)n, (void)step;
    return no_mpi(msg);
}
#endif

void tfc_dist_step_is(long long step)
{
#ifdef TFC_HAVE_MPI
    tfc_dist_set_step(step);
#else
    (void)step;
#endif
}
