/* tiling.c: large matmuls, and the element-wise steps and reductions that follow them, split
 * into tile tasks so that several workers share one node. A plan pass replaces such a matmul
 * step by one task per tile of the output, C[i,j] = op(A)[i,:] op(B)[:,j], over 2-D views
 * (StarPU matrix interfaces with a leading dimension) of the operands' contiguous buffers. Each
 * run partitions the operands with StarPU's asynchronous partitioning (plan, partition_submit /
 * partition_readonly_submit before the first tile task that uses a partition, unpartition_submit
 * and clean after the last), so sequential consistency orders the tiles after the producers of
 * A and B and the whole-tensor consumers of C after the tiles. Each tile is one gemm with
 * beta = 0 over the whole inner dimension. A matmul whose output is a single tile but whose
 * inner dimension is long is split along k instead (split_inner): one gemm per chunk of k
 * into a block of partial products, and one reduce task adding the blocks into C.
 *
 * C stays "live" (partitioned, its tiles holding its value) while the next steps that touch it
 * can read it tile by tile:
 *   - a fused element-wise step (codelets/fused.h; passes.c makes a lone element-wise op that
 *     reads a tiled matmul one too) over C's 2-D shape, reading C, tensors of that shape, row
 *     vectors ([n], [1, n]), column vectors ([m, 1]) and scalars: tile (i, j) reads tile (i, j)
 *     of C and of the other full inputs, block j of row vectors, block i of column vectors and
 *     scalars whole, and writes tile (i, j) of its outputs, which are live in turn;
 *   - a reduction (sum, mean, max, min, sum_to) of a live tensor over its rows, its columns or
 *     both: one task per tile writes a partial result, one more task reduces the partials
 *     (split_reduce). STARPU_REDUX is not used: the partials keep the order of the sums fixed.
 * The first step that reads or writes a live tensor whole ends its partition before it.
 *
 * Convolutions, their adjoints and pooling split over the batch instead (split_batch): one
 * task per block of images, the filter read whole; the filter gradient's blocks write partial
 * sums that one reduce task adds, as split-K's do. Large optimizer updates split over their
 * variable's rows (split_update): the variable, its slots and the gradient in blocks of rows.
 *
 * A plan whose every step is row-wise (tiling_rows.c: an MLP's inference over a large batch)
 * splits whole instead: every step through split_batch over one block of rows per CPU worker,
 * each block of an output read in place by the next step, so each worker runs its rows
 * through the whole network with no join; chain_blocks.c then makes each block's tile steps one
 * chain task, its intermediates in the worker's scratch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "plan.h"
#include "../codelets/bcast.h"
#include "../codelets/fused.h"

/* The automatic tile edge: the largest of these giving at least TILES_PER_WORKER output tiles
 * per worker (measured: bench/tiled_matmul.c), never below the last. Powers of two: a 2^k
 * matrix then splits into equal tiles. */
static const int64_t tile_edges[] = {1024, 512, 256};
#define TILES_PER_WORKER 4
/* Split-K (a single output tile over a long k): chunks per worker, and their least length (a
 * gemm of k = 256 still runs near peak; shorter chunks make the partial sums cost more). */
#define KCHUNKS_PER_WORKER 2
#define KCHUNK_MIN 256
/* Convolutions and pooling split over the batch from tile_min / BATCH_MIN_DIVISOR, counting
 * their bytes as work too (pooling's cost is its memory traffic): a block of images needs no
 * partial sums (the filter gradient's few aside), and a whole batch's activations overflow
 * the caches. The CNN's conv1 filter gradient (0.16 GFLOP) took 7.7 ms as one task and 2.1 ms
 * as 4 blocks and their sum; its 2x2 max pool (16 MB) held one worker while the other idled,
 * and so did the second pool (12.8 MB, 2.9 ms; below a sixteenth, 16.7 MB). */
#define BATCH_MIN_DIVISOR 32

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

/* Whether step st is a matmul worth splitting: 2-D, float, above the threshold, every operand
 * a buffer, its output an intermediate, and someone to share it with. */
static int big_matmul(const struct plan *p, const struct step *st, const struct plan_options *opt)
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
    return p->slots[st->buf_slot[a->d[2].buf]].kind == SLOT_TEMP;
}

/* A 2-D matmul step's shape: C [m, n] = op(A) op(B) over k, and its operands' slots. */
struct mm_shape {
    int ta, tb;
    int64_t m, n, k;
    int sa, sb, sc;
};

static struct mm_shape mm_shape_of(const struct step *st)
{
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = &a->d[2];
    struct mm_shape s = {a->attrs[MATMUL_TRANSPOSE_A].i != 0, a->attrs[MATMUL_TRANSPOSE_B].i != 0,
                         dc->dims[0], dc->dims[1], 0, st->buf_slot[da->buf],
                         st->buf_slot[db->buf], st->buf_slot[dc->buf]};
    s.k = s.ta ? da->dims[0] : da->dims[1];
    return s;
}

/* The output tile edge for step st, or 0 when its output stays whole. */
static int64_t tile_of(const struct plan *p, const struct step *st, const struct plan_options *opt)
{
    if (!big_matmul(p, st, opt)) return 0;
    const struct tfc_kdesc *c = &st->args->d[2];
    int64_t m = c->dims[0], n = c->dims[1];
    int64_t t = tile_edge(opt, m, n);
    return cdiv(m, t) * cdiv(n, t) > 1 ? t : 0;
}

/* The inner-dimension chunk of a big matmul whose output is a single tile (short and narrow,
 * over a long k: X^T dY of a large batch), or 0: TFC_TILE_SIZE when set, else k split in
 * KCHUNKS_PER_WORKER chunks per worker, at least KCHUNK_MIN long. */
static int64_t kchunk_of(const struct plan *p, const struct step *st,
                         const struct plan_options *opt)
{
    if (!big_matmul(p, st, opt) || tile_of(p, st, opt)) return 0;
    int64_t k = mm_shape_of(st).k, c = opt->tile_size;
    if (c <= 0) {
        int w = opt->tile_workers > 1 ? opt->tile_workers : 1;
        c = cdiv(k, (int64_t)KCHUNKS_PER_WORKER * w);
        if (c < KCHUNK_MIN) c = KCHUNK_MIN;
    }
    return cdiv(k, c) > 1 ? c : 0;
}

static int64_t batch_block(const struct plan *p, const struct step *st,
                           const struct plan_options *opt);

/* (a filter gradient's blocks are partial sums: its output is whole) */
int tfc_tiling_splits(const struct plan *p, const struct step *st, const struct plan_options *opt)
{
    if (!opt || opt->mp_split) return 0;
    if (tile_of(p, st, opt)) return 1;
    return batch_block(p, st, opt) > 0 && st->args->kind != TFC_K_CONV_BP_FILTER;
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
                                                (int)cdiv(rows, tr), (int)cdiv(cols, tc), -1, -1};
    return 0;
}

/* Rows and columns of tile (i, j) of partition pt (the last row and column may be short). */
static int64_t tile_rows(const struct plan_part *pt, int i)
{
    return (i + 1) * pt->tr <= pt->rows ? pt->tr : pt->rows - i * pt->tr;
}

static int64_t tile_cols(const struct plan_part *pt, int j)
{
    return (j + 1) * pt->tc <= pt->cols ? pt->tc : pt->cols - j * pt->tc;
}

static int same_grid(const struct plan_part *x, const struct plan_part *y)
{
    return x->rows == y->rows && x->cols == y->cols && x->tr == y->tr && x->tc == y->tc;
}

/* Whether partition pt's tiles are whole rows, so contiguous: they are vectors then, which
 * every kernel reads as a whole tensor of the shape its descriptor gives (a block of images
 * [b, C, H, W] is one; as a matrix its row stride would be C*H*W, not W). */
static int whole_rows(const struct plan_part *pt)
{
    return pt->tc == pt->cols;
}

static int same_placement(const struct step *x, const struct step *y)
{
    if (x->where != y->where || !x->workerids != !y->workerids) return 0;
    return !x->workerids || (x->workerids_len == y->workerids_len &&
                             !memcmp(x->workerids, y->workerids,
                                     sizeof(uint32_t) * x->workerids_len));
}

/* The pass state. A slot is "live" while a tiled step's tiles of it hold its value (a written
 * partition not yet ended): a following step can read those tiles in place. */
