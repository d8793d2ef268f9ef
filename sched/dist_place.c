/* dist_place.c: splitting a plan across MPI ranks by "rank:R" hints (model parallelism; the
 * rules are in dist_place.h). At plan time it gives each step a rank and follows, slot by
 * slot, which ranks hold the current value, adding a transfer where a step reads a value its
 * rank does not hold. The transfers themselves are StarPU-MPI's (sched/dist_place_mpi.c). */
#include <stdlib.h>
#include <string.h>
#ifdef HAVE_CONFIG_H /* configure's; scripts/fuzz.sh builds without it: then no MPI */
#include "config.h"
#endif
#include "dist_place.h"

typedef unsigned long long rankset; /* bit r: rank r holds the slot's current value */
#define MP_MAX_RANKS 64
/* Tags of split runs: above those of sched/dist_mpi.c (a counter from 1), 2^20 per run. */
#define MP_TAG_BASE ((int64_t)1 << 40)
#define MP_TAG_PER_RUN ((int64_t)1 << 20)

static int is_variable(const tfc_graph *g, const struct slot *sl)
{
    return sl->kind == SLOT_PERSIST && g->nodes[sl->ref]->op == &tfc_op_variable;
}

static int hint_rank(const struct tfc_node *n)
{
    return n->device.has_rank ? n->device.rank : 0;
}

/* The rank a step runs on: its node's hint; without one, the rank of a variable it writes, or
 * rank 0. */
static int step_rank(const struct plan *p, const tfc_graph *g, const struct step *st)
{
    const struct tfc_node *n = g->nodes[st->node];
    if (n->device.has_rank) return n->device.rank;
    for (int j = 0; j < st->n_buf; j++) {
        const struct slot *sl = &p->slots[st->buf_slot[j]];
        if ((st->modes[j] & STARPU_W) && is_variable(g, sl)) return hint_rank(g->nodes[sl->ref]);
    }
    return 0;
}

/* The hints against the job. */
static tfc_status check_hints(const tfc_graph *g, int size, int distributed, char *msg)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const struct tfc_node *n = g->nodes[i];
        if (!n->device.has_rank) continue;
        int r = n->device.rank;
        char dev[48];
        tfc_device_str(&n->device, dev, sizeof dev);
        if (r > 0 && g->n_cflow_nodes)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "node '%s': placement '%s': a graph with control flow (cond, while) "
                            "is not supported across ranks (use rank:0 or no rank)", n->name, dev);
        if (r > 0 && !distributed)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "node '%s': placement '%s' names rank %d, but %s", n->name, dev, r,
                            tfc_dist_available()
                                ? "the context is not distributed (tfc_ctx_create_dist with "
                                  "TFC_DIST_MPI, under mpirun with more than one rank): only "
                                  "rank:0 is allowed"
                                : "the library is built without MPI (configure --enable-mpi): "
                                  "only rank:0 is allowed");
        if (r >= size)
            return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT,
                            "node '%s': placement '%s' names rank %d, but the job has %d rank%s "
                            "(0 to %d)", n->name, dev, r, size, size == 1 ? "" : "s", size - 1);
    }
    return TFC_OK;
}

static int add_comm(struct mp_plan *mp, int *cap, int slot, int from, int to)
{
    if (mp->n_comms == *cap) {
        int c = *cap ? *cap * 2 : 16;
        struct mp_comm *m = realloc(mp->comms, sizeof *m * (size_t)c);
        if (!m) return -1;
        mp->comms = m;
        *cap = c;
    }
    mp->comms[mp->n_comms++] = (struct mp_comm){slot, from, to};
    return 0;
}

static int lowest(rankset s)
{
    return __builtin_ctzll(s);
}

/* What a run starts with: feeds, constants and folded values everywhere, a variable on its
 * rank, intermediates nowhere. */
static void initial_holders(const struct plan *p, const tfc_graph *g, int size, rankset *h)
{
    rankset all = size >= MP_MAX_RANKS ? ~0ULL : (1ULL << size) - 1;
    for (int s = 0; s < p->n_slots; s++) {
        const struct slot *sl = &p->slots[s];
        h[s] = sl->kind == SLOT_TEMP ? 0
             : is_variable(g, sl)    ? 1ULL << hint_rank(g->nodes[sl->ref])
                                     : all;
    }
}

/* Walks the steps in order: a read on a rank without the value gets a transfer from a holder
 * first; a write leaves the value on the writer's rank alone. */
static int walk_steps(struct mp_plan *mp, const struct plan *p, const tfc_graph *g, rankset *h,
                      int *cap)
{
    for (int i = 0; i < p->n_steps; i++) {
        const struct step *st = &p->steps[i];
        int r = step_rank(p, g, st);
        mp->comm_at[i] = mp->n_comms;
        mp->local[i] = r == mp->me;
        mp->n_local_steps += mp->local[i];
        for (int j = 0; j < st->n_buf; j++) {
            int s = st->buf_slot[j];
            if (!(st->modes[j] & STARPU_R) || (h[s] >> r & 1) || !h[s]) continue;
            if (add_comm(mp, cap, s, lowest(h[s]), r)) return -1;
            h[s] |= 1ULL << r;
        }
        for (int j = 0; j < st->n_buf; j++)
            if (st->modes[j] & STARPU_W) h[st->buf_slot[j]] = 1ULL << r;
    }
    return 0;
}

