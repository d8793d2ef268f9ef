/* host_tensor.h: what the op and gradient sweeps share: dtype and shape shorthands, a
 * deterministic random stream (splitmix64), and host tensors of doubles (ht) that the float64
 * references compute on and that become tfc_values to feed. Included by one test file each. */
#ifndef TFC_HOST_TENSOR_H
#define TFC_HOST_TENSOR_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../src/tfc.h"

#define F32 TFC_FLOAT32
#define F64 TFC_FLOAT64
#define I32 TFC_INT32
#define I64 TFC_INT64
#define U8 TFC_UINT8
#define BOOL TFC_BOOL

/* Shapes: S(2, 3) is [2,3]; S0 is a scalar. */
#define NARGS(...) ((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define S(...) tfc_shape_of(NARGS(__VA_ARGS__), (int64_t[]){__VA_ARGS__})
#define S0 tfc_shape_of(0, NULL)
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static uint64_t g_rng;

static void rng_seed(uint64_t s) { g_rng = s * 0x9E3779B97F4A7C15ull + 12345; }

static uint64_t rng_next(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }

static int64_t rng_int(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}

typedef struct ht {
    enum tfc_dtype dt;
    tfc_shape sh;
    int64_t n;
    double *d;
} ht;

static int64_t numel(tfc_shape s)
{
    int64_t n = 1;
    for (int i = 0; i < s.rank; i++) n *= s.dims[i];
    return n;
}

static int is_float(enum tfc_dtype dt) { return dt == F32 || dt == F64; }

/* x as the dtype holds it (float32 rounding, bool 0/1, integer truncation). */
static double as_dtype(enum tfc_dtype dt, double x)
{
    switch (dt) {
    case F32: return (double)(float)x;
    case I32: return (double)(int32_t)x;
    case I64: return (double)(int64_t)x;
    case U8: return (double)(uint8_t)(int64_t)x; /* wraps modulo 256, as C and TF do */
    case BOOL: return x != 0;
    default: return x;
    }
}

static ht ht_new(enum tfc_dtype dt, tfc_shape sh)
{
    ht h = {dt, sh, numel(sh), NULL};
    h.d = calloc((size_t)(h.n ? h.n : 1), sizeof(double));
    return h;
}

static void ht_free(ht *h)
{
    free(h->d);
    h->d = NULL;
}

static ht ht_copy(const ht *x)
{
    ht o = ht_new(x->dt, x->sh);
    memcpy(o.d, x->d, sizeof(double) * (size_t)x->n);
    return o;
}

/* Random values: floats uniform in [lo, hi) with |x| >= gap; integers uniform in [lo, hi]
 * (nonzero when gap > 0); bools 0/1. Never all zeros. */
static ht ht_rand(enum tfc_dtype dt, tfc_shape sh, double lo, double hi, double gap)
{
    ht h = ht_new(dt, sh);
    int any = 0;
    for (int64_t i = 0; i < h.n; i++) {
        double x;
        do {
            if (is_float(dt))
                x = lo + (hi - lo) * rng_unit();
            else if (dt == BOOL)
                x = (double)(rng_next() >> 63);
            else
                x = (double)rng_int((int64_t)lo, (int64_t)hi);
        } while (dt != BOOL && fabs(x) < gap);
        h.d[i] = as_dtype(dt, x);
        any |= h.d[i] != 0;
    }
    if (h.n && !any) h.d[0] = dt == BOOL ? 1 : as_dtype(dt, hi != 0 ? hi : lo);
    return h;
}

static ht ht_vals(enum tfc_dtype dt, tfc_shape sh, const double *v)
{
    ht h = ht_new(dt, sh);
    for (int64_t i = 0; i < h.n; i++) h.d[i] = as_dtype(dt, v[i]);
    return h;
}

static void store_el(void *p, enum tfc_dtype dt, int64_t i, double x)
{
    switch (dt) {
    case F32: ((float *)p)[i] = (float)x; break;
    case F64: ((double *)p)[i] = x; break;
    case I32: ((int32_t *)p)[i] = (int32_t)x; break;
    case I64: ((int64_t *)p)[i] = (int64_t)x; break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)x; break;
    default: ((uint8_t *)p)[i] = x != 0; break;
    }
}

/* A new tfc_value holding h (NULL, with the library's message printed, on failure: the
 * caller's checks then fail on the missing value). */
static tfc_value *ht_value(const ht *h)
{
    tfc_value *v = NULL;
    if (tfc_value_create(h->dt, h->sh, &v)) {
        fprintf(stderr, "tfc_value_create: %s\n", tfc_errmsg());
        return NULL;
    }
    void *p = tfc_value_data(v);
    for (int64_t i = 0; i < h->n; i++) store_el(p, h->dt, i, h->d[i]);
    return v;
}

static const char *shape_str(tfc_shape s, char *buf, size_t size)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, size - k, "[");
    for (int i = 0; i < s.rank && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ",%lld" : "%lld", (long long)s.dims[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

#define SHP(s) shape_str((s), (char[64]){0}, 64)
#define DT(d) tfc_dtype_name(d)

#endif
