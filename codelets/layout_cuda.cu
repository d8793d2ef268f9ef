/* layout.cu: CUDA kernels that move data without arithmetic, as layout.c does: reshape (a
 * device copy), transpose (any permutation), concat and split (2-D copies), slice, gather
 * (rows; an index out of range gives a zero row and fails the run), one_hot, and the adjoints
 * slice_grad and scatter_add (atomic adds; an index out of range fails the run as in gather).
 * Data moves as 1-, 4- or 8-byte elements chosen by the dtype's size. */
#include "cuda_common.h"

/* A strided view: output element e (row-major over dims) reads input element
 * base + sum idx[d] * st[d]. Size-1 dims dropped, contiguous neighbours merged. */
struct view_args {
    int rank;
    int64_t base;
    int64_t dims[TFC_K_MAX_RANK], st[TFC_K_MAX_RANK];
};

static void view_init(struct view_args *v, int rank, const int64_t *dims, const int64_t *st,
                      int64_t base)
{
    v->base = base;
    v->rank = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1)
            continue;
        if (v->rank > 0 && v->st[v->rank - 1] == st[d] * dims[d]) {
            v->dims[v->rank - 1] *= dims[d];
            v->st[v->rank - 1] = st[d];
        } else {
            v->dims[v->rank] = dims[d];
            v->st[v->rank] = st[d];
            v->rank++;
        }
    }
}

static __host__ __device__ __forceinline__ int64_t view_offset(const struct view_args &v,
                                                               int64_t e)
{
    int64_t off = v.base, rem = e;
    for (int d = v.rank - 1; d >= 0; d--) {
        int64_t q = d ? rem / v.dims[d] : 0;
        off += (d ? rem - q * v.dims[d] : rem) * v.st[d];
        rem = q;
    }
    return off;
}

template <typename E>
static __global__ void view_copy_kernel(struct view_args v, const E *__restrict__ x,
                                        E *__restrict__ y, int64_t n)
{
    TFC_CU_LOOP(e, n) y[e] = x[view_offset(v, e)];
}

static void view_copy(const struct tfc_kargs *a, const struct view_args *v, size_t es,
                      const void *x, void *y, int64_t n, cudaStream_t s)
{
    unsigned g = tfc_cu_blocks(n);
    switch (es) {
    case 8:
        view_copy_kernel<uint64_t><<<g, TFC_CU_THREADS, 0, s>>>(*v, (const uint64_t *)x,
                                                                (uint64_t *)y, n);
        break;
    case 4:
        view_copy_kernel<uint32_t><<<g, TFC_CU_THREADS, 0, s>>>(*v, (const uint32_t *)x,
                                                                (uint32_t *)y, n);
        break;
    default:
        view_copy_kernel<uint8_t><<<g, TFC_CU_THREADS, 0, s>>>(*v, (const uint8_t *)x,
                                                               (uint8_t *)y, n);
        break;
    }
    tfc_cu_check_launch(a, "layout copy");
}

/* Row-major strides of a desc, in elements. */
static void strides_of(const struct tfc_kdesc *d, int64_t *st)
{
    int64_t s = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= d->dims[i];
    }
}

static void transpose_view(const struct tfc_kargs *a, struct view_args *v)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    int64_t ist[TFC_K_MAX_RANK], pst[TFC_K_MAX_RANK];
    const struct tfc_kattr *perm = &a->attrs[TRANSPOSE_PERM];
    int r = d->rank;
    strides_of(d, ist);
    for (int i = 0; i < r; i++) {
        int64_t p = perm->n ? perm->v[i] : r - 1 - i;
        if (p < 0) p += r;
        pst[i] = ist[p]; /* input stride of output axis i */
    }
    view_init(v, o->rank, o->dims, pst, 0);
}

static void transpose_cuda(const struct tfc_kargs *a, const void *x, void *y, cudaStream_t s)
{
    struct view_args v;
    transpose_view(a, &v);
    view_copy(a, &v, tfc_kdtype_size(a->d[0].dtype), x, y, tfc_kout_desc(a, 0)->numel, s);
}

