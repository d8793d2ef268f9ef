/* dist_bind.h: each rank's own cores (issue 15, item 6). When a distributed context starts,
 * the ranks sharing a node (and the same launcher binding) share out the cores hwloc shows them:
 * one for StarPU-MPI's progress thread, which busy-polls, one for the input loader, the rest for
 * the CPU workers. StarPU 1.3 would otherwise bind every rank's workers from the first core. */
#ifndef TFC_DIST_BIND_H
#define TFC_DIST_BIND_H

#include <stddef.h>
#include "../src/internal.h"

enum { TFC_BIND_MAX_WORKERS = 64 };

/* One core a rank may run on: its package and an id the caller chooses (hwloc's logical core
 * index in the library). */
typedef struct tfc_bind_core {
    int package;
    int id;
} tfc_bind_core;

/* What one rank gets: ids from the cores given, or -1. */
typedef struct tfc_bind_plan {
    int bound;        /* 1: the cores below; 0: nothing bound (why says so) */
    int mpi_core;     /* StarPU-MPI's progress thread */
    int loader_core;  /* the input loader's thread; -1: it shares (fewer than 3 cores) */
    int n_workers;
    int worker_cores[TFC_BIND_MAX_WORKERS];
    char why[200];
} tfc_bind_plan;

/* Shares n_cores cores (in hwloc's order, so a package's cores are next to each other) among
 * group_size ranks that may all run on them; rank group_index (in [0, group_size)) gets
 * a contiguous slice of floor or ceil n_cores / group_size: its last core for the MPI thread,
 * the one before for the loader when want_loader and the slice has 3 or more, the first ones
 * (at most max_workers) for its workers. Fewer than 2 cores per rank: nothing is bound. */
void tfc_bind_share(const tfc_bind_core *cores, int n_cores, int group_index, int group_size,
                    int want_loader, int max_workers, tfc_bind_plan *out);

/* ---- The library's use of it (sched/dist_bind.c, sched/dist_bind_mpi.c) ------------------ */

/* Before StarPU-MPI starts (MPI is initialized): unless TFC_DIST_BIND=0 or the user binds
 * (STARPU_WORKERS_CPUID/COREID, STARPU_WORKERS_NOBIND, STARPU_MPI_THREAD_CPUID/COREID),
 * computes this rank's plan from hwloc and its place among the ranks of its node (with
 * STARPU_MPI_NOBIND the MPI thread's core is only kept free), and sets STARPU_WORKERS_CPUID, STARPU_NCPU (when unset) and STARPU_MPI_THREAD_CPUID
 * for starpu_init. Never fails for want of cores: it falls back to no binding (sets
 * STARPU_WORKERS_NOBIND and STARPU_MPI_NOBIND for starpu_init) and says why (once per process,
 * on the node's first rank). Built with MPI only. */
tfc_status tfc_dist_bind_start(char *msg);
/* After starpu_mpi_init_conf returned: takes back the variables set above, so the user's
 * environment is as it was. */
void tfc_dist_bind_started(void);

/* Decides and applies a plan from a group place (hwloc part, both builds): what
 * tfc_dist_bind_start does once it knows the group. */
tfc_status tfc_dist_bind_apply(int group_index, int group_size, int node_rank, char *msg);
/* Binds the calling thread (the batcher's loader) to the loader's core of the running plan;
 * a no-op without one. */
void tfc_dist_bind_loader_thread(void);
/* One line per thread kind saying where it runs, or why nothing is bound ("" before any
 * distributed start). */
void tfc_dist_bind_describe(char *out, size_t size);
/* 1 when the running plan fell back to no binding (StarPU was told to bind nothing). */
int tfc_dist_bind_none(void);
/* The distributed context stopped: forget the plan. */
void tfc_dist_bind_forget(void);

#endif
