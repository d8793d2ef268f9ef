/* plan.h: a plan is the lowered form of one run key (feeds with their concrete shapes,
 * fetches, targets): value slots, the ordered task steps with their access modes, and what to
 * check before submitting. Instances hold the StarPU handles of a plan's intermediates, one
 * instance per concurrent run. Only sched/ sees these structures. */
#ifndef TFC_PLAN_H
#define TFC_PLAN_H

#include <pthread.h>
#include <starpu.h>
#include "../graph/graph.h"
#include "../codelets/kernel.h"

enum slot_kind {
    SLOT_TEMP,    /* an intermediate: one handle per instance, allocated by StarPU */
    SLOT_FEED,    /* a fed value: the caller's buffer, registered for the run */
    SLOT_PERSIST, /* a variable or a constant: the session's handle */
    SLOT_EMPTY,   /* zero elements: never reaches StarPU */
    SLOT_CONST,   /* a value folded at plan time (sched/passes.c): host data and handle owned
                   * by the plan, read-only, shared by its instances */
};

struct slot {
    enum slot_kind kind;
    struct tfc_desc desc;  /* concrete */
    int64_t numel;
    int ref;               /* FEED: feed index; PERSIST: node id */
    void *cdata;           /* CONST: the folded value (starpu_malloc) */
    starpu_data_handle_t ch; /* CONST: its handle, when a step reads it */
};

struct step {
    struct starpu_codelet *cl;
    int node;              /* node id (the snapshot and hop steps name their source node) */
    int n_buf;
    int *buf_slot;         /* slot of each task buffer */
    enum starpu_data_access_mode *modes;
    struct tfc_kargs *args;/* template; instances copy it with their own error slot */
    size_t args_size;
    uint32_t where;        /* 0, or a STARPU_* worker mask the task is pinned to */
    uint32_t *workerids;   /* NULL, or the bitmap of workers allowed (placement on one device) */
    unsigned workerids_len;/* uint32_t words in workerids */
    int soft_fallback;     /* 1: the node's soft placement hint could not be honoured */
    double cost;           /* estimated time, us (calibrated history or analytic) */
    double rank;           /* critical path to the end of the plan, us (cost included) */
    int priority;          /* StarPU priority: rank mapped into the scheduler's range */
    /* tiling (sched/tiling.c): a tile task of a node split into several */
    int *buf_part;         /* NULL, or per buffer: the plan partition (plan->parts) whose child
                            * the task uses instead of the slot's handle */
    int *buf_child;        /* per buffer: that child's index */
    int parts_when;        /* TILE_PARTITION: submit the partitions whose first tile task this
                            * is before it; TILE_UNPARTITION: end those whose last it is after */
    int signals;           /* 1: its task's callback counts the run down (tfc_plan_mark_sinks) */
    int on_worker;         /* 0, or 1 + the CPU worker that runs the task (tfc_pin_chain) */
};

enum { TILE_PARTITION = 1, TILE_UNPARTITION = 2 };

/* One partition of a slot into 2-D tiles (StarPU's asynchronous partitioning: planned,
 * submitted, unpartitioned and cleaned by each run, around the tasks of one node). */
struct plan_part {
    int slot;
    int readonly;          /* an input: starpu_data_partition_readonly_submit */
    int64_t rows, cols;    /* the slot as a row-major 2-D array */
    int64_t tr, tc;        /* tile rows and columns (the last tile of each may be smaller) */
    int nr, nc;            /* grid: child id = r * nc + c */
    int first, last;       /* the steps that use its tiles first and last */
    int kept;              /* an intermediate that only these tiles touch (never whole, not
                            * fetched): partitioned once per instance and left so between runs */
    int direct;            /* DIRECT_*: a plain run registers the tiles on host memory itself
                            * (no partitioning) and unregisters them when it ends, else 0 */
    int fetch;             /* DIRECT_FETCH: the fetch whose value its tiles write */
};

enum {
    DIRECT_FEED = 1,  /* a feed's tiles, on the caller's buffer */
    DIRECT_FETCH = 2, /* an intermediate fetched once and only tiles touch: on the fetched value */
};

struct instance;
struct host_keep;

struct plan {
    /* key */
    uint64_t hash;
    uint64_t graph_version;
    int n_feeds, n_fetches, n_targets;
    tfc_tensor **feeds, **fetches, **targets;
    tfc_shape *feed_shapes;
    /* lowered form */
    int n_slots;
    struct slot *slots;
    int n_steps;
    struct step *steps;
    int *fetch_slot;
    char *fetch_in_place;  /* NULL, or per fetch: its value is written by a DIRECT_FETCH
                            * partition's tiles (no copy out; sched/tiling.c mark_direct) */
    int n_var_checks, n_var_writes;
    int *var_checks;       /* variables read before any write: must be initialized */
    int *var_writes;       /* variables the plan assigns (initialized once submitted) */
    int n_soft_fallbacks;  /* steps whose soft placement hint fell back to any worker */
    int n_parts;           /* tiling: partitions the runs submit (sched/tiling.c) */
    struct plan_part *parts;
    int n_tiled;           /* nodes split into tile tasks */
    int n_signals;         /* steps with signals set */
    char *warning;         /* NULL, or what the runs of this plan report (soft fallbacks) */
    struct mp_plan *mp;    /* NULL, or the plan split across MPI ranks (sched/dist_place.c) */
    /* cache bookkeeping (under the session lock) */
    struct instance *free_instances;
    int running;           /* runs using an instance now */
    int evicted;           /* out of the cache: freed when the last run ends */
    struct plan *prev, *next;
};

