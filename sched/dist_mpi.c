/* dist_mpi.c: StarPU-MPI's start and stop (built only with TFC_HAVE_MPI). MPI is initialized
 * here, not by StarPU-MPI, because StarPU-MPI finalizes an MPI it initialized at each
 * starpu_mpi_shutdown and MPI cannot start twice in a process: ours is finalized at exit. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <starpu_mpi.h>
#include "dist.h"
#include "dist_bind.h"
#include "../src/env.h"

/* ---- The watchdog (TFC_DIST_TIMEOUT) ------------------------------------------------------
 * A rank that stops (SIGSTOP, a deadlock, a lost message) leaves every other rank waiting in
 * StarPU-MPI forever; mpirun ends the job only when a process exits. So while a rank waits on
 * another, a thread checks a deadline; past it, the rank says whom it waited for and at which
 * step, and exits non-zero: mpirun then ends every rank. */
static struct {
    pthread_mutex_t mu;
    pthread_t thread;
    int running, stop, me;
    long long timeout_s, step;
    double deadline; /* 0: not waiting */
    int peer;        /* the rank waited for */
    const char *what;
} dog = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *watchdog_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&dog.mu);
    while (!dog.stop) {
        if (dog.deadline > 0 && mono_s() > dog.deadline) {
            fprintf(stderr, "tfc: rank %d: step %lld: waited %lld s (TFC_DIST_TIMEOUT) for rank "
                    "%d (%s); ending the job\n", dog.me, dog.step, dog.timeout_s, dog.peer,
                    dog.what);
            fflush(stderr);
            _exit(1); /* not exit(): MPI_Finalize at exit would wait for the hung rank too */
        }
        pthread_mutex_unlock(&dog.mu);
        usleep(50000);
        pthread_mutex_lock(&dog.mu);
    }
    pthread_mutex_unlock(&dog.mu);
    return NULL;
}

static void watch(int peer, const char *what)
{
    pthread_mutex_lock(&dog.mu);
    dog.peer = peer;
    dog.what = what;
    dog.deadline = dog.running ? mono_s() + (double)dog.timeout_s : 0;
    pthread_mutex_unlock(&dog.mu);
}

static void unwatch(void)
{
    pthread_mutex_lock(&dog.mu);
    dog.deadline = 0;
    pthread_mutex_unlock(&dog.mu);
}

void tfc_dist_set_step(long long step)
{
    pthread_mutex_lock(&dog.mu);
    dog.step = step;
    pthread_mutex_unlock(&dog.mu);
}

static tfc_status start_watchdog(int me, char *msg)
{
    long long t = 0;
    tfc_status st = tfc_env_int("TFC_DIST_TIMEOUT", 0, &t, msg);
    if (st || t == 0) return st;
    dog.me = me, dog.timeout_s = t, dog.stop = 0, dog.deadline = 0;
    if (pthread_create(&dog.thread, NULL, watchdog_main, NULL))
        return tfc_fail(msg, TFC_ERR_RUNTIME, "TFC_DIST_TIMEOUT: cannot start the watchdog thread");
    dog.running = 1;
    return TFC_OK;
}

static void stop_watchdog(void)
{
    if (!dog.running) return;
    pthread_mutex_lock(&dog.mu);
    dog.stop = 1;
    pthread_mutex_unlock(&dog.mu);
    pthread_join(dog.thread, NULL);
    dog.running = 0;
}

/* StarPU-MPI runs (a distributed context is alive). */
static int live;

/* At exit. A process that exits with its distributed context alive (a step failed and the
 * program returned) must not finalize: MPI_Finalize waits for the other ranks, which wait for
 * this one's messages, and the job hangs. Left unfinalized, mpirun ends the job. */
static void finalize_mpi(void)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !live) MPI_Finalize();
}

/* MPI with the thread level StarPU-MPI needs (its progress thread alone calls MPI). */
static tfc_status ensure_mpi(char *msg)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: MPI was finalized in "
                        "this process already (MPI cannot start twice)");
    if (initialized) return TFC_OK; /* the application's: it finalizes it */
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution TFC_DIST_MPI: this MPI gives thread "
                        "level %d, StarPU-MPI needs MPI_THREAD_SERIALIZED", provided);
    }
    atexit(finalize_mpi);
    return TFC_OK;
}

