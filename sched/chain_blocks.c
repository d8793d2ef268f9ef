/* chain_blocks.c: consecutive nodes split over the same blocks (a row-split plan: every step,
 * tiling_rows.c; an inference plan's convolutions and pools over blocks of images with the
 * element-wise steps and layers that follow on the same blocks) run each block's tile steps as
 * one chain task (codelets/chain.h). Per block, the tile steps' buffers become the chain
 * task's buffers (the block of a feed or of an output read later, the weights whole), except
 * the intermediates only the group's tiles touch (plan_part.kept): those live in the worker's
 * scratch memory for the length of the task, so their partitions leave the plan. A block's
 * steps ran one after the other anyway (each reads what the last wrote); as one task they cost
 * one submission, one scheduling decision and one set of data acquisitions instead of one per
 * step, and each step reads the last one's output from cache: the imported CNN's bias + ReLU
 * had re-read a 12.8 MB convolution output from memory. */
#include <stdlib.h>
#include <string.h>
#include "plan.h"
#include "chain_epilogue.h"
#include "../codelets/chain.h"
#include "../codelets/matmul_epilogue.h"

/* A block's chain being built: its task buffers and its scratch, in first-use order. */
struct chain_build {
    const char *scratch_part;          /* per plan partition: 1 when its tiles go to scratch */
    const char *scratch_whole;         /* NULL, or per slot: 1 when its whole buffer does */
    int epilogues;                     /* merge matmuls with their bias adds (chain_epilogue.h) */
    int n_bufs, n_scratch;
    int *slot, *part, *child;          /* per task buffer (part -1: whole) */
    enum starpu_data_access_mode *mode;
    int *scratch_slot;                 /* per scratch entry */
    uint64_t *scratch_off;
    uint64_t scratch_bytes;
};

static size_t round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* The block a tile step computes: the child of its partitioned buffers, or -1. */
static int block_of(const struct step *ts)
{
    for (int j = 0; ts->buf_part && j < ts->n_buf; j++)
        if (ts->buf_part[j] >= 0) return ts->buf_child[j];
    return -1;
}

static int in_scratch(const struct chain_build *cb, const struct step *ts, int j)
{
    if (ts->buf_part && ts->buf_part[j] >= 0) return cb->scratch_part[ts->buf_part[j]];
    return cb->scratch_whole && cb->scratch_whole[ts->buf_slot[j]];
}

/* Buffer j of tile step ts as a task buffer of the chain: found or added, the chain's access
 * mode widened (a chain that writes a buffer before reading it writes it). */
static int task_buf(struct chain_build *cb, const struct step *ts, int j)
{
    int s = ts->buf_slot[j], q = ts->buf_part ? ts->buf_part[j] : -1;
    int c = q >= 0 ? ts->buf_child[j] : 0;
    enum starpu_data_access_mode m = ts->modes[j];
    for (int b = 0; b < cb->n_bufs; b++)
        if (cb->slot[b] == s && cb->part[b] == q && cb->child[b] == c) {
            if ((m & STARPU_W) && !(cb->mode[b] & STARPU_W)) cb->mode[b] = STARPU_RW;
            return b;
        }
    int b = cb->n_bufs++;
    cb->slot[b] = s, cb->part[b] = q, cb->child[b] = c, cb->mode[b] = m;
    return b;
}

/* Buffer j of step ts (a block of an intermediate, or a whole one) in scratch: its entry,
 * found or added at the next 64-byte boundary; *nx and *es say its elements and their size. */
static uint64_t scratch_buf(struct chain_build *cb, const struct plan *p, const struct step *ts,
                            int j, uint32_t *nx, uint64_t *es)
{
    int slot = ts->buf_slot[j];
    *es = tfc_dtype_size(p->slots[slot].desc.dtype);
    *nx = (uint32_t)p->slots[slot].numel;
    if (ts->buf_part && ts->buf_part[j] >= 0) {
        const struct plan_part *pt = &p->parts[ts->buf_part[j]];
        int64_t r0 = (int64_t)ts->buf_child[j] * pt->tr;
        int64_t rows = r0 + pt->tr <= pt->rows ? pt->tr : pt->rows - r0;
        *nx = (uint32_t)(rows * pt->cols);
    }
    for (int k = 0; k < cb->n_scratch; k++)
        if (cb->scratch_slot[k] == slot) return cb->scratch_off[k];
    uint64_t off = cb->scratch_bytes;
    cb->scratch_slot[cb->n_scratch] = slot;
    cb->scratch_off[cb->n_scratch++] = off;
    cb->scratch_bytes = (off + (uint64_t)*nx * *es + 63) & ~(uint64_t)63;
    return off;
}

