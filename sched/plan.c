/* plan.c: lowering. For one run key it prunes the graph to what the fetches and targets need
 * (fed tensors cut the graph), orders the nodes topologically (creation order where free:
 * operations on one variable follow node creation order), infers concrete shapes from the
 * feeds, and emits one task step per node with its access modes; StarPU's sequential
 * consistency then derives every dependency edge from those modes. Each step is placed from its
 * node's hint (sched/placement.c) and gets a priority from its critical-path rank
 * (sched/priority.c), both once per plan; then large matmul steps are split into tile steps
 * (sched/tiling.c). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "plan.h"
#include "passes.h"
#include "dist_place.h"
#include "../codelets/opencl_common.h"

struct builder {
    tfc_graph *g;
    const struct plan_options *opt;
    int n_feeds, n_fetches, n_targets;
    tfc_tensor *const *feeds;
    tfc_value *const *feed_values;
    tfc_tensor *const *fetches;
    tfc_tensor *const *targets;
    char *needed;      /* per node id */
    int **out_slots;   /* per node id: slot of each output as consumers see it */
    char *var_seen;    /* per node id: 1 once a variable was accessed in this plan */
    struct plan *p;
    int cap_slots, cap_steps, cap_checks, cap_writes;
    int last_warned;   /* node id of the last soft-fallback warning (one per node) */
    int n_alternated;  /* OpenCL-capable op steps seen by the alternate test hook */
    struct tfc_cse *cse; /* common-subexpression table (sched/passes.c), NULL when off */
    uint64_t mem_limit;  /* largest_memory_node(), once per plan (0: not asked yet) */
    tfc_status status;
    char *msg;
};

tfc_status tfc_sched_fail(tfc_status *status, char *msg, tfc_status st, const char *fmt, ...)
{
    if (status && *status) return st; /* the first failure is the one reported */
    va_list ap;
    va_start(ap, fmt);
    tfc_vfail(msg, st, fmt, ap);
    va_end(ap);
    if (status) *status = st;
    return st;
}

