/* status.c: status names, the thread-local message for calls without a handle, and the dtype
 * and shape helpers every module uses. */
#include <stdarg.h>
#include <string.h>
#include "internal.h"

static __thread char global_msg[TFC_MSG_LEN];

const char *tfc_status_string(tfc_status status)
{
    switch (status) {
    case TFC_OK: return "ok";
    case TFC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TFC_ERR_SHAPE: return "shape mismatch";
    case TFC_ERR_DTYPE: return "dtype mismatch";
    case TFC_ERR_NOT_FOUND: return "not found";
    case TFC_ERR_OUT_OF_MEMORY: return "out of memory";
    case TFC_ERR_NO_DEVICE: return "no device";
    case TFC_ERR_RUNTIME: return "runtime error";
    case TFC_ERR_STORE: return "store error";
    case TFC_ERR_UNINITIALIZED: return "uninitialized variable";
    case TFC_ERR_CYCLE: return "cycle in graph";
    case TFC_ERR_OUT_OF_RANGE: return "out of range";
    case TFC_ERR_MISSING_FEED: return "missing feed";
    case TFC_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *tfc_errmsg(void)
{
    return global_msg;
}

tfc_status tfc_vfail(char *buf, tfc_status status, const char *fmt, va_list ap)
{
    vsnprintf(buf, TFC_MSG_LEN, fmt, ap);
    return status;
}

tfc_status tfc_fail(char *buf, tfc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfc_vfail(buf, status, fmt, ap);
    va_end(ap);
    return status;
}

tfc_status tfc_fail_global(tfc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tfc_vfail(global_msg, status, fmt, ap);
    va_end(ap);
    return status;
}

static const char *const dtype_names[TFC_NUM_DTYPES] = {"float32", "float64", "int32",
                                                        "int64",   "uint8",   "bool"};
static const size_t dtype_sizes[TFC_NUM_DTYPES] = {4, 8, 4, 8, 1, 1};

int tfc_dtype_valid(int dtype)
{
    return dtype >= 0 && dtype < TFC_NUM_DTYPES;
}

const char *tfc_dtype_name(enum tfc_dtype dtype)
{
    return tfc_dtype_valid(dtype) ? dtype_names[dtype] : "invalid";
}

size_t tfc_dtype_size(enum tfc_dtype dtype)
{
    return tfc_dtype_valid(dtype) ? dtype_sizes[dtype] : 0;
}

int tfc_dtype_is_float(enum tfc_dtype dtype)
{
    return dtype == TFC_FLOAT32 || dtype == TFC_FLOAT64;
}

int tfc_dtype_is_integer(enum tfc_dtype dtype)
{
    return dtype == TFC_INT32 || dtype == TFC_INT64 || dtype == TFC_UINT8;
}

int tfc_dtype_parse(const char *name)
{
    static const struct { const char *alias; int dtype; } aliases[] = {
        {"f32", TFC_FLOAT32}, {"float", TFC_FLOAT32}, {"f64", TFC_FLOAT64},
        {"double", TFC_FLOAT64}, {"i32", TFC_INT32}, {"i64", TFC_INT64}, {"u8", TFC_UINT8}};
    if (!name) return -1; /* a NULL column of a damaged store */
    for (int i = 0; i < TFC_NUM_DTYPES; i++)
        if (strcmp(name, dtype_names[i]) == 0) return i;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) return aliases[i].dtype;
    return -1;
}

tfc_shape tfc_shape_of(int rank, const int64_t *dims)
{
    tfc_shape s;
    memset(&s, 0, sizeof s);
    if (rank < 0 || rank > TFC_MAX_RANK) {
        s.rank = -1; /* invalid: rejected by every consumer */
        return s;
    }
    s.rank = rank;
    for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
    return s;
}

int64_t tfc_shape_numel(const tfc_shape *shape)
{
    int64_t n = 1;
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] < 0) return -1;
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] == 0) return 0; /* however large the dims before it */
    for (int i = 0; i < shape->rank; i++)
        if (__builtin_mul_overflow(n, shape->dims[i], &n)) return -1;
    return n;
}

int tfc_shape_too_large(const tfc_shape *shape, enum tfc_dtype dtype)
{
    int64_t bytes = (int64_t)tfc_dtype_size(dtype);
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] == 0) return 0; /* no elements, whatever the other dims say */
    for (int i = 0; i < shape->rank; i++)
        if (shape->dims[i] > 0 && __builtin_mul_overflow(bytes, shape->dims[i], &bytes)) return 1;
    return 0;
}

const char *tfc_shape_str(const tfc_shape *s, char *buf, size_t len)
{
    size_t pos = 0;
    pos += (size_t)snprintf(buf + pos, len - pos, "[");
    for (int i = 0; i < s->rank && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, i ? ", %lld" : "%lld", (long long)s->dims[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

int tfc_shape_equal(const tfc_shape *a, const tfc_shape *b)
{
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}
