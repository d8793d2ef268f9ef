/* optimizers.c: optimizers as graph builders. Each adds, per variable, its slot variables and
 * one fused update node (graph/ops_optim.c), then groups the updates and the step counters
 * into one training-step tensor. Learning-rate schedules and global-norm clipping are graph
 * nodes too, so they run as tasks inside the step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "control_flow.h"
#include "grad.h"

extern const struct tfc_op tfc_op_apply_sgd, tfc_op_apply_momentum, tfc_op_apply_adagrad,
    tfc_op_apply_rmsprop, tfc_op_apply_adam, tfc_op_lr_schedule;

tfc_optimizer tfc_optimizer_default(tfc_optimizer_kind kind, double lr)
{
    tfc_optimizer o;
    memset(&o, 0, sizeof o);
    o.kind = kind;
    o.lr = lr;
    o.beta1 = 0.9;
    o.beta2 = 0.999;
    o.alpha = 0.99;
    o.eps = kind == TFC_OPT_ADAGRAD ? 1e-10 : 1e-8;
    if (kind == TFC_OPT_MOMENTUM) o.momentum = 0.9;
    if (kind == TFC_OPT_ADAMW) o.weight_decay = 0.01;
    return o;
}

/* A variable the optimizer keeps for itself (a slot, a counter): named absolutely whatever name
 * scope is open, so it is found again by that name, and never trained. */
static tfc_tensor *own_variable(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                                tfc_shape shape, tfc_init init)
{
    int depth = tfc_scope_hide(g);
    tfc_tensor *t = tfc_variable(g, name, dtype, shape, init);
    tfc_scope_restore(g, depth);
    if (t) tfc_variable_set_trainable(t, 0);
    return t;
}

/* An int64 scalar counter from zero. */
static tfc_tensor *counter(tfc_graph *g, const char *name)
{
    return own_variable(g, name, TFC_INT64, tfc_shape_of(0, NULL), tfc_init_zeros());
}

tfc_tensor *tfc_global_step(tfc_graph *g)
{
    if (!g) return NULL;
    tfc_tensor *t = tfc_graph_find(g, "global_step");
    if (t) {
        if (t->node->op != &tfc_op_variable || t->desc.dtype != TFC_INT64)
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                                  "global_step: node 'global_step' is not an int64 variable");
        return t;
    }
    return counter(g, "global_step");
}

/* A slot variable "<var>/<slot>" of var's shape and dtype. */
static tfc_tensor *slot(tfc_graph *g, tfc_tensor *var, const char *name, double init)
{
    char full[256];
    snprintf(full, sizeof full, "%s/%s", var->node->name, name);
    tfc_tensor *t = tfc_graph_find(g, full);
    if (t) return t; /* a second optimizer on the same variable shares its slots */
    t = own_variable(g, full, var->desc.dtype, var->desc.shape,
                     init != 0 ? tfc_init_constant(init) : tfc_init_zeros());
    /* the slot lives on its variable's rank (the update reads and writes both there, so a
     * graph split across ranks moves no slot); the device part stays the open scope's, as
     * for gradients (graph/autodiff.c) */
    if (t && var->node->device.has_rank) {
        t->node->device.has_rank = 1;
        t->node->device.rank = var->node->device.rank;
    }
    return t;
}

/* A fresh node name: base, base_1, base_2, ... */
static void unique(tfc_graph *g, const char *base, char *out, size_t len)
{
    snprintf(out, len, "%s", base);
    for (int i = 1; tfc_graph_find(g, out); i++) snprintf(out, len, "%s_%d", base, i);
}

/* One tensor from n by a variadic builder (add_n, group) that takes at most TFC_MAX_OPERANDS
 * inputs: level by level in chunks, so any n works (a tree of depth log64 n; one node, as
 * before, for n <= TFC_MAX_OPERANDS). Overwrites t[0..n). */
