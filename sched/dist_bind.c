/* dist_bind.c: the cores a rank gives its StarPU workers, StarPU-MPI's progress thread and the
 * input loader (issue 15, item 6; see dist_bind.h). The sharing itself is a pure function of the
 * cores, tested as data (tests/test_dist_bind.c); the rest reads hwloc and hands the result to
 * StarPU through the variables it reads at starpu_init (STARPU_WORKERS_CPUID,
 * STARPU_MPI_THREAD_CPUID), which take PU indexes in StarPU's own hwloc numbering. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>
#include <starpu.h>
#include "dist_bind.h"
#include "../src/env.h"

/* ---- Sharing cores out (pure) ----------------------------------------------------------- */

/* A package's slice when the group splits evenly over packages that each have room: a rank's
 * cores then never straddle two packages (their caches and memory). Returns 0 otherwise. */
static int package_slice(const tfc_bind_core *cores, int n, int gi, int gs, int *lo, int *hi)
{
    int packages = 0, last = -1, start[64], count[64];
    for (int c = 0; c < n; c++) {
        if (c == 0 || cores[c].package != last) {
            if (packages == 64) return 0;
            start[packages] = c, count[packages] = 0, packages++;
            last = cores[c].package;
        }
        count[packages - 1]++;
    }
    if (packages < 2 || gs % packages) return 0;
    int per = gs / packages, p = gi / per, i = gi % per;
    for (int k = 0; k < packages; k++)
        if (count[k] < 2 * per) return 0;
    *lo = start[p] + count[p] * i / per;
    *hi = start[p] + count[p] * (i + 1) / per;
    return 1;
}

void tfc_bind_share(const tfc_bind_core *cores, int n_cores, int group_index, int group_size,
                    int want_loader, int max_workers, tfc_bind_plan *out)
{
    memset(out, 0, sizeof *out);
    out->mpi_core = out->loader_core = -1;
    if (group_size < 1 || group_index < 0 || group_index >= group_size) {
        snprintf(out->why, sizeof out->why, "rank %d of a group of %d ranks: nothing is bound",
                 group_index, group_size);
        return;
    }
    if (n_cores < 2 * group_size) {
        snprintf(out->why, sizeof out->why, "%d core%s for %d rank%s sharing %s: fewer than 2 "
                 "per rank (one for the MPI thread, one for a worker), so nothing is bound",
                 n_cores, n_cores == 1 ? "" : "s", group_size, group_size == 1 ? "" : "s",
                 n_cores == 1 ? "it" : "them");
        return;
    }
    int lo, hi;
    if (!package_slice(cores, n_cores, group_index, group_size, &lo, &hi)) {
        lo = (int)((long long)n_cores * group_index / group_size);
        hi = (int)((long long)n_cores * (group_index + 1) / group_size);
    }
    int mine = hi - lo;
    out->mpi_core = cores[--hi].id;
    if (want_loader && mine >= 3) out->loader_core = cores[--hi].id;
    if (max_workers > TFC_BIND_MAX_WORKERS) max_workers = TFC_BIND_MAX_WORKERS;
    for (int c = lo; c < hi && out->n_workers < max_workers; c++)
        out->worker_cores[out->n_workers++] = cores[c].id;
    out->bound = 1;
    snprintf(out->why, sizeof out->why, "%d of %d cores shared by %d rank%s", mine, n_cores,
             group_size, group_size == 1 ? "" : "s");
}