static void slice_view(const struct tfc_kargs *a, struct view_args *v)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    int64_t ist[TFC_K_MAX_RANK], off = 0;
    strides_of(d, ist);
    for (int i = 0; i < d->rank; i++) off += a->attrs[SLICE_BEGIN].v[i] * ist[i];
    /* the output has the input's rank (rank 0: element 0, as layout.c copies) */
    view_init(v, o->rank, o->dims, ist, o->rank ? off : 0);
}

static void slice_cuda(const struct tfc_kargs *a, const void *x, void *y, cudaStream_t s)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    struct view_args v;
    slice_view(a, &v);
    view_copy(a, &v, tfc_kdtype_size(a->d[0].dtype), x, y, o->rank ? o->numel : 1, s);
}

/* Concat (parts into whole) or split (whole into parts): outer x (len_k x inner) blocks. */
static void concat_split_cuda(const struct tfc_kargs *a, void *buffers[], int is_split,
                              cudaStream_t s)
{
    int axis;
    int64_t outer, inner;
    const struct tfc_kdesc *whole = tfc_concat_geometry(a, is_split, &axis, &outer, &inner);
    size_t es = tfc_kdtype_size(whole->dtype);
    int n_parts = is_split ? a->n_out : a->n_in;
    char *w = (char *)(is_split ? tfc_kin(buffers, a, 0) : tfc_kout(buffers, a, 0));
    size_t row = (size_t)(whole->dims[axis] * inner) * es, pos = 0;
    for (int k = 0; k < n_parts; k++) {
        const struct tfc_kdesc *pd = is_split ? tfc_kout_desc(a, k) : &a->d[k];
        char *p = (char *)(is_split ? tfc_kout(buffers, a, k) : tfc_kin(buffers, a, k));
        size_t chunk = (size_t)(pd->dims[axis] * inner) * es;
        if (chunk && p && w && outer > 0) {
            cudaError_t st;
            if (outer == 1)
                st = cudaMemcpyAsync(is_split ? (void *)p : (void *)(w + pos),
                                     is_split ? (const void *)(w + pos) : (const void *)p, chunk,
                                     cudaMemcpyDeviceToDevice, s);
            else if (is_split)
                st = cudaMemcpy2DAsync(p, chunk, w + pos, row, chunk, (size_t)outer,
                                       cudaMemcpyDeviceToDevice, s);
            else
                st = cudaMemcpy2DAsync(w + pos, row, p, chunk, chunk, (size_t)outer,
                                       cudaMemcpyDeviceToDevice, s);
            if (tfc_cu_check(a, st, is_split ? "split copy" : "concat copy"))
                return;
        }
        pos += chunk;
    }
}

/* Output element e = (i, j): row i of the output is row indices[i] of params, or zeros. */
template <typename E>
static __global__ void gather_kernel(const E *__restrict__ params, const void *indices,
                                     int idx_dt, int64_t rows, int64_t rowel, E *__restrict__ y,
                                     int64_t n, struct tfc_cu_err *err)
{
    TFC_CU_LOOP(e, n)
    {
        int64_t i = e / rowel, j = e - i * rowel;
        int64_t id = tfc_cu_ld_i64(indices, idx_dt, i);
        if (id < 0 || id >= rows) {
            if (j == 0)
                tfc_cu_raise(err, i);
            y[e] = 0;
        } else {
            y[e] = params[id * rowel + j];
        }
    }
}

/* Rows of zero elements: only the range check. */
static __global__ void index_check_kernel(const void *indices, int idx_dt, int64_t rows,
                                          int64_t n, struct tfc_cu_err *err)
{
    TFC_CU_LOOP(i, n)
    {
        int64_t id = tfc_cu_ld_i64(indices, idx_dt, i);
        if (id < 0 || id >= rows)
            tfc_cu_raise(err, i);
    }
}