struct instance {
    struct plan *plan;
    starpu_data_handle_t *handles; /* per slot; TEMP slots only */
    void **bufs;                   /* per slot: the host buffer of a TEMP slot that tiling
                                    * partitions (registered on it: home node 0), else NULL */
    starpu_data_handle_t **parts;  /* per plan partition of a TEMP slot: its tiles, planned
                                    * by the first run that uses it and kept (planning and
                                    * cleaning cost more per run than the tasks of a small
                                    * split plan); NULL until then and for other slots */
    char *args;                    /* copies of every step's kargs */
    size_t *args_off;              /* offset of step i's kargs in args */
    struct tfc_kerr err;
    struct host_keep *keep;        /* NULL, or the handles its runs registered on the caller's
                                    * memory, kept for the next run (sched/host_keep.c) */
    struct instance *next_free;
};

/* Options the session passes to lowering and the plan passes (sched/session.c reads them from
 * the environment and owns the setters; the passes only read them). */
struct plan_options {
    int hop;               /* test hook: copy every produced value through the hop codelet */
    uint32_t hop_where;    /* worker mask for the hop tasks */
    uint32_t where;        /* test hook: worker mask for every op task (0: any; it overrides
                            * placement hints, and so does hop_where for the hop tasks) */
    int priorities;        /* map ranks into [prio_min, prio_max]; 0: every priority is 0 */
    int prio_min, prio_max;/* the scheduler's range, read when the session is created */
    int model_lookup;      /* the policy reads perfmodels (dm*, *heft*): use calibrated
                            * history-based models for step costs where they are loaded */
    double tile_min;       /* tiling: least flops of a matmul split into tiles; 0: off */
    int tile_size;         /* tile edge (elements); 0: chosen per node from tile_workers */
    int tile_workers;      /* workers tiles are shared among (tfc_tile_sharing_workers) */
    int cse, const_fold, fusion; /* plan-time passes (sched/passes.c); 0 when opt is NULL */
    int pin_chains;        /* tfc_pin_chain (sched/passes.c) */
    int64_t rows_min;      /* least batch rows of a plan split into one chain of rows per CPU
                            * worker (sched/tiling_rows.c, TFC_ROW_SPLIT_MIN); 0: never */
    int mp_rank;           /* this process's MPI rank: nodes hinted to another rank are not
                            * placed on this rank's workers (sched/dist_place.c) */
    int mp_split;          /* the plan is split across ranks (tfc_mp_splits): no tiling and
                            * no row split, whatever tile_min and rows_min say */
};

/* Whether partition q stays partitioned between the runs of an instance (sched/run.c
 * partitions it at the first, tfc_instance_free ends it): kept by the tiling pass, and the
 * plan not split across MPI ranks (transfers may read the slot whole). */
static inline int tfc_part_kept(const struct plan *p, int q)
{
    return p->parts[q].kept && !p->mp;
}

/* Builds a plan for the key; on error returns NULL with status and message. The session's
 * persistent handles are not touched here. */
struct plan *tfc_plan_build(tfc_graph *g, int n_feeds, tfc_tensor *const *feeds,
                            tfc_value *const *feed_values, int n_fetches,
                            tfc_tensor *const *fetches, int n_targets,
                            tfc_tensor *const *targets, const struct plan_options *opt,
                            tfc_status *status, char *msg);
void tfc_plan_free(struct plan *p);
uint64_t tfc_plan_key_hash(int n_feeds, tfc_tensor *const *feeds, tfc_value *const *feed_values,
                           int n_fetches, tfc_tensor *const *fetches, int n_targets,
                           tfc_tensor *const *targets);
/* sched/priority.c: sets every step's cost, rank and priority (plan build time). The data
 * edges are those StarPU's sequential consistency derives from the steps' buffers: a reader
 * after the last writer of its slot, a writer after the last writer and every reader since. */
int tfc_plan_priorities(struct plan *p, const struct plan_options *opt);

/* sched/placement.c: resolves the placement of one step from the node's hint (and the test
 * hooks), setting where, workerids and soft_fallback; returns nonzero with status and message
 * (naming the node and device) when a hard hint cannot be satisfied. */
tfc_status tfc_placement_resolve(struct step *st, const struct tfc_node *n, uint32_t hook_where,
                                 char *msg);
/* Appends a soft-fallback message to the plan's warning (plan->warning). */
void tfc_placement_warn(struct plan *p, const char *why);

