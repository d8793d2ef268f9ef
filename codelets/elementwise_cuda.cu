/* elementwise.cu: CUDA kernels of the element-wise family, computing what elementwise.c
 * computes: unary math, binary ops with NumPy broadcasting (and broadcast, relu_grad),
 * select, add_n, cast, identity and fill. Float32 and float64 run typed kernels; integer and
 * bool operands take an int64 path with the CPU's conversions. Everything is enqueued on the
 * worker's stream. */
#include "cuda_common.h"
#include "ew_math.h"

/* ---- unary ---------------------------------------------------------------------------- */


template <typename T>
static __global__ void unary_float_kernel(int kind, T p0, T p1, const T *__restrict__ x,
                                          T *__restrict__ y, int64_t n)
{
    TFC_CU_LOOP(i, n) y[i] = tfc_ew_unary(kind, x[i], p0, p1);
}

template <typename T>
static __global__ void predicate_kernel(int kind, const T *__restrict__ x,
                                        uint8_t *__restrict__ y, int64_t n)
{
    TFC_CU_LOOP(i, n) y[i] = (uint8_t)tfc_ew_predicate(kind, x[i]);
}

static __global__ void logical_not_kernel(const uint8_t *__restrict__ x, uint8_t *__restrict__ y,
                                          int64_t n)
{
    TFC_CU_LOOP(i, n) y[i] = !x[i];
}

/* The integer forms (ew_math.h), at the operand's width. */
static __global__ void unary_int_kernel(int kind, double p0, double p1, int dt, const void *x,
                                        void *y, int64_t n)
{
    TFC_CU_LOOP(i, n) tfc_cu_st_i64(y, dt, i, tfc_ew_unary_i64(kind, tfc_cu_ld_i64(x, dt, i), p0, p1));
}

static __global__ void cast_kernel(int from, int to, int via_float, const void *x, void *y,
                                   int64_t n)
{
    if (via_float) {
        TFC_CU_LOOP(i, n) tfc_cu_st_f64(y, to, i, tfc_cu_ld_f64(x, from, i));
    } else {
        TFC_CU_LOOP(i, n) tfc_cu_st_i64(y, to, i, tfc_cu_ld_i64(x, from, i));
    }
}

/* ---- binary --------------------------------------------------------------------------- */


template <typename T>
static __global__ void binary_float_kernel(int kind, struct tfc_cu_bcast b,
                                           const T *__restrict__ x, const T *__restrict__ y,
                                           T *__restrict__ o, int64_t n)
{
    if (b.rank == 1 && b.st[0][0] == 1 && b.st[1][0] == 1) { /* same shapes */
        TFC_CU_LOOP(i, n) o[i] = tfc_ew_binary(kind, x[i], y[i]);
        return;
    }
    TFC_CU_LOOP(i, n)
    {
        int64_t off[2];
        tfc_cu_bcast_off<2>(b, i, off);
        o[i] = tfc_ew_binary(kind, x[off[0]], y[off[1]]);
    }
}

/* Broadcast: output element i is x's element at its broadcast offset (copied by size). */
template <typename E>
static __global__ void broadcast_kernel(struct tfc_cu_bcast b, const E *__restrict__ x,
                                        E *__restrict__ o, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        int64_t off[1];
        tfc_cu_bcast_off<1>(b, i, off);
        o[i] = x[off[0]];
    }
}

/* Integer arithmetic (ew_math.h, wrapping); division by zero gives 0 and fails the run. */
static __global__ void binary_int_kernel(int kind, int dt, struct tfc_cu_bcast b, const void *x,
                                         const void *y, void *o, int64_t n,
                                         struct tfc_cu_err *err)
{
    TFC_CU_LOOP(i, n)
    {
        int64_t off[2];
        tfc_cu_bcast_off<2>(b, i, off);
        int64_t u = tfc_cu_ld_i64(x, dt, off[0]), v = tfc_cu_ld_i64(y, dt, off[1]);
        if (kind == TFC_K_DIV && v == 0) tfc_cu_raise(err, i);
        tfc_cu_st_i64(o, dt, i, tfc_ew_binary_i64(kind, u, v));
    }
}

