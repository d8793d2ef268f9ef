/* matmul_dnnl.c: float32 products of the CPU matmul codelet through oneDNN's matmul primitive
 * on the plain row-major buffers (transposes and tile strides as memory strides). Each CPU
 * worker thread has its own engine, stream and small LRU cache of primitives keyed by shape,
 * transposes and strides, released when the thread ends (StarPU joins its workers at
 * shutdown): no primitive is shared between threads. oneDNN runs on the calling thread alone
 * (Debian's build threads with OpenMP), as in codelets/conv_dnnl.c. */
#ifdef HAVE_CONFIG_H /* configure's; scripts/fuzz.sh builds without it: then no oneDNN */
#include "config.h"
#endif
#include "matmul_dnnl.h"

/* bench/matmul_small, one thread, medians (bench/RESULTS.md, "Small GEMMs in the matmul
 * codelet"): oneDNN beats cblas_sgemm by 1.06 to 2.3 on every product of the MLPs and the
 * CNN's dense layers with an output at least 128 wide, in all four transposes, the smallest
 * such winner being [128,10]x[10,128] (m n k = 163840); it loses on 10-wide outputs (0.61 to
 * 0.95 of sgemm in 4 of 5 shapes: its per-call cost over a few microseconds of work). */
#define DNNL_MIN_N 16
#define DNNL_MIN_MNK 163840
/* Measured on a Zen 4 (AVX-512). On a Zen 3 (AVX2, no AVX-512) oneDNN 2.6 lost on the CNN's
 * dense layer [128,3136]x[3136,1024] (0.74 of sgemm's rate; the imported CNN at batch 128 took
 * 38-42 ms through it against 27-34 through OpenBLAS) and won or tied up to k = 1024 (0.92 to
 * 1.77: bench/RESULTS.md). So without AVX-512, a longer inner dimension stays with OpenBLAS. */
#define DNNL_AVX2_MAX_K 1024

#ifndef TFC_HAVE_DNNL

int tfc_matmul_dnnl_wins(int64_t m, int64_t n, int64_t k)
{
    (void)m, (void)n, (void)k;
    return 0;
}

int tfc_matmul_dnnl_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc)
{
    (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)A, (void)lda, (void)B, (void)ldb;
    (void)C, (void)ldc;
    return 0;
}

int tfc_matmul_dnnl_present(void)
{
    return 0;
}

long tfc_matmul_dnnl_runs(void)
{
    return 0;
}

#else

#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>
#include "dnnl_thread.h"
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif

/* A training step of the MLP has 8 products, the CNN's dense layers 6; tiles add a few. */
#define CACHE_SLOTS 32
#define KEY_LEN 8

struct prim {
    int64_t key[KEY_LEN];   /* ta, tb, m, n, k, lda, ldb, ldc */
    unsigned long last_use; /* LRU clock; 0: empty slot */
    int declined;           /* oneDNN refused the shape: OpenBLAS runs it */
    dnnl_primitive_t mm;
    dnnl_memory_t mem[3]; /* A, B, C (data handles set per call) */
};

/* This codelet's cache on a thread (dnnl_thread.h); engine and stream are the thread's. */
struct worker {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    unsigned long clock;
    struct prim cache[CACHE_SLOTS];
};

static long runs; /* products oneDNN ran (atomic) */

int tfc_matmul_dnnl_wins(int64_t m, int64_t n, int64_t k)
{
    return n >= DNNL_MIN_N && m * n * k >= DNNL_MIN_MNK &&
           (k <= DNNL_AVX2_MAX_K || __builtin_cpu_supports("avx512f"));
}

int tfc_matmul_dnnl_present(void)
{
    return 1;
}

long tfc_matmul_dnnl_runs(void)
{
    return __atomic_load_n(&runs, __ATOMIC_RELAXED);
}

static void prim_release(struct prim *p)
{
    for (int i = 0; i < 3; i++)
        if (p->mem[i]) dnnl_memory_destroy(p->mem[i]);
    if (p->mm) dnnl_primitive_destroy(p->mm);
    memset(p, 0, sizeof *p);
}

/* Frees the cache at thread exit (dnnl_thread.c then frees the stream and the engine). */
static void worker_free(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < CACHE_SLOTS; i++) prim_release(&w->cache[i]);
    free(w);
}

