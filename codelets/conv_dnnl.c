/* conv_dnnl.c: the CPU kernels of conv, conv_backprop_input and conv_backprop_filter through
 * oneDNN's convolution primitives, float32 on the plain NCW/NCHW/NCDHW buffers StarPU hands
 * over. Each CPU worker thread has its own engine, stream and small LRU cache of primitives
 * keyed by every shape and attribute, released when the thread ends (StarPU joins its workers
 * at shutdown); oneDNN runs on the calling thread alone (Debian's build threads with OpenMP). Inside the
 * task the operands are reordered to the blocked layouts oneDNN picks (format any): measured
 * faster than its plain-layout kernels even with the reorders (bench/RESULTS.md), except the
 * input gradient of a layer with few input channels, where the direct kernels crawl and the
 * plain layouts' GEMM path is used. */
#ifdef HAVE_CONFIG_H /* configure's; scripts/fuzz.sh builds without it: then no oneDNN */
#include "config.h"
#endif
#include "conv_dnnl.h"

#ifndef TFC_HAVE_DNNL

enum tfc_conv_dnnl_result tfc_conv_dnnl_cpu(void *buffers[], const struct tfc_kargs *a)
{
    (void)buffers, (void)a;
    return TFC_CONV_DNNL_ABSENT;
}

int tfc_conv_dnnl_live_threads(void)
{
    return 0;
}

void tfc_conv_dnnl_force_layouts(enum tfc_conv_dnnl_layouts l)
{
    (void)l;
}

#else

#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include "dnnl_thread.h"
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif
#include "kernel.h"
#include "conv_geom.h"

#define CACHE_SLOTS 16 /* primitives per worker: a training step has about 3 per conv layer */
/* Input gradients of layers with fewer input channels per group than one AVX-512 block run
 * 6 to 7 times slower in oneDNN's direct kernels on blocked layouts (conv1, 1 channel: 0.1 of
 * the sgemm rate) than on plain layouts (its GEMM path): those take plain layouts. */
#define MIN_BLOCKED_BP_INPUT_CHANNELS 16
#define KEY_LEN (7 + 7 * TFC_CONV_MAX_SPATIAL)

/* One primitive with its memories: in0, in1, out in the task's order. */
struct prim {
    int64_t key[KEY_LEN];
    unsigned long last_use;  /* LRU clock; 0: empty slot */
    int declined;            /* oneDNN refused it or has only reference code: im2col runs it */
    dnnl_primitive_t conv;
    int arg[3];                  /* DNNL_ARG_* of in0, in1, out */
    dnnl_memory_t user[3];       /* the task's plain buffers (data handle set per task) */
    dnnl_memory_t mem[3];        /* the primitive's layout: user[i] itself, or its own buffer */
    dnnl_primitive_t reorder[3]; /* user -> mem for inputs, mem -> user for the output */
};

/* This codelet's cache on a thread (dnnl_thread.h); engine and stream are the thread's. */
struct worker {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    unsigned long clock;
    struct prim cache[CACHE_SLOTS];
};

static void prim_release(struct prim *p)
{
    for (int i = 0; i < 3; i++) {
        if (p->reorder[i]) dnnl_primitive_destroy(p->reorder[i]);
        if (p->mem[i] && p->mem[i] != p->user[i]) dnnl_memory_destroy(p->mem[i]);
        if (p->user[i]) dnnl_memory_destroy(p->user[i]);
    }
    if (p->conv) dnnl_primitive_destroy(p->conv);
    memset(p, 0, sizeof *p);
}

/* Frees the cache at thread exit (dnnl_thread.c then frees the stream and the engine). */
static void worker_free(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < CACHE_SLOTS; i++) prim_release(&w->cache[i]);
    free(w);
}

int tfc_conv_dnnl_live_threads(void)
{
    return tfc_dnnl_live_threads();
}

/* The calling thread's state, created on its first convolution; NULL when it cannot be. */
static struct worker *worker_get(void)
{
    struct tfc_dnnl_thread *t;
    struct worker *w = tfc_dnnl_thread_cache(TFC_DNNL_CONV, sizeof *w, worker_free, &t);
    if (w && !w->engine) w->engine = t->engine, w->stream = t->stream;
    return w;
}

static int layouts_forced = TFC_CONV_DNNL_LAYOUTS_AUTO; /* bench/conv_codelet compares */

