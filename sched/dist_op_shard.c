/* dist_op_shard.c: `mpirun tfc train` with the variables sharded over the ranks (issue 15, item
 * 2). Each update of the stored train op has the owner rank tfc_dist_train would give its
 * variable (sched/dist_tile.c: by size, a large variable split into row tiles owned by
 * different ranks); the owner sums the ranks' gradients of its pieces (the same weighted sum in
 * rank order as rank 0 alone would: the same bits), runs only its own updates (as targets of a
 * session run, the sums fed in the gradients' place; a tile's owner feeds zeros outside its
 * rows, whose results the other tiles' owners replace) and broadcasts the new values. Rank 0
 * runs what else the op groups (the counters' increments) and sends the variables no update
 * writes. The slots stay current on their owners only: tfc_dist_op_gather brings them to rank
 * 0 before a checkpoint (sched/dist_state.c). */
#include <stdlib.h>
#include <string.h>
#include "dist_op.h"
#include "../graph/graph.h"

/* The variables update i keeps for itself (its slots: the inputs between the variable and its
 * gradient) as tfc_dist_train's state of variable i. */
static tfc_status note_slots(tfc_dist_train *t, const tfc_dist_op *d, int i)
{
    const struct tfc_node *n = d->applies[i]->node;
    for (int k = 1; k < n->n_inputs && n->inputs[k] != d->grads[i]; k++) {
        if (n->inputs[k]->node->op != &tfc_op_variable) continue;
        tfc_tensor **state = realloc(t->state, (size_t)(t->n_state + 1) * sizeof *state);
        int *var = state ? realloc(t->state_var, (size_t)(t->n_state + 1) * sizeof *var) : NULL;
        if (state) t->state = state;
        if (var) t->state_var = var;
        if (!state || !var) return tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory");
        t->state[t->n_state] = n->inputs[k];
        t->state_var[t->n_state++] = i;
    }
    return TFC_OK;
}

/* The variables of the graph neither updated nor a slot (rank 0 keeps them current). */
static void find_rest(tfc_dist_op *d)
{
    d->n_rest = 0;
    for (int v = 0; v < d->n_vars; v++) {
        int kept = 0;
        for (int i = 0; i < d->n_grads && !kept; i++) kept = d->updated[i] == d->vars[v];
        for (int j = 0; j < d->own->n_state && !kept; j++) kept = d->own->state[j] == d->vars[v];
        if (!kept) d->rest[d->n_rest++] = d->vars[v];
    }
}

tfc_status tfc_dist_op_shard(tfc_dist_op *d, int ranks)
{
    tfc_dist_train *t = calloc(1, sizeof *t);
    if (!t) return tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory");
    d->own = t;
    int n = d->n_grads;
    t->n_vars = n;
    t->n_ranks = ranks;
    t->vars = calloc((size_t)n, sizeof *t->vars);
    t->owner = calloc((size_t)n, sizeof *t->owner);
    t->bytes = calloc((size_t)n, sizeof *t->bytes);
    t->tiles = calloc((size_t)n, sizeof *t->tiles);
    if (!t->vars || !t->owner || !t->bytes || !t->tiles)
        return tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory");
    tfc_status st = tfc_dist_tile_bytes_from_env(&t->tile_bytes, d->msg);
    for (int i = 0; !st && i < n; i++) {
        t->vars[i] = d->updated[i];
        tfc_shape sh = tfc_tensor_shape(d->updated[i]);
        t->bytes[i] = sizeof(float);
        for (int k = 0; k < sh.rank; k++) t->bytes[i] *= (size_t)sh.dims[k];
        st = note_slots(t, d, i);
    }
    if (!st && (st = tfc_dist_assign(t)) != TFC_OK) memcpy(d->msg, t->msg, sizeof d->msg);
    if (!st) find_rest(d);
    return st;
}

static void free_values(tfc_value **v, int n)
{
    for (int i = 0; i < n; i++) tfc_value_destroy(v[i]), v[i] = NULL;
}

/* Zeroed values shaped like the variables of which rank o has a piece (sums[i] still NULL). */
static tfc_status owner_zeros(tfc_dist_op *d, int o, tfc_value **sums)
{
    const tfc_dist_train *t = d->own;
    for (int p = 0; p < t->n_pieces; p++) {
        int i = t->pieces[p].var;
        if (t->pieces[p].owner != o || sums[i]) continue;
        if (tfc_value_create(TFC_FLOAT32, tfc_tensor_shape(t->vars[i]), &sums[i]))
            return tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory for '%s'",
                            tfc_tensor_name(t->vars[i]));
        memset(tfc_value_data(sums[i]), 0, t->bytes[i]);
    }
    return TFC_OK;
}

