/* dist_train.c: synchronous data-parallel training over ranks, parameter-server style (issue
 * 15). Every rank holds the same graph; each computes the gradients of its slice of the global
 * batch; each variable has an owner rank on which a task submitted through
 * starpu_mpi_task_insert (sched/dist_mpi.c) sums the ranks' gradients in rank order weighted by
 * the slices' rows (StarPU-MPI moves them there); the owner applies the
 * optimizer and sends the new value back to the others. The one-process reference runs the
 * same slices in turn and the same sum, so both give the same bits.
 *
 * The graph gets, per variable i, a gradient placeholder feeding its own optimizer update
 * ("dist/grad_i", so an owner updates only its variables) and an assign from "dist/value_i"
 * (how the others take the owner's value); a second trainer on the graph uses "dist_1/". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist_train.h"

void tfc_dist_train_destroy(tfc_dist_train *t)
{
    if (!t) return;
    free(t->vars), free(t->grads), free(t->grad_in), free(t->apply);
    free(t->value_in), free(t->assign), free(t->owner), free(t->bytes);
    free(t->state), free(t->state_var);
    free(t->pieces), free(t->tiles);
    free(t);
}

static tfc_status graph_failed(tfc_graph *g)
{
    return tfc_fail_global(tfc_graph_status(g), "dist_train_create: %s", tfc_graph_errmsg(g));
}

/* The per-variable placeholders, updates and assigns, under "dist/" (the first trainer of g),
 * "dist_1/", ... (names are the same on every rank: the graphs are). */
static tfc_status build_updates(tfc_dist_train *t, tfc_graph *g, const tfc_optimizer *opt)
{
    char prefix[32] = "dist", probe[64];
    for (int k = 1;; k++) {
        snprintf(probe, sizeof probe, "%s/grad_0", prefix);
        if (!tfc_graph_find(g, probe)) break;
        snprintf(prefix, sizeof prefix, "dist_%d", k);
    }
    for (int i = 0; i < t->n_vars; i++) {
        tfc_tensor *v = t->vars[i];
        if (tfc_tensor_dtype(v) != TFC_FLOAT32)
            return tfc_fail_global(TFC_ERR_DTYPE, "dist_train_create: variable '%s' is not "
                                   "float32 (the ranks' gradients are summed in float32)",
                                   tfc_tensor_name(v));
        char name[96];
        snprintf(name, sizeof name, "%s/grad_%d", prefix, i);
        t->grad_in[i] = tfc_placeholder(g, name, TFC_FLOAT32, tfc_tensor_shape(v));
        snprintf(name, sizeof name, "%s/value_%d", prefix, i);
        t->value_in[i] = tfc_placeholder(g, name, TFC_FLOAT32, tfc_tensor_shape(v));
        if (!t->grad_in[i] || !t->value_in[i]) return graph_failed(g);
        int before = tfc_graph_num_nodes(g);
        t->apply[i] = tfc_apply_gradients(g, 1, &t->grad_in[i], &t->vars[i], opt, NULL);
        t->assign[i] = tfc_assign(g, v, t->value_in[i]);
        if (!t->apply[i] || !t->assign[i]) return graph_failed(g);
        tfc_status st = tfc_dist_note_state(t, g, before, i);
        if (st) return st;
        tfc_shape s = tfc_tensor_shape(v);
        t->bytes[i] = sizeof(float);
        for (int d = 0; d < s.rank; d++) t->bytes[i] *= (size_t)s.dims[d];
    }
    return TFC_OK;
}

static tfc_status alloc_train(tfc_dist_train *t, int n)
{
    t->vars = calloc((size_t)n, sizeof *t->vars);
    t->grads = calloc((size_t)n, sizeof *t->grads);
    t->grad_in = calloc((size_t)n, sizeof *t->grad_in);
    t->apply = calloc((size_t)n, sizeof *t->apply);
    t->value_in = calloc((size_t)n, sizeof *t->value_in);
    t->assign = calloc((size_t)n, sizeof *t->assign);
    t->owner = calloc((size_t)n, sizeof *t->owner);
    t->bytes = calloc((size_t)n, sizeof *t->bytes);
    t->tiles = calloc((size_t)n, sizeof *t->tiles);
    if (!t->vars || !t->grads || !t->grad_in || !t->apply || !t->value_in || !t->assign ||
        !t->owner || !t->bytes || !t->tiles)
        return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "dist_train_create: no memory");
    return TFC_OK;
}

