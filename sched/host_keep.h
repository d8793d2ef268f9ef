/* host_keep.h: the handles a plain run registers on the caller's memory (its feeds, and the
 * tiles it reads a feed or writes a fetched value through in place), kept by the run's
 * instance for the next run on the same addresses when StarPU's only memory node is host RAM
 * (sched/host_keep.c says why that is safe there and nowhere else). */
#ifndef TFC_HOST_KEEP_H
#define TFC_HOST_KEEP_H

#include <starpu.h>
#include "plan.h"

/* Feed i's handle on data, the caller's buffer: the kept one when it is on data, else a new
 * registration (kept when keeping applies). */
starpu_data_handle_t tfc_host_feed(struct instance *in, const struct plan *p, int i,
                                   void *data);
/* At the end of the run: unregisters h unless the instance keeps it. */
void tfc_host_feed_end(struct instance *in, int i, starpu_data_handle_t h);
/* Partition q's tiles on base (tfc_tiling_register), kept or new as for the feeds; NULL when
 * out of memory. */
starpu_data_handle_t *tfc_host_tiles(struct instance *in, const struct plan *p, int q,
                                     void *base);
void tfc_host_tiles_end(struct instance *in, const struct plan *p, int q,
                        starpu_data_handle_t *tiles);
/* Unregisters what the instance keeps (it is being freed; no run of it is in flight). */
void tfc_host_keep_release(struct instance *in);

#endif
