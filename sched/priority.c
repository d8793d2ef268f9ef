/* priority.c: task priorities from the graph. When a plan is built, every step gets a cost
 * (the expected time of its task: a calibrated history-based perfmodel where one is loaded and
 * the scheduler reads models, else the analytic cost of codelets/perfmodel.c from the flops and
 * bytes of its kernel arguments), a rank (the longest path of costs from the step to the end of
 * the plan, its own cost included: HEFT's upward rank) and a StarPU priority (the rank mapped
 * linearly into the scheduler's [min, max] priority range, the highest rank to max). The edges
 * are those StarPU's sequential consistency derives from the buffers, so the ranks see exactly
 * the dependencies the run will have. Cached runs reuse the priorities: they cost nothing. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "plan.h"

/* Nominal host copy rate of a fetch (the acquire that ends a run), bytes per us. */
#define FETCH_BYTES_PER_US 1e4

/* ---- costs ------------------------------------------------------------------------------ */

static const enum starpu_worker_archtype archs[] = {STARPU_CPU_WORKER, STARPU_CUDA_WORKER,
                                                    STARPU_OPENCL_WORKER};
static const uint32_t arch_masks[] = {STARPU_CPU, STARPU_CUDA, STARPU_OPENCL};

static int codelet_runs_on(const struct starpu_codelet *cl, int a)
{
    if (cl->where && !(cl->where & arch_masks[a])) return 0;
    return a == 0 ? cl->cpu_funcs[0] != NULL : a == 1 ? cl->cuda_funcs[0] != NULL
                                                      : cl->opencl_funcs[0] != NULL;
}

/* The mean over the kinds of worker that may run the step of the calibrated history of its
 * footprint there; NAN when none is calibrated. Only for loaded history-based models under a
 * policy that reads models: StarPU's own lookup (locked, public) is what the scheduler calls
 * for the same task at submission, so it changes nothing the run would not change anyway
 * (an uncalibrated entry makes StarPU force calibration, as the scheduler does). */
static double history_cost(const struct step *st)
{
    struct starpu_perfmodel *m = st->cl->model;
    if (!m || m->type != STARPU_HISTORY_BASED || !m->is_loaded || !starpu_is_initialized())
        return NAN;
    double sum = 0;
    int n = 0;
    unsigned nw = starpu_worker_get_count();
    for (int a = 0; a < 3; a++) {
        if ((st->where && !(st->where & arch_masks[a])) || !codelet_runs_on(st->cl, a)) continue;
        int worker = -1;
        for (unsigned w = 0; w < nw && worker < 0; w++)
            if (starpu_worker_get_type((int)w) == archs[a] &&
                (!st->workerids || (st->workerids[w / 32] >> (w % 32) & 1u)))
                worker = (int)w;
        if (worker < 0) continue;
        struct starpu_perfmodel_arch *arch =
            starpu_worker_get_perf_archtype(worker, STARPU_NMAX_SCHED_CTXS);
        double v = arch ? starpu_perfmodel_history_based_expected_perf(m, arch, st->args->footprint)
                        : NAN;
        if (!isnan(v) && v >= 0) {
            sum += v;
            n++;
        }
    }
    return n ? sum / n : NAN;
}

static double step_cost(const struct step *st, const struct plan_options *opt)
{
    if (opt && opt->model_lookup) {
        double h = history_cost(st);
        if (!isnan(h)) return h;
    }
    struct starpu_task t; /* tfc_model_analytic_cost reads the kernel arguments only */
    memset(&t, 0, sizeof t);
    t.cl = st->cl;
    t.cl_arg = st->args;
    return tfc_model_analytic_cost(&t, 0);
}

/* ---- the steps a run waits for -------------------------------------------------------------- */

void tfc_plan_mark_sinks(struct plan *p)
{
    /* backwards: per slot, whether a later step reads it / writes it */
    char *later_r = calloc((size_t)p->n_slots + 1, 1), *later_w = calloc((size_t)p->n_slots + 1, 1);
    p->n_signals = 0;
    for (int i = p->n_steps - 1; i >= 0; i--) {
        struct step *st = &p->steps[i];
        int waited_for = 0;
        for (int j = 0; later_r && later_w && j < st->n_buf && !waited_for; j++) {
            int s = st->buf_slot[j];
            waited_for = later_w[s] || ((st->modes[j] & STARPU_W) && later_r[s]);
        }
        st->signals = !waited_for || st->buf_part != NULL; /* (out of memory: every step) */
        p->n_signals += st->signals;
        for (int j = 0; later_r && later_w && j < st->n_buf; j++) {
            if (st->modes[j] & STARPU_W) later_w[st->buf_slot[j]] = 1;
            if (st->modes[j] & STARPU_R) later_r[st->buf_slot[j]] = 1;
        }
    }
    free(later_r);
    free(later_w);
}

/* ---- ranks ------------------------------------------------------------------------------ */

struct edge {
    int from, to;
};

/* The edges StarPU's sequential consistency derives from the steps' buffers, in steps' order
 * (sorted by `to`): a reader after the last writer of its slot, a writer after the last writer
 * and every reader since. last_writer[s] is left as slot s's last writer (-1: none). Returns
 * the number of edges, or -1 when out of memory. */