void tfc_conv_dnnl_force_layouts(enum tfc_conv_dnnl_layouts l)
{
    __atomic_store_n(&layouts_forced, (int)l, __ATOMIC_RELAXED);
}

/* Plain layouts for this task's primitive (see MIN_BLOCKED_BP_INPUT_CHANNELS). */
static int wants_plain(int kind, const struct tfc_conv_geom *g)
{
    int forced = __atomic_load_n(&layouts_forced, __ATOMIC_RELAXED);
    if (forced != TFC_CONV_DNNL_LAYOUTS_AUTO) return forced == TFC_CONV_DNNL_LAYOUTS_PLAIN;
    return kind == TFC_K_CONV_BP_INPUT &&
           g->in_ch / g->groups < MIN_BLOCKED_BP_INPUT_CHANNELS;
}

static void key_make(int kind, const struct tfc_conv_geom *g, int64_t key[KEY_LEN])
{
    int64_t *k = key;
    memset(key, 0, KEY_LEN * sizeof *key);
    *k++ = kind, *k++ = wants_plain(kind, g), *k++ = g->nd, *k++ = g->batch, *k++ = g->in_ch;
    *k++ = g->out_ch, *k++ = g->groups;
    for (int d = 0; d < g->nd; d++) {
        int64_t *s = k + 7 * d;
        s[0] = g->in[d], s[1] = g->kern[d], s[2] = g->out[d], s[3] = g->stride[d];
        s[4] = g->dil[d], s[5] = g->pad_lo[d], s[6] = g->pad_hi[d];
    }
}

/* The plain descriptors of the activations (input, output) and the filter of g, and the
 * same with format any (or plain again when `plain`) for the primitive. */
struct conv_mds {
    dnnl_memory_desc_t x, y, w;       /* plain */
    dnnl_memory_desc_t px, py, pw;    /* the primitive's */
    dnnl_dims_t strides, dilates, pad_l, pad_r;
};