/* ---- The running plan --------------------------------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    hwloc_topology_t topo; /* loaded while a plan is alive (the loader binds from it) */
    hwloc_bitmap_t mine;   /* the PUs the process may run on, before StarPU binds anything */
    int active, said, getbind;
    int none;              /* StarPU was told to bind nothing (too few cores) */
    tfc_bind_plan plan;
    char note[300];        /* why nothing is bound, or what was left to StarPU */
} bind = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The variables that say the user binds: then we bind nothing. */
static const char *user_binding(void)
{
    static const char *const names[] = {"STARPU_WORKERS_CPUID", "STARPU_WORKERS_COREID",
        "STARPU_WORKERS_NOBIND", "STARPU_MPI_THREAD_CPUID", "STARPU_MPI_THREAD_COREID"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (getenv(names[i])) return names[i];
    return NULL;
}

/* The cores with a PU the process may run on, in hwloc's order. */
static int usable_cores(tfc_bind_core *cores, int cap)
{
    int n = 0, all = hwloc_get_nbobjs_by_type(bind.topo, HWLOC_OBJ_CORE);
    for (int c = 0; c < all && n < cap; c++) {
        hwloc_obj_t core = hwloc_get_obj_by_type(bind.topo, HWLOC_OBJ_CORE, (unsigned)c);
        if (!hwloc_bitmap_intersects(core->cpuset, bind.mine)) continue;
        hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(bind.topo, HWLOC_OBJ_PACKAGE, core);
        cores[n++] = (tfc_bind_core){pkg ? (int)pkg->logical_index : 0, c};
    }
    return n;
}

/* The PU StarPU's ids name for core c: its first PU the process may run on, as a logical index
 * of the whole machine, or (STARPU_WORKERS_GETBIND=1: StarPU restricts its topology to the
 * process's PUs) as the index among those PUs. */
static int starpu_pu(int c, int *machine_pu)
{
    hwloc_obj_t core = hwloc_get_obj_by_type(bind.topo, HWLOC_OBJ_CORE, (unsigned)c);
    hwloc_obj_t pu = NULL;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(bind.topo, core->cpuset,
                                                          HWLOC_OBJ_PU, pu)))
        if (hwloc_bitmap_isset(bind.mine, pu->os_index)) break;
    if (!pu) return -1;
    *machine_pu = (int)pu->logical_index;
    if (!bind.getbind) return *machine_pu;
    int k = 0;
    for (hwloc_obj_t p = NULL; (p = hwloc_get_next_obj_inside_cpuset_by_type(bind.topo, bind.mine,
                                                                             HWLOC_OBJ_PU, p)); k++)
        if (p == pu) return k;
    return -1;
}

static void forget_locked(void)
{
    if (bind.mine) hwloc_bitmap_free(bind.mine);
    if (bind.topo) hwloc_topology_destroy(bind.topo);
    bind.mine = NULL, bind.topo = NULL, bind.active = bind.none = 0, bind.note[0] = 0;
    memset(&bind.plan, 0, sizeof bind.plan);
}

void tfc_dist_bind_forget(void)
{
    pthread_mutex_lock(&bind.mu);
    forget_locked();
    pthread_mutex_unlock(&bind.mu);
}

static int load_topology(void)
{
    if (hwloc_topology_init(&bind.topo)) return bind.topo = NULL, -1;
    bind.mine = hwloc_bitmap_alloc();
    if (!bind.mine || hwloc_topology_load(bind.topo) ||
        hwloc_get_cpubind(bind.topo, bind.mine, HWLOC_CPUBIND_PROCESS))
        return -1;
    const char *g = getenv("STARPU_WORKERS_GETBIND");
    bind.getbind = g && atoi(g) != 0;
    return 0;
}

/* The variables set for starpu_init, taken back by tfc_dist_bind_started. */
static struct { const char *name; int set; } vars[] = {
    {"STARPU_WORKERS_CPUID", 0}, {"STARPU_NCPU", 0}, {"STARPU_MPI_THREAD_CPUID", 0},
    {"STARPU_WORKERS_NOBIND", 0}, {"STARPU_MPI_NOBIND", 0}};

static int set_var(int i, const char *value)
{
    if (setenv(vars[i].name, value, 1)) return -1;
    vars[i].set = 1;
    return 0;
}

/* Hands the plan to StarPU; -1 (nothing set) when a core has no PU StarPU could name. */
static int set_variables(void)
{
    char list[TFC_BIND_MAX_WORKERS * 12] = "", one[32];
    int pu, machine;
    for (int w = 0; w < bind.plan.n_workers; w++) {
        if ((pu = starpu_pu(bind.plan.worker_cores[w], &machine)) < 0) return -1;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", w ? " " : "", pu);
    }
    if ((pu = starpu_pu(bind.plan.mpi_core, &machine)) < 0) return -1;
    snprintf(one, sizeof one, "%d", pu);
    if (set_var(0, list) || set_var(2, one)) return -1;
    snprintf(one, sizeof one, "%d", bind.plan.n_workers);
    /* else StarPU makes one worker per core of the machine, wrapping round our list */
    if (!getenv("STARPU_NCPU") && !getenv("STARPU_NCPUS") && set_var(1, one)) return -1;
    return 0;
}

void tfc_dist_bind_started(void)
{
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (vars[i].set) unsetenv(vars[i].name), vars[i].set = 0;
}

/* No binding: StarPU is told to bind nothing either (alone it would pin every rank's first
 * worker to the node's first core); note why, and say it once per process on the node's
 * first rank. */
static void unbound(int node_rank, const char *why)
{
    snprintf(bind.note, sizeof bind.note, "binding: none: %s", why);
    bind.none = 1;
    if (!getenv(vars[3].name)) set_var(3, "1");
    if (!getenv(vars[4].name)) set_var(4, "1");
    if (node_rank == 0 && !bind.said) {
        fprintf(stderr, "tfc: %s (TFC_DIST_BIND)\n", bind.note);
        bind.said = 1;
    }
}