tfc_status tfc_dist_train_create(tfc_graph *g, tfc_tensor *loss, int n_vars,
                                 tfc_tensor *const *vars, const tfc_optimizer *opt, int n_ranks,
                                 unsigned flags, tfc_dist_train **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_create: out is NULL");
    *out = NULL;
    if (!g || !loss || !vars || !opt || n_vars < 1)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_create: NULL graph, loss, "
                               "variables or optimizer, or %d variables (at least 1)", n_vars);
    if (n_ranks < 1)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_create: %d ranks (at "
                               "least 1)", n_ranks);
    if (flags & ~(unsigned)(TFC_DIST_OWNERS_RANK0 | TFC_DIST_WHOLE_VARIABLES))
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_create: unknown flags "
                               "0x%x", flags);
    tfc_dist_train *t = calloc(1, sizeof *t);
    if (!t) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "dist_train_create: no memory");
    t->n_vars = n_vars;
    t->n_ranks = n_ranks;
    t->all_on_rank0 = (flags & TFC_DIST_OWNERS_RANK0) != 0;
    t->whole_only = opt->clip_norm > 0; /* the norm of a tile is not the variable's */
    tfc_status st = tfc_dist_tile_bytes_from_env(&t->tile_bytes, t->msg);
    if (st) st = tfc_fail_global(st, "dist_train_create: %s", t->msg);
    if (!st) st = alloc_train(t, n_vars);
    if (!st) {
        memcpy(t->vars, vars, (size_t)n_vars * sizeof *vars);
        st = tfc_gradients(g, 1, &loss, NULL, n_vars, t->vars, t->grads);
        if (st) st = graph_failed(g);
    }
    if (!st) st = build_updates(t, g, opt);
    if (!st && (flags & TFC_DIST_WHOLE_VARIABLES)) t->tile_bytes = 0;
    if (!st && tfc_dist_assign(t)) st = tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "%s", t->msg);
    if (st) {
        tfc_dist_train_destroy(t);
        return st;
    }
    *out = t;
    return TFC_OK;
}

int tfc_dist_train_owner(const tfc_dist_train *t, int i)
{
    return t && i >= 0 && i < t->n_vars ? t->owner[i] : -1;
}

const char *tfc_dist_train_errmsg(const tfc_dist_train *t)
{
    return t ? t->msg : "dist_train is NULL";
}

static tfc_status session_failed(tfc_dist_train *t, tfc_session *s, const char *what)
{
    return tfc_fail(t->msg, TFC_ERR_RUNTIME, "dist_train %s: %s", what, tfc_session_errmsg(s));
}

/* The gradients of one slice (grads[i] owned by the caller). */
static tfc_status slice_gradients(tfc_dist_train *t, tfc_session *s, int n_feeds,
                                  tfc_tensor *const *feeds, tfc_value *const *values,
                                  tfc_value **grads)
{
    tfc_status st = tfc_session_run(s, n_feeds, feeds, values, t->n_vars, t->grads, grads, 0, NULL);
    return st ? tfc_fail(t->msg, st, "dist_train gradients: %s", tfc_session_errmsg(s)) : TFC_OK;
}

/* The global batch's gradient from the slices' (all: n_ranks rows of n elements, in rank
 * order), with the distributed step's sum. */
static void sum_slices(const tfc_dist_train *t, const float *all, size_t n, int64_t global_rows,
                       float *out)
{
    const float *parts[t->n_ranks];
    for (int r = 0; r < t->n_ranks; r++) parts[r] = all + (size_t)r * n;
    if (t->replay) /* a replayed step of backup workers: the ranks it applied */
        tfc_dist_chosen_sum(parts, t->n_ranks, t->replay, global_rows, n, out);
    else
        tfc_dist_weighted_sum(parts, t->n_ranks, global_rows, n, out);
}

