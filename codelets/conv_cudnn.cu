/* conv_cudnn.cu: conv, conv_backprop_input (and conv_transpose) and conv_backprop_filter on
 * CUDA workers through cuDNN 9's backend graph API: one convolution operation per graph, the
 * engine configurations of heuristics mode A (then the fallback list), and the first one that
 * computes exactly in the data type (no TF32 tensor cores, no down-conversion, deterministic),
 * is precompiled (no NVRTC) and finalizes becomes the execution plan. Plans are cached per CUDA worker, so per device
 * and cuDNN handle, keyed by every shape, attribute, dtype and the operands' alignment; only
 * the worker's own thread touches its cache (no lock, and no plan is destroyed while another
 * thread runs it). The workspace is one cudaMalloc per worker, grown on demand. */
#include <stdlib.h>
#include <string.h>
#include "cuda_common.h"
#include "conv_geom.h"
#include "conv_cudnn.h"

#define PLAN_SLOTS 16             /* plans per worker: a training step has 3 per conv layer */
#define MAX_CONFIGS 32            /* engine configurations read per heuristics mode */
#define MAX_WORKSPACE (1LL << 30) /* bytes: engines asking for more are passed over */
#define KEY_LEN (8 + 7 * TFC_CONV_MAX_SPATIAL)
#define BAG_MAX 12                /* descriptors one plan keeps alive */

/* The three tensors of every direction, by their convolution role (x, w, y shaped). */
enum { UID_X = 1, UID_W = 2, UID_Y = 3 };

#define TRY(call)                                                                            \
    do {                                                                                     \
        cudnnStatus_t try_s_ = (call);                                                       \
        if (try_s_ != CUDNN_STATUS_SUCCESS) return try_s_;                                   \
    } while (0)

/* The descriptors behind one plan, destroyed together (a plan refers to its engine
 * configuration, which refers to the operation graph and its tensors). */
struct bag {
    cudnnBackendDescriptor_t d[BAG_MAX];
    int n;
};

struct plan {
    int64_t key[KEY_LEN];
    unsigned long last_use; /* LRU clock; 0: empty slot */
    int declined;           /* no exact engine: the own kernel runs these tasks */
    cudnnBackendDescriptor_t exec; /* the execution plan (in bag) */
    int64_t workspace;      /* bytes the plan needs */
    struct bag bag;
};

struct worker {
    unsigned long clock;
    void *ws;       /* device workspace */
    size_t ws_size; /* bytes */
    struct plan slot[PLAN_SLOTS];
};

static struct worker *workers[STARPU_NMAXWORKERS]; /* each touched by its own worker only */
static unsigned long long n_ran, n_declined;       /* atomic */

/* The geometry as cuDNN takes it: 2 or 3 spatial dims (1-D gets a leading extent-1 dim),
 * symmetric padding. */
struct cd_shape {
    int sd;                            /* spatial dims, 2 or 3 */
    int64_t x[5], w[5], y[5];          /* [N, C, in...], [K, C/G, kernel...], [N, K, out...] */
    int64_t pad[3], stride[3], dil[3]; /* per spatial dim */
};

