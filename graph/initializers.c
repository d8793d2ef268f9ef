/* initializers.c: variable initial values from Philox-4x32-10, a counter-based generator:
 * element i's value is a pure function of (graph seed, node seed, i), so it does not depend on
 * which device, worker or thread computes it. Also the public tfc_init_* constructors. */
#include <math.h>
#include <string.h>
#include "graph.h"
#include "../codelets/philox.h" /* the one Philox-4x32-10, shared with dropout */

static uint64_t mix64(uint64_t x) /* splitmix64 finalizer: spreads the two seeds over the key */
{
    x ^= x >> 30; x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27; x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Two uniform doubles in (0, 1) for (element, attempt), 53-bit resolution. */
static void uniform2(uint32_t key[2], uint64_t index, uint32_t attempt, double u[2])
{
    uint32_t c[4] = {(uint32_t)index, (uint32_t)(index >> 32), attempt, 0x7463u /* "tc" */};
    tfc_philox4x32_10(c, key[0], key[1]);
    for (int k = 0; k < 2; k++) {
        uint64_t bits = ((uint64_t)c[2 * k] << 21) ^ (c[2 * k + 1] >> 11);
        u[k] = ((double)(bits & ((1ull << 53) - 1)) + 0.5) / 9007199254740992.0;
    }
}

static double normal(uint32_t key[2], uint64_t i, uint32_t attempt)
{
    double u[2];
    uniform2(key, i, attempt, u);
    return sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]); /* Box-Muller */
}

static void fans(const tfc_shape *s, double *fan_in, double *fan_out)
{
    if (s->rank == 0) { *fan_in = *fan_out = 1; return; }
    if (s->rank == 1) { *fan_in = *fan_out = (double)s->dims[0]; return; }
    double receptive = 1;
    for (int i = 0; i < s->rank - 2; i++) receptive *= (double)s->dims[i];
    *fan_in = (double)s->dims[s->rank - 2] * receptive;
    *fan_out = (double)s->dims[s->rank - 1] * receptive;
}

static void store(void *data, enum tfc_dtype dtype, int64_t i, double v)
{
    switch (dtype) {
    case TFC_FLOAT32: ((float *)data)[i] = (float)v; break;
    case TFC_FLOAT64: ((double *)data)[i] = v; break;
    case TFC_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
    case TFC_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
    case TFC_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
    default: ((uint8_t *)data)[i] = v != 0; break;
    }
}

tfc_status tfc_init_fill(const tfc_init *init, uint64_t graph_seed, enum tfc_dtype dtype,
                         const tfc_shape *shape, void *data, char *msg)
{
    int64_t n = tfc_shape_numel(shape);
    if (n < 0 || tfc_shape_too_large(shape, dtype))
        return tfc_fail(msg, TFC_ERR_SHAPE, "initializer: a shape with unknown dimensions or "
                        "more bytes than 64 bits count");
    int random = init->kind >= TFC_INIT_UNIFORM;
    if (random && !tfc_dtype_is_float(dtype))
        return tfc_fail(msg, TFC_ERR_DTYPE, "random initializers need a float variable, not %s",
                        tfc_dtype_name(dtype));
    uint64_t k = mix64(graph_seed * 0x9E3779B97F4A7C15ull ^ mix64(init->seed + 1));
    uint32_t key[2] = {(uint32_t)k, (uint32_t)(k >> 32)};
    double lo = init->a, hi = init->b;
    double fi, fo, he_sd = 0;
    fans(shape, &fi, &fo);
    if (init->kind == TFC_INIT_GLOROT_UNIFORM) {
        hi = sqrt(6.0 / (fi + fo > 0 ? fi + fo : 1));
        lo = -hi;
    }
    if (init->kind == TFC_INIT_HE_UNIFORM) { /* variance 2 / fan_in, as for He normal */
        hi = sqrt(6.0 / (fi > 0 ? fi : 1));
        lo = -hi;
    }
    if (init->kind == TFC_INIT_HE_NORMAL) he_sd = sqrt(2.0 / (fi > 0 ? fi : 1));
    for (int64_t i = 0; i < n; i++) {
        double v, u[2];
        switch (init->kind) {
        case TFC_INIT_ZEROS: v = 0; break;
        case TFC_INIT_ONES: v = 1; break;
        case TFC_INIT_CONSTANT: v = init->a; break;
        case TFC_INIT_NORMAL: v = init->a + init->b * normal(key, (uint64_t)i, 0); break;
        case TFC_INIT_HE_NORMAL: v = he_sd * normal(key, (uint64_t)i, 0); break;
        case TFC_INIT_TRUNCATED_NORMAL: { /* redraw beyond two standard deviations */
            double z = normal(key, (uint64_t)i, 0);
            for (uint32_t t = 1; fabs(z) > 2.0; t++) z = normal(key, (uint64_t)i, t);
            v = init->a + init->b * z;
            break;
        }
        default: /* uniform, Glorot uniform and He uniform */
            uniform2(key, (uint64_t)i, 0, u);
            v = lo + (hi - lo) * u[0];
            break;
        }
        store(data, dtype, i, v);
    }
    return TFC_OK;
}

tfc_init tfc_init_zeros(void) { return (tfc_init){TFC_INIT_ZEROS, 0, 0, 0}; }
tfc_init tfc_init_ones(void) { return (tfc_init){TFC_INIT_ONES, 1, 0, 0}; }
tfc_init tfc_init_constant(double value) { return (tfc_init){TFC_INIT_CONSTANT, value, 0, 0}; }
tfc_init tfc_init_uniform(double lo, double hi, uint64_t seed) { return (tfc_init){TFC_INIT_UNIFORM, lo, hi, seed}; }
tfc_init tfc_init_normal(double mean, double sd, uint64_t seed) { return (tfc_init){TFC_INIT_NORMAL, mean, sd, seed}; }
tfc_init tfc_init_truncated_normal(double mean, double sd, uint64_t seed) { return (tfc_init){TFC_INIT_TRUNCATED_NORMAL, mean, sd, seed}; }
tfc_init tfc_init_glorot_uniform(uint64_t seed) { return (tfc_init){TFC_INIT_GLOROT_UNIFORM, 0, 0, seed}; }
tfc_init tfc_init_he_normal(uint64_t seed) { return (tfc_init){TFC_INIT_HE_NORMAL, 0, 0, seed}; }
tfc_init tfc_init_he_uniform(uint64_t seed) { return (tfc_init){TFC_INIT_HE_UNIFORM, 0, 0, seed}; }
