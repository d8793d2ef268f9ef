/* tiling.c: large matmuls split into tile tasks so that several workers share one node. A
 * plan pass replaces such a step by one task per tile of the output, C[i,j] = op(A)[i,:]
 * op(B)[:,j], over 2-D views (StarPU matrix interfaces with a leading dimension) of the
 * operands' contiguous buffers. Each run partitions the operands with StarPU's asynchronous
 * partitioning (plan, partition_submit / partition_readonly_submit before the first tile,
 * unpartition_submit and clean after the last), so sequential consistency orders the tiles
 * after the producers of A and B and the consumers of C after the tiles. The inner dimension
 * is not split: each tile is one gemm with beta = 0, and nothing accumulates.
 *
 * A fused element-wise step (codelets/fused.h) that is the next step to touch a tiled matmul's
 * output C, has C's 2-D shape and reads only C, tensors of C's shape, row-broadcast vectors
 * ([n] or [1, n]) and scalars, is split into the same tiles: tile (i, j) reads C's tile (i, j)
 * as the matmul left it (C stays partitioned until the last element-wise tile), the same tile
 * of the other full inputs, the column block j of a row-broadcast input and scalars whole, and
 * writes tile (i, j) of its outputs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "session_priv.h"
#include "../src/env.h"
#include "../codelets/fused.h"

/* Default threshold: 2*512^3 flops, a gemm of about 1 ms on one core here; below it the
 * partition tasks and the task overhead (each a few us) eat the gain, and other nodes of a
 * graph usually keep the workers busy anyway. */
#define TILE_MIN_DEFAULT 268435456.0
/* The automatic tile edge: the largest of these giving at least TILES_PER_WORKER output tiles
 * per worker (measured: bench/tiled_matmul.c), never below the last. Powers of two: a 2^k
 * matrix then splits into equal tiles. */
static const int64_t tile_edges[] = {1024, 512, 256};
#define TILES_PER_WORKER 4

/* ---- options ----------------------------------------------------------------------------- */

tfc_status tfc_tiling_options(struct plan_options *opt, char *msg)
{
    opt->tile_min = TILE_MIN_DEFAULT;
    opt->tile_size = 0;
    opt->tile_workers = starpu_is_initialized() ? (int)starpu_worker_get_count() : 1;
    long long min, size;
    tfc_status st = tfc_env_int("TFC_TILE_MIN", (long long)TILE_MIN_DEFAULT, &min, msg);
    if (!st) st = tfc_env_int("TFC_TILE_SIZE", 0, &size, msg); /* 0: auto */
    if (st) return st;
    opt->tile_min = (double)min;
    opt->tile_size = (int)size;
    return TFC_OK;
}

/* ---- the pass ---------------------------------------------------------------------------- */

static int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

static int64_t tile_edge(const struct plan_options *opt, int64_t m, int64_t n)
{
    if (opt->tile_size > 0) return opt->tile_size;
    int64_t want = (int64_t)TILES_PER_WORKER * (opt->tile_workers > 0 ? opt->tile_workers : 1);
    int ne = (int)(sizeof tile_edges / sizeof tile_edges[0]);
    for (int i = 0; i < ne; i++)
        if (cdiv(m, tile_edges[i]) * cdiv(n, tile_edges[i]) >= want) return tile_edges[i];
    return tile_edges[ne - 1];
}

/* The tile edge for step st, or 0 when it stays whole. */
static int64_t tile_of(const struct plan *p, const struct step *st, const struct plan_options *opt)
{
    const struct tfc_kargs *a = st->args;
    if (opt->tile_min <= 0 || st->cl != &tfc_cl_matmul || a->kind != TFC_K_MATMUL) return 0;
    if (opt->tile_size == 0 && opt->tile_workers < 2) return 0; /* auto: nobody to share with */
    if (a->flops < opt->tile_min) return 0;
    const struct tfc_kdesc *c = &a->d[2];
    if (a->d[0].rank != 2 || a->d[1].rank != 2 || c->rank != 2) return 0;
    if (c->dtype != TFC_FLOAT32 && c->dtype != TFC_FLOAT64) return 0;
    for (int i = 0; i < 3; i++) /* every operand has a buffer (no zero-element ones) */
        if (a->d[i].buf < 0 || a->d[i].numel > UINT32_MAX) return 0;
    if (p->slots[st->buf_slot[a->d[2].buf]].kind != SLOT_TEMP) return 0;
    int64_t m = c->dims[0], n = c->dims[1];
    int64_t t = tile_edge(opt, m, n);
    return cdiv(m, t) * cdiv(n, t) > 1 ? t : 0;
}