static void bag_free(struct bag *b)
{
    for (int i = b->n - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(b->d[i]);
    b->n = 0;
}

static cudnnStatus_t bag_make(struct bag *b, cudnnBackendDescriptorType_t t,
                              cudnnBackendDescriptor_t *out)
{
    if (b->n == BAG_MAX) return CUDNN_STATUS_INTERNAL_ERROR;
    TRY(cudnnBackendCreateDescriptor(t, out));
    b->d[b->n++] = *out;
    return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                         cudnnBackendAttributeType_t type, int64_t n, const void *v)
{
    return cudnnBackendSetAttribute(d, name, type, n, v);
}

/* CUDNN_ATTR_*_HANDLE are marked deprecated in late 9.x releases in favour of device-property
 * descriptors that early 9.x releases lack; the handle works in every 9.x. */
#pragma nv_diag_suppress 1444
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static const cudnnBackendAttributeName_t ATTR_GRAPH_HANDLE = CUDNN_ATTR_OPERATIONGRAPH_HANDLE;
static const cudnnBackendAttributeName_t ATTR_PLAN_HANDLE = CUDNN_ATTR_EXECUTION_PLAN_HANDLE;
#pragma GCC diagnostic pop
#pragma nv_diag_default 1444

/* Fills s from g; -1 when cuDNN's symmetric padding cannot give the same result: the high
 * pad only decides how many outputs there are, so pad_lo on both sides is the same
 * convolution exactly when it gives the same output extent. */
static int shape_make(const struct tfc_conv_geom *g, struct cd_shape *s)
{
    s->sd = g->nd < 2 ? 2 : g->nd;
    int off = s->sd - g->nd;
    s->x[0] = g->batch, s->x[1] = g->in_ch;
    s->w[0] = g->out_ch, s->w[1] = g->in_ch / g->groups;
    s->y[0] = g->batch, s->y[1] = g->out_ch;
    for (int i = 0; i < s->sd; i++) {
        int d = i - off, real = d >= 0;
        s->x[2 + i] = real ? g->in[d] : 1, s->w[2 + i] = real ? g->kern[d] : 1;
        s->y[2 + i] = real ? g->out[d] : 1, s->pad[i] = real ? g->pad_lo[d] : 0;
        s->stride[i] = real ? g->stride[d] : 1, s->dil[i] = real ? g->dil[d] : 1;
        if (!real) continue;
        int64_t span = (g->kern[d] - 1) * g->dil[d] + 1, padded = g->in[d] + 2 * g->pad_lo[d];
        if (padded < span || (padded - span) / g->stride[d] + 1 != g->out[d]) return -1;
    }
    return 0;
}

/* Whether the task's y-shaped operand ([N, K, out...]) has the geometry's dims: a tile or a
 * conv_transpose whose shapes disagree with g is left to the own kernel, which reports it. */
static int y_matches(const struct tfc_kargs *a, const struct tfc_conv_geom *g)
{
    const struct tfc_kdesc *y = a->kind == TFC_K_CONV ? tfc_kout_desc(a, 0)
                                : a->kind == TFC_K_CONV_BP_INPUT ? &a->d[0] : &a->d[1];
    if (y->rank != g->nd + 2 || y->dims[0] != g->batch || y->dims[1] != g->out_ch) return 0;
    for (int d = 0; d < g->nd; d++)
        if (y->dims[2 + d] != g->out[d]) return 0;
    return 1;
}

static void key_make(int kind, int dt, int64_t align, const struct tfc_conv_geom *g,
                     int64_t key[KEY_LEN])
{
    memset(key, 0, KEY_LEN * sizeof *key);
    int64_t *k = key;
    *k++ = kind, *k++ = dt, *k++ = align, *k++ = g->nd, *k++ = g->batch, *k++ = g->in_ch;
    *k++ = g->out_ch, *k++ = g->groups;
    for (int d = 0; d < g->nd; d++, k += 7) {
        k[0] = g->in[d], k[1] = g->kern[d], k[2] = g->out[d], k[3] = g->stride[d];
        k[4] = g->dil[d], k[5] = g->pad_lo[d], k[6] = g->pad_hi[d];
    }
}

/* A packed (row-major) tensor. */
static cudnnStatus_t tensor_make(struct bag *b, int64_t uid, cudnnDataType_t dt, int rank,
                                 const int64_t *dims, int64_t align, cudnnBackendDescriptor_t *t)
{
    int64_t strides[5], st = 1;
    for (int i = rank - 1; i >= 0; i--) strides[i] = st, st *= dims[i];
    TRY(bag_make(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, t));
    TRY(set(*t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TRY(set(*t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, rank, dims));
    TRY(set(*t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, rank, strides));
    TRY(set(*t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
    TRY(set(*t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
    return cudnnBackendFinalize(*t);
}

static cudnnStatus_t conv_desc_make(struct bag *b, const struct cd_shape *s, cudnnDataType_t dt,
                                    cudnnBackendDescriptor_t *c)
{
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION; /* ONNX's Conv: no kernel flip */
    int64_t sd = s->sd;
    TRY(bag_make(b, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, c));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &sd));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, sd, s->pad));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, sd, s->pad));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, sd, s->dil));
    TRY(set(*c, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, sd, s->stride));
    return cudnnBackendFinalize(*c);
}

/* The operation of the task's direction over the x-, w- and y-shaped tensors t[3]; output =
 * 1 * the convolution + 0 * output (overwritten). */
