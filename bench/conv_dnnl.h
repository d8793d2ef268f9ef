/* conv_dnnl.h: backend (2) of bench/conv_backends, oneDNN's C API (Debian's libdnnl 2.6, built
 * with the OpenMP runtime, so its threads are libgomp's, sized by omp_set_num_threads):
 * convolution primitives (algorithm auto: direct or Winograd as oneDNN sees fit) in three
 * set-ups, and matmul for the dense shapes.
 *   dnnl any:          layouts left to oneDNN (format_tag any), the data already in them, as a
 *                      runtime that keeps tensors in oneDNN's layouts would run it;
 *   dnnl any+reorder:  the same with the reorders from NCHW/KCRS and back in the timed call;
 *   dnnl nchw:         the primitive created on plain NCHW/KCRS, no reorder. */
#ifndef TFC_CONV_DNNL_H
#define TFC_CONV_DNNL_H

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include "conv_problem.h"

static dnnl_engine_t conv_dnnl_engine;
static dnnl_stream_t conv_dnnl_stream;

/* 1 when s is dnnl_success, else prints what failed and returns 0. */
static int dnnl_good(dnnl_status_t s, const char *what)
{
    if (s == dnnl_success) return 1;
    fprintf(stderr, "conv_backends: oneDNN %s: %s\n", what, dnnl_status2str(s));
    return 0;
}

/* One CPU engine and stream for the whole program; 0 on success. */
static int conv_dnnl_init(void)
{
    return dnnl_good(dnnl_engine_create(&conv_dnnl_engine, dnnl_cpu, 0), "engine") &&
                   dnnl_good(dnnl_stream_create(&conv_dnnl_stream, conv_dnnl_engine,
                                                dnnl_stream_default_flags), "stream")
               ? 0
               : -1;
}

static void conv_dnnl_fini(void)
{
    if (conv_dnnl_stream) dnnl_stream_destroy(conv_dnnl_stream);
    if (conv_dnnl_engine) dnnl_engine_destroy(conv_dnnl_engine);
}

/* Appends md's inner blocks to buf, e.g. "16c" for nChw16c ("plain" when it has none), with
 * letters naming the dimensions in order. */
static void dnnl_layout_str(const dnnl_memory_desc_t *md, const char *letters, char *buf,
                            size_t size)
{
    const dnnl_blocking_desc_t *b = &md->format_desc.blocking;
    size_t len = strlen(buf);
    if (md->format_kind != dnnl_blocked) {
        snprintf(buf + len, size - len, "opaque");
        return;
    }
    if (b->inner_nblks == 0) snprintf(buf + len, size - len, "plain");
    for (int i = 0; i < b->inner_nblks && len + 1 < size; i++, len = strlen(buf))
        snprintf(buf + len, size - len, "%lld%c", (long long)b->inner_blks[i],
                 letters[b->inner_idxs[i]]);
}

enum dnnl_mode { DNNL_ANY, DNNL_ANY_REORDER, DNNL_PLAIN };

/* The two inputs and the output of one direction, in the primitive's layouts (mem) and in the
 * plain ones (user: the problem's buffers, the output's own), with the reorders between them
 * where the layouts differ. */
struct dnnl_conv_state {
    const struct conv_problem *p;
    enum conv_dir dir;
    enum dnnl_mode mode;
    dnnl_primitive_t conv;
    int arg[3];
    dnnl_memory_t mem[3], user[3];
    dnnl_primitive_t reorder[3]; /* user -> mem for inputs, mem -> user for the output */
    float *out;
};

static int dnnl_reorder_exec(dnnl_primitive_t r, dnnl_memory_t from, dnnl_memory_t to)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_good(dnnl_primitive_execute(r, conv_dnnl_stream, 2, args), "reorder") ? 0 : -1;
}

static int dnnl_conv_run(void *arg)
{
    struct dnnl_conv_state *st = arg;
    if (st->mode == DNNL_ANY_REORDER)
        for (int i = 0; i < 2; i++)
            if (st->reorder[i] && dnnl_reorder_exec(st->reorder[i], st->user[i], st->mem[i]))
                return -1;
    dnnl_exec_arg_t args[3];
    for (int i = 0; i < 3; i++) args[i] = (dnnl_exec_arg_t){st->arg[i], st->mem[i]};
    if (!dnnl_good(dnnl_primitive_execute(st->conv, conv_dnnl_stream, 3, args), "convolution"))
        return -1;
    if (st->mode == DNNL_ANY_REORDER && st->reorder[2] &&
        dnnl_reorder_exec(st->reorder[2], st->mem[2], st->user[2]))
        return -1;
    return dnnl_good(dnnl_stream_wait(conv_dnnl_stream), "stream wait") ? 0 : -1;
}

