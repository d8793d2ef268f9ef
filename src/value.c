/* value.c: tfc_value, host data (dtype, shape, contiguous row-major buffer) for feeds, fetches,
 * constants and variable reads. A value owns its buffer unless it wraps the caller's. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

struct tfc_value {
    enum tfc_dtype dtype;
    tfc_shape shape;
    int64_t numel;
    void *data;
    int owned; /* 1 when data is ours to free */
};

static tfc_status check(enum tfc_dtype dtype, const tfc_shape *shape, tfc_value **out)
{
    char buf[128];
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "value: out is NULL");
    *out = NULL;
    if (!tfc_dtype_valid(dtype))
        return tfc_fail_global(TFC_ERR_DTYPE, "value: invalid dtype %d", (int)dtype);
    if (shape->rank < 0 || shape->rank > TFC_MAX_RANK)
        return tfc_fail_global(TFC_ERR_SHAPE, "value: rank %d is outside [0, %d]", shape->rank,
                               TFC_MAX_RANK);
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] < 0)
            return tfc_fail_global(TFC_ERR_SHAPE, "value: shape %s has a negative dimension",
                                   tfc_shape_str(shape, buf, sizeof buf));
    if (tfc_shape_too_large(shape, dtype))
        return tfc_fail_global(TFC_ERR_SHAPE, "value: shape %s of %s is more bytes than 64 bits "
                               "count", tfc_shape_str(shape, buf, sizeof buf),
                               tfc_dtype_name(dtype));
    return TFC_OK;
}

tfc_status tfc_value_alloc(enum tfc_dtype dtype, const tfc_shape *shape, tfc_value **out)
{
    tfc_status st = check(dtype, shape, out);
    if (st) return st;
    tfc_value *v = calloc(1, sizeof *v);
    if (!v) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "value: no memory");
    v->dtype = dtype;
    v->shape = *shape;
    v->numel = tfc_shape_numel(shape);
    v->owned = 1;
    size_t bytes = (size_t)v->numel * tfc_dtype_size(dtype);
    if (bytes) {
        v->data = malloc(bytes);
        if (!v->data) {
            free(v);
            return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "value: no memory for %zu bytes",
                                   bytes);
        }
    }
    *out = v;
    return TFC_OK;
}

tfc_status tfc_value_create(enum tfc_dtype dtype, tfc_shape shape, tfc_value **out)
{
    tfc_status st = tfc_value_alloc(dtype, &shape, out);
    if (!st && (*out)->data) memset((*out)->data, 0, tfc_value_nbytes(*out));
    return st;
}

tfc_status tfc_value_from_data(enum tfc_dtype dtype, tfc_shape shape, const void *data,
                               tfc_value **out)
{
    tfc_status st = check(dtype, &shape, out);
    if (st) return st;
    if (!data && tfc_shape_numel(&shape) > 0)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "value: data is NULL");
    st = tfc_value_alloc(dtype, &shape, out);
    if (!st && (*out)->data) memcpy((*out)->data, data, tfc_value_nbytes(*out));
    return st;
}

tfc_status tfc_value_wrap(enum tfc_dtype dtype, tfc_shape shape, void *data, tfc_value **out)
{
    tfc_status st = check(dtype, &shape, out);
    if (st) return st;
    if (!data && tfc_shape_numel(&shape) > 0)
        return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "value: data is NULL");
    tfc_value *v = calloc(1, sizeof *v);
    if (!v) return tfc_fail_global(TFC_ERR_OUT_OF_MEMORY, "value: no memory");
    v->dtype = dtype;
    v->shape = shape;
    v->numel = tfc_shape_numel(&shape);
    v->data = v->numel ? data : NULL;
    v->owned = 0;
    *out = v;
    return TFC_OK;
}

