/* control_flow.h: the description of a cond or while node that the builders in
 * graph/control_flow.c fill and sched/'s segment runner (sched/cflow_run.c) executes: its
 * regions, their input placeholders, their outputs and the node inputs that feed captures. */
#ifndef TFC_CONTROL_FLOW_H
#define TFC_CONTROL_FLOW_H

#include "graph.h"

enum tfc_cflow_kind { TFC_CF_COND = 1, TFC_CF_WHILE };

/* One region as the runner sees it. */
struct tfc_cf_region {
    int id;                  /* index in g->regions */
    int n_in;                /* explicit inputs (while: the loop variables; cond: none) */
    tfc_tensor **in;         /* their placeholders */
    int n_out;               /* while cond: 1 (the predicate); body: n_vars; branch: n_out */
    tfc_tensor **out;
    int cap_base;            /* the node input that feeds this region's capture 0 */
    int entered;             /* built (entered and left once) */
    int lo, hi;              /* its nodes' ids (nested regions' included): [lo, hi] */
};

struct tfc_cflow {
    tfc_graph *g;
    enum tfc_cflow_kind kind;
    char *name;              /* the node's full name (scope included) */
    char *rel_name;          /* as given, for the regions' name scopes */
    int parent_region;       /* where the node goes */
    tfc_tensor *pred;        /* cond: the predicate (outer) */
    int n_vars;              /* while: loop variables; cond: outputs */
    tfc_tensor **init;       /* while: the loop variables' initial values (outer) */
    tfc_shape *invariant;    /* while: the shape each loop variable keeps (-1: any size) */
    int64_t max_iter;        /* while: 0, or the most iterations */
    struct tfc_cf_region reg[2]; /* while: cond, body; cond: then, else */
    int cur;                 /* the region entered now, -1 when none */
    int saved_region;        /* g->cur_region before entering */
    struct tfc_node *node;   /* once finished */
    const struct tfc_cflow *fwd; /* a reverse loop (the gradient of while fwd): its body runs
                              * once per iteration fwd ran, last first, its inputs the carried
                              * gradients then fwd's loop variables of that iteration (fwd's
                              * stack); its cond region is never run */
    int keep_stack;          /* while: a reverse loop reads its stack, so each iteration's loop
                              * variables stay alive (their handles are not recycled) */
    struct tfc_cflow *stack_grad; /* while: the loop whose stack holds the gradient of this
                              * loop's stack (the reverse loop of this loop's reverse loop),
                              * set by the gradient pass stack_grad_pass (second order) */
    unsigned long stack_grad_pass;
    tfc_tensor **stack_grad_sums; /* pairs: a capture or global of this loop's body, and the
                              * sum of its gradient over stack_grad's iterations, where this
                              * loop's gradient goes on summing it (the unrolled graph's order) */
    int n_stack_grad_sums;
    struct tfc_cflow *next;  /* the graph's list of builders (g->cflows) */
};

/* The op descriptors of the two node kinds (not in the op table: a node of them is built only
 * by tfc_cflow_finish, and the plan never lowers one; the segment runner executes it). */
extern const struct tfc_op tfc_op_while, tfc_op_cond;
/* The markers that open and close each region (never run; see graph/control_flow.c), and
 * their attributes. */
enum { MARK_KIND, MARK_REGION, MARK_N, MARK_MAX_ITER };
/* The kind a reverse loop's markers store; their last input is its forward loop's output 0. */
enum { TFC_CF_MARK_REVERSE = 3 };
extern const struct tfc_op tfc_op_region_enter, tfc_op_region_leave;

/* Whether region outer is inner or encloses it (0: the top level encloses every region). */
int tfc_region_within(const tfc_graph *g, int inner, int outer);
/* t (of a region enclosing region r, the current one) as seen inside r: its capture
 * placeholder, named name (NULL: "capture_<k>") when created. NULL with an error on g. */
tfc_tensor *tfc_cflow_capture(tfc_graph *g, tfc_tensor *t, int r, const char *name);

