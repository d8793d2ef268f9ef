/* reduce.cu: CUDA reduce sum, mean, max, min over a set of axes (sum_to: the axes broadcasting
 * added or stretched, input 1 shape-only) and argmax over one axis,
 * computing what reduce.c computes: accumulation in double, NaN sticky for max/min, empty
 * reductions give 0 (sum), NaN (mean), -inf (max), +inf (min); argmax gives the first maximum.
 * Many outputs: one thread per output visiting its elements in the CPU's order. Few outputs
 * over many elements: one block (reduce) or one warp (argmax) per output; in between (a bias
 * gradient), 32 outputs per block with 8 threads on each. */
#include "cuda_common.h"
#include "bcast.h" /* tfc_reduced_axes, host side */

/* Kept axes (output order) and reduced axes (input order) with their input strides, size-1
 * axes dropped and contiguous neighbours merged. */
struct reduce_args {
    int kind, in_dt, out_dt;
    int nk, nr;
    int64_t kdims[TFC_K_MAX_RANK], kst[TFC_K_MAX_RANK];
    int64_t rdims[TFC_K_MAX_RANK], rst[TFC_K_MAX_RANK];
    int64_t n_out, count;
    int64_t div;  /* what a mean divides by (bcast.h tfc_reduce_divisor) */
    double init;
};

static __device__ __forceinline__ double red_op(int kind, double acc, double v)
{
    switch (kind) {
    case TFC_K_REDUCE_MAX: return (v > acc || isnan(v)) ? v : acc;
    case TFC_K_REDUCE_MIN: return (v < acc || isnan(v)) ? v : acc;
    default: return acc + v;
    }
}

static __device__ __forceinline__ void red_store(const struct reduce_args &p, void *y, int64_t o,
                                                 double v)
{
    if (p.kind == TFC_K_REDUCE_MEAN) v = p.div ? v / (double)p.div : NAN;
    tfc_cu_st_f64(y, p.out_dt, o, v);
}

/* Input offset of the first element of output o. */
static __host__ __device__ __forceinline__ int64_t red_base(const struct reduce_args &p, int64_t o)
{
    int64_t off = 0;
    for (int d = p.nk - 1; d >= 0; d--) {
        int64_t q = o / p.kdims[d];
        off += (o - q * p.kdims[d]) * p.kst[d];
        o = q;
    }
    return off;
}

/* One thread per output; elements in row-major order of the reduced axes (the CPU's order). */
static __global__ void reduce_thread_kernel(struct reduce_args p, const void *x, void *y)
{
    int64_t inner = p.nr ? p.rdims[p.nr - 1] : 1, ist = p.nr ? p.rst[p.nr - 1] : 0;
    int64_t outer = inner ? p.count / inner : 0;
    TFC_CU_LOOP(o, p.n_out)
    {
        int64_t base = red_base(p, o);
        double acc = p.init;
        for (int64_t ro = 0; ro < outer; ro++) {
            int64_t off = base, rem = ro;
            for (int d = p.nr - 2; d >= 0; d--) {
                int64_t q = rem / p.rdims[d];
                off += (rem - q * p.rdims[d]) * p.rst[d];
                rem = q;
            }
            for (int64_t j = 0; j < inner; j++)
                acc = red_op(p.kind, acc, tfc_cu_ld_f64(x, p.in_dt, off + j * ist));
        }
        red_store(p, y, o, acc);
    }
}

/* Output o's elements r0, r0 + step, ... folded into acc (in that order). */
static __device__ __forceinline__ double red_strided(const struct reduce_args &p, const void *x,
                                                     int64_t base, int64_t r0, int64_t step,
                                                     double acc)
{
    for (int64_t r = r0; r < p.count; r += step) {
        int64_t off = base, rem = r;
        for (int d = p.nr - 1; d >= 0; d--) {
            int64_t q = rem / p.rdims[d];
            off += (rem - q * p.rdims[d]) * p.rst[d];
            rem = q;
        }
        acc = red_op(p.kind, acc, tfc_cu_ld_f64(x, p.in_dt, off));
    }
    return acc;
}

#define RED_BLOCK 512

/* The input offset of row ro of output o (a row: the last reduced axis). */
static __device__ __forceinline__ int64_t red_row(const struct reduce_args &p, int64_t base,
                                                  int64_t ro)
{
    for (int d = p.nr - 2; d >= 0; d--) {
        int64_t q = ro / p.rdims[d];
        base += (ro - q * p.rdims[d]) * p.rst[d];
        ro = q;
    }
    return base;
}

/* Output o's elements over rows at least a block long: the block walks the rows in order, its
 * threads striding along each row (neighbouring addresses where the row is contiguous), with
 * four loads in flight per thread and the adds in each thread's element order. Index
 * arithmetic per row, not per element: a conv bias gradient (128x32x28x28 to 32) took 190 us
 * with the per-element form on an H200. */