/* A float32 value shaped like variable i, for its summed gradient or its value. */
static tfc_status var_value(tfc_dist_train *t, int i, tfc_value **out)
{
    tfc_status st = tfc_value_create(TFC_FLOAT32, tfc_tensor_shape(t->vars[i]), out);
    return st ? tfc_fail(t->msg, st, "dist_train: no memory for '%s'",
                         tfc_tensor_name(t->vars[i])) : TFC_OK;
}

/* Runs the updates (which 1) or the assigns (which 0) of the variables whose vals are set. */
static tfc_status run_some(tfc_dist_train *t, tfc_session *s, tfc_value **vals, int updates)
{
    tfc_tensor *feeds[t->n_vars], *targets[t->n_vars];
    tfc_value *fv[t->n_vars];
    int n = 0;
    for (int i = 0; i < t->n_vars; i++) {
        if (!vals[i]) continue;
        feeds[n] = updates ? t->grad_in[i] : t->value_in[i];
        targets[n] = updates ? t->apply[i] : t->assign[i];
        fv[n++] = vals[i];
    }
    if (!n) return TFC_OK;
    if (tfc_session_run(s, n, feeds, fv, 0, NULL, NULL, n, targets))
        return session_failed(t, s, updates ? "update" : "assign");
    return TFC_OK;
}

static void free_values(tfc_value **v, int n)
{
    for (int i = 0; i < n; i++) tfc_value_destroy(v[i]), v[i] = NULL;
}

static tfc_status check_step(tfc_dist_train *t, tfc_session *s, int n_feeds,
                             int64_t global_rows, int n_ranks)
{
    if (!s || n_feeds < 0 || global_rows < t->n_ranks)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train step: NULL session, %d "
                        "feeds or a global batch of %lld rows (at least one per rank: %d)",
                        n_feeds, (long long)global_rows, t->n_ranks);
    if (n_ranks != t->n_ranks)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train step: the context has %d "
                        "ranks, the trainer was made for %d", n_ranks, t->n_ranks);
    return TFC_OK;
}

/* Gradients and values travel packed, one message per owner and rank each way instead of one
 * per variable or tile (each costs about 1 ms on this oversubscribed box; the sums and copies
 * are element-wise, so packing changes no bit): sched/dist_tile.c's tfc_dist_pack. */
static size_t pack_size(const tfc_dist_train *t, int o)
{
    return tfc_dist_pack_size(t, o);
}

static void pack_values(const tfc_dist_train *t, int o, tfc_value **vals, float *pack, int to)
{
    tfc_dist_pack(t, o, vals, pack, to);
}

/* Values shaped like the variables of which owner o has a piece (vals[i] where still NULL),
 * zeros: a tile's owner feeds its update zeros outside the tile's rows (rows whose results
 * the other tiles' owners' values replace). */
static tfc_status owner_values(tfc_dist_train *t, int o, tfc_value **vals)
{
    for (int p = 0; p < t->n_pieces; p++) {
        int i = t->pieces[p].var;
        if (t->pieces[p].owner != o || vals[i]) continue;
        tfc_status st = var_value(t, i, &vals[i]);
        if (st) return st;
        memset(tfc_value_data(vals[i]), 0, t->bytes[i]);
    }
    return TFC_OK;
}

/* Whether rank o owns a piece of variable i. */
static int owns(const tfc_dist_train *t, int o, int i)
{
    for (int p = 0; p < t->n_pieces; p++)
        if (t->pieces[p].var == i && t->pieces[p].owner == o) return 1;
    return 0;
}

static tfc_status no_pack_memory(tfc_dist_train *t, size_t n)
{
    return tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train: no memory for %zu floats of "
                    "gradients", n);
}

/* Owners: the summed gradients of their variables (sums[i]; NULL for the others' variables),
 * added by a task on the owner (sched/dist_mpi.c), one per owner. */
static tfc_status gather_and_sum(tfc_dist_train *t, int me, tfc_value **grads,
                                 int64_t global_rows, tfc_value **sums)
{
    tfc_status st = owner_values(t, me, sums);
    for (int o = 0; !st && o < t->n_ranks; o++) {
        size_t n = pack_size(t, o);
        if (!n) continue;
        float *mine = malloc(n * sizeof *mine), *out = o == me ? malloc(n * sizeof *out) : NULL;
        if (!mine || (o == me && !out)) st = no_pack_memory(t, n);
        if (!st) pack_values(t, o, grads, mine, 1);
        if (!st) st = tfc_dist_sum(mine, n, o, global_rows, out, t->msg);
        if (!st && out) pack_values(t, o, sums, out, 0);
        free(mine);
        free(out);
    }
    return st;
}