/* Whether chain member i's product (its buffer j) is read by member i + 1 alone: in scratch
 * and named by no other member. */
static int product_private(const struct plan *p, const struct chain_build *cb, const int *members,
                           int n, int i, int j)
{
    const struct step *mm = &p->steps[members[i]];
    if (!in_scratch(cb, mm, j)) return 0;
    for (int k = 0; k < n; k++) {
        const struct step *o = &p->steps[members[k]];
        for (int b = 0; k != i && k != i + 1 && b < o->n_buf; b++)
            if (o->buf_slot[b] == mm->buf_slot[j]) return 0;
    }
    return 1;
}

/* Per member: 1 when it and the next merge into one matmul with its epilogue (ep[i] says how;
 * chain_epilogue.h), 0 otherwise (and for the member merged into the one before). */
static void find_epilogues(const struct plan *p, const struct chain_build *cb, const int *members,
                           int n, char *merged, struct tfc_epilogue *ep)
{
    memset(merged, 0, (size_t)n);
    for (int i = 0; cb->epilogues && i + 1 < n; i++) {
        const struct step *mm = &p->steps[members[i]], *e = &p->steps[members[i + 1]];
        if (tfc_epilogue_match(mm, e, &ep[i]) &&
            product_private(p, cb, members, n, i, ep[i].product))
            merged[i++] = 1;
    }
}

/* Where buffer j of chained step ts is: a task buffer, or its place in scratch. */
static void chain_ref(struct chain_build *cb, const struct plan *p, const struct step *ts, int j,
                      struct tfc_chain_buf *r)
{
    r->task_buf = -1;
    if (in_scratch(cb, ts, j))
        r->off = scratch_buf(cb, p, ts, j, &r->nx, &r->elemsize);
    else
        r->task_buf = task_buf(cb, ts, j);
}

/* The chain's kargs: the header, the chain, its steps and buffer table, the steps' kargs (a
 * merged matmul and bias add: one step, codelets/matmul_epilogue.h). */
static struct tfc_kargs *chain_args(struct plan *p, const int *members, int n,
                                    struct chain_build *cb, size_t *size)
{
    char *merged = malloc((size_t)n);
    struct tfc_epilogue *ep = malloc(sizeof *ep * (size_t)n);
    if (!merged || !ep) {
        free(merged), free(ep);
        return NULL;
    }
    find_epilogues(p, cb, members, n, merged, ep);
    int n_chain = 0, n_refs = 0;
    size_t args_bytes = 0;
    for (int i = 0; i < n; i++, n_chain++) {
        if (merged[i]) {
            n_refs += 4, args_bytes += round16(tfc_epilogue_args_size()), i++;
            continue;
        }
        n_refs += p->steps[members[i]].n_buf;
        args_bytes += round16(p->steps[members[i]].args_size);
    }
    size_t tables = round16(sizeof(struct tfc_chain) +
                            sizeof(struct tfc_chain_step) * (size_t)n_chain +
                            sizeof(struct tfc_chain_buf) * (size_t)n_refs);
    *size = TFC_CHAIN_HEAD + tables + args_bytes;
    struct tfc_kargs *a = calloc(1, *size);
    if (!a) {
        free(merged), free(ep);
        return NULL;
    }
    struct tfc_chain *c = tfc_chain_of(a);
    c->n_steps = n_chain, c->n_bufs = n_refs;
    struct tfc_chain_step *cs = tfc_chain_steps(c);
    struct tfc_chain_buf *cbuf = tfc_chain_bufs(c);
    size_t off = TFC_CHAIN_HEAD + tables;
    uint32_t footprint = 0;
    for (int i = 0, k = 0, r = 0; i < n; i++, k++) {
        const struct step *ts = &p->steps[members[i]];
        struct tfc_kargs *sa = (struct tfc_kargs *)(void *)((char *)a + off);
        if (merged[i]) {
            const struct step *e = &p->steps[members[++i]];
            cs[k] = (struct tfc_chain_step){tfc_matmul_epilogue_cpu, off, 4, r};
            tfc_epilogue_args(ts, e, &ep[i - 1], sa);
            off += round16(tfc_epilogue_args_size());
            for (int j = 0; j < 4; j++, r++)
                chain_ref(cb, p, j < 2 ? ts : e, tfc_epilogue_buf(ts, e, &ep[i - 1], j), &cbuf[r]);
        } else {
            cs[k] = (struct tfc_chain_step){ts->cl->cpu_funcs[0], off, ts->n_buf, r};
            memcpy(sa, ts->args, ts->args_size);
            off += round16(ts->args_size);
            for (int j = 0; j < ts->n_buf; j++, r++) chain_ref(cb, p, ts, j, &cbuf[r]);
        }
        footprint = starpu_hash_crc32c_be(sa->footprint, footprint);
        a->flops += sa->flops;
        a->bytes += sa->bytes;
    }
    free(merged), free(ep);
    c->scratch_bytes = cb->scratch_bytes;
    a->kind = TFC_K_CHAIN;
    a->node = p->steps[members[n - 1]].node;
    a->footprint = footprint;
    return a;
}

