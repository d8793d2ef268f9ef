/* host_keep.c: an instance's registrations on the caller's memory, kept from one run to the
 * next.
 *
 * A plain run registers handles on host memory it does not own: each feed, and the tiles it
 * reads a feed through or writes a fetched value through in place (plan_part.direct).
 * Registering and unregistering them was two thirds of the caller's time per run of a small
 * row-split plan (an imported MLP at batch 128, perf: starpu_data_unregister waits for the
 * handle's implicit dependencies even when every task is over). When host RAM is StarPU's only
 * memory node, such a handle has no copy of its own: StarPU reads and writes the registered
 * memory only in the run's tasks, so a kept handle is as good as a new one for the next run on
 * the same address (a caller feeding the same buffer again; a fetched value freed and
 * allocated again at the same place), and harmless while unused. With a second memory node (a
 * GPU, OpenCL, a disk) a kept handle could hold a device copy that the caller's writes in
 * between would not reach: each run registers its own there, as before.
 *
 * A kept handle may outlive the caller's buffer (a freed feed, a destroyed fetched value): it
 * is then only ever unregistered, when the next run's address differs or the instance is
 * freed, and unregistering a handle valid on its home node reads nothing. An instance is used
 * by one run at a time, so nothing here needs a lock. */
#include <stdlib.h>
#include "host_keep.h"
#include "testing.h"

struct host_keep {
    void **feed_data;             /* per feed: the address its kept handle is on */
    starpu_data_handle_t *feeds;  /* per feed: the kept handle, or NULL */
    void **tile_base;             /* per plan partition: the address its kept tiles are on */
    starpu_data_handle_t **tiles; /* per plan partition: the kept tiles, or NULL */
    int n_feeds, n_parts;
};

static unsigned long kept_uses; /* tfc_testing_host_kept */

unsigned long tfc_testing_host_kept(void)
{
    return __atomic_load_n(&kept_uses, __ATOMIC_RELAXED);
}

static void keep_free(struct host_keep *k)
{
    free(k->feed_data);
    free(k->feeds);
    free(k->tile_base);
    free(k->tiles);
    free(k);
}

/* The instance's keep, made on first use; NULL where keeping does not apply (or no memory:
 * then every run registers its own). */
static struct host_keep *keep_of(struct instance *in, const struct plan *p)
{
    if (starpu_memory_nodes_get_count() != 1) return NULL;
    if (in->keep) return in->keep;
    struct host_keep *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->n_feeds = p->n_feeds;
    k->n_parts = p->n_parts;
    k->feed_data = calloc((size_t)p->n_feeds + 1, sizeof *k->feed_data);
    k->feeds = calloc((size_t)p->n_feeds + 1, sizeof *k->feeds);
    k->tile_base = calloc((size_t)p->n_parts + 1, sizeof *k->tile_base);
    k->tiles = calloc((size_t)p->n_parts + 1, sizeof *k->tiles);
    if (!k->feed_data || !k->feeds || !k->tile_base || !k->tiles) {
        keep_free(k);
        return NULL;
    }
    return in->keep = k;
}

starpu_data_handle_t tfc_host_feed(struct instance *in, const struct plan *p, int i,
                                   void *data)
{
    struct host_keep *k = keep_of(in, p);
    if (k && k->feeds[i] && k->feed_data[i] == data) {
        __atomic_add_fetch(&kept_uses, 1, __ATOMIC_RELAXED);
        return k->feeds[i];
    }
    if (k && k->feeds[i]) {
        starpu_data_unregister(k->feeds[i]);
        k->feeds[i] = NULL;
    }
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)data,
                                (uint32_t)p->slots[i].numel,
                                tfc_dtype_size(p->slots[i].desc.dtype));
    if (k) {
        k->feeds[i] = h;
        k->feed_data[i] = data;
    }
    return h;
}

void tfc_host_feed_end(struct instance *in, int i, starpu_data_handle_t h)
{
    if (in && in->keep && in->keep->feeds[i] == h) return;
    starpu_data_unregister(h);
}

starpu_data_handle_t *tfc_host_tiles(struct instance *in, const struct plan *p, int q,
                                     void *base)
{
    struct host_keep *k = keep_of(in, p);
    if (k && k->tiles[q] && k->tile_base[q] == base) {
        __atomic_add_fetch(&kept_uses, 1, __ATOMIC_RELAXED);
        return k->tiles[q];
    }
    if (k && k->tiles[q]) {
        tfc_tiling_unregister(p, q, k->tiles[q]);
        k->tiles[q] = NULL;
    }
    starpu_data_handle_t *tiles = tfc_tiling_register(p, q, base);
    if (k && tiles) {
        k->tiles[q] = tiles;
        k->tile_base[q] = base;
    }
    return tiles;
}

void tfc_host_tiles_end(struct instance *in, const struct plan *p, int q,
                        starpu_data_handle_t *tiles)
{
    if (in->keep && in->keep->tiles[q] == tiles) return;
    tfc_tiling_unregister(p, q, tiles);
}

void tfc_host_keep_release(struct instance *in)
{
    struct host_keep *k = in->keep;
    if (!k) return;
    for (int i = 0; i < k->n_feeds; i++)
        if (k->feeds[i]) starpu_data_unregister(k->feeds[i]);
    for (int q = 0; q < k->n_parts; q++)
        if (k->tiles[q]) tfc_tiling_unregister(in->plan, q, k->tiles[q]);
    keep_free(k);
    in->keep = NULL;
}
