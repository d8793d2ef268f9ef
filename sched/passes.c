/* passes.c: plan-time graph passes, in pipeline order. While plan.c lowers nodes, common
 * subexpression elimination lets a node that repeats an earlier one (same op, attributes,
 * input slots and placement hint, no state) reuse its outputs, and constant folding runs a
 * step whose inputs are all constants once, now, with its CPU kernel on host buffers, keeping
 * the result as a read-only slot of the plan. After lowering, fusion turns each chain or tree
 * of element-wise steps into one task of the fused codelet (codelets/fused.h). The knobs are
 * TFC_CSE, TFC_CONST_FOLD, TFC_FUSION and tfc_session_set_passes, which the session reads and
 * hands to each pass in its plan options (sched/session.c). */
#include <stdlib.h>
#include <string.h>
#include "passes.h"
#include "../codelets/fused.h"
#include "../codelets/op_attrs.h"
#include "../graph/pool.h"

/* The test hooks of sched/testing.h (hop copies, a where mask for every op task) exist to run
 * each op's own codelet on a chosen device and across memory nodes; folding and fusion would
 * replace those tasks, so both are off while a hook is on. */
static int hooks_on(const struct plan_options *opt)
{
    return opt->hop || opt->where;
}

static int same_hint(const struct tfc_device_hint *a, const struct tfc_device_hint *b)
{
    /* the rank too: merging or fusing nodes of two ranks would run both on one of them */
    return a->kind == b->kind && a->index == b->index && a->hard == b->hard &&
           a->has_rank == b->has_rank && (!a->has_rank || a->rank == b->rank);
}

/* ---- common subexpression elimination --------------------------------------------------- */

struct tfc_cse {
    tfc_graph *g;
    const char *needed; /* per node id: in the plan (the builder's) */
    char *written;    /* per node id: a variable that a stateful node of the plan updates */
    int cap;          /* table size, a power of two */
    int *table;       /* node ids, -1 when empty */
    uint64_t *hash;   /* per node id */
    int *slot_off;    /* per node id: its input slots in pool */
    int *pool, n_pool, cap_pool;
};

/* The variable behind a tensor: a stateful op's output 0 is its variable's new value. */
static int var_of(const tfc_tensor *t)
{
    while (t->node->op->n_state > 0 && t->index == 0) t = t->node->inputs[0];
    return t->node->id;
}

struct tfc_cse *tfc_cse_create(tfc_graph *g, const char *needed)
{
    int N = g->n_nodes, cap = 16;
    while (cap < 2 * N) cap *= 2;
    struct tfc_cse *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->g = g;
    c->needed = needed;
    c->cap = cap;
    c->written = calloc((size_t)N + 1, 1);
    c->table = malloc(sizeof(int) * (size_t)cap);
    c->hash = calloc((size_t)N + 1, sizeof(uint64_t));
    c->slot_off = calloc((size_t)N + 1, sizeof(int));
    if (!c->written || !c->table || !c->hash || !c->slot_off) {
        tfc_cse_free(c);
        return NULL;
    }
    for (int i = 0; i < cap; i++) c->table[i] = -1;
    for (int id = 0; id < N; id++) {
        const struct tfc_node *n = g->nodes[id];
        if (!needed[id]) continue;
        for (int i = 0; i < n->op->n_state && i < n->n_inputs; i++)
            c->written[var_of(n->inputs[i])] = 1;
    }
    return c;
}

void tfc_cse_free(struct tfc_cse *c)
{
    if (!c) return;
    free(c->written);
    free(c->table);
    free(c->hash);
    free(c->slot_off);
    free(c->pool);
    free(c);
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    return (h ^ x) * 1099511628211ull;
}

static int cse_equal(const struct tfc_cse *c, const struct tfc_node *m, const struct tfc_node *n,
                     const int *in_slots)
{
    if (m->op != n->op || m->n_inputs != n->n_inputs || !same_hint(&m->device, &n->device) ||
        memcmp(m->attrs, n->attrs, sizeof m->attrs) != 0) /* builders zero them first */
        return 0;
    /* no inputs: nothing to compare (and the pool may still be empty, NULL) */
    return !n->n_inputs ||
           memcmp(c->pool + c->slot_off[m->id], in_slots, sizeof(int) * (size_t)n->n_inputs) == 0;
}

