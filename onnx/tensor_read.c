/* tensor_read.c: ONNX TensorProto -> tfc_value: the element type, the dims, and the data from
 * raw_data, the typed fields (float_data, int32_data, ...) or an external data file next to
 * the model. Every size is checked against the element count of the dims before any data is
 * copied, so a damaged or hostile file is an error, never a read out of bounds. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "onnx_import.h"

int tfc_onnx_dtype(int32_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return TFC_FLOAT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return TFC_FLOAT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return TFC_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return TFC_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return TFC_UINT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return TFC_BOOL;
    default: return -1;
    }
}

const char *tfc_onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16",
        "int32", "int64", "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
        "complex128", "bfloat16"};
    return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* The external data of t: its file (relative to the model's folder, never leaving it),
 * offset and length; reads exactly nbytes into dst. */
static tfc_status read_external(tfc_graph *g, const Onnx__TensorProto *t, const char *dir,
                                const char *what, void *dst, size_t nbytes)
{
    const char *loc = NULL;
    long long offset = 0, length = -1;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const Onnx__StringStringEntryProto *e = t->external_data[i];
        if (!e->key || !e->value) continue;
        if (!strcmp(e->key, "location")) loc = e->value;
        else if (!strcmp(e->key, "offset")) offset = strtoll(e->value, NULL, 10);
        else if (!strcmp(e->key, "length")) length = strtoll(e->value, NULL, 10);
    }
    if (!loc || !*loc)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: external data without a location", what);
    if (loc[0] == '/' || strstr(loc, ".."))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: external data location '%s' must be a path inside the "
                               "model's folder", what, loc);
    if (offset < 0 || (length >= 0 && (size_t)length != nbytes))
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: external data offset %lld, length %lld, but its dims "
                               "need %zu bytes", what, offset, length, nbytes);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, loc);
    FILE *f = fopen(path, "rb");
    if (!f)
        return tfc_graph_error(g, TFC_ERR_NOT_FOUND, "ONNX %s: external data file '%s': %s",
                               what, path, strerror(errno));
    int ok = fseek(f, (long)offset, SEEK_SET) == 0 && fread(dst, 1, nbytes, f) == nbytes;
    fclose(f);
    if (!ok)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: external data file '%s' holds fewer than %zu bytes at "
                               "offset %lld", what, path, nbytes, offset);
    return TFC_OK;
}

