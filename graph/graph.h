/* graph.h: the graph IR (nodes, tensors, attributes) and the op descriptor that defines each
 * op once: arity, attribute table, shape/dtype inference, kernel codelet. graph/ knows ops only
 * through these descriptors; sched/ lowers nodes to tasks through the codelet they name. */
#ifndef TFC_GRAPH_H
#define TFC_GRAPH_H

#include <pthread.h>
#include "../src/internal.h"
#include "../codelets/kargs.h"
#include "../codelets/op_attrs.h"

#define TFC_MAX_ATTRS TFC_K_MAX_ATTRS
#define TFC_MAX_OPERANDS 64 /* inputs or outputs of one node (concat, add_n, split) */

struct starpu_codelet; /* defined by StarPU; only sched/ and codelets/ see inside */

enum tfc_attr_type {
    TFC_ATTR_INT,   /* int64 (also bools) */
    TFC_ATTR_FLOAT, /* double */
    TFC_ATTR_INTS,  /* up to TFC_MAX_RANK int64 (axes, perm, begin, size, shape) */
    TFC_ATTR_DTYPE, /* an enum tfc_dtype */
};

struct tfc_attr_def {
    const char *name;
    enum tfc_attr_type type;
    double def; /* default for INT, FLOAT, DTYPE; INTS default to empty */
};

/* An attribute value is a struct tfc_kattr (codelets/kargs.h): plan time copies node
 * attributes into kernel arguments as they are. For INTS, n is the count (0 when empty). */

/* A tensor's static description: what inference reads and writes. */
struct tfc_desc {
    enum tfc_dtype dtype;
    tfc_shape shape;
};

struct tfc_node;

/* What an infer function sees: the inputs' descriptions (concrete at plan time, possibly with
 * -1 leading dims at build time), the attributes, and where to put the outputs. It returns a
 * status and writes a message (without the node name, which the caller adds). */
struct tfc_infer {
    int n_in;
    const struct tfc_desc *in;
    const struct tfc_kattr *attrs;
    int n_out;
    struct tfc_desc *out;
    char *msg; /* TFC_MSG_LEN bytes */
};

enum tfc_op_flags {
    TFC_OP_SOURCE = 1 << 0,     /* no task: placeholder, constant, variable */
    TFC_OP_NO_GRADIENT = 1 << 1,/* not differentiable: no gradient flows through, no error */
    TFC_OP_ELEMENTWISE = 1 << 2,/* output i depends on inputs at i only (after broadcasting) */
    TFC_OP_VARIADIC = 1 << 3,   /* 1..TFC_MAX_OPERANDS inputs */
    TFC_OP_VARIABLE = 1 << 4,   /* a source whose value lives across runs (state inputs name it) */
};

/* Fixed by the op: how the kernel treats input 0 of a stateful op (further state inputs are
 * always read and written). */
enum tfc_var_access { TFC_VAR_NONE = 0, TFC_VAR_WRITE, TFC_VAR_UPDATE };

/* A gradient builder: given the node and the gradients of its outputs (dys[k] NULL when no
 * gradient reaches output k), adds graph nodes and sets dxs[i] to the gradient of input i
 * (NULL: none). Uses only differentiable ops, so gradients of gradients work. */
typedef tfc_status (*tfc_grad_builder)(tfc_graph *g, struct tfc_node *n, tfc_tensor *const *dys,
                                       tfc_tensor **dxs);

/* One op, defined once (STYLE.md): everything that builds, lowers, saves or tests a node of
 * it reads this descriptor. Written with designated initializers; fields left out are 0. */
struct tfc_op {
    const char *name;                 /* as tfc_op() and the store spell it */
    int n_inputs;                     /* exact count unless TFC_OP_VARIADIC */
    int kind;                         /* enum tfc_kernel_kind: selects the kernel in its codelet */
    unsigned flags;                   /* enum tfc_op_flags */
    enum tfc_var_access var_access;   /* stateful ops: input 0 W (assign) or RW (assign_add) */
    const struct tfc_attr_def *attrs; /* attribute table, indexed by the op's slot enum */
    int n_attrs;                      /* entries in attrs: TFC_ATTR_COUNT(table) */
    /* Number of outputs, from the attributes (NULL: 1). */
    int (*n_outputs)(const struct tfc_kattr *attrs);
    tfc_status (*infer)(const struct tfc_infer *in); /* output dtypes and shapes */
    struct starpu_codelet *codelet;   /* NULL for sources */
    tfc_grad_builder grad;            /* NULL: no gradient (an error on a gradient path) */
    int n_state;                      /* leading inputs that are variables updated in place;
                                       * output 0 then aliases input 0 */
    unsigned shape_inputs;            /* bit i: only input i's shape is used (no data); bit 31
                                       * covers inputs 31 and later (variadic ops) */
};

