/* opencl_elementwise.c: OpenCL kernels of the element-wise family for float32 and float64:
 * unary math and predicates, binary ops with NumPy broadcasting (strides passed by value) and
 * comparisons (bool output), with ew_scalar.h's formulas; select, add_n, fill, cast between
 * the float types, identity (any dtype), and the logical ops on bool. Integer arithmetic
 * stays on the CPU (tfc_opencl_elementwise_ok refuses it). */
#include <string.h>
#include "opencl_common.h"
#include "ew_math.h"
#include "../src/tfc.h"

static int is_float(int dt) { return dt == TFC_FLOAT32 || dt == TFC_FLOAT64; }

int tfc_opencl_elementwise_ok(const struct tfc_kargs *a)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    int dt = a->d[0].dtype;
    switch (a->kind) {
    case TFC_K_IDENTITY: return 1;
    case TFC_K_CAST: return is_float(dt) && is_float(o->dtype);
    case TFC_K_FILL: return is_float(o->dtype);
    case TFC_K_ADD_N:
        for (int i = 0; i < a->n_in; i++)
            if (a->d[i].dtype != o->dtype) return 0;
        return is_float(o->dtype);
    case TFC_K_SELECT:
        return a->d[0].dtype == TFC_BOOL && is_float(a->d[1].dtype) &&
               a->d[2].dtype == a->d[1].dtype && o->dtype == a->d[1].dtype;
    case TFC_K_LOGICAL_NOT: return dt == TFC_BOOL && o->dtype == TFC_BOOL;
    case TFC_K_BROADCAST: return is_float(dt) && o->dtype == dt;
    }
    if (dt == TFC_BOOL && (a->kind == TFC_K_LOGICAL_AND || a->kind == TFC_K_LOGICAL_OR))
        return a->d[1].dtype == TFC_BOOL && o->dtype == TFC_BOOL;
    if (!is_float(dt)) return 0;
    switch (tfc_ew_class(a->kind)) {
    case TFC_EW_CLASS_UNARY_ANY:
    case TFC_EW_CLASS_UNARY_FLOAT: return o->dtype == dt;
    case TFC_EW_CLASS_PREDICATE: return o->dtype == TFC_BOOL;
    case TFC_EW_CLASS_BINARY: return a->d[1].dtype == dt && o->dtype == dt;
    case TFC_EW_CLASS_COMPARE: return a->d[1].dtype == dt && o->dtype == TFC_BOOL;
    default: return 0;
    }
}

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

static const char body[] = CL_SRC(
/* pred: is_nan, is_inf (a bool out); p0, p1: the op's float attributes */
kernel void TS(unary)(int kind, int pred, double p0, double p1, global T *x0, ulong xo,
                      global void *y0, ulong yo, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    T x = ((global T *)AT(x0, xo))[i];
    if (pred)
        ((global uchar *)AT(y0, yo))[i] = (uchar)EW(predicate)(kind, x);
    else
        ((global T *)AT(y0, yo))[i] = EW(unary)(kind, x, (T)p0, (T)p1);
}

/* cmp: a comparison or logic kind (a bool out); broadcast: y gives only the shape */
kernel void TS(binary)(int kind, int cmp, global T *x0, ulong xo, global T *y0, ulong yo,
                       global void *o0, ulong oo, bcast_t b, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    long ox = bc_off(&b, i, 0), oy = bc_off(&b, i, 1);
    global T *px = AT(x0, xo), *py = AT(y0, yo);
    T x = px[ox];
    if (kind == TFC_K_BROADCAST)
        ((global T *)AT(o0, oo))[i] = x;
    else if (cmp)
        ((global uchar *)AT(o0, oo))[i] = (uchar)EW(compare)(kind, x, py[oy]);
    else
        ((global T *)AT(o0, oo))[i] = EW(binary)(kind, x, py[oy]);
}

kernel void TS(select)(global uchar *c0, ulong co, global T *x0, ulong xo, global T *y0,
                       ulong yo, global T *o0, ulong oo, bcast_t b, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    long oc = bc_off(&b, i, 0), ox = bc_off(&b, i, 1), oy = bc_off(&b, i, 2);
    global uchar *pc = AT(c0, co);
    global T *px = AT(x0, xo), *py = AT(y0, yo), *po = AT(o0, oo);
    po[i] = pc[oc] ? px[ox] : py[oy];
}

kernel void TS(acc)(global T *o0, ulong oo, global T *x0, ulong xo, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global T *po = AT(o0, oo), *px = AT(x0, xo);
    po[i] += px[i];
}

kernel void TS(fill)(global T *o0, ulong oo, T v, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    ((global T *)AT(o0, oo))[i] = v;
}
);