static cudnnStatus_t op_make(struct bag *b, int dir, int dt, cudnnBackendDescriptor_t conv,
                             const cudnnBackendDescriptor_t t[3], cudnnBackendDescriptor_t *op)
{
    static const struct {
        cudnnBackendDescriptorType_t type;
        cudnnBackendAttributeName_t alpha, beta, conv, role[3]; /* x, w, y shaped */
    } ops[3] = {
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y}},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY}},
        {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
          CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY}},
    };
    float alpha_f = 1.0f, beta_f = 0.0f;
    double alpha_d = 1.0, beta_d = 0.0;
    int f32 = dt == TFC_FLOAT32;
    cudnnBackendAttributeType_t st = f32 ? CUDNN_TYPE_FLOAT : CUDNN_TYPE_DOUBLE;
    TRY(bag_make(b, ops[dir].type, op));
    TRY(set(*op, ops[dir].alpha, st, 1, f32 ? (const void *)&alpha_f : (const void *)&alpha_d));
    TRY(set(*op, ops[dir].beta, st, 1, f32 ? (const void *)&beta_f : (const void *)&beta_d));
    TRY(set(*op, ops[dir].conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
    for (int i = 0; i < 3; i++)
        TRY(set(*op, ops[dir].role[i], CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t[i]));
    return cudnnBackendFinalize(*op);
}

/* The operation graph of one convolution of direction dir (0 forward, 1 data, 2 filter). */
static cudnnStatus_t graph_make(struct bag *b, cudnnHandle_t h, int dir, int dt, int64_t align,
                                const struct cd_shape *s, cudnnBackendDescriptor_t *graph)
{
    cudnnDataType_t cdt = dt == TFC_FLOAT32 ? CUDNN_DATA_FLOAT : CUDNN_DATA_DOUBLE;
    int rank = s->sd + 2;
    cudnnBackendDescriptor_t t[3], conv, op;
    TRY(tensor_make(b, UID_X, cdt, rank, s->x, align, &t[0]));
    TRY(tensor_make(b, UID_W, cdt, rank, s->w, align, &t[1]));
    TRY(tensor_make(b, UID_Y, cdt, rank, s->y, align, &t[2]));
    TRY(conv_desc_make(b, s, cdt, &conv));
    TRY(op_make(b, dir, dt, conv, t, &op));
    TRY(bag_make(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, graph));
    TRY(set(*graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
    TRY(set(*graph, ATTR_GRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
    return cudnnBackendFinalize(*graph);
}

/* Whether cfg's engine computes exactly in dtype dt: float32 on TF32 tensor cores, inputs
 * converted down, reduced-precision sums or atomics (run-to-run differences) are refused, so
 * results match the own kernels and the CPU within float rounding; notes that cannot be read
 * refuse it too. */
static int cfg_exact(cudnnBackendDescriptor_t cfg, int dt)
{
    cudnnBackendDescriptor_t eng;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng)) return 0;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t n = 0;
    int ok = cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
                     CUDNN_STATUS_SUCCESS && n == 1 &&
             cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                      CUDNN_TYPE_NUMERICAL_NOTE, CUDNN_NUMERICAL_NOTE_TYPE_COUNT,
                                      &n, notes) == CUDNN_STATUS_SUCCESS;
    for (int64_t i = 0; ok && i < n; i++) {
        if (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE)
            ok = dt != TFC_FLOAT32; /* float64 tensor cores compute in float64 */
        else if (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                 notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                 notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
            ok = 0;
    }
    /* runtime-compiled engines need NVRTC on the node and seconds per shape: passed over */
    cudnnBackendBehaviorNote_t behavior[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    if (ok && cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                                       CUDNN_TYPE_BEHAVIOR_NOTE, CUDNN_BEHAVIOR_NOTE_TYPE_COUNT,
                                       &n, behavior) != CUDNN_STATUS_SUCCESS)
        ok = 0;
    for (int64_t i = 0; ok && i < n; i++)
        if (behavior[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) ok = 0;
    cudnnBackendDestroyDescriptor(eng);
    return ok;
}

/* An execution plan for configuration cfg; 0 with its workspace when it finalizes. */
static int plan_try(cudnnHandle_t h, cudnnBackendDescriptor_t cfg, cudnnBackendDescriptor_t *plan,
                    int64_t *ws)
{
    int64_t n = 0;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan)) return -1;
    if (set(*plan, ATTR_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
        set(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &cfg) ||
        cudnnBackendFinalize(*plan) ||
        cudnnBackendGetAttribute(*plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                 CUDNN_TYPE_INT64, 1, &n, ws) ||
        n != 1 || *ws < 0 || *ws > MAX_WORKSPACE) {
        cudnnBackendDestroyDescriptor(*plan);
        return -1;
    }
    return 0;
}

/* The first exact configuration of heuristics mode `mode` that makes a plan: p->exec, with
 * the heuristics and configuration kept in p->bag. 0 when found. */
static int plan_from_mode(struct plan *p, cudnnHandle_t h, cudnnBackendDescriptor_t graph, int dt,
                          cudnnBackendHeurMode_t mode)
{
    cudnnBackendDescriptor_t heur, cfgs[MAX_CONFIGS];
    int64_t n = 0, made = 0;
    if (p->bag.n + 3 > BAG_MAX || bag_make(&p->bag, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur))
        return -1;
    if (set(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
            &graph) ||
        set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode) ||
        cudnnBackendFinalize(heur))
        return -1;
    for (; made < MAX_CONFIGS; made++)
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[made])) break;
    if (cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, made, &n, cfgs))
        n = 0;
    int64_t chosen = -1;
    for (int64_t i = 0; i < n && i < made && chosen < 0; i++)
        if (cfg_exact(cfgs[i], dt) && !plan_try(h, cfgs[i], &p->exec, &p->workspace)) chosen = i;
    for (int64_t i = 0; i < made; i++)
        if (i != chosen) cudnnBackendDestroyDescriptor(cfgs[i]);
    if (chosen < 0) return -1;
    p->bag.d[p->bag.n++] = cfgs[chosen];
    p->bag.d[p->bag.n++] = p->exec;
    return 0;
}