static tfc_status no_memory(struct builder *b)
{
    return tfc_sched_fail(&b->status, b->msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the plan");
}

static int feed_of(const struct builder *b, const tfc_tensor *t)
{
    for (int i = 0; i < b->n_feeds; i++)
        if (b->feeds[i] == t) return i;
    return -1;
}

static void *grow(void *arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return arr;
    int cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(arr, (size_t)cap2 * elem);
    if (p) *cap = cap2;
    return p;
}

/* The largest buffer any memory node could hold: this machine's RAM, or a device's memory
 * when that is larger. A tensor beyond it can never be allocated, and StarPU 1.3 retries a
 * failed allocation forever, so the plan refuses it. */
static uint64_t largest_memory_node(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t best = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    unsigned nodes = starpu_memory_nodes_get_count();
    for (unsigned i = 0; i < nodes; i++) {
        starpu_ssize_t total = starpu_memory_get_total(i);
        if (total > 0 && (uint64_t)total > best) best = (uint64_t)total;
    }
    return best;
}

/* Whether a tensor of this description can be a StarPU buffer: StarPU 1.3's data interfaces
 * count elements in 32 bits, and no memory node may be too small for it. */
static int slot_fits(struct builder *b, enum slot_kind kind, const struct tfc_desc *d, int ref,
                     int64_t numel)
{
    if (numel < 0) return 1; /* unknown after feeding: lower_node reports it */
    const char *name = kind == SLOT_FEED ? b->feeds[ref]->name : b->g->nodes[ref]->name;
    if (numel > (int64_t)UINT32_MAX) {
        tfc_sched_fail(&b->status, b->msg, TFC_ERR_INVALID_ARGUMENT,
                       "tensor '%s' has %lld elements: StarPU 1.3's data interfaces hold at "
                       "most %u elements per tensor",
                       name, (long long)numel, UINT32_MAX);
        return 0;
    }
    if (!b->mem_limit) b->mem_limit = largest_memory_node();
    uint64_t bytes = (uint64_t)numel * tfc_dtype_size(d->dtype), limit = b->mem_limit;
    if (bytes > limit) {
        tfc_sched_fail(&b->status, b->msg, TFC_ERR_OUT_OF_MEMORY,
                       "tensor '%s' needs %llu bytes, more than the %llu bytes of the largest "
                       "memory node (RAM or device)",
                       name, (unsigned long long)bytes, (unsigned long long)limit);
        return 0;
    }
    return 1;
}

static int add_slot(struct builder *b, enum slot_kind kind, const struct tfc_desc *d, int ref)
{
    struct plan *p = b->p;
    int64_t numel = tfc_shape_numel(&d->shape);
    if (!slot_fits(b, kind, d, ref, numel)) return -1;
    struct slot *s = grow(p->slots, &b->cap_slots, p->n_slots + 1, sizeof *s);
    if (!s) {
        no_memory(b);
        return -1;
    }
    p->slots = s;
    s[p->n_slots] = (struct slot){numel == 0 ? SLOT_EMPTY : kind, *d, numel, ref};
    return p->n_slots++;
}

static int push_int(struct builder *b, int **arr, int *n, int *cap, int v)
{
    int *a = grow(*arr, cap, *n + 1, sizeof(int));
    if (!a) return no_memory(b);
    *arr = a;
    a[(*n)++] = v;
    return 0;
}

/* Records a variable access in plan order, for the initialization checks. */
static int note_var_access(struct builder *b, int slot, enum starpu_data_access_mode mode)
{
    const struct slot *s = &b->p->slots[slot];
    if (s->kind != SLOT_PERSIST || b->g->nodes[s->ref]->op != &tfc_op_variable) return 0;
    if (b->var_seen[s->ref]) return 0;
    b->var_seen[s->ref] = 1;
    if (mode == STARPU_W)
        return push_int(b, &b->p->var_writes, &b->p->n_var_writes, &b->cap_writes, s->ref);
    return push_int(b, &b->p->var_checks, &b->p->n_var_checks, &b->cap_checks, s->ref);
}

/* ---- kernel arguments ------------------------------------------------------------------ */

static void kdesc_of(struct tfc_kdesc *k, const struct slot *s, int buf)
{
    memset(k, 0, sizeof *k);
    k->dtype = (int32_t)s->desc.dtype;
    k->rank = s->desc.shape.rank;
    for (int i = 0; i < k->rank; i++) k->dims[i] = s->desc.shape.dims[i];
    k->numel = s->numel;
    k->buf = buf;
}

/* Appends a step. Inputs are read (or use in_modes[i]; 0 = shape only, no buffer), outputs
 * written; a slot used twice shares one buffer with the union of the modes. */
static struct step *add_step(struct builder *b, struct starpu_codelet *cl, int node, int kind,
                             const struct tfc_kattr *attrs, int n_in, const int *in_slots,
                             const enum starpu_data_access_mode *in_modes, int n_out,
                             const int *out_slots)
{
    struct plan *p = b->p;
    struct step *steps = grow(p->steps, &b->cap_steps, p->n_steps + 1, sizeof *steps);
    if (!steps) {
        no_memory(b);
        return NULL;
    }
    p->steps = steps;
    struct step *st = &steps[p->n_steps];
    memset(st, 0, sizeof *st);
    int n = n_in + n_out;
    st->cl = cl;
    st->node = node;
    st->args_size = sizeof(struct tfc_kargs) + sizeof(struct tfc_kdesc) * (size_t)n;
    st->args = calloc(1, st->args_size);
    st->buf_slot = malloc(sizeof(int) * (size_t)(n ? n : 1));
    st->modes = malloc(sizeof *st->modes * (size_t)(n ? n : 1));
    if (!st->args || !st->buf_slot || !st->modes) {
        free(st->args); free(st->buf_slot); free(st->modes);
        no_memory(b);
        return NULL;
    }
    struct tfc_kargs *a = st->args;
    a->kind = kind;
    a->node = node;
    a->n_in = n_in;
    a->n_out = n_out;
    if (attrs) memcpy(a->attrs, attrs, sizeof a->attrs);
    for (int i = 0; i < n; i++) {
        int slot = i < n_in ? in_slots[i] : out_slots[i - n_in];
        enum starpu_data_access_mode mode = i >= n_in ? STARPU_W : in_modes ? in_modes[i] : STARPU_R;
        int buf = -1;
        if (p->slots[slot].kind != SLOT_EMPTY && mode != STARPU_NONE) {
            for (int j = 0; j < st->n_buf; j++)
                if (st->buf_slot[j] == slot) buf = j;
            if (buf < 0) {
                buf = st->n_buf++;
                st->buf_slot[buf] = slot;
                st->modes[buf] = mode;
            } else if (st->modes[buf] != mode) {
                st->modes[buf] = STARPU_RW;
            }
        }
        kdesc_of(&a->d[i], &p->slots[slot], buf);
    }
    for (int j = 0; j < st->n_buf; j++)
        if (note_var_access(b, st->buf_slot[j], st->modes[j])) return NULL;
    tfc_kargs_finish(a);
    p->n_steps++;
    return st;
}

/* Places a step of node n (sched/placement.c); hook is a test hook's worker mask (0: none). */
static int place(struct builder *b, struct step *st, const struct tfc_node *n, uint32_t hook)
{
    char msg[TFC_MSG_LEN];
    if (n->device.has_rank && b->opt && n->device.rank != b->opt->mp_rank)
        return 0; /* another rank runs it (sched/dist_place.c), on its own workers */
    tfc_status status = tfc_placement_resolve(st, n, hook, msg);
    if (status) return tfc_sched_fail(&b->status, b->msg, status, "%s", msg);
    if (st->soft_fallback) {
        b->p->n_soft_fallbacks++;
        if (b->last_warned != n->id) tfc_placement_warn(b->p, msg);
        b->last_warned = n->id;
    }
    return 0;
}

/* Test hook (sched/testing.h): with an accelerator where mask (STARPU_OPENCL, STARPU_CUDA),
 * alternate the op steps it can run between it and the CPU. Set once by a test program before
 * it builds plans. */
static int g_where_alternate;

void tfc_testing_set_where_alternate(int on)
{
    g_where_alternate = on;
}

/* The where hook of an op step. Pinned to OpenCL, a step whose codelet has no OpenCL
 * implementation for its kind and dtypes stays unpinned (StarPU picks the CPU codelet); every
 * codelet has a CUDA implementation. */
static uint32_t op_hook(struct builder *b, const struct step *st)
{
    uint32_t w = b->opt ? b->opt->where : 0;
    if (w != STARPU_OPENCL && w != STARPU_CUDA) return w;
    if (w == STARPU_OPENCL && !tfc_opencl_supports(st->cl, st->args)) return 0;
    if (g_where_alternate && (b->n_alternated++ & 1)) return STARPU_CPU;
    return w;
}

/* ---- pruning and ordering -------------------------------------------------------------- */

static int mark_needed(struct builder *b)
{
    tfc_graph *g = b->g;
    int *stack = malloc(sizeof(int) * (size_t)(g->n_nodes + 1)), top = 0;
    if (!stack) return no_memory(b);
    for (int i = 0; i < b->n_fetches + b->n_targets; i++) {
        tfc_tensor *t = i < b->n_fetches ? b->fetches[i] : b->targets[i - b->n_fetches];
        if (i < b->n_fetches && feed_of(b, t) >= 0) continue; /* a fed fetch needs nothing */
        if (!b->needed[t->node->id]) {
            b->needed[t->node->id] = 1;
            stack[top++] = t->node->id;
        }
    }
    while (top) {
        struct tfc_node *n = g->nodes[stack[--top]];
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++) {
            struct tfc_node *m;
            if (i < n->n_inputs) {
                if (feed_of(b, n->inputs[i]) >= 0) continue;
                m = n->inputs[i]->node;
            } else {
                m = n->ctrl[i - n->n_inputs];
            }
            if (!b->needed[m->id]) {
                b->needed[m->id] = 1;
                stack[top++] = m->id; /* each node is pushed once: the stack never overflows */
            }
        }
    }
    free(stack);
    return 0;
}