static void gather_cuda(const struct tfc_kargs *a, const void *params, const void *indices,
                        void *y, cudaStream_t s)
{
    const struct tfc_kdesc *p = &a->d[0], *ix = &a->d[1];
    size_t es = tfc_kdtype_size(p->dtype);
    int64_t rows = p->rank ? p->dims[0] : 0;
    int64_t rowel = rows ? p->numel / rows : 0;
    int64_t n = ix->numel * rowel;
    if (ix->numel == 0 || !indices)
        return;
    struct tfc_cu_err *e = tfc_cu_err_begin(a, s);
    unsigned g = tfc_cu_blocks(n);
    if (rowel == 0)
        index_check_kernel<<<tfc_cu_blocks(ix->numel), TFC_CU_THREADS, 0, s>>>(
            indices, ix->dtype, rows, ix->numel, e);
    else if (es == 8)
        gather_kernel<uint64_t><<<g, TFC_CU_THREADS, 0, s>>>(
            (const uint64_t *)params, indices, ix->dtype, rows, rowel, (uint64_t *)y, n, e);
    else if (es == 4)
        gather_kernel<uint32_t><<<g, TFC_CU_THREADS, 0, s>>>(
            (const uint32_t *)params, indices, ix->dtype, rows, rowel, (uint32_t *)y, n, e);
    else
        gather_kernel<uint8_t><<<g, TFC_CU_THREADS, 0, s>>>(
            (const uint8_t *)params, indices, ix->dtype, rows, rowel, (uint8_t *)y, n, e);
    if (!tfc_cu_check_launch(a, "gather") && e)
        tfc_cu_err_end(a, s, e, TFC_CU_ERR_GATHER, rows, indices, ix->dtype);
}

/* ---- adjoints: slice_grad, scatter_add ------------------------------------------------- */

/* The scatter form of a view: input element e (row-major) goes to output view_offset(v, e). */
template <typename E>
static __global__ void view_scatter_kernel(struct view_args v, const E *__restrict__ x,
                                           E *__restrict__ y, int64_t n)
{
    TFC_CU_LOOP(e, n) y[view_offset(v, e)] = x[e];
}

/* Zeros of the output's shape, then dy (input 0) copied into [begin, begin + dy's shape).
 * Input 1 only gives the shape (no buffer). */
static void slice_grad_cuda(const struct tfc_kargs *a, const void *dy, void *y, cudaStream_t s)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    size_t es = tfc_kdtype_size(o->dtype);
    if (tfc_cu_check(a, cudaMemsetAsync(y, 0, (size_t)o->numel * es, s), "slice_grad zeros"))
        return;
    if (!dy)
        return;
    int64_t ost[TFC_K_MAX_RANK], off = 0;
    strides_of(o, ost);
    for (int i = 0; i < o->rank; i++) off += a->attrs[SLICE_GRAD_BEGIN].v[i] * ost[i];
    struct view_args v;
    /* rank 0: element 0 to element 0, as layout.c copies */
    view_init(&v, d->rank, d->dims, ost, d->rank ? off : 0);
    int64_t n = d->rank ? d->numel : 1;
    unsigned g = tfc_cu_blocks(n);
    switch (es) {
    case 8:
        view_scatter_kernel<uint64_t><<<g, TFC_CU_THREADS, 0, s>>>(v, (const uint64_t *)dy,
                                                                   (uint64_t *)y, n);
        break;
    case 4:
        view_scatter_kernel<uint32_t><<<g, TFC_CU_THREADS, 0, s>>>(v, (const uint32_t *)dy,
                                                                   (uint32_t *)y, n);
        break;
    default:
        view_scatter_kernel<uint8_t><<<g, TFC_CU_THREADS, 0, s>>>(v, (const uint8_t *)dy,
                                                                  (uint8_t *)y, n);
        break;
    }
    tfc_cu_check_launch(a, "slice_grad");
}

/* Element e = (i, j) of the updates is added to row indices[i] of the output; an index out of
 * range adds nothing and fails the run. */
template <typename T>
static __global__ void scatter_add_kernel(const T *__restrict__ upd, const void *indices,
                                          int idx_dt, int64_t rows, int64_t width, T *y,
                                          int64_t n, struct tfc_cu_err *err)
{
    TFC_CU_LOOP(e, n)
    {
        int64_t i = e / width, j = e - i * width;
        int64_t id = tfc_cu_ld_i64(indices, idx_dt, i);
        if (id < 0 || id >= rows) {
            if (j == 0)
                tfc_cu_raise(err, i);
        } else {
            atomicAdd(&y[id * width + j], upd[e]);
        }
    }
}

/* Zeros of the output's shape [rows, ...] plus the rows of input 0 at the indices of input 1
 * (float32 or float64; input 2 only gives the shape). */
