/* opencl_layout.c: OpenCL kernels of the layout family, as layout.c does them: reshape (a
 * buffer copy), transpose, slice, concat, split and slice_grad (one strided-view copy kernel,
 * any dtype by its element size), gather and one_hot (int32/int64/uint8 indices), and
 * scatter_add (float32/float64) done deterministically: one work-item per output row adds the
 * matching update rows in index order, so repeated indices sum exactly as on the CPU, with no
 * atomics. Out-of-range indices fail the run with layout.c's message (the first position). */
#include <limits.h>
#include <string.h>
#include "opencl_common.h"
#include "bcast.h"
#include "../src/tfc.h"

static int is_index(int dt) { return dt == TFC_INT32 || dt == TFC_INT64 || dt == TFC_UINT8; }

int tfc_opencl_layout_ok(const struct tfc_kargs *a)
{
    /* Empty operands stay on the CPU, except concat's empty parts (skipped); an input without
     * a buffer but with elements is a shape-only input (slice_grad's and scatter_add's last,
     * reshape_like's second). */
    for (int i = 0; i < a->n_in + a->n_out; i++) {
        if (a->d[i].numel == 0 && (a->kind != TFC_K_CONCAT || i >= a->n_in)) return 0;
        if (a->d[i].buf < 0 && a->d[i].numel != 0 && i >= a->n_in) return 0;
    }
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    if (a->kind == TFC_K_CONCAT) {
        for (int i = 0; i < a->n_in; i++)
            if (a->d[i].buf < 0 && a->d[i].numel != 0) return 0;
        return tfc_kdtype_size(o->dtype) != 0;
    }
    if (a->n_in < 1 || a->d[0].buf < 0) return 0;
    switch (a->kind) {
    case TFC_K_RESHAPE:
    case TFC_K_TRANSPOSE:
    case TFC_K_SLICE:
    case TFC_K_SLICE_GRAD:
        return tfc_kdtype_size(a->d[0].dtype) != 0;
    case TFC_K_SPLIT: return tfc_kdtype_size(a->d[0].dtype) != 0;
    case TFC_K_GATHER:
        return a->d[0].rank >= 1 && a->d[1].buf >= 0 && is_index(a->d[1].dtype) &&
               a->d[1].numel < INT_MAX && tfc_kdtype_size(a->d[0].dtype) != 0;
    case TFC_K_ONE_HOT:
        return is_index(a->d[0].dtype) && a->attrs[ONE_HOT_DEPTH].i > 0 &&
               tfc_kdtype_size(o->dtype) != 0;
    case TFC_K_SCATTER_ADD:
        return (a->d[0].dtype == TFC_FLOAT32 || a->d[0].dtype == TFC_FLOAT64) &&
               o->dtype == a->d[0].dtype && o->rank >= 1 && a->d[1].buf >= 0 &&
               is_index(a->d[1].dtype) && a->d[1].numel < INT_MAX;
    default: return 0;
    }
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

/* Templated (T = float, double): scatter_add, one work-item per output row. */
static const char body[] = CL_SRC(
kernel void TS(scatter_add)(global T *u0, ulong uo, global void *i0, ulong io, int idt,
                            global T *y0, ulong yo, long rows, long width, long nidx)
{
    long r = get_global_id(0);
    if (r >= rows) return;
    global T *u = AT(u0, uo), *y = AT(y0, yo);
    for (long j = 0; j < width; j++) y[r * width + j] = (T)0;
    for (long i = 0; i < nidx; i++) {
        long id = idt == 3 ? ((global long *)AT(i0, io))[i]
                : idt == 2 ? (long)((global int *)AT(i0, io))[i]
                           : (long)((global uchar *)AT(i0, io))[i];
        if (id != r) continue;
        for (long j = 0; j < width; j++) y[r * width + j] += u[i * width + j];
    }
}
);

/* Untemplated: moves by element size (1, 4 or 8 bytes). */
static const char plain[] = CL_SRC(
typedef struct { long rank, sbase, dbase; long dims[MAXR], ss[MAXR], ds[MAXR]; } view_t;

long ld_index(global void *p, ulong off, int dt, long i)
{
    if (dt == 3) return ((global long *)AT(p, off))[i];
    if (dt == 2) return (long)((global int *)AT(p, off))[i];
    return (long)((global uchar *)AT(p, off))[i];
}

void move_el(global void *x, long si, global void *y, long di, int es)
{
    if (es == 8) ((global ulong *)y)[di] = ((global ulong *)x)[si];
    else if (es == 4) ((global uint *)y)[di] = ((global uint *)x)[si];
    else ((global uchar *)y)[di] = ((global uchar *)x)[si];
}

void put_el(global void *y, long di, int es, ulong v)
{
    if (es == 8) ((global ulong *)y)[di] = v;
    else if (es == 4) ((global uint *)y)[di] = (uint)v;
    else ((global uchar *)y)[di] = (uchar)v;
}

kernel void view_copy(global void *x0, ulong xo, global void *y0, ulong yo, view_t v, int es,
                      long n)
{
    long e = get_global_id(0);
    if (e >= n) return;
    long rem = e, si = v.sbase, di = v.dbase;
    for (int d = (int)v.rank - 1; d >= 0; d--) {
        long q = rem / v.dims[d], idx = rem - q * v.dims[d];
        si += idx * v.ss[d];
        di += idx * v.ds[d];
        rem = q;
    }
    move_el(AT(x0, xo), si, AT(y0, yo), di, es);
}

kernel void zero(global void *y0, ulong yo, int es, long n)
{
    long e = get_global_id(0);
    if (e >= n) return;
    put_el(AT(y0, yo), e, es, 0);
}

kernel void gather(global void *p0, ulong po, global void *i0, ulong io, int idt,
                   global void *y0, ulong yo, long rows, long rowel, int es, long n,
                   global int *bad)
{
    long e = get_global_id(0);
    if (e >= n) return;
    long i = e / rowel, j = e - i * rowel, id = ld_index(i0, io, idt, i);
    if (id < 0 || id >= rows) {
        if (j == 0) atomic_min(bad, (int)i);
        put_el(AT(y0, yo), e, es, 0);
    } else {
        move_el(AT(p0, po), id * rowel + j, AT(y0, yo), e, es);
    }
}

kernel void index_check(global void *i0, ulong io, int idt, long rows, long n,
                        global int *bad)
{
    long i = get_global_id(0);
    if (i >= n) return;
    long id = ld_index(i0, io, idt, i);
    if (id < 0 || id >= rows) atomic_min(bad, (int)i);
}

kernel void one_hot(global void *i0, ulong io, int idt, global void *y0, ulong yo, long depth,
                    ulong on, ulong off, int es, long n)
{
    long e = get_global_id(0);
    if (e >= n) return;
    long i = e / depth, c = e - i * depth;
    put_el(AT(y0, yo), e, es, ld_index(i0, io, idt, i) == c ? on : off);
}
);

static struct tfc_ocl_prog prog = {.family = "layout", .body = body, .plain = plain};

/* Mirrors the kernels' view_t: element e of dims (row-major) moves from sbase + sum idx*ss to
 * dbase + sum idx*ds. */
struct view_cl {
    cl_long rank, sbase, dbase;
    cl_long dims[TFC_K_MAX_RANK], ss[TFC_K_MAX_RANK], ds[TFC_K_MAX_RANK];
};

/* Builds a view, dropping size-1 dims and merging dims contiguous in both source and
 * destination (fewer divisions per element). Returns the element count. */
static int64_t view_init(struct view_cl *v, int rank, const int64_t *dims, const int64_t *ss,
                         const int64_t *ds, int64_t sbase, int64_t dbase)
{
    memset(v, 0, sizeof *v);
    v->sbase = sbase;
    v->dbase = dbase;
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        n *= dims[d];
        if (dims[d] == 1) continue;
        int r = (int)v->rank;
        if (r > 0 && v->ss[r - 1] == ss[d] * dims[d] && v->ds[r - 1] == ds[d] * dims[d]) {
            v->dims[r - 1] *= dims[d];
            v->ss[r - 1] = ss[d];
            v->ds[r - 1] = ds[d];
        } else {
            v->dims[r] = dims[d];
            v->ss[r] = ss[d];
            v->ds[r] = ds[d];
            v->rank++;
        }
    }
    return n;
}