struct tiler {
    struct plan *p;
    struct step *out;      /* the new step list */
    int n_out, cap_out, cap_parts;
    int *live;             /* per slot (grown with the slots): the written partition holding
                            * it, or -1 */
    int *live_from;        /* per live slot: the (original) step whose tiles wrote it */
};

/* Room for n more steps in tl->out; 0, or -1 when out of memory. */
static int reserve(struct tiler *tl, int n)
{
    if (tl->n_out + n <= tl->cap_out) return 0;
    int c = tl->cap_out ? tl->cap_out : 16;
    while (c < tl->n_out + n) c *= 2;
    struct step *o = realloc(tl->out, sizeof *o * (size_t)c);
    if (!o) return -1;
    memset(o + tl->cap_out, 0, sizeof *o * (size_t)(c - tl->cap_out));
    tl->out = o;
    tl->cap_out = c;
    return 0;
}

/* Step ts: a copy of step st with its own arrays and room for nb >= st->n_buf buffers, none
 * in a partition yet (a step with buf_part owns its arrays); 0, or -1 when out of memory. */
static int alloc_tile_step(struct step *ts, const struct step *st, int nb)
{
    *ts = *st;
    ts->args = malloc(st->args_size);
    ts->buf_slot = malloc(sizeof(int) * (size_t)nb);
    ts->modes = malloc(sizeof *ts->modes * (size_t)nb);
    ts->buf_child = malloc(sizeof(int) * (size_t)nb);
    ts->workerids = st->workerids ? malloc(sizeof(uint32_t) * st->workerids_len) : NULL;
    ts->buf_part = malloc(sizeof(int) * (size_t)nb);
    if (!ts->args || !ts->buf_slot || !ts->modes || !ts->buf_part || !ts->buf_child ||
        (st->workerids && !ts->workerids)) {
        free(ts->args); free(ts->buf_slot); free(ts->modes); free(ts->buf_child);
        free(ts->workerids); free(ts->buf_part);
        memset(ts, 0, sizeof *ts);
        return -1;
    }
    if (st->workerids) memcpy(ts->workerids, st->workerids, sizeof(uint32_t) * st->workerids_len);
    memcpy(ts->args, st->args, st->args_size);
    memcpy(ts->buf_slot, st->buf_slot, sizeof(int) * (size_t)st->n_buf);
    memcpy(ts->modes, st->modes, sizeof *ts->modes * (size_t)st->n_buf);
    for (int b = 0; b < nb; b++) ts->buf_part[b] = -1, ts->buf_child[b] = 0;
    ts->parts_when = 0;
    return 0;
}

/* The next step of tl->out, a tile copy of st (nb buffers); NULL when out of memory. */
static struct step *push_tile(struct tiler *tl, const struct step *st, int nb)
{
    if (reserve(tl, 1)) return NULL;
    struct step *ts = &tl->out[tl->n_out];
    if (alloc_tile_step(ts, st, nb)) return NULL;
    tl->n_out++;
    return ts;
}

/* A descriptor's element count from its dims. */
static void set_numel(struct tfc_kdesc *d)
{
    d->numel = 1;
    for (int r = 0; r < d->rank; r++) d->numel *= d->dims[r];
}

static void set_live(struct tiler *tl, int slot, int part, int from)
{
    tl->live[slot] = part;
    tl->live_from[slot] = from;
}

/* A new intermediate slot of the plan: rows x cols elements of dtype dt; its index or -1. */
static int add_slot(struct tiler *tl, int dt, int64_t rows, int64_t cols)
{
    struct plan *p = tl->p;
    struct slot *sl = realloc(p->slots, sizeof *sl * (size_t)(p->n_slots + 1));
    if (!sl) return -1;
    p->slots = sl;
    int *lv = realloc(tl->live, sizeof(int) * (size_t)(p->n_slots + 1));
    if (lv) tl->live = lv;
    int *lf = lv ? realloc(tl->live_from, sizeof(int) * (size_t)(p->n_slots + 1)) : NULL;
    if (lf) tl->live_from = lf;
    if (!lv || !lf) return -1;
    struct slot *ns = &sl[p->n_slots];
    memset(ns, 0, sizeof *ns);
    ns->kind = SLOT_TEMP;
    ns->desc.dtype = (enum tfc_dtype)dt;
    ns->desc.shape.rank = 2;
    ns->desc.shape.dims[0] = rows;
    ns->desc.shape.dims[1] = cols;
    ns->numel = rows * cols;
    ns->ref = -1;
    tl->live[p->n_slots] = -1;
    return p->n_slots++;
}

/* ---- matmul: one task per output tile ------------------------------------------------------ */

/* Appends a gemm task of matmul step st on tiles: op(A) [tm, tk] (child child[0] of
 * partition first, over slots[0]), op(B) [tk, tn] (child[1] of first + 1), C [tm, tn] (child[2]
 * of first + 2: a tile of C, or a block of partial products); three buffers even when A and
 * B are one tensor. NULL when out of memory. */
static struct step *push_gemm(struct tiler *tl, const struct step *st, const int slots[3],
                              int first, const int child[3], int64_t tm, int64_t tk, int64_t tn)
{
    struct step *ts = push_tile(tl, st, 3);
    if (!ts) return NULL;
    const struct tfc_kargs *a = st->args;
    int ta = a->attrs[MATMUL_TRANSPOSE_A].i != 0, tb = a->attrs[MATMUL_TRANSPOSE_B].i != 0;
    struct tfc_kargs *ka = ts->args; /* a copy of a */
    int64_t dims[3][2] = {{ta ? tk : tm, ta ? tm : tk}, {tb ? tn : tk, tb ? tk : tn}, {tm, tn}};
    for (int b = 0; b < 3; b++) {
        ka->d[b].dims[0] = dims[b][0];
        ka->d[b].dims[1] = dims[b][1];
        set_numel(&ka->d[b]);
        ka->d[b].buf = b;
        ts->buf_slot[b] = slots[b];
        ts->modes[b] = b < 2 ? STARPU_R : STARPU_W;
        ts->buf_part[b] = first + b;
        ts->buf_child[b] = child[b];
    }
    ts->n_buf = 3;
    tfc_kargs_finish(ka);
    ts->cost = st->cost * ka->flops / (a->flops > 0 ? a->flops : 1);
    return ts;
}

/* Appends the tile steps of matmul step si (edge t): C[i,j] = op(A)[i,:] op(B)[:,j]. */
static int split_matmul(struct tiler *tl, int si, int64_t t)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1];
    struct mm_shape s = mm_shape_of(st);
    int ta = s.ta, tb = s.tb, sa = s.sa, sb = s.sb, sc = s.sc;
    int64_t m = s.m, n = s.n, k = s.k;
    int first = p->n_parts;
    /* A's row blocks of op(A) (column blocks of A when transposed), B's column blocks of op(B)
     * (row blocks when transposed), C's 2-D tiles */
    if (add_part(p, &tl->cap_parts, sa, 1, da->dims[0], da->dims[1], ta ? k : t, ta ? t : k) ||
        add_part(p, &tl->cap_parts, sb, 1, db->dims[0], db->dims[1], tb ? t : k, tb ? k : t) ||
        add_part(p, &tl->cap_parts, sc, 0, m, n, t, t))
        return -1;
    tl->live[sa] = tl->live[sb] = -1; /* read through new partitions: earlier tiles end first */
    const struct plan_part *pc = &p->parts[first + 2];
    for (int i = 0; i < pc->nr; i++)
        for (int j = 0; j < pc->nc; j++) {
            int slots[3] = {sa, sb, sc}, child[3] = {i, j, i * pc->nc + j};
            if (!push_gemm(tl, st, slots, first, child, tile_rows(pc, i), k, tile_cols(pc, j)))
                return -1;
        }
    set_live(tl, sc, first + 2, si);
    return 0;
}

/* Appends the step that sums the nb blocks of intermediate ps (seen as [nb, numel of the
 * output], over axis 0, in double) into slot sc, the output of step st: a reduce step of its
 * own arguments (two operands). sc's tiles, if any, end before it. */