static int dnnl_conv_fetch(void *arg, float *out)
{
    struct dnnl_conv_state *st = arg;
    if (st->mode != DNNL_ANY_REORDER && st->reorder[2] &&
        (dnnl_reorder_exec(st->reorder[2], st->mem[2], st->user[2]) ||
         !dnnl_good(dnnl_stream_wait(conv_dnnl_stream), "stream wait")))
        return -1;
    memcpy(out, st->out, conv_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void dnnl_conv_destroy(void *arg)
{
    struct dnnl_conv_state *st = arg;
    for (int i = 0; i < 3; i++) {
        if (st->reorder[i]) dnnl_primitive_destroy(st->reorder[i]);
        if (st->mem[i] && st->mem[i] != st->user[i]) dnnl_memory_destroy(st->mem[i]);
        if (st->user[i]) dnnl_memory_destroy(st->user[i]);
    }
    if (st->conv) dnnl_primitive_destroy(st->conv);
    free(st->out);
    free(st);
}

/* The primitive descriptor of direction d over src, weights and dst descriptors (format any or
 * plain); backward ones are hinted by a forward one, as oneDNN requires. */
static int dnnl_conv_pd(const struct conv_problem *p, enum conv_dir d,
                        const dnnl_memory_desc_t mds[3], dnnl_primitive_desc_t *pd)
{
    const struct conv_shape *s = &p->sh;
    dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_convolution_desc_t fwd, bwd;
    dnnl_primitive_desc_t hint = NULL;
    const dnnl_alg_kind_t alg = dnnl_convolution_auto;
    int ok = dnnl_good(dnnl_convolution_forward_desc_init(&fwd, dnnl_forward_training, alg,
                                                          &mds[0], &mds[1], NULL, &mds[2],
                                                          strides, pad, pad), "forward desc") &&
             dnnl_good(dnnl_primitive_desc_create(d == DIR_FWD ? pd : &hint, &fwd, NULL,
                                                  conv_dnnl_engine, NULL), "forward pd");
    if (ok && d == DIR_BWD_DATA)
        ok = dnnl_good(dnnl_convolution_backward_data_desc_init(&bwd, alg, &mds[0], &mds[1],
                                                                &mds[2], strides, pad, pad),
                       "backward-data desc");
    else if (ok && d == DIR_BWD_FILTER)
        ok = dnnl_good(dnnl_convolution_backward_weights_desc_init(&bwd, alg, &mds[0], &mds[1],
                                                                   NULL, &mds[2], strides, pad,
                                                                   pad),
                       "backward-weights desc");
    if (ok && d != DIR_FWD)
        ok = dnnl_good(dnnl_primitive_desc_create(pd, &bwd, NULL, conv_dnnl_engine, hint),
                       "backward pd");
    if (hint) dnnl_primitive_desc_destroy(hint);
    return ok ? 0 : -1;
}

/* Plain memory on buf, the primitive's memory for query q, and the reorder between them
 * (none when the layouts agree); is_out: the reorder goes from the primitive's to plain. */
static int dnnl_conv_bind(struct dnnl_conv_state *st, int i, dnnl_primitive_desc_t pd,
                          dnnl_query_t q, const dnnl_memory_desc_t *plain, float *buf, int is_out)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, 0);
    dnnl_primitive_desc_t rpd;
    if (!md || !dnnl_good(dnnl_memory_create(&st->user[i], plain, conv_dnnl_engine, buf), "memory"))
        return -1;
    if (dnnl_memory_desc_equal(md, plain)) {
        st->mem[i] = st->user[i];
        return 0;
    }
    if (!dnnl_good(dnnl_memory_create(&st->mem[i], md, conv_dnnl_engine, DNNL_MEMORY_ALLOCATE),
                   "memory") ||
        !dnnl_good(dnnl_reorder_primitive_desc_create(&rpd, is_out ? md : plain, conv_dnnl_engine,
                                                      is_out ? plain : md, conv_dnnl_engine,
                                                      NULL),
                   "reorder pd"))
        return -1;
    int ok = dnnl_good(dnnl_primitive_create(&st->reorder[i], rpd), "reorder");
    dnnl_primitive_desc_destroy(rpd);
    return ok ? 0 : -1;
}

