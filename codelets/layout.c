/* layout.c: CPU kernels that move data without arithmetic: reshape (a copy), transpose (any
 * permutation), concat, split, slice, gather (rows) and one_hot. They work on bytes, so every
 * dtype is handled by the element size alone. */
#include <string.h>
#include "kernel.h"
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

/* Row-major strides of a desc, in elements. */
static void strides_of(const struct tfc_kdesc *d, int64_t *st)
{
    int64_t s = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= d->dims[i];
    }
}

static void transpose_run(const struct tfc_kargs *a, const char *x, char *y)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    size_t es = tfc_kdtype_size(d->dtype);
    int64_t ist[TFC_K_MAX_RANK], pst[TFC_K_MAX_RANK], idx[TFC_K_MAX_RANK] = {0};
    const struct tfc_kattr *perm = &a->attrs[TRANSPOSE_PERM];
    int r = d->rank;
    strides_of(d, ist);
    for (int i = 0; i < r; i++) {
        int64_t p = perm->n ? perm->v[i] : r - 1 - i;
        if (p < 0) p += r;
        pst[i] = ist[p]; /* input stride of output axis i */
    }
    int64_t off = 0;
    for (int64_t e = 0; e < o->numel; e++) {
        memcpy(y + (size_t)e * es, x + (size_t)off * es, es);
        for (int dd = r - 1; dd >= 0; dd--) {
            off += pst[dd];
            if (++idx[dd] < o->dims[dd]) break;
            off -= pst[dd] * o->dims[dd];
            idx[dd] = 0;
        }
    }
}

/* outer x (len_k x inner) blocks: concat copies each input's block in turn. */
static void concat_split(const struct tfc_kargs *a, void *buffers[], int is_split)
{
    int axis;
    int64_t outer, inner;
    const struct tfc_kdesc *whole = tfc_concat_geometry(a, is_split, &axis, &outer, &inner);
    size_t es = tfc_kdtype_size(whole->dtype);
    int n_parts = is_split ? a->n_out : a->n_in;
    char *w = is_split ? tfc_kin(buffers, a, 0) : tfc_kout(buffers, a, 0);
    size_t row = (size_t)(whole->dims[axis] * inner) * es, pos = 0;
    for (int k = 0; k < n_parts; k++) {
        const struct tfc_kdesc *pd = is_split ? tfc_kout_desc(a, k) : &a->d[k];
        char *p = is_split ? tfc_kout(buffers, a, k) : tfc_kin(buffers, a, k);
        size_t chunk = (size_t)(pd->dims[axis] * inner) * es;
        if (chunk && p) {
            for (int64_t o = 0; o < outer; o++) {
                if (is_split)
                    memcpy(p + o * chunk, w + o * row + pos, chunk);
                else
                    memcpy(w + o * row + pos, p + o * chunk, chunk);
            }
        }
        pos += chunk;
    }
}

static void slice_run(const struct tfc_kargs *a, const char *x, char *y)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    size_t es = tfc_kdtype_size(d->dtype);
    int64_t ist[TFC_K_MAX_RANK], idx[TFC_K_MAX_RANK] = {0}, off = 0;
    strides_of(d, ist);
    for (int i = 0; i < d->rank; i++) off += a->attrs[SLICE_BEGIN].v[i] * ist[i];
    int r = o->rank;
    if (r == 0) {
        memcpy(y, x, es);
        return;
    }
    int64_t inner = o->dims[r - 1], rows = o->numel / inner;
    for (int64_t row = 0; row < rows; row++) {
        memcpy(y + (size_t)(row * inner) * es, x + (size_t)off * es, (size_t)inner * es);
        for (int dd = r - 2; dd >= 0; dd--) {
            off += ist[dd];
            if (++idx[dd] < o->dims[dd]) break;
            off -= ist[dd] * o->dims[dd];
            idx[dd] = 0;
        }
    }
}

/* The adjoint of slice: zeros, then dy copied into the region [begin, begin + dy's shape). */
static void slice_grad_run(const struct tfc_kargs *a, const char *dy, char *y)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    size_t es = tfc_kdtype_size(o->dtype);
    memset(y, 0, (size_t)o->numel * es);
    if (!dy) return;
    int64_t ost[TFC_K_MAX_RANK], idx[TFC_K_MAX_RANK] = {0}, off = 0;
    strides_of(o, ost);
    for (int i = 0; i < o->rank; i++) off += a->attrs[SLICE_GRAD_BEGIN].v[i] * ost[i];
    int r = d->rank;
    if (r == 0) {
        memcpy(y, dy, es);
        return;
    }
    int64_t inner = d->dims[r - 1], rows = d->numel / inner;
    for (int64_t row = 0; row < rows; row++) {
        memcpy(y + (size_t)off * es, dy + (size_t)(row * inner) * es, (size_t)inner * es);
        for (int dd = r - 2; dd >= 0; dd--) {
            off += ost[dd];
            if (++idx[dd] < d->dims[dd]) break;
            off -= ost[dd] * d->dims[dd];
            idx[dd] = 0;
        }
    }
}

