/* passes.h: the plan-time graph passes (sched/passes.c), in pipeline order: common
 * subexpression elimination and constant folding while nodes are lowered, then fusion of
 * element-wise steps into one task each. Each is switched by its plan option (the session's:
 * sched/session.c reads and sets them). */
#ifndef TFC_PASSES_H
#define TFC_PASSES_H

#include "plan.h"

/* CSE: a table of the lowered nodes that are free of state and side effects. lookup returns
 * the id of an earlier node with the same op, attributes, input slots and placement hint as
 * n (its outputs can stand for n's), or -1 after recording n; nodes that read a variable the
 * plan writes never match. needed marks the plan's nodes. NULL when out of memory. */
struct tfc_cse;
struct tfc_cse *tfc_cse_create(tfc_graph *g, const char *needed);
int tfc_cse_lookup(struct tfc_cse *c, const struct plan *p, const struct tfc_node *n,
                   const int *in_slots);
void tfc_cse_free(struct tfc_cse *c);
/* The twin of max_pool node n (one output): a max_pool node of the plan with the same input,
 * attributes and placement hint that outputs the argmax indices too; -1 when none. The plan
 * lowers the twin in n's place, and n's output is the twin's output 0 (the same maxima). */
int tfc_cse_pool_twin(const struct tfc_cse *c, const struct tfc_node *n);

/* Whether node n is a sum_to_like that reduces nothing with the fed shapes (the gradient
 * emits one for each operand of a binary op whose shapes are equal only at run time, as two
 * [batch, units] operands with the batch fed): then its input slot in_slot, a temporary of the
 * run, stands for its output and no task copies it (the same values as a graph whose shapes
 * were known: there the gradient passes dy on unchanged). */
int tfc_sum_is_identity(const struct plan *p, const struct tfc_node *n, int in_slot,
                        const struct tfc_desc *in, const struct tfc_desc *out);

/* Constant folding of the plan's last step (just added for its node): when every buffer it
 * reads is a constant (a constant node or a folded value), its CPU kernel runs now on host
 * buffers, its outputs become SLOT_CONST slots and the step is removed. Returns 1 when
 * folded, 0 when not (including a kernel failure: the run reports it), -1 out of memory. */
int tfc_fold_last_step(struct plan *p, tfc_graph *g, const struct plan_options *opt);
/* Registers the handles of folded values that steps read (end of plan build); frees the
 * folded values and handles (tfc_plan_free). */
void tfc_fold_register(struct plan *p);
void tfc_fold_release(struct plan *p);
/* Once the plan is final (its partitions and rank split made): the constants' handles leave
 * StarPU's implicit dependencies, which cost every task reading one a list entry added at
 * submission and removed at its end. They are only ever read, and unregistered once no run of
 * the plan is in flight; a partitioned one (StarPU partitions only data with sequential
 * consistency) and those of a plan split over ranks keep them. */
void tfc_fold_relax(struct plan *p);

/* Fusion: every single-output chain or tree of element-wise steps (same float dtype, same
 * output shape, same placement; external inputs broadcast) becomes one step of the fused
 * codelet. Intermediates that are fetched or read by later steps stay outputs. Returns -1
 * when out of memory. */
int tfc_fuse_steps(struct plan *p, tfc_graph *g, const struct plan_options *opt);
/* A fused step's footprint, flops and bytes from its operands and program again (after a
 * later pass changed its shapes). */
void tfc_fused_finish(struct tfc_kargs *a);

/* Max pools first (sched/pool_first.c, after fusion): a max pool whose input is the only use of
 * the output of the fused step just before it, non-decreasing in one input of the output's
 * shape and its other inputs the same across the pooled dims (a bias per channel, ReLU), runs
 * before it on that input, and the fused step on the pooled values (the same values, a
 * quarter of the work for a 2x2 pool). Returns the number of pools moved. */
int tfc_pool_first(struct plan *p, const struct plan_options *opt);

/* Chains on one worker: when every step of p waits for the step before it (no two of its
 * tasks could ever run at once), the machine has only CPU workers (two or more), and every
 * step can run on a CPU with no placement, every task goes to one CPU worker, chosen in turn
 * per plan, bypassing the scheduler. Such a run gains nothing from a second worker, and each
 * hand-off of the next task to another worker costs a wake-up (on a loaded machine, up to a
 * time slice of the OS scheduler). A run submitted while k runs of the same plan are in
 * flight (asynchronous runs) takes the worker k after the plan's (sched/run.c). */
void tfc_pin_chain(struct plan *p, const struct plan_options *opt);

#endif