/* Which argument, query and plain buffer each of in0, in1, out is for direction d. */
static void dnnl_conv_args(struct dnnl_conv_state *st, dnnl_query_t q[3], float *buf[3])
{
    const struct conv_problem *p = st->p;
    static const int args[N_DIRS][3] = {
        {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
        {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
    static const dnnl_query_t queries[N_DIRS][3] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
        {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md}};
    float *in[N_DIRS][2] = {{p->x, p->w}, {p->dy, p->w}, {p->x, p->dy}};
    for (int i = 0; i < 3; i++) st->arg[i] = args[st->dir][i], q[i] = queries[st->dir][i];
    buf[0] = in[st->dir][0], buf[1] = in[st->dir][1], buf[2] = st->out;
}

static int dnnl_conv_setup(struct dnnl_conv_state *st, char *impl, size_t impl_size)
{
    const struct conv_problem *p = st->p;
    const struct conv_shape *s = &p->sh;
    dnnl_dims_t act_in = {p->n, s->c, s->h, s->w}, filt = {s->k, s->c, s->r, s->s},
                act_out = {p->n, s->k, p->oh, p->ow};
    dnnl_memory_desc_t act_in_plain, filt_plain, act_out_plain, mds[3];
    dnnl_format_tag_t tag = st->mode == DNNL_PLAIN ? dnnl_nchw : dnnl_format_tag_any;
    dnnl_memory_desc_init_by_tag(&act_in_plain, 4, act_in, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&filt_plain, 4, filt, dnnl_f32, dnnl_oihw);
    dnnl_memory_desc_init_by_tag(&act_out_plain, 4, act_out, dnnl_f32, dnnl_nchw);
    dnnl_memory_desc_init_by_tag(&mds[0], 4, act_in, dnnl_f32, tag);
    dnnl_memory_desc_init_by_tag(&mds[1], 4, filt, dnnl_f32,
                                 st->mode == DNNL_PLAIN ? dnnl_oihw : dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&mds[2], 4, act_out, dnnl_f32, tag);
    dnnl_primitive_desc_t pd;
    if (dnnl_conv_pd(p, st->dir, mds, &pd)) return -1;
    /* the plain layouts of in0, in1, out: x or dy, w or dy, y, dx or dw */
    const dnnl_memory_desc_t *plain[N_DIRS][3] = {
        {&act_in_plain, &filt_plain, &act_out_plain},
        {&act_out_plain, &filt_plain, &act_in_plain},
        {&act_in_plain, &act_out_plain, &filt_plain}};
    dnnl_query_t q[3];
    float *buf[3];
    int rc = 0;
    dnnl_conv_args(st, q, buf);
    const char *name = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    snprintf(impl, impl_size, "%s; ", name);
    for (int i = 0; i < 3 && !rc; i++) {
        const dnnl_memory_desc_t *pl = plain[st->dir][i];
        rc = dnnl_conv_bind(st, i, pd, q[i], pl, buf[i], i == 2);
        dnnl_layout_str(dnnl_primitive_desc_query_md(pd, q[i], 0),
                        pl == &filt_plain ? "kcrs" : "nchw", impl, impl_size);
        strncat(impl, i < 2 ? "," : "", impl_size - strlen(impl) - 1);
    }
    if (!rc && !dnnl_good(dnnl_primitive_create(&st->conv, pd), "primitive")) rc = -1;
    dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < 2 && !rc; i++) /* the data in the primitive's layouts, once */
        if (st->reorder[i]) rc = dnnl_reorder_exec(st->reorder[i], st->user[i], st->mem[i]);
    return rc || !dnnl_good(dnnl_stream_wait(conv_dnnl_stream), "stream wait") ? -1 : 0;
}

/* A oneDNN convolution variant on threads OpenMP threads (the caller has set them); -1 when
 * oneDNN cannot set it up (printed). */
static int dnnl_conv_create(const struct conv_problem *p, enum conv_dir d, enum dnnl_mode mode,
                            int threads, struct variant *v)
{
    static const char *const names[] = {"dnnl any", "dnnl any+reorder", "dnnl nchw"};
    struct dnnl_conv_state *st = calloc(1, sizeof *st);
    *st = (struct dnnl_conv_state){.p = p, .dir = d, .mode = mode};
    st->out = conv_alloc(conv_result_size(p, d));
    *v = (struct variant){.run = dnnl_conv_run, .fetch = dnnl_conv_fetch,
                          .destroy = dnnl_conv_destroy, .st = st};
    snprintf(v->name, sizeof v->name, "%s", names[mode]);
    if (dnnl_conv_setup(st, v->impl, sizeof v->impl)) {
        dnnl_conv_destroy(st);
        return -1;
    }
    (void)threads;
    return 0;
}

/* ---- dense layers: matmul on plain row-major matrices, transposes as strides -------------- */

struct dnnl_mm_state {
    const struct dense_problem *p;
    enum conv_dir dir;
    dnnl_primitive_t mm;
    dnnl_memory_t mem[3]; /* src, weights, dst */
    float *out;
};

/* A [rows, cols] float32 matrix whose element (i, j) is at i*rs + j*cs. */
static void dnnl_matrix_md(dnnl_memory_desc_t *md, int rows, int cols, int rs, int cs)
{
    dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

static int dnnl_mm_run(void *arg)
{
    struct dnnl_mm_state *st = arg;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, st->mem[0]}, {DNNL_ARG_WEIGHTS, st->mem[1]},
                               {DNNL_ARG_DST, st->mem[2]}};
    return dnnl_good(dnnl_primitive_execute(st->mm, conv_dnnl_stream, 3, args), "matmul") &&
                   dnnl_good(dnnl_stream_wait(conv_dnnl_stream), "stream wait")
               ? 0
               : -1;
}