static int push_block_sum(struct tiler *tl, const struct step *st, int ps, int64_t nb, int sc)
{
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *dc = &a->d[a->n_in];
    struct step *fs = push_tile(tl, st, st->n_buf > 2 ? st->n_buf : 2); /* two used */
    if (!fs) return -1;
    size_t size = sizeof(struct tfc_kargs) + 2 * sizeof(struct tfc_kdesc);
    struct tfc_kargs *ra = calloc(1, size);
    if (!ra) return -1; /* fs still owns the copy of st's arguments, freed with it */
    free(fs->args);
    fs->args = ra;
    fs->args_size = size;
    fs->cl = &tfc_cl_reduce;
    ra->kind = TFC_K_REDUCE_SUM;
    ra->node = a->node;
    ra->n_in = 1;
    ra->n_out = 1;
    ra->attrs[REDUCE_AXES].n = 1; /* axes {0}: the blocks */
    ra->d[0] = (struct tfc_kdesc){.dtype = dc->dtype, .rank = 2, .dims = {nb, dc->numel},
                                  .numel = nb * dc->numel, .buf = 0};
    ra->d[1] = *dc;
    ra->d[1].buf = 1;
    fs->n_buf = 2;
    fs->buf_slot[0] = ps, fs->modes[0] = STARPU_R;
    fs->buf_slot[1] = sc, fs->modes[1] = STARPU_W;
    tfc_kargs_finish(ra);
    fs->cost = st->cost * (double)(nb * dc->numel) / (a->flops > 0 ? a->flops : 1);
    tl->live[sc] = -1;
    return 0;
}

/* Appends the steps of matmul step si split along k in chunks of c (kc of them): chunk i
 * computes op(A)[:, chunk i] op(B)[chunk i, :] into block i of a new intermediate P
 * [kc * m, n], one gemm each with beta = 0; then one reduce step sums P's blocks (P seen as
 * [kc, m * n], over axis 0, in double) into C. A partial sum per chunk instead of
 * STARPU_REDUX accumulation: the order of the sums, and so the result, does not depend on
 * which worker ran which chunk. */
static int split_inner(struct tiler *tl, int si, int64_t c)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *da = &a->d[0], *db = &a->d[1], *dc = &a->d[2];
    struct mm_shape s = mm_shape_of(st);
    int ta = s.ta, tb = s.tb, sa = s.sa, sb = s.sb, sc = s.sc;
    int64_t m = s.m, n = s.n, k = s.k, kc = cdiv(k, c);
    int ps = add_slot(tl, dc->dtype, kc * m, n);
    if (ps < 0) return -1;
    int first = p->n_parts;
    /* A's column blocks (row blocks when transposed), B's row blocks (column blocks when
     * transposed), P's blocks of m rows */
    if (add_part(p, &tl->cap_parts, sa, 1, da->dims[0], da->dims[1], ta ? c : m, ta ? m : c) ||
        add_part(p, &tl->cap_parts, sb, 1, db->dims[0], db->dims[1], tb ? n : c, tb ? c : n) ||
        add_part(p, &tl->cap_parts, ps, 0, kc * m, n, m, n))
        return -1;
    tl->live[sa] = tl->live[sb] = -1;
    for (int i = 0; i < (int)kc; i++) {
        int slots[3] = {sa, sb, ps}, child[3] = {i, i, i};
        if (!push_gemm(tl, st, slots, first, child, m, (i + 1) * c <= k ? c : k - i * c, n))
            return -1;
    }
    return push_block_sum(tl, st, ps, kc, sc);
}

/* ---- convolutions and pooling: one task per block of images ------------------------------- */

extern struct starpu_codelet tfc_cl_conv, tfc_cl_pool;

/* The operands of step st that split over the batch dim N (bit i: descriptor i), or 0 when st
 * is no convolution or pooling step. The kernels loop over the images (pooling over N * C
 * planes) and compute each alone, so a block of images is the same computation on a shorter
 * batch: the activations and their gradients split, the filter is read whole. The filter
 * gradient sums over the images: each block writes its own partial sum (split_batch). */
static unsigned batch_operands(const struct step *st)
{
    const struct tfc_kargs *a = st->args;
    if (st->cl == &tfc_cl_pool) return (1u << (a->n_in + a->n_out)) - 1; /* all, indices too */
    if (st->cl != &tfc_cl_conv) return 0;
    switch (a->kind) {
    case TFC_K_CONV: return 1u << 0 | 1u << 2;                      /* x, y */
    case TFC_K_CONV_BP_INPUT: /* dy, x_like, dx; conv_transpose: x, y (no x_like) */
        return 1u << 0 | 1u << 2 | 1u << 3;
    case TFC_K_CONV_BP_FILTER: return 1u << 0 | 1u << 1;            /* x, dy */
    default: return 0;
    }
}

/* Whether step st is a convolution or pooling worth splitting over its batch: above the
 * threshold (BATCH_MIN_DIVISOR), a batch of two or more that every split operand shares, no
 * operand read both whole and split, its output an intermediate, someone to share it with. */
static int big_batch_op(const struct plan *p, const struct step *st,
                        const struct plan_options *opt)
{
    const struct tfc_kargs *a = st->args;
    unsigned split = batch_operands(st);
    if (opt->tile_min <= 0 || !split || a->flops + a->bytes < opt->tile_min / BATCH_MIN_DIVISOR)
        return 0;
    if (opt->tile_size == 0 && opt->tile_workers < 2) return 0; /* auto: nobody to share with */
    const struct tfc_kdesc *o = &a->d[a->n_in];
    if (o->buf < 0 || p->slots[st->buf_slot[o->buf]].kind != SLOT_TEMP) return 0;
    int64_t n = a->d[0].rank > 0 ? a->d[0].dims[0] : 0;
    unsigned whole_bufs = 0, split_bufs = 0;
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        if (split >> i & 1 && (d->rank < 1 || d->dims[0] != n)) return 0;
        if (d->buf < 0) continue;
        if (d->numel > UINT32_MAX) return 0;
        if (split >> i & 1) split_bufs |= 1u << d->buf;
        else whole_bufs |= 1u << d->buf;
    }
    return n >= 2 && !(whole_bufs & split_bufs);
}

/* Images per task of step st, or 0 when it stays whole: TFC_TILE_SIZE when set, else the
 * batch over TILES_PER_WORKER tasks per worker. The filter gradient too, though its blocks'
 * partial sums are added afterwards: a filter is small (the CNN's conv2: 51 200 floats, their
 * sum 0.2-0.3 ms), while its 4 blocks of ~6 ms left the step's tail to one worker. */
static int64_t batch_block(const struct plan *p, const struct step *st,
                           const struct plan_options *opt)
{
    if (!big_batch_op(p, st, opt)) return 0;
    int64_t n = st->args->d[0].dims[0], b = opt->tile_size;
    if (b <= 0) {
        int w = opt->tile_workers > 1 ? opt->tile_workers : 1;
        b = cdiv(n, (int64_t)TILES_PER_WORKER * w);
    }
    return cdiv(n, b) > 1 ? b : 0;
}

/* Appends the steps of convolution or pooling step si over blocks of b images (nt blocks):
 * each split operand (bit i of split: descriptor i), seen as [N, numel / N], is partitioned
 * into blocks of b rows; task t runs the node's kernel on block t of each, the other operands
 * whole (the same split serves any row-wise step of a plan split into chains of rows:
 * tiling_rows.c). The filter gradient's
 * task t writes its block's sum into row t of a new intermediate P [nt, numel of dw], and one
 * reduce step adds P's rows into dw (in double; the order of the sums is fixed, but not the
 * untiled one: equal to it within float summation error). */