static void strides_of(const struct tfc_kdesc *d, int64_t *st)
{
    int64_t s = 1;
    for (int i = d->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= d->dims[i];
    }
}

static int view_run(const struct tfc_kargs *a, void *buffers[], int from, int to,
                    const struct view_cl *v, int64_t n, size_t es)
{
    cl_mem X, Y;
    cl_ulong xo, yo;
    tfc_ocl_buf(buffers, from, &X, &xo);
    tfc_ocl_buf(buffers, to, &Y, &yo);
    cl_int ces = (cl_int)es;
    cl_long cn = n;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "view_copy", -1, a, &q);
    if (!k) return -1;
    int ret = tfc_ocl_run(a, k, q, (size_t)n, 0, 7,
                          (size_t[]){sizeof X, sizeof xo, sizeof Y, sizeof yo, sizeof *v,
                                     sizeof ces, sizeof cn},
                          (const void *[]){&X, &xo, &Y, &yo, v, &ces, &cn});
    clReleaseKernel(k);
    return ret;
}

static int zero_run(const struct tfc_kargs *a, void *buffers[], int to, int64_t n, size_t es)
{
    cl_mem Y;
    cl_ulong yo;
    tfc_ocl_buf(buffers, to, &Y, &yo);
    cl_int ces = (cl_int)es;
    cl_long cn = n;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "zero", -1, a, &q);
    if (!k) return -1;
    int ret = tfc_ocl_run(a, k, q, (size_t)n, 0, 4,
                          (size_t[]){sizeof Y, sizeof yo, sizeof ces, sizeof cn},
                          (const void *[]){&Y, &yo, &ces, &cn});
    clReleaseKernel(k);
    return ret;
}

