/* test_dist_bind.c: how the ranks of a node share its cores out (issue 15, item 6;
 * sched/dist_bind.c). The topology is data here: packages of cores as hwloc lists them, the
 * ranks sharing them; each rank must get cores of its own for its workers, StarPU-MPI's thread
 * and the loader, within what the launcher bound it to, or nothing when there are too few. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"
#include "../sched/dist_bind.h"

/* Cores ids first..first+n-1, per_package to a package (numbered from first / per_package). */
static int machine(tfc_bind_core *c, int first, int n, int per_package)
{
    for (int i = 0; i < n; i++) c[i] = (tfc_bind_core){(first + i) / per_package, first + i};
    return n;
}

static void expect(const tfc_bind_plan *p, int mpi, int loader, int n_workers, const int *workers)
{
    CU_ASSERT_EQUAL(p->bound, 1);
    CU_ASSERT_EQUAL(p->mpi_core, mpi);
    CU_ASSERT_EQUAL(p->loader_core, loader);
    CU_ASSERT_EQUAL_FATAL(p->n_workers, n_workers);
    for (int w = 0; w < n_workers; w++) CU_ASSERT_EQUAL(p->worker_cores[w], workers[w]);
}

/* No core is given twice, within a rank or across the ranks of a group. */
static void check_distinct(const tfc_bind_core *cores, int n, int ranks, int max_workers)
{
    int used[256] = {0};
    for (int r = 0; r < ranks; r++) {
        tfc_bind_plan p;
        tfc_bind_share(cores, n, r, ranks, 1, max_workers, &p);
        CU_ASSERT_FATAL(p.bound);
        used[p.mpi_core]++;
        if (p.loader_core >= 0) used[p.loader_core]++;
        for (int w = 0; w < p.n_workers; w++) used[p.worker_cores[w]]++;
    }
    for (int c = 0; c < 256; c++) CU_ASSERT(used[c] <= 1);
}

static void test_two_packages_four_ranks(void)
{
    tfc_bind_core c[16];
    int n = machine(c, 0, 16, 8);
    for (int r = 0; r < 4; r++) {
        tfc_bind_plan p;
        tfc_bind_share(c, n, r, 4, 1, 4, &p);
        int w[] = {4 * r, 4 * r + 1};
        expect(&p, 4 * r + 3, 4 * r + 2, 2, w);
    }
    check_distinct(c, n, 4, 4);
    /* one rank per package: workers capped (STARPU_MAXCPUS), MPI thread on the last core */
    tfc_bind_plan p;
    tfc_bind_share(c, n, 1, 2, 1, 4, &p);
    expect(&p, 15, 14, 4, (int[]){8, 9, 10, 11});
    /* no loader thread wanted: its core goes to a worker */
    tfc_bind_share(c, n, 0, 4, 0, 4, &p);
    expect(&p, 3, -1, 3, (int[]){0, 1, 2});
    /* three ranks do not split over two packages: contiguous slices of 5, 5 and 6 cores */
    tfc_bind_share(c, n, 2, 3, 1, 4, &p);
    expect(&p, 15, 14, 4, (int[]){10, 11, 12, 13});
    tfc_bind_share(c, n, 1, 3, 1, 4, &p);
    expect(&p, 9, 8, 3, (int[]){5, 6, 7});
    check_distinct(c, n, 3, 4);
}

static void test_launcher_bound_subsets(void)
{
    tfc_bind_core c[16];
    tfc_bind_plan p;
    /* bound alone to package 1 (srun --cpu-bind=sockets, one rank per socket): all of it */
    int n = machine(c, 8, 8, 8);
    tfc_bind_share(c, n, 0, 1, 1, 4, &p);
    expect(&p, 15, 14, 4, (int[]){8, 9, 10, 11});
    /* two ranks left on cores 4-15, four of package 0 and eight of package 1: each keeps to
     * one package (contiguous halves would give rank 0 cores 4-9, across both) */
    n = machine(c, 4, 12, 8);
    c[0].package = c[1].package = c[2].package = c[3].package = 0;
    tfc_bind_share(c, n, 0, 2, 1, 4, &p);
    expect(&p, 7, 6, 2, (int[]){4, 5});
    tfc_bind_share(c, n, 1, 2, 1, 4, &p);
    expect(&p, 15, 14, 4, (int[]){8, 9, 10, 11});
    check_distinct(c, n, 2, 4);
    /* two cores for one rank: a worker and the MPI thread, the loader shares */
    n = machine(c, 6, 2, 8);
    tfc_bind_share(c, n, 0, 1, 1, 4, &p);
    expect(&p, 7, -1, 1, (int[]){6});
}