tfc_status tfc_dist_mpi_start(int *rank, int *size, char *msg)
{
    tfc_status st = ensure_mpi(msg);
    if (!st) st = tfc_dist_bind_start(msg); /* this rank's cores, for starpu_init */
    if (st) return st;
    int ret = starpu_mpi_init_conf(NULL, NULL, 0, MPI_COMM_WORLD, NULL);
    tfc_dist_bind_started();
    if (ret == -ENODEV)
        return tfc_fail(msg, TFC_ERR_NO_DEVICE, "StarPU-MPI found no worker (check STARPU_NCPU, "
                        "STARPU_NCUDA, STARPU_NOPENCL)");
    if (ret)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "starpu_mpi_init_conf failed: %s", strerror(-ret));
    starpu_mpi_comm_rank(MPI_COMM_WORLD, rank);
    starpu_mpi_comm_size(MPI_COMM_WORLD, size);
    st = start_watchdog(*rank, msg);
    if (st) starpu_mpi_shutdown();
    live = !st;
    return st;
}

void tfc_dist_mpi_stop(void)
{
    tfc_dist_backup_drain();
    stop_watchdog();
    starpu_mpi_shutdown();
    live = 0;
}

/* ---- Moving host buffers between ranks through StarPU-MPI -------------------------------- */

/* Every transfer gets tags of its own: every rank makes the same calls in the same order, so
 * the counters agree; reusing a tag let a later, larger message meet an earlier receive
 * (MPI_ERR_TRUNCATE at 3 ranks). */
static starpu_mpi_tag_t next_tag = 1;

static starpu_mpi_tag_t take_tags(int n)
{
    starpu_mpi_tag_t t = next_tag;
    next_tag += n;
    return t;
}

/* The one place handles meet StarPU-MPI (ARCHITECTURE decision 10): n floats owned by rank
 * `owner` under `tag`; a rank that does not own them registers no memory (home -1) and
 * receives a copy when StarPU-MPI brings one. */
static void dist_register_elems(starpu_data_handle_t *h, void *ptr, size_t n, size_t elem,
                                int owner, starpu_mpi_tag_t tag)
{
    int me = 0;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    if (me == owner)
        starpu_vector_data_register(h, STARPU_MAIN_RAM, (uintptr_t)ptr, (uint32_t)n, elem);
    else
        starpu_vector_data_register(h, -1, 0, (uint32_t)n, elem);
    starpu_mpi_data_register(*h, tag, owner);
}

static void dist_register(starpu_data_handle_t *h, void *ptr, size_t n, int owner,
                          starpu_mpi_tag_t tag)
{
    dist_register_elems(h, ptr, n, sizeof(float), owner, tag);
}

/* Brings h to rank `to` (every rank calls it; a no-op on the others; blocking on both ends)
 * and, there, copies it into dst. The copy StarPU-MPI keeps in its cache goes at unregistration. */
static void dist_fetch(starpu_data_handle_t h, int to, void *dst, size_t bytes)
{
    int me = 0;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    int from = starpu_mpi_data_get_rank(h); /* both ends block: a receive, a send */
    if (me == to) watch(from, "its data");
    else if (me == from) watch(to, "it to take a message");
    starpu_mpi_get_data_on_node(MPI_COMM_WORLD, h, to);
    if (me == to && dst) {
        starpu_data_acquire(h, STARPU_R);
        memcpy(dst, (void *)starpu_vector_get_local_ptr(h), bytes);
        starpu_data_release(h);
    }
    unwatch();
}

/* Unregisters h, which waits for a send to rank `to` to complete (under the watchdog). */
static void dist_unregister(starpu_data_handle_t h, int to)
{
    watch(to, "it to take a message");
    starpu_data_unregister(h);
    unwatch();
}

static tfc_status too_big(size_t bytes, char *msg)
{
    return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "distribution: a buffer of %zu bytes is "
                    "over the 2 GiB a StarPU-MPI message may carry (split the variable)", bytes);
}

/* The owner's summation task: buffer 0 (W) gets the weighted sum of buffers 1..N (R), the
 * ranks' gradients in rank order; the global batch's row count comes as a value. */