/* transpose: output axis i reads input axis perm[i] */
static void transpose_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    int64_t ist[TFC_K_MAX_RANK], pst[TFC_K_MAX_RANK], ost[TFC_K_MAX_RANK];
    const struct tfc_kattr *perm = &a->attrs[TRANSPOSE_PERM];
    int r = d->rank;
    strides_of(d, ist);
    strides_of(o, ost);
    for (int i = 0; i < r; i++) {
        int64_t p = perm->n ? perm->v[i] : r - 1 - i;
        if (p < 0) p += r;
        pst[i] = ist[p];
    }
    struct view_cl v;
    int64_t n = view_init(&v, o->rank, o->dims, pst, ost, 0, 0);
    view_run(a, buffers, d->buf, o->buf, &v, n, tfc_kdtype_size(d->dtype));
}

/* slice (input region to output) or slice_grad (zeros, then input 0 into the region) */
static void slice_opencl(const struct tfc_kargs *a, void *buffers[], int grad)
{
    const struct tfc_kdesc *d = &a->d[0], *o = tfc_kout_desc(a, 0);
    const struct tfc_kdesc *big = grad ? o : d, *part = grad ? d : o;
    size_t es = tfc_kdtype_size(d->dtype);
    int64_t bst[TFC_K_MAX_RANK], pst[TFC_K_MAX_RANK], off = 0;
    strides_of(big, bst);
    strides_of(part, pst);
    /* SLICE_GRAD_BEGIN is SLICE_BEGIN: one slot for both */
    for (int i = 0; i < big->rank; i++) off += a->attrs[SLICE_BEGIN].v[i] * bst[i];
    if (grad && zero_run(a, buffers, o->buf, o->numel, es)) return;
    struct view_cl v;
    /* rank 0: element 0 to element 0, as layout.c copies */
    int64_t n = grad ? view_init(&v, part->rank, part->dims, pst, bst, 0, part->rank ? off : 0)
                     : view_init(&v, part->rank, part->dims, bst, pst, part->rank ? off : 0, 0);
    view_run(a, buffers, d->buf, o->buf, &v, n, es);
}

