/* dist_op.c: data-parallel steps of a stored training op (issue 15, item 5: `mpirun tfc train`).
 * A model store holds its train_op (tfc_minimize's group of optimizer updates), not the loss
 * and optimizer tfc_dist_train_create needs; so here every rank computes, for its slice, the
 * gradients the updates read; rank 0 sums them in rank order weighted by the slices' rows (as
 * sched/dist_sum.c does for tfc_dist_train), runs the train_op with the sums fed in their
 * place, and sends every variable to the other ranks: rank 0 holds the whole state, so its
 * checkpoints are the job's. That is TFC_DIST_OWNERS_RANK0=1; by default each update runs on the
 * owner of its variable (or of each tile of it) instead, as tfc_dist_train places them
 * (sched/dist_op_shard.c). */
#include <stdlib.h>
#include <string.h>
#include "dist_op.h"
#include "../graph/graph.h"
#include "../src/env.h"

void tfc_dist_op_destroy(tfc_dist_op *d)
{
    if (!d) return;
    free(d->grads), free(d->applies), free(d->updated), free(d->others);
    free(d->vars), free(d->rest);
    tfc_dist_train_destroy(d->own);
    free(d);
}

const char *tfc_dist_op_errmsg(const tfc_dist_op *d)
{
    return d ? d->msg : "dist_op is NULL";
}

/* The gradient input of an update node (var, its slots, grad, lr[, iterations]), or -1. */
static int grad_input(const struct tfc_node *n)
{
    if (strncmp(n->op->name, "apply_", 6)) return -1;
    return n->n_inputs - 2 - (strcmp(n->op->name, "apply_adam") == 0);
}

/* The updates that `n` groups (through its data and control inputs), their gradients into
 * d->grads (seen: one flag per graph node). */
static void find_updates(tfc_dist_op *d, struct tfc_node *n, char *seen)
{
    if (seen[n->id]) return;
    seen[n->id] = 1;
    int k = grad_input(n);
    if (k >= 0) {
        d->applies[d->n_grads] = &n->outputs[0];
        d->updated[d->n_grads] = n->inputs[0];
        d->grads[d->n_grads++] = n->inputs[k];
        return;
    }
    if (strcmp(n->op->name, "group") && strcmp(n->op->name, "no_op") && n != d->train_op->node) {
        if (n->n_outputs > 0) d->others[d->n_others++] = &n->outputs[0];
        return; /* only what train_op groups: not the gradients' own inputs */
    }
    for (int i = 0; i < n->n_inputs; i++) find_updates(d, n->inputs[i]->node, seen);
    for (int i = 0; i < n->n_ctrl; i++) find_updates(d, n->ctrl[i], seen);
}

static tfc_status collect(tfc_dist_op *d, tfc_graph *g)
{
    char *seen = calloc((size_t)g->n_nodes, 1);
    d->grads = calloc((size_t)g->n_nodes, sizeof *d->grads);
    d->vars = calloc((size_t)g->n_nodes, sizeof *d->vars);
    d->applies = calloc((size_t)g->n_nodes, sizeof *d->applies);
    d->updated = calloc((size_t)g->n_nodes, sizeof *d->updated);
    d->others = calloc((size_t)g->n_nodes, sizeof *d->others);
    d->rest = calloc((size_t)g->n_nodes, sizeof *d->rest);
    if (!seen || !d->grads || !d->vars || !d->applies || !d->updated || !d->others || !d->rest) {
        free(seen);
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "dist_op_create: no memory");
    }
    find_updates(d, d->train_op->node, seen);
    free(seen);
    for (int k = 0; k < g->n_nodes; k++)
        if (g->nodes[k]->op == &tfc_op_variable) d->vars[d->n_vars++] = &g->nodes[k]->outputs[0];
    if (!d->n_grads)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_op_create: train op '%s' groups "
                               "no optimizer update (apply_*)", tfc_tensor_name(d->train_op));
    for (int i = 0; i < d->n_grads; i++)
        if (tfc_tensor_dtype(d->grads[i]) != TFC_FLOAT32)
            return tfc_fail_global(TFC_ERR_DTYPE, "dist_op_create: gradient '%s' is not float32 "
                                   "(the ranks' gradients are summed in float32)",
                                   tfc_tensor_name(d->grads[i]));
    return TFC_OK;
}

tfc_status tfc_dist_op_create(tfc_graph *g, tfc_tensor *train_op, tfc_dist_op **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_op_create: out is NULL");
    *out = NULL;
    if (!g || !train_op)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_op_create: NULL graph or train op");
    tfc_dist_op *d = calloc(1, sizeof *d);
    if (!d) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "dist_op_create: no memory");
    d->train_op = train_op;
    tfc_status st = tfc_env_bool("TFC_DIST_OWNERS_RANK0", 0, &d->all_on_rank0, d->msg);
    if (st) st = tfc_fail_global(st, "dist_op_create: %s", d->msg);
    if (!st) st = collect(d, g);
    if (st) {
        tfc_dist_op_destroy(d);
        return st;
    }
    *out = d;
    return TFC_OK;
}

static void free_values(tfc_value **v, int n)
{
    for (int i = 0; i < n; i++) tfc_value_destroy(v[i]), v[i] = NULL;
}

static int summed_fetch(const tfc_value *v)
{
    return tfc_value_dtype(v) == TFC_FLOAT32 && tfc_value_shape(v).rank == 0;
}

/* Every rank: its slice's gradients and fetches; rank 0 gets the sums (grads[i] overwritten,
 * float32 scalar fetches too). */
