/* opencl_fused.c: the OpenCL kernel of fused element-wise steps (codelets/fused.h), float32
 * and float64. One interpreter kernel, compiled once per StarPU lifetime like the other
 * families: one work-item per output element loads its broadcast inputs, runs the op list in
 * private registers and writes the outputs. The op list, dims and strides travel in a small
 * read-only buffer (kernel arguments have a 1 KiB floor in OpenCL). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "opencl_common.h"
#include "fused.h"
#include "../src/tfc.h"

#ifdef STARPU_USE_OPENCL
#define CL_SRC(...) #__VA_ARGS__

/* The program buffer, in longs: n_in, n_out, n_ops, rank, dims[8], strides[8 inputs][8],
 * ops[24][5] (kind, a, b, and the bits of the doubles p0, p1), out_reg[4], out_ld[4], cols. Input strides carry the row strides
 * of 2-D tiles (sched/tiling.c); outputs are written at (i / cols) * out_ld + i % cols. */
#define PG_DIMS 4
#define PG_ST (PG_DIMS + TFC_K_MAX_RANK)
#define PG_OPS (PG_ST + TFC_FUSED_MAX_IN * TFC_K_MAX_RANK)
#define OP_WORDS 5
#define PG_OUT (PG_OPS + OP_WORDS * TFC_FUSED_MAX_OPS)
#define PG_OLD (PG_OUT + TFC_FUSED_MAX_OUT) /* row strides of the outputs (tiles: lds) */
#define PG_COLS (PG_OLD + TFC_FUSED_MAX_OUT) /* the output's row length */
#define PG_WORDS (PG_COLS + 1)

static const char body[] = CL_SRC(
kernel void TS(fused)(global const long *pg,
                      global T *x0, ulong xo0, global T *x1, ulong xo1, global T *x2, ulong xo2,
                      global T *x3, ulong xo3, global T *x4, ulong xo4, global T *x5, ulong xo5,
                      global T *x6, ulong xo6, global T *x7, ulong xo7,
                      global T *o0, ulong oo0, global T *o1, ulong oo1, global T *o2, ulong oo2,
                      global T *o3, ulong oo3, long n)
{
    long i = get_global_id(0);
    if (i >= n) return;
    global T *xs[8] = {AT(x0, xo0), AT(x1, xo1), AT(x2, xo2), AT(x3, xo3),
                       AT(x4, xo4), AT(x5, xo5), AT(x6, xo6), AT(x7, xo7)};
    global T *os[4] = {AT(o0, oo0), AT(o1, oo1), AT(o2, oo2), AT(o3, oo3)};
    int n_in = (int)pg[0], n_out = (int)pg[1], n_ops = (int)pg[2], rank = (int)pg[3];
    T r[32];
    for (int k = 0; k < n_in; k++) {
        long rem = i, off = 0;
        for (int d = rank - 1; d >= 0; d--) {
            long dim = pg[PGDIMS + d];
            off += (rem % dim) * pg[PGST + k * 8 + d];
            rem /= dim;
        }
        r[k] = xs[k][off];
    }
    for (int k = 0; k < n_ops; k++) {
        global const long *op = pg + PGOPS + OPWORDS * k;
        T x = r[op[1]];
        r[n_in + k] = op[2] >= 0 ? EW(binary)((int)op[0], x, r[op[2]])
                                 : EW(unary)((int)op[0], x, (T)as_double(op[3]),
                                             (T)as_double(op[4]));
    }
    long cols = pg[PGCOLS], row = i / cols, col = i - row * cols;
    for (int j = 0; j < n_out; j++) os[j][row * pg[PGOLD + j] + col] = r[pg[PGOUT + j]];
}
);

static char source[sizeof body + 256];
static struct tfc_ocl_prog prog = {.family = "fused", .body = source, .ew_math = 1};

/* The source with the buffer layout's offsets defined, made once before the first build
 * (the stringized body cannot expand the C macros itself). */
static pthread_once_t source_once = PTHREAD_ONCE_INIT;

static void make_source(void)
{
    snprintf(source, sizeof source,
             "#define PGDIMS %d\n#define PGST %d\n#define PGOPS %d\n#define PGOUT %d\n"
             "#define PGOLD %d\n#define PGCOLS %d\n#define OPWORDS %d\n%s",
             PG_DIMS, PG_ST, PG_OPS, PG_OUT, PG_OLD, PG_COLS, OP_WORDS, body);
}