static int add_part(struct plan *p, int *cap, int slot, int readonly, int64_t rows, int64_t cols,
                    int64_t tr, int64_t tc)
{
    if (p->n_parts == *cap) {
        int c2 = *cap ? *cap * 2 : 8;
        struct plan_part *q = realloc(p->parts, sizeof *q * (size_t)c2);
        if (!q) return -1;
        p->parts = q;
        *cap = c2;
    }
    p->parts[p->n_parts++] = (struct plan_part){slot, readonly, rows, cols, tr, tc,
                                                (int)cdiv(rows, tr), (int)cdiv(cols, tc)};
    return 0;
}

/* How input k of fused step st relates to the tiled output [m, n]: its tiles. */
enum { EW_NONE, EW_C, EW_FULL, EW_ROW, EW_SCALAR };

static int ew_input_kind(const struct tfc_kdesc *d, int64_t m, int64_t n)
{
    if (d->buf < 0 || d->numel > UINT32_MAX) return EW_NONE;
    if (d->numel == 1) return EW_SCALAR;
    if (d->rank == 2 && d->dims[0] == m && d->dims[1] == n) return EW_FULL;
    if ((d->rank == 1 && d->dims[0] == n) || (d->rank == 2 && d->dims[0] == 1 && d->dims[1] == n))
        return EW_ROW;
    return EW_NONE;
}

static int same_placement(const struct step *x, const struct step *y)
{
    if (x->where != y->where || !x->workerids != !y->workerids) return 0;
    return !x->workerids || (x->workerids_len == y->workerids_len &&
                             !memcmp(x->workerids, y->workerids,
                                     sizeof(uint32_t) * x->workerids_len));
}

/* The fused step that takes tiled matmul step mi's output tile by tile, or -1: the next step
 * that uses C's slot, when it is a fused step over C's shape and dtype with inputs of the
 * kinds above, placed like the matmul. */
static int chained_consumer(const struct plan *p, int mi)
{
    const struct step *mm = &p->steps[mi];
    const struct tfc_kdesc *c = &mm->args->d[2];
    int cs = mm->buf_slot[c->buf];
    int64_t m = c->dims[0], n = c->dims[1];
    int j = mi + 1;
    for (; j < p->n_steps; j++) {
        const struct step *st = &p->steps[j];
        int uses = 0;
        for (int b = 0; b < st->n_buf && !uses; b++) uses = st->buf_slot[b] == cs;
        if (uses) break;
    }
    if (j == p->n_steps) return -1;
    const struct step *fs = &p->steps[j];
    const struct tfc_kargs *a = fs->args;
    if (fs->cl != &tfc_cl_fused || a->kind != TFC_K_FUSED || !same_placement(mm, fs)) return -1;
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const struct tfc_kdesc *d = &a->d[k];
        if (d->dtype != c->dtype || d->buf < 0) return -1;
        int kind = ew_input_kind(d, m, n);
        if (k >= a->n_in ? kind != EW_FULL : kind == EW_NONE) return -1;
        if (k >= a->n_in && p->slots[fs->buf_slot[d->buf]].kind != SLOT_TEMP) return -1;
    }
    return j;
}

/* A copy of step st with its own arrays, room for nb >= st->n_buf buffers (not yet in a
 * partition); 0, or -1 when out of memory. */
