/* wake_latency.c: how long a thread asleep on a semaphore takes to run again after another
 * core posts it, the wait at the end of every synchronous run (sched/run.c: the last task's
 * callback posts, the caller wakes). Three cases on cores 0 and 1: the waiter's core idle; a
 * thread spinning on the waiter's core, as Debian's StarPU's idle workers do (built with
 * STARPU_NON_BLOCKING_DRIVERS); and a waiter that spins on a flag instead of sleeping, which
 * is how onnxruntime's thread pool waits. The poster spins 200 us before each post, so the
 * waiter has gone to sleep. Figures: medians and 90th percentiles of the post-to-running
 * times, microseconds. Usage: wake_latency [--posts 20000] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <string.h>
#include "benchutil.h"

struct shared {
    sem_t sem;
    volatile int go, stop, spin_flag, use_flag;
    volatile double posted; /* the post's time, seconds */
};

static void pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void relax(void)
{
    __asm__ __volatile__("pause");
}

/* Core 1: when asked, waits 200 us, then posts (or raises the flag). */
static void *poster(void *arg)
{
    struct shared *s = arg;
    pin_to(1);
    while (!s->stop) {
        while (!s->go && !s->stop) relax();
        if (s->stop) break;
        double t = bench_now();
        while (bench_now() - t < 200e-6) relax();
        s->go = 0;
        s->posted = bench_now();
        if (s->use_flag) s->spin_flag = 1;
        else sem_post(&s->sem);
    }
    return NULL;
}

/* Core 0: a thread that never sleeps, as an idle StarPU worker. */
static void *spinner(void *arg)
{
    struct shared *s = arg;
    pin_to(0);
    while (!s->stop) relax();
    return NULL;
}

/* Median and 90th percentile of n post-to-running times in one case. */
static void measure(const char *name, int with_spinner, int use_flag, int n)
{
    struct shared s;
    memset(&s, 0, sizeof s);
    sem_init(&s.sem, 0, 0);
    s.use_flag = use_flag;
    pthread_t post, spin;
    pthread_create(&post, NULL, poster, &s);
    if (with_spinner) pthread_create(&spin, NULL, spinner, &s);
    pin_to(0);
    double *lat = malloc(sizeof *lat * (size_t)n);
    for (int i = 0; lat && i < n; i++) {
        s.spin_flag = 0;
        s.go = 1;
        if (use_flag)
            while (!s.spin_flag) relax();
        else
            while (sem_wait(&s.sem)) continue;
        lat[i] = (bench_now() - s.posted) * 1e6;
    }
    s.stop = 1;
    pthread_join(post, NULL);
    if (with_spinner) pthread_join(spin, NULL);
    if (lat) {
        double med = bench_quantile(lat, n, 0.5), p90 = bench_quantile(lat, n, 0.9);
        printf("%-48s median %6.1f us  p90 %6.1f us\n", name, med, p90);
    }
    free(lat);
    sem_destroy(&s.sem);
}

int main(int argc, char **argv)
{
    int n = 20000;
    for (int i = 1; i + 1 < argc; i += 2)
        if (!strcmp(argv[i], "--posts")) n = atoi(argv[i + 1]);
    if (n < 1) {
        fprintf(stderr, "usage: wake_latency [--posts N]\n");
        return 2;
    }
    double load[3];
    bench_load_average(load);
    printf("wake_latency: %d posts per case, load average %.2f\n", n, load[0]);
    measure("sem_wait, the waiter's core idle", 0, 0, n);
    measure("sem_wait, a thread spinning on the waiter's core", 1, 0, n);
    measure("spinning on a flag (no sleep)", 0, 1, n);
    return 0;
}
