/* autodiff.c: reverse-mode differentiation as graph construction (TensorFlow's gradients()).
 * The nodes between the xs and the ys are visited in reverse creation order (a topological
 * order for data edges); each calls its op's gradient builder (or a user's), and the
 * contributions reaching a tensor from several consumers are summed by one add_n node. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "grad.h"
#include "control_flow.h"

/* ---- user gradients, registered per op (process-wide) ---------------------------------- */

#define MAX_REGISTERED 64
static struct {
    const struct tfc_op *op;
    tfc_gradient_fn fn;
    void *user;
} registry[MAX_REGISTERED];
static int n_registered;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

tfc_status tfc_register_gradient(const char *opname, tfc_gradient_fn fn, void *user)
{
    const struct tfc_op *op = opname ? tfc_op_lookup(opname) : NULL;
    if (!op)
        return tfc_fail_global(TFC_ERR_NOT_FOUND, "register_gradient: unknown op '%s'",
                               opname ? opname : "(null)");
    pthread_mutex_lock(&registry_lock);
    int i = 0;
    while (i < n_registered && registry[i].op != op) i++;
    tfc_status st = TFC_OK;
    if (!fn) { /* restore the built-in gradient */
        if (i < n_registered) registry[i] = registry[--n_registered];
    } else if (i == MAX_REGISTERED) {
        st = tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "register_gradient: more than %d ops",
                             MAX_REGISTERED);
    } else {
        registry[i].op = op;
        registry[i].fn = fn;
        registry[i].user = user;
        if (i == n_registered) n_registered++;
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

tfc_status tfc_tensor_set_gradient(tfc_tensor *t, tfc_gradient_fn fn, void *user)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_gradient: tensor is NULL");
    t->node->user_grad = fn;
    t->node->user_grad_arg = user;
    return TFC_OK;
}

static int registered(const struct tfc_op *op, tfc_gradient_fn *fn, void **user)
{
    pthread_mutex_lock(&registry_lock);
    int found = 0;
    for (int i = 0; i < n_registered && !found; i++)
        if (registry[i].op == op) {
            *fn = registry[i].fn;
            *user = registry[i].user;
            found = 1;
        }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

/* ---- the backward pass ----------------------------------------------------------------- */

struct contribs { /* gradient contributions reaching one tensor */
    int n, cap;
    tfc_tensor **t;
};

static int add_contrib(struct contribs *c, tfc_tensor *t)
{
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 2;
        tfc_tensor **p = realloc(c->t, sizeof *p * (size_t)cap);
        if (!p) return -1;
        c->t = p;
        c->cap = cap;
    }
    c->t[c->n++] = t;
    return 0;
}

/* The sum of a tensor's contributions; NULL when there is none. */
static tfc_tensor *sum_contribs(tfc_graph *g, struct contribs *c)
{
    if (c->n == 0) return NULL;
    if (c->n == 1) return c->t[0];
    tfc_tensor *sum = NULL;
    for (int i = 0; i < c->n; i += TFC_MAX_OPERANDS - 1) { /* add_n takes at most 64 inputs */
        int k = c->n - i < TFC_MAX_OPERANDS - 1 ? c->n - i : TFC_MAX_OPERANDS - 1;
        tfc_tensor *part[TFC_MAX_OPERANDS];
        int m = 0;
        if (sum) part[m++] = sum;
        for (int j = 0; j < k; j++) part[m++] = c->t[i + j];
        sum = m == 1 ? part[0] : tfc_add_n(g, m, part);
    }
    return sum;
}

static tfc_status call_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                            tfc_tensor **dxs)
{
    tfc_gradient_fn fn = n->user_grad;
    void *user = n->user_grad_arg;
    if (fn || registered(n->op, &fn, &user)) {
        tfc_tensor *outs[TFC_MAX_OPERANDS];
        for (int k = 0; k < n->n_outputs; k++) outs[k] = &n->outputs[k];
        tfc_status st = fn(g, n->n_inputs, n->inputs, n->n_outputs, outs, dys, dxs, user);
        if (st && !g->status)
            tfc_graph_error(g, st, "gradient of node '%s' (%s): the user's function failed",
                            n->name, n->op->name);
        return st;
    }
    return n->op->grad(g, n, dys, dxs);
}

