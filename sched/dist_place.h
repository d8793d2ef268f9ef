/* dist_place.h: model parallelism across MPI ranks (issue 15), the way the TensorFlow paper
 * splits a graph (section 3.3). Every rank builds the same graph and the same plan; placement
 * hints "rank:R" (or "rank:R/device") say which rank runs a node's tasks; each rank submits
 * only its own steps, and every value a step reads on another rank than the one holding it
 * travels by an explicit StarPU-MPI send on the holder and a receive on the reader, posted in
 * plan order on the value's StarPU handle, so StarPU's data dependencies order them with the
 * tasks. The rules (README "Model parallelism"):
 *  - a step runs on its node's hinted rank; without one, a step that writes a variable runs on
 *    the variable's rank (assignments, optimizer updates), any other step on rank 0;
 *  - a variable lives on its hint's rank (rank 0 without one): a run starts with its current
 *    value there only, and a run that changes it elsewhere sends it back at the end;
 *  - feeds, constants and plan-time folded values are on every rank (every rank feeds the same);
 *  - fetched values are sent to every rank, so every rank's run returns them;
 *  - a value goes once per (version, destination rank), however many steps read it there.
 * The split applies to a graph with at least one "rank:" hint when the context is distributed
 * over more than one rank; otherwise every rank runs the whole plan, as before. */
#ifndef TFC_DIST_PLACE_H
#define TFC_DIST_PLACE_H

#include "plan.h"

struct mp_comm {
    int slot;              /* the value */
    int from, to;          /* its holder, which sends it, and the rank that receives it */
};

struct mp_plan {
    int me, size;
    int n_steps;           /* the plan's */
    char *local;           /* per step: 1 when this rank submits it */
    int *comm_at;          /* n_steps + 2 entries: the transfers posted before step i are
                            * comms[comm_at[i] .. comm_at[i + 1]); those from comm_at[n_steps]
                            * to n_comms follow the last step (fetches, variables going home) */
    int n_comms;
    struct mp_comm *comms;
    int n_local_steps;     /* steps this rank submits */
    int n_local_comms;     /* transfers this rank sends or receives */
    uint64_t bytes_sent;   /* by this rank, per run */
};

/* Checks the graph's rank hints against the job (rank of size; distributed: the context was
 * created with TFC_DIST_MPI) and, when the plan is to be split, sets p->mp. A rank hint >= size,
 * a rank other than 0 without a distributed context, or in a graph with control flow, fails
 * with a message naming the node. */
tfc_status tfc_mp_plan(struct plan *p, const tfc_graph *g, int rank, int size, int distributed,
                       char *msg);
/* Whether a plan of g is split across the size ranks of the job (a node hints a rank; the
 * graph has no control flow): lowering then leaves tiling and the row split out, since a tile
 * is a partition of a StarPU handle, which the transfers of whole values cannot send. */
int tfc_mp_splits(const tfc_graph *g, int size);
void tfc_mp_free(struct mp_plan *mp);

/* The StarPU handle of a slot in a run (sched/run.c knows the run's handles). */
typedef starpu_data_handle_t (*tfc_mp_handle_fn)(void *run, int slot);
/* A fresh sequence number per split run: every rank runs the same plans in the same order, so
 * the numbers, and the tags made from them, agree across ranks. */
int64_t tfc_mp_next_run(void);
/* Posts the transfers comms[from .. to) that this rank takes part in, with tags unique to the
 * run (seq) and the transfer; done(arg) is called when each completes. Returns how many it
 * posted. */
int tfc_mp_post(const struct mp_plan *mp, int from, int to, int64_t seq, tfc_mp_handle_fn h,
                void *run, void (*done)(void *), void *arg);
/* After step i failed to submit (the transfers before it posted): the completions the run
 * will never see, its own later steps and transfers. */
int tfc_mp_unsent(const struct mp_plan *mp, int i);

#ifdef TFC_HAVE_MPI
/* sched/dist_place_mpi.c: starpu_mpi_isend_detached / starpu_mpi_irecv_detached on
 * MPI_COMM_WORLD. */
void tfc_mp_isend(starpu_data_handle_t h, int dest, int64_t tag, void (*done)(void *), void *arg);
void tfc_mp_irecv(starpu_data_handle_t h, int src, int64_t tag, void (*done)(void *), void *arg);
#endif

#endif