/* concat (parts into the whole) or split (the whole into parts): outer x (len_k x inner) */
static void concat_split_opencl(const struct tfc_kargs *a, void *buffers[], int is_split)
{
    int axis;
    int64_t outer, inner;
    const struct tfc_kdesc *whole = tfc_concat_geometry(a, is_split, &axis, &outer, &inner);
    size_t es = tfc_kdtype_size(whole->dtype);
    int n_parts = is_split ? a->n_out : a->n_in;
    int64_t row = whole->dims[axis] * inner, pos = 0;
    for (int k = 0; k < n_parts; k++) {
        const struct tfc_kdesc *pd = is_split ? tfc_kout_desc(a, k) : &a->d[k];
        int64_t chunk = pd->dims[axis] * inner;
        if (chunk == 0) continue; /* an empty part (concat only) */
        int64_t dims[2] = {outer, chunk}, ps[2] = {chunk, 1}, ws[2] = {row, 1};
        struct view_cl v;
        int64_t n = is_split ? view_init(&v, 2, dims, ws, ps, pos, 0)
                             : view_init(&v, 2, dims, ps, ws, 0, pos);
        if (view_run(a, buffers, is_split ? whole->buf : pd->buf, is_split ? pd->buf : whole->buf,
                     &v, n, es))
            return;
        pos += chunk;
    }
}

/* Reads the bad position back and records layout.c's error for it. */
static void bad_report(const struct tfc_kargs *a, cl_command_queue q, cl_mem B, cl_mem I,
                       cl_ulong io, const struct tfc_kdesc *ix, int64_t rows)
{
    int64_t pos, id;
    if (tfc_ocl_bad_read(a, q, B, I, io, ix->dtype, &pos, &id) == 1)
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_RANGE, "index %lld at position %lld is outside [0, %lld)",
                        (long long)id, (long long)pos, (long long)rows);
}

static void gather_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *p = &a->d[0], *ix = &a->d[1], *o = tfc_kout_desc(a, 0);
    cl_mem P, I, Y, B = tfc_ocl_bad_create(a);
    cl_ulong po, io, yo;
    if (!B) return;
    tfc_ocl_buf(buffers, p->buf, &P, &po);
    tfc_ocl_buf(buffers, ix->buf, &I, &io);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_int idt = ix->dtype, es = (cl_int)tfc_kdtype_size(p->dtype);
    cl_long rows = p->dims[0], rowel = p->numel / rows, n = o->numel;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "gather", -1, a, &q);
    if (k && !tfc_ocl_run(a, k, q, (size_t)n, 0, 12,
                          (size_t[]){sizeof P, sizeof po, sizeof I, sizeof io, sizeof idt,
                                     sizeof Y, sizeof yo, sizeof rows, sizeof rowel, sizeof es,
                                     sizeof n, sizeof B},
                          (const void *[]){&P, &po, &I, &io, &idt, &Y, &yo, &rows, &rowel, &es,
                                           &n, &B}))
        bad_report(a, q, B, I, io, ix, rows);
    if (k) clReleaseKernel(k);
    clReleaseMemObject(B);
}