typedef tfc_tensor *variadic_builder(tfc_graph *g, int n, tfc_tensor *const *inputs);
static tfc_tensor *combine(tfc_graph *g, variadic_builder *build, int n, tfc_tensor **t)
{
    while (n > TFC_MAX_OPERANDS) {
        int m = 0;
        for (int i = 0; i < n; i += TFC_MAX_OPERANDS) { /* t[m] with m <= i: read already */
            int k = n - i < TFC_MAX_OPERANDS ? n - i : TFC_MAX_OPERANDS;
            t[m++] = k == 1 ? t[i] : build(g, k, t + i);
        }
        n = m;
    }
    return build(g, n, t);
}

/* An array of n tensor pointers, or NULL with the graph failed naming what. */
static tfc_tensor **tensor_array(tfc_graph *g, size_t n, const char *what)
{
    tfc_tensor **a = malloc(sizeof *a * n);
    if (!a)
        tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "%s: no memory for %zu tensors", what, n);
    return a;
}

tfc_tensor *tfc_clip_by_global_norm(tfc_graph *g, int n, tfc_tensor *const *grads,
                                    double clip_norm, tfc_tensor **out)
{
    if (!g) return NULL;
    if (n < 1 || !grads || !out || !(clip_norm > 0))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "clip_by_global_norm: needs at least 1 gradient (got %d), an out "
                              "array and clip_norm > 0 (got %g)",
                              n, clip_norm);
    tfc_tensor **sq = tensor_array(g, (size_t)n, "clip_by_global_norm");
    if (!sq) return NULL;
    for (int i = 0; i < n; i++) {
        tfc_tensor *gi = grads[i];
        if (gi && gi->desc.dtype != TFC_FLOAT64) gi = tfc_cast(g, gi, TFC_FLOAT64);
        sq[i] = tfc_reduce_sum(g, tfc_square(g, gi), 0, NULL, 0);
    }
    tfc_tensor *norm = tfc_sqrt(g, n > 1 ? combine(g, tfc_add_n, n, sq) : sq[0]);
    free(sq);
    tfc_tensor *limit = tfc_scalar(g, TFC_FLOAT64, clip_norm);
    tfc_tensor *scale = tfc_div(g, limit, tfc_maximum(g, norm, limit));
    for (int i = 0; i < n; i++) {
        tfc_tensor *s = grads[i] && grads[i]->desc.dtype != TFC_FLOAT64
                            ? tfc_cast(g, scale, grads[i]->desc.dtype) : scale;
        out[i] = tfc_mul(g, grads[i], s);
    }
    return norm;
}

static tfc_tensor *update(tfc_graph *g, const tfc_optimizer *o, tfc_tensor *var, tfc_tensor *grad,
                          tfc_tensor *lr, tfc_tensor *iterations)
{
    const struct tfc_op *op;
    tfc_tensor *in[8];
    int n = 0;
    in[n++] = var;
    switch (o->kind) {
    case TFC_OPT_SGD:
        op = &tfc_op_apply_sgd;
        break;
    case TFC_OPT_MOMENTUM:
        op = &tfc_op_apply_momentum;
        in[n++] = slot(g, var, "momentum", 0);
        break;
    case TFC_OPT_ADAGRAD:
        op = &tfc_op_apply_adagrad;
        in[n++] = slot(g, var, "accumulator", o->initial_accumulator);
        break;
    case TFC_OPT_RMSPROP:
        op = &tfc_op_apply_rmsprop;
        in[n++] = slot(g, var, "square_avg", 0);
        in[n++] = slot(g, var, "momentum", 0);
        in[n++] = slot(g, var, "grad_avg", 0);
        break;
    default:
        op = &tfc_op_apply_adam;
        in[n++] = slot(g, var, "adam_m", 0);
        in[n++] = slot(g, var, "adam_v", 0);
        break;
    }
    in[n++] = grad;
    in[n++] = lr;
    if (op == &tfc_op_apply_adam) in[n++] = iterations;
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[APPLY_WEIGHT_DECAY].f = o->weight_decay;
    at[APPLY_DECOUPLED].i = o->kind == TFC_OPT_ADAMW;
    at[APPLY_MOMENTUM].f = o->momentum;
    at[APPLY_NESTEROV].i = o->nesterov != 0;
    at[APPLY_BETA1].f = o->kind == TFC_OPT_RMSPROP ? o->alpha : o->beta1;
    at[APPLY_BETA2].f = o->beta2;
    at[APPLY_EPS].f = o->eps;
    at[APPLY_CENTERED].i = o->centered != 0;
    return tfc_build(g, op, n, in, at);
}