/* After the last step: variables back to their rank, fetched values to every rank. */
static int finish_comms(struct mp_plan *mp, const struct plan *p, const tfc_graph *g,
                        rankset *h, int *cap)
{
    mp->comm_at[p->n_steps] = mp->n_comms;
    for (int s = 0; s < p->n_slots; s++) {
        if (!is_variable(g, &p->slots[s]) || !h[s]) continue;
        int home = hint_rank(g->nodes[p->slots[s].ref]);
        if (!(h[s] >> home & 1)) {
            if (add_comm(mp, cap, s, lowest(h[s]), home)) return -1;
            h[s] |= 1ULL << home;
        }
    }
    for (int f = 0; f < p->n_fetches; f++) {
        int s = p->fetch_slot[f];
        for (int r = 0; r < mp->size && h[s]; r++) {
            if (h[s] >> r & 1) continue;
            if (add_comm(mp, cap, s, lowest(h[s]), r)) return -1;
            h[s] |= 1ULL << r;
        }
    }
    mp->comm_at[p->n_steps + 1] = mp->n_comms;
    return 0;
}

static void count_local(struct mp_plan *mp, const struct plan *p)
{
    for (int c = 0; c < mp->n_comms; c++) {
        const struct mp_comm *m = &mp->comms[c];
        if (m->from == mp->me)
            mp->bytes_sent += (uint64_t)p->slots[m->slot].numel *
                              tfc_dtype_size(p->slots[m->slot].desc.dtype);
        mp->n_local_comms += m->from == mp->me || m->to == mp->me;
    }
}

int tfc_mp_splits(const tfc_graph *g, int size)
{
    if (size <= 1 || g->n_cflow_nodes) return 0;
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i]->device.has_rank) return 1;
    return 0;
}

tfc_status tfc_mp_plan(struct plan *p, const tfc_graph *g, int rank, int size, int distributed,
                       char *msg)
{
    tfc_status st = check_hints(g, size, distributed, msg);
    if (st || !tfc_mp_splits(g, size)) return st;
    if (size > MP_MAX_RANKS)
        return tfc_fail(msg, TFC_ERR_INVALID_ARGUMENT, "rank placement: %d ranks, at most %d "
                        "can split a graph", size, MP_MAX_RANKS);
    if (p->n_parts) /* lowering tiles no split plan (opt->mp_split): a guard */
        return tfc_fail(msg, TFC_ERR_INTERNAL, "rank placement: the plan has tiled nodes, "
                        "which a plan split across ranks cannot send");
    struct mp_plan *mp = calloc(1, sizeof *mp);
    rankset *h = malloc(sizeof *h * (size_t)(p->n_slots + 1));
    int cap = 0;
    if (mp) {
        mp->me = rank;
        mp->size = size;
        mp->n_steps = p->n_steps;
        mp->local = calloc((size_t)p->n_steps + 1, 1);
        mp->comm_at = calloc((size_t)p->n_steps + 2, sizeof *mp->comm_at);
    }
    if (!mp || !h || !mp->local || !mp->comm_at) goto oom;
    initial_holders(p, g, size, h);
    if (walk_steps(mp, p, g, h, &cap) || finish_comms(mp, p, g, h, &cap)) goto oom;
    count_local(mp, p);
    free(h);
    p->mp = mp;
    return TFC_OK;
oom:
    free(h);
    tfc_mp_free(mp);
    return tfc_fail(msg, TFC_ERR_OUT_OF_MEMORY, "rank placement: no memory for the plan");
}

void tfc_mp_free(struct mp_plan *mp)
{
    if (!mp) return;
    free(mp->local);
    free(mp->comm_at);
    free(mp->comms);
    free(mp);
}

int64_t tfc_mp_next_run(void)
{
    static int64_t runs;
    return __atomic_fetch_add(&runs, 1, __ATOMIC_RELAXED);
}

int tfc_mp_post(const struct mp_plan *mp, int from, int to, int64_t seq, tfc_mp_handle_fn h,
                void *run, void (*done)(void *), void *arg)
{
    int posted = 0;
    for (int c = from; c < to; c++) {
        const struct mp_comm *m = &mp->comms[c];
        if (m->from != mp->me && m->to != mp->me) continue;
        int64_t tag = MP_TAG_BASE + (seq % (MP_TAG_BASE / MP_TAG_PER_RUN)) * MP_TAG_PER_RUN + c;
#ifdef TFC_HAVE_MPI
        if (m->from == mp->me)
            tfc_mp_isend(h(run, m->slot), m->to, tag, done, arg);
        else
            tfc_mp_irecv(h(run, m->slot), m->from, tag, done, arg);
#else
        (void)h, (void)run, (void)tag, (void)done, (void)arg; /* no split plan without MPI */
#endif
        posted++;
    }
    return posted;
}

int tfc_mp_unsent(const struct mp_plan *mp, int i)
{
    int n = 0;
    for (int k = i; k < mp->n_steps; k++) n += mp->local[k];
    for (int c = mp->comm_at[i + 1]; c < mp->n_comms; c++)
        n += mp->comms[c].from == mp->me || mp->comms[c].to == mp->me;
    return n;
}