/* The entries of an attribute table, for .n_attrs. */
#define TFC_ATTR_COUNT(table) ((int)(sizeof(table) / sizeof((table)[0])))

/* The op table (graph/op_list.c): every registered op, in one array. */
extern const struct tfc_op *const tfc_op_table[];
extern const int tfc_op_table_size;
const struct tfc_op *tfc_op_lookup(const char *name);

struct tfc_tensor {
    struct tfc_node *node;
    int index;               /* output index in the node */
    struct tfc_desc desc;    /* static dtype and shape (leading dim may be -1) */
    char *name;              /* "node" or "node:k" */
};

/* A placement hint (tfc_tensor_set_device, tfc_graph_push_device): a kind of device, optionally
 * one device of that kind, and whether it must hold (hard) or may fall back (soft). Plan time
 * turns it into the tasks' worker mask and worker list (sched/placement.c). */
enum tfc_device_kind { TFC_DEVICE_ANY = 0, TFC_DEVICE_CPU, TFC_DEVICE_CUDA, TFC_DEVICE_OPENCL };

struct tfc_device_hint {
    int kind;                /* enum tfc_device_kind; TFC_DEVICE_ANY: no hint */
    int index;               /* the index-th device of the kind (0-based), -1: any of them */
    int hard;                /* 1: unsatisfiable fails at plan time; 0: falls back to any worker */
    int has_rank;            /* 1: "rank:R" or "rank:R/device" names the MPI rank running the
                              * node (model parallelism, sched/dist_place.c) */
    int rank;                /* that rank (meaningful when has_rank) */
};

/* Parses "cpu", "cuda", "cuda:N", "opencl", "opencl:N", each optionally after "rank:R/", or
 * "rank:R" alone (NULL or "" clear the hint) into h;
 * on error writes a message naming the string into msg (TFC_MSG_LEN). */
tfc_status tfc_device_parse(const char *device, int hard, struct tfc_device_hint *h, char *msg);
/* The hint as the user wrote it ("cuda:1", "opencl", ...), into buf. */
const char *tfc_device_str(const struct tfc_device_hint *h, char *buf, size_t len);

struct tfc_node {
    int id;                  /* creation order, dense from 0 */
    char *name;
    const struct tfc_op *op;
    int n_inputs;
    struct tfc_tensor **inputs;
    int n_ctrl, cap_ctrl;
    struct tfc_node **ctrl;  /* control inputs: run before this node */
    int n_outputs;
    struct tfc_tensor *outputs;
    struct tfc_kattr attrs[TFC_MAX_ATTRS]; /* indexed like op->attrs */
    tfc_value *value;        /* constants: the data (owned) */
    tfc_gradient_fn user_grad; /* a gradient set for this node (tfc_tensor_set_gradient) */
    void *user_grad_arg;
    tfc_init init;           /* variables: the initializer */
    struct tfc_device_hint device; /* placement hint (kind TFC_DEVICE_ANY: none) */
    int untrainable;         /* variables: 1 leaves it out of tfc_trainable_variables (and so
                              * out of a list-free tfc_minimize); 0, the default: trainable */
    int region;              /* the control-flow region it was built in (0: top level) */
    struct tfc_cflow *cflow; /* a cond or while node: its regions (graph/control_flow.h) */
    struct tfc_graph *graph;
};

/* A region: a branch or body of a control-flow node (graph/control_flow.c). Nodes built while
 * it is entered belong to it; an outer tensor used there is captured once, as a placeholder of
 * the region that the control-flow node feeds (variables and constants are used directly). */
struct tfc_region {
    int parent;              /* enclosing region (0: the top level) */
    struct tfc_cflow *cf;    /* the control-flow builder that owns it */
    const char *owner;       /* its node's name (owned by the builder), for messages */
    int n_caps, cap_caps;
    tfc_tensor **cap_outer;  /* captured tensors, of the parent region */
    tfc_tensor **cap_inner;  /* their placeholders in this region */
};