static void test_too_few_cores(void)
{
    tfc_bind_core c[16];
    tfc_bind_plan p;
    int n = machine(c, 0, 2, 2); /* this machine: 2 cores, mpirun -np 2 */
    tfc_bind_share(c, n, 1, 2, 1, 4, &p);
    CU_ASSERT_EQUAL(p.bound, 0);
    CU_ASSERT_EQUAL(p.mpi_core, -1);
    CU_ASSERT_EQUAL(p.n_workers, 0);
    CU_ASSERT(strstr(p.why, "2 cores for 2 ranks") && strstr(p.why, "nothing is bound"));
    n = machine(c, 0, 5, 8); /* 5 < 3 ranks x 2 */
    tfc_bind_share(c, n, 0, 3, 1, 4, &p);
    CU_ASSERT_EQUAL(p.bound, 0);
    n = machine(c, 0, 1, 8);
    tfc_bind_share(c, n, 0, 1, 1, 4, &p);
    CU_ASSERT_EQUAL(p.bound, 0);
    CU_ASSERT(strstr(p.why, "1 core for 1 rank sharing it") != NULL);
    tfc_bind_share(c, n, 2, 2, 1, 4, &p); /* a rank outside its group */
    CU_ASSERT_EQUAL(p.bound, 0);
}

/* The library's side on this machine: TFC_DIST_BIND=0 and the user's own binding leave StarPU
 * alone; a group too large for the node falls back, sets nothing and says why. */
static void test_apply_off_user_and_fallback(void)
{
    char msg[512], text[1024];
    const char *nobind = getenv("STARPU_WORKERS_NOBIND");
    char *keep = nobind ? strdup(nobind) : NULL;
    setenv("TFC_DIST_BIND", "0", 1);
    CU_ASSERT_EQUAL(tfc_dist_bind_apply(0, 1, 1, msg), TFC_OK);
    tfc_dist_bind_describe(text, sizeof text);
    CU_ASSERT(strstr(text, "binding: off (TFC_DIST_BIND=0)") != NULL);
    setenv("TFC_DIST_BIND", "yes", 1);
    CU_ASSERT_EQUAL(tfc_dist_bind_apply(0, 1, 1, msg), TFC_ERR_INVALID_ARGUMENT);
    CU_ASSERT(strstr(msg, "TFC_DIST_BIND") != NULL);
    unsetenv("TFC_DIST_BIND");
    setenv("STARPU_WORKERS_NOBIND", "1", 1);
    CU_ASSERT_EQUAL(tfc_dist_bind_apply(0, 1, 1, msg), TFC_OK);
    tfc_dist_bind_describe(text, sizeof text);
    CU_ASSERT(strstr(text, "left to StarPU (STARPU_WORKERS_NOBIND is set)") != NULL);
    unsetenv("STARPU_WORKERS_NOBIND");
    unsetenv("STARPU_WORKERS_CPUID");
    unsetenv("STARPU_MPI_NOBIND");
    CU_ASSERT_EQUAL(tfc_dist_bind_apply(5, 4096, 1, msg), TFC_OK);
    tfc_dist_bind_describe(text, sizeof text);
    CU_ASSERT(strstr(text, "binding: none: ") && strstr(text, "for 4096 ranks"));
    CU_ASSERT_PTR_NULL(getenv("STARPU_WORKERS_CPUID"));
    CU_ASSERT_PTR_NULL(getenv("STARPU_MPI_THREAD_CPUID"));
    /* StarPU binds nothing either until it started, then the environment is as it was */
    CU_ASSERT_PTR_NOT_NULL(getenv("STARPU_WORKERS_NOBIND"));
    CU_ASSERT_PTR_NOT_NULL(getenv("STARPU_MPI_NOBIND"));
    tfc_dist_bind_started();
    CU_ASSERT_PTR_NULL(getenv("STARPU_WORKERS_NOBIND"));
    CU_ASSERT_PTR_NULL(getenv("STARPU_MPI_NOBIND"));
    tfc_dist_bind_forget();
    tfc_dist_bind_describe(text, sizeof text);
    CU_ASSERT_STRING_EQUAL(text, "");
    if (keep) setenv("STARPU_WORKERS_NOBIND", keep, 1);
    free(keep);
}