static void conv_mds_make(const struct tfc_conv_geom *g, int plain, struct conv_mds *m)
{
    static const dnnl_format_tag_t tags[] = {dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
    dnnl_dims_t x = {g->batch, g->in_ch}, y = {g->batch, g->out_ch}, w;
    int grouped = g->groups > 1, wr = g->nd + 2 + grouped;
    if (grouped)
        w[0] = g->groups, w[1] = g->out_ch / g->groups, w[2] = g->in_ch / g->groups;
    else
        w[0] = g->out_ch, w[1] = g->in_ch;
    for (int d = 0; d < g->nd; d++) {
        x[2 + d] = g->in[d], y[2 + d] = g->out[d], w[2 + grouped + d] = g->kern[d];
        m->strides[d] = g->stride[d], m->dilates[d] = g->dil[d] - 1; /* oneDNN: 0 is none */
        m->pad_l[d] = g->pad_lo[d], m->pad_r[d] = g->pad_hi[d];
    }
    dnnl_format_tag_t act = tags[g->nd - 1], filt = tags[wr - 3];
    dnnl_memory_desc_init_by_tag(&m->x, g->nd + 2, x, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(&m->y, g->nd + 2, y, dnnl_f32, act);
    dnnl_memory_desc_init_by_tag(&m->w, wr, w, dnnl_f32, filt);
    dnnl_format_tag_t any = dnnl_format_tag_any;
    dnnl_memory_desc_init_by_tag(&m->px, g->nd + 2, x, dnnl_f32, plain ? act : any);
    dnnl_memory_desc_init_by_tag(&m->py, g->nd + 2, y, dnnl_f32, plain ? act : any);
    dnnl_memory_desc_init_by_tag(&m->pw, wr, w, dnnl_f32, plain ? filt : any);
}

/* The primitive descriptor of the task's direction; backward ones are hinted by a forward
 * one, as oneDNN requires. NULL when oneDNN has no implementation. */
static dnnl_primitive_desc_t conv_pd(dnnl_engine_t eng, int kind, const struct conv_mds *m)
{
    const dnnl_alg_kind_t alg = dnnl_convolution_auto;
    dnnl_convolution_desc_t fwd, bwd;
    dnnl_primitive_desc_t hint = NULL, pd = NULL;
    if (dnnl_dilated_convolution_forward_desc_init(&fwd, dnnl_forward_training, alg, &m->px,
                                                   &m->pw, NULL, &m->py, m->strides,
                                                   m->dilates, m->pad_l,
                                                   m->pad_r) != dnnl_success ||
        dnnl_primitive_desc_create(&hint, &fwd, NULL, eng, NULL) != dnnl_success)
        return NULL;
    if (kind == TFC_K_CONV) return hint;
    dnnl_status_t s =
        kind == TFC_K_CONV_BP_INPUT
            ? dnnl_dilated_convolution_backward_data_desc_init(&bwd, alg, &m->px, &m->pw,
                                                               &m->py, m->strides, m->dilates,
                                                               m->pad_l, m->pad_r)
            : dnnl_dilated_convolution_backward_weights_desc_init(&bwd, alg, &m->px, &m->pw,
                                                                  NULL, &m->py, m->strides,
                                                                  m->dilates, m->pad_l,
                                                                  m->pad_r);
    if (s != dnnl_success || dnnl_primitive_desc_create(&pd, &bwd, NULL, eng, hint) != dnnl_success)
        pd = NULL;
    dnnl_primitive_desc_destroy(hint);
    return pd;
}

/* Operand i: a memory on the task's plain buffer, the primitive's memory for query q (the
 * same when the layouts agree) and the reorder between them; is_out: from the primitive's. */
static int prim_bind(struct prim *p, dnnl_engine_t eng, int i, dnnl_primitive_desc_t pd,
                     dnnl_query_t q, const dnnl_memory_desc_t *plain, int is_out)
{
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, 0);
    if (!md || dnnl_memory_create(&p->user[i], plain, eng, DNNL_MEMORY_NONE) != dnnl_success)
        return -1;
    if (dnnl_memory_desc_equal(md, plain)) {
        p->mem[i] = p->user[i];
        return 0;
    }
    dnnl_primitive_desc_t rpd;
    if (dnnl_memory_create(&p->mem[i], md, eng, DNNL_MEMORY_ALLOCATE) != dnnl_success ||
        dnnl_reorder_primitive_desc_create(&rpd, is_out ? md : plain, eng, is_out ? plain : md,
                                           eng, NULL) != dnnl_success)
        return -1;
    dnnl_status_t s = dnnl_primitive_create(&p->reorder[i], rpd);
    dnnl_primitive_desc_destroy(rpd);
    return s == dnnl_success ? 0 : -1;
}

/* Builds slot p for the task: its primitive, memories and reorders; p->declined when oneDNN
 * refuses the geometry or would run reference code (slower than im2col + GEMM). */
static void prim_build(struct prim *p, dnnl_engine_t eng, int kind,
                       const struct tfc_conv_geom *g)
{
    struct conv_mds m;
    conv_mds_make(g, wants_plain(kind, g), &m);
    dnnl_primitive_desc_t pd = conv_pd(eng, kind, &m);
    const char *impl = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success ||
        !impl || !strncmp(impl, "ref", 3)) {
        p->declined = 1;
        if (pd) dnnl_primitive_desc_destroy(pd);
        return;
    }
    /* in0, in1, out of each kind: conv x, w -> y; bp_input dy, w -> dx; bp_filter x, dy -> dw */
    static const int args[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                                   {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                                   {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
    static const dnnl_query_t queries[3][3] = {
        {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md},
        {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md},
        {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md}};
    const dnnl_memory_desc_t *plain[3][3] = {{&m.x, &m.w, &m.y}, {&m.y, &m.w, &m.x},
                                             {&m.x, &m.y, &m.w}};
    int dir = kind == TFC_K_CONV ? 0 : kind == TFC_K_CONV_BP_INPUT ? 1 : 2, rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        p->arg[i] = args[dir][i];
        rc = prim_bind(p, eng, i, pd, queries[dir][i], plain[dir][i], i == 2);
    }
    if (!rc && dnnl_primitive_create(&p->conv, pd) != dnnl_success) rc = -1;
    dnnl_primitive_desc_destroy(pd);
    if (rc) {
        int64_t key[KEY_LEN];
        memcpy(key, p->key, sizeof key);
        prim_release(p);
        memcpy(p->key, key, sizeof key);
        p->declined = 1;
    }
}

/* The worker's slot for the task: a cached one, else the least recently used one rebuilt. */
static struct prim *prim_get(struct worker *w, int kind, const struct tfc_conv_geom *g)
{
    int64_t key[KEY_LEN];
    key_make(kind, g, key);
    struct prim *lru = &w->cache[0];
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct prim *p = &w->cache[i];
        if (p->last_use && !memcmp(p->key, key, sizeof key)) {
            p->last_use = ++w->clock;
            return p;
        }
        if (p->last_use < lru->last_use) lru = p;
    }
    prim_release(lru);
    memcpy(lru->key, key, sizeof key);
    lru->last_use = ++w->clock;
    prim_build(lru, w->engine, kind, g);
    return lru;
}

static dnnl_status_t reorder_exec(struct worker *w, dnnl_primitive_t r, dnnl_memory_t from,
                                  dnnl_memory_t to)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
    return dnnl_primitive_execute(r, w->stream, 2, args);
}