/* The updates of every variable, the optimizer's step count and the global step, grouped into
 * one training-step tensor. grads are the (clipped) gradients. */
static tfc_tensor *group_updates(tfc_graph *g, int n_vars, tfc_tensor *const *grads,
                                 tfc_tensor *const *vars, const tfc_optimizer *opt,
                                 tfc_tensor *global_step)
{
    tfc_tensor **ops = tensor_array(g, (size_t)n_vars + 2, "apply_gradients");
    if (!ops) return NULL;
    /* the optimizer's own step count (Adam's bias correction) */
    char name[256];
    unique(g, "optimizer/iterations", name, sizeof name);
    tfc_tensor *iterations = counter(g, name);
    tfc_tensor *lr = opt->lr_tensor ? opt->lr_tensor : tfc_scalar(g, TFC_FLOAT32, opt->lr);
    int n = 0;
    for (int i = 0; i < n_vars; i++) ops[n++] = update(g, opt, vars[i], grads[i], lr, iterations);
    /* created after the updates: they read the counts before the increments */
    ops[n++] = tfc_assign_add(g, iterations, tfc_scalar(g, TFC_INT64, 1));
    if (global_step) ops[n++] = tfc_assign_add(g, global_step, tfc_scalar(g, TFC_INT64, 1));
    tfc_tensor *step = combine(g, tfc_group, n, ops);
    free(ops);
    return step;
}

tfc_tensor *tfc_apply_gradients(tfc_graph *g, int n_vars, tfc_tensor *const *grads,
                                tfc_tensor *const *vars, const tfc_optimizer *opt,
                                tfc_tensor *global_step)
{
    if (!g || g->status) return NULL;
    if (!opt || n_vars < 1 || !grads || !vars)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "apply_gradients: needs an optimizer and at least 1 variable with "
                              "its gradient (got %d)",
                              n_vars);
    if (opt->kind < TFC_OPT_SGD || opt->kind > TFC_OPT_ADAMW)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "apply_gradients: unknown optimizer %d",
                              (int)opt->kind);
    for (int i = 0; i < n_vars; i++)
        if (!vars[i] || vars[i]->node->op != &tfc_op_variable || !grads[i])
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                                  "apply_gradients: entry %d needs a variable and its gradient", i);
    if (!(opt->clip_norm > 0)) return group_updates(g, n_vars, grads, vars, opt, global_step);
    tfc_tensor **clipped = tensor_array(g, (size_t)n_vars, "apply_gradients");
    tfc_tensor *step = NULL;
    if (clipped && tfc_clip_by_global_norm(g, n_vars, grads, opt->clip_norm, clipped))
        step = group_updates(g, n_vars, clipped, vars, opt, global_step);
    free(clipped);
    return step;
}

/* The trainable float variables that loss reaches through its data inputs (and, through a
 * cond or while_loop, the variables its regions read), in creation order, into a new array
 * (*n of them). Ops without a gradient (stop_gradient, assign) end a
 * path: a variable behind them would only get zeros. NULL with g failed on no memory. */