static __device__ __forceinline__ double red_rows(const struct reduce_args &p, const void *x,
                                                  int64_t base, int64_t inner, int64_t ist,
                                                  double acc)
{
    int64_t outer = p.count / inner, t = threadIdx.x, b = blockDim.x;
    for (int64_t ro = 0; ro < outer; ro++) {
        int64_t off = red_row(p, base, ro), j = t;
        for (; j + 3 * b < inner; j += 4 * b) {
            double v0 = tfc_cu_ld_f64(x, p.in_dt, off + j * ist);
            double v1 = tfc_cu_ld_f64(x, p.in_dt, off + (j + b) * ist);
            double v2 = tfc_cu_ld_f64(x, p.in_dt, off + (j + 2 * b) * ist);
            double v3 = tfc_cu_ld_f64(x, p.in_dt, off + (j + 3 * b) * ist);
            acc = red_op(p.kind, red_op(p.kind, acc, v0), v1);
            acc = red_op(p.kind, red_op(p.kind, acc, v2), v3);
        }
        for (; j < inner; j += b)
            acc = red_op(p.kind, acc, tfc_cu_ld_f64(x, p.in_dt, off + j * ist));
    }
    return acc;
}

/* One block per output. */
static __global__ void reduce_block_kernel(struct reduce_args p, const void *x, void *y)
{
    __shared__ double sh[RED_BLOCK];
    int64_t inner = p.nr ? p.rdims[p.nr - 1] : 1, ist = p.nr ? p.rst[p.nr - 1] : 0;
    for (int64_t o = blockIdx.x; o < p.n_out; o += gridDim.x) {
        int64_t base = red_base(p, o);
        double acc = inner >= (int64_t)blockDim.x
                         ? red_rows(p, x, base, inner, ist, p.init)
                         : red_strided(p, x, base, threadIdx.x, blockDim.x, p.init);
        sh[threadIdx.x] = acc;
        __syncthreads();
        for (int w = RED_BLOCK / 2; w > 0; w >>= 1) {
            if ((int)threadIdx.x < w)
                sh[threadIdx.x] = red_op(p.kind, sh[threadIdx.x], sh[threadIdx.x + w]);
            __syncthreads();
        }
        if (threadIdx.x == 0)
            red_store(p, y, o, sh[0]);
        __syncthreads();
    }
}

#define COLS_X 32 /* outputs per block */
#define COLS_Y 8  /* threads sharing one output's elements */

/* Few outputs over a moderate count (a bias gradient: [batch, units] summed over the batch):
 * a block takes COLS_X neighbouring outputs (neighbouring addresses when the kept axis is the
 * inner one), COLS_Y threads share each output's elements, and shared memory adds them up. */
static __global__ void reduce_cols_kernel(struct reduce_args p, const void *x, void *y)
{
    __shared__ double sh[COLS_Y][COLS_X + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    for (int64_t o0 = (int64_t)blockIdx.x * COLS_X; o0 < p.n_out;
         o0 += (int64_t)gridDim.x * COLS_X) {
        int64_t o = o0 + tx;
        double acc = o < p.n_out ? red_strided(p, x, red_base(p, o), ty, COLS_Y, p.init) : p.init;
        sh[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && o < p.n_out) {
            double v = sh[0][tx];
            for (int k = 1; k < COLS_Y; k++) v = red_op(p.kind, v, sh[k][tx]);
            red_store(p, y, o, v);
        }
        __syncthreads();
    }
}

struct argmax_args {
    int dt;
    int64_t outer, len, inner;
};

/* One thread per output, the CPU's loop: `v > best || j == 0`. */
static __global__ void argmax_thread_kernel(struct argmax_args p, const void *x, int64_t *y)
{
    TFC_CU_LOOP(o, p.outer * p.inner)
    {
        int64_t oo = o / p.inner, in = o - oo * p.inner;
        int64_t base = oo * p.len * p.inner + in, best = 0;
        double bv = -INFINITY;
        for (int64_t j = 0; j < p.len; j++) {
            double v = tfc_cu_ld_f64(x, p.dt, base + j * p.inner);
            if (v > bv || j == 0) {
                bv = v;
                best = j;
            }
        }
        y[o] = best;
    }
}

/* One warp per output. Same result as the sequential loop: 0 when element 0 is NaN, else the
 * first index of the largest non-NaN value. */
static __global__ void argmax_warp_kernel(struct argmax_args p, const void *x, int64_t *y)
{
    int lane = threadIdx.x & 31;
    int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t o = warp; o < p.outer * p.inner; o += nwarps) {
        int64_t oo = o / p.inner, in = o - oo * p.inner;
        int64_t base = oo * p.len * p.inner + in, best = -1;
        double bv = -INFINITY;
        for (int64_t j = lane; j < p.len; j += 32) {
            double v = tfc_cu_ld_f64(x, p.dt, base + j * p.inner);
            if (!isnan(v) && (best < 0 || v > bv)) {
                bv = v;
                best = j;
            }
        }
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) {
            double ov = __shfl_xor_sync(0xffffffffu, bv, s);
            long long ob = __shfl_xor_sync(0xffffffffu, (long long)best, s);
            if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) {
                bv = ov;
                best = ob;
            }
        }
        if (lane == 0) {
            if (p.len == 0 || isnan(tfc_cu_ld_f64(x, p.dt, base)))
                best = 0;
            y[o] = best;
        }
    }
}