/* The calling thread's state, created on its first product; NULL when it cannot be. */
static struct worker *worker_get(void)
{
    struct tfc_dnnl_thread *t;
    struct worker *w = tfc_dnnl_thread_cache(TFC_DNNL_MATMUL, sizeof *w, worker_free, &t);
    if (w && !w->engine) w->engine = t->engine, w->stream = t->stream;
    return w;
}

/* A [rows, cols] operand with row stride ld, stored transposed ([cols, rows]) when t. */
static dnnl_status_t md_of(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, int64_t ld, int t)
{
    dnnl_dims_t dims = {rows, cols}, strides = {t ? 1 : ld, t ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

/* Builds p's primitive for its key; marks it declined when oneDNN refuses. */
static void prim_build(struct prim *p, dnnl_engine_t engine)
{
    const int64_t *q = p->key; /* ta, tb, m, n, k, lda, ldb, ldc */
    dnnl_memory_desc_t md[3];
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t pd = NULL;
    int ok = md_of(&md[0], q[2], q[4], q[5], (int)q[0]) == dnnl_success &&
             md_of(&md[1], q[4], q[3], q[6], (int)q[1]) == dnnl_success &&
             md_of(&md[2], q[2], q[3], q[7], 0) == dnnl_success &&
             dnnl_matmul_desc_init(&desc, &md[0], &md[1], NULL, &md[2]) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &desc, NULL, engine, NULL) == dnnl_success &&
             dnnl_primitive_create(&p->mm, pd) == dnnl_success;
    if (pd) dnnl_primitive_desc_destroy(pd);
    for (int i = 0; ok && i < 3; i++)
        ok = dnnl_memory_create(&p->mem[i], &md[i], engine, DNNL_MEMORY_NONE) == dnnl_success;
    if (ok) return;
    unsigned long last_use = p->last_use;
    int64_t key[KEY_LEN];
    memcpy(key, p->key, sizeof key);
    prim_release(p);
    memcpy(p->key, key, sizeof key);
    p->last_use = last_use, p->declined = 1;
}

/* The worker's slot for the key: a cached one, else the least recently used one rebuilt. */
static struct prim *prim_get(struct worker *w, const int64_t key[KEY_LEN])
{
    struct prim *lru = &w->cache[0];
    for (int i = 0; i < CACHE_SLOTS; i++) {
        struct prim *p = &w->cache[i];
        if (p->last_use && !memcmp(p->key, key, sizeof p->key)) {
            p->last_use = ++w->clock;
            return p;
        }
        if (p->last_use < lru->last_use) lru = p;
    }
    prim_release(lru);
    memcpy(lru->key, key, sizeof lru->key);
    lru->last_use = ++w->clock;
    prim_build(lru, w->engine);
    return lru;
}

static int prim_exec(struct worker *w, struct prim *p, const float *A, const float *B, float *C)
{
    void *data[3] = {(void *)A, (void *)B, C};
    for (int i = 0; i < 3; i++)
        if (dnnl_memory_set_data_handle(p->mem[i], data[i]) != dnnl_success) return 0;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, p->mem[0]}, {DNNL_ARG_WEIGHTS, p->mem[1]},
                               {DNNL_ARG_DST, p->mem[2]}};
    return dnnl_primitive_execute(p->mm, w->stream, 3, args) == dnnl_success &&
           dnnl_stream_wait(w->stream) == dnnl_success;
}

int tfc_matmul_dnnl_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                          int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc)
{
    if (m <= 0 || n <= 0 || k <= 0) return 0; /* empty: the caller's zeroing or BLAS */
    struct worker *w = worker_get();
    if (!w) return 0;
    const int64_t key[KEY_LEN] = {ta != 0, tb != 0, m, n, k, lda, ldb, ldc};
    struct prim *p = prim_get(w, key);
    if (p->declined) return 0;
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    /* One thread: StarPU's workers are the parallelism (see codelets/conv_dnnl.c). */
    int omp_threads = omp_get_max_threads();
    if (omp_threads != 1) omp_set_num_threads(1);
#endif
    int ran = prim_exec(w, p, A, B, C);
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    if (omp_threads != 1) omp_set_num_threads(omp_threads);
#endif
    if (ran) __atomic_add_fetch(&runs, 1, __ATOMIC_RELAXED);
    return ran;
}

#endif
