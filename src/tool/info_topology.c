/* info_topology.c: `tfc info --topology` (issue 15, item 6): what this process sees of its
 * node through hwloc (packages, cores, NUMA nodes, GPUs, the CPUs it may run on) and where
 * StarPU put its workers, so that a rank's binding on a cluster can be checked before a job. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#include "tool.h"
#include "info_topology.h"
#include "../../sched/dist_bind.h"

/* Everything goes to a buffer first, printed at the end one line at a time under the rank's
 * name, so that the ranks' reports under mpirun do not interleave line by line. */
static FILE *out;

const char tool_topology_usage[] =
    "usage: tfc info --topology\n\n"
    "Prints the node as hwloc sees it (packages, cores, processing units, NUMA nodes with\n"
    "their memory, GPUs and other coprocessors, the CPUs this process may run on), then starts\n"
    "StarPU and prints each worker and the core it is bound to. Under mpirun each rank prints\n"
    "its own view, headed by its rank, from a distributed context: the ranks sharing a node\n"
    "(and a launcher binding) share its cores out, and each prints the cores its workers, the\n"
    "MPI progress thread and the input loader got, or why nothing was bound (TFC_DIST_BIND;\n"
    "README, \"Running on a cluster\").\n";

/* "L#a-b,c" of the PUs in set (logical indexes, as STARPU_WORKERS_CPUID takes them). */
static void pu_list(hwloc_topology_t topo, hwloc_const_cpuset_t set, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    int first = -1, last = -2;
    hwloc_obj_t pu = NULL;
    while (1) {
        pu = hwloc_get_next_obj_inside_cpuset_by_type(topo, set, HWLOC_OBJ_PU, pu);
        int l = pu ? (int)pu->logical_index : -1;
        if (pu && l == last + 1) { last = l; continue; }
        if (first >= 0 && pos < len)
            pos += (size_t)(first == last ? snprintf(buf + pos, len - pos, "%s%d", pos ? "," : "L#", first)
                                          : snprintf(buf + pos, len - pos, "%s%d-%d", pos ? "," : "L#", first, last));
        if (!pu) break;
        first = last = l;
    }
    if (!buf[0]) snprintf(buf, len, "(none)");
}

static void print_machine(hwloc_topology_t topo, hwloc_const_cpuset_t mine)
{
    int packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    fprintf(out, "machine: %d package%s, %d cores, %d processing units\n", packages,
           packages == 1 ? "" : "s", cores, pus);
    char list[512];
    for (int p = 0; p < packages; p++) {
        hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, (unsigned)p);
        pu_list(topo, pkg->cpuset, list, sizeof list);
        fprintf(out, "  package L#%d: %d cores, PUs %s\n", p,
               hwloc_get_nbobjs_inside_cpuset_by_type(topo, pkg->cpuset, HWLOC_OBJ_CORE), list);
    }
    int numas = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int k = 0; k < numas; k++) {
        hwloc_obj_t nn = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)k);
        pu_list(topo, nn->cpuset, list, sizeof list);
        fprintf(out, "  NUMA node L#%d (P#%u): %.1f GiB, PUs %s\n", k, nn->os_index,
               (double)nn->attr->numanode.local_memory / 1073741824.0, list);
    }
    int gpus = 0;
    for (hwloc_obj_t d = hwloc_get_next_osdev(topo, NULL); d; d = hwloc_get_next_osdev(topo, d)) {
        if (d->attr->osdev.type != HWLOC_OBJ_OSDEV_GPU &&
            d->attr->osdev.type != HWLOC_OBJ_OSDEV_COPROC)
            continue;
        hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topo, d);
        pu_list(topo, near->cpuset, list, sizeof list);
        fprintf(out, "  GPU %s (%s%s%s), near PUs %s\n", d->name, d->subtype ? d->subtype : "device",
               hwloc_obj_get_info_by_name(d, "GPUModel") ? ": " : "",
               hwloc_obj_get_info_by_name(d, "GPUModel") ? hwloc_obj_get_info_by_name(d, "GPUModel") : "",
               list);
        gpus++;
    }
    if (!gpus) fprintf(out, "  GPUs: none found\n");
    pu_list(topo, mine, list, sizeof list);
    fprintf(out, "this process may run on PUs %s\n", list);
}

/* The PUs StarPU-MPI's progress thread (named "MPI") may run on, read back from the system
 * (Linux: /proc/self/task), so the report shows what the thread got, not what was asked. */