static int dnnl_mm_fetch(void *arg, float *out)
{
    struct dnnl_mm_state *st = arg;
    memcpy(out, st->out, dense_result_size(st->p, st->dir) * sizeof *out);
    return 0;
}

static void dnnl_mm_destroy(void *arg)
{
    struct dnnl_mm_state *st = arg;
    for (int i = 0; i < 3; i++)
        if (st->mem[i]) dnnl_memory_destroy(st->mem[i]);
    if (st->mm) dnnl_primitive_destroy(st->mm);
    free(st->out);
    free(st);
}

/* dst [M,N] = src [M,K] weights [K,N] for each direction, on the problem's buffers. */
static int dnnl_mm_setup(struct dnnl_mm_state *st, char *impl, size_t impl_size)
{
    const struct dense_problem *p = st->p;
    dnnl_memory_desc_t md[3];
    float *buf[3];
    if (st->dir == DIR_FWD) { /* y = x w */
        dnnl_matrix_md(&md[0], p->b, p->in, p->in, 1), buf[0] = p->x;
        dnnl_matrix_md(&md[1], p->in, p->out, p->out, 1), buf[1] = p->w;
        dnnl_matrix_md(&md[2], p->b, p->out, p->out, 1);
    } else if (st->dir == DIR_BWD_DATA) { /* dx = dy w^T */
        dnnl_matrix_md(&md[0], p->b, p->out, p->out, 1), buf[0] = p->dy;
        dnnl_matrix_md(&md[1], p->out, p->in, 1, p->out), buf[1] = p->w;
        dnnl_matrix_md(&md[2], p->b, p->in, p->in, 1);
    } else { /* dw = x^T dy */
        dnnl_matrix_md(&md[0], p->in, p->b, 1, p->in), buf[0] = p->x;
        dnnl_matrix_md(&md[1], p->b, p->out, p->out, 1), buf[1] = p->dy;
        dnnl_matrix_md(&md[2], p->in, p->out, p->out, 1);
    }
    buf[2] = st->out;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd;
    if (!dnnl_good(dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2]), "matmul desc") ||
        !dnnl_good(dnnl_primitive_desc_create(&pd, &desc, NULL, conv_dnnl_engine, NULL),
                   "matmul pd"))
        return -1;
    const char *name = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    snprintf(impl, impl_size, "%s", name);
    int ok = dnnl_good(dnnl_primitive_create(&st->mm, pd), "matmul");
    dnnl_primitive_desc_destroy(pd);
    for (int i = 0; i < 3 && ok; i++)
        ok = dnnl_good(dnnl_memory_create(&st->mem[i], &md[i], conv_dnnl_engine, buf[i]),
                       "memory");
    return ok ? 0 : -1;
}

static int dnnl_mm_create(const struct dense_problem *p, enum conv_dir d, struct variant *v)
{
    struct dnnl_mm_state *st = calloc(1, sizeof *st);
    *st = (struct dnnl_mm_state){.p = p, .dir = d};
    st->out = conv_alloc(dense_result_size(p, d));
    *v = (struct variant){.run = dnnl_mm_run, .fetch = dnnl_mm_fetch, .destroy = dnnl_mm_destroy,
                          .st = st};
    snprintf(v->name, sizeof v->name, "dnnl matmul");
    if (dnnl_mm_setup(st, v->impl, sizeof v->impl)) {
        dnnl_mm_destroy(st);
        return -1;
    }
    return 0;
}

#endif
