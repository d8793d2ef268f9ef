/* cuda_libs.cu: per-CUDA-worker library state: cuBLAS (StarPU's handles), one cuDNN handle per
 * worker bound to the worker's stream, and the device/pinned slots the kernels use to report
 * range errors (see cuda_common.h). State is created on each worker's own thread (so on its
 * device) by tfc_cuda_libs_init, or lazily by the first kernel that needs it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "cuda_common.h"

struct tfc_cu_worker {
    cudnnHandle_t cudnn;
    struct tfc_cu_err *dslot; /* device */
    struct tfc_cu_err *hslot; /* pinned host */
};

static struct tfc_cu_worker tfc_cu_workers[STARPU_NMAXWORKERS];

static struct tfc_cu_worker *worker_state(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS)
        return NULL;
    return &tfc_cu_workers[id];
}

static void ensure_cudnn(struct tfc_cu_worker *w)
{
    if (!w->cudnn) {
        cudnnHandle_t h;
        if (cudnnCreate(&h) == CUDNN_STATUS_SUCCESS)
            w->cudnn = h;
    }
    if (w->cudnn)
        cudnnSetStream(w->cudnn, starpu_cuda_get_local_stream());
}

static void ensure_slots(struct tfc_cu_worker *w)
{
    if (!w->dslot) {
        void *p = NULL;
        if (cudaMalloc(&p, sizeof(struct tfc_cu_err)) == cudaSuccess)
            w->dslot = (struct tfc_cu_err *)p;
        else
            cudaGetLastError();
    }
    if (!w->hslot) {
        void *p = NULL;
        if (cudaMallocHost(&p, sizeof(struct tfc_cu_err)) == cudaSuccess)
            w->hslot = (struct tfc_cu_err *)p;
        else
            cudaGetLastError();
    }
}

static void init_worker(void *arg)
{
    (void)arg;
    struct tfc_cu_worker *w = worker_state();
    if (!w)
        return;
    ensure_cudnn(w);
    ensure_slots(w);
}

/* Other CUDA files' per-worker state (conv_cudnn.cu's plans and workspace), released on each
 * worker at shutdown through hooks they register, so this file does not call them. */
#define MAX_RELEASE_HOOKS 4
static void (*release_hooks[MAX_RELEASE_HOOKS])(void);
static pthread_mutex_t release_hooks_lock = PTHREAD_MUTEX_INITIALIZER;

int tfc_cuda_on_worker_shutdown(void (*release)(void))
{
    int i = 0;
    pthread_mutex_lock(&release_hooks_lock);
    while (i < MAX_RELEASE_HOOKS && release_hooks[i] && release_hooks[i] != release)
        i++;
    if (i < MAX_RELEASE_HOOKS)
        release_hooks[i] = release;
    pthread_mutex_unlock(&release_hooks_lock);
    return i < MAX_RELEASE_HOOKS ? 0 : -1;
}

static void run_release_hooks(void)
{
    void (*hooks[MAX_RELEASE_HOOKS])(void);
    pthread_mutex_lock(&release_hooks_lock);
    memcpy(hooks, release_hooks, sizeof hooks);
    pthread_mutex_unlock(&release_hooks_lock);
    for (int i = 0; i < MAX_RELEASE_HOOKS && hooks[i]; i++)
        hooks[i]();
}

static void shutdown_worker(void *arg)
{
    (void)arg;
    struct tfc_cu_worker *w = worker_state();
    if (!w)
        return;
    run_release_hooks(); /* their state was made with this worker's handle */
    if (w->cudnn)
        cudnnDestroy(w->cudnn);
    if (w->dslot)
        cudaFree(w->dslot);
    if (w->hslot)
        cudaFreeHost(w->hslot);
    w->cudnn = NULL;
    w->dslot = NULL;
    w->hslot = NULL;
}