/* Builds slot p: the graph, then a plan from heuristics mode A or else the fallback list;
 * p->declined when cuDNN has none (or a descriptor fails: the own kernel is always right). */
static void plan_build(struct plan *p, cudnnHandle_t h, int kind, int dt, int64_t align,
                       const struct cd_shape *s)
{
    int dir = kind == TFC_K_CONV ? 0 : kind == TFC_K_CONV_BP_INPUT ? 1 : 2;
    cudnnBackendDescriptor_t graph;
    int found = graph_make(&p->bag, h, dir, dt, align, s, &graph) == CUDNN_STATUS_SUCCESS &&
                (!plan_from_mode(p, h, graph, dt, CUDNN_HEUR_MODE_A) ||
                 !plan_from_mode(p, h, graph, dt, CUDNN_HEUR_MODE_FALLBACK));
    if (!found) {
        bag_free(&p->bag);
        p->exec = NULL;
        p->declined = 1;
    }
}

static void plan_release(struct plan *p)
{
    bag_free(&p->bag);
    memset(p, 0, sizeof *p);
}

/* Drops the calling worker's plans and workspace (at shutdown, before its cuDNN handle). */
static void release_worker(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS || !workers[id]) return;
    struct worker *w = workers[id];
    cudaStreamSynchronize(starpu_cuda_get_local_stream());
    for (int i = 0; i < PLAN_SLOTS; i++) plan_release(&w->slot[i]);
    if (w->ws) cudaFree(w->ws);
    free(w);
    workers[id] = NULL;
}

static struct worker *worker_get(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS) return NULL;
    if (!workers[id] && !tfc_cuda_on_worker_shutdown(release_worker))
        workers[id] = (struct worker *)calloc(1, sizeof(struct worker));
    return workers[id];
}

/* The worker's slot for the task: a cached one, else the least recently used one rebuilt
 * (after its stream drains: kernels of the old plan may still be queued). */
static struct plan *plan_get(struct worker *w, cudnnHandle_t h, cudaStream_t stream, int kind,
                             int dt, int64_t align, const struct tfc_conv_geom *g,
                             const struct cd_shape *s)
{
    int64_t key[KEY_LEN];
    key_make(kind, dt, align, g, key);
    struct plan *lru = &w->slot[0];
    for (int i = 0; i < PLAN_SLOTS; i++) {
        struct plan *p = &w->slot[i];
        if (p->last_use && !memcmp(p->key, key, sizeof key)) {
            p->last_use = ++w->clock;
            return p;
        }
        if (p->last_use < lru->last_use) lru = p;
    }
    if (lru->exec) cudaStreamSynchronize(stream);
    plan_release(lru);
    memcpy(lru->key, key, sizeof key);
    lru->last_use = ++w->clock;
    plan_build(lru, h, kind, dt, align, s);
    return lru;
}

/* The worker's workspace of at least `bytes` in *ws (NULL for none); -1 when cudaMalloc
 * fails (the task then runs on the own kernel, which needs none). */
static int workspace_get(struct worker *w, cudaStream_t stream, int64_t bytes, void **ws)
{
    *ws = NULL;
    if (bytes <= 0) return 0;
    if ((size_t)bytes > w->ws_size) {
        if (w->ws) { /* queued plans may still use it */
            cudaStreamSynchronize(stream);
            cudaFree(w->ws);
        }
        w->ws = NULL, w->ws_size = 0;
        if (cudaMalloc(&w->ws, (size_t)bytes) != cudaSuccess) {
            cudaGetLastError(); /* not sticky: nothing to report, the own kernel runs */
            w->ws = NULL;
            return -1;
        }
        w->ws_size = (size_t)bytes;
    }
    *ws = w->ws;
    return 0;
}

