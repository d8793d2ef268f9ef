/* dist_workers.c: where this process's StarPU workers run (issue 15, item 6): for `tfc info
 * --topology` and for checking a rank's binding on a cluster node, since StarPU 1.3 binds its
 * workers itself and ignores the launcher's binding unless STARPU_WORKERS_GETBIND=1. */
#include <stdio.h>
#include <starpu.h>
#include "../src/internal.h"

int tfc_ctx_workers(const tfc_ctx *ctx, tfc_worker_info *out, int capacity)
{
    if (!ctx) return 0;
    int n = (int)starpu_worker_get_count();
    for (int w = 0; w < n && w < capacity && out; w++) {
        tfc_worker_info *i = &out[w];
        i->id = w;
        starpu_worker_get_name(w, i->name, sizeof i->name);
        snprintf(i->kind, sizeof i->kind, "%s",
                 starpu_worker_get_type_as_string(starpu_worker_get_type(w)));
        i->bind_pu = starpu_worker_get_bindid(w);
        i->memory_node = (int)starpu_worker_get_memory_node((unsigned)w);
    }
    return n;
}
