/* runtime.c: the StarPU lifecycle. StarPU reads its own environment variables (STARPU_SCHED,
 * STARPU_NCPU, ...), which src/env.c checks first against what this StarPU allows; we override
 * none of them, except STARPU_HOME when its home cannot be written (src/starpu_home.c).
 *
 * What the library builds for one StarPU (OpenCL programs, CUDA library handles, the profiling
 * totals, a private home) lives as long as some context holds StarPU: once the last one lets
 * it go, StarPU may stop and start again with other workers and devices, so nothing of it is
 * kept in the process beyond that. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <starpu.h>
#include "dist.h"
#include "dist_bind.h"
#include "sched.h"
#include "session_priv.h"
#include "../codelets/kernel.h"
#include "../codelets/opencl_common.h"
#include "../src/env.h"
#include "../src/starpu_home.h"

static struct {
    pthread_mutex_t lock;
    int n_ctx;                    /* contexts holding StarPU */
    int started;                  /* the first of them started it (else the application did) */
    struct tfc_starpu_home *home; /* private home made for this StarPU, or NULL */
    int dist_rank, dist_size;     /* started through StarPU-MPI: this rank and the count; else 0 */
} life = {PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, 0, 0};

void tfc_runtime_facts(struct tfc_starpu_facts *f)
{
    memset(f, 0, sizeof *f);
    f->max_cpus = STARPU_MAXCPUS;
    f->max_cuda = STARPU_MAXCUDADEVS;
    f->max_opencl = STARPU_MAXOPENCLDEVS;
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    int n = 0;
    for (; p && *p && n < (int)(sizeof f->policies / sizeof *f->policies) - 1; p++)
        if ((*p)->policy_name) f->policies[n++] = (*p)->policy_name;
    f->policies[n] = NULL;
    f->opencl_devices = tfc_opencl_device_count;
}

/* Starts StarPU, or through StarPU-MPI when dist is given (then *dist gets rank and size). */
static tfc_status runtime_start(int *joined, int dist[2], tfc_runtime_prepare_fn prepare,
                                char *msg)
{
    struct tfc_starpu_home *home = NULL;
    pthread_mutex_lock(&life.lock); /* one start at a time: STARPU_HOME is set for it */
    *joined = starpu_is_initialized();
    if (dist && *joined && !life.dist_size) {
        pthread_mutex_unlock(&life.lock);
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "distribution TFC_DIST_MPI: StarPU runs "
                        "already without MPI (a distributed context must be the one starting it)");
    }
    if (!*joined && prepare) {
        tfc_status st = prepare(&home, msg);
        if (st) {
            pthread_mutex_unlock(&life.lock);
            return st;
        }
    }
    if (dist && !*joined) {
        tfc_status st = tfc_dist_start(&dist[0], &dist[1], msg);
        if (st) {
            tfc_dist_bind_forget();
            pthread_mutex_unlock(&life.lock);
            tfc_starpu_home_release(home);
            return st;
        }
        life.dist_rank = dist[0];
        life.dist_size = dist[1];
        *joined = 0;
    } else {
        int ret = starpu_init(NULL); /* (reference-counted when StarPU runs) */
        if (ret) {
            pthread_mutex_unlock(&life.lock);
            tfc_starpu_home_release(home); /* StarPU did not start: nothing uses it */
            if (ret == -ENODEV)
                return tfc_fail(msg, TFC_ERR_NO_DEVICE, "StarPU found no worker (check "
                                "STARPU_NCPU, STARPU_NCUDA, STARPU_NOPENCL)");
            return tfc_fail(msg, TFC_ERR_RUNTIME, "starpu_init failed: %s", strerror(-ret));
        }
        if (dist) dist[0] = life.dist_rank, dist[1] = life.dist_size;
    }
    if (life.n_ctx++ == 0) {
        life.started = !*joined;
        life.home = home;
#ifdef STARPU_USE_CUDA
        if (life.started) tfc_cuda_libs_init(); /* a joined runtime keeps what its owner set up */
#endif
    } else {
        tfc_starpu_home_release(home); /* (NULL: StarPU was running, so none was made) */
    }
    pthread_mutex_unlock(&life.lock);
    return TFC_OK;
}

tfc_status tfc_runtime_start(int *joined, tfc_runtime_prepare_fn prepare, char *msg)
{
    return runtime_start(joined, NULL, prepare, msg);
}

tfc_status tfc_runtime_start_dist(int *rank, int *size, tfc_runtime_prepare_fn prepare, char *msg)
{
    int joined = 0, dist[2] = {0, 1};
    tfc_status st = runtime_start(&joined, dist, prepare, msg);
    *rank = dist[0];
    *size = dist[1];
    return st;
}

/* StarPU 1.3.10 internals, looked up weakly: absent from another StarPU, the drain below is
 * skipped. Workers never sleep while their memory node holds requests, but a driver's exit
 * handles only the transfers already in flight: one still queued when starpu_shutdown stops
 * the workers trips an assertion in _starpu_data_request_prio_list_deinit (seen under dmda
 * with PoCL's OpenCL node, about one exit in five under load). */
extern int _starpu_check_that_no_data_request_exists(unsigned node) __attribute__((weak));

static int data_requests_queued(void)
{
    unsigned n = starpu_memory_nodes_get_count();
    int queued = 0;
    for (unsigned node = 0; node < n; node++)
        queued |= !_starpu_check_that_no_data_request_exists(node);
    return queued;
}

static void do_nothing(void *buffers[], void *arg)
{
    (void)buffers;
    (void)arg;
}