/* Each owner gets the sums of its pieces' gradients (one packed message per owner and rank). */
static tfc_status sum_to_owners(tfc_dist_op *d, int me, tfc_value **grads, int64_t global_rows,
                                tfc_value **sums)
{
    tfc_dist_train *t = d->own;
    tfc_status st = owner_zeros(d, me, sums);
    for (int o = 0; !st && o < t->n_ranks; o++) {
        size_t n = tfc_dist_pack_size(t, o);
        if (!n) continue;
        float *mine = malloc(n * sizeof *mine), *out = o == me ? malloc(n * sizeof *out) : NULL;
        if (!mine || (o == me && !out))
            st = tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory for %zu floats", n);
        if (!st) tfc_dist_pack(t, o, grads, mine, 1);
        if (!st) st = tfc_dist_sum(mine, n, o, global_rows, out, d->msg);
        if (!st && out) tfc_dist_pack(t, o, sums, out, 0);
        free(mine);
        free(out);
    }
    return st;
}

/* This rank's updates (sums[i] set), and on rank 0 the op's other members, in one run. */
static tfc_status run_owned(tfc_dist_op *d, tfc_session *s, int me, int n_feeds,
                            tfc_tensor *const *feeds, tfc_value *const *slice, tfc_value **sums)
{
    int n = d->n_grads, nf = n_feeds, nt = 0;
    tfc_tensor *ft[n_feeds + n], *targets[n + d->n_others];
    tfc_value *fv[n_feeds + n];
    memcpy(ft, feeds, (size_t)n_feeds * sizeof *ft);
    memcpy(fv, slice, (size_t)n_feeds * sizeof *fv);
    for (int i = 0; i < n; i++)
        if (sums[i]) ft[nf] = d->grads[i], fv[nf++] = sums[i], targets[nt++] = d->applies[i];
    for (int k = 0; me == 0 && k < d->n_others; k++) targets[nt++] = d->others[k];
    if (nt && tfc_session_run(s, nf, ft, fv, 0, NULL, NULL, nt, targets))
        return tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op update: %s", tfc_session_errmsg(s));
    return TFC_OK;
}

/* Every rank: the owners' new pieces into its copies of the updated variables. */
static tfc_status broadcast_pieces(tfc_dist_op *d, tfc_session *s, int me)
{
    tfc_dist_train *t = d->own;
    int n = d->n_grads;
    tfc_value *vals[n];
    memset(vals, 0, sizeof vals);
    tfc_status st = TFC_OK;
    if (tfc_session_read_variables(s, n, d->updated, vals))
        st = tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op: reading the variables: %s",
                      tfc_session_errmsg(s));
    for (int o = 0; !st && o < t->n_ranks; o++) {
        size_t count = tfc_dist_pack_size(t, o);
        if (!count) continue;
        float *pack = malloc(count * sizeof *pack);
        if (!pack) st = tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory");
        if (!st && o == me) tfc_dist_pack(t, o, vals, pack, 1);
        if (!st) st = tfc_dist_broadcast(pack, count, o, d->msg);
        if (!st && o != me) tfc_dist_pack(t, o, vals, pack, 0);
        free(pack);
    }
    for (int i = 0; !st && i < n; i++) {
        int all_mine = 1; /* a variable wholly this rank's is current already */
        for (int p = 0; p < t->n_pieces; p++)
            if (t->pieces[p].var == i && t->pieces[p].owner != me) all_mine = 0;
        if (!all_mine && tfc_session_write_variable(s, d->updated[i], vals[i]))
            st = tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op: '%s': %s",
                          tfc_tensor_name(d->updated[i]), tfc_session_errmsg(s));
    }
    free_values(vals, n);
    return st;
}

tfc_status tfc_dist_op_shard_step(tfc_dist_op *d, tfc_session *s, int me, int ranks, int n_feeds,
                                  tfc_tensor *const *feeds, tfc_value *const *slice,
                                  int64_t global_rows, tfc_value **grads)
{
    tfc_value *sums[d->n_grads];
    memset(sums, 0, sizeof sums);
    tfc_status st = sum_to_owners(d, me, grads, global_rows, sums);
    if (!st) st = run_owned(d, s, me, n_feeds, feeds, slice, sums);
    free_values(sums, d->n_grads);
    if (!st) st = broadcast_pieces(d, s, me);
    if (!st) st = tfc_dist_op_send(d, s, me, ranks, d->n_rest, d->rest);
    return st;
}

tfc_status tfc_dist_op_gather(tfc_dist_op *d, tfc_ctx *ctx, tfc_session *s)
{
    if (!d) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_op_gather: dist_op is NULL");
    if (!d->own) return TFC_OK; /* rank 0 holds everything (or no sharded step ran yet) */
    tfc_status st = tfc_dist_train_gather(d->own, ctx, s);
    if (st) memcpy(d->msg, d->own->msg, sizeof d->msg);
    return st;
}
