/* dist_train.h: the data-parallel trainer's insides, shared by sched/dist_train.c (the steps),
 * sched/dist_tile.c (which rank owns which rows) and sched/dist_state.c (the optimizer state
 * each owner keeps, gathered for checkpoints). */
#ifndef TFC_DIST_TRAIN_H
#define TFC_DIST_TRAIN_H

#include "dist.h"

/* Rows [row0, row1) of variable var (its floats [first, first + count): a tile is a contiguous
 * range of the leading dimension), owned by rank owner. A variable kept whole is one piece. */
struct tfc_dist_piece {
    int var, owner;
    int64_t row0, row1;
    size_t first, count;
};

struct tfc_dist_train {
    int n_vars, n_ranks;
    tfc_tensor **vars, **grads;  /* the variables and their gradients of the loss */
    tfc_tensor **grad_in, **apply; /* placeholder of the summed gradient, its update */
    tfc_tensor **value_in, **assign; /* placeholder of the owner's value, its assign */
    int *owner;                  /* the owner of each variable's first (or only) piece */
    size_t *bytes;
    /* The pieces in variable order, then row order; tiles[i]: variable i's count (1: whole). */
    int n_pieces;
    struct tfc_dist_piece *pieces;
    int *tiles;
    int all_on_rank0;            /* TFC_DIST_OWNERS_RANK0 or backup workers: no tiles */
    long long tile_bytes;        /* tiles above this many bytes; 0: none; -1: auto */
    int whole_only;              /* the update is not element-wise (clip_norm): no tiles */
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

/* Splits the variables into pieces and gives each an owner (sched/dist_tile.c): the largest
 * piece first to the rank with the fewest bytes (lowest rank on ties) among those holding no
 * other tile of its variable; all on rank 0 with t->all_on_rank0. */
tfc_status tfc_dist_assign(tfc_dist_train *t);
/* The floats of owner o's pieces; packs them from vals (to 1) or unpacks into vals (to 0), in
 * piece order (vals[i]: NULL skips variable i). */
size_t tfc_dist_pack_size(const tfc_dist_train *t, int o);
void tfc_dist_pack(const tfc_dist_train *t, int o, tfc_value **vals, float *pack, int to);
/* TFC_DIST_TILE_BYTES into *out (-1 when unset: auto); a bad value is an error naming it. */
tfc_status tfc_dist_tile_bytes_from_env(long long *out, char *msg);

/* Records the variables g got since it had `before` nodes as the state of variable i. */
tfc_status tfc_dist_note_state(tfc_dist_train *t, tfc_graph *g, int before, int i);

#endif