static int split_batch(struct tiler *tl, int si, int64_t b, unsigned split)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct tfc_kdesc *o = &a->d[a->n_in];
    int lead = 0; /* the first split operand: its dim 0 is the batch (a fused step's first
                   * input may be a scalar) */
    while (!(split >> lead & 1)) lead++;
    int64_t n = a->d[lead].dims[0], nt = cdiv(n, b);
    int filter = st->cl == &tfc_cl_conv && a->kind == TFC_K_CONV_BP_FILTER;
    int so = st->buf_slot[o->buf], ps = filter ? add_slot(tl, o->dtype, nt, o->numel) : -1;
    if (filter && ps < 0) return -1;
    int bpart[STARPU_NMAXBUFS]; /* per buffer: its partition, or -1 when used whole */
    for (int j = 0; j < st->n_buf; j++) bpart[j] = -1;
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        if (!(split >> i & 1) || d->buf < 0 || bpart[d->buf] >= 0) continue;
        int s = st->buf_slot[d->buf];
        struct plan_part want = {s, i < a->n_in, n, d->numel / n, b, d->numel / n};
        if (i < a->n_in && tl->live[s] >= 0 && same_grid(&p->parts[tl->live[s]], &want) &&
            same_placement(&p->steps[tl->live_from[s]], st)) {
            bpart[d->buf] = tl->live[s]; /* the same blocks, written before: read in place */
            continue;
        }
        if (add_part(p, &tl->cap_parts, s, i < a->n_in, n, d->numel / n, b, d->numel / n))
            return -1;
        bpart[d->buf] = p->n_parts - 1;
        tl->live[s] = -1; /* read through a new partition: earlier tiles end first */
    }
    if (filter) {
        if (add_part(p, &tl->cap_parts, ps, 0, nt, o->numel, 1, o->numel)) return -1;
        bpart[o->buf] = p->n_parts - 1;
    }
    for (int t = 0; t < nt; t++) {
        struct step *ts = push_tile(tl, st, st->n_buf);
        if (!ts) return -1;
        struct tfc_kargs *ka = ts->args;
        for (int i = 0; i < ka->n_in + ka->n_out; i++)
            if (split >> i & 1) {
                ka->d[i].dims[0] = (t + 1) * b <= n ? b : n - t * b;
                set_numel(&ka->d[i]);
            }
        for (int j = 0; j < ts->n_buf; j++)
            if (bpart[j] >= 0) ts->buf_part[j] = bpart[j], ts->buf_child[j] = t;
        if (filter) ts->buf_slot[o->buf] = ps;
        tfc_kargs_finish(ka);
        if (st->cl == &tfc_cl_fused) { /* and the program, as passes.c's emit() does */
            const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
            ka->footprint = starpu_hash_crc32c_be_n(pg, sizeof *pg, ka->footprint);
            ka->flops = (double)ka->d[a->n_in].numel * (pg->n_ops ? pg->n_ops : 1);
        }
        ts->cost = st->cost * ka->flops / (a->flops > 0 ? a->flops : 1);
    }
    if (filter) return push_block_sum(tl, st, ps, nt, so);
    /* its blocks hold its outputs: a fused step (split_fused_batch) or another batch split
     * over the same blocks reads them in place */
    for (int i = a->n_in; i < a->n_in + a->n_out; i++)
        if (split >> i & 1 && a->d[i].buf >= 0)
            set_live(tl, st->buf_slot[a->d[i].buf], bpart[a->d[i].buf], si);
    return 0;
}

/* ---- element-wise after a batch split: a fused step over the same blocks of images -------- */

/* How operand d of a fused step relates to its output o split over the batch: of o's shape
 * (split too), not varying over the batch (a lower rank, or a batch dim of 1: read whole, the
 * kernel broadcasts it over the block as over the batch), or neither. */
enum { BATCH_NONE, BATCH_FULL, BATCH_WHOLE };

static int batch_kind(const struct tfc_kdesc *d, const struct tfc_kdesc *o)
{
    if (d->buf < 0 || d->numel > UINT32_MAX || d->dtype != o->dtype) return BATCH_NONE;
    if (d->rank < o->rank || (d->rank == o->rank && d->dims[0] == 1)) return BATCH_WHOLE;
    if (d->rank != o->rank) return BATCH_NONE;
    for (int r = 0; r < d->rank; r++)
        if (d->dims[r] != o->dims[r]) return BATCH_NONE;
    return BATCH_FULL;
}

/* The live batch partition (blocks of whole images, split_batch) fused step si follows, or -1:
 * an input of its output's shape held in such blocks by a step placed like it; every operand
 * of that shape or not varying over the batch; inputs of the output's shape live only in the
 * same blocks; its outputs intermediates of that shape. The conv's bias add and ReLU ran as
 * one task after the conv's blocks (the CNN's conv1: 1.4 ms while the other worker idled). */
static int batch_fused_source(const struct tiler *tl, int si)
{
    const struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    if (st->cl != &tfc_cl_fused || a->kind != TFC_K_FUSED) return -1;
    const struct tfc_kdesc *o = &a->d[a->n_in];
    if (o->rank < 2 || o->dims[0] < 2) return -1;
    int q = -1;
    for (int k = 0; k < a->n_in && q < 0; k++) {
        int s = a->d[k].buf >= 0 ? st->buf_slot[a->d[k].buf] : -1;
        if (s < 0 || tl->live[s] < 0 || batch_kind(&a->d[k], o) != BATCH_FULL) continue;
        const struct plan_part *pt = &p->parts[tl->live[s]];
        if (whole_rows(pt) && pt->rows == o->dims[0] && pt->rows * pt->cols == o->numel &&
            same_placement(&p->steps[tl->live_from[s]], st))
            q = tl->live[s];
    }
    if (q < 0) return -1;
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const struct tfc_kdesc *d = &a->d[k];
        int kind = batch_kind(d, o);
        if (kind == BATCH_NONE || (k >= a->n_in && kind != BATCH_FULL)) return -1;
        int s = st->buf_slot[d->buf];
        if (k >= a->n_in && (p->slots[s].kind != SLOT_TEMP || tl->live[s] >= 0)) return -1;
        if (k < a->n_in && tl->live[s] >= 0 &&
            (kind != BATCH_FULL || !same_grid(&p->parts[tl->live[s]], &p->parts[q])))
            return -1;
    }
    return q;
}

/* Appends the tile steps of fused step si over the blocks of live batch partition q: block t
 * reads block t of each input of the output's shape (live ones in place, others through a
 * read-only partition of the same blocks), the others whole, and writes block t of its
 * outputs, which become live. */
static int split_fused_batch(struct tiler *tl, int si, int q)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct plan_part grid = p->parts[q]; /* a copy: add_part may move p->parts */
    const struct tfc_kdesc *o = &a->d[a->n_in];
    int bpart[STARPU_NMAXBUFS]; /* per buffer: its partition, or -1 when read whole */
    for (int j = 0; j < st->n_buf; j++) bpart[j] = -1;
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const struct tfc_kdesc *d = &a->d[k];
        int s = st->buf_slot[d->buf];
        if (batch_kind(d, o) != BATCH_FULL || bpart[d->buf] >= 0) continue;
        if (k < a->n_in && tl->live[s] >= 0) {
            bpart[d->buf] = tl->live[s];
            continue;
        }
        if (add_part(p, &tl->cap_parts, s, k < a->n_in, grid.rows, grid.cols, grid.tr, grid.tc))
            return -1;
        bpart[d->buf] = p->n_parts - 1;
    }
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    for (int t = 0; t < grid.nr; t++) {
        struct step *ts = push_tile(tl, st, st->n_buf);
        if (!ts) return -1;
        struct tfc_kargs *ka = ts->args;
        int64_t tm = tile_rows(&grid, t);
        for (int k = 0; k < a->n_in + a->n_out; k++)
            if (batch_kind(&a->d[k], o) == BATCH_FULL) {
                ka->d[k].dims[0] = tm;
                set_numel(&ka->d[k]);
            }
        for (int j = 0; j < ts->n_buf; j++)
            if (bpart[j] >= 0) ts->buf_part[j] = bpart[j], ts->buf_child[j] = t;
        tfc_kargs_finish(ka); /* and the program, as passes.c's emit() does */
        ka->footprint = starpu_hash_crc32c_be_n(pg, sizeof *pg, ka->footprint);
        ka->flops = (double)(tm * grid.cols) * (pg->n_ops ? pg->n_ops : 1);
        ts->cost = st->cost * (double)tm / (double)grid.rows;
    }
    for (int k = a->n_in; k < a->n_in + a->n_out; k++)
        set_live(tl, st->buf_slot[a->d[k].buf], bpart[a->d[k].buf], si);
    return 0;
}

/* ---- optimizer updates: one task per block of the variable's rows ------------------------- */

/* Whether step st is an optimizer update (apply_*) worth splitting over its variable's first
 * dimension: above the threshold of batch splits (the update is memory bound: its bytes count),
 * every operand either of the variable's shape (the variable, its slots, the gradient) or a
 * scalar (learning rate, step count), someone to share it with. Each element is updated
 * alone, so a block of rows is the same computation on a shorter variable: the result is
 * bit-identical. The CNN's Adam on its 3136x1024 dense kernel took 7.8 ms as one task near
 * the end of the step while the other worker idled. */