/* Copies n typed-field elements of type S into dst as our dtype. */
#define COPY_AS(S, src, n, dt, dst)                                                            \
    do {                                                                                       \
        for (size_t k_ = 0; k_ < (n); k_++) {                                                  \
            S x_ = (src)[k_];                                                                  \
            switch (dt) {                                                                      \
            case TFC_FLOAT32: ((float *)(dst))[k_] = (float)x_; break;                         \
            case TFC_FLOAT64: ((double *)(dst))[k_] = (double)x_; break;                       \
            case TFC_INT32: ((int32_t *)(dst))[k_] = (int32_t)x_; break;                       \
            case TFC_INT64: ((int64_t *)(dst))[k_] = (int64_t)x_; break;                       \
            case TFC_UINT8: ((uint8_t *)(dst))[k_] = (uint8_t)x_; break;                       \
            default: ((uint8_t *)(dst))[k_] = x_ != 0; break;                                  \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* The typed field that holds t's data: its count; copies into dst when dst is non-NULL. */
static size_t typed_field(const Onnx__TensorProto *t, enum tfc_dtype dt, void *dst)
{
    if (t->n_float_data) { if (dst) COPY_AS(float, t->float_data, t->n_float_data, dt, dst);
                           return t->n_float_data; }
    if (t->n_double_data) { if (dst) COPY_AS(double, t->double_data, t->n_double_data, dt, dst);
                            return t->n_double_data; }
    if (t->n_int32_data) { if (dst) COPY_AS(int32_t, t->int32_data, t->n_int32_data, dt, dst);
                           return t->n_int32_data; }
    if (t->n_int64_data) { if (dst) COPY_AS(int64_t, t->int64_data, t->n_int64_data, dt, dst);
                           return t->n_int64_data; }
    if (t->n_uint64_data) { if (dst) COPY_AS(uint64_t, t->uint64_data, t->n_uint64_data, dt, dst);
                            return t->n_uint64_data; }
    return 0;
}

/* 1 when x converts to dt: C leaves a float to integer conversion of NaN, an infinity or a value
 * out of the type's range undefined (UBSan stops there; fuzz_onnx found it). */
static int float_fits(double x, enum tfc_dtype dt)
{
    switch (dt) {
    case TFC_INT32: return x > -2147483649.0 && x < 2147483648.0;
    case TFC_INT64: return x >= -9223372036854775808.0 && x < 9223372036854775808.0;
    case TFC_UINT8: return x > -1.0 && x < 256.0;
    default: return 1; /* float, double; bool takes x != 0 */
    }
}

/* An integer tensor whose values sit in float_data or double_data (the field typed_field reads
 * first): every value must convert. */
static tfc_status check_float_field(tfc_graph *g, const Onnx__TensorProto *t, enum tfc_dtype dt,
                                    const char *what)
{
    size_t n = t->n_float_data ? t->n_float_data : t->n_double_data;
    for (size_t i = 0; i < n; i++) {
        double x = t->n_float_data ? (double)t->float_data[i] : t->double_data[i];
        if (!float_fits(x, dt))
            return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                                   "ONNX %s: value %zu of its %s (%g) does not fit its element "
                                   "type %s", what, i,
                                   t->n_float_data ? "float_data" : "double_data", x,
                                   tfc_dtype_name(dt));
    }
    return TFC_OK;
}

tfc_status tfc_onnx_tensor_value(tfc_graph *g, const Onnx__TensorProto *t, const char *model_dir,
                                 const char *what, tfc_value **out)
{
    int32_t ot = t->has_data_type ? t->data_type : 0;
    int dt = tfc_onnx_dtype(ot);
    if (dt < 0)
        return tfc_graph_error(g, TFC_ERR_DTYPE, "ONNX %s: element type %s is not supported "
                               "(float, double, int32, int64, uint8, bool are)",
                               what, tfc_onnx_dtype_name(ot));
    if (t->n_dims > TFC_MAX_RANK)
        return tfc_graph_error(g, TFC_ERR_SHAPE, "ONNX %s: rank %zu is above the most we take (%d)",
                               what, t->n_dims, TFC_MAX_RANK);
    tfc_shape shape = tfc_shape_of((int)t->n_dims, t->dims);
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0)
            return tfc_graph_error(g, TFC_ERR_SHAPE, "ONNX %s: dim %zu is negative (%lld)", what,
                                   i, (long long)t->dims[i]);
    int64_t numel = tfc_shape_numel(&shape);
    size_t esize = tfc_dtype_size((enum tfc_dtype)dt);
    if (numel < 0 || (uint64_t)numel > (SIZE_MAX / 2) / esize)
        return tfc_graph_error(g, TFC_ERR_SHAPE, "ONNX %s: its dims hold too many elements", what);
    size_t nbytes = (size_t)numel * esize;
    int external = t->has_data_location &&
                   t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    size_t n_typed = typed_field(t, (enum tfc_dtype)dt, NULL);
    /* sizes first, data after */
    if (!external && t->has_raw_data && t->raw_data.len != nbytes)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: raw_data holds %zu bytes, its dims [%lld elements of %s] "
                               "need %zu", what, t->raw_data.len, (long long)numel,
                               tfc_onnx_dtype_name(ot), nbytes);
    if (!external && !t->has_raw_data && n_typed != (size_t)numel)
        return tfc_graph_error(g, TFC_ERR_INVALID_ARGUMENT,
                               "ONNX %s: holds %zu values, its dims need %lld", what, n_typed,
                               (long long)numel);
    if (!external && !t->has_raw_data && check_float_field(g, t, (enum tfc_dtype)dt, what))
        return g->status;
    tfc_value *v; /* not zeroed: every element is written below, or v is freed */
    if (tfc_value_alloc((enum tfc_dtype)dt, &shape, &v))
        return tfc_graph_error(g, TFC_ERR_OUT_OF_MEMORY, "ONNX %s: %s", what, tfc_errmsg());
    void *dst = tfc_value_data(v);
    tfc_status st = TFC_OK;
    if (numel == 0) {
        /* zero-size: nothing to read */
    } else if (external) {
        st = read_external(g, t, model_dir, what, dst, nbytes);
    } else if (t->has_raw_data) {
        memcpy(dst, t->raw_data.data, nbytes); /* ONNX stores raw data little-endian, as we do */
    } else {
        typed_field(t, (enum tfc_dtype)dt, dst);
    }
    if (st) {
        tfc_value_destroy(v);
        return st;
    }
    *out = v;
    return TFC_OK;
}
