/* rows_chain.c: a plan split into chains of row blocks (tiling_rows.c decides, tiling.c's
 * split_batch makes a tile step per step and block) runs each block's steps as one chain task
 * (codelets/chain.h). Per block, the tile steps' buffers become the chain task's buffers (the
 * block of a feed or of a fetched output, the weights whole), except the intermediates only
 * the tiles touch (plan_part.kept): those live in the worker's scratch memory for the length
 * of the task, so their partitions leave the plan. A block's steps ran one after the other on
 * one worker anyway (each reads what the last wrote); as one task they cost one submission,
 * one scheduling decision and one set of data acquisitions instead of one per step. */
#include <stdlib.h>
#include <string.h>
#include "plan.h"
#include "../codelets/chain.h"

/* A block's chain being built: its task buffers and its scratch, in first-use order. */
struct chain_build {
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

static int in_scratch(const struct plan *p, const struct step *ts, int j)
{
    return ts->buf_part[j] >= 0 && p->parts[ts->buf_part[j]].kept;
}

/* Buffer j of tile step ts as a task buffer of the chain: found or added, the chain's access
 * mode widened (a chain that writes a buffer before reading it writes it). */
static int task_buf(struct chain_build *cb, const struct step *ts, int j)
{
    int s = ts->buf_slot[j], q = ts->buf_part[j], c = q >= 0 ? ts->buf_child[j] : 0;
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

/* Buffer j of tile step ts (a block of an intermediate) in scratch: its entry, found or
 * added at the next 64-byte boundary; *nx and *es say its elements and their size. */
static uint64_t scratch_buf(struct chain_build *cb, const struct plan *p, const struct step *ts,
                            int j, uint32_t *nx, uint64_t *es)
{
    const struct plan_part *pt = &p->parts[ts->buf_part[j]];
    int64_t r0 = (int64_t)ts->buf_child[j] * pt->tr;
    int64_t rows = r0 + pt->tr <= pt->rows ? pt->tr : pt->rows - r0;
    *es = tfc_dtype_size(p->slots[pt->slot].desc.dtype);
    *nx = (uint32_t)(rows * pt->cols);
    for (int k = 0; k < cb->n_scratch; k++)
        if (cb->scratch_slot[k] == pt->slot) return cb->scratch_off[k];
    uint64_t off = cb->scratch_bytes;
    cb->scratch_slot[cb->n_scratch] = pt->slot;
    cb->scratch_off[cb->n_scratch++] = off;
    cb->scratch_bytes = (off + (uint64_t)*nx * *es + 63) & ~(uint64_t)63;
    return off;
}

/* The chain's kargs: the header, the chain, its steps and buffer table, the steps' kargs. */
static struct tfc_kargs *chain_args(struct plan *p, const int *members, int n,
                                    struct chain_build *cb, size_t *size)
{
    int n_refs = 0;
    for (int i = 0; i < n; i++) n_refs += p->steps[members[i]].n_buf;
    size_t tables = round16(sizeof(struct tfc_chain) + sizeof(struct tfc_chain_step) * (size_t)n +
                            sizeof(struct tfc_chain_buf) * (size_t)n_refs);
    *size = TFC_CHAIN_HEAD + tables;
    for (int i = 0; i < n; i++) *size += round16(p->steps[members[i]].args_size);
    struct tfc_kargs *a = calloc(1, *size);
    if (!a) return NULL;
    struct tfc_chain *c = tfc_chain_of(a);
    c->n_steps = n, c->n_bufs = n_refs;
    struct tfc_chain_step *cs = tfc_chain_steps(c);
    struct tfc_chain_buf *cbuf = tfc_chain_bufs(c);
    size_t off = TFC_CHAIN_HEAD + tables;
    uint32_t footprint = 0;
    for (int i = 0, r = 0; i < n; i++) {
        const struct step *ts = &p->steps[members[i]];
        cs[i] = (struct tfc_chain_step){ts->cl->cpu_funcs[0], off, ts->n_buf, r};
        memcpy((char *)a + off, ts->args, ts->args_size);
        off += round16(ts->args_size);
        for (int j = 0; j < ts->n_buf; j++, r++) {
            cbuf[r].task_buf = -1;
            if (in_scratch(p, ts, j))
                cbuf[r].off = scratch_buf(cb, p, ts, j, &cbuf[r].nx, &cbuf[r].elemsize);
            else
                cbuf[r].task_buf = task_buf(cb, ts, j);
        }
        footprint = starpu_hash_crc32c_be(ts->args->footprint, footprint);
        a->flops += ts->args->flops;
        a->bytes += ts->args->bytes;
    }
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

/* The chain step of the n tile steps members (one block's, in plan order) into *out; 0, or
 * -1 when out of memory. */
static int chain_step(struct plan *p, const int *members, int n, struct step *out)
{
    int n_refs = 0;
    for (int i = 0; i < n; i++) n_refs += p->steps[members[i]].n_buf;
    struct chain_build cb = {0};
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
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_part[b] >= 0) to[p->steps[i].buf_part[b]] = 0;
    for (int q = 0; q < p->n_parts; q++)
        if (!to[q]) p->parts[to[q] = n++] = p->parts[q];
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_part[b] >= 0) p->steps[i].buf_part[b] = to[p->steps[i].buf_part[b]];
    p->n_parts = n;
    free(to);
}

/* Whether the plan is nt blocks of tile steps that can run as chains: each step a tile step
 * of one block with a CPU kernel and at most STARPU_NMAXBUFS buffers (the chain kernel's
 * views of them). */
static int chainable(const struct plan *p, int nt)
{
    if (nt < 1 || p->n_steps < nt) return 0;
    for (int i = 0; i < p->n_steps; i++) {
        const struct step *ts = &p->steps[i];
        int t = block_of(ts);
        if (t < 0 || t >= nt || ts->n_buf > STARPU_NMAXBUFS || !ts->cl->cpu_funcs[0]) return 0;
    }
    return 1;
}

int tfc_rows_chain(struct plan *p, int nt)
{
    if (!chainable(p, nt)) return 0;
    struct step *chains = calloc((size_t)nt, sizeof *chains);
    int *members = malloc(sizeof(int) * (size_t)p->n_steps), rc = chains && members ? 0 : -1;
    for (int t = 0; !rc && t < nt; t++) {
        int n = 0;
        for (int i = 0; i < p->n_steps; i++)
            if (block_of(&p->steps[i]) == t) members[n++] = i;
        rc = n ? chain_step(p, members, n, &chains[t]) : -1;
    }
    free(members);
    if (rc) { /* the plan keeps its tile steps */
        for (int t = 0; chains && t < nt; t++) {
            free(chains[t].args); free(chains[t].buf_slot); free(chains[t].buf_part);
            free(chains[t].buf_child); free(chains[t].modes);
        }
        free(chains);
        return -1;
    }
    for (int i = 0; i < p->n_steps; i++) {
        struct step *ts = &p->steps[i];
        free(ts->args); free(ts->buf_slot); free(ts->modes); free(ts->buf_part);
        free(ts->buf_child); free(ts->workerids);
    }
    free(p->steps);
    p->steps = chains;
    p->n_steps = nt;
    drop_unused_parts(p);
    return 0;
}