static int alloc_tile_step(struct step *ts, const struct step *st, int nb)
{
    *ts = *st;
    ts->args = malloc(st->args_size);
    ts->buf_slot = malloc(sizeof(int) * (size_t)nb);
    ts->modes = malloc(sizeof *ts->modes * (size_t)nb);
    ts->buf_child = malloc(sizeof(int) * (size_t)nb);
    ts->workerids = st->workerids ? malloc(sizeof(uint32_t) * st->workerids_len) : NULL;
    ts->buf_part = malloc(sizeof(int) * (size_t)nb); /* set: the caller frees this step's arrays */
    if (!ts->args || !ts->buf_slot || !ts->modes || !ts->buf_part || !ts->buf_child ||
        (st->workerids && !ts->workerids)) {
        if (!ts->buf_part) { /* the caller would skip it */
            free(ts->args); free(ts->buf_slot); free(ts->modes); free(ts->buf_child);
            free(ts->workerids);
            memset(ts, 0, sizeof *ts);
        }
        return -1;
    }
    if (st->workerids) memcpy(ts->workerids, st->workerids, sizeof(uint32_t) * st->workerids_len);
    memcpy(ts->args, st->args, st->args_size);
    memcpy(ts->buf_slot, st->buf_slot, sizeof(int) * (size_t)st->n_buf);
    memcpy(ts->modes, st->modes, sizeof *ts->modes * (size_t)st->n_buf);
    for (int b = 0; b < nb; b++) ts->buf_part[b] = -1, ts->buf_child[b] = 0;
    ts->unpart_extra = -1;
    return 0;
}

/* Appends to out the tile steps of fused step st, the consumer of the matmul output in slot
 * c_slot, tiled with edge t as partition c_part; 0, or -1 when out of memory. */
static int split_fused(struct plan *p, int *cap_parts, const struct step *st, int64_t t,
                       int c_slot, int c_part, struct step *out, int *n_out)
{
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *o = &a->d[a->n_in];
    int64_t m = o->dims[0], n = o->dims[1];
    int nd = a->n_in + a->n_out, first = p->n_parts;
    int kind[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT], part[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT];
    for (int k = 0; k < nd; k++) { /* emit() gives descriptor k buffer k */
        const struct tfc_kdesc *d = &a->d[k];
        int slot = st->buf_slot[d->buf];
        kind[k] = k < a->n_in && slot == c_slot ? EW_C : ew_input_kind(d, m, n);
        part[k] = kind[k] == EW_C ? c_part : -1;
        if (kind[k] == EW_FULL || kind[k] == EW_ROW) {
            part[k] = p->n_parts;
            if (kind[k] == EW_FULL ? add_part(p, cap_parts, slot, k < a->n_in, m, n, t, t)
                                   : add_part(p, cap_parts, slot, 1, 1, n, 1, t))
                return -1;
        }
    }
    int mt = (int)cdiv(m, t), nt = (int)cdiv(n, t), ntiles = mt * nt;
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < nt; j++) {
            struct step *ts = &out[(*n_out)++];
            if (alloc_tile_step(ts, st, st->n_buf)) return -1;
            int64_t tm = (i + 1) * t <= m ? t : m - i * t, tn = (j + 1) * t <= n ? t : n - j * t;
            struct tfc_kargs *ka = ts->args;
            for (int k = 0; k < nd; k++) {
                struct tfc_kdesc *d = &ka->d[k];
                int b = d->buf;
                ts->buf_part[b] = part[k];
                if (kind[k] == EW_C || kind[k] == EW_FULL) {
                    d->dims[0] = tm, d->dims[1] = tn;
                    ts->buf_child[b] = i * nt + j;
                } else if (kind[k] == EW_ROW) {
                    d->dims[d->rank - 1] = tn;
                    ts->buf_child[b] = j;
                }
                d->numel = 1;
                for (int r = 0; r < d->rank; r++) d->numel *= d->dims[r];
            }
            tfc_plan_finish_args(ka); /* and the program, as passes.c's emit() does */
            ka->footprint = starpu_hash_crc32c_be_n(pg, sizeof *pg, ka->footprint);
            ka->flops = (double)(tm * tn) * (pg->n_ops ? pg->n_ops : 1);
            ts->cost = st->cost * (double)(tm * tn) / (double)(m * n);
            ts->parts_first = ts->unparts_first = first;
            ts->parts_n = ts->unparts_n = p->n_parts - first;
            ts->unpart_extra = c_part;
            ts->parts_when = (i == 0 && j == 0 ? TILE_PARTITION : 0) |
                             (i == mt - 1 && j == nt - 1 ? TILE_UNPARTITION : 0);
        }
    if (st->soft_fallback) p->n_soft_fallbacks += ntiles - 1;
    return 0;
}