struct tfc_graph {
    int n_nodes, cap_nodes;
    struct tfc_node **nodes;
    /* name -> node, open addressing, power-of-two capacity */
    struct tfc_node **names;
    int names_cap;
    uint64_t seed;
    uint64_t version;        /* bumped when an existing node changes (control inputs,
                              * placement hints) */
    struct tfc_device_hint *dev_scope; /* tfc_graph_push_device stack; the top applies to */
    int n_dev_scope, cap_dev_scope;    /* every node built while it is pushed */
    char **scopes;           /* tfc_scope_push stack: each entry the full prefix ("a/b") */
    int n_scope, cap_scope;
    struct tfc_region *regions; /* control flow: index 0 stands for the top level */
    int n_regions, cap_regions;
    int cur_region;          /* where new nodes go */
    int n_cflow_nodes;       /* cond and while nodes: runs with them go through segments */
    void *cflows;            /* owned by graph/control_flow.c, freed through cflows_free */
    void (*cflows_free)(tfc_graph *g);
    /* Set by graph/control_flow.c once a region exists: the inputs a node built in the current
     * region sees (captures of outer tensors), or an error recorded on g. */
    tfc_status (*region_inputs)(tfc_graph *g, const char *label, const struct tfc_op *op,
                                int n_inputs, tfc_tensor *const *inputs, tfc_tensor **out);
    tfc_status status;
    char msg[TFC_MSG_LEN];
};

/* Builds a node of op with the given inputs and parsed attributes; infers outputs. On error,
 * records it on g (naming the node) and returns NULL. name may be NULL (generated). */
struct tfc_node *tfc_node_build(tfc_graph *g, const struct tfc_op *op, const char *name,
                                int n_inputs, tfc_tensor *const *inputs,
                                const struct tfc_kattr *attrs);
/* tfc_node_build for builders: output 0 of the new node; attrs NULL means the defaults. */
tfc_tensor *tfc_build(tfc_graph *g, const struct tfc_op *op, int n_inputs,
                      tfc_tensor *const *inputs, const struct tfc_kattr *attrs);
/* tfc_constant without the copy: on success the graph owns value (which must stay unchanged);
 * on failure (NULL, recorded on g) the caller still does. */
tfc_tensor *tfc_constant_take(tfc_graph *g, const char *name, tfc_value *value);
/* Default attribute values of op. */
void tfc_attrs_default(const struct tfc_op *op, struct tfc_kattr *attrs);
/* Parses "a=1,b=[0,1],dtype=float32" into attrs (defaults first). */
tfc_status tfc_attrs_parse(const struct tfc_op *op, const char *text, struct tfc_kattr *attrs,
                           char *msg);
/* Index of an attribute by name in op's table, -1 when absent. */
int tfc_attr_index(const struct tfc_op *op, const char *name);
/* graph/'s error path: records status and the message on g unless g already holds an error
 * (the first one stays), and returns status, so a failing path reads
 * `return tfc_graph_error(g, TFC_ERR_SHAPE, "node '%s': ...", name);`. */
tfc_status tfc_graph_error(tfc_graph *g, tfc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for builders, which return a tensor: records the error and returns NULL. */
void *tfc_graph_fail(tfc_graph *g, tfc_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Name scopes for nodes whose names are absolute whatever the caller pushed (optimizer slots,
 * counters, global_step): hide returns the depth and empties the stack, restore puts it back. */
int tfc_scope_hide(tfc_graph *g);
void tfc_scope_restore(tfc_graph *g, int depth);

/* Shape helpers for infer functions. */
/* NumPy broadcasting of n shapes; unknown (-1) dims stay unknown unless the other is > 1. */
tfc_status tfc_broadcast_shapes(int n, const tfc_shape *const *shapes, tfc_shape *out, char *msg);
/* Normalizes a possibly negative axis into [0, rank); -1 when out of range. */
int tfc_axis_norm(int64_t axis, int rank);

/* Variable initialization (graph/initializers.c): fills a host buffer of the variable's dtype
 * with the values of init, keyed by (graph seed, node seed, element index). */
tfc_status tfc_init_fill(const tfc_init *init, uint64_t graph_seed, enum tfc_dtype dtype,
                         const tfc_shape *shape, void *data, char *msg);



/* The codelets the descriptors name (defined in codelets/, opaque here). */
extern struct starpu_codelet tfc_cl_elementwise, tfc_cl_matmul, tfc_cl_softmax, tfc_cl_reduce,
    tfc_cl_layout, tfc_cl_assign, tfc_cl_optimizer;

/* Descriptors of the source ops, which sched/ treats specially. */
extern const struct tfc_op tfc_op_placeholder, tfc_op_constant, tfc_op_variable;
#endif