static void print_mpi_thread(hwloc_topology_t topo)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], name[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(name, sizeof name, f)) name[0] = 0;
        fclose(f);
        cpu_set_t cpus;
        if (strcmp(name, "MPI\n") || sched_getaffinity(atoi(e->d_name), sizeof cpus, &cpus)) continue;
        hwloc_bitmap_t set = hwloc_bitmap_alloc();
        char list[512];
        if (set && !hwloc_cpuset_from_glibc_sched_affinity(topo, set, &cpus, sizeof cpus)) {
            pu_list(topo, set, list, sizeof list);
            fprintf(out, "MPI thread may run on PUs %s\n", list);
        }
        hwloc_bitmap_free(set);
    }
    if (d) closedir(d);
}

static const char *worker_kind(const char *starpu_kind)
{
    return !strncmp(starpu_kind, "STARPU_", 7) ? starpu_kind + 7 : starpu_kind;
}

/* Each worker with the core and package of the PU it is bound to. StarPU numbers PUs in its
 * own hwloc topology, which STARPU_WORKERS_GETBIND=1 restricts to the CPUs the process may run
 * on (mine, read before StarPU binds anything): then its PU k is the k-th of those. */
static int print_workers(hwloc_topology_t topo, hwloc_const_cpuset_t mine)
{
    const char *getbind = getenv("STARPU_WORKERS_GETBIND");
    int restricted = getbind && atoi(getbind) != 0;
    const char *nobind = getenv("STARPU_WORKERS_NOBIND"); /* StarPU binds nothing then */
    int unbound = nobind && atoi(nobind) != 0;
    tfc_ctx *ctx;
    /* under a launcher, a distributed context: its ranks share the node's cores out */
    int launched = getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE");
    int ranked = launched && tfc_dist_available();
    if (ranked ? tfc_ctx_create_dist(TFC_DIST_MPI, &ctx) : tfc_ctx_create(&ctx))
        return tool_error("info", "cannot start StarPU: %s", tfc_errmsg());
    int n = tfc_ctx_workers(ctx, NULL, 0);
    tfc_worker_info *w = calloc((size_t)(n > 0 ? n : 1), sizeof *w);
    if (!w) {
        tfc_ctx_destroy(ctx);
        return tool_error("info", "out of memory");
    }
    tfc_ctx_workers(ctx, w, n);
    fprintf(out, "StarPU workers: %d\n", n);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t pu = w[i].bind_pu < 0 ? NULL
            : restricted ? hwloc_get_obj_inside_cpuset_by_type(topo, mine, HWLOC_OBJ_PU,
                                                               (unsigned)w[i].bind_pu)
                         : hwloc_get_obj_by_type(topo, HWLOC_OBJ_PU, (unsigned)w[i].bind_pu);
        hwloc_obj_t core = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu) : NULL;
        hwloc_obj_t pkg = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu) : NULL;
        fprintf(out, "  worker %d %-12s (%s, memory node %d): ", w[i].id, w[i].name, worker_kind(w[i].kind),
               w[i].memory_node);
        if (unbound) fprintf(out, "not bound (STARPU_WORKERS_NOBIND)\n");
        else if (ranked && tfc_dist_bind_none()) fprintf(out, "not bound (too few cores)\n");
        else if (!pu) fprintf(out, "not bound\n");
        else fprintf(out, "PU L#%u, core L#%d, package L#%d\n", pu->logical_index,
                    core ? (int)core->logical_index : -1, pkg ? (int)pkg->logical_index : -1);
    }
    free(w);
    if (launched && !ranked)
        fprintf(out, "binding: none: this libtfc-starpu was built without StarPU-MPI (each rank "
                "starts StarPU alone)\n");
    if (ranked) {
        print_mpi_thread(topo);
        char binding[2048];
        tfc_dist_bind_describe(binding, sizeof binding);
        fprintf(out, "%s", binding);
    }
    tfc_ctx_destroy(ctx);
    return TOOL_OK;
}

static int topology(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo)) return tool_error("info", "hwloc: cannot start");
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo)) {
        hwloc_topology_destroy(topo);
        return tool_error("info", "hwloc: cannot read the topology");
    }
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    if (!mine || hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_PROCESS)) {
        hwloc_bitmap_free(mine);
        hwloc_topology_destroy(topo);
        return tool_error("info", "hwloc: cannot read this process's CPU binding");
    }
    print_machine(topo, mine);
    int rc = print_workers(topo, mine);
    hwloc_bitmap_free(mine);
    hwloc_topology_destroy(topo);
    return rc;
}

int tool_topology(void)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (!rank) rank = getenv("PMI_RANK");
    char *text = NULL;
    size_t len = 0;
    out = open_memstream(&text, &len);
    if (!out) return tool_error("info", "out of memory");
    int rc = topology();
    fclose(out);
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        printf("%s%s%s%s\n", rank ? "rank " : "", rank ? rank : "", rank ? ": " : "", line);
    fflush(stdout);
    free(text);
    return rc;
}