/* Appends to out the tile steps of step st (edge t); 0, or -1 when out of memory. When
 * chained, C's partition stays (its last user unpartitions it). */
static int split_step(struct plan *p, int *cap_parts, const struct step *st, int64_t t,
                      int chained, struct step *out, int *n_out)
{
    const struct tfc_kargs *a = st->args;
    int ta = a->attrs[0].i != 0, tb = a->attrs[1].i != 0;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = &a->d[2];
    int64_t m = dc->dims[0], n = dc->dims[1], k = ta ? da->dims[0] : da->dims[1];
    int sa = st->buf_slot[da->buf], sb = st->buf_slot[db->buf], sc = st->buf_slot[dc->buf];
    int first = p->n_parts;
    /* A's row blocks of op(A) (column blocks of A when transposed), B's column blocks of op(B)
     * (row blocks when transposed), C's 2-D tiles */
    if (add_part(p, cap_parts, sa, 1, da->dims[0], da->dims[1], ta ? k : t, ta ? t : k) ||
        add_part(p, cap_parts, sb, 1, db->dims[0], db->dims[1], tb ? t : k, tb ? k : t) ||
        add_part(p, cap_parts, sc, 0, m, n, t, t))
        return -1;
    int mt = (int)cdiv(m, t), nt = (int)cdiv(n, t), ntiles = mt * nt;
    for (int i = 0; i < mt; i++)
        for (int j = 0; j < nt; j++) {
            struct step *ts = &out[(*n_out)++];
            /* A, B and C: three buffers even when A and B are one tensor (one buffer) */
            if (alloc_tile_step(ts, st, 3)) return -1;
            int64_t tm = (i + 1) * t <= m ? t : m - i * t, tn = (j + 1) * t <= n ? t : n - j * t;
            struct tfc_kargs *ka = ts->args; /* a copy of a */
            int64_t dims[3][2] = {{ta ? k : tm, ta ? tm : k}, {tb ? tn : k, tb ? k : tn}, {tm, tn}};
            int slots[3] = {sa, sb, sc}, child[3] = {i, j, i * nt + j};
            for (int b = 0; b < 3; b++) {
                ka->d[b].dims[0] = dims[b][0];
                ka->d[b].dims[1] = dims[b][1];
                ka->d[b].numel = dims[b][0] * dims[b][1];
                ka->d[b].buf = b;
                ts->buf_slot[b] = slots[b];
                ts->modes[b] = b < 2 ? STARPU_R : STARPU_W;
                ts->buf_part[b] = first + b;
                ts->buf_child[b] = child[b];
            }
            ts->n_buf = 3;
            tfc_plan_finish_args(ka);
            ts->cost = st->cost * ka->flops / (a->flops > 0 ? a->flops : 1);
            ts->parts_first = ts->unparts_first = first;
            ts->parts_n = 3;
            ts->unparts_n = chained ? 2 : 3; /* A, B (and C) */
            ts->unpart_extra = -1;
            ts->parts_when = (i == 0 && j == 0 ? TILE_PARTITION : 0) |
                             (i == mt - 1 && j == nt - 1 ? TILE_UNPARTITION : 0);
        }
    if (st->soft_fallback) p->n_soft_fallbacks += ntiles - 1; /* it counts tasks */
    return 0;
}

