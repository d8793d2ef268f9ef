/* bcast.h: CPU helpers shared by kernels: a NumPy-broadcasting iterator over an output's rows
 * (the last dimension is the inner loop) and element loads/stores across dtypes. */
#ifndef TFC_BCAST_H
#define TFC_BCAST_H

#include <stdint.h>
#include "kargs.h"

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