static void scatter_add_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *u = &a->d[0], *ix = &a->d[1], *o = tfc_kout_desc(a, 0);
    cl_mem U, I, Y, B = tfc_ocl_bad_create(a);
    cl_ulong uo, io, yo;
    if (!B) return;
    tfc_ocl_buf(buffers, u->buf, &U, &uo);
    tfc_ocl_buf(buffers, ix->buf, &I, &io);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    cl_int idt = ix->dtype;
    cl_long rows = o->dims[0], width = o->numel / rows, nidx = ix->numel;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "index_check", -1, a, &q), k2 = NULL;
    if (k && !tfc_ocl_run(a, k, q, (size_t)nidx, 0, 6,
                          (size_t[]){sizeof I, sizeof io, sizeof idt, sizeof rows, sizeof nidx,
                                     sizeof B},
                          (const void *[]){&I, &io, &idt, &rows, &nidx, &B}) &&
        (k2 = tfc_ocl_kernel(&prog, "scatter_add", u->dtype, a, &q)) &&
        !tfc_ocl_run(a, k2, q, (size_t)rows, 0, 10,
                     (size_t[]){sizeof U, sizeof uo, sizeof I, sizeof io, sizeof idt, sizeof Y,
                                sizeof yo, sizeof rows, sizeof width, sizeof nidx},
                     (const void *[]){&U, &uo, &I, &io, &idt, &Y, &yo, &rows, &width, &nidx}))
        bad_report(a, q, B, I, io, ix, rows);
    if (k) clReleaseKernel(k);
    if (k2) clReleaseKernel(k2);
    clReleaseMemObject(B);
}

static void one_hot_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *ix = &a->d[0], *o = tfc_kout_desc(a, 0);
    cl_mem I, Y;
    cl_ulong io, yo;
    tfc_ocl_buf(buffers, ix->buf, &I, &io);
    tfc_ocl_buf(buffers, o->buf, &Y, &yo);
    /* on and off converted exactly as layout.c stores them, moved as raw elements */
    union { uint8_t u8; uint32_t u32; uint64_t u64; } on = {0}, off = {0};
    tfc_store_f64(&on, o->dtype, 0, a->attrs[ONE_HOT_ON].f);
    tfc_store_f64(&off, o->dtype, 0, a->attrs[ONE_HOT_OFF].f);
    cl_int idt = ix->dtype, es = (cl_int)tfc_kdtype_size(o->dtype);
    cl_ulong onv = es == 8 ? on.u64 : es == 4 ? on.u32 : on.u8;
    cl_ulong offv = es == 8 ? off.u64 : es == 4 ? off.u32 : off.u8;
    cl_long depth = a->attrs[ONE_HOT_DEPTH].i, n = o->numel;
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "one_hot", -1, a, &q);
    if (!k) return;
    tfc_ocl_run(a, k, q, (size_t)n, 0, 10,
                (size_t[]){sizeof I, sizeof io, sizeof idt, sizeof Y, sizeof yo, sizeof depth,
                           sizeof onv, sizeof offv, sizeof es, sizeof n},
                (const void *[]){&I, &io, &idt, &Y, &yo, &depth, &onv, &offv, &es, &n});
    clReleaseKernel(k);
}

void tfc_layout_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *d = &a->d[0];
    switch (a->kind) {
    case TFC_K_RESHAPE:
        tfc_ocl_copy(a, buffers, d->buf, tfc_kout_desc(a, 0)->buf,
                   (size_t)d->numel * tfc_kdtype_size(d->dtype));
        break;
    case TFC_K_TRANSPOSE: transpose_opencl(a, buffers); break;
    case TFC_K_SLICE: slice_opencl(a, buffers, 0); break;
    case TFC_K_SLICE_GRAD: slice_opencl(a, buffers, 1); break;
    case TFC_K_CONCAT: concat_split_opencl(a, buffers, 0); break;
    case TFC_K_SPLIT: concat_split_opencl(a, buffers, 1); break;
    case TFC_K_GATHER: gather_opencl(a, buffers); break;
    case TFC_K_SCATTER_ADD: scatter_add_opencl(a, buffers); break;
    case TFC_K_ONE_HOT: one_hot_opencl(a, buffers); break;
    default: /* tfc_opencl_layout_ok admitted a kind this switch lacks */
        tfc_kernel_fail(a, TFC_INTERNAL("no OpenCL layout kernel of this kind"));
        break;
    }
}
#endif