static void free_tile_steps(struct step *steps, int n)
{
    for (int i = 0; i < n; i++) {
        if (!steps[i].buf_part) continue; /* a copy of an untiled step: owns nothing */
        free(steps[i].args); free(steps[i].buf_slot); free(steps[i].modes);
        free(steps[i].buf_part); free(steps[i].buf_child); free(steps[i].workerids);
    }
}

int tfc_plan_tile(struct plan *p, const struct plan_options *opt)
{
    if (!opt) return 0;
    int64_t *edge = calloc((size_t)p->n_steps + 1, sizeof *edge);
    /* chain[i]: for a tiled matmul, its fused consumer step, else -1; for that consumer, the
     * matmul (a step whose first tile must wait for the matmul's partition index) */
    int *chain = malloc(sizeof(int) * ((size_t)p->n_steps + 1));
    int *from = malloc(sizeof(int) * ((size_t)p->n_steps + 1));
    if (!edge || !chain || !from) {
        free(edge); free(chain); free(from);
        return -1;
    }
    int total = 0, any = 0;
    for (int i = 0; i < p->n_steps; i++) chain[i] = from[i] = -1;
    for (int i = 0; i < p->n_steps; i++) {
        if (from[i] >= 0) { /* a chained consumer: edge already set */
            const struct tfc_kdesc *o = &p->steps[i].args->d[p->steps[i].args->n_in];
            total += (int)(cdiv(o->dims[0], edge[i]) * cdiv(o->dims[1], edge[i]));
            continue;
        }
        edge[i] = tile_of(p, &p->steps[i], opt);
        if (!edge[i]) {
            total++;
            continue;
        }
        const struct tfc_kdesc *c = &p->steps[i].args->d[2];
        total += (int)(cdiv(c->dims[0], edge[i]) * cdiv(c->dims[1], edge[i]));
        any = 1;
        int j = chained_consumer(p, i);
        if (j > i && from[j] < 0) { /* one matmul per consumer: another C is partitioned anew */
            chain[i] = j;
            from[j] = i;
            edge[j] = edge[i];
        }
    }
    if (!any) {
        free(edge); free(chain); free(from);
        return 0;
    }
    /* build the new step list; on failure the plan keeps its old one untouched */
    struct step *out = calloc((size_t)total, sizeof *out);
    int *c_part = malloc(sizeof(int) * ((size_t)p->n_steps + 1)); /* per matmul: C's part */
    int n_out = 0, cap_parts = 0, rc = out && c_part ? 0 : -1;
    for (int i = 0; i < p->n_steps && !rc; i++) {
        const struct step *st = &p->steps[i];
        if (!edge[i]) {
            out[n_out++] = *st; /* shallow: ownership moves on success */
        } else if (from[i] >= 0) {
            const struct step *mm = &p->steps[from[i]];
            rc = split_fused(p, &cap_parts, st, edge[i], mm->buf_slot[mm->args->d[2].buf],
                             c_part[from[i]], out, &n_out);
        } else {
            c_part[i] = p->n_parts + 2; /* split_step adds A, B, C */
            rc = split_step(p, &cap_parts, st, edge[i], chain[i] >= 0, out, &n_out);
        }
    }
    free(c_part);
    if (rc) {
        if (out) free_tile_steps(out, total); /* calloc'd: unused entries are zero */
        free(out);
        free(edge); free(chain); free(from);
        return -1;
    }
    for (int i = 0; i < p->n_steps; i++) { /* the split steps' own arrays */
        if (!edge[i]) continue;
        free(p->steps[i].args); free(p->steps[i].buf_slot); free(p->steps[i].modes);
        free(p->steps[i].workerids);
        p->n_tiled++;
    }
    free(p->steps);
    free(edge); free(chain); free(from);
    p->steps = out;
    p->n_steps = n_out;
    return 0;
}

int tfc_tiling_is_parent(const struct plan *p, int slot)
{
    for (int q = 0; q < p->n_parts; q++)
        if (p->parts[q].slot == slot) return 1;
    return 0;
}