int tfc_cse_lookup(struct tfc_cse *c, const struct plan *p, const struct tfc_node *n,
                   const int *in_slots)
{
    const struct tfc_op *op = n->op;
    /* stateful ops, ops with control inputs and sources are never merged; no op reads a
     * random state, so equal inputs and attributes give equal outputs */
    if ((op->flags & TFC_OP_SOURCE) || !op->codelet || op->n_state || n->n_ctrl) return -1;
    for (int i = 0; i < n->n_inputs; i++) {
        const struct slot *s = &p->slots[in_slots[i]];
        if (s->kind == SLOT_PERSIST && c->written[s->ref]) return -1; /* value depends on when */
    }
    uint64_t h = mix(1469598103934665603ull, (uintptr_t)op);
    h = mix(h, (uint64_t)n->n_inputs);
    for (int i = 0; i < n->n_inputs; i++) h = mix(h, (uint64_t)in_slots[i]);
    const unsigned char *ab = (const unsigned char *)n->attrs;
    for (size_t i = 0; i < sizeof n->attrs; i++) h = mix(h, ab[i]);
    h = mix(h, (uint64_t)(n->device.kind * 31 + n->device.index * 7 + n->device.hard));
    unsigned mask = (unsigned)c->cap - 1, at = (unsigned)h & mask;
    for (; c->table[at] >= 0; at = (at + 1) & mask) {
        const struct tfc_node *m = c->g->nodes[c->table[at]];
        if (c->hash[m->id] == h && cse_equal(c, m, n, in_slots)) return m->id;
    }
    /* record n (each node once: the table never fills past half) */
    if (c->n_pool + n->n_inputs > c->cap_pool) {
        int cap = c->cap_pool ? c->cap_pool : 64;
        while (cap < c->n_pool + n->n_inputs) cap *= 2;
        int *pool = realloc(c->pool, sizeof(int) * (size_t)cap);
        if (!pool) return -1; /* no memory: just no elimination */
        c->pool = pool;
        c->cap_pool = cap;
    }
    if (n->n_inputs) memcpy(c->pool + c->n_pool, in_slots, sizeof(int) * (size_t)n->n_inputs);
    c->slot_off[n->id] = c->n_pool;
    c->n_pool += n->n_inputs;
    c->hash[n->id] = h;
    c->table[at] = n->id;
    return -1;
}

/* The gradient of a max pool built without indices recomputes it with them (graph/grad_pool.c):
 * two passes over one input, the second writing the same maxima again beside the argmax (the
 * CNN's two pools: 8 ms of a 160 ms step's CPU time). */
int tfc_cse_pool_twin(const struct tfc_cse *c, const struct tfc_node *n)
{
    if (n->op != &tfc_op_max_pool || n->n_outputs != 1 || n->n_ctrl) return -1;
    for (int id = 0; id < c->g->n_nodes; id++) {
        const struct tfc_node *m = c->g->nodes[id];
        if (!c->needed[id] || m->op != &tfc_op_max_pool || m->n_outputs != 2 || m->n_ctrl ||
            m->inputs[0] != n->inputs[0] || !same_hint(&m->device, &n->device))
            continue;
        struct tfc_kattr a[TFC_MAX_ATTRS];
        memcpy(a, m->attrs, sizeof a);
        a[POOL_WITH_INDICES] = n->attrs[POOL_WITH_INDICES];
        if (memcmp(a, n->attrs, sizeof a) == 0) return id; /* builders zero them first */
    }
    return -1;
}

/* ---- sums that reduce nothing ----------------------------------------------------------- */

int tfc_sum_is_identity(const struct plan *p, const struct tfc_node *n, int in_slot,
                        const struct tfc_desc *in, const struct tfc_desc *out)
{
    return n->op->kind == TFC_K_SUM_TO && n->n_outputs == 1 &&
           p->slots[in_slot].kind == SLOT_TEMP && in[0].dtype == out[0].dtype &&
           tfc_shape_equal(&in[0].shape, &out[0].shape);
}

/* ---- constant folding -------------------------------------------------------------------- */

#define FOLD_MAX_BYTES (64u << 20) /* a folded value lives as long as its plan */

static void free_step(struct step *st)
{
    free(st->args);
    free(st->buf_slot);
    free(st->modes);
    free(st->workerids);
    memset(st, 0, sizeof *st);
}

/* Whether step st can run now: no state, no control inputs, no hard placement, a CPU kernel,
 * reading only constants and writing only temporaries of at most FOLD_MAX_BYTES in all. */
static int foldable(const struct plan *p, const tfc_graph *g, const struct step *st)
{
    const struct tfc_node *n = g->nodes[st->node];
    /* a hard placement hint asks for a task on a device: keep it, and its checks; a soft one
     * only prefers a device for a task, and a value folded at plan time needs none (a graph
     * built under a soft "cuda" scope folds its constant subgraphs as an unhinted one does) */
    if (n->op->n_state || n->n_ctrl || (n->device.kind != TFC_DEVICE_ANY && n->device.hard) ||
        !st->cl->cpu_funcs[0])
        return 0;
    size_t out_bytes = 0;
    for (int j = 0; j < st->n_buf; j++) {
        const struct slot *s = &p->slots[st->buf_slot[j]];
        if (st->modes[j] == STARPU_W) {
            if (s->kind != SLOT_TEMP) return 0;
            out_bytes += (size_t)s->numel * tfc_dtype_size(s->desc.dtype);
        } else if (st->modes[j] != STARPU_R ||
                   !(s->kind == SLOT_CONST ||
                     (s->kind == SLOT_PERSIST && g->nodes[s->ref]->op == &tfc_op_constant))) {
            return 0;
        }
    }
    return out_bytes <= FOLD_MAX_BYTES;
}