/* The ys and xs: non-NULL float tensors of g. Fails the graph otherwise. */
static tfc_status check_args(tfc_graph *g, int n_ys, tfc_tensor *const *ys, int n_xs,
                             tfc_tensor *const *xs, tfc_tensor **dxs)
{
    if (n_ys < 1 || n_xs < 1 || !ys || !xs || !dxs)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "gradients: needs ys, xs and dxs");
    for (int i = 0; i < n_ys + n_xs; i++) {
        tfc_tensor *t = i < n_ys ? ys[i] : xs[i - n_ys];
        if (!t || t->node->graph != g)
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT, "gradients: %s %d is %s",
                                   i < n_ys ? "y" : "x", i < n_ys ? i : i - n_ys,
                                   t ? "from another graph" : "NULL");
        if (!tfc_dtype_is_float(t->desc.dtype))
            return tfc_graph_error(g, TFC_ERR_DTYPE,
                                   "gradients: '%s' is %s; only float tensors have gradients",
                                   t->name, tfc_dtype_name(t->desc.dtype));
    }
    return TFC_OK;
}

/* One backward pass over the graph's first N nodes. */
struct backward {
    tfc_graph *g;
    int N;                 /* nodes added after the pass began are gradient nodes, not visited */
    int n_xs;
    tfc_tensor *const *xs;
    char *from_x, *to_y;   /* per node: it depends on an x; a y depends on it */
    struct contribs **acc; /* per node a y depends on, per output */
    unsigned long pass;    /* this pass, unique: what a gradient loop's gradient leaves for its
                            * forward loop's (graph/control_flow_grad.c) is matched by it */
};

/* The variables and constants that a cond or while node's regions read directly (they are
 * not its inputs, yet gradients reach them through it), in a new array (*k of them); NULL
 * when out of memory. */
static tfc_tensor **cflow_globals(const struct tfc_node *n, int *k)
{
    *k = tfc_cflow_globals(n, 0, NULL);
    tfc_tensor **globs = malloc(sizeof *globs * (size_t)(*k + 1));
    if (globs) *k = tfc_cflow_globals(n, *k, globs); /* *k was an upper bound */
    return globs;
}

/* Those of them among the xs, into wanted: their count, -2 when more than TFC_MAX_OPERANDS,
 * -1 when out of memory. */
static int cflow_wanted(const struct tfc_node *n, int n_xs, tfc_tensor *const *xs,
                        tfc_tensor **wanted)
{
    int k, nw = 0;
    tfc_tensor **globs = cflow_globals(n, &k);
    if (!globs) return -1;
    for (int i = 0; i < k && nw >= 0; i++)
        for (int j = 0; j < n_xs; j++) {
            if (globs[i] != xs[j]) continue;
            if (nw == TFC_MAX_OPERANDS) nw = -2;
            else wanted[nw++] = globs[i];
            break;
        }
    free(globs);
    return nw;
}

/* A cond or while node's gradient (graph/control_flow_grad.c): its inputs' and, for the xs
 * that its regions read directly, theirs. */
static int backprop_cflow(struct backward *b, struct tfc_node *n, tfc_tensor *const *dys,
                          tfc_tensor **dx)
{
    tfc_tensor *wanted[TFC_MAX_OPERANDS], *dg[TFC_MAX_OPERANDS];
    int nw = cflow_wanted(n, b->n_xs, b->xs, wanted);
    if (nw == -1) {
        tfc_graph_error(b->g, TFC_ERR_OUT_OF_MEMORY, "gradients: no memory");
        return -1;
    }
    if (nw < 0) {
        tfc_graph_error(b->g, TFC_ERR_INVALID_ARGUMENT,
                        "gradients: the regions of '%s' read more than %d of the xs (variables "
                        "or constants) directly (capture the others as tensors)", n->name,
                        TFC_MAX_OPERANDS);
        return -1;
    }
    memset(dg, 0, sizeof dg);
    if (tfc_cflow_grad(b->g, n, dys, dx, nw, wanted, dg, tfc_gradients, b->pass) ||
        b->g->status)
        return -1;
    for (int i = 0; i < nw; i++)
        if (dg[i] && b->acc[wanted[i]->node->id] &&
            add_contrib(&b->acc[wanted[i]->node->id][wanted[i]->index], dg[i]))
            return -1;
    return 0;
}

/* Marks the nodes between the xs and the ys, and gives those the ys depend on their
 * contribution lists. TFC_ERR_OUT_OF_MEMORY (the graph failed) or TFC_OK. */
