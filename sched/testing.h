/* testing.h: hooks for the test programs (they link the convenience library, so they see
 * hidden symbols). Not part of the public API. `where` is a StarPU worker mask (STARPU_CPU,
 * STARPU_CUDA, STARPU_OPENCL). Each drops the session's cached plans. The where and hop masks
 * override placement hints for the tasks they pin; with hop on and where 0, a node's hop copies
 * follow the node's placement hint. */
#ifndef TFC_TESTING_H
#define TFC_TESTING_H

#include <stdint.h>
#include "../src/tfc.h"

/* Copies every value a node produces through a copy task pinned to `where` workers, so every
 * edge of the graph crosses memory nodes (device coherence tests). on = 0 turns it off. */
void tfc_session_set_hop(tfc_session *s, int on, uint32_t where);
/* Pins every op task to `where` workers (0: no pinning), e.g. to run every CUDA codelet. */
void tfc_session_set_where(tfc_session *s, uint32_t where);
/* With where = STARPU_OPENCL, steps whose codelet has no OpenCL implementation for their kind
 * and dtypes stay unpinned. Alternate mode (on = 1; process-wide, set before plans are built)
 * pins every other op step the device can run (where = STARPU_OPENCL or STARPU_CUDA) to it and
 * the rest to the CPU, so edges cross memory nodes both ways. */
void tfc_testing_set_where_alternate(int on);
/* Task priorities from critical-path ranks on (the default, unless TFC_PRIORITIES=0) or off
 * (every task at priority 0), for comparisons such as bench/priority. */
void tfc_session_set_priorities(tfc_session *s, int on);

/* The workers automatic tiling shares a step among, from StarPU's worker counts: the CUDA
 * workers when there are any, else all (sched/session.c). */
int tfc_tile_sharing_workers(int n_workers, int n_cuda_workers);

/* Partitions whose tiles runs have registered in place of partitioning (sched/run.c: a plain
 * run's feed and fetched output tiles, plan_part.direct), process-wide, so far. */
unsigned long tfc_testing_tiles_in_place(void);
/* Feed handles and in-place partitions that runs took kept from their instance's previous run
 * in place of registering them (sched/host_keep.c), process-wide, so far. */
unsigned long tfc_testing_host_kept(void);

#endif