/* A step's buffer arrays for n buffers (each its own allocation: tfc_plan_free frees them
 * one by one); 0, or -1 when out of memory (none left allocated). */
static int alloc_buffers(struct step *st, int n)
{
    st->buf_slot = malloc(sizeof(int) * (size_t)n);
    st->buf_part = malloc(sizeof(int) * (size_t)n);
    st->buf_child = malloc(sizeof(int) * (size_t)n);
    st->modes = malloc(sizeof *st->modes * (size_t)n);
    if (st->buf_slot && st->buf_part && st->buf_child && st->modes) return 0;
    free(st->buf_slot); free(st->buf_part); free(st->buf_child); free(st->modes);
    st->buf_slot = st->buf_part = st->buf_child = NULL;
    st->modes = NULL;
    return -1;
}

/* The chain step of the n steps members (one block's tile steps, or a whole plan's, in plan
 * order) into *out, their intermediates in scratch by scratch_part (per partition) and
 * scratch_whole (per slot, NULL for none); 0, or -1 when out of memory. */
static int chain_step(struct plan *p, const int *members, int n, const char *scratch_part,
                      const char *scratch_whole, int epilogues, struct step *out)
{
    int n_refs = 0;
    for (int i = 0; i < n; i++) n_refs += p->steps[members[i]].n_buf;
    struct chain_build cb = {.scratch_part = scratch_part, .scratch_whole = scratch_whole,
                             .epilogues = epilogues};
    cb.slot = malloc(sizeof(int) * (size_t)n_refs * 4);
    cb.mode = malloc(sizeof *cb.mode * (size_t)n_refs);
    cb.scratch_off = malloc(sizeof *cb.scratch_off * (size_t)n_refs);
    size_t size = 0;
    struct tfc_kargs *a = NULL;
    if (cb.slot && cb.mode && cb.scratch_off) {
        cb.part = cb.slot + n_refs, cb.child = cb.part + n_refs;
        cb.scratch_slot = cb.child + n_refs;
        a = chain_args(p, members, n, &cb, &size);
    }
    const struct step *first = &p->steps[members[0]];
    *out = (struct step){.cl = &tfc_cl_chain, .node = p->steps[members[n - 1]].node,
                         .n_buf = cb.n_bufs, .args = a, .args_size = size,
                         .rank = first->rank, .priority = first->priority};
    int rc = a && !alloc_buffers(out, cb.n_bufs) ? 0 : -1;
    for (int b = 0; !rc && b < cb.n_bufs; b++) {
        out->buf_slot[b] = cb.slot[b], out->buf_part[b] = cb.part[b];
        out->buf_child[b] = cb.child[b], out->modes[b] = cb.mode[b];
    }
    for (int i = 0; i < n; i++) { /* the chain is as urgent as its most urgent step */
        const struct step *m = &p->steps[members[i]];
        out->cost += m->cost;
        out->priority = m->priority > out->priority ? m->priority : out->priority;
    }
    if (rc) free(a);
    free(cb.slot); free(cb.mode); free(cb.scratch_off);
    return rc;
}

/* Drops the partitions no step uses any more (the intermediates now in scratch), renumbering
 * the steps' references to the others. */