static tfc_status backward_init(struct backward *b, int n_ys, tfc_tensor *const *ys, int n_xs,
                                tfc_tensor *const *xs)
{
    tfc_graph *g = b->g;
    int N = b->N;
    b->from_x = calloc((size_t)N, 1);
    b->to_y = calloc((size_t)N, 1);
    b->acc = calloc((size_t)N, sizeof *b->acc);
    int *stack = malloc(sizeof(int) * (size_t)(N + 1));
    char *from_x = b->from_x, *to_y = b->to_y;
    if (!from_x || !to_y || !b->acc || !stack) goto oom;
    /* nodes that depend on an x (creation order is topological for data edges) */
    for (int id = 0; id < N; id++) {
        struct tfc_node *n = g->nodes[id];
        for (int i = 0; i < n->n_inputs && !from_x[id]; i++) {
            tfc_tensor *t = n->inputs[i];
            for (int j = 0; j < n_xs && !from_x[id]; j++) from_x[id] = t == xs[j];
            from_x[id] |= from_x[t->node->id];
        }
        if (tfc_is_cflow(n) && !from_x[id]) { /* through a variable read inside */
            tfc_tensor *w[TFC_MAX_OPERANDS];
            from_x[id] = cflow_wanted(n, n_xs, xs, w) != 0; /* -1: its gradient says why */
        }
    }
    /* nodes the ys depend on */
    int top = 0;
    for (int i = 0; i < n_ys; i++)
        if (!to_y[ys[i]->node->id]) {
            to_y[ys[i]->node->id] = 1;
            stack[top++] = ys[i]->node->id;
        }
    while (top) {
        struct tfc_node *n = g->nodes[stack[--top]];
        int n_globs = 0;
        tfc_tensor **globs = tfc_is_cflow(n) ? cflow_globals(n, &n_globs) : NULL;
        if (tfc_is_cflow(n) && !globs) goto oom;
        for (int i = 0; i < n->n_inputs + n_globs; i++) {
            int m = (i < n->n_inputs ? n->inputs[i] : globs[i - n->n_inputs])->node->id;
            if (!to_y[m]) {
                to_y[m] = 1;
                stack[top++] = m;
            }
        }
        free(globs);
    }
    for (int id = 0; id < N; id++)
        if (to_y[id] && !(b->acc[id] = calloc((size_t)g->nodes[id]->n_outputs, sizeof **b->acc)))
            goto oom;
    free(stack);
    return TFC_OK;
oom:
    free(stack);
    return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "gradients: no memory");
}

static void backward_free(struct backward *b)
{
    for (int id = 0; b->acc && id < b->N; id++) {
        if (!b->acc[id]) continue;
        for (int k = 0; k < b->g->nodes[id]->n_outputs; k++) free(b->acc[id][k].t);
        free(b->acc[id]);
    }
    free(b->acc);
    free(b->from_x);
    free(b->to_y);
}

/* TF's colocate_gradients_with_ops, for ranks: the nodes built for the gradient of n (and the
 * sums of what reaches its outputs) take n's "rank:R" hint, so a graph split across ranks
 * trains without hinting its gradient. The device part stays the open scope's: a gradient op
 * may have no implementation for the forward op's device. Returns 1 when it pushed a scope
 * (colocate_end pops it), 0 when n names no rank, -1 when out of memory (the graph failed). */
static int colocate_begin(tfc_graph *g, const struct tfc_node *n)
{
    if (!n->device.has_rank) return 0;
    struct tfc_device_hint h = g->n_dev_scope ? g->dev_scope[g->n_dev_scope - 1]
                                              : (struct tfc_device_hint){TFC_DEVICE_ANY, -1, 0, 0, 0};
    h.has_rank = 1;
    h.rank = n->device.rank;
    if (g->n_dev_scope == g->cap_dev_scope) {
        int cap = g->cap_dev_scope ? g->cap_dev_scope * 2 : 4;
        struct tfc_device_hint *d = realloc(g->dev_scope, sizeof *d * (size_t)cap);
        if (!d) {
            tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "gradients: no memory");
            return -1;
        }
        g->dev_scope = d;
        g->cap_dev_scope = cap;
    }
    g->dev_scope[g->n_dev_scope++] = h;
    return 1;
}

static void colocate_end(tfc_graph *g, int pushed)
{
    if (pushed > 0) g->n_dev_scope--;
}

/* Sends the gradients reaching node id's outputs through its op's gradient (or a user's),
 * adding what reaches its float inputs to their contributions. -1 on failure: the graph's
 * status says why, else there was no memory. */
static int backprop_node_here(struct backward *b, int id);