static void *loader_like(void *arg)
{
    tfc_dist_bind_loader_thread();
    sched_getaffinity(0, sizeof(cpu_set_t), arg); /* (this thread's) */
    return NULL;
}

/* One rank with the whole machine: the plan is applied (StarPU's variables set, then taken
 * back), and a loader thread lands on the plan's loader core: one core's PUs, none of the
 * workers' or the MPI thread's. With fewer than 3 cores there is no loader core and its
 * thread keeps the process's CPUs. */
static void test_apply_one_rank_and_loader(void)
{
    char msg[512], text[2048];
    const char *nobind = getenv("STARPU_WORKERS_NOBIND");
    char *keep = nobind ? strdup(nobind) : NULL;
    unsetenv("STARPU_WORKERS_NOBIND");
    unsetenv("STARPU_NCPU");
    CU_ASSERT_EQUAL_FATAL(tfc_dist_bind_apply(0, 1, 0, msg), TFC_OK);
    tfc_dist_bind_describe(text, sizeof text);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t before, got;
    sched_getaffinity(0, sizeof before, &before);
    if (strstr(text, "binding: none")) { /* a 1-core machine */
        CU_ASSERT(cpus < 2);
    } else {
        CU_ASSERT(strstr(text, "shared by 1 rank") && strstr(text, "MPI thread: core L#"));
        CU_ASSERT_PTR_NOT_NULL(getenv("STARPU_WORKERS_CPUID"));
        CU_ASSERT_PTR_NOT_NULL(getenv("STARPU_MPI_THREAD_CPUID"));
        CU_ASSERT_PTR_NOT_NULL(getenv("STARPU_NCPU"));
        tfc_dist_bind_started();
        CU_ASSERT_PTR_NULL(getenv("STARPU_WORKERS_CPUID"));
        CU_ASSERT_PTR_NULL(getenv("STARPU_MPI_THREAD_CPUID"));
        CU_ASSERT_PTR_NULL(getenv("STARPU_NCPU"));
        pthread_t th;
        CU_ASSERT_FATAL(pthread_create(&th, NULL, loader_like, &got) == 0);
        pthread_join(th, NULL);
        const char *loader = strstr(text, "loader: core L#");
        if (loader) { /* 3 cores or more: one core (all its PUs), fewer CPUs than the process */
            int n = CPU_COUNT(&got);
            CU_ASSERT(n >= 1 && n < CPU_COUNT(&before));
            printf("(loader bound to %d CPU%s: %.40s) ", n, n == 1 ? "" : "s", loader);
        } else {
            CU_ASSERT(CPU_EQUAL(&got, &before));
            printf("(%ld CPUs: no loader core, its thread keeps the process's CPUs) ", cpus);
        }
    }
    tfc_dist_bind_forget();
    if (keep) setenv("STARPU_WORKERS_NOBIND", keep, 1);
    free(keep);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("dist_bind", NULL, NULL);
    TEST_ADD(test_two_packages_four_ranks);
    TEST_ADD(test_launcher_bound_subsets);
    TEST_ADD(test_too_few_cores);
    TEST_ADD(test_apply_off_user_and_fallback);
    TEST_ADD(test_apply_one_rank_and_loader);
    return test_main();
}