static int data_edges(const struct plan *p, int *last_writer, struct edge *edges)
{
    int S = p->n_slots, A = 0;
    for (int i = 0; i < p->n_steps; i++) A += p->steps[i].n_buf;
    int *reader_head = malloc(sizeof(int) * (size_t)(S + 1));
    int *reader_step = malloc(sizeof(int) * (size_t)(A + 1));
    int *reader_next = malloc(sizeof(int) * (size_t)(A + 1));
    int E = 0, R = 0;
    if (!reader_head || !reader_step || !reader_next) E = -1;
    for (int s = 0; E >= 0 && s < S; s++) last_writer[s] = reader_head[s] = -1;
    for (int i = 0; E >= 0 && i < p->n_steps; i++) {
        const struct step *st = &p->steps[i];
        for (int j = 0; j < st->n_buf; j++) {
            int s = st->buf_slot[j];
            if (last_writer[s] >= 0 && last_writer[s] != i)
                edges[E++] = (struct edge){last_writer[s], i}; /* RAW, WAW */
            if (st->modes[j] & STARPU_W) {
                for (int r = reader_head[s]; r >= 0; r = reader_next[r]) /* WAR */
                    if (reader_step[r] != i) edges[E++] = (struct edge){reader_step[r], i};
                reader_head[s] = -1;
                last_writer[s] = i;
            } else {
                reader_step[R] = i;
                reader_next[R] = reader_head[s];
                reader_head[s] = R++;
            }
        }
    }
    free(reader_head); free(reader_step); free(reader_next);
    return E;
}

/* Each step's cost and rank (its cost plus the longest path after it, the copy of a fetched
 * value to the host included); returns the largest rank. best: zeroed, one per step. */
static double rank_steps(struct plan *p, const struct plan_options *opt, const int *last_writer,
                         const struct edge *edges, int E, double *best)
{
    for (int f = 0; f < p->n_fetches; f++) { /* fetched values are copied after their writer */
        int s = p->fetch_slot[f], w = s >= 0 ? last_writer[s] : -1;
        if (w < 0) continue;
        double copy = (double)p->slots[s].numel * (double)tfc_dtype_size(p->slots[s].desc.dtype) /
                      FETCH_BYTES_PER_US;
        if (copy > best[w]) best[w] = copy;
    }
    /* steps are in a topological order (edges go forward), and edges are sorted by `to` */
    double max_rank = 0;
    for (int i = p->n_steps - 1, e = E - 1; i >= 0; i--) {
        struct step *st = &p->steps[i];
        st->cost = step_cost(st, opt);
        st->rank = st->cost + best[i];
        if (st->rank > max_rank) max_rank = st->rank;
        for (; e >= 0 && edges[e].to == i; e--)
            if (st->rank > best[edges[e].from]) best[edges[e].from] = st->rank;
    }
    return max_rank;
}

/* Whether every step depends on the one before (edges sorted by `to`). */
static int steps_form_chain(int N, const struct edge *edges, int E)
{
    int chain = 1;
    for (int i = 1, e = 0; i < N && chain; i++) {
        int from_prev = 0;
        for (; e < E && edges[e].to <= i; e++)
            from_prev |= edges[e].to == i && edges[e].from == i - 1;
        chain = from_prev;
    }
    return chain;
}

int tfc_plan_priorities(struct plan *p, const struct plan_options *opt)
{
    int N = p->n_steps, A = 0;
    for (int i = 0; i < N; i++) A += p->steps[i].n_buf;
    int *last_writer = malloc(sizeof(int) * (size_t)(p->n_slots + 1));
    /* each access adds at most one edge from the last writer, and each reader entry is
     * consumed by at most one later writer */
    struct edge *edges = malloc(sizeof *edges * (size_t)(2 * A + 1));
    double *best = calloc((size_t)N + 1, sizeof *best);
    int E = last_writer && edges && best ? data_edges(p, last_writer, edges) : -1;
    if (E < 0) {
        free(last_writer); free(edges); free(best);
        return -1;
    }
    double max_rank = rank_steps(p, opt, last_writer, edges, E, best);
    /* Priorities only order tasks that are ready at once. When every step depends on the one
     * before, never two are: all keep priority 0, the cheapest in StarPU's queues (a non-zero
     * priority makes a queue stage that is allocated and freed around each task when the
     * queue holds one at a time). */
    int on = opt && opt->priorities && opt->prio_min < opt->prio_max && max_rank > 0 &&
             !steps_form_chain(N, edges, E);
    /* ranks map onto [lo, max], lo = 0 when the range holds 0 (prio, lws, dmdas): the least
     * critical tasks, usually the most numerous, get 0 */
    int lo = on && opt->prio_min < 0 && opt->prio_max > 0 ? 0 : on ? opt->prio_min : 0;
    int hi = on ? opt->prio_max : 0;
    for (int i = 0; i < N; i++) {
        struct step *st = &p->steps[i];
        double v = on ? nearbyint(lo + st->rank / max_rank * ((double)hi - lo)) : 0;
        st->priority = v <= lo ? lo : v >= hi ? hi : (int)v;
    }
    free(last_writer); free(edges); free(best);
    return 0;
}