static int backprop_node(struct backward *b, int id)
{
    tfc_graph *g = b->g;
    if (!b->to_y[id] || !b->from_x[id]) return 0;
    int pushed = colocate_begin(g, g->nodes[id]);
    int r = pushed < 0 ? -1 : backprop_node_here(b, id);
    colocate_end(g, pushed);
    return r;
}

/* backprop_node under the node's colocation scope. */
static int backprop_node_here(struct backward *b, int id)
{
    tfc_graph *g = b->g;
    struct tfc_node *n = g->nodes[id];
    tfc_tensor *dys[TFC_MAX_OPERANDS], *dx[TFC_MAX_OPERANDS];
    int any = 0;
    for (int k = 0; k < n->n_outputs; k++) {
        dys[k] = sum_contribs(g, &b->acc[id][k]);
        any |= dys[k] != NULL;
    }
    any |= tfc_is_cflow(n) && tfc_cflow_stack_grad_pending(n, b->pass); /* second order */
    if (!any) return 0;
    if (n->op->flags & TFC_OP_NO_GRADIENT) return 0;
    memset(dx, 0, sizeof(tfc_tensor *) * (size_t)n->n_inputs);
    if (tfc_is_cflow(n) && !n->user_grad) {
        if (backprop_cflow(b, n, dys, dx)) return -1;
    } else {
        tfc_gradient_fn fn;
        void *user;
        if (!n->op->grad && !n->user_grad && !registered(n->op, &fn, &user)) {
            tfc_graph_error(g, TFC_ERR_NOT_FOUND,
                            "gradients: op '%s' (node '%s') has no gradient, and it lies on "
                            "the path from the xs to the ys",
                            n->op->name, n->name);
            return -1;
        }
        if (call_grad(g, n, dys, dx) || g->status) return -1;
    }
    for (int i = 0; i < n->n_inputs; i++) {
        tfc_tensor *t = n->inputs[i];
        if (!dx[i] || !tfc_dtype_is_float(t->desc.dtype) || !b->acc[t->node->id]) continue;
        if (add_contrib(&b->acc[t->node->id][t->index], dx[i])) return -1;
    }
    return 0;
}

tfc_status tfc_gradients(tfc_graph *g, int n_ys, tfc_tensor *const *ys,
                         tfc_tensor *const *grad_ys, int n_xs, tfc_tensor *const *xs,
                         tfc_tensor **dxs)
{
    if (!g) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "gradients: graph is NULL");
    if (g->status) return g->status;
    if (check_args(g, n_ys, ys, n_xs, xs, dxs)) return g->status;
    static unsigned long passes; /* process-wide, so a pass number is never reused */
    struct backward b = {.g = g, .N = g->n_nodes, .n_xs = n_xs, .xs = xs,
                         .pass = __atomic_add_fetch(&passes, 1, __ATOMIC_RELAXED)};
    tfc_status st = backward_init(&b, n_ys, ys, n_xs, xs);
    if (st) {
        backward_free(&b);
        return st;
    }
    int failed = 0;
    for (int i = 0; i < n_ys && !failed; i++) {
        int pushed = colocate_begin(g, ys[i]->node);
        tfc_tensor *dy = grad_ys && grad_ys[i] ? grad_ys[i] : tfc_ones_like(g, ys[i]);
        colocate_end(g, pushed);
        failed = pushed < 0 || !dy || add_contrib(&b.acc[ys[i]->node->id][ys[i]->index], dy);
    }
    for (int id = b.N - 1; id >= 0 && !failed; id--) failed = backprop_node(&b, id);
    for (int j = 0; j < n_xs && !failed; j++) {
        tfc_tensor *x = xs[j];
        struct contribs *c = b.acc[x->node->id];
        int pushed = colocate_begin(g, x->node);
        tfc_tensor *d = c && pushed >= 0 ? sum_contribs(g, &c[x->index]) : NULL;
        if (!d && pushed >= 0) /* no path: zeros, without needing x's value when its shape is known */
            d = tfc_shape_numel(&x->desc.shape) >= 0 ? tfc_fill(g, x->desc.shape, x->desc.dtype, 0)
                                                     : tfc_zeros_like(g, x);
        colocate_end(g, pushed);
        failed = pushed < 0;
        dxs[j] = d;
    }
    if (failed || g->status) {
        st = g->status ? g->status : TFC_ERR_OUT_OF_MEMORY;
        for (int j = 0; j < n_xs; j++) dxs[j] = NULL;
    }
    backward_free(&b);
    return st;
}