static __global__ void compare_kernel(int kind, int dt, struct tfc_cu_bcast b, const void *x,
                                      const void *y, uint8_t *o, int64_t n)
{
    int fl = dt == TFC_FLOAT32 || dt == TFC_FLOAT64;
    TFC_CU_LOOP(i, n)
    {
        int64_t off[2];
        tfc_cu_bcast_off<2>(b, i, off);
        if (fl)
            o[i] = (uint8_t)tfc_ew_compare(kind, tfc_cu_ld_f64(x, dt, off[0]),
                                           tfc_cu_ld_f64(y, dt, off[1]));
        else
            o[i] = (uint8_t)tfc_ew_compare_i64(kind, tfc_cu_ld_i64(x, dt, off[0]),
                                               tfc_cu_ld_i64(y, dt, off[1]));
    }
}

/* ---- select, add_n, fill -------------------------------------------------------------- */

template <typename E>
static __global__ void select_kernel(struct tfc_cu_bcast b, const uint8_t *__restrict__ c,
                                     const E *__restrict__ x, const E *__restrict__ y,
                                     E *__restrict__ o, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        int64_t off[3];
        tfc_cu_bcast_off<3>(b, i, off);
        o[i] = c[off[0]] ? x[off[1]] : y[off[2]];
    }
}

#define ADD_N_CHUNK 32

struct add_n_ptrs {
    const void *p[ADD_N_CHUNK];
};

/* out = (first ? p[0] : out) + the other p[k], in order, rounding after each add as the CPU's
 * out[i] += v[i] does. */
template <typename T>
static __global__ void add_n_float_kernel(struct add_n_ptrs P, int cnt, int first, T *out,
                                          int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        T acc = first ? ((const T *)P.p[0])[i] : out[i];
        for (int k = first ? 1 : 0; k < cnt; k++) acc += ((const T *)P.p[k])[i];
        out[i] = acc;
    }
}

static __global__ void add_n_int_kernel(struct add_n_ptrs P, int cnt, int first, int dt,
                                        void *out, int64_t n)
{
    TFC_CU_LOOP(i, n)
    {
        int64_t acc = tfc_cu_ld_i64(first ? P.p[0] : out, dt, i);
        for (int k = first ? 1 : 0; k < cnt; k++)
            acc = tfc_cu_wrap_i64(dt, (int64_t)((uint64_t)acc +
                                                (uint64_t)tfc_cu_ld_i64(P.p[k], dt, i)));
        tfc_cu_st_i64(out, dt, i, acc);
    }
}

static __global__ void fill_kernel(int dt, double v, void *out, int64_t n)
{
    if (dt == TFC_FLOAT32) {
        float f = (float)v;
        TFC_CU_LOOP(i, n)((float *)out)[i] = f;
        return;
    }
    TFC_CU_LOOP(i, n) tfc_cu_st_f64(out, dt, i, v);
}

/* ---- host ----------------------------------------------------------------------------- */

static void unary_cuda(const struct tfc_kargs *a, const void *in, void *out, cudaStream_t s)
{
    int64_t n = a->d[a->n_in].numel;
    int dt = a->d[0].dtype;
    double p0 = a->attrs[TFC_EW_ATTR_P0].f, p1 = a->attrs[TFC_EW_ATTR_P1].f;
    unsigned g = tfc_cu_blocks(n);
    int pred = tfc_ew_class(a->kind) == TFC_EW_CLASS_PREDICATE;
    if (pred && dt == TFC_FLOAT32)
        predicate_kernel<float><<<g, TFC_CU_THREADS, 0, s>>>(a->kind, (const float *)in,
                                                             (uint8_t *)out, n);
    else if (pred)
        predicate_kernel<double><<<g, TFC_CU_THREADS, 0, s>>>(a->kind, (const double *)in,
                                                              (uint8_t *)out, n);
    else if (dt == TFC_FLOAT32)
        unary_float_kernel<float><<<g, TFC_CU_THREADS, 0, s>>>(
            a->kind, (float)p0, (float)p1, (const float *)in, (float *)out, n);
    else if (dt == TFC_FLOAT64)
        unary_float_kernel<double><<<g, TFC_CU_THREADS, 0, s>>>(a->kind, p0, p1,
                                                                (const double *)in,
                                                                (double *)out, n);
    else if (a->kind == TFC_K_LOGICAL_NOT)
        logical_not_kernel<<<g, TFC_CU_THREADS, 0, s>>>((const uint8_t *)in, (uint8_t *)out, n);
    else
        unary_int_kernel<<<g, TFC_CU_THREADS, 0, s>>>(a->kind, p0, p1, dt, in, out, n);
    tfc_cu_check_launch(a, "elementwise unary");
}