/* Points the kernel's vector interfaces at host memory: a read at its constant's data, a write
 * at a new buffer. 0 when a buffer cannot be allocated (those that were are in ifs[j].ptr). */
static int host_buffers(const struct plan *p, const tfc_graph *g, const struct step *st,
                        struct starpu_vector_interface *ifs, void **buffers)
{
    int ok = 1;
    for (int j = 0; ok && j < st->n_buf; j++) {
        const struct slot *s = &p->slots[st->buf_slot[j]];
        void *ptr = NULL;
        if (st->modes[j] == STARPU_W) {
            if (starpu_malloc(&ptr, (size_t)s->numel * tfc_dtype_size(s->desc.dtype))) ptr = NULL;
            ok = ptr != NULL;
        } else {
            ptr = s->kind == SLOT_CONST ? s->cdata
                                        : (void *)tfc_value_cdata(g->nodes[s->ref]->value);
        }
        ifs[j].id = STARPU_VECTOR_INTERFACE_ID;
        ifs[j].ptr = (uintptr_t)ptr;
        ifs[j].nx = (uint32_t)s->numel;
        ifs[j].elemsize = tfc_dtype_size(s->desc.dtype);
        ifs[j].allocsize = (size_t)s->numel * ifs[j].elemsize;
        buffers[j] = &ifs[j];
    }
    return ok;
}

/* The written buffers become the plan's constant slots when folded, else are freed. */
static void settle_outputs(struct plan *p, const struct step *st,
                           const struct starpu_vector_interface *ifs, int folded)
{
    for (int j = 0; j < st->n_buf; j++) {
        if (st->modes[j] != STARPU_W || !ifs[j].ptr) continue;
        struct slot *s = &p->slots[st->buf_slot[j]];
        if (folded) {
            s->kind = SLOT_CONST;
            s->cdata = (void *)ifs[j].ptr;
        } else {
            starpu_free((void *)ifs[j].ptr);
        }
    }
}

int tfc_fold_last_step(struct plan *p, tfc_graph *g, const struct plan_options *opt)
{
    if (!opt || !opt->const_fold || hooks_on(opt) || !p->n_steps || !starpu_is_initialized())
        return 0;
    struct step *st = &p->steps[p->n_steps - 1];
    if (!foldable(p, g, st)) return 0;
    struct starpu_vector_interface *ifs = calloc((size_t)st->n_buf + 1, sizeof *ifs);
    void **buffers = calloc((size_t)st->n_buf + 1, sizeof *buffers);
    struct tfc_kargs *args = malloc(st->args_size);
    int ok = ifs && buffers && args && host_buffers(p, g, st, ifs, buffers);
    struct tfc_kerr err = {0};
    if (ok) {
        memcpy(args, st->args, st->args_size);
        args->err = &err;
        st->cl->cpu_funcs[0](buffers, args); /* the kernel the CPU worker would run */
    }
    int folded = ok && !err.set; /* a failing kernel is left to the run, which reports it */
    if (ifs) settle_outputs(p, st, ifs, folded);
    free(ifs);
    free(buffers);
    free(args);
    if (!ok) return -1;
    if (folded) {
        free_step(st);
        p->n_steps--;
    }
    return folded;
}

void tfc_fold_register(struct plan *p)
{
    for (int i = 0; i < p->n_steps; i++) {
        const struct step *st = &p->steps[i];
        for (int j = 0; j < st->n_buf; j++) {
            struct slot *s = &p->slots[st->buf_slot[j]];
            if (s->kind == SLOT_CONST && !s->ch)
                starpu_vector_data_register(&s->ch, STARPU_MAIN_RAM, (uintptr_t)s->cdata,
                                            (uint32_t)s->numel, tfc_dtype_size(s->desc.dtype));
        }
    }
}

void tfc_fold_relax(struct plan *p)
{
    if (p->mp) return; /* StarPU-MPI orders its transfers by the implicit dependencies */
    for (int i = 0; i < p->n_slots; i++) {
        struct slot *s = &p->slots[i];
        if (s->kind == SLOT_CONST && s->ch && !tfc_tiling_is_parent(p, i))
            starpu_data_set_sequential_consistency_flag(s->ch, 0);
    }
}

void tfc_fold_release(struct plan *p)
{
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        struct slot *s = &p->slots[i];
        if (s->kind != SLOT_CONST) continue;
        if (s->ch) starpu_data_unregister(s->ch); /* no run uses the plan any more */
        if (s->cdata) starpu_free(s->cdata);
        s->ch = NULL;
        s->cdata = NULL;
    }
}

/* ---- fusion ------------------------------------------------------------------------------ */