static struct starpu_codelet barrier_cl = {
    .cpu_funcs = {do_nothing},
    .cuda_funcs = {do_nothing},
    .opencl_funcs = {do_nothing},
    .nbuffers = 0,
    .name = "tfc_worker_barrier",
};

/* Runs an empty task on every worker and waits for them: a worker runs a task only between
 * two passes over its memory node's requests, so none is in the middle of one afterwards. */
static void worker_barrier(void)
{
    unsigned n = starpu_worker_get_count();
    for (unsigned w = 0; w < n; w++) {
        struct starpu_task *task = starpu_task_create();
        if (!task) break;
        task->cl = &barrier_cl;
        task->execute_on_a_specific_worker = 1;
        task->workerid = w;
        if (starpu_task_submit(task)) {
            task->destroy = 0;
            starpu_task_destroy(task);
        }
    }
    starpu_task_wait_for_all();
}

/* Waits (up to about 10 s) until no memory node has a data request, queued or in flight.
 * A worker takes its node's whole queue off the list before it handles the requests: between
 * the two, the queue looks empty though a transfer (and the unregistration of a handle given
 * to starpu_data_unregister_submit, which waits for it) is still to come. The likely cause of
 * an abort seen once in CI (PoCL's node under ASan; not reproduced): the handle's device copy
 * went to that device's cache after its driver had emptied it, and starpu_shutdown aborted in
 * _starpu_deinit_mem_chunk_lists. So the
 * nodes must be seen empty three times in a row, each look followed by a barrier of the
 * workers, which ends any pass over a queue taken before it (a request put back by that pass
 * is seen by the next look). */
static void drain_data_requests(void)
{
    if (!_starpu_check_that_no_data_request_exists) return;
    int quiet = 0;
    for (int tries = 0; tries < 10000 && quiet < 3; tries++) {
        if (data_requests_queued()) {
            quiet = 0;
            starpu_wake_all_blocked_workers();
            usleep(1000);
            continue;
        }
        worker_barrier();
        quiet++;
    }
}

/* The last context lets StarPU go: drop what was built for it, whoever started it. */
static void forget_lifetime(void)
{
#ifdef STARPU_USE_CUDA
    if (life.started) tfc_cuda_libs_shutdown();
#endif
#ifdef STARPU_USE_OPENCL
    tfc_opencl_shutdown(); /* programs belong to this StarPU's OpenCL contexts */
#endif
    tfc_snap_reset();
}

void tfc_runtime_stop(void)
{
    pthread_mutex_lock(&life.lock);
    struct tfc_starpu_home *home = NULL;
    if (--life.n_ctx == 0) {
        /* StarPU 1.3.10's shutdown waits only for no *ready* task and leaves queued data
         * requests behind (see drain_data_requests): when we started StarPU, let everything
         * we submitted finish first. */
        if (life.started) {
            starpu_task_wait_for_all();
            drain_data_requests();
        }
        forget_lifetime();
        home = life.home;
        life.home = NULL;
    }
    if (life.n_ctx == 0 && life.dist_size) {
        tfc_dist_stop(); /* StarPU-MPI's shutdown, which ends with starpu_shutdown */
        tfc_dist_bind_forget();
        life.dist_rank = life.dist_size = 0;
    } else {
        starpu_shutdown(); /* drops our reference; the application's keeps StarPU up */
    }
    if (!starpu_is_initialized())
        tfc_starpu_home_release(home);
    else
        tfc_starpu_home_abandon(home);
    pthread_mutex_unlock(&life.lock);
}

void tfc_runtime_info(tfc_ctx_info *info)
{
    memset(info, 0, sizeof *info);
    info->n_cpu_workers = (int)starpu_cpu_worker_get_count();
    info->n_cuda_workers = (int)starpu_cuda_worker_get_count();
    info->n_opencl_workers = (int)starpu_opencl_worker_get_count();
    info->n_memory_nodes = (int)starpu_memory_nodes_get_count();
    info->min_priority = starpu_sched_get_min_priority();
    info->max_priority = starpu_sched_get_max_priority();
    struct starpu_sched_policy *p = starpu_sched_ctx_get_sched_policy(0);
    snprintf(info->sched_policy, sizeof info->sched_policy, "%s",
             p && p->policy_name ? p->policy_name : "unknown");
}

void tfc_runtime_describe(char *out, size_t size)
{
    tfc_ctx_info info;
    tfc_runtime_info(&info);
    size_t pos = (size_t)snprintf(out, size, "scheduler %s, priorities [%d, %d], %u workers, %d memory nodes\n",
                                  info.sched_policy, info.min_priority, info.max_priority,
                                  starpu_worker_get_count(), info.n_memory_nodes);
    pthread_mutex_lock(&life.lock);
    if (life.home && pos < size)
        pos += (size_t)snprintf(out + pos, size - pos, "  StarPU home: %s (private: the usual "
                                "one cannot be written)\n", tfc_starpu_home_path(life.home));
    pthread_mutex_unlock(&life.lock);
    for (unsigned w = 0; w < starpu_worker_get_count() && pos < size; w++) {
        char name[64];
        starpu_worker_get_name((int)w, name, sizeof name);
        enum starpu_worker_archtype t = starpu_worker_get_type((int)w);
        const char *kind = t == STARPU_CPU_WORKER ? "cpu" : t == STARPU_CUDA_WORKER ? "cuda"
                         : t == STARPU_OPENCL_WORKER ? "opencl" : "other";
        pos += (size_t)snprintf(out + pos, size - pos, "  worker %u: %s (%s), memory node %u\n", w,
                                name, kind, starpu_worker_get_memory_node(w));
    }
}