static int big_update(const struct step *st, const struct plan_options *opt)
{
    const struct tfc_kargs *a = st->args;
    if (opt->tile_min <= 0 || st->cl != &tfc_cl_optimizer || a->kind == TFC_K_LR_SCHEDULE)
        return 0;
    if (a->flops + a->bytes < opt->tile_min / BATCH_MIN_DIVISOR) return 0;
    if (opt->tile_size == 0 && opt->tile_workers < 2) return 0; /* auto: nobody to share with */
    const struct tfc_kdesc *v = &a->d[0];
    if (v->rank < 1 || v->dims[0] < 2 || v->numel < 2 || v->numel > UINT32_MAX) return 0;
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        if (d->buf < 0) return 0;
        if (d->numel != 1 && (d->numel != v->numel || d->dims[0] != v->dims[0])) return 0;
    }
    return 1;
}

/* Rows of the variable per task of update step st, or 0 when it stays whole: TFC_TILE_SIZE
 * when set, else the rows over TILES_PER_WORKER tasks per worker. */
static int64_t update_block(const struct step *st, const struct plan_options *opt)
{
    if (!big_update(st, opt)) return 0;
    int64_t rows = st->args->d[0].dims[0], b = opt->tile_size;
    if (b <= 0) {
        int w = opt->tile_workers > 1 ? opt->tile_workers : 1;
        b = cdiv(rows, (int64_t)TILES_PER_WORKER * w);
    }
    return cdiv(rows, b) > 1 ? b : 0;
}

/* Appends the steps of update step si over blocks of b rows of its variable: each operand of
 * the variable's shape, seen as [rows, numel / rows], is partitioned into blocks of b rows
 * (contiguous: whole rows), written in place for the variable and its slots, read for the
 * gradient; task t updates block t, the scalars read whole. */
static int split_update(struct tiler *tl, int si, int64_t b)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    int64_t rows = a->d[0].dims[0], cols = a->d[0].numel / rows, nt = cdiv(rows, b);
    int bpart[STARPU_NMAXBUFS]; /* per buffer: its partition, or -1 when read whole */
    for (int j = 0; j < st->n_buf; j++) bpart[j] = -1;
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        const struct tfc_kdesc *d = &a->d[i];
        if (d->numel == 1 || bpart[d->buf] >= 0) continue;
        int s = st->buf_slot[d->buf];
        if (add_part(p, &tl->cap_parts, s, st->modes[d->buf] == STARPU_R, rows, cols, b, cols))
            return -1;
        bpart[d->buf] = p->n_parts - 1;
    }
    for (int j = 0; j < st->n_buf; j++) tl->live[st->buf_slot[j]] = -1; /* none stays live */
    for (int t = 0; t < nt; t++) {
        struct step *ts = push_tile(tl, st, st->n_buf);
        if (!ts) return -1;
        struct tfc_kargs *ka = ts->args;
        for (int i = 0; i < ka->n_in + ka->n_out; i++)
            if (ka->d[i].numel != 1) {
                ka->d[i].dims[0] = (t + 1) * b <= rows ? b : rows - t * b;
                set_numel(&ka->d[i]);
            }
        for (int j = 0; j < ts->n_buf; j++)
            if (bpart[j] >= 0) ts->buf_part[j] = bpart[j], ts->buf_child[j] = t;
        tfc_kargs_finish(ka);
        ts->cost = st->cost * (double)ka->d[0].numel / (double)a->d[0].numel;
    }
    return 0;
}

/* ---- element-wise: a fused step over the tiles of a live input ---------------------------- */

/* How operand d of a fused step relates to an [m, n] output tiled by grid pt. */
enum { EW_NONE, EW_FULL, EW_ROW, EW_COL, EW_SCALAR };

static int ew_kind(const struct tfc_kdesc *d, int64_t m, int64_t n)
{
    if (d->buf < 0 || d->numel > UINT32_MAX) return EW_NONE;
    if (d->numel == 1) return EW_SCALAR;
    if (d->rank == 2 && d->dims[0] == m && d->dims[1] == n) return EW_FULL;
    if ((d->rank == 1 && d->dims[0] == n) || (d->rank == 2 && d->dims[0] == 1 && d->dims[1] == n))
        return EW_ROW;
    if (d->rank == 2 && d->dims[0] == m && d->dims[1] == 1) return EW_COL;
    return EW_NONE;
}

/* The live partition fused step si reads in tiles, or -1: a live input of its output's 2-D
 * shape, written by a step placed like it; every other operand full (inputs of another grid
 * than the live one's are not), a row [n] / [1, n] or column [m, 1] vector, or a scalar; its
 * outputs intermediates of that shape. */
static int fused_source(const struct tiler *tl, int si)
{
    const struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    if (st->cl != &tfc_cl_fused || a->kind != TFC_K_FUSED) return -1;
    int q = -1;
    for (int k = 0; k < a->n_in && q < 0; k++) {
        int s = st->buf_slot[a->d[k].buf];
        if (a->d[k].buf >= 0 && tl->live[s] >= 0 &&
            same_placement(&p->steps[tl->live_from[s]], st))
            q = tl->live[s];
    }
    if (q < 0) return -1;
    const struct plan_part *pt = &p->parts[q];
    const struct tfc_kdesc *o = &a->d[a->n_in];
    for (int k = 0; k < a->n_in + a->n_out; k++) {
        const struct tfc_kdesc *d = &a->d[k];
        if (d->dtype != o->dtype) return -1;
        int kind = ew_kind(d, pt->rows, pt->cols);
        if (k >= a->n_in ? kind != EW_FULL : kind == EW_NONE) return -1;
        int s = st->buf_slot[d->buf];
        if (k >= a->n_in && p->slots[s].kind != SLOT_TEMP) return -1;
        if (k < a->n_in && tl->live[s] >= 0 &&
            (kind != EW_FULL || !same_grid(&p->parts[tl->live[s]], pt)))
            return -1;
    }
    return q;
}

/* Appends the tile steps of fused step si over the grid of live partition q: tile (i, j)
 * reads tile (i, j) of each full input (live ones in place, others through a read-only
 * partition), column block j of row vectors, row block i of column vectors, scalars whole,
 * and writes tile (i, j) of its outputs, which become live. */
static int split_fused(struct tiler *tl, int si, int q)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct plan_part grid = p->parts[q]; /* a copy: add_part may move p->parts */
    int nd = a->n_in + a->n_out;
    int kind[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT], part[TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT];
    for (int k = 0; k < nd; k++) { /* emit() gives descriptor k buffer k */
        const struct tfc_kdesc *d = &a->d[k];
        int slot = st->buf_slot[d->buf], ro = k < a->n_in;
        kind[k] = ew_kind(d, grid.rows, grid.cols);
        part[k] = -1;
        if (kind[k] == EW_FULL && ro && tl->live[slot] >= 0) {
            part[k] = tl->live[slot];
            continue;
        }
        int r = 0;
        if (kind[k] == EW_FULL)
            r = add_part(p, &tl->cap_parts, slot, ro, grid.rows, grid.cols, grid.tr, grid.tc);
        else if (kind[k] == EW_ROW)
            r = add_part(p, &tl->cap_parts, slot, 1, 1, grid.cols, 1, grid.tc);
        else if (kind[k] == EW_COL)
            r = add_part(p, &tl->cap_parts, slot, 1, grid.rows, 1, grid.tr, 1);
        else
            continue;
        if (r) return -1;
        part[k] = p->n_parts - 1;
    }
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    for (int i = 0; i < grid.nr; i++)
        for (int j = 0; j < grid.nc; j++) {
            struct step *ts = push_tile(tl, st, st->n_buf);
            if (!ts) return -1;
            int64_t tm = tile_rows(&grid, i), tn = tile_cols(&grid, j);
            struct tfc_kargs *ka = ts->args;
            for (int k = 0; k < nd; k++) {
                struct tfc_kdesc *d = &ka->d[k];
                int b = d->buf;
                ts->buf_part[b] = part[k];
                if (kind[k] == EW_FULL) {
                    d->dims[0] = tm, d->dims[1] = tn;
                    ts->buf_child[b] = i * grid.nc + j;
                } else if (kind[k] == EW_ROW) {
                    d->dims[d->rank - 1] = tn;
                    ts->buf_child[b] = j;
                } else if (kind[k] == EW_COL) {
                    d->dims[0] = tm;
                    ts->buf_child[b] = i;
                }
                set_numel(d);
            }
            tfc_kargs_finish(ka); /* and the program, as passes.c's emit() does */
            ka->footprint = starpu_hash_crc32c_be_n(pg, sizeof *pg, ka->footprint);
            ka->flops = (double)(tm * tn) * (pg->n_ops ? pg->n_ops : 1);
            ts->cost = st->cost * (double)(tm * tn) / (double)(grid.rows * grid.cols);
        }
    for (int k = a->n_in; k < nd; k++) set_live(tl, st->buf_slot[a->d[k].buf], part[k], si);
    return 0;
}