/* ---- runs ------------------------------------------------------------------------------- */

/* The filter: a contiguous vector of rows x cols elements into nr x nc matrix tiles (nx =
 * tile columns, the contiguous dimension; ny = tile rows; ld = cols), one level. */
static void tile_filter(void *father, void *child, struct starpu_data_filter *f, unsigned id,
                        unsigned nparts)
{
    const struct plan_part *pt = f->filter_arg_ptr;
    struct starpu_vector_interface *v = father;
    struct starpu_matrix_interface *mx = child;
    int64_t r = id / (unsigned)pt->nc, c = id % (unsigned)pt->nc;
    int64_t r0 = r * pt->tr, c0 = c * pt->tc;
    int64_t ny = r0 + pt->tr <= pt->rows ? pt->tr : pt->rows - r0;
    int64_t nx = c0 + pt->tc <= pt->cols ? pt->tc : pt->cols - c0;
    size_t es = v->elemsize, off = (size_t)(r0 * pt->cols + c0) * es;
    memset(mx, 0, sizeof *mx);
    mx->id = STARPU_MATRIX_INTERFACE_ID;
    mx->nx = (uint32_t)nx;
    mx->ny = (uint32_t)ny;
    mx->elemsize = es;
    mx->allocsize = (size_t)(nx * ny) * es;
    mx->ld = (uint32_t)pt->cols;
    if (v->dev_handle) { /* the parent is allocated on this node: the child is a view of it */
        if (v->ptr) mx->ptr = v->ptr + off;
        mx->dev_handle = v->dev_handle;
        mx->offset = v->offset + off;
    }
    (void)nparts;
}

static struct starpu_data_interface_ops *tile_child_ops(struct starpu_data_filter *f, unsigned id)
{
    (void)f; (void)id;
    return &starpu_interface_matrix_ops;
}

starpu_data_handle_t *tfc_tiling_partition(const struct plan *p, int q,
                                           starpu_data_handle_t parent)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = (unsigned)(pt->nr * pt->nc);
    starpu_data_handle_t *children = malloc(sizeof *children * n);
    if (!children) return NULL;
    struct starpu_data_filter f = {
        .filter_func = tile_filter,
        .nchildren = n,
        .get_child_ops = tile_child_ops,
        .filter_arg_ptr = (void *)pt,
    };
    starpu_data_partition_plan(parent, &f, children);
    if (pt->readonly)
        starpu_data_partition_readonly_submit(parent, n, children);
    else
        starpu_data_partition_submit(parent, n, children);
    return children;
}

void tfc_tiling_unpartition(const struct plan *p, int q, starpu_data_handle_t parent,
                            starpu_data_handle_t *children)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = (unsigned)(pt->nr * pt->nc);
    starpu_data_unpartition_submit(parent, n, children, -1);
    starpu_data_partition_clean(parent, n, children);
    free(children);
}

/* ---- the API ---------------------------------------------------------------------------- */

tfc_status tfc_session_set_tiling(tfc_session *s, double min_flops, int tile_size)
{
    if (!s) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "set_tiling: session is NULL");
    if (!(min_flops >= 0) || tile_size < 0 || tile_size > 65536) {
        char m[TFC_MSG_LEN];
        snprintf(m, sizeof m,
                 "set_tiling: min_flops must be >= 0 (0: off) and tile_size in [0, 65536] (0: "
                 "auto); got %g and %d", min_flops, tile_size);
        pthread_mutex_lock(&s->lock);
        snprintf(s->msg, sizeof s->msg, "%s", m);
        pthread_mutex_unlock(&s->lock);
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "%s", m);
    }
    pthread_mutex_lock(&s->lock);
    s->opt.tile_min = min_flops;
    s->opt.tile_size = tile_size;
    while (s->mru) tfc_cache_evict(s, s->mru); /* plans built with the old values are stale */
    pthread_mutex_unlock(&s->lock);
    return TFC_OK;
}