static tfc_tensor **reached_trainables(tfc_graph *g, tfc_tensor *loss, int *n)
{
    int total = g->n_nodes;
    char *seen = calloc((size_t)total, 1);
    int *stack = malloc(sizeof *stack * (size_t)total);
    tfc_tensor **vars = tensor_array(g, (size_t)total, "minimize");
    *n = 0;
    if (!seen || !stack || !vars) {
        free(seen), free(stack), free(vars);
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "minimize: no memory");
    }
    int top = 0;
    stack[top++] = loss->node->id;
    seen[loss->node->id] = 1;
    while (top) {
        const struct tfc_node *x = g->nodes[stack[--top]];
        if (x->op->flags & TFC_OP_NO_GRADIENT) continue;
        for (int k = 0; k < x->n_inputs; k++) {
            int id = x->inputs[k]->node->id;
            if (!seen[id]) seen[id] = 1, stack[top++] = id;
        }
        if (tfc_is_cflow(x)) /* variables its branches or body read directly */
            for (int k = 0, m = tfc_cflow_globals(x, total, vars); k < m && k < total; k++) {
                int id = vars[k]->node->id;
                if (!seen[id]) seen[id] = 1, stack[top++] = id;
            }
    }
    for (int i = 0; i < total; i++) {
        tfc_tensor *t = &g->nodes[i]->outputs[0];
        if (seen[i] && tfc_variable_trainable(t) && tfc_dtype_is_float(t->desc.dtype))
            vars[(*n)++] = t;
    }
    free(seen), free(stack);
    return vars;
}

tfc_tensor *tfc_minimize(tfc_graph *g, tfc_tensor *loss, int n_vars, tfc_tensor *const *vars,
                         const tfc_optimizer *opt, tfc_tensor *global_step)
{
    if (!g || g->status) return NULL;
    tfc_tensor **reached = NULL;
    if (n_vars == 0 && !vars && !loss)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "minimize: loss is NULL");
    if (n_vars == 0 && !vars && loss->node->graph == g) {
        if (!(reached = reached_trainables(g, loss, &n_vars))) return NULL;
        if (!n_vars) {
            free(reached);
            return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                                  "minimize: loss '%s' depends on no trainable variable",
                                  loss->name);
        }
        vars = reached;
    }
    if (n_vars < 1 || !vars)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT,
                              "minimize: needs at least 1 variable, or 0 and NULL for every "
                              "trainable one (got %d)", n_vars);
    tfc_tensor **grads = tensor_array(g, (size_t)n_vars, "minimize");
    tfc_tensor *step = NULL;
    if (grads && !tfc_gradients(g, 1, &loss, NULL, n_vars, vars, grads))
        step = tfc_apply_gradients(g, n_vars, grads, vars, opt, global_step);
    free(grads);
    free(reached);
    return step;
}

static tfc_tensor *schedule(tfc_graph *g, int kind, double base, tfc_tensor *step, double period,
                            double x)
{
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(&tfc_op_lr_schedule, at);
    at[LR_SCHEDULE_KIND].i = kind;
    at[LR_SCHEDULE_BASE].f = base;
    at[LR_SCHEDULE_GAMMA].f = kind == LR_COSINE ? 0 : x;
    at[LR_SCHEDULE_PERIOD].f = period;
    at[LR_SCHEDULE_FLOOR].f = kind == LR_COSINE ? x : 0;
    return tfc_build(g, &tfc_op_lr_schedule, 1, &step, at);
}

tfc_tensor *tfc_lr_step_decay(tfc_graph *g, double base, tfc_tensor *step, double period, double gamma)
{
    return schedule(g, LR_STEP_DECAY, base, step, period, gamma);
}

tfc_tensor *tfc_lr_exponential(tfc_graph *g, double base, tfc_tensor *step, double period, double gamma)
{
    return schedule(g, LR_EXPONENTIAL, base, step, period, gamma);
}

tfc_tensor *tfc_lr_cosine(tfc_graph *g, double base, tfc_tensor *step, double period, double floor)
{
    return schedule(g, LR_COSINE, base, step, period, floor);
}