/* ---- reductions: partial results per tile, then one step over them ------------------------ */

/* Which axes of its 2-D input reduce step st reduces (bit 0: rows, axis 0; bit 1: columns), or
 * 0 when it is not a reduction tiling takes. */
static int reduce_axes(const struct step *st)
{
    const struct tfc_kargs *a = st->args;
    if (st->cl != &tfc_cl_reduce) return 0;
    if (a->kind != TFC_K_REDUCE_SUM && a->kind != TFC_K_REDUCE_MEAN &&
        a->kind != TFC_K_REDUCE_MAX && a->kind != TFC_K_REDUCE_MIN && a->kind != TFC_K_SUM_TO)
        return 0;
    const struct tfc_kdesc *d = &a->d[0], *o = &a->d[a->n_in];
    if (d->rank != 2 || d->buf < 0 || o->buf < 0 || o->dtype != d->dtype) return 0;
    int reduced[TFC_K_MAX_RANK];
    tfc_reduced_axes(a, reduced);
    return (reduced[0] ? 1 : 0) | (reduced[1] ? 2 : 0);
}

/* The live partition reduce step si reads in tiles, or -1. */
static int reduce_source(const struct tiler *tl, int si)
{
    const struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    if (!reduce_axes(st)) return -1;
    const struct tfc_kdesc *d = &st->args->d[0];
    int s = st->buf_slot[d->buf];
    if (tl->live[s] < 0 || !same_placement(&p->steps[tl->live_from[s]], st)) return -1;
    const struct plan_part *pt = &p->parts[tl->live[s]];
    return pt->rows == d->dims[0] && pt->cols == d->dims[1] ? tl->live[s] : -1;
}

/* Appends the steps of reduce step si over the tiles of live partition q, [m, n] in tiles of
 * tr x tc (mt x nt of them): tile (i, j) reduces its tile into a partial result, kept in a new
 * intermediate P, and one step reduces P into the node's output:
 *   rows (axis 0):    P [mt, n],  tile (i, j) writes P[i, block j]  (a 1 x tn tile of P)
 *   columns (axis 1): P [nt, m],  tile (i, j) writes P[j, block i]  (rows keep tiles contiguous)
 *   both:             P [mt, nt], tile (i, j) writes P[i, j]
 * and the last step reduces P over its axis 0 (over everything for both). Sums and means add
 * partial sums (the mean divides by the whole count), max and min take those of the tiles. */
static int split_reduce(struct tiler *tl, int si, int q)
{
    struct plan *p = tl->p;
    const struct step *st = &p->steps[si];
    const struct tfc_kargs *a = st->args;
    const struct plan_part grid = p->parts[q];
    int axes = reduce_axes(st);
    int partial_kind = a->kind == TFC_K_REDUCE_MAX || a->kind == TFC_K_REDUCE_MIN
                           ? a->kind : TFC_K_REDUCE_SUM;
    int64_t pr = axes == 2 ? grid.nc : grid.nr, pc = axes == 1 ? grid.cols
                                                  : axes == 2 ? grid.rows : grid.nc;
    int ps = add_slot(tl, a->d[0].dtype, pr, pc); /* (moves p->slots, not p->steps) */
    if (ps < 0) return -1;
    if (add_part(p, &tl->cap_parts, ps, 0, pr, pc, 1, axes == 1 ? grid.tc : axes == 2 ? grid.tr
                                                                                        : 1))
        return -1;
    int pp = p->n_parts - 1, xb = a->d[0].buf, ob = a->d[a->n_in].buf;
    for (int i = 0; i < grid.nr; i++)
        for (int j = 0; j < grid.nc; j++) {
            struct step *ts = push_tile(tl, st, st->n_buf);
            if (!ts) return -1;
            struct tfc_kargs *ka = ts->args;
            int64_t tm = tile_rows(&grid, i), tn = tile_cols(&grid, j);
            ka->kind = partial_kind;
            struct tfc_kattr *ax = &ka->attrs[REDUCE_AXES]; /* 0, 1, or all (none listed) */
            *ax = (struct tfc_kattr){0};
            if (axes != 3) ax->n = 1, ax->v[0] = axes == 1 ? 0 : 1;
            ka->attrs[REDUCE_MEAN_COUNT].i = 0;
            ka->d[0].dims[0] = tm, ka->d[0].dims[1] = tn;
            set_numel(&ka->d[0]);
            struct tfc_kdesc *o = &ka->d[ka->n_in];
            o->rank = 1;
            o->dims[0] = axes == 1 ? tn : axes == 2 ? tm : 1;
            set_numel(o);
            ts->buf_part[xb] = q;
            ts->buf_child[xb] = i * grid.nc + j;
            ts->buf_slot[ob] = ps;
            ts->modes[ob] = STARPU_W;
            ts->buf_part[ob] = pp;
            ts->buf_child[ob] = axes == 2 ? j * grid.nr + i : i * grid.nc + j;
            tfc_kargs_finish(ka);
            ts->cost = st->cost * (double)(tm * tn) / (double)(grid.rows * grid.cols);
        }
    /* the last step: P reduced over its rows (everything for both), whole */
    struct step *fs = push_tile(tl, st, st->n_buf);
    if (!fs) return -1;
    struct tfc_kargs *ka = fs->args;
    if (a->kind == TFC_K_SUM_TO) ka->kind = TFC_K_REDUCE_SUM;
    ka->attrs[REDUCE_AXES] = (struct tfc_kattr){0};
    if (axes != 3) ka->attrs[REDUCE_AXES].n = 1, ka->attrs[REDUCE_AXES].v[0] = 0;
    ka->attrs[REDUCE_MEAN_COUNT].i =
        a->kind == TFC_K_REDUCE_MEAN ? a->d[0].numel / a->d[a->n_in].numel : 0;
    ka->d[0].dims[0] = pr, ka->d[0].dims[1] = pc;
    set_numel(&ka->d[0]);
    fs->buf_slot[xb] = ps;
    tfc_kargs_finish(ka);
    fs->cost = st->cost * (double)(pr * pc) / (double)(grid.rows * grid.cols);
    return 0;
}

/* ---- the pass ---------------------------------------------------------------------------- */

static void free_tile_steps(struct step *steps, int n)
{
    for (int i = 0; i < n; i++) {
        if (!steps[i].buf_part) continue; /* a copy of an untiled step: owns nothing */
        free(steps[i].args); free(steps[i].buf_slot); free(steps[i].modes);
        free(steps[i].buf_part); free(steps[i].buf_child); free(steps[i].workerids);
    }
}

/* Each partition is submitted before its first tile task and ended after its last one. */
static void mark_lifetimes(struct plan *p, struct step *steps, int n)
{
    for (int q = 0; q < p->n_parts; q++) p->parts[q].first = p->parts[q].last = -1;
    for (int i = 0; i < n; i++)
        for (int b = 0; steps[i].buf_part && b < steps[i].n_buf; b++) {
            int q = steps[i].buf_part[b];
            if (q < 0) continue;
            if (p->parts[q].first < 0) p->parts[q].first = i;
            p->parts[q].last = i;
        }
    for (int q = 0; q < p->n_parts; q++) {
        if (p->parts[q].first < 0) continue;
        steps[p->parts[q].first].parts_when |= TILE_PARTITION;
        steps[p->parts[q].last].parts_when |= TILE_UNPARTITION;
    }
}

/* Whether partition q is the only way the plan touches its slot, an intermediate: no other
 * partition of it, no step reading or writing it whole. */
static int only_tiles_touch(const struct plan *p, int q)
{
    int s = p->parts[q].slot;
    if (p->slots[s].kind != SLOT_TEMP) return 0;
    for (int r = 0; r < p->n_parts; r++)
        if (r != q && p->parts[r].slot == s) return 0;
    for (int i = 0; i < p->n_steps; i++)
        for (int b = 0; b < p->steps[i].n_buf; b++)
            if (p->steps[i].buf_slot[b] == s &&
                (!p->steps[i].buf_part || p->steps[i].buf_part[b] != q))
                return 0;
    return 1;
}