static void sum_cpu(void *buffers[], void *cl_arg)
{
    int64_t global_rows = 0;
    starpu_codelet_unpack_args(cl_arg, &global_rows);
    int n_parts = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 1;
    const float *parts[n_parts];
    for (int r = 0; r < n_parts; r++)
        parts[r] = (const float *)STARPU_VECTOR_GET_PTR(buffers[1 + r]);
    tfc_dist_weighted_sum(parts, n_parts, global_rows, STARPU_VECTOR_GET_NX(buffers[0]),
                          (float *)STARPU_VECTOR_GET_PTR(buffers[0]));
}

static struct starpu_codelet sum_cl = {
    .cpu_funcs = {sum_cpu},
    .cpu_funcs_name = {"sum_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .name = "tfc_dist_sum",
};

/* The one place distributed tasks are submitted (ARCHITECTURE decision 10): every rank makes
 * the same call; the owner of the written handle runs the task and StarPU-MPI moves the
 * handles it reads there. */
static int dist_submit(starpu_data_handle_t out, starpu_data_handle_t *in, int n_in,
                       int64_t global_rows)
{
    struct starpu_data_descr descr[n_in];
    for (int r = 0; r < n_in; r++) descr[r] = (struct starpu_data_descr){in[r], STARPU_R};
    return starpu_mpi_task_insert(MPI_COMM_WORLD, &sum_cl, STARPU_W, out,
                                  STARPU_DATA_MODE_ARRAY, descr, n_in,
                                  STARPU_VALUE, &global_rows, sizeof global_rows, 0);
}

tfc_status tfc_dist_mpi_sum(const float *mine, size_t n, int owner, int64_t global_rows,
                            float *out, char *msg)
{
    if (n * sizeof(float) >= (1u << 31)) return too_big(n * sizeof(float), msg);
    int me = 0, ranks = 1;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &ranks);
    starpu_data_handle_t g[ranks], sum;
    starpu_mpi_tag_t tag = take_tags(ranks + 1);
    for (int r = 0; r < ranks; r++)
        dist_register(&g[r], r == me ? (void *)mine : NULL, n, r, tag + r);
    dist_register(&sum, me == owner ? out : NULL, n, owner, tag + ranks);
    int ret = dist_submit(sum, g, ranks, global_rows);
    if (ret == 0 && me == owner) /* wait rank by rank, so a missing one can be named */
        for (int r = 0; r < ranks; r++) {
            watch(r, "its gradient");
            starpu_data_acquire(g[r], STARPU_R);
            starpu_data_release(g[r]);
            unwatch();
        }
    for (int r = 0; r < ranks; r++) /* the owner waits for r's data, r for the owner to take it */
        dist_unregister(g[r], me == owner ? r : owner);
    dist_unregister(sum, owner);
    if (ret)
        return tfc_fail(msg, TFC_ERR_RUNTIME, "distribution: starpu_mpi_task_insert of the "
                        "gradient sum failed: %s", strerror(-ret));
    return TFC_OK;
}

tfc_status tfc_dist_mpi_broadcast(float *buf, size_t n, int owner, char *msg)
{
    size_t bytes = n * sizeof(float);
    if (bytes >= (1u << 31)) return too_big(bytes, msg);
    int me = 0, ranks = 1;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_mpi_comm_size(MPI_COMM_WORLD, &ranks);
    starpu_data_handle_t h;
    dist_register(&h, me == owner ? buf : NULL, n, owner, take_tags(1));
    for (int r = 0; r < ranks; r++)
        if (r != owner) dist_fetch(h, r, buf, bytes);
    dist_unregister(h, me == owner ? (owner + 1) % ranks : owner);
    return TFC_OK;
}

tfc_status tfc_dist_mpi_copy(void *buf, size_t bytes, int from, int to, char *msg)
{
    if (bytes >= (1u << 31)) return too_big(bytes, msg);
    if (from == to || bytes == 0) return TFC_OK;
    int me = 0;
    starpu_mpi_comm_rank(MPI_COMM_WORLD, &me);
    starpu_data_handle_t h;
    dist_register_elems(&h, me == from ? buf : NULL, bytes, 1, from, take_tags(1));
    dist_fetch(h, to, buf, bytes);
    dist_unregister(h, me == from ? to : from);
    return TFC_OK;
}