static void cast_cuda(const struct tfc_kargs *a, const void *in, void *out, cudaStream_t s)
{
    int from = a->d[0].dtype, to = a->d[1].dtype;
    int64_t n = a->d[1].numel;
    if (from == to) {
        tfc_cu_check(a,
                     cudaMemcpyAsync(out, in, (size_t)n * tfc_kdtype_size(to),
                                     cudaMemcpyDeviceToDevice, s),
                     "cast copy");
        return;
    }
    int via_float = from == TFC_FLOAT32 || from == TFC_FLOAT64 || to == TFC_FLOAT32 ||
                    to == TFC_FLOAT64;
    cast_kernel<<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(from, to, via_float, in, out, n);
    tfc_cu_check_launch(a, "cast");
}

/* TFC_K_BROADCAST: input 1 gives only the shape (no buffer: never read). */
static void broadcast_cuda(const struct tfc_kargs *a, const void *x, void *out, cudaStream_t s)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    const struct tfc_kdesc *ins[1] = {&a->d[0]};
    struct tfc_cu_bcast b;
    tfc_cu_bcast_init(&b, o, 1, ins);
    int64_t n = o->numel;
    unsigned g = tfc_cu_blocks(n);
    switch (tfc_kdtype_size(a->d[0].dtype)) {
    case 8:
        broadcast_kernel<uint64_t><<<g, TFC_CU_THREADS, 0, s>>>(b, (const uint64_t *)x,
                                                                (uint64_t *)out, n);
        break;
    case 4:
        broadcast_kernel<uint32_t><<<g, TFC_CU_THREADS, 0, s>>>(b, (const uint32_t *)x,
                                                                (uint32_t *)out, n);
        break;
    default:
        broadcast_kernel<uint8_t><<<g, TFC_CU_THREADS, 0, s>>>(b, (const uint8_t *)x,
                                                               (uint8_t *)out, n);
        break;
    }
    tfc_cu_check_launch(a, "broadcast");
}

static void binary_cuda(const struct tfc_kargs *a, const void *x, const void *y, void *out,
                        cudaStream_t s)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    const struct tfc_kdesc *ins[2] = {&a->d[0], &a->d[1]};
    struct tfc_cu_bcast b;
    tfc_cu_bcast_init(&b, o, 2, ins);
    int64_t n = o->numel;
    int dt = a->d[0].dtype;
    unsigned g = tfc_cu_blocks(n);
    if (tfc_ew_class(a->kind) == TFC_EW_CLASS_COMPARE) {
        compare_kernel<<<g, TFC_CU_THREADS, 0, s>>>(a->kind, dt, b, x, y, (uint8_t *)out, n);
        tfc_cu_check_launch(a, "elementwise compare");
    } else if (dt == TFC_FLOAT32) {
        binary_float_kernel<float><<<g, TFC_CU_THREADS, 0, s>>>(
            a->kind, b, (const float *)x, (const float *)y, (float *)out, n);
        tfc_cu_check_launch(a, "elementwise binary");
    } else if (dt == TFC_FLOAT64) {
        binary_float_kernel<double><<<g, TFC_CU_THREADS, 0, s>>>(
            a->kind, b, (const double *)x, (const double *)y, (double *)out, n);
        tfc_cu_check_launch(a, "elementwise binary");
    } else {
        struct tfc_cu_err *e = a->kind == TFC_K_DIV ? tfc_cu_err_begin(a, s) : NULL;
        binary_int_kernel<<<g, TFC_CU_THREADS, 0, s>>>(a->kind, dt, b, x, y, out, n, e);
        if (!tfc_cu_check_launch(a, "elementwise integer binary") && e)
            tfc_cu_err_end(a, s, e, TFC_CU_ERR_DIV0, 0, NULL, 0);
    }
}

