/* cuda_common.h: what the CUDA codelets (.cu files) share: launch helpers, dtype loads/stores
 * on the device that reproduce the CPU kernels' conversions (bcast.h, x86-64 semantics), a
 * broadcast-stride struct passed by value to kernels, the per-worker cuDNN handle, and the
 * device-side error reporting (range errors found by a kernel reach tfc_kernel_fail through a
 * host function enqueued on the worker's stream; nothing here synchronizes).
 * C++ (nvcc) only; included by the .cu files of codelets/. */
#ifndef TFC_CUDA_COMMON_H
#define TFC_CUDA_COMMON_H

#include <stdint.h>
#include <math.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <starpu.h>
#include "kernel.h" /* C declarations behind extern "C" guards */
#include "../src/tfc.h"

/* ---- launch helpers ------------------------------------------------------------------- */

#define TFC_CU_THREADS 256

/* Blocks for a grid-stride loop over n items (at least 1, capped). */
static inline unsigned tfc_cu_blocks(int64_t n, int threads = TFC_CU_THREADS)
{
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 32768) b = 32768;
    return (unsigned)b;
}

#define TFC_CU_LOOP(i, n)                                                                   \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (int64_t)(n);     \
         i += (int64_t)blockDim.x * gridDim.x)

/* After a launch: a launch error fails the run (TFC_ERR_RUNTIME). Returns 0 on success. */
int tfc_cu_check_launch(const struct tfc_kargs *a, const char *what);
/* A CUDA runtime status: non-success fails the run. Returns 0 on success. */
int tfc_cu_check(const struct tfc_kargs *a, cudaError_t st, const char *what);

/* The calling CUDA worker's cuDNN handle, bound to its local stream (NULL on failure). */
cudnnHandle_t tfc_cuda_cudnn_handle(void);
/* Registers `release` to run on each CUDA worker at shutdown, before its cuDNN handle is
 * destroyed (idempotent; -1 when the few slots are taken). */
int tfc_cuda_on_worker_shutdown(void (*release)(void));

/* ---- dtype loads and stores (same results as bcast.h compiled by gcc for x86-64) ------- */

