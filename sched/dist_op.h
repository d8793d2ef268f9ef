/* dist_op.h: the data-parallel steps of a stored train op (`mpirun tfc train`), shared by
 * sched/dist_op.c (the op's updates; everything on rank 0) and sched/dist_op_shard.c (each
 * update on the owner rank of its variable or tile, as tfc_dist_train places them). */
#ifndef TFC_DIST_OP_H
#define TFC_DIST_OP_H

#include "dist_train.h"

struct tfc_dist_op {
    tfc_tensor *train_op;
    int n_grads;
    tfc_tensor **grads;    /* the gradient input of each update */
    tfc_tensor **applies;  /* each update (apply_*) */
    tfc_tensor **updated;  /* the variable each update writes */
    int n_others;
    tfc_tensor **others;   /* what else train_op groups (counters' increments): rank 0 runs it */
    int n_vars;
    tfc_tensor **vars;     /* every variable of the graph, sent by rank 0 after a step */
    int n_rest;
    tfc_tensor **rest;     /* sharded: the variables no update writes (nor its slots) */
    int all_on_rank0;      /* TFC_DIST_OWNERS_RANK0: rank 0 runs the whole op, sends all */
    tfc_dist_train *own;   /* sharded: the owners of the updated variables' pieces */
    long long steps;       /* steps begun (named by the TFC_DIST_TIMEOUT watchdog) */
    char msg[TFC_MSG_LEN];
};

/* The owners for `ranks` ranks (made at the first sharded step): d->own. */
tfc_status tfc_dist_op_shard(tfc_dist_op *d, int ranks);
/* One sharded step, after every rank has its slice's gradients (grads, owned by the caller)
 * and fetches: the owners sum and apply, rank 0 runs d->others, the values go back. */
tfc_status tfc_dist_op_shard_step(tfc_dist_op *d, tfc_session *s, int me, int ranks, int n_feeds,
                                  tfc_tensor *const *feeds, tfc_value *const *slice,
                                  int64_t global_rows, tfc_value **grads);
/* Rank 0's variables of list to every other rank (one message per rank). */
tfc_status tfc_dist_op_send(tfc_dist_op *d, tfc_session *s, int me, int ranks, int n,
                            tfc_tensor **list);

#endif
