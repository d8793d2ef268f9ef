/* dist_tile.c: which rank owns which rows of each variable in data-parallel training (issue
 * 15: "large variables are split into tiles owned by different ranks"). A variable kept whole
 * is one piece with one owner; a large one is split into row tiles (ranges of its leading
 * dimension, so a tile is a contiguous range of its floats), one per rank, each owned by a
 * different rank, so that one big embedding or dense matrix no longer puts all its gradient
 * traffic and its summation on one rank. The pieces get owners with the balancing whole
 * variables had: the largest first to the rank with the fewest bytes so far.
 *
 * Large: above TFC_DIST_TILE_BYTES bytes (tfc_dist_train_set_tiling), or by default above the
 * model's bytes / ranks (a variable that alone exceeds a balanced share). Not with every
 * variable on rank 0 (TFC_DIST_OWNERS_RANK0, backup workers), nor when the update is not
 * element-wise (global-norm clipping: the norm needs the whole gradient). */
#include <stdlib.h>
#include <string.h>
#include "dist_train.h"
#include "../src/env.h"

/* How many tiles variable i gets (1: kept whole); total: the model's bytes. */
static int tile_count(const tfc_dist_train *t, int i, size_t total)
{
    tfc_shape s = tfc_tensor_shape(t->vars[i]);
    if (t->all_on_rank0 || t->whole_only || t->n_ranks < 2 || t->tile_bytes == 0 || s.rank < 1 ||
        s.dims[0] < 2)
        return 1;
    int large = t->tile_bytes > 0 ? t->bytes[i] > (size_t)t->tile_bytes
                                  : t->bytes[i] * (size_t)t->n_ranks > total;
    if (!large) return 1;
    return s.dims[0] < t->n_ranks ? (int)s.dims[0] : t->n_ranks;
}

/* The pieces of every variable, in variable order and then row order, owners not yet set. */
static tfc_status make_pieces(tfc_dist_train *t)
{
    size_t total = 0;
    int n = 0;
    for (int i = 0; i < t->n_vars; i++) total += t->bytes[i];
    for (int i = 0; i < t->n_vars; i++) n += t->tiles[i] = tile_count(t, i, total);
    struct tfc_dist_piece *p = realloc(t->pieces, (size_t)n * sizeof *p);
    if (!p) return tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train: no memory for %d tiles", n);
    t->pieces = p;
    t->n_pieces = n;
    for (int i = 0; i < t->n_vars; i++) {
        tfc_shape s = tfc_tensor_shape(t->vars[i]);
        int64_t rows = s.rank ? s.dims[0] : 1, T = t->tiles[i];
        size_t row_floats = t->bytes[i] / sizeof(float) / (size_t)(rows ? rows : 1);
        for (int64_t k = 0; k < T; k++, p++) {
            p->var = i;
            p->owner = 0;
            p->row0 = rows * k / T; /* as the batcher splits a batch among ranks */
            p->row1 = rows * (k + 1) / T;
            p->first = (size_t)p->row0 * row_floats;
            p->count = T == 1 ? t->bytes[i] / sizeof(float) : (size_t)(p->row1 - p->row0) * row_floats;
        }
    }
    return TFC_OK;
}

/* The least loaded rank (lowest on ties) that holds no other tile of piece p's variable. */
static int lightest_rank(const tfc_dist_train *t, const size_t *load, const char *done, int p)
{
    int best = -1;
    for (int r = 0; r < t->n_ranks; r++) {
        int taken = 0;
        for (int q = 0; q < t->n_pieces && !taken; q++)
            taken = done[q] && t->pieces[q].var == t->pieces[p].var && t->pieces[q].owner == r;
        if (!taken && (best < 0 || load[r] < load[best])) best = r;
    }
    return best < 0 ? 0 : best;
}

tfc_status tfc_dist_assign(tfc_dist_train *t)
{
    tfc_status st = make_pieces(t);
    if (st) return st;
    size_t *load = calloc((size_t)t->n_ranks, sizeof *load);
    char *done = calloc((size_t)t->n_pieces, 1);
    if (!load || !done) {
        free(load), free(done);
        return tfc_fail(t->msg, TFC_ERR_OUT_OF_MEMORY, "dist_train: no memory");
    }
    for (int k = 0; k < t->n_pieces; k++) {
        int big = -1; /* the largest piece left, the first in variable order on ties */
        for (int p = 0; p < t->n_pieces; p++)
            if (!done[p] && (big < 0 || t->pieces[p].count > t->pieces[big].count)) big = p;
        int r = t->all_on_rank0 ? 0 : lightest_rank(t, load, done, big);
        t->pieces[big].owner = r;
        done[big] = 1;
        load[r] += t->pieces[big].count * sizeof(float);
    }
    for (int p = t->n_pieces - 1; p >= 0; p--) t->owner[t->pieces[p].var] = t->pieces[p].owner;
    free(load);
    free(done);
    return TFC_OK;
}

size_t tfc_dist_pack_size(const tfc_dist_train *t, int o)
{
    size_t n = 0;
    for (int p = 0; p < t->n_pieces; p++)
        if (t->pieces[p].owner == o) n += t->pieces[p].count;
    return n;
}

void tfc_dist_pack(const tfc_dist_train *t, int o, tfc_value **vals, float *pack, int to)
{
    for (int p = 0; p < t->n_pieces; p++) {
        const struct tfc_dist_piece *c = &t->pieces[p];
        if (c->owner != o) continue;
        if (vals[c->var]) {
            float *v = (float *)tfc_value_data(vals[c->var]) + c->first;
            if (to) memcpy(pack, v, c->count * sizeof *v);
            else memcpy(v, pack, c->count * sizeof *v);
        }
        pack += c->count;
    }
}

tfc_status tfc_dist_train_set_tiling(tfc_dist_train *t, long long min_bytes)
{
    if (!t) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "dist_train_set_tiling: NULL");
    if (min_bytes < -1)
        return tfc_fail(t->msg, TFC_ERR_INVALID_ARGUMENT, "dist_train_set_tiling: %lld bytes "
                        "(a variable above min_bytes > 0 is tiled; 0: none; -1: auto, above the "
                        "model's bytes / ranks)", min_bytes);
    t->tile_bytes = min_bytes;
    return tfc_dist_assign(t);
}

int tfc_dist_train_tiles(const tfc_dist_train *t, int i)
{
    return t && i >= 0 && i < t->n_vars ? t->tiles[i] : -1;
}

int tfc_dist_train_tile(const tfc_dist_train *t, int i, int k, int64_t *row0, int64_t *row1)
{
    if (!t || i < 0 || i >= t->n_vars || k < 0 || k >= t->tiles[i]) return -1;
    int p = 0;
    while (t->pieces[p].var != i) p++;
    p += k;
    if (row0) *row0 = t->pieces[p].row0;
    if (row1) *row1 = t->pieces[p].row1;
    return t->pieces[p].owner;
}

/* The threshold TFC_DIST_TILE_BYTES sets (-1: unset, auto). */
tfc_status tfc_dist_tile_bytes_from_env(long long *out, char *msg)
{
    return tfc_env_int("TFC_DIST_TILE_BYTES", -1, out, msg);
}