/* Reorders the inputs in, convolves, reorders the output back; the first failure's step. */
static dnnl_status_t prim_exec(struct worker *w, struct prim *p, void *data[3],
                               const char **step)
{
    dnnl_status_t s = dnnl_success;
    for (int i = 0; i < 3 && s == dnnl_success; i++)
        s = dnnl_memory_set_data_handle(p->user[i], data[i]);
    if (s != dnnl_success) return *step = "binding the buffers", s;
    for (int i = 0; i < 2 && s == dnnl_success; i++)
        if (p->reorder[i]) s = reorder_exec(w, p->reorder[i], p->user[i], p->mem[i]);
    if (s != dnnl_success) return *step = "reordering an input", s;
    dnnl_exec_arg_t args[3];
    for (int i = 0; i < 3; i++) args[i] = (dnnl_exec_arg_t){p->arg[i], p->mem[i]};
    s = dnnl_primitive_execute(p->conv, w->stream, 3, args);
    if (s != dnnl_success) return *step = "the convolution", s;
    if (p->reorder[2] && (s = reorder_exec(w, p->reorder[2], p->mem[2], p->user[2])))
        return *step = "reordering the output", s;
    *step = "waiting for the stream";
    return dnnl_stream_wait(w->stream);
}

enum tfc_conv_dnnl_result tfc_conv_dnnl_cpu(void *buffers[], const struct tfc_kargs *a)
{
    const struct tfc_kdesc *out = tfc_kout_desc(a, 0);
    if (a->kind != TFC_K_CONV && a->kind != TFC_K_CONV_BP_INPUT &&
        a->kind != TFC_K_CONV_BP_FILTER)
        return TFC_CONV_DNNL_DECLINED;
    if (a->d[0].dtype != TFC_FLOAT32 || a->d[1].dtype != TFC_FLOAT32 ||
        out->dtype != TFC_FLOAT32 || a->d[0].buf < 0 || a->d[1].buf < 0 || out->buf < 0)
        return TFC_CONV_DNNL_DECLINED; /* im2col zeroes the outputs of empty operands */
    struct tfc_conv_geom g;
    char msg[200];
    if (tfc_conv_geom_of(a, &g, msg, sizeof msg))
        return TFC_CONV_DNNL_DECLINED; /* im2col reports it */
    struct worker *w = worker_get();
    if (!w) return TFC_CONV_DNNL_DECLINED;
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    /* one OpenMP thread while oneDNN builds and runs (it sizes its loops by the calling
     * thread's team size): StarPU's workers are the parallelism, and a team per call would
     * oversubscribe the cores and pay a fork-join per primitive. Restored after, for a thread
     * of the application's (plan-time constant folding runs kernels there). */
    int omp_threads = omp_get_max_threads();
    if (omp_threads != 1) omp_set_num_threads(1);
#endif
    struct prim *p = prim_get(w, a->kind, &g);
    void *data[3] = {tfc_kin(buffers, a, 0), tfc_kin(buffers, a, 1), tfc_kout(buffers, a, 0)};
    const char *step = NULL;
    dnnl_status_t s = p->declined ? dnnl_success : prim_exec(w, p, data, &step);
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    if (omp_threads != 1) omp_set_num_threads(omp_threads);
#endif
    if (p->declined) return TFC_CONV_DNNL_DECLINED;
    if (s != dnnl_success)
        tfc_kernel_fail(a, TFC_ERR_RUNTIME, "oneDNN failed in %s of a %lld-D %s: %s", step,
                        (long long)g.nd, a->kind == TFC_K_CONV ? "convolution"
                        : a->kind == TFC_K_CONV_BP_INPUT ? "convolution input gradient"
                        : "convolution filter gradient", dnnl_status2str(s));
    return TFC_CONV_DNNL_RAN;
}

#endif