/* x86 cvttsd2si: out-of-range and NaN give the "integer indefinite" value. */
static __host__ __device__ __forceinline__ int32_t
tfc_cu_d2i32(double v)
{
    return (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
}

static __host__ __device__ __forceinline__ int64_t
tfc_cu_d2i64(double v)
{
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : INT64_MIN;
}

static __host__ __device__ __forceinline__ int64_t
tfc_cu_f2i64(float v)
{
    return (v >= -9223372036854775808.0f && v < 9223372036854775808.0f) ? (int64_t)v
                                                                         : INT64_MIN;
}

static __host__ __device__ __forceinline__ double
tfc_cu_ld_f64(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case 0: return ((const float *)p)[i];
    case 1: return ((const double *)p)[i];
    case 2: return ((const int32_t *)p)[i];
    case 3: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static __host__ __device__ __forceinline__ void
tfc_cu_st_f64(void *p, int dt, int64_t i, double v)
{
    switch (dt) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((double *)p)[i] = v; break;
    case 2: ((int32_t *)p)[i] = tfc_cu_d2i32(v); break;
    case 3: ((int64_t *)p)[i] = tfc_cu_d2i64(v); break;
    case 4: ((uint8_t *)p)[i] = (uint8_t)tfc_cu_d2i32(v); break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

static __host__ __device__ __forceinline__ int64_t
tfc_cu_ld_i64(const void *p, int dt, int64_t i)
{
    switch (dt) {
    case 0: return tfc_cu_f2i64(((const float *)p)[i]);
    case 1: return tfc_cu_d2i64(((const double *)p)[i]);
    case 2: return ((const int32_t *)p)[i];
    case 3: return ((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static __host__ __device__ __forceinline__ void
tfc_cu_st_i64(void *p, int dt, int64_t i, int64_t v)
{
    switch (dt) {
    case 0: ((float *)p)[i] = (float)v; break;
    case 1: ((double *)p)[i] = (double)v; break;
    case 2: ((int32_t *)p)[i] = (int32_t)v; break;
    case 3: ((int64_t *)p)[i] = v; break;
    case 4: ((uint8_t *)p)[i] = (uint8_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

/* What an integer value reads back as after a store to dtype dt (integer dtypes). */
static __host__ __device__ __forceinline__ int64_t
tfc_cu_wrap_i64(int dt, int64_t v)
{
    switch (dt) {
    case 2: return (int32_t)v;
    case 3: return v;
    case 4: return (uint8_t)v;
    default: return v != 0;
    }
}

/* ---- broadcasting --------------------------------------------------------------------- */

#define TFC_CU_BCAST_MAX 3

/* Output dims and per-operand element strides (0 = broadcast), as tfc_bcast_init computes
 * them, then with size-1 dims dropped and mergeable neighbours collapsed. */
struct tfc_cu_bcast {
    int rank; /* >= 1 */
    int n;
    int64_t dims[TFC_K_MAX_RANK];
    int64_t st[TFC_CU_BCAST_MAX][TFC_K_MAX_RANK];
};

static inline void tfc_cu_bcast_init(struct tfc_cu_bcast *b, const struct tfc_kdesc *out, int n,
                                     const struct tfc_kdesc *const *in)
{
    int rank = out->rank > 0 ? out->rank : 1;
    int64_t dims[TFC_K_MAX_RANK], st[TFC_CU_BCAST_MAX][TFC_K_MAX_RANK];
    for (int d = 0; d < rank; d++) dims[d] = out->rank > 0 ? out->dims[d] : 1;
    for (int k = 0; k < n; k++) {
        int64_t stride = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int id = in[k]->rank - (rank - d);
            int64_t dim = id >= 0 ? in[k]->dims[id] : 1;
            st[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    /* drop size-1 dims, merge d into the next kept one when every operand is contiguous */
    b->n = n;
    b->rank = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue;
        int r = b->rank;
        b->dims[r] = dims[d];
        for (int k = 0; k < n; k++) b->st[k][r] = st[k][d];
        b->rank++;
    }
    if (b->rank == 0) {
        b->rank = 1;
        b->dims[0] = 1;
        for (int k = 0; k < n; k++) b->st[k][0] = 0;
        return;
    }
    int w = 0;
    for (int d = 1; d < b->rank; d++) {
        int ok = 1;
        for (int k = 0; k < n; k++)
            if (b->st[k][w] != b->st[k][d] * b->dims[d]) ok = 0;
        if (ok) {
            b->dims[w] *= b->dims[d];
            for (int k = 0; k < n; k++) b->st[k][w] = b->st[k][d];
        } else {
            w++;
            b->dims[w] = b->dims[d];
            for (int k = 0; k < n; k++) b->st[k][w] = b->st[k][d];
        }
    }
    b->rank = w + 1;
}

/* Element offsets of output element e in each of the first N operands (host-callable too, for
 * checks; N is a constant, so the operand loops unroll). */
template <int N>
static __host__ __device__ __forceinline__ void
tfc_cu_bcast_off(const struct tfc_cu_bcast &b, int64_t e, int64_t *off)
{
    for (int k = 0; k < N; k++) off[k] = 0;
    for (int d = b.rank - 1; d >= 0; d--) {
        int64_t dim = b.dims[d];
        int64_t q = d ? e / dim : 0;
        int64_t idx = d ? e - q * dim : e;
        for (int k = 0; k < N; k++) off[k] += idx * b.st[k][d];
        e = q;
    }
}

/* ---- device-side errors --------------------------------------------------------------- */

/* A per-worker device slot: `first` is the smallest failing position (~0 = none), `value`
 * the offending index value (filled after the kernel by tfc_cu_err_end). */
struct tfc_cu_err {
    unsigned long long first;
    long long value;
};

static __device__ __forceinline__ void tfc_cu_raise(struct tfc_cu_err *e, int64_t pos)
{
    if (e)
        atomicMin(&e->first, (unsigned long long)pos);
}

/* Resets the calling worker's slot on stream s and returns it (NULL if it could not be made;
 * kernels then skip the recording). */
struct tfc_cu_err *tfc_cu_err_begin(const struct tfc_kargs *a, cudaStream_t s);
/* After the kernels that may raise (kind: enum tfc_kerr_kind): a one-thread kernel reads the
 * offending value from idx (dtype idx_dtype, may be NULL) and, when something was raised,
 * writes the record into the run's mapped host record (a->err->dev; the run formats it after
 * its tasks end). Without such a record: copies the slot to pinned memory and enqueues a host
 * function that calls tfc_kernel_fail (a stream round trip through the host per task). bound
 * is the valid range's end, for the message. */
void tfc_cu_err_end(const struct tfc_kargs *a, cudaStream_t s, struct tfc_cu_err *e, int kind,
                    int64_t bound, const void *idx, int idx_dtype);

#endif