/* A step fusion can take: one element-wise kind of the op list, every operand of one float
 * dtype, no empty or shape-only operand, its output an intermediate of this plan. */
static int fusable(const struct plan *p, const tfc_graph *g, const struct step *st)
{
    const struct tfc_kargs *a = st->args;
    if (st->cl != &tfc_cl_elementwise || a->n_out != 1 ||
        (g->nodes[st->node]->op->flags & TFC_OP_SOURCE))
        return 0; /* (a source's step is the snapshot of a fetched variable) */
    int k = a->kind;
    int unary = tfc_ew_is_unary(k) || k == TFC_K_IDENTITY, binary = tfc_ew_is_binary(k);
    if (!unary && !binary && k != TFC_K_ADD_N) return 0;
    if (k == TFC_K_ADD_N && a->n_in > TFC_FUSED_MAX_IN) return 0;
    if (unary && a->n_in != 1) return 0;
    if (binary && a->n_in != 2) return 0;
    const struct tfc_kdesc *o = &a->d[a->n_in];
    if (o->dtype != TFC_FLOAT32 && o->dtype != TFC_FLOAT64) return 0;
    for (int i = 0; i <= a->n_in; i++)
        if (a->d[i].dtype != o->dtype || a->d[i].buf < 0) return 0;
    if (k == TFC_K_ADD_N)
        for (int i = 0; i < a->n_in; i++)
            if (a->d[i].numel != o->numel) return 0;
    return p->slots[st->buf_slot[o->buf]].kind == SLOT_TEMP;
}

static int same_shape(const struct tfc_kdesc *x, const struct tfc_kdesc *y)
{
    return x->rank == y->rank && !memcmp(x->dims, y->dims, sizeof(int64_t) * (size_t)x->rank);
}

static int out_slot(const struct step *st)
{
    return st->buf_slot[st->args->d[st->args->n_in].buf];
}

static int in_slot(const struct step *st, int i)
{
    return st->buf_slot[st->args->d[i].buf];
}

struct fuser {
    struct plan *p;
    tfc_graph *g;
    int N;
    int *producer;    /* per slot: the step writing it (temps), -1 */
    int *cons_start, *cons; /* per slot: the steps reading it (CSR) */
    char *fetched;    /* per slot */
    int *eff;         /* per step: where it runs after fusion (its group's root; a member
                       * other than the root is dropped from the plan) */
    char *in_group;   /* per step: member of the group being built */
    char *fusable;    /* per step */
};

static int has(const int *arr, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (arr[i] == v) return 1;
    return 0;
}

/* A group being built: members (step indices), external input slots, kept outputs. */
struct group {
    int root;
    int n_mem, mem[TFC_FUSED_MAX_OPS];
    int n_ops;         /* instructions the members need */
    int n_ext, ext[TFC_FUSED_MAX_IN * 4];
    int n_kept, kept[TFC_FUSED_MAX_OUT];
};

static int ops_of(const struct step *st)
{
    int k = st->args->kind;
    return k == TFC_K_IDENTITY ? 0 : k == TFC_K_ADD_N ? st->args->n_in - 1 : 1;
}

/* The external inputs of the group with member s added (produced by no member), or -1 when
 * there would be more than TFC_FUSED_MAX_IN of them. */
static int ext_with(const struct fuser *f, const struct group *gr, const struct step *s,
                    int *ext)
{
    int n = 0, outs[TFC_FUSED_MAX_OPS + 1], n_outs = 0;
    for (int i = 0; i < gr->n_mem; i++) outs[n_outs++] = out_slot(&f->p->steps[gr->mem[i]]);
    outs[n_outs++] = out_slot(s);
    for (int i = 0; i <= gr->n_mem; i++) {
        const struct step *m = i < gr->n_mem ? &f->p->steps[gr->mem[i]] : s;
        for (int k = 0; k < m->args->n_in; k++) {
            int sl = in_slot(m, k);
            if (has(outs, n_outs, sl) || has(ext, n, sl)) continue;
            if (n == TFC_FUSED_MAX_IN) return -1;
            ext[n++] = sl;
        }
    }
    return n;
}

/* Whether producer step q can join the group rooted at r (q < r): same dtype, output shape and
 * placement as the root; moving its reads to r crosses no write of what it reads; every
 * reader of its output is in the group or runs after r (then the output is kept). */