extern "C" struct tfc_kerr_dev *tfc_cuda_kerr_dev_alloc(void)
{
    if (!starpu_cuda_worker_get_count())
        return NULL;
    void *p = NULL;
    /* portable and mapped: with unified addressing the host pointer is valid in kernels on
     * every device */
    if (cudaHostAlloc(&p, sizeof(struct tfc_kerr_dev), cudaHostAllocMapped |
                                                        cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL; /* kernels fall back to the host-function path */
    }
    memset(p, 0, sizeof(struct tfc_kerr_dev));
    return (struct tfc_kerr_dev *)p;
}

extern "C" void tfc_cuda_kerr_dev_free(struct tfc_kerr_dev *d)
{
    if (d)
        cudaFreeHost(d);
}

extern "C" void tfc_cuda_libs_init(void)
{
    starpu_cublas_init();
    starpu_execute_on_each_worker(init_worker, NULL, STARPU_CUDA);
}

extern "C" void tfc_cuda_libs_shutdown(void)
{
    starpu_execute_on_each_worker(shutdown_worker, NULL, STARPU_CUDA);
    starpu_cublas_shutdown();
}

cudnnHandle_t tfc_cuda_cudnn_handle(void)
{
    struct tfc_cu_worker *w = worker_state();
    if (!w)
        return NULL;
    ensure_cudnn(w);
    return w->cudnn;
}

int tfc_cu_check(const struct tfc_kargs *a, cudaError_t st, const char *what)
{
    if (st == cudaSuccess)
        return 0;
    cudaGetLastError(); /* clear a non-sticky error so it is not reported twice */
    tfc_kernel_fail(a, TFC_ERR_RUNTIME, "CUDA %s failed: %s", what, cudaGetErrorString(st));
    return -1;
}

int tfc_cu_check_launch(const struct tfc_kargs *a, const char *what)
{
    cudaError_t st = cudaGetLastError();
    if (st == cudaSuccess)
        return 0;
    tfc_kernel_fail(a, TFC_ERR_RUNTIME, "CUDA kernel %s failed: %s", what,
                    cudaGetErrorString(st));
    return -1;
}

/* ---- device-side errors --------------------------------------------------------------- */

struct err_rec {
    const struct tfc_kargs *a;
    const struct tfc_cu_err *h;
    int kind;
    int64_t bound;
};

static __global__ void err_fixup(struct tfc_cu_err *e, const void *idx, int dt)
{
    if (e->first != ~0ULL && idx)
        e->value = tfc_cu_ld_i64(idx, dt, (int64_t)e->first);
}

/* Writes a raised error into the run's record in mapped host memory (fields, then the flag). */
static __global__ void err_record(const struct tfc_cu_err *e, const void *idx, int dt,
                                  struct tfc_kerr_dev *rec, int kind, int node, int64_t bound)
{
    if (e->first == ~0ULL || rec->set)
        return;
    rec->kind = kind;
    rec->node = node;
    rec->pos = (int64_t)e->first;
    rec->value = idx ? tfc_cu_ld_i64(idx, dt, (int64_t)e->first) : 0;
    rec->bound = bound;
    __threadfence_system();
    rec->set = 1;
}

/* Runs on a CUDA-owned host thread once the stream reaches it; no CUDA calls here. */
static void CUDART_CB err_callback(void *p)
{
    struct err_rec *r = (struct err_rec *)p;
    unsigned long long first = r->h->first;
    if (first != ~0ULL) {
        char msg[200];
        tfc_kerr_format(r->kind, (long long)first, r->h->value, (long long)r->bound, msg,
                        sizeof msg);
        tfc_kernel_fail(r->a, TFC_ERR_OUT_OF_RANGE, "%s", msg);
    }
    free(r);
}

struct tfc_cu_err *tfc_cu_err_begin(const struct tfc_kargs *a, cudaStream_t s)
{
    struct tfc_cu_worker *w = worker_state();
    if (!w)
        return NULL;
    ensure_slots(w);
    if (!w->dslot || !w->hslot) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory for a CUDA error slot");
        return NULL;
    }
    if (tfc_cu_check(a, cudaMemsetAsync(w->dslot, 0xFF, sizeof(struct tfc_cu_err), s),
                     "error-slot reset"))
        return NULL;
    return w->dslot;
}

void tfc_cu_err_end(const struct tfc_kargs *a, cudaStream_t s, struct tfc_cu_err *e, int kind,
                    int64_t bound, const void *idx, int idx_dtype)
{
    if (e && a->err && a->err->dev) { /* the run's mapped record: no host round trip */
        err_record<<<1, 1, 0, s>>>(e, idx, idx_dtype, a->err->dev, kind, a->node, bound);
        tfc_cu_check_launch(a, "err_record");
        return;
    }
    struct tfc_cu_worker *w = worker_state();
    if (!e || !w || !w->hslot)
        return;
    if (idx) {
        err_fixup<<<1, 1, 0, s>>>(e, idx, idx_dtype);
        if (tfc_cu_check_launch(a, "err_fixup"))
            return;
    }
    if (tfc_cu_check(a,
                     cudaMemcpyAsync(w->hslot, e, sizeof(struct tfc_cu_err),
                                     cudaMemcpyDeviceToHost, s),
                     "error-slot copy"))
        return;
    struct err_rec *r = (struct err_rec *)malloc(sizeof *r);
    if (!r) {
        tfc_kernel_fail(a, TFC_ERR_OUT_OF_MEMORY, "no memory to check a CUDA kernel's errors");
        return;
    }
    r->a = a;
    r->h = w->hslot;
    r->kind = kind;
    r->bound = bound;
    if (tfc_cu_check(a, cudaLaunchHostFunc(s, err_callback, r), "cudaLaunchHostFunc"))
        free(r);
}