static void scatter_add_cuda(const struct tfc_kargs *a, const void *upd, const void *indices,
                             void *y, cudaStream_t s)
{
    const struct tfc_kdesc *u = &a->d[0], *ix = &a->d[1], *o = tfc_kout_desc(a, 0);
    int64_t rows = o->rank ? o->dims[0] : 0, width = rows ? o->numel / rows : 0;
    if (tfc_cu_check(a,
                     cudaMemsetAsync(y, 0, (size_t)o->numel * tfc_kdtype_size(o->dtype), s),
                     "scatter_add zeros"))
        return;
    if (!upd || !indices || ix->numel == 0) /* layout.c visits no index then */
        return;
    struct tfc_cu_err *e = tfc_cu_err_begin(a, s);
    int64_t n = ix->numel * width;
    if (width == 0)
        index_check_kernel<<<tfc_cu_blocks(ix->numel), TFC_CU_THREADS, 0, s>>>(
            indices, ix->dtype, rows, ix->numel, e);
    else if (u->dtype == TFC_FLOAT32)
        scatter_add_kernel<float><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(
            (const float *)upd, indices, ix->dtype, rows, width, (float *)y, n, e);
    else
        scatter_add_kernel<double><<<tfc_cu_blocks(n), TFC_CU_THREADS, 0, s>>>(
            (const double *)upd, indices, ix->dtype, rows, width, (double *)y, n, e);
    if (!tfc_cu_check_launch(a, "scatter_add") && e)
        tfc_cu_err_end(a, s, e, TFC_CU_ERR_GATHER, rows, indices, ix->dtype);
}

/* y = off everywhere, on at [i, indices[i]] for indices in [0, depth). */
static __global__ void one_hot_kernel(const void *indices, int idx_dt, int64_t n_idx,
                                      int64_t depth, double on, double off, int out_dt, void *y,
                                      int64_t n)
{
    TFC_CU_LOOP(e, n)
    {
        double v = off;
        if (depth > 0) {
            int64_t i = e / depth, c = e - i * depth;
            if (i < n_idx && tfc_cu_ld_i64(indices, idx_dt, i) == c)
                v = on;
        }
        tfc_cu_st_f64(y, out_dt, e, v);
    }
}

static void one_hot_cuda(const struct tfc_kargs *a, const void *indices, void *y,
                         cudaStream_t s)
{
    const struct tfc_kdesc *ix = &a->d[0], *o = tfc_kout_desc(a, 0);
    int64_t n_idx = indices ? ix->numel : 0;
    one_hot_kernel<<<tfc_cu_blocks(o->numel), TFC_CU_THREADS, 0, s>>>(
        indices, ix->dtype, n_idx, a->attrs[ONE_HOT_DEPTH].i, a->attrs[ONE_HOT_ON].f,
        a->attrs[ONE_HOT_OFF].f, o->dtype, y, o->numel);
    tfc_cu_check_launch(a, "one_hot");
}

extern "C" void tfc_layout_cuda(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = (const struct tfc_kargs *)cl_arg;
    cudaStream_t s = starpu_cuda_get_local_stream();
    switch (a->kind) {
    case TFC_K_SPLIT:
        concat_split_cuda(a, buffers, 1, s);
        return;
    case TFC_K_CONCAT:
        concat_split_cuda(a, buffers, 0, s);
        return;
    default:
        break;
    }
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    switch (a->kind) {
    case TFC_K_RESHAPE:
        tfc_cu_check(a,
                     cudaMemcpyAsync(out, tfc_kin(buffers, a, 0),
                                     (size_t)a->d[0].numel * tfc_kdtype_size(a->d[0].dtype),
                                     cudaMemcpyDeviceToDevice, s),
                     "reshape copy");
        break;
    case TFC_K_TRANSPOSE:
        transpose_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    case TFC_K_SLICE:
        slice_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    case TFC_K_GATHER:
        gather_cuda(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out, s);
        break;
    case TFC_K_ONE_HOT:
        one_hot_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    case TFC_K_SLICE_GRAD:
        slice_grad_cuda(a, tfc_kin(buffers, a, 0), out, s);
        break;
    case TFC_K_SCATTER_ADD:
        scatter_add_cuda(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out, s);
        break;
    default: /* a descriptor named this codelet for a kind it does not have */
        tfc_kernel_fail(a, TFC_INTERNAL("no layout kernel of this kind"));
        break;
    }
}