static cudnnStatus_t plan_run(cudnnHandle_t h, const struct plan *p, void *ptrs[3], void *ws)
{
    static const int64_t uids[3] = {UID_X, UID_W, UID_Y};
    cudnnBackendDescriptor_t vp;
    TRY(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
    cudnnStatus_t st = set(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    if (!st) st = set(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    if (!st) st = set(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (!st) st = cudnnBackendFinalize(vp);
    if (!st) st = cudnnBackendExecute(h, p->exec, vp);
    cudnnBackendDestroyDescriptor(vp);
    return st;
}

/* The largest power of two up to 16 that divides every operand's address. */
static int64_t alignment_of(void *const ptrs[3])
{
    uintptr_t bits = (uintptr_t)ptrs[0] | (uintptr_t)ptrs[1] | (uintptr_t)ptrs[2] | 16;
    return (int64_t)(bits & (~bits + 1));
}

static enum tfc_conv_cudnn_result declined(void)
{
    __atomic_add_fetch(&n_declined, 1, __ATOMIC_RELAXED);
    return TFC_CONV_CUDNN_DECLINED;
}

static void fail(const struct tfc_kargs *a, const struct tfc_conv_geom *g, cudnnStatus_t st)
{
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    tfc_kernel_fail(a, TFC_ERR_RUNTIME, "cuDNN failed to run the %d-D %s (batch %lld, %lld -> "
                    "%lld channels, groups %lld, %s): %s%s%s", g->nd,
                    a->kind == TFC_K_CONV ? "convolution"
                    : a->kind == TFC_K_CONV_BP_INPUT ? "convolution input gradient"
                    : "convolution filter gradient", (long long)g->batch, (long long)g->in_ch,
                    (long long)g->out_ch, (long long)g->groups,
                    tfc_kout_desc(a, 0)->dtype == TFC_FLOAT32 ? "float32" : "float64",
                    cudnnGetErrorString(st), detail[0] ? ": " : "", detail);
}

enum tfc_conv_cudnn_result tfc_conv_cudnn(void *buffers[], const struct tfc_kargs *a)
{
    const struct tfc_kdesc *o = tfc_kout_desc(a, 0);
    int dt = o->dtype;
    if ((a->kind != TFC_K_CONV && a->kind != TFC_K_CONV_BP_INPUT &&
         a->kind != TFC_K_CONV_BP_FILTER) ||
        (dt != TFC_FLOAT32 && dt != TFC_FLOAT64) || a->d[0].dtype != dt || a->d[1].dtype != dt)
        return declined();
    void *in0 = tfc_kin(buffers, a, 0), *in1 = tfc_kin(buffers, a, 1);
    void *out = tfc_kout(buffers, a, 0);
    struct tfc_conv_geom g;
    struct cd_shape s;
    char msg[200];
    if (!in0 || !in1 || !out || tfc_conv_geom_of(a, &g, msg, sizeof msg) || !y_matches(a, &g) ||
        shape_make(&g, &s))
        return declined(); /* empty operands and bad geometry: the own kernel's business */
    cudnnHandle_t h = tfc_cuda_cudnn_handle();
    struct worker *w = worker_get();
    if (!h || !w) return declined();
    /* by role: x-shaped, w-shaped, y-shaped */
    void *ptrs[3] = {a->kind == TFC_K_CONV_BP_INPUT ? out : in0,
                     a->kind == TFC_K_CONV_BP_FILTER ? out : in1,
                     a->kind == TFC_K_CONV ? out : a->kind == TFC_K_CONV_BP_INPUT ? in0 : in1};
    cudaStream_t stream = starpu_cuda_get_local_stream();
    struct plan *p = plan_get(w, h, stream, a->kind, dt, alignment_of(ptrs), &g, &s);
    void *ws;
    if (p->declined || workspace_get(w, stream, p->workspace, &ws)) return declined();
    cudnnStatus_t st = plan_run(h, p, ptrs, ws);
    if (st != CUDNN_STATUS_SUCCESS) fail(a, &g, st);
    __atomic_add_fetch(&n_ran, 1, __ATOMIC_RELAXED);
    return TFC_CONV_CUDNN_RAN;
}

void tfc_conv_cudnn_counts(long long *ran, long long *declined_)
{
    if (ran) *ran = (long long)__atomic_load_n(&n_ran, __ATOMIC_RELAXED);
    if (declined_) *declined_ = (long long)__atomic_load_n(&n_declined, __ATOMIC_RELAXED);
}