/* Every rank: the owners' new values (vals[i] for the variables this rank does not own). */
static tfc_status broadcast_values(tfc_dist_train *t, tfc_session *s, int me, tfc_value **vals)
{
    tfc_value *mine[t->n_vars];
    memset(mine, 0, sizeof mine);
    tfc_status st = TFC_OK;
    for (int i = 0; !st && i < t->n_vars; i++)
        if (owns(t, me, i) && tfc_session_read_variable(s, t->vars[i], &mine[i]))
            st = session_failed(t, s, "read");
    for (int o = 0; !st && o < t->n_ranks; o++) {
        size_t n = pack_size(t, o);
        if (!n) continue;
        float *pack = malloc(n * sizeof *pack);
        if (!pack) st = no_pack_memory(t, n);
        if (!st && o == me) pack_values(t, o, mine, pack, 1);
        if (!st && o != me) st = owner_values(t, o, vals);
        if (!st) st = tfc_dist_broadcast(pack, n, o, t->msg);
        if (!st && o != me) pack_values(t, o, vals, pack, 0);
        free(pack);
    }
    /* a tiled variable: this rank's own tiles too (its update left the others' rows stale) */
    for (int p = 0; !st && p < t->n_pieces; p++) {
        const struct tfc_dist_piece *c = &t->pieces[p];
        if (c->owner == me && vals[c->var])
            memcpy((float *)tfc_value_data(vals[c->var]) + c->first,
                   (const float *)tfc_value_data(mine[c->var]) + c->first, c->count * sizeof(float));
    }
    free_values(mine, t->n_vars);
    return st;
}

tfc_status tfc_dist_train_set_backups(tfc_dist_train *t, int backups)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_set_backups: NULL");
    if (backups < 0 || backups >= t->n_ranks || t->n_ranks > 64)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_set_backups: %d backups "
                        "among %d ranks (0 to ranks - 1, at most 64 ranks)", backups, t->n_ranks);
    t->backups = backups;
    t->all_on_rank0 |= backups > 0; /* rank 0 waits for the first; it owns everything whole */
    return tfc_dist_assign(t);
}

unsigned long long tfc_dist_train_chosen(const tfc_dist_train *t)
{
    return t ? t->chosen : 0;
}

tfc_status tfc_dist_train_replay(tfc_dist_train *t, unsigned long long ranks)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_replay: NULL");
    if (t->n_ranks < 64 && ranks >> t->n_ranks)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_replay: mask 0x%llx names "
                        "ranks beyond the %d ranks", ranks, t->n_ranks);
    if (ranks && !(ranks & 1))
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_replay: mask 0x%llx "
                        "leaves out rank 0, whose gradient is always applied", ranks);
    t->replay = ranks;
    return TFC_OK;
}

/* A step with backup workers: rank 0 owns every variable (tfc_dist_train_set_backups). */
static tfc_status backup_step(tfc_dist_train *t, int me, tfc_value **grads, int64_t global_rows,
                              tfc_session *s)
{
    size_t n = pack_size(t, 0);
    float *mine = malloc(n * sizeof *mine), *sum = malloc(n * sizeof *sum);
    tfc_value *vals[t->n_vars];
    memset(vals, 0, sizeof vals);
    tfc_status st = mine && sum ? TFC_OK : no_pack_memory(t, n);
    if (!st) pack_values(t, 0, grads, mine, 1);
    unsigned long long chosen = 0;
    if (!st) st = tfc_dist_backup_sum(mine, n, t->n_ranks - t->backups, t->steps - 1, global_rows,
                                      t->replay, &chosen, sum, t->msg);
    t->replay = 0;
    if (!st) st = owner_values(t, 0, vals);
    if (!st && me == 0) {
        t->chosen = chosen;
        pack_values(t, 0, vals, sum, 0);
        st = run_some(t, s, vals, 1);
        free_values(vals, t->n_vars);
        for (int i = 0; !st && i < t->n_vars; i++)
            if (tfc_session_read_variable(s, t->vars[i], &vals[i])) st = session_failed(t, s, "read");
        if (!st) pack_values(t, 0, vals, sum, 1);
        free_values(vals, t->n_vars);
    }
    if (!st) st = tfc_dist_backup_values(sum, n, t->steps - 1, t->msg);
    if (!st && me != 0) {
        pack_values(t, 0, vals, sum, 0);
        st = run_some(t, s, vals, 0);
    }
    free_values(vals, t->n_vars);
    free(mine);
    free(sum);
    return st;
}