/* x: the input, rows ld apart when it is a 2-D tile (sched/tiling.c). */
static void reduce_args_init(const struct tfc_kargs *a, const void *x, int64_t ld,
                             struct reduce_args *pp)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    int reduced[TFC_K_MAX_RANK];
    tfc_reduced_axes(a, reduced);
    int64_t ist[TFC_K_MAX_RANK];
    tfc_reduce_input_strides(d, ld, ist);
    struct reduce_args &p = *pp;
    p.kind = a->kind;
    p.in_dt = d->dtype;
    p.out_dt = o->dtype;
    p.nk = 0;
    p.nr = 0;
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] == 1)
            continue;
        int64_t *dims = reduced[i] ? p.rdims : p.kdims, *st = reduced[i] ? p.rst : p.kst;
        int *cnt = reduced[i] ? &p.nr : &p.nk;
        if (*cnt > 0 && st[*cnt - 1] == ist[i] * d->dims[i]) { /* merge into the previous */
            dims[*cnt - 1] *= d->dims[i];
            st[*cnt - 1] = ist[i];
        } else {
            dims[*cnt] = d->dims[i];
            st[*cnt] = ist[i];
            (*cnt)++;
        }
    }
    p.n_out = o->numel;
    p.count = p.n_out ? d->numel / p.n_out : 0;
    p.div = tfc_reduce_divisor(a, p.count);
    p.init = a->kind == TFC_K_REDUCE_MAX ? -INFINITY
           : a->kind == TFC_K_REDUCE_MIN ? INFINITY : 0.0;
    if (p.count == 0 || !x) {
        p.count = 0;
        p.nr = 0;
    }
}

static void reduce_cuda(const struct tfc_kargs *a, const void *x, int64_t ld, void *y,
                        cudaStream_t s)
{
    struct reduce_args p;
    reduce_args_init(a, x, ld, &p);
    if (p.n_out < 4096 && p.count >= 512) {
        reduce_block_kernel<<<tfc_cu_blocks(p.n_out, 1), RED_BLOCK, 0, s>>>(p, x, y);
    } else if (p.n_out < 65536 && p.count >= 32) {
        int64_t blocks = (p.n_out + COLS_X - 1) / COLS_X;
        reduce_cols_kernel<<<(unsigned)blocks, dim3(COLS_X, COLS_Y), 0, s>>>(p, x, y);
    } else
        reduce_thread_kernel<<<tfc_cu_blocks(p.n_out), TFC_CU_THREADS, 0, s>>>(p, x, y);
    tfc_cu_check_launch(a, "reduce");
}

static void argmax_cuda(const struct tfc_kargs *a, const void *x, int64_t *y, cudaStream_t s)
{
    const struct tfc_kdesc *d = &a->d[0];
    struct argmax_args p;
    p.dt = d->dtype;
    p.outer = 1;
    p.len = 1;
    p.inner = 1;
    if (d->rank > 0) {
        int axis = (int)a->attrs[ARGMAX_AXIS].i;
        if (axis < 0) axis += d->rank;
        p.len = d->dims[axis];
        for (int i = 0; i < axis; i++) p.outer *= d->dims[i];
        for (int i = axis + 1; i < d->rank; i++) p.inner *= d->dims[i];
    }
    int64_t n = p.outer * p.inner;
    if (n < 8192 && p.len >= 64)
        argmax_warp_kernel<<<tfc_cu_blocks(n, 8), 256, 0, s>>>(p, x, y);
    else
        argmax_thread_kernel<<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(p, x, y);
    tfc_cu_check_launch(a, "argmax");
}

extern "C" void tfc_reduce_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (a->kind == TFC_K_ARGMAX)
        argmax_cuda(a, tfc_kin(buffers, a, 0), (int64_t *)out, s);
    else
        reduce_cuda(a, tfc_kin(buffers, a, 0), tfc_kdesc_ld(buffers, &a->d[0]), out, s);
}