tfc_status tfc_dist_bind_apply(int group_index, int group_size, int node_rank, char *msg)
{
    int on = 1;
    tfc_status st = tfc_env_bool("TFC_DIST_BIND", 1, &on, msg);
    if (st) return st;
    pthread_mutex_lock(&bind.mu);
    forget_locked();
    bind.active = 1;
    const char *user = user_binding();
    if (!on)
        snprintf(bind.note, sizeof bind.note, "binding: off (TFC_DIST_BIND=0): StarPU binds "
                 "its workers and MPI thread as it does alone");
    else if (user)
        snprintf(bind.note, sizeof bind.note, "binding: left to StarPU (%s is set)", user);
    else if (load_topology())
        unbound(node_rank, "hwloc cannot read the topology or this process's binding");
    else {
        static tfc_bind_core cores[4096]; /* (under bind.mu) */
        int n = usable_cores(cores, 4096);
        tfc_bind_share(cores, n, group_index, group_size, 1, STARPU_MAXCPUS, &bind.plan);
        if (!bind.plan.bound)
            unbound(node_rank, bind.plan.why);
        else if (set_variables()) {
            tfc_dist_bind_started();
            bind.plan.bound = 0;
            unbound(node_rank, "a core has no processing unit StarPU can name");
        }
    }
    pthread_mutex_unlock(&bind.mu);
    return TFC_OK;
}

void tfc_dist_bind_loader_thread(void)
{
    pthread_mutex_lock(&bind.mu);
    if (bind.active && bind.plan.bound && bind.plan.loader_core >= 0) {
        hwloc_obj_t core = hwloc_get_obj_by_type(bind.topo, HWLOC_OBJ_CORE,
                                                 (unsigned)bind.plan.loader_core);
        hwloc_bitmap_t set = hwloc_bitmap_dup(core->cpuset);
        if (set) {
            hwloc_bitmap_and(set, set, bind.mine);
            hwloc_set_cpubind(bind.topo, set, HWLOC_CPUBIND_THREAD); /* best effort */
            hwloc_bitmap_free(set);
        }
    }
    pthread_mutex_unlock(&bind.mu);
}

/* " core L#c (PU L#p)" for each core id of ids. */
static size_t cores_text(const int *ids, int n, char *out, size_t size)
{
    size_t pos = 0;
    for (int i = 0; i < n && pos < size; i++) {
        int machine = -1;
        starpu_pu(ids[i], &machine);
        pos += (size_t)snprintf(out + pos, size - pos, " core L#%d (PU L#%d)", ids[i], machine);
    }
    return pos;
}

void tfc_dist_bind_describe(char *out, size_t size)
{
    pthread_mutex_lock(&bind.mu);
    if (!bind.active || !bind.plan.bound) {
        snprintf(out, size, "%s%s", bind.note, bind.note[0] ? "\n" : "");
        pthread_mutex_unlock(&bind.mu);
        return;
    }
    const tfc_bind_plan *p = &bind.plan;
    size_t pos = (size_t)snprintf(out, size, "binding: %s (TFC_DIST_BIND)\n  workers:", p->why);
    if (pos < size) pos += cores_text(p->worker_cores, p->n_workers, out + pos, size - pos);
    if (pos < size) pos += (size_t)snprintf(out + pos, size - pos, "\n  MPI thread:");
    if (pos < size) pos += cores_text(&p->mpi_core, 1, out + pos, size - pos);
    if (pos < size && getenv("STARPU_MPI_NOBIND")) /* StarPU leaves it unbound: the core stays free */
        pos += (size_t)snprintf(out + pos, size - pos, " kept free (STARPU_MPI_NOBIND: not bound)");
    if (pos < size && p->loader_core >= 0) {
        pos += (size_t)snprintf(out + pos, size - pos, "\n  loader:");
        if (pos < size) pos += cores_text(&p->loader_core, 1, out + pos, size - pos);
    } else if (pos < size)
        pos += (size_t)snprintf(out + pos, size - pos, "\n  loader: not bound (fewer than 3 "
                                "cores: it runs where the system puts it)");
    if (pos < size) snprintf(out + pos, size - pos, "\n");
    pthread_mutex_unlock(&bind.mu);
}

int tfc_dist_bind_none(void)
{
    pthread_mutex_lock(&bind.mu);
    int none = bind.active && bind.none;
    pthread_mutex_unlock(&bind.mu);
    return none;
}