static void drop_unused_parts(struct plan *p)
{
    int *to = malloc(sizeof(int) * ((size_t)p->n_parts + 1)), n = 0;
    if (!to) return; /* the unused ones stay: first = -1, never submitted */
    for (int q = 0; q < p->n_parts; q++) to[q] = -1;
    for (int i = 0; i < p->n_steps; i++) /* (an untiled step has no buf_part) */
        for (int b = 0; p->steps[i].buf_part && b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_part[b] >= 0) to[p->steps[i].buf_part[b]] = 0;
    for (int q = 0; q < p->n_parts; q++)
        if (!to[q]) p->parts[to[q] = n++] = p->parts[q];
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; p->steps[i].buf_part && b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_part[b] >= 0) p->steps[i].buf_part[b] = to[p->steps[i].buf_part[b]];
    p->n_parts = n;
    free(to);
}

/* How many tile steps from step i compute blocks 0, 1, 2, ... in turn (a node split over nt
 * blocks of rows or images lists its nt tile steps so). */
static int blocks_from(const struct plan *p, int i)
{
    int n = 0;
    while (i + n < p->n_steps && block_of(&p->steps[i + n]) == n) n++;
    return n;
}

/* Whether tile step ts of block t can run inside a chain task: a CPU kernel, no placement, at
 * most STARPU_NMAXBUFS buffers (the chain kernel's views), every partitioned buffer block t of
 * its partition, every whole buffer only read. */
static int chainable_step(const struct step *ts, int t)
{
    if (ts->n_buf > STARPU_NMAXBUFS || !ts->cl->cpu_funcs[0] || ts->where || ts->workerids ||
        (ts->cl->where && !(ts->cl->where & STARPU_CPU)))
        return 0;
    for (int j = 0; j < ts->n_buf; j++)
        if (ts->buf_part[j] >= 0 ? ts->buf_child[j] != t : (ts->modes[j] & STARPU_W) != 0)
            return 0;
    return 1;
}

/* The end of the group of steps from a (segments of nt tile steps over blocks 0 .. nt-1, each
 * step chainable), or a when steps a .. a + 2 nt - 1 are not two such segments or a slot the
 * group tiles is also read whole or through another partition in it. */
static int group_end(const struct plan *p, int a, int nt)
{
    int end = a;
    while (end + nt <= p->n_steps && blocks_from(p, end) >= nt &&
           (end + nt == p->n_steps || block_of(&p->steps[end + nt]) <= 0)) {
        int ok = 1;
        for (int t = 0; t < nt && ok; t++) ok = chainable_step(&p->steps[end + t], t);
        if (!ok) break;
        end += nt;
    }
    if (end - a < 2 * nt) return a;
    /* A slot the group tiles must not be read whole in it, nor tiled by two partitions: a
     * chain task holds all its partitions at once (a feed read by two nodes had one read-only
     * partition each, used one after the other). */
    for (int i = a; i < end; i++) {
        const struct step *ts = &p->steps[i];
        for (int j = 0; j < ts->n_buf; j++)
            for (int k = a; k < end; k++)
                for (int b = 0; b < p->steps[k].n_buf; b++)
                    if (p->steps[k].buf_part[b] >= 0 && p->steps[k].buf_slot[b] == ts->buf_slot[j] &&
                        p->steps[k].buf_part[b] != ts->buf_part[j])
                        return a;
    }
    return end;
}

/* Per partition: 1 when only steps a .. end - 1 use it and it is kept (an intermediate only
 * tiles touch): its blocks live in scratch. */
static void mark_scratch(const struct plan *p, int a, int end, char *scratch)
{
    for (int q = 0; q < p->n_parts; q++) scratch[q] = p->parts[q].kept;
    for (int i = 0; i < p->n_steps; i++) {
        if (i >= a && i < end) continue;
        const struct step *st = &p->steps[i];
        for (int j = 0; st->buf_part && j < st->n_buf; j++)
            if (st->buf_part[j] >= 0) scratch[st->buf_part[j]] = 0;
    }
}

static void free_step_arrays(struct step *st)
{
    free(st->args); free(st->buf_slot); free(st->modes); free(st->buf_part);
    free(st->buf_child); free(st->workerids);
}

/* Writes the nt chain steps of the group a .. end - 1 to out; -1 when out of memory (none
 * left in out). */
static int chain_group(struct plan *p, int a, int end, int nt, char *scratch, int *members,
                       int epilogues, struct step *out)
{
    mark_scratch(p, a, end, scratch);
    for (int t = 0; t < nt; t++) {
        int n = 0;
        for (int i = a; i < end; i++)
            if (block_of(&p->steps[i]) == t) members[n++] = i;
        if (chain_step(p, members, n, scratch, NULL, epilogues, &out[t])) {
            while (t-- > 0) free_step_arrays(&out[t]);
            return -1;
        }
    }
    return 0;
}