void tfc_fused_opencl(void *buffers[], void *cl_arg)
{
    const struct tfc_kargs *a = cl_arg;
    const struct tfc_fused_prog *pg = tfc_fused_prog_of(a);
    const struct tfc_kdesc *od = tfc_kout_desc(a, 0);
    cl_long words[PG_WORDS];
    int64_t dims[TFC_K_MAX_RANK], st[TFC_FUSED_MAX_IN][TFC_K_MAX_RANK];
    memset(words, 0, sizeof words);
    int rank = tfc_fused_strides(a, dims, st);
    int64_t ld_in[TFC_FUSED_MAX_IN];
    for (int k = 0; k < a->n_in; k++) ld_in[k] = tfc_kdesc_ld(buffers, &a->d[k]);
    tfc_fused_apply_ld(a, rank, ld_in, st); /* tiles (sched/tiling.c): row strides */
    words[0] = a->n_in;
    words[1] = a->n_out;
    words[2] = pg->n_ops;
    words[3] = rank;
    for (int d = 0; d < rank; d++) words[PG_DIMS + d] = dims[d];
    for (int k = 0; k < a->n_in; k++)
        for (int d = 0; d < rank; d++) words[PG_ST + k * TFC_K_MAX_RANK + d] = st[k][d];
    for (int k = 0; k < pg->n_ops; k++) {
        cl_long *w = words + PG_OPS + OP_WORDS * k;
        w[0] = pg->ops[k].kind;
        w[1] = pg->ops[k].a;
        w[2] = pg->ops[k].b;
        memcpy(&w[3], &pg->ops[k].p0, sizeof(double)); /* as_double in the kernel */
        memcpy(&w[4], &pg->ops[k].p1, sizeof(double));
    }
    for (int j = 0; j < a->n_out; j++) {
        words[PG_OUT + j] = pg->out_reg[j];
        words[PG_OLD + j] = tfc_kdesc_ld(buffers, tfc_kout_desc(a, j));
    }
    words[PG_COLS] = dims[rank - 1];

    /* unused input and output arguments are bound to output 0 (never read or written) */
    enum { NB = TFC_FUSED_MAX_IN + TFC_FUSED_MAX_OUT };
    cl_mem m[NB];
    cl_ulong off[NB];
    for (int k = 0; k < NB; k++) {
        int isin = k < TFC_FUSED_MAX_IN, j = k - TFC_FUSED_MAX_IN;
        int used = isin ? k < a->n_in : j < a->n_out;
        int b = !used ? od->buf : isin ? a->d[k].buf : a->d[a->n_in + j].buf;
        tfc_ocl_buf(buffers, b, &m[k], &off[k]);
    }
    pthread_once(&source_once, make_source);
    cl_command_queue q;
    cl_kernel k = tfc_ocl_kernel(&prog, "fused", od->dtype, a, &q);
    if (!k) return;
    cl_context ctx;
    starpu_opencl_get_context(starpu_worker_get_devid(starpu_worker_get_id()), &ctx);
    cl_int err;
    cl_mem pm = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof words, words,
                               &err);
    if (err != CL_SUCCESS) {
        tfc_ocl_fail(a, "clCreateBuffer (fused program)", err);
        clReleaseKernel(k);
        return;
    }
    cl_long n = od->numel;
    size_t sizes[2 + 2 * NB];
    const void *vals[2 + 2 * NB];
    sizes[0] = sizeof pm;
    vals[0] = &pm;
    for (int i = 0; i < NB; i++) {
        sizes[1 + 2 * i] = sizeof m[i];
        vals[1 + 2 * i] = &m[i];
        sizes[2 + 2 * i] = sizeof off[i];
        vals[2 + 2 * i] = &off[i];
    }
    sizes[1 + 2 * NB] = sizeof n;
    vals[1 + 2 * NB] = &n;
    tfc_ocl_run(a, k, q, (size_t)n, 0, 2 + 2 * NB, sizes, vals);
    clReleaseMemObject(pm);
    clReleaseKernel(k);
}
#endif