/* sched/tiling.c: the tiling pass (after priorities): splits each large matmul step into tile
 * steps over partitions of its operands (output tiles, or chunks of k and a sum), and the
 * element-wise steps and reductions that read its tiles next. Nonzero when out of memory. */
int tfc_plan_tile(struct plan *p, const struct plan_options *opt);
/* sched/tiling_rows.c: the number of blocks (one per CPU worker) and the batch rows of plan p,
 * when every step of it is row-wise over at least opt->rows_min rows and the machine has 2 or
 * more CPU workers and no device; else 0. */
int tfc_rows_split_of(const struct plan *p, const struct plan_options *opt, int64_t *rows);
/* sched/chain_blocks.c: each group of consecutive nodes split over the same nt blocks (with any
 * set, every step of a row-split plan; else a group that starts with a convolution or pooling
 * over blocks of images, with their bias + ReLU and the next layers), whose tile steps of block t touch only block t of their partitions
 * and read their other buffers, becomes nt chain tasks (codelets/chain.h), the intermediates
 * only the group's tiles touch (plan_part.kept) in the worker's scratch and their partitions
 * dropped. With epilogues set, a matmul and the bias add after it become one step of their
 * chain (sched/chain_epilogue.h). 0 (also when there is no such group), or -1 when out of
 * memory (plan unchanged). */
int tfc_chain_blocks(struct plan *p, int any, int epilogues);
/* A plan pinned to one worker (sched/passes.c tfc_pin_chain) as one chain task pinned there:
 * its steps' kernels in turn, the per-run intermediates it does not fetch in the worker's
 * scratch (sched/chain_blocks.c). Out of memory, or with more than 8 MiB of intermediates,
 * the plan keeps its tasks. epilogues: as tfc_chain_blocks's. */
void tfc_chain_pinned(struct plan *p, int epilogues);
/* The descriptors of step st (bit i: descriptor i) that split over m batch rows, or 0 when st
 * does not compute each row of its outputs from the same rows of its inputs. */
unsigned tfc_rows_operands(const struct plan *p, const struct step *st, int64_t m);
/* sched/priority.c: marks the steps whose completion a run waits for (step->signals): those
 * no later step waits for through StarPU's data dependencies (no later conflicting access to a
 * slot), and tile tasks (their children do not order them by slot). Every other step ends
 * before one of those starts, so a run is over when they are. */
void tfc_plan_mark_sinks(struct plan *p);
/* Whether the tiling pass will split step st (a large 2-D matmul, or a convolution or pooling
 * op over its batch, whose output it then holds in tiles) with these options. */
int tfc_tiling_splits(const struct plan *p, const struct step *st, const struct plan_options *opt);
/* Whether slot is partitioned by some step (a TEMP slot then needs a home buffer: StarPU 1.3
 * cannot partition lazily allocated data asynchronously). */
int tfc_tiling_is_parent(const struct plan *p, int slot);
/* Plans partition q of the plan on parent and submits it; returns the children (freed by
 * tfc_tiling_unpartition), or NULL when out of memory. */
starpu_data_handle_t *tfc_tiling_partition(const struct plan *p, int q,
                                           starpu_data_handle_t parent);
/* Submits the unpartition of partition q, cleans the plan (children unregistered when their
 * tasks end) and frees children. */
void tfc_tiling_unpartition(const struct plan *p, int q, starpu_data_handle_t parent,
                            starpu_data_handle_t *children);
/* The two halves of each, for a partition planned once and submitted by many runs (an
 * instance's intermediate: sched/run.c keeps its tiles): plan (children, or NULL when out of
 * memory), submit, end (the unpartition), and clean (after the last end: unregisters and frees
 * the children). */
starpu_data_handle_t *tfc_tiling_plan(const struct plan *p, int q, starpu_data_handle_t parent);
void tfc_tiling_submit(const struct plan *p, int q, starpu_data_handle_t parent,
                       starpu_data_handle_t *children);
void tfc_tiling_end(const struct plan *p, int q, starpu_data_handle_t parent,
                    starpu_data_handle_t *children);
void tfc_tiling_clean(const struct plan *p, int q, starpu_data_handle_t parent,
                      starpu_data_handle_t *children);
/* Partition q's tiles as handles of their own on base, the slot's host data (plan_part.direct):
 * the children (freed by tfc_tiling_unregister, which waits for their tasks), or NULL when out
 * of memory. */
starpu_data_handle_t *tfc_tiling_register(const struct plan *p, int q, void *base);
void tfc_tiling_unregister(const struct plan *p, int q, starpu_data_handle_t *children);
/* sched/'s error path: unless *status already holds a failure (the first one is the one
 * reported; status may be NULL when nothing keeps one), records st in *status and the message
 * in msg (TFC_MSG_LEN bytes); returns st. */
tfc_status tfc_sched_fail(tfc_status *status, char *msg, tfc_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

int tfc_plan_key_equal(const struct plan *p, uint64_t hash, uint64_t version, int n_feeds,
                       tfc_tensor *const *feeds, tfc_value *const *feed_values, int n_fetches,
                       tfc_tensor *const *fetches, int n_targets, tfc_tensor *const *targets);

#endif