/* Input or control dependency i of n when it is an edge of the plan (a needed node, not reached
 * through a fed tensor); else NULL. */
static const struct tfc_node *needed_pred(const struct builder *b, const struct tfc_node *n,
                                          int i)
{
    const struct tfc_node *m = i < n->n_inputs ? n->inputs[i]->node : n->ctrl[i - n->n_inputs];
    if (i < n->n_inputs && feed_of(b, n->inputs[i]) >= 0) return NULL;
    return b->needed[m->id] ? m : NULL;
}

/* The edges pred -> succ among needed nodes, as CSR. */
struct edges {
    int *indeg; /* per node id: predecessors not ordered yet */
    int *start; /* per node id, and one more: where its successors start in succ */
    int *succ;  /* successor node ids, grouped by predecessor */
};

static void edges_free(struct edges *e)
{
    free(e->indeg);
    free(e->start);
    free(e->succ);
}

/* Fills e; *n_needed counts the needed nodes. -1 when out of memory. */
static int build_edges(const struct builder *b, struct edges *e, int *n_needed)
{
    const tfc_graph *g = b->g;
    int N = g->n_nodes;
    e->indeg = calloc((size_t)N, sizeof(int));
    e->start = calloc((size_t)N + 1, sizeof(int));
    if (!e->indeg || !e->start) return -1;
    for (int id = 0; id < N; id++) {
        if (!b->needed[id]) continue;
        (*n_needed)++;
        const struct tfc_node *n = g->nodes[id], *m;
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++)
            if ((m = needed_pred(b, n, i))) {
                e->start[m->id + 1]++;
                e->indeg[id]++;
            }
    }
    for (int i = 0; i < N; i++) e->start[i + 1] += e->start[i];
    e->succ = malloc(sizeof(int) * (size_t)(e->start[N] + 1));
    int *fill = calloc((size_t)N, sizeof(int));
    if (!e->succ || !fill) {
        free(fill);
        return -1;
    }
    for (int id = 0; id < N; id++) {
        if (!b->needed[id]) continue;
        const struct tfc_node *n = g->nodes[id], *m;
        for (int i = 0; i < n->n_inputs + n->n_ctrl; i++)
            if ((m = needed_pred(b, n, i))) e->succ[e->start[m->id] + fill[m->id]++] = id;
    }
    free(fill);
    return 0;
}

