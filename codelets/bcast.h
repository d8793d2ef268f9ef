/* bcast.h: CPU helpers shared by kernels: a NumPy-broadcasting iterator over an output's rows
 * (the last dimension is the inner loop) and element loads/stores across dtypes. */
#ifndef TFC_BCAST_H
#define TFC_BCAST_H

#include <stdint.h>
#include "kargs.h"
#include "op_attrs.h"

#define TFC_BCAST_MAX 4

struct tfc_bcast {
    int rank;                              /* >= 1 (a scalar iterates as [1]) */
    int n;                                 /* operands */
    int64_t dims[TFC_K_MAX_RANK];          /* output dims */
    int64_t st[TFC_BCAST_MAX][TFC_K_MAX_RANK]; /* element strides per operand, 0 = broadcast */
    int64_t idx[TFC_K_MAX_RANK];
    int64_t off[TFC_BCAST_MAX];            /* element offset of the current row per operand */
    int64_t rows;                          /* number of rows (output numel / last dim) */
};

static inline void tfc_bcast_init(struct tfc_bcast *it, const struct tfc_kdesc *out, int n,
                                  const struct tfc_kdesc *const *in)
{
    it->rank = out->rank > 0 ? out->rank : 1;
    it->n = n;
    for (int d = 0; d < it->rank; d++) {
        it->dims[d] = out->rank > 0 ? out->dims[d] : 1;
        it->idx[d] = 0;
    }
    for (int k = 0; k < n; k++) {
        int64_t stride = 1;
        it->off[k] = 0;
        for (int d = it->rank - 1; d >= 0; d--) {
            int id = in[k]->rank - (it->rank - d); /* right-aligned input axis */
            int64_t dim = id >= 0 ? in[k]->dims[id] : 1;
            it->st[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    int64_t inner = it->dims[it->rank - 1];
    it->rows = inner > 0 ? out->numel / inner : 0;
}

/* Merges adjacent axes that every operand steps through as one axis (contiguous, or broadcast
 * along both), and drops axes of length 1, so rows get long: [N,C,H,W] + [C,1,1] iterates as
 * [N,C,H*W] with the bias constant along each row. The element order stays the same. Call it
 * right after tfc_bcast_init. */
static inline void tfc_bcast_coalesce(struct tfc_bcast *it)
{
    int top = TFC_K_MAX_RANK - 1; /* merged axes fill the arrays from the end, then move */
    int64_t dims[TFC_K_MAX_RANK], st[TFC_BCAST_MAX][TFC_K_MAX_RANK];
    dims[top] = it->dims[it->rank - 1];
    for (int k = 0; k < it->n; k++) st[k][top] = it->st[k][it->rank - 1];
    for (int d = it->rank - 2; d >= 0; d--) {
        if (it->dims[d] == 1) continue;
        int merge = dims[top] != 1;
        for (int k = 0; k < it->n; k++) merge &= it->st[k][d] == st[k][top] * dims[top];
        if (merge) {
            dims[top] *= it->dims[d];
            continue;
        }
        if (dims[top] != 1) top--; /* a length-1 inner axis is replaced, not kept */
        dims[top] = it->dims[d];
        for (int k = 0; k < it->n; k++) st[k][top] = it->st[k][d];
    }
    it->rank = TFC_K_MAX_RANK - top;
    for (int d = 0; d < it->rank; d++) {
        it->dims[d] = dims[top + d];
        it->idx[d] = 0;
        for (int k = 0; k < it->n; k++) it->st[k][d] = st[k][top + d];
    }
    int64_t inner = it->dims[it->rank - 1], numel = 1;
    for (int d = 0; d < it->rank; d++) numel *= it->dims[d];
    it->rows = inner > 0 ? numel / inner : 0;
}

/* Advances to the next row. */
static inline void tfc_bcast_next(struct tfc_bcast *it)
{
    for (int d = it->rank - 2; d >= 0; d--) {
        it->idx[d]++;
        for (int k = 0; k < it->n; k++) it->off[k] += it->st[k][d];
        if (it->idx[d] < it->dims[d])
            return;
        for (int k = 0; k < it->n; k++) it->off[k] -= it->st[k][d] * it->dims[d];
        it->idx[d] = 0;
    }
}

/* Which axes of input 0 a reduction kernel sums over: its "axes" attribute (empty: all), or
 * for sum_to the axes that broadcasting added or stretched from 1 to reach input 0. One rule
 * for the CPU, CUDA and OpenCL hosts. */
static inline void tfc_reduced_axes(const struct tfc_kargs *a, int reduced[TFC_K_MAX_RANK])
{
    const struct tfc_kdesc *d = &a->d[0], *o = &a->d[a->n_in];
    const struct tfc_kattr *axes = &a->attrs[REDUCE_AXES];
    for (int i = 0; i < TFC_K_MAX_RANK; i++) reduced[i] = 0;
    if (a->kind == TFC_K_SUM_TO) {
        int lead = d->rank - o->rank;
        for (int i = 0; i < d->rank; i++)
            reduced[i] = i < lead || (o->dims[i - lead] == 1 && d->dims[i] != 1);
    } else if (axes->n == 0) {
        for (int i = 0; i < d->rank; i++) reduced[i] = 1;
    } else {
        for (int i = 0; i < axes->n; i++) {
            int64_t ax = axes->v[i] < 0 ? axes->v[i] + d->rank : axes->v[i];
            if (ax >= 0 && ax < d->rank) reduced[ax] = 1;
        }
    }
}

/* A reduction's input strides in elements: row-major, except that the rows of a 2-D input
 * are ld apart (a tile of a larger matrix, sched/tiling.c; ld = its row length otherwise). */
static inline void tfc_reduce_input_strides(const struct tfc_kdesc *d, int64_t ld,
                                            int64_t st[TFC_K_MAX_RANK])
{
    int64_t stride = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        st[i] = stride;
        stride *= d->rank == 2 && i == 1 ? ld : d->dims[i];
    }
}

/* What a mean divides by: the elements per output (count), unless REDUCE_MEAN_COUNT gives the
 * count of a whole reduction whose partial sums this step adds up (a tiled mean's final step). */
static inline int64_t tfc_reduce_divisor(const struct tfc_kargs *a, int64_t count)
{
    int64_t whole = a->attrs[REDUCE_MEAN_COUNT].i;
    return a->kind == TFC_K_REDUCE_MEAN && whole > 0 ? whole : count;
}

/* Batched matmul: the element offsets of batch bi's matrices in A and B, whose batch dims
 * (all but the last two) broadcast to those of C (nb = C's rank - 2). */
static inline void tfc_batch_offsets(const struct tfc_kdesc *da, const struct tfc_kdesc *db,
                                     const struct tfc_kdesc *dc, int64_t bi, int64_t *off_a,
                                     int64_t *off_b)
{
    int ra = da->rank, rb = db->rank, nb = dc->rank - 2;
    int64_t rem = bi, oa = 0, ob = 0, st_a = 1, st_b = 1;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t idx = rem % dc->dims[d];
        rem /= dc->dims[d];
        int ia = (ra - 2) - (nb - d), ib = (rb - 2) - (nb - d);
        int64_t dima = ia >= 0 ? da->dims[ia] : 1, dimb = ib >= 0 ? db->dims[ib] : 1;
        if (dima != 1) oa += idx * st_a;
        if (dimb != 1) ob += idx * st_b;
        st_a *= dima;
        st_b *= dimb;
    }
    *off_a = oa * da->dims[ra - 2] * da->dims[ra - 1];
    *off_b = ob * db->dims[rb - 2] * db->dims[rb - 1];
}

/* dtype codes follow enum tfc_dtype: f32, f64, i32, i64, u8, bool */
static inline double tfc_load_f64(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case 0: return ((const float *)p)[i];
    case 1: return ((const double *)p)[i];
    case 2: return ((const int32_t *)p)[i];
    case 3: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static inline void tfc_store_f64(void *p, int dtype, int64_t i, double v)
{
    switch (dtype) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((double *)p)[i] = v; break;
    case 2: ((int32_t *)p)[i] = (int32_t)v; break;
    case 3: ((int64_t *)p)[i] = (int64_t)v; break;
    case 4: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

static inline int64_t tfc_load_i64(const void *p, int dtype, int64_t i)
{
    switch (dtype) {
    case 0: return (int64_t)((const float *)p)[i];
    case 1: return (int64_t)((const double *)p)[i];
    case 2: return ((const int32_t *)p)[i];
    case 3: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static inline void tfc_store_i64(void *p, int dtype, int64_t i, int64_t v)
{
    switch (dtype) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((double *)p)[i] = (double)v; break;
    case 2: ((int32_t *)p)[i] = (int32_t)v; break;
    case 3: ((int64_t *)p)[i] = v; break;
    case 4: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

#endif