static int try_join(struct fuser *f, struct group *gr, int q)
{
    const struct plan *p = f->p;
    const struct step *sq = &p->steps[q], *sr = &p->steps[gr->root];
    const struct tfc_kdesc *oq = &sq->args->d[sq->args->n_in], *or = &sr->args->d[sr->args->n_in];
    if (!f->fusable[q] || f->eff[q] != q || oq->dtype != or->dtype || !same_shape(oq, or))
        return 0;
    if (!same_hint(&f->g->nodes[sq->node]->device, &f->g->nodes[sr->node]->device) ||
        sq->where != sr->where || sq->workerids_len != sr->workerids_len ||
        (sq->workerids_len &&
         memcmp(sq->workerids, sr->workerids, sizeof(uint32_t) * sq->workerids_len)))
        return 0;
    if (gr->n_mem == TFC_FUSED_MAX_OPS || gr->n_ops + ops_of(sq) > TFC_FUSED_MAX_OPS) return 0;
    for (int k = q + 1; k < gr->root; k++) { /* write-after-read: variables only */
        const struct step *w = &p->steps[k];
        if (f->eff[k] != k) continue; /* absorbed elsewhere: writes only its own temp */
        for (int j = 0; j < w->n_buf; j++)
            if ((w->modes[j] & STARPU_W) && has(sq->buf_slot, sq->n_buf, w->buf_slot[j]) &&
                w->buf_slot[j] != out_slot(sq))
                return 0;
    }
    int s = out_slot(sq), keep = f->fetched[s];
    for (int c = f->cons_start[s]; c < f->cons_start[s + 1]; c++) {
        int step = f->cons[c];
        if (f->in_group[step]) continue;
        if (f->eff[step] <= gr->root) return 0; /* read before the fused task would run */
        keep = 1;
    }
    if (keep && gr->n_kept == TFC_FUSED_MAX_OUT - 1) return 0;
    int ext[TFC_FUSED_MAX_IN], n_ext = ext_with(f, gr, sq, ext);
    if (n_ext < 0) return 0;
    gr->mem[gr->n_mem++] = q;
    gr->n_ops += ops_of(sq);
    gr->n_ext = n_ext;
    memcpy(gr->ext, ext, sizeof(int) * (size_t)n_ext);
    if (keep) gr->kept[gr->n_kept++] = s;
    f->in_group[q] = 1;
    return 1;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The fused step's operands, in buffer order: the group's external inputs, the root's output,
 * then the kept outputs. */
static void fused_slots(const struct plan *p, const struct group *gr, int *slots)
{
    memcpy(slots, gr->ext, sizeof(int) * (size_t)gr->n_ext);
    slots[gr->n_ext] = out_slot(&p->steps[gr->root]);
    memcpy(slots + gr->n_ext + 1, gr->kept, sizeof(int) * (size_t)gr->n_kept);
}

/* Describes operand i as slot slots[i] holds it: buffer i, read when an input, else written. */
static void describe_operands(const struct plan *p, const int *slots, int n_in, int n,
                              struct tfc_kargs *a, int *buf_slot,
                              enum starpu_data_access_mode *modes)
{
    for (int i = 0; i < n; i++) {
        const struct slot *s = &p->slots[slots[i]];
        struct tfc_kdesc *d = &a->d[i];
        d->dtype = (int32_t)s->desc.dtype;
        d->rank = s->desc.shape.rank;
        for (int k = 0; k < d->rank; k++) d->dims[k] = s->desc.shape.dims[k];
        d->numel = s->numel;
        d->buf = i;
        buf_slot[i] = slots[i];
        modes[i] = i < n_in ? STARPU_R : STARPU_W;
    }
}

/* Which register holds each slot's value while the fused program runs. */
struct reg_map {
    int n;
    int slot[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OPS];
    int reg[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OPS];
};

static void reg_map_add(struct reg_map *m, int slot, int reg)
{
    m->slot[m->n] = slot;
    m->reg[m->n++] = reg;
}

/* The register of slot (the latest entry for it), else dflt. */
static int reg_of(const struct reg_map *m, int slot, int dflt)
{
    for (int t = m->n - 1; t >= 0; t--)
        if (m->slot[t] == slot) return m->reg[t];
    return dflt;
}

/* The op list: members in plan order, each reading registers of inputs (0 .. n_in - 1) or of
 * earlier ops (n_in + op index); out_reg names the register of each output. */
static void fused_program(const struct plan *p, struct group *gr, const int *slots, int n_in,
                          int n_out, struct tfc_fused_prog *pg)
{
    struct reg_map map = {0};
    for (int i = 0; i < n_in; i++) reg_map_add(&map, slots[i], i);
    qsort(gr->mem, (size_t)gr->n_mem, sizeof(int), cmp_int);
    for (int i = 0; i < gr->n_mem; i++) {
        const struct step *m = &p->steps[gr->mem[i]];
        int r_in[TFC_FUSED_MAX_IN] = {0};
        for (int k = 0; k < m->args->n_in; k++) r_in[k] = reg_of(&map, in_slot(m, k), 0);
        int reg = r_in[0], kind = m->args->kind;
        if (kind == TFC_K_ADD_N) {
            for (int k = 1; k < m->args->n_in; k++) {
                pg->ops[pg->n_ops] = (struct tfc_fused_op){.kind = TFC_K_ADD, .a = reg, .b = r_in[k]};
                reg = n_in + pg->n_ops++;
            }
        } else if (kind != TFC_K_IDENTITY) { /* identity: its register is its input's */
            pg->ops[pg->n_ops] = (struct tfc_fused_op){
                .kind = kind, .a = r_in[0], .b = tfc_ew_is_binary(kind) ? r_in[1] : -1,
                .p0 = m->args->attrs[TFC_EW_ATTR_P0].f, .p1 = m->args->attrs[TFC_EW_ATTR_P1].f};
            reg = n_in + pg->n_ops++;
        }
        reg_map_add(&map, out_slot(m), reg);
    }
    for (int j = 0; j < n_out; j++)
        pg->out_reg[j] = reg_of(&map, slots[n_in + j], pg->out_reg[j]);
}

/* Footprint (kind, shapes, program) and cost, as tfc_kargs_finish does for other steps. */
static void fused_footprint(struct tfc_kargs *a, int n, const struct tfc_fused_prog *pg)
{
    uint32_t h = starpu_hash_crc32c_be_n(&a->kind, sizeof a->kind, 0);
    double bytes = 0;
    for (int i = 0; i < n; i++) {
        h = starpu_hash_crc32c_be_n(&a->d[i].dtype, sizeof a->d[i].dtype, h);
        h = starpu_hash_crc32c_be_n(&a->d[i].rank, sizeof a->d[i].rank, h);
        h = starpu_hash_crc32c_be_n(a->d[i].dims, sizeof(int64_t) * (size_t)a->d[i].rank, h);
        bytes += (double)a->d[i].numel * (double)tfc_kdtype_size(a->d[i].dtype);
    }
    a->footprint = starpu_hash_crc32c_be_n(pg, sizeof *pg, h);
    a->bytes = bytes;
    a->flops = (double)a->d[a->n_in].numel * (pg->n_ops ? pg->n_ops : 1);
}

void tfc_fused_finish(struct tfc_kargs *a)
{
    fused_footprint(a, a->n_in + a->n_out, tfc_fused_prog_of(a));
}

/* Replaces the root's step with the group's fused step; the other members are dropped. */
static int emit(struct fuser *f, struct group *gr)
{
    struct plan *p = f->p;
    struct step *root = &p->steps[gr->root];
    int n_in = gr->n_ext, n_out = 1 + gr->n_kept, n = n_in + n_out;
    size_t size = sizeof(struct tfc_kargs) + sizeof(struct tfc_kdesc) * (size_t)n +
                  sizeof(struct tfc_fused_prog);
    struct tfc_kargs *a = calloc(1, size);
    int *buf_slot = malloc(sizeof(int) * (size_t)n);
    enum starpu_data_access_mode *modes = malloc(sizeof *modes * (size_t)n);
    if (!a || !buf_slot || !modes) {
        free(a); free(buf_slot); free(modes);
        return -1;
    }
    int slots[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT];
    fused_slots(p, gr, slots);
    a->kind = TFC_K_FUSED;
    a->node = root->node;
    a->n_in = n_in;
    a->n_out = n_out;
    describe_operands(p, slots, n_in, n, a, buf_slot, modes);
    struct tfc_fused_prog *pg = (struct tfc_fused_prog *)(void *)&a->d[n];
    fused_program(p, gr, slots, n_in, n_out, pg);
    fused_footprint(a, n, pg);

    struct step fused = *root;
    fused.cl = &tfc_cl_fused;
    fused.n_buf = n;
    fused.buf_slot = buf_slot;
    fused.modes = modes;
    fused.args = a;
    fused.args_size = size;
    root->workerids = NULL; /* moved to the fused step */
    for (int i = 0; i < gr->n_mem; i++) {
        free_step(&p->steps[gr->mem[i]]); /* the root's too: fused took what it keeps */
        f->eff[gr->mem[i]] = gr->root;
    }
    *root = fused;
    return 0;
}

/* Whether a lone element-wise step s after the group's root (a sibling: it reads an output of
 * the group, as the LSTM's backward multiplies dc by four gates) can run inside the group's
 * task instead of as a task of its own: its program runs last, its output is kept. It must
 * be an unfused element-wise step of the root's dtype, shape and placement, every input of it
 * made by a member or by a step that runs before the root (after fusion), and none of its inputs written between the
 * root and s (variables). Its readers come after s, so after the root too. */
static int try_hoist(struct fuser *f, struct group *gr, int s)
{
    const struct plan *p = f->p;
    const struct step *ss = &p->steps[s], *sr = &p->steps[gr->root];
    if (s <= gr->root || !f->fusable[s] || f->eff[s] != s || f->in_group[s] ||
        ss->cl != &tfc_cl_elementwise) /* a step emitted as a group is a fused one now */
        return 0;
    const struct tfc_kdesc *os = &ss->args->d[ss->args->n_in], *or = &sr->args->d[sr->args->n_in];
    if (os->dtype != or->dtype || !same_shape(os, or) ||
        !same_hint(&f->g->nodes[ss->node]->device, &f->g->nodes[sr->node]->device) ||
        ss->where != sr->where || ss->workerids_len || sr->workerids_len)
        return 0;
    if (gr->n_mem == TFC_FUSED_MAX_OPS || gr->n_ops + ops_of(ss) > TFC_FUSED_MAX_OPS ||
        gr->n_kept == TFC_FUSED_MAX_OUT - 1)
        return 0;
    for (int k = 0; k < ss->args->n_in; k++) { /* where its producer runs after fusion */
        int q = f->producer[in_slot(ss, k)];
        if (q >= 0 && !f->in_group[q] && f->eff[q] >= gr->root) return 0;
    }
    for (int k = gr->root + 1; k < s; k++) { /* write-after-read, as try_join */
        const struct step *w = &p->steps[k];
        if (f->eff[k] != k) continue;
        for (int j = 0; j < w->n_buf; j++)
            if ((w->modes[j] & STARPU_W) && has(ss->buf_slot, ss->n_buf, w->buf_slot[j]))
                return 0;
    }
    int ext[TFC_FUSED_MAX_IN], n_ext = ext_with(f, gr, ss, ext);
    if (n_ext < 0) return 0;
    gr->mem[gr->n_mem++] = s;
    gr->n_ops += ops_of(ss);
    gr->n_ext = n_ext;
    memcpy(gr->ext, ext, sizeof(int) * (size_t)n_ext);
    gr->kept[gr->n_kept++] = out_slot(ss);
    f->in_group[s] = 1;
    return 1;
}

/* Hoists the lone siblings that read the group's outputs into it (try_hoist), earliest
 * first. */
static void hoist_siblings(struct fuser *f, struct group *gr)
{
    for (int i = 0; i < gr->n_mem; i++) { /* n_mem grows: a hoisted step's readers too */
        int sl = out_slot(&f->p->steps[gr->mem[i]]);
        for (int c = f->cons_start[sl]; c < f->cons_start[sl + 1]; c++)
            try_hoist(f, gr, f->cons[c]);
    }
}

/* Whether a group reads the output of a matmul that tiling will split: then even one op is
 * worth a fused step, which tiling splits too (the fused kernels take tiles; elementwise.c's do
 * not). */
static int reads_tiled(const struct fuser *f, const struct group *gr,
                       const struct plan_options *opt)
{
    for (int i = 0; i < gr->n_ext; i++) {
        int q = f->producer[gr->ext[i]];
        if (q >= 0 && tfc_tiling_splits(f->p, &f->p->steps[q], opt)) return 1;
    }
    return 0;
}

static void fuser_free(struct fuser *f)
{
    free(f->producer);
    free(f->cons_start);
    free(f->cons);
    free(f->fetched);
    free(f->eff);
    free(f->in_group);
    free(f->fusable);
}

/* The readers of each slot, as CSR (cons_start counts per slot are already summed). */
static int index_readers(struct fuser *f)
{
    const struct plan *p = f->p;
    int *fill = calloc((size_t)p->n_slots + 1, sizeof(int));
    if (!fill) return -1;
    for (int i = 0; i < f->N; i++) {
        const struct step *st = &p->steps[i];
        for (int j = 0; j < st->n_buf; j++)
            if (st->modes[j] & STARPU_R)
                f->cons[f->cons_start[st->buf_slot[j]] + fill[st->buf_slot[j]]++] = i;
    }
    free(fill);
    return 0;
}

/* Fills the fuser's per-slot and per-step tables; -1 when out of memory (fuser_free frees
 * what was allocated). */
static int fuser_init(struct fuser *f, struct plan *p, tfc_graph *g)
{
    int N = p->n_steps, S = p->n_slots;
    *f = (struct fuser){.p = p, .g = g, .N = N};
    f->producer = malloc(sizeof(int) * (size_t)(S + 1));
    f->cons_start = calloc((size_t)S + 2, sizeof(int));
    f->fetched = calloc((size_t)S + 1, 1);
    f->eff = malloc(sizeof(int) * (size_t)(N + 1));
    f->in_group = calloc((size_t)N + 1, 1);
    f->fusable = calloc((size_t)N + 1, 1);
    int total = 0;
    for (int i = 0; i < N; i++) total += p->steps[i].n_buf;
    f->cons = malloc(sizeof(int) * (size_t)(total + 1));
    if (!f->producer || !f->cons_start || !f->fetched || !f->eff || !f->in_group ||
        !f->fusable || !f->cons)
        return -1;
    for (int s = 0; s < S; s++) f->producer[s] = -1;
    for (int i = 0; i < p->n_fetches; i++)
        if (p->fetch_slot[i] >= 0) f->fetched[p->fetch_slot[i]] = 1;
    for (int i = 0; i < N; i++) {
        const struct step *st = &p->steps[i];
        f->eff[i] = i;
        f->fusable[i] = (char)fusable(p, g, st);
        for (int j = 0; j < st->n_buf; j++) {
            if (st->modes[j] & STARPU_W) f->producer[st->buf_slot[j]] = i;
            if (st->modes[j] & STARPU_R) f->cons_start[st->buf_slot[j] + 1]++;
        }
    }
    for (int s = 0; s < S; s++) f->cons_start[s + 1] += f->cons_start[s];
    return index_readers(f);
}

/* Grows a group from root r toward its producers, latest candidate first, and emits it when
 * it is worth a fused step; -1 when out of memory. */
static int fuse_from(struct fuser *f, int r, const struct plan_options *opt)
{
    const struct plan *p = f->p;
    struct group gr = {.root = r};
    gr.mem[gr.n_mem++] = r;
    gr.n_ops = ops_of(&p->steps[r]);
    gr.n_ext = ext_with(f, &(struct group){.root = r}, &p->steps[r], gr.ext);
    if (gr.n_ext < 0) return 0;
    f->in_group[r] = 1;
    int tried[TFC_FUSED_MAX_OPS * TFC_FUSED_MAX_IN], n_tried = 0;
    for (;;) {
        int best = -1; /* the latest producer of a group input not yet tried */
        for (int i = 0; i < gr.n_ext; i++) {
            int q = f->producer[gr.ext[i]];
            if (q >= 0 && q > best && !has(tried, n_tried, q)) best = q;
        }
        if (best < 0 || n_tried == (int)(sizeof tried / sizeof tried[0])) break;
        tried[n_tried++] = best;
        try_join(f, &gr, best);
    }
    if (gr.n_mem > 1) hoist_siblings(f, &gr);
    for (int i = 0; i < gr.n_mem; i++) f->in_group[gr.mem[i]] = 0;
    if ((gr.n_mem > 1 || reads_tiled(f, &gr, opt)) && emit(f, &gr)) return -1;
    return 0;
}

int tfc_fuse_steps(struct plan *p, tfc_graph *g, const struct plan_options *opt)
{
    if (!opt || !opt->fusion || hooks_on(opt) || p->n_steps < 2) return 0;
    struct fuser f;
    int N = p->n_steps, rc = fuser_init(&f, p, g);
    /* roots from the end: a group grows toward its producers, latest candidate first, so
     * every reader that could join has been decided before its producer is considered */
    for (int r = N - 1; !rc && r >= 0; r--)
        if (f.fusable[r] && f.eff[r] == r) rc = fuse_from(&f, r, opt);
    if (!rc) {
        /* drop the absorbed steps; recount the soft fallbacks the remaining steps carry */
        int w = 0;
        p->n_soft_fallbacks = 0;
        for (int i = 0; i < N; i++) {
            if (f.eff[i] != i) continue;
            p->steps[w++] = p->steps[i];
            p->n_soft_fallbacks += p->steps[i].soft_fallback;
        }
        p->n_steps = w;
    }
    fuser_free(&f);
    return rc;
}

/* ---- chains on one worker --------------------------------------------------------------- */

/* Whether step b must wait for step a: both touch a slot that one of them writes. */
static int waits_for(const struct step *a, const struct step *b)
{
    for (int j = 0; j < b->n_buf; j++)
        for (int k = 0; k < a->n_buf; k++)
            if (a->buf_slot[k] == b->buf_slot[j] &&
                ((a->modes[k] & STARPU_W) || (b->modes[j] & STARPU_W)))
                return 1;
    return 0;
}

static int cpu_step(const struct step *st)
{
    const struct starpu_codelet *cl = st->cl;
    return cl && cl->cpu_funcs[0] && (!cl->where || (cl->where & STARPU_CPU)) &&
           (!st->where || (st->where & STARPU_CPU)) && !st->workerids;
}

void tfc_pin_chain(struct plan *p, const struct plan_options *opt)
{
    /* tiles (p->n_parts) exist to share a node among workers */
    if (!opt || !opt->pin_chains || hooks_on(opt) || p->n_steps < 2 || p->n_parts ||
        !starpu_is_initialized())
        return;
    if (starpu_cuda_worker_get_count() || starpu_opencl_worker_get_count()) return;
    int ids[STARPU_NMAXWORKERS];
    int n = (int)starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, ids, STARPU_NMAXWORKERS);
    if (n < 2 || n != (int)starpu_worker_get_count()) return; /* run.c: ids 0 to n - 1 */
    for (int i = 0; i < p->n_steps; i++)
        if (!cpu_step(&p->steps[i]) || (i && !waits_for(&p->steps[i - 1], &p->steps[i])))
            return;
    /* in turn per plan, so that the chains of concurrent sessions spread over the workers */
    static unsigned next;
    int w = ids[__atomic_fetch_add(&next, 1, __ATOMIC_RELAXED) % (unsigned)n];
    for (int i = 0; i < p->n_steps; i++) p->steps[i].on_worker = w + 1;
}