/* A binary min-heap of ready node ids. */
static int heap_pop(int *heap, int *hn)
{
    int top = heap[0];
    heap[0] = heap[--*hn];
    for (int i = 0;;) { /* sift down */
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *hn && heap[l] < heap[m]) m = l;
        if (r < *hn && heap[r] < heap[m]) m = r;
        if (m == i) break;
        int t = heap[i]; heap[i] = heap[m]; heap[m] = t;
        i = m;
    }
    return top;
}

static void heap_push(int *heap, int *hn, int id)
{
    int i = (*hn)++;
    heap[i] = id;
    while (i && heap[(i - 1) / 2] > heap[i]) { /* sift up */
        int t = heap[i]; heap[i] = heap[(i - 1) / 2]; heap[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

/* Nodes left over still wait for an input: the graph has a cycle through the first of them. */
static void report_cycle(struct builder *b, const int *indeg)
{
    tfc_graph *g = b->g;
    int culprit = -1;
    for (int id = 0; id < g->n_nodes && culprit < 0; id++)
        if (b->needed[id] && indeg[id]) culprit = id;
    if (TFC_CHECK(culprit >= 0, tfc_sched_fail, &b->status, b->msg) == TFC_OK)
        tfc_sched_fail(&b->status, b->msg, TFC_ERR_CYCLE,
                       "the graph has a cycle through node '%s' (%s)",
                       g->nodes[culprit]->name, g->nodes[culprit]->op->name);
}

/* Kahn's algorithm with a min-heap on node id: creation order wherever the edges allow. */
static int topo_order(struct builder *b, int **order_out, int *n_out)
{
    int N = b->g->n_nodes, n_needed = 0;
    struct edges e = {0};
    int *heap = malloc(sizeof(int) * (size_t)(N + 1)), *order = malloc(sizeof(int) * (size_t)(N + 1));
    int ok = heap && order && !build_edges(b, &e, &n_needed), hn = 0, n = 0;
    if (!ok) no_memory(b);
    for (int id = 0; ok && id < N; id++)
        if (b->needed[id] && !e.indeg[id]) heap[hn++] = id; /* ascending: already a heap */
    while (ok && hn) {
        int id = heap_pop(heap, &hn);
        order[n++] = id;
        for (int k = e.start[id]; k < e.start[id + 1]; k++)
            if (!--e.indeg[e.succ[k]]) heap_push(heap, &hn, e.succ[k]);
    }
    if (ok && n < n_needed) {
        report_cycle(b, e.indeg);
        ok = 0;
    }
    edges_free(&e);
    free(heap);
    if (!ok) {
        free(order);
        return -1;
    }
    *order_out = order;
    *n_out = n;
    return 0;
}

/* ---- lowering one node ----------------------------------------------------------------- */

static int consumer_slot(struct builder *b, const tfc_tensor *t)
{
    int f = feed_of(b, t);
    return f >= 0 ? f : b->out_slots[t->node->id][t->index];
}

static int lower_source(struct builder *b, struct tfc_node *n)
{
    if (n->op == &tfc_op_placeholder)
        return tfc_sched_fail(&b->status, b->msg, TFC_ERR_MISSING_FEED,
                              "placeholder '%s' is needed but not fed", n->name);
    int s = add_slot(b, SLOT_PERSIST, &n->outputs[0].desc, n->id);
    if (s < 0) return -1;
    b->out_slots[n->id][0] = s;
    return 0;
}

static int lower_node(struct builder *b, struct tfc_node *n)
{
    struct tfc_desc in[TFC_MAX_OPERANDS], out[TFC_MAX_OPERANDS];
    int in_slots[TFC_MAX_OPERANDS], out_slot_ids[TFC_MAX_OPERANDS];
    for (int i = 0; i < n->n_inputs; i++) {
        in_slots[i] = consumer_slot(b, n->inputs[i]);
        in[i] = b->p->slots[in_slots[i]].desc;
    }
    int same = b->cse ? tfc_cse_lookup(b->cse, b->p, n, in_slots) : -1;
    if (same >= 0) { /* an earlier node computes the same values: its outputs stand for n's */
        memcpy(b->out_slots[n->id], b->out_slots[same], sizeof(int) * (size_t)n->n_outputs);
        return 0;
    }
    char msg[TFC_MSG_LEN] = "";
    struct tfc_infer inf = {n->n_inputs, in, n->attrs, n->n_outputs, out, msg};
    memset(out, 0, sizeof(struct tfc_desc) * (size_t)n->n_outputs);
    tfc_status st = n->op->infer(&inf);
    if (st)
        return tfc_sched_fail(&b->status, b->msg, st, "node '%s' (%s) with the fed shapes: %s",
                              n->name, n->op->name, msg);
    if (tfc_sum_is_identity(b->p, n, in_slots[0], in, out)) { /* its input stands for it */
        b->out_slots[n->id][0] = in_slots[0];
        return 0;
    }
    enum starpu_data_access_mode modes[TFC_MAX_OPERANDS];
    for (int i = 0; i < n->n_inputs; i++) /* bit 31 stands for every later input too */
        modes[i] = (n->op->shape_inputs >> (i < 31 ? i : 31)) & 1 ? STARPU_NONE : STARPU_R;
    for (int i = 0; i < n->op->n_state; i++) {
        if (b->p->slots[in_slots[i]].kind == SLOT_FEED)
            return tfc_sched_fail(&b->status, b->msg, TFC_ERR_INVALID_ARGUMENT,
                                  "variable '%s' is fed, but node '%s' updates it",
                                  n->inputs[i]->name, n->name);
        modes[i] = i == 0 && n->op->var_access == TFC_VAR_WRITE ? STARPU_W : STARPU_RW;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        if (k == 0 && n->op->n_state) {
            out_slot_ids[0] = in_slots[0]; /* the output is the variable's new value */
            continue;
        }
        if (tfc_shape_numel(&out[k].shape) < 0)
            return tfc_sched_fail(&b->status, b->msg, TFC_ERR_SHAPE,
                                  "node '%s' (%s): output shape unknown after feeding", n->name,
                                  n->op->name);
        if ((out_slot_ids[k] = add_slot(b, SLOT_TEMP, &out[k], n->id)) < 0) return -1;
    }
    int any = 0;
    for (int k = 0; k < n->n_outputs; k++)
        any |= b->p->slots[out_slot_ids[k]].kind != SLOT_EMPTY;
    if (any) {
        struct step *st = add_step(b, n->op->codelet, n->id, n->op->kind, n->attrs, n->n_inputs,
                                   in_slots, modes, n->n_outputs, out_slot_ids);
        int folded = st ? tfc_fold_last_step(b->p, b->g, b->opt) : 0; /* constant inputs */
        if (folded < 0) return no_memory(b);
        if (!st || (!folded && place(b, st, n, op_hook(b, st)))) return -1;
    }
    for (int k = 0; k < n->n_outputs; k++) {
        int s = out_slot_ids[k];
        if (b->opt && b->opt->hop && b->p->slots[s].kind == SLOT_TEMP && !(k == 0 && n->op->n_state)) {
            struct tfc_desc d = b->p->slots[s].desc; /* add_slot may move the slots */
            int h = add_slot(b, SLOT_TEMP, &d, n->id);
            if (h < 0) return -1;
            struct step *hs = add_step(b, &tfc_cl_hop, n->id, TFC_K_COPY, NULL, 1, &s, NULL, 1, &h);
            if (!hs || place(b, hs, n, b->opt->hop_where)) return -1;
            s = h;
        }
        b->out_slots[n->id][k] = s;
    }
    return 0;
}

/* Lowers node n; a max pool whose twin with indices the plan needs (tfc_cse_pool_twin) takes
 * the twin's output 0 instead, the twin lowered first when it is not yet. */
static int lower_node_or_twin(struct builder *b, struct tfc_node *n)
{
    int tw = b->cse ? tfc_cse_pool_twin(b->cse, n) : -1;
    if (tw < 0) return lower_node(b, n);
    struct tfc_node *m = b->g->nodes[tw];
    if (!b->out_slots[tw]) {
        if (!(b->out_slots[tw] = malloc(sizeof(int) * (size_t)m->n_outputs))) return no_memory(b);
        if (lower_node(b, m)) return -1;
    }
    b->out_slots[n->id][0] = b->out_slots[tw][0];
    return 0;
}

/* A fetched variable value is copied at its place in the order, so later updates in the same
 * run do not show through (the fetch reads the value the graph position says). */
static int snapshot_fetches(struct builder *b, struct tfc_node *n, int *fetch_slot)
{
    for (int j = 0; j < b->n_fetches; j++) {
        tfc_tensor *t = b->fetches[j];
        if (t->node != n || feed_of(b, t) >= 0) continue;
        int s = b->out_slots[n->id][t->index];
        const struct slot *sl = &b->p->slots[s];
        if (sl->kind != SLOT_PERSIST || b->g->nodes[sl->ref]->op != &tfc_op_variable) continue;
        struct tfc_desc d = sl->desc; /* add_slot may move the slots */
        int c = add_slot(b, SLOT_TEMP, &d, n->id);
        if (c < 0) return -1;
        struct step *st = add_step(b, &tfc_cl_elementwise, n->id, TFC_K_IDENTITY, NULL, 1, &s,
                                   NULL, 1, &c);
        if (!st || place(b, st, n, 0)) return -1;
        fetch_slot[j] = c;
    }
    return 0;
}

/* ---- the plan -------------------------------------------------------------------------- */

uint64_t tfc_plan_key_hash(int n_feeds, tfc_tensor *const *feeds, tfc_value *const *feed_values,
                           int n_fetches, tfc_tensor *const *fetches, int n_targets,
                           tfc_tensor *const *targets)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    MIX(n_feeds); MIX(n_fetches); MIX(n_targets);
    for (int i = 0; i < n_feeds; i++) {
        tfc_shape s = tfc_value_shape(feed_values[i]);
        MIX((uintptr_t)feeds[i]);
        MIX(s.rank);
        for (int d = 0; d < s.rank; d++) MIX(s.dims[d]);
    }
    for (int i = 0; i < n_fetches; i++) MIX((uintptr_t)fetches[i]);
    for (int i = 0; i < n_targets; i++) MIX((uintptr_t)targets[i]);
#undef MIX
    return h;
}

int tfc_plan_key_equal(const struct plan *p, uint64_t hash, uint64_t version, int n_feeds,
                       tfc_tensor *const *feeds, tfc_value *const *feed_values, int n_fetches,
                       tfc_tensor *const *fetches, int n_targets, tfc_tensor *const *targets)
{
    if (p->hash != hash || p->graph_version != version || p->n_feeds != n_feeds ||
        p->n_fetches != n_fetches || p->n_targets != n_targets)
        return 0;
    for (int i = 0; i < n_feeds; i++) {
        tfc_shape s = tfc_value_shape(feed_values[i]);
        if (p->feeds[i] != feeds[i] || !tfc_shape_equal(&p->feed_shapes[i], &s)) return 0;
    }
    for (int i = 0; i < n_fetches; i++)
        if (p->fetches[i] != fetches[i]) return 0;
    for (int i = 0; i < n_targets; i++)
        if (p->targets[i] != targets[i]) return 0;
    return 1;
}

void tfc_plan_free(struct plan *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_steps; i++) {
        free(p->steps[i].args);
        free(p->steps[i].buf_slot);
        free(p->steps[i].modes);
        free(p->steps[i].workerids);
        free(p->steps[i].buf_part);
        free(p->steps[i].buf_child);
    }
    free(p->parts);
    tfc_mp_free(p->mp);
    tfc_fold_release(p);
    free(p->warning);
    free(p->steps);
    free(p->slots);
    free(p->fetch_slot);
    free(p->fetch_in_place);
    free(p->var_checks);
    free(p->var_writes);
    free(p->feeds);
    free(p->fetches);
    free(p->targets);
    free(p->feed_shapes);
    free(p);
}

static int copy_key(struct plan *p, int n_feeds, tfc_tensor *const *feeds,
                    tfc_value *const *feed_values, int n_fetches, tfc_tensor *const *fetches,
                    int n_targets, tfc_tensor *const *targets)
{
    p->n_feeds = n_feeds;
    p->n_fetches = n_fetches;
    p->n_targets = n_targets;
    p->feeds = malloc(sizeof(tfc_tensor *) * (size_t)(n_feeds + 1));
    p->feed_shapes = malloc(sizeof(tfc_shape) * (size_t)(n_feeds + 1));
    p->fetches = malloc(sizeof(tfc_tensor *) * (size_t)(n_fetches + 1));
    p->targets = malloc(sizeof(tfc_tensor *) * (size_t)(n_targets + 1));
    p->fetch_slot = malloc(sizeof(int) * (size_t)(n_fetches + 1));
    if (!p->feeds || !p->feed_shapes || !p->fetches || !p->targets || !p->fetch_slot) return -1;
    for (int i = 0; i < n_feeds; i++) {
        p->feeds[i] = feeds[i];
        p->feed_shapes[i] = tfc_value_shape(feed_values[i]);
    }
    for (int i = 0; i < n_fetches; i++) {
        p->fetches[i] = fetches[i];
        p->fetch_slot[i] = -1;
    }
    for (int i = 0; i < n_targets; i++) p->targets[i] = targets[i];
    return 0;
}

struct plan *tfc_plan_build(tfc_graph *g, int n_feeds, tfc_tensor *const *feeds,
                            tfc_value *const *feed_values, int n_fetches,
                            tfc_tensor *const *fetches, int n_targets,
                            tfc_tensor *const *targets, const struct plan_options *opt,
                            tfc_status *status, char *msg)
{
    struct builder b = {.g = g, .opt = opt, .n_feeds = n_feeds, .n_fetches = n_fetches,
                        .n_targets = n_targets, .feeds = feeds, .feed_values = feed_values,
                        .fetches = fetches, .targets = targets, .last_warned = -1, .msg = msg};
    int N = g->n_nodes, *order = NULL, n_order = 0;
    b.p = calloc(1, sizeof *b.p);
    b.needed = calloc((size_t)N + 1, 1);
    b.var_seen = calloc((size_t)N + 1, 1);
    b.out_slots = calloc((size_t)N + 1, sizeof(int *));
    if (!b.p || !b.needed || !b.var_seen || !b.out_slots ||
        copy_key(b.p, n_feeds, feeds, feed_values, n_fetches, fetches, n_targets, targets)) {
        no_memory(&b);
        goto done;
    }
    b.p->graph_version = g->version;
    b.p->hash = tfc_plan_key_hash(n_feeds, feeds, feed_values, n_fetches, fetches, n_targets,
                                  targets);
    /* feed slots first: slot i is feed i */
    for (int i = 0; i < n_feeds; i++) {
        struct tfc_desc d = {tfc_value_dtype(feed_values[i]), tfc_value_shape(feed_values[i])};
        if (add_slot(&b, SLOT_FEED, &d, i) < 0) goto done;
    }
    if (mark_needed(&b) || topo_order(&b, &order, &n_order)) goto done;
    if (opt && opt->cse && !(b.cse = tfc_cse_create(g, b.needed))) {
        no_memory(&b);
        goto done;
    }
    for (int k = 0; k < n_order; k++) {
        struct tfc_node *n = g->nodes[order[k]];
        if (b.out_slots[n->id]) continue; /* lowered early: a max pool's twin */
        b.out_slots[n->id] = malloc(sizeof(int) * (size_t)n->n_outputs);
        if (!b.out_slots[n->id]) {
            no_memory(&b);
            goto done;
        }
        int r = (n->op->flags & TFC_OP_SOURCE) ? lower_source(&b, n) : lower_node_or_twin(&b, n);
        if (r || snapshot_fetches(&b, n, b.p->fetch_slot)) goto done;
    }
    for (int j = 0; j < n_fetches; j++) {
        if (b.p->fetch_slot[j] >= 0) continue;
        b.p->fetch_slot[j] = consumer_slot(&b, fetches[j]);
        if (note_var_access(&b, b.p->fetch_slot[j], STARPU_R)) goto done;
    }
    if (tfc_fuse_steps(b.p, g, opt)) { /* after CSE and folding */
        no_memory(&b);
        goto done;
    }
    tfc_pool_first(b.p, opt);
    tfc_fold_register(b.p);
    /* tiling after fusion: it expects one matmul step per node */
    if (tfc_plan_priorities(b.p, opt) || tfc_plan_tile(b.p, opt))
        no_memory(&b);
    else
        tfc_plan_mark_sinks(b.p);
done:
    tfc_cse_free(b.cse);
    free(order);
    for (int i = 0; b.out_slots && i < N; i++) free(b.out_slots[i]);
    free(b.out_slots);
    free(b.needed);
    free(b.var_seen);
    if (b.status) {
        tfc_plan_free(b.p);
        *status = b.status;
        return NULL;
    }
    *status = TFC_OK;
    return b.p;
}