static tfc_status sum_on_rank0(tfc_dist_op *d, int me, int n_grads, tfc_value **grads,
                               int n_fetches, tfc_value **fetched, int64_t global_rows)
{
    size_t n = 0;
    for (int i = 0; i < n_grads; i++) n += tfc_value_nbytes(grads[i]) / sizeof(float);
    for (int k = 0; k < n_fetches; k++) n += summed_fetch(fetched[k]);
    float *mine = malloc((n ? n : 1) * sizeof *mine);
    float *sum = me == 0 ? malloc((n ? n : 1) * sizeof *sum) : NULL;
    tfc_status st = TFC_OK;
    if (!mine || (me == 0 && !sum))
        st = tfc_fail(d->msg, TFC_ERR_OUT_OF_MEMORY, "dist_op: no memory for %zu floats", n);
    size_t at = 0;
    for (int i = 0; !st && i < n_grads; i++) {
        memcpy(mine + at, tfc_value_data(grads[i]), tfc_value_nbytes(grads[i]));
        at += tfc_value_nbytes(grads[i]) / sizeof(float);
    }
    for (int k = 0; !st && k < n_fetches; k++)
        if (summed_fetch(fetched[k])) mine[at++] = *(float *)tfc_value_data(fetched[k]);
    if (!st && n) st = tfc_dist_sum(mine, n, 0, global_rows, sum, d->msg);
    at = 0;
    for (int i = 0; !st && sum && i < n_grads; i++) {
        memcpy(tfc_value_data(grads[i]), sum + at, tfc_value_nbytes(grads[i]));
        at += tfc_value_nbytes(grads[i]) / sizeof(float);
    }
    for (int k = 0; !st && sum && k < n_fetches; k++)
        if (summed_fetch(fetched[k])) *(float *)tfc_value_data(fetched[k]) = sum[at++];
    free(mine);
    free(sum);
    return st;
}

/* Rank 0 sums every gradient and runs the whole train op, then sends every variable. */
static tfc_status rank0_step(tfc_dist_op *d, tfc_session *s, int me, int ranks, int n_feeds,
                             tfc_tensor *const *feeds, tfc_value *const *slice, tfc_value **got,
                             int n_fetches, int64_t global_rows)
{
    tfc_status st = sum_on_rank0(d, me, d->n_grads, got, n_fetches, got + d->n_grads,
                                 global_rows);
    if (!st && me == 0) { /* the update from the sums (the slice fed for what else it needs) */
        tfc_tensor *ft[n_feeds + d->n_grads];
        tfc_value *fv[n_feeds + d->n_grads];
        memcpy(ft, feeds, (size_t)n_feeds * sizeof *ft);
        memcpy(fv, slice, (size_t)n_feeds * sizeof *fv);
        memcpy(ft + n_feeds, d->grads, (size_t)d->n_grads * sizeof *ft);
        memcpy(fv + n_feeds, got, (size_t)d->n_grads * sizeof *fv);
        if (tfc_session_run(s, n_feeds + d->n_grads, ft, fv, 0, NULL, NULL, 1, &d->train_op))
            st = tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op update: %s", tfc_session_errmsg(s));
    }
    return st ? st : tfc_dist_op_send(d, s, me, ranks, d->n_vars, d->vars);
}

tfc_status tfc_dist_op_step(tfc_dist_op *d, tfc_ctx *ctx, tfc_session *s, int n_feeds,
                            tfc_tensor *const *feeds, tfc_value *const *slice,
                            int64_t global_rows, int n_fetches, tfc_tensor *const *fetches,
                            tfc_value **fetched)
{
    if (!d) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_op_step: dist_op is NULL");
    int ranks = tfc_dist_size(ctx), me = tfc_dist_rank(ctx);
    if (!s || n_feeds < 0 || n_fetches < 0 || global_rows < ranks)
        return tfc_fail(d->msg, TFC_ERR_INVALID_ARGUMENT, "dist_op_step: NULL session, %d "
                        "feeds, %d fetches or a global batch of %lld rows (at least one per "
                        "rank: %d)", n_feeds, n_fetches, (long long)global_rows, ranks);
    if (ranks == 1) /* one process: the train op as it is */
        return tfc_session_run(s, n_feeds, feeds, slice, n_fetches, fetches, fetched, 1,
                               &d->train_op)
                   ? tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op step: %s", tfc_session_errmsg(s))
                   : TFC_OK;
    tfc_dist_step_is(d->steps++);
    int n_out = d->n_grads + n_fetches;
    tfc_tensor *want[n_out];
    tfc_value *got[n_out];
    memset(got, 0, sizeof got);
    if (d->n_grads) memcpy(want, d->grads, (size_t)d->n_grads * sizeof *want);
    if (n_fetches) memcpy(want + d->n_grads, fetches, (size_t)n_fetches * sizeof *want);
    tfc_status st = tfc_session_run(s, n_feeds, feeds, slice, n_out, want, got, 0, NULL)
                        ? tfc_fail(d->msg, TFC_ERR_RUNTIME, "dist_op gradients: %s",
                                   tfc_session_errmsg(s)) : TFC_OK;
    if (!st && !d->all_on_rank0 && !d->own) st = tfc_dist_op_shard(d, ranks);
    if (!st && d->all_on_rank0)
        st = rank0_step(d, s, me, ranks, n_feeds, feeds, slice, got, n_fetches, global_rows);
    else if (!st) { /* the fetches to rank 0; the gradients to their owners */
        st = sum_on_rank0(d, me, 0, NULL, n_fetches, got + d->n_grads, global_rows);
        if (!st)
            st = tfc_dist_op_shard_step(d, s, me, ranks, n_feeds, feeds, slice, global_rows, got);
    }
    free_values(got, d->n_grads);
    for (int k = 0; k < n_fetches; k++) fetched[k] = got[d->n_grads + k];
    if (st) free_values(fetched, n_fetches);
    return st;
}
