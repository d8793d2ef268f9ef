/* dist_train.h: the data-parallel trainer's insides, shared by sched/dist_train.c (the steps)
 * and sched/dist_state.c (the optimizer state each owner keeps, gathered for checkpoints). */
#ifndef TFC_DIST_TRAIN_H
#define TFC_DIST_TRAIN_H

#include "dist.h"

struct tfc_dist_train {
    int n_vars, n_ranks;
    tfc_tensor **vars, **grads;  /* the variables and their gradients of the loss */
    tfc_tensor **grad_in, **apply; /* placeholder of the summed gradient, its update */
    tfc_tensor **value_in, **assign; /* placeholder of the owner's value, its assign */
    int *owner;
    size_t *bytes;
    /* The variables each update made for itself (optimizer slots, its iteration counter):
     * current only on the owner of the variable it updates (state_var[j]). */
    int n_state;
    tfc_tensor **state;
    int *state_var;
    int backups;                 /* b: rank 0 applies the first n_ranks - b gradients */
    unsigned long long chosen;   /* the ranks whose gradients the last step applied (bit r) */
    unsigned long long replay;   /* non-zero: the next step applies exactly these ranks' */
    long long steps;             /* steps begun (named by the TFC_DIST_TIMEOUT watchdog) */
    char msg[TFC_MSG_LEN];
};

/* Records the variables g got since it had `before` nodes as the state of variable i. */
tfc_status tfc_dist_note_state(tfc_dist_train *t, tfc_graph *g, int before, int i);

#endif