static int times_fetched(const struct plan *p, int slot)
{
    int n = 0;
    for (int j = 0; j < p->n_fetches; j++) n += p->fetch_slot[j] == slot;
    return n;
}

/* The fetch of slot (one of the plan's fetch slots). */
static int fetch_of(const struct plan *p, int slot)
{
    int j = 0;
    while (p->fetch_slot[j] != slot) j++;
    return j;
}

/* The partitions whose tiles can stay partitioned between runs (plan_part.kept): those only
 * tiles touch, never fetched. A row-split inference plan then submits no partition work for
 * its hidden layers. */
static void mark_kept(struct plan *p)
{
    for (int q = 0; q < p->n_parts; q++)
        p->parts[q].kept = only_tiles_touch(p, q) && !times_fetched(p, p->parts[q].slot);
}

/* The partitions whose tiles each run registers on host memory in place of partitioning a
 * handle (plan_part.direct): a feed's (the caller's buffer; tiles only read it), and that of
 * an intermediate only tiles touch and fetched once (the fetched value's buffer: the tiles
 * write the result where the caller gets it). Planning, submitting and ending a partition
 * per run cost the row-split MLP more than its two tasks' submission (sched/run.c). */
static int mark_direct(struct plan *p)
{
    for (int q = 0; q < p->n_parts; q++) {
        struct plan_part *pt = &p->parts[q];
        enum slot_kind k = p->slots[pt->slot].kind;
        pt->direct = k == SLOT_FEED && pt->readonly ? DIRECT_FEED
                     : k == SLOT_TEMP && only_tiles_touch(p, q) && times_fetched(p, pt->slot) == 1
                         ? DIRECT_FETCH
                         : 0;
        pt->fetch = pt->direct == DIRECT_FETCH ? fetch_of(p, pt->slot) : -1;
        if (pt->fetch < 0) continue;
        if (!p->fetch_in_place && !(p->fetch_in_place = calloc((size_t)p->n_fetches, 1)))
            return -1;
        p->fetch_in_place[pt->fetch] = 1;
    }
    return 0;
}

/* Whether the tiled plan's groups of blocks run as chain tasks (CPU kernels only): a row-split
 * plan, or an inference plan (no variable written: a training step's batch splits are left
 * as they were measured) on a machine without devices, the test hooks off. */
static int chains_on(const struct plan *p, const struct plan_options *opt, int n_rows)
{
    if (n_rows) return 1;
    return !p->n_var_writes && !opt->hop && !opt->where &&
           !starpu_cuda_worker_get_count() && !starpu_opencl_worker_get_count();
}

/* The plan takes the tiler's steps (split[i]: step i was split, its arrays freed here), then
 * its groups of blocks become chain tasks and its partitions' lifetimes are marked; 0, or -1
 * when out of memory. */
static int install_tiles(struct plan *p, struct tiler *tl, const char *split,
                         const struct plan_options *opt, int n_rows)
{
    p->n_soft_fallbacks = 0;
    for (int i = 0; i < tl->n_out; i++) p->n_soft_fallbacks += tl->out[i].soft_fallback;
    for (int i = 0; i < p->n_steps; i++) { /* the split steps' own arrays */
        if (!split[i]) continue;
        free(p->steps[i].args); free(p->steps[i].buf_slot); free(p->steps[i].modes);
        free(p->steps[i].workerids);
        p->n_tiled++;
    }
    free(p->steps);
    p->steps = tl->out;
    p->n_steps = tl->n_out;
    mark_kept(p); /* which intermediates a chain of blocks keeps in scratch */
    if (chains_on(p, opt, n_rows) && tfc_chain_blocks(p, n_rows > 0, opt->fusion)) return -1;
    mark_lifetimes(p, p->steps, p->n_steps);
    mark_kept(p);
    return mark_direct(p);
}

int tfc_plan_tile(struct plan *p, const struct plan_options *opt)
{
    if (!opt || opt->mp_split) return 0;
    int64_t *edge = calloc((size_t)p->n_steps + 1, sizeof *edge);
    char *split = calloc((size_t)p->n_steps + 1, 1);
    if (!edge || !split) {
        free(edge); free(split);
        return -1;
    }
    /* a plan of row-wise steps over a large batch: one chain of row blocks per CPU worker */
    int64_t rows = 0;
    int n_rows = tfc_rows_split_of(p, opt, &rows);
    int any = n_rows > 0; /* edge: > 0 an output tile edge, < 0 minus a split-K chunk */
    for (int i = 0; i < p->n_steps && !n_rows; i++) {
        edge[i] = tile_of(p, &p->steps[i], opt);
        if (!edge[i]) edge[i] = -kchunk_of(p, &p->steps[i], opt);
        any |= edge[i] != 0 || batch_block(p, &p->steps[i], opt) != 0 ||
               update_block(&p->steps[i], opt) != 0;
    }
    if (!any) {
        free(edge); free(split);
        return 0;
    }
    struct tiler tl = {.p = p, .cap_parts = p->n_parts};
    tl.live = malloc(sizeof(int) * ((size_t)p->n_slots + 1));
    tl.live_from = malloc(sizeof(int) * ((size_t)p->n_slots + 1));
    int rc = tl.live && tl.live_from ? 0 : -1;
    for (int s = 0; !rc && s < p->n_slots; s++) tl.live[s] = -1;
    for (int i = 0; i < p->n_steps && !rc; i++) {
        const struct step *st = &p->steps[i];
        int q;
        int64_t b;
        if (n_rows) {
            rc = split_batch(&tl, i, cdiv(rows, n_rows), tfc_rows_operands(p, st, rows));
            split[i] = 1;
        } else if (edge[i]) {
            rc = edge[i] > 0 ? split_matmul(&tl, i, edge[i]) : split_inner(&tl, i, -edge[i]);
            split[i] = 1;
        } else if ((b = batch_block(p, st, opt)) > 0) {
            rc = split_batch(&tl, i, b, batch_operands(st));
            split[i] = 1;
        } else if ((b = update_block(st, opt)) > 0) {
            rc = split_update(&tl, i, b);
            split[i] = 1;
        } else if ((q = fused_source(&tl, i)) >= 0) {
            rc = split_fused(&tl, i, q);
            split[i] = 1;
        } else if ((q = batch_fused_source(&tl, i)) >= 0) {
            rc = split_fused_batch(&tl, i, q);
            split[i] = 1;
        } else if ((q = reduce_source(&tl, i)) >= 0) {
            rc = split_reduce(&tl, i, q);
            split[i] = 1;
        } else if (!(rc = reserve(&tl, 1))) {
            tl.out[tl.n_out++] = *st; /* shallow: ownership moves on success */
            /* it reads or writes its slots whole: their tiles end before it */
            for (int b = 0; b < st->n_buf; b++) tl.live[st->buf_slot[b]] = -1;
        }
    }
    free(tl.live); free(tl.live_from); free(edge);
    if (rc) { /* the plan keeps its old steps; the caller frees it */
        if (tl.out) free_tile_steps(tl.out, tl.n_out);
        free(tl.out); free(split);
        return -1;
    }
    rc = install_tiles(p, &tl, split, opt, n_rows);
    free(split);
    return rc;
}

int tfc_tiling_is_parent(const struct plan *p, int slot)
{
    for (int q = 0; q < p->n_parts; q++)
        if (p->parts[q].slot == slot) return 1;
    return 0;
}

/* ---- runs ------------------------------------------------------------------------------- */

/* The filter: a contiguous vector of rows x cols elements into nr x nc matrix tiles (nx =
 * tile columns, the contiguous dimension; ny = tile rows; ld = cols), one level; tiles of
 * whole rows are vectors. */
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
    (void)nparts;
    if (whole_rows(pt)) {
        struct starpu_vector_interface *vc = child;
        memset(vc, 0, sizeof *vc);
        vc->id = STARPU_VECTOR_INTERFACE_ID;
        vc->nx = (uint32_t)(nx * ny);
        vc->elemsize = es;
        vc->allocsize = (size_t)(nx * ny) * es;
        if (v->dev_handle) { /* the parent is allocated on this node: a view of it */
            if (v->ptr) vc->ptr = v->ptr + off;
            vc->dev_handle = v->dev_handle;
            vc->offset = v->offset + off;
        }
        return;
    }
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
}

static struct starpu_data_interface_ops *tile_child_ops(struct starpu_data_filter *f, unsigned id)
{
    (void)id;
    return whole_rows(f->filter_arg_ptr) ? &starpu_interface_vector_ops
                                         : &starpu_interface_matrix_ops;
}