/* Rebuilding a stored graph record by record, in node order (graph/control_flow_store.c): a region's
 * enter marker creates or resumes its builder and enters the region; the region's records
 * follow (capture placeholders name the tensor they capture; the loop-variable placeholders
 * that entering made take the stored shapes, their invariants); its leave marker leaves it with
 * its outputs; the node's own record finishes it. Names are the stored, absolute ones. Errors
 * are recorded on g and returned. */
tfc_status tfc_cflow_import_enter(tfc_graph *g, const char *name, const struct tfc_kattr *attrs,
                                  int n_in, tfc_tensor *const *in);
tfc_status tfc_cflow_import_leave(tfc_graph *g, int n_in, tfc_tensor *const *in);
tfc_status tfc_cflow_import_finish(tfc_graph *g, const char *name);
tfc_status tfc_cflow_import_capture(tfc_graph *g, const char *name, tfc_tensor *outer);
/* Once every record is imported: nonzero (an error on g naming it) when a cond or while node
 * was left unfinished, its records cut short. */
int tfc_cflow_import_unfinished(tfc_graph *g);
/* 1 when name is a loop-variable placeholder of the region being rebuilt (its shape is set to
 * shape), else 0. */
int tfc_cflow_import_input(tfc_graph *g, const char *name, const tfc_shape *shape);
/* Whether region node n is a capture placeholder; *outer is then the tensor it captures. */
int tfc_cflow_captured(const struct tfc_node *n, const tfc_tensor **outer);

/* What a run of while cf keeps on its stack per iteration, its body's inputs: its loop
 * variables, and for a reverse loop also its forward loop's stacked values of the iteration. */
int tfc_cflow_n_stacked(const struct tfc_cflow *cf);

/* Whether n is a cond or while node. */
static inline int tfc_is_cflow(const struct tfc_node *n)
{
    return n->cflow != NULL;
}

/* A reverse loop for the gradient of while fwd (graph/control_flow_grad.c builds its body):
 * n_vars carried values starting at init with shapes invariant; its body region (1) has
 * n_vars + fwd's loop variables as inputs. NULL with an error on g. */
struct tfc_cflow *tfc_while_reverse_new(tfc_graph *g, const char *name, struct tfc_cflow *fwd,
                                        int n_vars, tfc_tensor *const *init,
                                        const tfc_shape *invariant);

/* tfc_gradients, which differentiates the branches and bodies (passed in by its caller, so
 * that graph/autodiff.c and this file do not call each other in a circle). */
typedef tfc_status (*tfc_gradients_fn)(tfc_graph *g, int n_ys, tfc_tensor *const *ys,
                                       tfc_tensor *const *grad_ys, int n_xs,
                                       tfc_tensor *const *xs, tfc_tensor **dxs);
/* Makes while cf (its regions not entered yet) the reverse loop of the finished while fwd. */
void tfc_cflow_set_forward(struct tfc_cflow *cf, struct tfc_cflow *fwd);

/* Gradients through control flow (graph/control_flow_grad.c), called by tfc_gradients for a
 * cond or while node n: dxs[i] for its float inputs (NULL: none), and dglobs[k] for the
 * variables or constants globs[k] that its regions read directly (not captured). pass names
 * the backward pass (unique per tfc_gradients call): the gradient of a reverse loop, visited
 * first, leaves the gradient of its forward loop's stack for that loop's visit in the pass. */
tfc_status tfc_cflow_grad(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                          tfc_tensor **dxs, int n_globs, tfc_tensor *const *globs,
                          tfc_tensor **dglobs, tfc_gradients_fn gradients, unsigned long pass);
/* Whether while node n's stack received a gradient in pass (then n has a gradient to build
 * even when none reaches its outputs). */
int tfc_cflow_stack_grad_pending(const struct tfc_node *n, unsigned long pass);
/* The distinct float variables and constants that nodes inside n's regions read directly
 * (at most max; the count, which may exceed max). */
int tfc_cflow_globals(const struct tfc_node *n, int max, tfc_tensor **out);

/* The predicate's truth from its one element (bool, or an integer != 0). */
int tfc_cf_pred_value(enum tfc_dtype dtype, const void *data);

#endif