tfc_status tfc_value_scalar(enum tfc_dtype dtype, double x, tfc_value **out)
{
    tfc_shape s = tfc_shape_of(0, NULL);
    tfc_status st = tfc_value_alloc(dtype, &s, out);
    if (st) return st;
    void *p = (*out)->data;
    switch (dtype) {
    case TFC_FLOAT32: *(float *)p = (float)x; break;
    case TFC_FLOAT64: *(double *)p = x; break;
    case TFC_INT32: *(int32_t *)p = (int32_t)x; break;
    case TFC_INT64: *(int64_t *)p = (int64_t)x; break;
    case TFC_UINT8: *(uint8_t *)p = (uint8_t)x; break;
    default: *(uint8_t *)p = x != 0; break;
    }
    return TFC_OK;
}

void tfc_value_destroy(tfc_value *v)
{
    if (!v) return;
    if (v->owned) free(v->data);
    free(v);
}

enum tfc_dtype tfc_value_dtype(const tfc_value *v) { return v ? v->dtype : TFC_FLOAT32; }

tfc_shape tfc_value_shape(const tfc_value *v)
{
    return v ? v->shape : tfc_shape_of(0, NULL);
}

int64_t tfc_value_numel(const tfc_value *v) { return v ? v->numel : 0; }

size_t tfc_value_nbytes(const tfc_value *v)
{
    return v ? (size_t)v->numel * tfc_dtype_size(v->dtype) : 0;
}

void *tfc_value_data(tfc_value *v) { return v ? v->data : NULL; }

const void *tfc_value_cdata(const tfc_value *v) { return v ? v->data : NULL; }

double tfc_value_get(const tfc_value *v, int64_t i)
{
    if (!v || i < 0 || i >= v->numel) return 0.0;
    const void *p = v->data;
    switch (v->dtype) {
    case TFC_FLOAT32: return ((const float *)p)[i];
    case TFC_FLOAT64: return ((const double *)p)[i];
    case TFC_INT32: return ((const int32_t *)p)[i];
    case TFC_INT64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* ---- helpers for input data ---------------------------------------------------------- */

tfc_status tfc_value_normalize_u8(const tfc_value *in, float scale, float shift, tfc_value **out)
{
    if (!out) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "normalize_u8: out is NULL");
    *out = NULL;
    if (!in) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "normalize_u8: input is NULL");
    if (tfc_value_dtype(in) != TFC_UINT8)
        return tfc_fail_global(TFC_ERR_DTYPE, "normalize_u8: input is %s, not uint8",
                               tfc_dtype_name(tfc_value_dtype(in)));
    tfc_value *v;
    tfc_status st = tfc_value_create(TFC_FLOAT32, tfc_value_shape(in), &v);
    if (st) return st;
    const uint8_t *src = tfc_value_cdata(in);
    float *dst = tfc_value_data(v);
    int64_t n = tfc_value_numel(in);
    for (int64_t i = 0; i < n; i++) dst[i] = (float)src[i] * scale + shift;
    *out = v;
    return TFC_OK;
}

tfc_status tfc_value_reshape(tfc_value *v, tfc_shape shape)
{
    char a[160], b[160];
    if (!v) return tfc_fail_global(TFC_ERR_INVALID_ARGUMENT, "reshape: value is NULL");
    if (shape.rank < 0 || shape.rank > TFC_MAX_RANK)
        return tfc_fail_global(TFC_ERR_SHAPE, "reshape: rank %d is outside [0, %d]", shape.rank,
                               TFC_MAX_RANK);
    int64_t numel = tfc_shape_numel(&shape);
    if (numel != v->numel)
        return tfc_fail_global(TFC_ERR_SHAPE, "reshape: %s (%lld elements) cannot become %s%s",
                               tfc_shape_str(&v->shape, a, sizeof a), (long long)v->numel,
                               tfc_shape_str(&shape, b, sizeof b),
                               numel < 0 ? " (a negative dimension)" : "");
    v->shape = shape; /* row-major data keeps its order */
    return TFC_OK;
}