static void select_cuda(const struct tfc_kargs *a, const void *c, const void *x, const void *y,
                        void *out, cudaStream_t s)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    const struct tfc_kdesc *ins[3] = {&a->d[0], &a->d[1], &a->d[2]};
    struct tfc_cu_bcast b;
    tfc_cu_bcast_init(&b, o, 3, ins);
    int64_t n = o->numel;
    unsigned g = tfc_cu_blocks(n);
    const uint8_t *cc = (const uint8_t *)c;
    switch (tfc_kdtype_size(a->d[1].dtype)) {
    case 8:
        select_kernel<uint64_t><<<g, TFC_CU_THREADS, 0, s>>>(
            b, cc, (const uint64_t *)x, (const uint64_t *)y, (uint64_t *)out, n);
        break;
    case 4:
        select_kernel<uint32_t><<<g, TFC_CU_THREADS, 0, s>>>(
            b, cc, (const uint32_t *)x, (const uint32_t *)y, (uint32_t *)out, n);
        break;
    default:
        select_kernel<uint8_t><<<g, TFC_CU_THREADS, 0, s>>>(
            b, cc, (const uint8_t *)x, (const uint8_t *)y, (uint8_t *)out, n);
        break;
    }
    tfc_cu_check_launch(a, "select");
}

static void add_n_cuda(const struct tfc_kargs *a, void *buffers[], void *out, cudaStream_t s)
{
    int64_t n = a->d[a->n_in].numel;
    int dt = a->d[a->n_in].dtype;
    unsigned g = tfc_cu_blocks(n);
    for (int k0 = 0; k0 < a->n_in; k0 += ADD_N_CHUNK) {
        struct add_n_ptrs P;
        int cnt = a->n_in - k0 < ADD_N_CHUNK ? a->n_in - k0 : ADD_N_CHUNK;
        for (int k = 0; k < ADD_N_CHUNK; k++)
            P.p[k] = k < cnt ? tfc_kin(buffers, a, k0 + k) : NULL;
        int first = k0 == 0;
        if (dt == TFC_FLOAT32)
            add_n_float_kernel<float><<<g, TFC_CU_THREADS, 0, s>>>(P, cnt, first, (float *)out,
                                                                   n);
        else if (dt == TFC_FLOAT64)
            add_n_float_kernel<double><<<g, TFC_CU_THREADS, 0, s>>>(P, cnt, first,
                                                                    (double *)out, n);
        else
            add_n_int_kernel<<<g, TFC_CU_THREADS, 0, s>>>(P, cnt, first, dt, out, n);
        if (tfc_cu_check_launch(a, "add_n"))
            return;
    }
}

extern "C" void tfc_elementwise_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    switch (a->kind) {
    case TFC_K_CAST:
        cast_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    case TFC_K_IDENTITY:
        tfc_cu_check(a,
                     cudaMemcpyAsync(out, tfc_kin(buffers, a, 0),
                                     (size_t)a->d[1].numel * tfc_kdtype_size(a->d[1].dtype),
                                     cudaMemcpyDeviceToDevice, s),
                     "identity copy");
        break;
    case TFC_K_SELECT:
        select_cuda(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), tfc_kin(buffers, a, 2),
                    out, s);
        break;
    case TFC_K_ADD_N:
        add_n_cuda(a, buffers, out, s);
        break;
    case TFC_K_FILL: { /* zeros_like/ones_like: input 0 is shape-only, never read */
        const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
        fill_kernel<<<tfc_cu_blocks(o->numel), TFC_CU_THREADS, 0, s>>>(o->dtype, a->attrs[TFC_FILL_ATTR_VALUE].f,
                                                                       out, o->numel);
        tfc_cu_check_launch(a, "fill");
        break;
    }
    case TFC_K_BROADCAST:
        broadcast_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    default: /* as elementwise.c */
        if (tfc_ew_class(a->kind) == TFC_EW_CLASS_BINARY ||
            tfc_ew_class(a->kind) == TFC_EW_CLASS_COMPARE)
            binary_cuda(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out, s);
        else
            unary_cuda(a, tfc_kin(buffers, a, 0), out, s);
    }
}