static const char plain[] = CL_SRC(
kernel void cast_f32_f64(global float *x0, ulong xo, global double *y0, ulong yo, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global float *px = AT(x0, xo);
    global double *py = AT(y0, yo);
    py[i] = (double)px[i];
}

kernel void cast_f64_f32(global double *x0, ulong xo, global float *y0, ulong yo, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global double *px = AT(x0, xo);
    global float *py = AT(y0, yo);
    py[i] = (float)px[i];
}

kernel void logic(int op, global uchar *x0, ulong xo, global uchar *y0, ulong yo,
                  global uchar *o0, ulong oo, bcast_t b, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    long ox = bc_off(&b, i, 0), oy = bc_off(&b, i, 1);
    uchar x = ((global uchar *)AT(x0, xo))[ox], y = ((global uchar *)AT(y0, yo))[oy];
    ((global uchar *)AT(o0, oo))[i] = op == 0 ? x == 0 : op == 1 ? x != 0 && y != 0
                                                                 : x != 0 || y != 0;
}
);

static struct tfc_ocl_prog prog = {
    .family = "element-wise", .body = body, .plain = plain, .ew_math = 1};

/* Mirrors the kernels' bcast_t. */
struct bcast_cl {
    cl_long rank, n;
    cl_long dims[TFC_K_MAX_RANK];
    cl_long st[3][TFC_K_MAX_RANK];
};

static void bcast_fill(struct bcast_cl *b, const struct tfc_kdesc *out, int n,
                       const struct tfc_kdesc *const *in)
{
    memset(b, 0, sizeof *b);
    b->rank = out->rank > 0 ? out->rank : 1;
    b->n = n;
    for (int d = 0; d < b->rank; d++) b->dims[d] = out->rank > 0 ? out->dims[d] : 1;
    for (int k = 0; k < n; k++) {
        int64_t stride = 1;
        for (int d = (int)b->rank - 1; d >= 0; d--) {
            int id = in[k]->rank - ((int)b->rank - d);
            int64_t dim = id >= 0 ? in[k]->dims[id] : 1;
            b->st[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
}

/* A task buffer as the kernels take it: its cl_mem and byte offset. */
struct clbuf {
    cl_mem m;
    cl_ulong off;
};

static struct clbuf task_buf(void *buffers[], int b)
{
    struct clbuf r;
    tfc_ocl_buf(buffers, b, &r.m, &r.off);
    return r;
}

/* Runs kernel `name` (dtype as tfc_ocl_kernel takes it) over n items with the given arguments on
 * the worker's queue; nonzero after recording a failure. */
static int launch(const struct tfc_kargs *a, const char *name, int dtype, cl_long n, int nargs,
                  const size_t *sizes, const void *const *vals)
{
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, name, dtype, a, &q);
    if (!k) return -1;
    int ret = tfc_ocl_run(a, k, q, (size_t)n, 0, nargs, sizes, vals);
    clReleaseKernel(k);
    return ret;
}

/* add_n: the output starts as a copy of input 0; each further input is added into it by one
 * kernel, looked up once. */
static void add_n_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct clbuf o = task_buf(buffers, od->buf), x;
    cl_long n = od->numel;
    cl_command_queue q;
    if (tfc_ocl_copy(a, buffers, a->d[0].buf, od->buf, (size_t)n * tfc_kdtype_size(od->dtype)))
        return;
    cl_kernel k = tfc_ocl_kernel(&prog, "acc", od->dtype, a, &q);
    if (!k) return;
    for (int i = 1; i < a->n_in; i++) {
        x = task_buf(buffers, a->d[i].buf);
        if (tfc_ocl_run(a, k, q, (size_t)n, 0, 5,
                        (size_t[]){sizeof o.m, sizeof o.off, sizeof x.m, sizeof x.off, sizeof n},
                        (const void *[]){&o.m, &o.off, &x.m, &x.off, &n}))
            break;
    }
    clReleaseKernel(k);
}

static void fill_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct clbuf o = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    /* the kernel's T v: passed at the output's own width */
    float f = (float)a->attrs[TFC_FILL_ATTR_VALUE].f;
    double v = a->attrs[TFC_FILL_ATTR_VALUE].f;
    int f32 = od->dtype == TFC_FLOAT32;
    launch(a, "fill", od->dtype, n, 4,
           (size_t[]){sizeof o.m, sizeof o.off, f32 ? sizeof f : sizeof v, sizeof n},
           (const void *[]){&o.m, &o.off, f32 ? (void *)&f : (void *)&v, &n});
}

/* cast between float32 and float64 (same-dtype casts are copies) */
static void cast_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct clbuf x = task_buf(buffers, a->d[0].buf), y = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    launch(a, a->d[0].dtype == TFC_FLOAT32 ? "cast_f32_f64" : "cast_f64_f32", -1, n, 5,
           (size_t[]){sizeof x.m, sizeof x.off, sizeof y.m, sizeof y.off, sizeof n},
           (const void *[]){&x.m, &x.off, &y.m, &y.off, &n});
}