static unsigned part_tiles(const struct plan_part *pt)
{
    return (unsigned)(pt->nr * pt->nc);
}

static starpu_data_handle_t *plan_children(const struct plan *p, int q,
                                           starpu_data_handle_t parent)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = part_tiles(pt);
    starpu_data_handle_t *children = malloc(sizeof *children * n);
    if (!children) return NULL;
    struct starpu_data_filter f = {
        .filter_func = tile_filter,
        .nchildren = n,
        .get_child_ops = tile_child_ops,
        .filter_arg_ptr = (void *)pt,
    };
    starpu_data_partition_plan(parent, &f, children);
    return children;
}

/* The part of q's slot with the most tiles. */
static int widest_part(const struct plan *p, int q)
{
    int w = q;
    for (int r = 0; r < p->n_parts; r++)
        if (p->parts[r].slot == p->parts[q].slot &&
            part_tiles(&p->parts[r]) > part_tiles(&p->parts[w]))
            w = r;
    return w;
}

/* A task that runs nowhere and changes nothing: it waits for the accesses before it. */
static struct starpu_codelet fence_cl = {
    .where = STARPU_NOWHERE,
    .nbuffers = 1,
    .modes = {STARPU_RW},
    .flags = STARPU_CODELET_NOPLANS,
    .name = "tile_fence",
};

/* Returns once every task submitted so far that accesses h has ended. The caller holds the
 * session lock, which no task waits for: each of those tasks depends only on tasks already
 * submitted. h must hold a value and not be partitioned read-write now (StarPU refuses an
 * access to an uninitialized handle): true at a handle's first partition of a run, where the
 * only caller uses it (kept partitions are an instance's intermediates, sized once). */
static void wait_for_accesses(starpu_data_handle_t h)
{
    struct starpu_task *t = starpu_task_create();
    if (!t) {
        starpu_task_wait_for_all(); /* no memory for a task: every task, then */
        return;
    }
    t->cl = &fence_cl;
    t->handles[0] = h;
    t->synchronous = 1;
    if (starpu_task_submit(t)) {
        t->destroy = 0;
        starpu_task_destroy(t);
        starpu_task_wait_for_all();
    }
}

/* StarPU 1.3.10 gives each partitioned handle one codelet for its partition and unpartition
 * tasks, with an array of target nodes that partition_plan reallocates whenever a plan has
 * more parts than any before; a worker starting an earlier such task of the handle reads that
 * array meanwhile (_starpu_fetch_nowhere_task_input), and after the move it reads freed memory
 * and aborts on a node that does not exist (CI: test_grad under ASan, whose realloc always
 * moves; tests/test_tiling's partition widths crashed 2 runs in 13 without ASan). So the
 * array grows only while no such task can be pending: a handle is sized for the widest
 * partition its slot has in the plan (a spare plan of that width, cleaned unused) before its
 * first partition of a run, and its user data records the width; a handle sized before (a
 * variable that another plan partitioned narrower) first waits for its earlier tasks. */
starpu_data_handle_t *tfc_tiling_plan(const struct plan *p, int q, starpu_data_handle_t parent)
{
    int w = widest_part(p, q);
    unsigned widest = part_tiles(&p->parts[w]);
    uintptr_t sized = (uintptr_t)starpu_data_get_user_data(parent);
    if (sized >= widest) return plan_children(p, q, parent);
    if (sized) wait_for_accesses(parent);
    if (w != q) {
        starpu_data_handle_t *spare = plan_children(p, w, parent);
        if (!spare) return NULL;
        starpu_data_partition_clean(parent, widest, spare);
        free(spare);
    }
    starpu_data_handle_t *children = plan_children(p, q, parent);
    if (children || w != q) /* (the width is recorded once StarPU's array has it) */
        starpu_data_set_user_data(parent, (void *)(uintptr_t)widest);
    return children;
}

void tfc_tiling_submit(const struct plan *p, int q, starpu_data_handle_t parent,
                       starpu_data_handle_t *children)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = (unsigned)(pt->nr * pt->nc);
    if (pt->readonly)
        starpu_data_partition_readonly_submit(parent, n, children);
    else
        starpu_data_partition_submit(parent, n, children);
}

starpu_data_handle_t *tfc_tiling_partition(const struct plan *p, int q,
                                           starpu_data_handle_t parent)
{
    starpu_data_handle_t *children = tfc_tiling_plan(p, q, parent);
    if (children) tfc_tiling_submit(p, q, parent, children);
    return children;
}

starpu_data_handle_t *tfc_tiling_register(const struct plan *p, int q, void *base)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = (unsigned)(pt->nr * pt->nc);
    size_t es = tfc_dtype_size(p->slots[pt->slot].desc.dtype);
    starpu_data_handle_t *children = malloc(sizeof *children * n);
    if (!children) return NULL;
    for (unsigned id = 0; id < n; id++) { /* the tiles tile_filter makes, on base */
        int64_t r0 = id / (unsigned)pt->nc * pt->tr, c0 = id % (unsigned)pt->nc * pt->tc;
        int64_t ny = r0 + pt->tr <= pt->rows ? pt->tr : pt->rows - r0;
        int64_t nx = c0 + pt->tc <= pt->cols ? pt->tc : pt->cols - c0;
        uintptr_t ptr = (uintptr_t)base + (size_t)(r0 * pt->cols + c0) * es;
        if (whole_rows(pt))
            starpu_vector_data_register(&children[id], STARPU_MAIN_RAM, ptr, (uint32_t)(nx * ny), es);
        else
            starpu_matrix_data_register(&children[id], STARPU_MAIN_RAM, ptr, (uint32_t)pt->cols,
                                        (uint32_t)nx, (uint32_t)ny, es);
    }
    return children;
}

void tfc_tiling_unregister(const struct plan *p, int q, starpu_data_handle_t *children)
{
    const struct plan_part *pt = &p->parts[q];
    for (int i = 0; i < pt->nr * pt->nc; i++) starpu_data_unregister(children[i]);
    free(children);
}

/* A task that runs nowhere and only orders accesses to the tiles (NOPLANS: writing a tile of
 * an ended partition must not start it again). */
static struct starpu_codelet separator_cl = {
    .where = STARPU_NOWHERE,
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .flags = STARPU_CODELET_NOPLANS,
    .name = "tile_separator",
};

/* Between the end of a partition and the unregistration of its tiles: a separator writing
 * every tile, at a nonzero priority. StarPU 1.3.10 leaks 48 bytes per tile without it
 * (STARPU-NOTES.md, "requester stages"): unpartition_submit invalidates each tile and
 * partition_clean unregisters it, two application accesses in a row, so the unregistration
 * waits in the tile's request list at priority 0, whose stage the list keeps and the
 * unregistration never frees. Behind a task it need not wait (a task releases its data
 * before its successors start), and the separator's own wait, at priority 1, frees its
 * stage. Its insertion can fail only for lack of memory: the tiles are cleaned anyway. */
static void separate_tiles(unsigned n, starpu_data_handle_t *children)
{
    struct starpu_data_descr *d = malloc(sizeof *d * n);
    if (!d) return;
    for (unsigned i = 0; i < n; i++) d[i] = (struct starpu_data_descr){children[i], STARPU_W};
    (void)starpu_task_insert(&separator_cl, STARPU_DATA_MODE_ARRAY, d, (int)n, STARPU_PRIORITY, 1,
                             0);
    free(d);
}

void tfc_tiling_end(const struct plan *p, int q, starpu_data_handle_t parent,
                    starpu_data_handle_t *children)
{
    const struct plan_part *pt = &p->parts[q];
    starpu_data_unpartition_submit(parent, (unsigned)(pt->nr * pt->nc), children, -1);
}

void tfc_tiling_clean(const struct plan *p, int q, starpu_data_handle_t parent,
                      starpu_data_handle_t *children)
{
    const struct plan_part *pt = &p->parts[q];
    unsigned n = (unsigned)(pt->nr * pt->nc);
    separate_tiles(n, children);
    starpu_data_partition_clean(parent, n, children);
    free(children);
}

void tfc_tiling_unpartition(const struct plan *p, int q, starpu_data_handle_t parent,
                            starpu_data_handle_t *children)
{
    tfc_tiling_end(p, q, parent, children);
    tfc_tiling_clean(p, q, parent, children);
}
