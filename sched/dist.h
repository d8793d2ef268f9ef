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

/* Every rank calls these, in the same order (the handles' tags come from a counter).
 * sum: rank `owner` gets in out (n floats; ignored elsewhere) the ranks' `mine`, weighted and
 * added in rank order as tfc_dist_weighted_sum does, by a task submitted through
 * starpu_mpi_task_insert on the owner. broadcast: every rank gets the owner's buf. Without
 * MPI: an error. */
tfc_status tfc_dist_sum(const float *mine, size_t n, int owner, int64_t global_rows, float *out,
                        char *msg);
tfc_status tfc_dist_broadcast(float *buf, size_t n, int owner, char *msg);
/* Every rank calls it: rank `to` gets in buf the `bytes` bytes rank `from` has in its buf (a
 * checkpoint's state going to the rank that writes it); the other ranks' buf is not touched. */
tfc_status tfc_dist_copy(void *buf, size_t bytes, int from, int to, char *msg);
/* out = sum over r in order of w_r parts[r], w_r the share of slice r (tfc_batcher_create_shard)
 * in a global batch of global_rows rows, in float32: the one sum of the distributed step and
 * its one-process reference. */
void tfc_dist_weighted_sum(const float *const *parts, int n_parts, int64_t global_rows, size_t n,
                           float *out);

/* The sum of the ranks in mask (bit r: rank r) only, each weighted by its slice's share of
 * their rows, in rank order: what backup workers apply (sched/dist_backup.c) and its replay. */
void tfc_dist_chosen_sum(const float *const *parts, int n_parts, unsigned long long mask,
                         int64_t global_rows, size_t n, float *out);
/* Backup workers (sched/dist_backup.c; every rank calls them, step by step): rank 0 gets in
 * out the chosen sum of the first `need` ranks' mine to arrive (itself included), or of exactly
 * the ranks of replay when it is non-zero, and the mask used in *chosen; then rank 0's buf goes
 * to every other rank without rank 0 waiting for it. Without MPI: an error. */
tfc_status tfc_dist_backup_sum(const float *mine, size_t n, int need, long long step,
                               int64_t global_rows, unsigned long long replay,
                               unsigned long long *chosen, float *out, char *msg);
tfc_status tfc_dist_backup_values(float *buf, size_t n, long long step, char *msg);

/* The training step the watchdog's message names (TFC_DIST_TIMEOUT). */
void tfc_dist_step_is(long long step);

#ifdef TFC_HAVE_MPI
void tfc_dist_set_step(long long step);
tfc_status tfc_dist_mpi_start(int *rank, int *size, char *msg);
void tfc_dist_mpi_stop(void);
tfc_status tfc_dist_mpi_sum(const float *mine, size_t n, int owner, int64_t global_rows,
                            float *out, char *msg);
tfc_status tfc_dist_mpi_broadcast(float *buf, size_t n, int owner, char *msg);
tfc_status tfc_dist_mpi_copy(void *buf, size_t bytes, int from, int to, char *msg);
/* Waits for the backup workers' messages still in flight (before StarPU-MPI stops). */
void tfc_dist_backup_drain(void);
#endif

#endif
