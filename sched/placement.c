/* placement.c: placement hints at plan time. A node's hint (graph/graph.c keeps it) becomes the
 * task's worker mask (STARPU_CPU, STARPU_CUDA, STARPU_OPENCL), and for one device of a kind
 * also its worker list (task->workerids), so the scheduler still chooses among the allowed
 * workers. A hint no worker can satisfy (no worker of the kind, no device of that index, or no
 * implementation of the step's codelet for the kind) fails the plan when hard; when soft the
 * step keeps no restriction and the plan records a warning. The test hooks (the where and hop
 * masks of the plan options) override hints: they pin tasks for device tests. */
#include <stdlib.h>
#include <string.h>
#include "plan.h"
#include "../codelets/opencl_common.h"

static enum starpu_worker_archtype arch_of(int kind)
{
    return kind == TFC_DEVICE_CUDA ? STARPU_CUDA_WORKER
         : kind == TFC_DEVICE_OPENCL ? STARPU_OPENCL_WORKER : STARPU_CPU_WORKER;
}

static uint32_t mask_of(int kind)
{
    return kind == TFC_DEVICE_CUDA ? STARPU_CUDA
         : kind == TFC_DEVICE_OPENCL ? STARPU_OPENCL : STARPU_CPU;
}

static const char *kind_name(int kind)
{
    return kind == TFC_DEVICE_CUDA ? "CUDA" : kind == TFC_DEVICE_OPENCL ? "OpenCL" : "CPU";
}

/* Whether the codelet has an implementation for the kind of worker. */
static int has_impl(const struct starpu_codelet *cl, int kind)
{
    if (cl->where && !(cl->where & mask_of(kind))) return 0;
    switch (kind) {
    case TFC_DEVICE_CPU: return cl->cpu_funcs[0] != NULL;
    case TFC_DEVICE_CUDA: return cl->cuda_funcs[0] != NULL;
    case TFC_DEVICE_OPENCL: return cl->opencl_funcs[0] != NULL;
    default: return 0;
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The device ids of the workers of a kind, distinct and ascending: device index i of the kind
 * is devids[i]. Returns their count. */
static int kind_devids(enum starpu_worker_archtype arch, int *devids)
{
    int n = 0;
    unsigned nw = starpu_worker_get_count();
    for (unsigned w = 0; w < nw && n < STARPU_NMAXWORKERS; w++) {
        if (starpu_worker_get_type((int)w) != arch) continue;
        int d = starpu_worker_get_devid((int)w), seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = devids[i] == d;
        if (!seen) devids[n++] = d;
    }
    qsort(devids, (size_t)n, sizeof *devids, cmp_int);
    return n;
}

tfc_status tfc_placement_resolve(struct step *st, const struct tfc_node *n, uint32_t hook_where,
                                 char *msg)
{
    st->where = hook_where;
    st->soft_fallback = 0;
    free(st->workerids);
    st->workerids = NULL;
    st->workerids_len = 0;
    const struct tfc_device_hint *h = &n->device;
    if (hook_where || h->kind == TFC_DEVICE_ANY) return TFC_OK;

    enum starpu_worker_archtype arch = arch_of(h->kind);
    int running = starpu_is_initialized();
    int n_workers = running ? starpu_worker_get_count_by_type(arch) : 0;
    int devids[STARPU_NMAXWORKERS], n_dev = running ? kind_devids(arch, devids) : 0;
    char why[256] = "", dev[32];
    tfc_device_str(h, dev, sizeof dev);
    if (n_workers <= 0)
        snprintf(why, sizeof why, "StarPU runs no %s worker (see STARPU_NCPU, STARPU_NCUDA, "
                 "STARPU_NOPENCL, STARPU_OPENCL_ON_CPUS)", kind_name(h->kind));
    else if (h->index >= n_dev)
        snprintf(why, sizeof why, "no %s device %d: StarPU uses %d %s device%s",
                 kind_name(h->kind), h->index, n_dev, kind_name(h->kind), n_dev == 1 ? "" : "s");
    else if (!has_impl(st->cl, h->kind) ||
             (h->kind == TFC_DEVICE_OPENCL && !tfc_opencl_supports(st->cl, st->args)))
        snprintf(why, sizeof why, "its codelet '%s' has no %s implementation",
                 st->cl->name ? st->cl->name : "?", kind_name(h->kind));
    if (why[0]) {
        if (h->hard)
            return tfc_fail(msg, TFC_ERR_NO_DEVICE,
                            "node '%s' (%s): hard device '%s' cannot be satisfied: %s", n->name,
                            n->op->name, dev, why);
        st->soft_fallback = 1;
        snprintf(msg, TFC_MSG_LEN, "node '%s' (%s): soft device '%s' not satisfied (%s); any "
                 "worker may run it", n->name, n->op->name, dev, why);
        return TFC_OK;
    }
    st->where = mask_of(h->kind);
    if (h->index < 0) return TFC_OK;
    unsigned nw = starpu_worker_get_count(), len = (nw + 31) / 32;
    st->workerids = calloc(len ? len : 1, sizeof *st->workerids);
    if (!st->workerids) return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "no memory for the plan");
    st->workerids_len = len;
    for (unsigned w = 0; w < nw; w++)
        if (starpu_worker_get_type((int)w) == arch &&
            starpu_worker_get_devid((int)w) == devids[h->index])
            st->workerids[w / 32] |= 1u << (w % 32);
    return TFC_OK;
}

void tfc_placement_warn(struct plan *p, const char *why)
{
    size_t have = p->warning ? strlen(p->warning) : 0, add = strlen(why);
    if (have >= TFC_MSG_LEN) return; /* long enough: the count is in the stats */
    char *w = realloc(p->warning, have + add + 3);
    if (!w) return;
    if (have) {
        memcpy(w + have, "; ", 2);
        have += 2;
    }
    memcpy(w + have, why, add + 1);
    p->warning = w;
}
