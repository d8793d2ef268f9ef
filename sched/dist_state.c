/* dist_state.c: the optimizer state of data-parallel training (issue 15, item 4). Each
 * variable's update keeps slots and an iteration counter that only the variable's owner rank
 * keeps current; for a checkpoint, the owners send theirs to rank 0, whose session then holds
 * the whole training state as one consistent cut between steps, written by rank 0 alone in the
 * ordinary store format. A restart restores that checkpoint on every rank, whatever their
 * number: every rank then holds the whole state, so any owner assignment goes on from it.
 * A tiled variable's slots come to rank 0 tile by tile from the tiles' owners (its iteration
 * counter, which every tile's owner advances, from its first tile's). */
#include <stdlib.h>
#include <string.h>
#include "dist_train.h"
#include "../graph/graph.h"

tfc_status tfc_dist_note_state(tfc_dist_train *t, tfc_graph *g, int before, int i)
{
    for (int k = before; k < g->n_nodes; k++) {
        struct tfc_node *node = g->nodes[k];
        if (node->op != &tfc_op_variable) continue;
        tfc_tensor **state = realloc(t->state, (size_t)(t->n_state + 1) * sizeof *state);
        int *var = state ? realloc(t->state_var, (size_t)(t->n_state + 1) * sizeof *var) : NULL;
        if (state) t->state = state;
        if (var) t->state_var = var;
        if (!state || !var)
            return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "dist_train_create: no memory");
        t->state[t->n_state] = &node->outputs[0];
        t->state_var[t->n_state++] = i;
    }
    return TFC_OK;
}

/* Whether state variable j is a slot of a tiled variable (shaped like it: tiled alike). */
static int tiled_slot(const tfc_dist_train *t, int j)
{
    int i = t->state_var[j];
    tfc_shape s = tfc_tensor_shape(t->state[j]);
    size_t n = tfc_tensor_dtype(t->state[j]) == TFC_FLOAT32 ? sizeof(float) : 0;
    for (int d = 0; d < s.rank; d++) n *= (size_t)s.dims[d];
    return t->tiles[i] > 1 && n == t->bytes[i];
}

/* The state variables of owner o kept whole (at most n_state), into list; returns how many. */
static int owner_state(const tfc_dist_train *t, int o, tfc_tensor **list)
{
    int n = 0;
    for (int j = 0; j < t->n_state; j++)
        if (t->owner[t->state_var[j]] == o && !tiled_slot(t, j)) list[n++] = t->state[j];
    return n;
}

/* Rank 0 gets the rows of the slot state[j] that the other ranks' tiles keep current (every
 * rank takes part in each copy: StarPU-MPI's tags come from a counter). */
static tfc_status gather_tiled_slot(tfc_dist_train *t, tfc_session *s, int me, int j)
{
    int i = t->state_var[j];
    tfc_value *v = NULL;
    tfc_status st = TFC_OK;
    if (tfc_session_read_variable(s, t->state[j], &v))
        return tfc_fail(t->msg, TFC_ERR_RUNTIME, "dist_train gather: %s", tfc_session_errmsg(s));
    for (int p = 0; !st && p < t->n_pieces; p++) {
        const struct tfc_dist_piece *c = &t->pieces[p];
        if (c->var == i && c->owner != 0)
            st = tfc_dist_copy((float *)tfc_value_data(v) + c->first, c->count * sizeof(float),
                               c->owner, 0, t->msg);
    }
    if (!st && me == 0 && tfc_session_write_variable(s, t->state[j], v))
        st = tfc_fail(t->msg, TFC_ERR_RUNTIME, "dist_train gather: '%s': %s",
                      tfc_tensor_name(t->state[j]), tfc_session_errmsg(s));
    tfc_value_destroy(v);
    return st;
}

/* Values shaped like list's variables (the owner reads them instead), their bytes in all. */
static tfc_status state_values(tfc_dist_train *t, int n, tfc_tensor **list, tfc_value **vals,
                               size_t *bytes)
{
    *bytes = 0;
    for (int j = 0; j < n; j++) {
        if (tfc_value_create(tfc_tensor_dtype(list[j]), tfc_tensor_shape(list[j]), &vals[j]))
            return tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train gather: no memory for "
                            "'%s'", tfc_tensor_name(list[j]));
        *bytes += tfc_value_nbytes(vals[j]);
    }
    return TFC_OK;
}

/* Copies vals' bytes into pack (to 1) or out of it (to 0). */
static void pack_state(int n, tfc_value **vals, char *pack, int to)
{
    for (int j = 0; j < n; j++) {
        size_t b = tfc_value_nbytes(vals[j]);
        if (to) memcpy(pack, tfc_value_data(vals[j]), b);
        else memcpy(tfc_value_data(vals[j]), pack, b);
        pack += b;
    }
}

/* Owner o's state to rank 0, written into rank 0's session. */
static tfc_status gather_owner(tfc_dist_train *t, tfc_session *s, int me, int o)
{
    tfc_tensor *list[t->n_state > 0 ? t->n_state : 1];
    tfc_value *vals[t->n_state > 0 ? t->n_state : 1];
    int n = owner_state(t, o, list);
    if (!n) return TFC_OK;
    memset(vals, 0, sizeof vals);
    size_t bytes = 0;
    tfc_status st = state_values(t, n, list, vals, &bytes);
    char *pack = st ? NULL : malloc(bytes);
    if (!st && !pack)
        st = tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train gather: no memory for %zu "
                      "bytes of optimizer state", bytes);
    if (!st && me == o) {
        for (int j = 0; j < n; j++) tfc_value_destroy(vals[j]), vals[j] = NULL;
        if (tfc_session_read_variables(s, n, list, vals))
            st = tfc_fail(t->msg, TFC_ERR_RUNTIME, "dist_train gather: %s",
                          tfc_session_errmsg(s));
        if (!st) pack_state(n, vals, pack, 1);
    }
    if (!st) st = tfc_dist_copy(pack, bytes, o, 0, t->msg);
    if (!st && me == 0) {
        pack_state(n, vals, pack, 0);
        for (int j = 0; !st && j < n; j++)
            if (tfc_session_write_variable(s, list[j], vals[j]))
                st = tfc_fail(t->msg, TFC_ERR_RUNTIME, "dist_train gather: '%s': %s",
                              tfc_tensor_name(list[j]), tfc_session_errmsg(s));
    }
    for (int j = 0; j < n; j++) tfc_value_destroy(vals[j]);
    free(pack);
    return st;
}

tfc_status tfc_dist_train_gather(tfc_dist_train *t, tfc_ctx *ctx, tfc_session *s)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_gather: trainer is NULL");
    if (!s)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_gather: session is NULL");
    int ranks = tfc_dist_size(ctx), me = tfc_dist_rank(ctx);
    if (ranks == 1) return TFC_OK; /* one process (the reference too) holds the whole state */
    if (ranks != t->n_ranks)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_gather: the context has "
                        "%d ranks, the trainer was made for %d", ranks, t->n_ranks);
    tfc_status st = TFC_OK;
    for (int o = 1; !st && o < ranks; o++) st = gather_owner(t, s, me, o);
    for (int j = 0; !st && j < t->n_state; j++)
        if (tiled_slot(t, j)) st = gather_tiled_slot(t, s, me, j);
    return st;
}