static void select_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct clbuf c = task_buf(buffers, a->d[0].buf), x = task_buf(buffers, a->d[1].buf);
    struct clbuf y = task_buf(buffers, a->d[2].buf), o = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    struct bcast_cl b;
    bcast_fill(&b, od, 3, (const struct tfc_kdesc *[]){&a->d[0], &a->d[1], &a->d[2]});
    launch(a, "select", od->dtype, n, 10,
           (size_t[]){sizeof c.m, sizeof c.off, sizeof x.m, sizeof x.off, sizeof y.m,
                      sizeof y.off, sizeof o.m, sizeof o.off, sizeof b, sizeof n},
           (const void *[]){&c.m, &c.off, &x.m, &x.off, &y.m, &y.off, &o.m, &o.off, &b, &n});
}

/* logical_not (op 0; x bound twice), logical_and (1), logical_or (2), all on bool */
static void logic_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    int two = a->kind != TFC_K_LOGICAL_NOT;
    struct clbuf x = task_buf(buffers, a->d[0].buf), y = task_buf(buffers, a->d[two].buf);
    struct clbuf o = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    struct bcast_cl b;
    bcast_fill(&b, od, 2, (const struct tfc_kdesc *[]){&a->d[0], &a->d[two]});
    cl_int op = a->kind == TFC_K_LOGICAL_NOT ? 0 : a->kind == TFC_K_LOGICAL_AND ? 1 : 2;
    launch(a, "logic", -1, n, 9,
           (size_t[]){sizeof op, sizeof x.m, sizeof x.off, sizeof y.m, sizeof y.off, sizeof o.m,
                      sizeof o.off, sizeof b, sizeof n},
           (const void *[]){&op, &x.m, &x.off, &y.m, &y.off, &o.m, &o.off, &b, &n});
}

/* binary arithmetic, comparisons (a bool out), and broadcast, whose input 1 gives only the
 * shape and has no buffer: x is bound twice */
static void binary_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    int y_in = a->kind == TFC_K_BROADCAST ? 0 : 1;
    struct clbuf x = task_buf(buffers, a->d[0].buf), y = task_buf(buffers, a->d[y_in].buf);
    struct clbuf o = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    struct bcast_cl b;
    bcast_fill(&b, od, 2, (const struct tfc_kdesc *[]){&a->d[0], &a->d[1]});
    cl_int kind = a->kind, cmp = tfc_ew_class(a->kind) == TFC_EW_CLASS_COMPARE;
    launch(a, "binary", a->d[0].dtype, n, 10,
           (size_t[]){sizeof kind, sizeof cmp, sizeof x.m, sizeof x.off, sizeof y.m,
                      sizeof y.off, sizeof o.m, sizeof o.off, sizeof b, sizeof n},
           (const void *[]){&kind, &cmp, &x.m, &x.off, &y.m, &y.off, &o.m, &o.off, &b, &n});
}

/* unary maths, and the predicates is_nan, is_inf (a bool out) */
static void unary_opencl(const struct tfc_kargs *a, void *buffers[])
{
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    struct clbuf x = task_buf(buffers, a->d[0].buf), y = task_buf(buffers, od->buf);
    cl_long n = od->numel;
    cl_int kind = a->kind, pred = tfc_ew_class(a->kind) == TFC_EW_CLASS_PREDICATE;
    cl_double p0 = a->attrs[TFC_EW_ATTR_P0].f, p1 = a->attrs[TFC_EW_ATTR_P1].f;
    launch(a, "unary", a->d[0].dtype, n, 9,
           (size_t[]){sizeof kind, sizeof pred, sizeof p0, sizeof p1, sizeof x.m, sizeof x.off,
                      sizeof y.m, sizeof y.off, sizeof n},
           (const void *[]){&kind, &pred, &p0, &p1, &x.m, &x.off, &y.m, &y.off, &n});
}

void tfc_elementwise_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    int dt = a->d[0].dtype, ew_class = tfc_ew_class(a->kind);
    if (a->kind == TFC_K_IDENTITY || (a->kind == TFC_K_CAST && dt == od->dtype))
        tfc_ocl_copy(a, buffers, a->d[0].buf, od->buf,
                     (size_t)od->numel * tfc_kdtype_size(od->dtype));
    else if (a->kind == TFC_K_ADD_N)
        add_n_opencl(a, buffers);
    else if (a->kind == TFC_K_FILL)
        fill_opencl(a, buffers);
    else if (a->kind == TFC_K_CAST)
        cast_opencl(a, buffers);
    else if (a->kind == TFC_K_SELECT)
        select_opencl(a, buffers);
    else if (dt == TFC_BOOL)
        logic_opencl(a, buffers);
    else if (a->kind == TFC_K_BROADCAST || ew_class == TFC_EW_CLASS_BINARY ||
             ew_class == TFC_EW_CLASS_COMPARE)
        binary_opencl(a, buffers);
    else
        unary_opencl(a, buffers);
}
#endif