extern struct starpu_codelet tfc_cl_conv, tfc_cl_pool;

/* A worker keeps its scratch memory while it lives (codelets/thread_scratch.c): a pinned plan
 * whose intermediates need more than this keeps one task per step. */
#define CHAIN_PINNED_MAX_SCRATCH ((int64_t)8 << 20)

/* Whether the group from step a may chain: any, or one that starts with a convolution or a
 * pooling split over blocks of images (tiled matmuls and what reads their tiles keep their
 * tasks: tiles of one product share a node among the workers). */
static int group_wanted(const struct plan *p, int a, int any)
{
    const struct starpu_codelet *cl = p->steps[a].cl;
    return any || cl == &tfc_cl_conv || cl == &tfc_cl_pool;
}

int tfc_chain_blocks(struct plan *p, int any, int epilogues)
{
    struct step *out = calloc((size_t)p->n_steps + 1, sizeof *out);
    char *from_group = calloc((size_t)p->n_steps + 1, 1), *scratch = malloc((size_t)p->n_parts + 1);
    int *members = malloc(sizeof(int) * ((size_t)p->n_steps + 1)), n_out = 0, groups = 0;
    int rc = out && from_group && scratch && members ? 0 : -1;
    for (int i = 0; !rc && i < p->n_steps;) {
        int nt = p->steps[i].buf_part ? blocks_from(p, i) : 0;
        int end = nt >= 2 && group_wanted(p, i, any) ? group_end(p, i, nt) : i;
        if (end == i) {
            out[n_out++] = p->steps[i++]; /* moved as it is */
            continue;
        }
        if ((rc = chain_group(p, i, end, nt, scratch, members, epilogues, &out[n_out]))) break;
        for (int k = i; k < end; k++) from_group[k] = 1;
        n_out += nt, groups++, i = end;
    }
    free(scratch); free(members);
    if (rc || !groups) { /* the plan keeps its steps: free the chains built */
        for (int k = 0; out && k < n_out; k++)
            if (out[k].cl == &tfc_cl_chain && out[k].args && out[k].args->kind == TFC_K_CHAIN)
                free_step_arrays(&out[k]);
        free(out); free(from_group);
        return rc;
    }
    for (int i = 0; i < p->n_steps; i++)
        if (from_group[i]) free_step_arrays(&p->steps[i]);
    free(from_group);
    free(p->steps);
    p->steps = out;
    p->n_steps = n_out;
    drop_unused_parts(p);
    return 0;
}

/* A whole plan's scratch, per slot: its per-run intermediates (TEMP slots) that are not
 * fetched. Returns their bytes. */
static int64_t whole_scratch(const struct plan *p, char *scratch)
{
    int64_t bytes = 0;
    for (int s = 0; s < p->n_slots; s++) scratch[s] = p->slots[s].kind == SLOT_TEMP;
    for (int j = 0; j < p->n_fetches; j++)
        if (p->fetch_slot[j] >= 0) scratch[p->fetch_slot[j]] = 0;
    for (int s = 0; s < p->n_slots; s++)
        if (scratch[s])
            bytes += (p->slots[s].numel * (int64_t)tfc_dtype_size(p->slots[s].desc.dtype) + 63) &
                     ~(int64_t)63;
    return bytes;
}

void tfc_chain_pinned(struct plan *p, int epilogues)
{
    if (p->n_steps < 2 || p->n_parts || !p->steps[0].on_worker) return;
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].n_buf > STARPU_NMAXBUFS) return; /* the chain kernel's views */
    char *scratch = malloc((size_t)p->n_slots + 1);
    int *members = malloc(sizeof(int) * (size_t)p->n_steps);
    struct step *out = calloc(1, sizeof *out);
    int ok = scratch && members && out && whole_scratch(p, scratch) <= CHAIN_PINNED_MAX_SCRATCH;
    for (int i = 0; ok && i < p->n_steps; i++) members[i] = i;
    ok = ok && !chain_step(p, members, p->n_steps, NULL, scratch, epilogues, out);
    free(scratch), free(members);
    if (!ok) { /* out of memory, or too much scratch: the plan keeps its pinned tasks */
        free(out);
        return;
    }
    out->on_worker = p->steps[0].on_worker;
    for (int i = 0; i < p->n_steps; i++) free_step_arrays(&p->steps[i]);
    free(p->steps);
    p->steps = out;
    p->n_steps = 1;
    tfc_plan_mark_sinks(p);
}