/* The adjoint of gather: zeros of the params' shape, rows of updates added at the indices. */
static void scatter_add_run(const struct tfc_kargs *a, const void *upd, const void *indices,
                            void *y)
{
    const struct tfc_kdesc *u = &a->d[0], *ix = &a->d[1], *o = tfc_kout_desc(a, 0);
    int64_t rows = o->rank ? o->dims[0] : 0, width = rows ? o->numel / rows : 0;
    memset(y, 0, (size_t)o->numel * tfc_kdtype_size(o->dtype));
    for (int64_t i = 0; i < ix->numel && upd; i++) {
        int64_t id = tfc_load_i64(indices, ix->dtype, i);
        if (id < 0 || id >= rows) {
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE,
                            "index %lld at position %lld is outside [0, %lld)", (long long)id,
                            (long long)i, (long long)rows);
            continue;
        }
        if (u->dtype == TFC_FLOAT32) {
            float *dst = (float *)y + id * width;
            const float *src = (const float *)upd + i * width;
            for (int64_t j = 0; j < width; j++) dst[j] += src[j];
        } else {
            double *dst = (double *)y + id * width;
            const double *src = (const double *)upd + i * width;
            for (int64_t j = 0; j < width; j++) dst[j] += src[j];
        }
    }
}

static void gather_run(const struct tfc_kargs *a, const char *params, const void *indices,
                       char *y)
{
    const struct tfc_kdesc *p = &a->d[0], *ix = &a->d[1];
    size_t es = tfc_kdtype_size(p->dtype);
    int64_t rows = p->rank ? p->dims[0] : 0;
    size_t row = rows ? (size_t)(p->numel / rows) * es : 0;
    for (int64_t i = 0; i < ix->numel; i++) {
        int64_t id = tfc_load_i64(indices, ix->dtype, i);
        if (id < 0 || id >= rows) {
            tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE,
                            "index %lld at position %lld is outside [0, %lld)", (long long)id,
                            (long long)i, (long long)rows);
            memset(y + i * row, 0, row);
        } else {
            memcpy(y + i * row, params + id * row, row);
        }
    }
}

static void one_hot_run(const struct tfc_kargs *a, const void *indices, void *y)
{
    const struct tfc_kdesc *ix = &a->d[0], *o = tfc_kout_desc(a, 0);
    int64_t depth = a->attrs[ONE_HOT_DEPTH].i;
    double on = a->attrs[ONE_HOT_ON].f, off = a->attrs[ONE_HOT_OFF].f;
    for (int64_t i = 0; i < o->numel; i++) tfc_store_f64(y, o->dtype, i, off);
    for (int64_t i = 0; i < ix->numel; i++) {
        int64_t id = tfc_load_i64(indices, ix->dtype, i);
        if (id >= 0 && id < depth)
            tfc_store_f64(y, o->dtype, i * depth + id, on);
    }
}

static void layout_cpu(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    switch (a->kind) {
    case TFC_K_SPLIT:
        concat_split(a, buffers, 1);
        return;
    case TFC_K_CONCAT:
        concat_split(a, buffers, 0);
        return;
    default:
        break;
    }
    void *out = tfc_kout(buffers, a, 0);
    if (!out)
        return;
    switch (a->kind) {
    case TFC_K_RESHAPE:
        memcpy(out, tfc_kin(buffers, a, 0),
               (size_t)a->d[0].numel * tfc_kdtype_size(a->d[0].dtype));
        break;
    case TFC_K_TRANSPOSE:
        transpose_run(a, tfc_kin(buffers, a, 0), out);
        break;
    case TFC_K_SLICE:
        slice_run(a, tfc_kin(buffers, a, 0), out);
        break;
    case TFC_K_GATHER:
        gather_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out);
        break;
    case TFC_K_ONE_HOT:
        one_hot_run(a, tfc_kin(buffers, a, 0), out);
        break;
    case TFC_K_SLICE_GRAD:
        slice_grad_run(a, tfc_kin(buffers, a, 0), out);
        break;
    case TFC_K_SCATTER_ADD:
        scatter_add_run(a, tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), out);
        break;
    default: /* a descriptor named this codelet for a kind it does not have */
        tfc_kernel_fail(a, TFC_INTERNAL("no layout kernel of this kind"));
        break;
    }
}

static struct starpu_perfmodel layout_model = {
    .type = STARPU_COMMON,
    .cost_function = tfc_model_analytic_cost,
    .footprint = tfc_model_footprint,
    .symbol = "tfc_layout",
};

struct starpu_codelet tfc_cl_layout = {
    .cpu_funcs = {layout_cpu},
    .cpu_funcs_name = {"layout_cpu"},
#ifdef STARPU_USE_CUDA
    .cuda_funcs = {tfc_layout_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
#ifdef STARPU_USE_OPENCL
    .opencl_funcs = {tfc_layout_opencl}, /* synchronous; kinds and dtypes it lacks: CPU */
    .can_execute = tfc_opencl_can_execute,
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &layout_model,
    .name = "layout",
};