tfc_status tfc_dist_train_step(tfc_dist_train *t, tfc_ctx *ctx, tfc_session *s, int n_feeds,
                               tfc_tensor *const *feeds, tfc_value *const *slice,
                               int64_t global_rows)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_step: trainer is NULL");
    tfc_status st = check_step(t, s, n_feeds, global_rows, tfc_dist_size(ctx));
    if (st) return st;
    if (t->n_ranks == 1) /* nothing to move (and a context without MPI has no StarPU-MPI) */
        return tfc_dist_train_step_local(t, s, n_feeds, feeds, slice, global_rows);
    int me = tfc_dist_rank(ctx);
    tfc_dist_step_is(t->steps++);
    tfc_value *grads[t->n_vars], *vals[t->n_vars];
    memset(grads, 0, sizeof grads);
    memset(vals, 0, sizeof vals);
    st = slice_gradients(t, s, n_feeds, feeds, slice, grads);
    if (!st && (t->backups || t->replay)) {
        st = backup_step(t, me, grads, global_rows, s);
        free_values(grads, t->n_vars);
        return st;
    }
    if (!st) st = gather_and_sum(t, me, grads, global_rows, vals);
    free_values(grads, t->n_vars);
    if (!st) st = run_some(t, s, vals, 1);
    free_values(vals, t->n_vars);
    if (!st) st = broadcast_values(t, s, me, vals);
    if (!st) st = run_some(t, s, vals, 0);
    free_values(vals, t->n_vars);
    return st;
}

/* The reference: one process computes the n_ranks slices' gradients in turn (slices: n_ranks
 * groups of n_feeds values, in rank order) and sums and applies them as the owners do. */
tfc_status tfc_dist_train_step_local(tfc_dist_train *t, tfc_session *s, int n_feeds,
                                     tfc_tensor *const *feeds, tfc_value *const *slices,
                                     int64_t global_rows)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_step: trainer is NULL");
    tfc_status st = check_step(t, s, n_feeds, global_rows, t->n_ranks);
    if (st) return st;
    float *all[t->n_vars];
    tfc_value *grads[t->n_vars], *sums[t->n_vars];
    memset(all, 0, sizeof all);
    memset(grads, 0, sizeof grads);
    memset(sums, 0, sizeof sums);
    for (int i = 0; !st && i < t->n_vars; i++) {
        all[i] = malloc((size_t)t->n_ranks * t->bytes[i]);
        st = all[i] ? var_value(t, i, &sums[i])
                    : tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train: no memory");
    }
    for (int r = 0; !st && r < t->n_ranks; r++) {
        st = slice_gradients(t, s, n_feeds, feeds, slices + (size_t)r * (size_t)n_feeds, grads);
        for (int i = 0; !st && i < t->n_vars; i++)
            memcpy((char *)all[i] + (size_t)r * t->bytes[i], tfc_value_data(grads[i]), t->bytes[i]);
        free_values(grads, t->n_vars);
    }
    for (int i = 0; !st && i < t->n_vars; i++)
        sum_slices(t, all[i], t->bytes[i] / sizeof(float), global_rows, tfc_value_data(sums[i]));
    t->chosen = t->replay ? t->replay : (t->n_ranks < 64 ? (1ull << t->n_ranks) - 1 : ~0ull);
    t->replay = 0;
    if (!st) st = run_some(t, s, sums, 1);
    free_values(sums, t->n_vars);
    for (int i = 0; i < t->n_vars; i++) free(all[i]);
    return st;
}
