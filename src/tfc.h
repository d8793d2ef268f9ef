/* tfc.h: the public API of libtfc-starpu, a TensorFlow-style dataflow runtime on StarPU.
 *
 * Build first, compute later (the body of a main function; tests/test_snippets.sh compiles and
 * runs it):
 *
 *   tfc_ctx *ctx;      tfc_ctx_create(&ctx);                 // starts (or joins) StarPU
 *   tfc_graph *g;      tfc_graph_create(&g);
 *   int64_t dims[] = {-1, 3};                                // batch size known at run time
 *   tfc_tensor *x = tfc_placeholder(g, "x", TFC_FLOAT32, tfc_shape_of(2, dims));
 *   tfc_tensor *w = tfc_variable(g, "w", TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){3, 2}),
 *                                tfc_init_glorot_uniform(7));
 *   tfc_tensor *y = tfc_softmax(g, tfc_matmul(g, x, w, 0, 0), -1);
 *   if (tfc_graph_status(g)) puts(tfc_graph_errmsg(g));      // build errors are sticky
 *   tfc_session *s;    tfc_session_create(ctx, g, &s);
 *   tfc_session_init_variables(s);
 *   float data[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {1, 0, 1}};
 *   tfc_value *xv;     tfc_value_from_data(TFC_FLOAT32, tfc_shape_of(2, (int64_t[]){4, 3}), data, &xv);
 *   tfc_value *yv;
 *   tfc_session_run(s, 1, &x, &xv, 1, &y, &yv, 0, NULL);    // y is a [4,2] float32 value
 *   const float *p = tfc_value_data(yv);
 *   printf("row 0: %.3f %.3f\n", p[0], p[1]);                 // two probabilities, sum 1
 *   tfc_value_destroy(yv); tfc_value_destroy(xv);
 *   tfc_session_destroy(s); tfc_graph_destroy(g); tfc_ctx_destroy(ctx);
 *
 * Conventions: every fallible call returns a tfc_status (TFC_OK is 0) and gives results through
 * trailing out-parameters; the message of the last failure is kept on the object it concerns
 * (tfc_graph_errmsg, tfc_session_errmsg, tfc_store_errmsg, tfc_batcher_errmsg; tfc_errmsg for
 * calls without one, tfc_ctx_create included).
 * Graph builders return tfc_tensor pointers owned by the graph, and NULL after an error, which
 * stays on the graph until tfc_graph_clear_error. Whoever creates a handle destroys it;
 * destroying NULL does nothing. Returned strings are borrowed until the next call on the object.
 */
#ifndef TFC_H
#define TFC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TFC_BUILDING_LIBRARY) && defined(__GNUC__)
#define TFC_API __attribute__((visibility("default")))
#else
#define TFC_API
#endif

/* ---- Status ---------------------------------------------------------------------------- */

typedef enum tfc_status {
    TFC_OK = 0,
    TFC_ERR_INVALID_ARGUMENT, /* NULL handle, bad attribute, wrong count */
    TFC_ERR_SHAPE,            /* shapes that do not fit, a mis-shaped feed */
    TFC_ERR_DTYPE,            /* an element type an op does not take */
    TFC_ERR_NOT_FOUND,        /* an unknown op or node name */
    TFC_ERR_OUT_OF_MEMORY,
    TFC_ERR_NO_DEVICE,        /* StarPU found no worker, or no worker fits a placement */
    TFC_ERR_RUNTIME,          /* StarPU or a device library failed */
    TFC_ERR_STORE,            /* the SQLite store */
    TFC_ERR_UNINITIALIZED,    /* a variable read before it was initialized */
    TFC_ERR_CYCLE,            /* the needed part of the graph has a cycle */
    TFC_ERR_OUT_OF_RANGE,     /* an index or label outside its range, found by a kernel */
    TFC_ERR_MISSING_FEED,     /* a placeholder the run needs was not fed */
    TFC_ERR_INTERNAL,         /* a bug in the library: an invariant of its own does not hold
                               * (the message names the source file and line) */
} tfc_status;

/* A short name for a status ("invalid argument", ...); never NULL. */
TFC_API const char *tfc_status_string(tfc_status status);
/* The message of the last failed call that has no handle of its own (tfc_value_*, tfc_ctx_create,
 * tfc_graph_create) on this thread. */
TFC_API const char *tfc_errmsg(void);

/* ---- Element types and shapes ---------------------------------------------------------- */

enum tfc_dtype {
    TFC_FLOAT32 = 0,
    TFC_FLOAT64,
    TFC_INT32,
    TFC_INT64,
    TFC_UINT8,
    TFC_BOOL, /* one byte, 0 or 1 */
    TFC_NUM_DTYPES
};

TFC_API const char *tfc_dtype_name(enum tfc_dtype dtype);
TFC_API size_t tfc_dtype_size(enum tfc_dtype dtype); /* bytes per element, 0 when invalid */

#define TFC_MAX_RANK 8

/* Row-major dimensions; -1 marks a dimension known only when the graph runs (only the leading
 * dimension of a placeholder may be unknown). Rank 0 is a scalar.
 * Index types, everywhere in this header: what indexes into a shape (dimensions, axes,
 * permutations, slice bounds, depths) is int64_t, as TensorFlow's and ONNX's are; a count of
 * things (a rank, n_axes, the n of concat and split) is int. Negative axes count from the end. */
typedef struct tfc_shape {
    int rank;
    int64_t dims[TFC_MAX_RANK];
} tfc_shape;

/* A shape from a dims array (rank 0 to TFC_MAX_RANK; dims may be NULL when rank is 0). */
TFC_API tfc_shape tfc_shape_of(int rank, const int64_t *dims);
/* The number of elements, or -1 when a dimension is unknown or negative, or when the count
 * does not fit in int64 (never a wrapped-around count). */
TFC_API int64_t tfc_shape_numel(const tfc_shape *shape);

/* ---- Values: host data for feeds, fetches, constants and variable reads --------------- */

typedef struct tfc_value tfc_value;

/* A new zero-filled value. */
TFC_API tfc_status tfc_value_create(enum tfc_dtype dtype, tfc_shape shape, tfc_value **out);
/* A new value holding a copy of data (numel * dtype size bytes). */
TFC_API tfc_status tfc_value_from_data(enum tfc_dtype dtype, tfc_shape shape, const void *data,
                                       tfc_value **out);
/* A value that borrows the caller's buffer (no copy): it must stay valid until the value is
 * destroyed, and, for a feed of an asynchronous run, until tfc_run_wait returns. */
TFC_API tfc_status tfc_value_wrap(enum tfc_dtype dtype, tfc_shape shape, void *data,
                                  tfc_value **out);
/* A rank-0 value of the given type holding x converted to it. */
TFC_API tfc_status tfc_value_scalar(enum tfc_dtype dtype, double x, tfc_value **out);
TFC_API void tfc_value_destroy(tfc_value *value);
TFC_API enum tfc_dtype tfc_value_dtype(const tfc_value *value);
TFC_API tfc_shape tfc_value_shape(const tfc_value *value);
TFC_API int64_t tfc_value_numel(const tfc_value *value);
TFC_API size_t tfc_value_nbytes(const tfc_value *value);
/* The buffer (row-major, contiguous); NULL for an empty value. */
TFC_API void *tfc_value_data(tfc_value *value);
TFC_API const void *tfc_value_cdata(const tfc_value *value);
/* Element i converted to double (for tests and printing). */
TFC_API double tfc_value_get(const tfc_value *value, int64_t i);

/* ---- Context: the StarPU runtime ------------------------------------------------------- */

typedef struct tfc_ctx tfc_ctx;

/* Starts StarPU with its environment variables (STARPU_SCHED, STARPU_NCPU, ...), or joins a
 * StarPU the application already started (and then leaves it running at tfc_ctx_destroy).
 * Before starting it, checks the STARPU_ variables the README lists (TFC_ERR_INVALID_ARGUMENT
 * naming the variable, its value and what it takes) and, when StarPU's home cannot be written,
 * points STARPU_HOME at a private directory with a warning (until StarPU stops); no other is
 * overridden. Sets OpenBLAS to one thread, process-wide: parallelism comes from StarPU's
 * workers. Returns TFC_ERR_NO_DEVICE when StarPU finds no worker. */
TFC_API tfc_status tfc_ctx_create(tfc_ctx **out);
TFC_API void tfc_ctx_destroy(tfc_ctx *ctx);

/* Distribution over MPI ranks (issue 15; sched/dist*.c). TFC_DIST_MPI starts StarPU through
 * StarPU-MPI (starpu_mpi_init_conf; MPI_Init_thread first unless the application initialized
 * MPI, then MPI_Finalize at exit): launch the program with mpirun, one process per rank.
 * StarPU must not run already without MPI (TFC_ERR_INVALID_ARGUMENT); a library built without
 * MPI (configure --enable-mpi) returns TFC_ERR_INVALID_ARGUMENT saying so. tfc_dist_rank and
 * tfc_dist_size give this process's rank and the number of ranks (0 and 1 for a context
 * without distribution, or NULL). tfc_dist_available says whether this build has MPI.
 * A rank that fails may simply return from main: a process that exits with its distributed
 * context alive skips MPI_Finalize (which would wait for the others, waiting for it), so
 * mpirun ends the job; a hung rank is caught by TFC_DIST_TIMEOUT (README). */
typedef enum tfc_dist_mode { TFC_DIST_NONE = 0, TFC_DIST_MPI = 1 } tfc_dist_mode;
TFC_API tfc_status tfc_ctx_create_dist(tfc_dist_mode mode, tfc_ctx **out);
TFC_API int tfc_dist_rank(const tfc_ctx *ctx);
TFC_API int tfc_dist_size(const tfc_ctx *ctx);
TFC_API int tfc_dist_available(void);
/* This process's StarPU workers (sched/dist_workers.c): writes the first `capacity` to out (may
 * be NULL with capacity 0, to count) and returns how many there are (0 for a NULL ctx).
 * bind_pu is the logical index (hwloc's L#) of the processing unit StarPU bound the worker to,
 * -1 when unbound: `tfc info --topology` prints it next to hwloc's view of the machine. */
typedef struct tfc_worker_info {
    int id;
    char name[64];   /* StarPU's, e.g. "CPU 0" */
    char kind[32];   /* StarPU's: "STARPU_CPU_WORKER", "STARPU_CUDA_WORKER", ... */
    int bind_pu;     /* logical PU index (hwloc L#), -1: none */
    int memory_node; /* StarPU memory node */
} tfc_worker_info;
TFC_API int tfc_ctx_workers(const tfc_ctx *ctx, tfc_worker_info *out, int capacity);

/* What StarPU runs with, read back from StarPU itself. */
typedef struct tfc_ctx_info {
    int n_cpu_workers;
    int n_cuda_workers;
    int n_opencl_workers;
    int n_memory_nodes;
    int min_priority, max_priority;
    char sched_policy[32];  /* e.g. "lws", "dmdas" */
    int joined;             /* 1 when StarPU was started by the application */
} tfc_ctx_info;

TFC_API tfc_status tfc_ctx_info_get(tfc_ctx *ctx, tfc_ctx_info *out);
/* A multi-line report of the workers (id, kind, name) and the scheduler, on out (NUL-ended,
 * truncated to size). */
TFC_API void tfc_ctx_describe(tfc_ctx *ctx, char *out, size_t size);

/* ---- Graphs ---------------------------------------------------------------------------- */

typedef struct tfc_graph tfc_graph;
typedef struct tfc_tensor tfc_tensor; /* a node's output: a symbolic endpoint, owned by the graph */

TFC_API tfc_status tfc_graph_create(tfc_graph **out);
TFC_API void tfc_graph_destroy(tfc_graph *g);
/* The first build error since the last clear, and its message naming the node. */
TFC_API tfc_status tfc_graph_status(const tfc_graph *g);
TFC_API const char *tfc_graph_errmsg(const tfc_graph *g);
TFC_API void tfc_graph_clear_error(tfc_graph *g);
/* The graph-level seed that keys every random initializer (default 0). */
TFC_API void tfc_graph_set_seed(tfc_graph *g, uint64_t seed);
TFC_API int tfc_graph_num_nodes(const tfc_graph *g);
/* The tensor named "node" (output 0) or "node:k"; NULL when absent (no error is set). */
TFC_API tfc_tensor *tfc_graph_find(tfc_graph *g, const char *name);

/* Tensor properties. The name is "node" for output 0 and "node:k" for others. */
TFC_API enum tfc_dtype tfc_tensor_dtype(const tfc_tensor *t);
TFC_API tfc_shape tfc_tensor_shape(const tfc_tensor *t);
TFC_API const char *tfc_tensor_name(const tfc_tensor *t);
TFC_API const char *tfc_tensor_op(const tfc_tensor *t); /* the op of the producing node */
/* Renames the producing node (names are unique in a graph; a generated one is the op's name,
 * or "op_N" when that is taken). */
TFC_API tfc_status tfc_tensor_set_name(tfc_tensor *t, const char *name);
/* Makes the node producing t run after the node producing dep, when both run. */
TFC_API tfc_status tfc_tensor_add_control_input(tfc_tensor *t, tfc_tensor *dep);

/* Any op by name, with attributes as text: "transpose_a=1,axes=[0,1],axis=-1,dtype=float64".
 * Unknown ops and attributes are errors that name them. out receives the op's outputs (as many
 * as it has; out may be NULL when the caller only needs output 0, which is returned). */
TFC_API tfc_tensor *tfc_op(tfc_graph *g, const char *op, int n_inputs, tfc_tensor *const *inputs,
                           const char *attrs, tfc_tensor **out, int out_capacity);
/* The number of registered ops and the name of op i (for listing). */
TFC_API int tfc_op_count(void);
TFC_API const char *tfc_op_name(int i);

/* Sources */
TFC_API tfc_tensor *tfc_placeholder(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                                    tfc_shape shape);
/* A constant holding a copy of value. */
TFC_API tfc_tensor *tfc_constant(tfc_graph *g, const char *name, const tfc_value *value);
/* A rank-0 constant. */
TFC_API tfc_tensor *tfc_scalar(tfc_graph *g, enum tfc_dtype dtype, double x);
/* A placeholder that needs no feed (TF's placeholder_with_default): a run that does not feed
 * it sees a copy of default_value (copied; its dtype and shape are the tensor's, and a feed must
 * match them). The default is a constant "<name>/default"; both are saved with the graph in a
 * model store. Errors (default_value NULL) are recorded on g. */
TFC_API tfc_tensor *tfc_placeholder_with_default(tfc_graph *g, const char *name,
                                                 const tfc_value *default_value);
/* The graph's training flag: the float32 scalar placeholder_with_default "training" (default
 * 0), created at the first call whatever name scope is open, found again after. Training steps
 * feed it 1 (`tfc train` and the examples do when the graph has it); evaluation leaves the
 * default. Ops that act differently in training (dropout, batch norm) take it as an input.
 * A node "training" of another kind is TFC_ERR_INVALID_ARGUMENT on g. */
TFC_API tfc_tensor *tfc_training_flag(tfc_graph *g);

/* Variable initializers; values come from a counter-based generator (Philox-4x32-10) keyed by
 * the graph seed, the node seed and the element index, so they do not depend on devices. */
typedef enum tfc_init_kind {
    TFC_INIT_ZEROS, TFC_INIT_ONES, TFC_INIT_CONSTANT, TFC_INIT_UNIFORM, TFC_INIT_NORMAL,
    TFC_INIT_TRUNCATED_NORMAL, TFC_INIT_GLOROT_UNIFORM,
    TFC_INIT_HE_NORMAL, TFC_INIT_HE_UNIFORM /* tfc_init_he_normal, tfc_init_he_uniform */
} tfc_init_kind;

typedef struct tfc_init {
    tfc_init_kind kind;
    double a, b;   /* constant: a; uniform: [a, b); normal, truncated: mean a, stddev b */
    uint64_t seed; /* the node seed */
} tfc_init;

TFC_API tfc_init tfc_init_zeros(void);
TFC_API tfc_init tfc_init_ones(void);
TFC_API tfc_init tfc_init_constant(double value);
TFC_API tfc_init tfc_init_uniform(double lo, double hi, uint64_t seed);
TFC_API tfc_init tfc_init_normal(double mean, double stddev, uint64_t seed);
TFC_API tfc_init tfc_init_truncated_normal(double mean, double stddev, uint64_t seed);
TFC_API tfc_init tfc_init_glorot_uniform(uint64_t seed);

/* A variable: state that lives in the session across runs (StarPU-managed memory). */
TFC_API tfc_tensor *tfc_variable(tfc_graph *g, const char *name, enum tfc_dtype dtype,
                                 tfc_shape shape, tfc_init init);

/* Linear algebra: matmul of rank-2 operands; batch_matmul of rank >= 2 operands whose leading
 * (batch) dimensions broadcast. */
TFC_API tfc_tensor *tfc_matmul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b, int transpose_a,
                               int transpose_b);
TFC_API tfc_tensor *tfc_batch_matmul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b, int adj_a,
                                     int adj_b);

/* Convolution over 1, 2 or 3 spatial dims, NCHW/NCDHW like ONNX's Conv and PyTorch: x is
 * [N, C, spatial...], w [K, C/groups, kernel...], the result [N, K, out...] with
 * out = (in + pad_begin + pad_end - dilation (kernel - 1) - 1) / stride + 1. Fields left 0 take
 * the defaults (strides and dilations 1, groups 1, no padding); auto_pad other than NOTSET
 * computes the pads from the input's shape as ONNX does (pads_* must then be 0). No bias:
 * add one of shape [K, 1, ...] (broadcasting). float32 and float64; p NULL: the defaults.
 * Errors (channels not divisible by groups, a kernel larger than the padded input, ...) are
 * TFC_ERR_SHAPE on the graph, naming the node. */
enum tfc_conv_auto_pad {
    TFC_CONV_PAD_NOTSET = 0, TFC_CONV_PAD_SAME_UPPER, TFC_CONV_PAD_SAME_LOWER, TFC_CONV_PAD_VALID
};
typedef struct tfc_conv_params {
    int64_t strides[3];    /* per spatial dim; 0 means 1 */
    int64_t pads_begin[3]; /* padding before each spatial dim (elements) */
    int64_t pads_end[3];   /* padding after */
    int64_t dilations[3];  /* 0 means 1 */
    int64_t groups;        /* 0 means 1; groups = C = K is a depthwise convolution */
    int auto_pad;          /* enum tfc_conv_auto_pad */
} tfc_conv_params;
TFC_API tfc_tensor *tfc_conv(tfc_graph *g, tfc_tensor *x, tfc_tensor *w,
                             const tfc_conv_params *p);
/* The adjoints of tfc_conv with the same p: the gradient of x given dy (a transposed
 * convolution to x_like's shape; only its shape is read), and the gradient of w given x and dy
 * (w_like's shape). */
TFC_API tfc_tensor *tfc_conv_backprop_input(tfc_graph *g, tfc_tensor *dy, tfc_tensor *w,
                                            tfc_tensor *x_like, const tfc_conv_params *p);
TFC_API tfc_tensor *tfc_conv_backprop_filter(tfc_graph *g, tfc_tensor *x, tfc_tensor *dy,
                                             tfc_tensor *w_like, const tfc_conv_params *p);
/* Transposed convolution (PyTorch's ConvTranspose1d/2d/3d, ONNX's ConvTranspose with explicit
 * pads): x [N, C_in, in...], w [C_in, C_out/groups, kernel...] -> [N, C_out, out...] with
 * out = (in - 1) stride - pads_begin - pads_end + dilation (kernel - 1) + output_padding + 1.
 * output_padding (default 0) must be below the stride. p NULL: the defaults. Its gradients are
 * a convolution (dx) and a filter gradient (dw). */
typedef struct tfc_conv_transpose_params {
    int64_t strides[3];        /* per spatial dim; 0 means 1 */
    int64_t pads_begin[3];     /* removed from the output's beginning (elements) */
    int64_t pads_end[3];       /* removed from its end */
    int64_t dilations[3];      /* 0 means 1 */
    int64_t output_padding[3]; /* added at the output's end, each below its stride */
    int64_t groups;            /* 0 means 1 */
} tfc_conv_transpose_params;
TFC_API tfc_tensor *tfc_conv_transpose(tfc_graph *g, tfc_tensor *x, tfc_tensor *w,
                                       const tfc_conv_transpose_params *p);

/* Element-wise binary ops with NumPy broadcasting. */
TFC_API tfc_tensor *tfc_add(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_sub(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_mul(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_div(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_maximum(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_minimum(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_pow(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_equal(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_not_equal(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_less(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_greater(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_logical_and(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
TFC_API tfc_tensor *tfc_logical_or(tfc_graph *g, tfc_tensor *a, tfc_tensor *b);
/* cond ? a : b, all three broadcast together; cond is bool. */
TFC_API tfc_tensor *tfc_select(tfc_graph *g, tfc_tensor *cond, tfc_tensor *a, tfc_tensor *b);
/* value + bias along the last axis (bias has rank 1). */
TFC_API tfc_tensor *tfc_bias_add(tfc_graph *g, tfc_tensor *value, tfc_tensor *bias);
/* The sum of n tensors of one shape and dtype (1 <= n <= 64). */
TFC_API tfc_tensor *tfc_add_n(tfc_graph *g, int n, tfc_tensor *const *inputs);

/* Element-wise unary ops. */
TFC_API tfc_tensor *tfc_neg(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_abs(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_square(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_sqrt(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_rsqrt(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_exp(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_log(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_relu(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_sigmoid(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_tanh(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_softplus(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_logical_not(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_identity(tfc_graph *g, tfc_tensor *x);
/* Activations (float32, float64): erf; gelu x*Phi(x) and its tanh approximation (PyTorch's
 * approximate='tanh'); elu x > 0 ? x : alpha*(exp(x)-1); selu with the constants of Klambauer
 * et al.; leaky_relu x > 0 ? x : alpha*x; silu x*sigmoid(x); hard_sigmoid
 * clamp(alpha*x + beta, 0, 1) (ONNX's defaults are 0.2, 0.5; PyTorch's hardsigmoid is 1/6,
 * 0.5); softsign x/(1+|x|). */
TFC_API tfc_tensor *tfc_erf(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_gelu(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_gelu_tanh(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_elu(tfc_graph *g, tfc_tensor *x, double alpha);
TFC_API tfc_tensor *tfc_selu(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_leaky_relu(tfc_graph *g, tfc_tensor *x, double alpha);
TFC_API tfc_tensor *tfc_silu(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_hard_sigmoid(tfc_graph *g, tfc_tensor *x, double alpha, double beta);
TFC_API tfc_tensor *tfc_softsign(tfc_graph *g, tfc_tensor *x);
/* More math (float32, float64): sin, cos, 1/x, log(1+x) and exp(x)-1 (exact near 0). */
TFC_API tfc_tensor *tfc_sin(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_cos(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_reciprocal(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_log1p(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_expm1(tfc_graph *g, tfc_tensor *x);
/* Floats and integers: floor, ceil, round (halves to even, as NumPy and PyTorch; the identity
 * on integers), sign (-1, 0 or 1; NaN stays NaN), and clip to [min, max] (NaN stays NaN; when
 * min > max every element is max, as torch.clamp; on integers the bounds round inwards).
 * Their gradients: zero for floor, ceil, round and sign; dy inside [min, max] for clip. */
TFC_API tfc_tensor *tfc_floor(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_ceil(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_round(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_sign(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_clip(tfc_graph *g, tfc_tensor *x, double min, double max);
/* Bool tensors: which elements of a float tensor are NaN, which are +-infinity. */
TFC_API tfc_tensor *tfc_is_nan(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_is_inf(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_cast(tfc_graph *g, tfc_tensor *x, enum tfc_dtype dtype);

/* Softmax family over one axis (negative counts from the end). */
TFC_API tfc_tensor *tfc_softmax(tfc_graph *g, tfc_tensor *logits, int64_t axis);
TFC_API tfc_tensor *tfc_log_softmax(tfc_graph *g, tfc_tensor *logits, int64_t axis);
/* Per-row cross-entropy of [batch, classes] logits against a distribution (dense) or integer
 * class ids of shape [batch] (sparse; an id outside [0, classes) fails the run). */
TFC_API tfc_tensor *tfc_softmax_cross_entropy(tfc_graph *g, tfc_tensor *logits,
                                              tfc_tensor *labels);
TFC_API tfc_tensor *tfc_sparse_softmax_cross_entropy(tfc_graph *g, tfc_tensor *logits,
                                                     tfc_tensor *labels);

/* Reductions over axes (n_axes = 0 reduces all); argmax over one axis gives int64. */
TFC_API tfc_tensor *tfc_reduce_sum(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes,
                                   int keepdims);
TFC_API tfc_tensor *tfc_reduce_mean(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes,
                                    int keepdims);
TFC_API tfc_tensor *tfc_reduce_max(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes,
                                   int keepdims);
TFC_API tfc_tensor *tfc_reduce_min(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes,
                                   int keepdims);
TFC_API tfc_tensor *tfc_argmax(tfc_graph *g, tfc_tensor *x, int64_t axis);

/* Pooling over the spatial dims of x = [N, C, d1 (, d2 (, d3))] (1 to 3 of them, float32 or
 * float64). Each list holds n_spatial values; strides, dilations and both pads may be left all
 * zero for 1, 1 and 0. A pad may be at most half the dilated kernel. Output sizes, ceil_mode and
 * count_include_pad follow PyTorch; dilations other than 1 are for max pooling only. */
typedef struct tfc_pool_params {
    int n_spatial;                       /* 1..3: the last n_spatial dims of x are pooled */
    int64_t kernel[3];                   /* window size per spatial dim */
    int64_t strides[3];                  /* all 0: 1 */
    int64_t pads_begin[3], pads_end[3];  /* implicit padding, elements */
    int64_t dilations[3];                /* all 0: 1 (max pooling only) */
    int ceil_mode;                       /* round output sizes up (a window must start inside) */
    int count_include_pad;               /* average: divide by the window with its padding */
} tfc_pool_params;
/* Max pooling; padding never wins. indices non-NULL also gives the argmax as int64 (flat index
 * into each input plane d1*d2*d3, as PyTorch's return_indices; on ties the first in row-major
 * window order wins). Gradients flow to x through the argmax. */
TFC_API tfc_tensor *tfc_max_pool(tfc_graph *g, tfc_tensor *x, const tfc_pool_params *p,
                                 tfc_tensor **indices);
TFC_API tfc_tensor *tfc_avg_pool(tfc_graph *g, tfc_tensor *x, const tfc_pool_params *p);
/* The mean over every spatial dim, kept as size 1: [N, C, 1 (, 1 (, 1))]. A reduce_mean. */
TFC_API tfc_tensor *tfc_global_avg_pool(tfc_graph *g, tfc_tensor *x);

/* Padding of every dim of x (any rank, any dtype): begin[i] and end[i] elements (>= 0) before
 * and after dim i. Constant fills with value; reflect mirrors without repeating the edge (a pad
 * must be smaller than its dim, as NumPy's and PyTorch's reflect); edge repeats the border.
 * Its gradient is the op pad_grad, which sums each padded element back onto its source. */
enum tfc_pad_mode { TFC_PAD_CONSTANT = 0, TFC_PAD_REFLECT = 1, TFC_PAD_EDGE = 2 };
TFC_API tfc_tensor *tfc_pad(tfc_graph *g, tfc_tensor *x, const int64_t *begin,
                            const int64_t *end, enum tfc_pad_mode mode, double value);

/* Dropout of x (float32 or float64): where training (a float32 scalar tensor) is nonzero, each
 * element is zeroed with probability rate (in [0, 1), else an invalid-argument error naming it)
 * and the kept ones are scaled by 1 / (1 - rate); where it is 0, y = x. Which elements drop is
 * a pure function of (seed, step, element index) (Philox4x32-10): the same on every device and
 * tiling, and a run resumed from a checkpoint of the step drops the same units. step is an
 * int64 scalar tensor, NULL for the graph's global step (tfc_global_step), which each run reads
 * before the optimizer's increment when the dropout is built before tfc_minimize (operations
 * on a variable follow node creation order). seed 0 derives one from the graph seed (set
 * tfc_graph_set_seed first) and the node's name, so two dropout layers differ. Its gradient op
 * dropout_grad recomputes the mask; no mask is stored.
 *   tfc_tensor *train = tfc_placeholder(g, "training", TFC_FLOAT32, tfc_shape_of(0, NULL));
 *   tfc_tensor *h = tfc_dropout(g, tfc_relu(g, tfc_matmul(g, x, w)), 0.5, train, NULL, 0);
 *   ... tfc_minimize(g, loss, 0, NULL, &opt, tfc_global_step(g)); feed training 1 to train. */
TFC_API tfc_tensor *tfc_dropout(tfc_graph *g, tfc_tensor *x, double rate, tfc_tensor *training,
                                tfc_tensor *step, uint64_t seed);

/* Reshapes by rule (reshape underneath): squeeze drops the given axes, which must have size 1
 * (n_axes 0: every dim of size 1); unsqueeze inserts a dim of size 1 at axis (in [-rank-1,
 * rank]); flatten gives [prod(dims before axis), prod(dims from axis)] (axis in [-rank, rank]). */
TFC_API tfc_tensor *tfc_squeeze(tfc_graph *g, tfc_tensor *x, int n_axes, const int64_t *axes);
TFC_API tfc_tensor *tfc_unsqueeze(tfc_graph *g, tfc_tensor *x, int64_t axis);
TFC_API tfc_tensor *tfc_flatten(tfc_graph *g, tfc_tensor *x, int64_t axis);

/* Shapes and data movement. */
/* shape may hold one -1, inferred from the element count. */
TFC_API tfc_tensor *tfc_reshape(tfc_graph *g, tfc_tensor *x, tfc_shape shape);
/* perm NULL reverses the axes. */
TFC_API tfc_tensor *tfc_transpose(tfc_graph *g, tfc_tensor *x, const int64_t *perm);
TFC_API tfc_tensor *tfc_concat(tfc_graph *g, int n, tfc_tensor *const *inputs, int64_t axis);
/* Splits x into n equal parts along axis; out receives the n tensors. */
TFC_API tfc_status tfc_split(tfc_graph *g, tfc_tensor *x, int n, int64_t axis,
                             tfc_tensor **out);
/* begin and size per axis; size -1 means to the end. */
TFC_API tfc_tensor *tfc_slice(tfc_graph *g, tfc_tensor *x, const int64_t *begin,
                              const int64_t *size);
/* Rows of params (along axis 0) at int32/int64 indices of any shape; an index out of range
 * fails the run. */
TFC_API tfc_tensor *tfc_gather(tfc_graph *g, tfc_tensor *params, tfc_tensor *indices);
/* indices (int32/int64) -> [..., depth] of dtype with on/off values; out-of-range ids give
 * an all-off row, as in TensorFlow. */
TFC_API tfc_tensor *tfc_one_hot(tfc_graph *g, tfc_tensor *indices, int64_t depth,
                                enum tfc_dtype dtype, double on, double off);
TFC_API tfc_tensor *tfc_fill(tfc_graph *g, tfc_shape shape, enum tfc_dtype dtype, double value);
TFC_API tfc_tensor *tfc_zeros_like(tfc_graph *g, tfc_tensor *x);
TFC_API tfc_tensor *tfc_ones_like(tfc_graph *g, tfc_tensor *x);

/* Stateful ops on a variable: var = value, var += value, var -= value; each returns the
 * variable's new value. value has the variable's shape and dtype. */
TFC_API tfc_tensor *tfc_assign(tfc_graph *g, tfc_tensor *var, tfc_tensor *value);
TFC_API tfc_tensor *tfc_assign_add(tfc_graph *g, tfc_tensor *var, tfc_tensor *value);
TFC_API tfc_tensor *tfc_assign_sub(tfc_graph *g, tfc_tensor *var, tfc_tensor *value);

/* A tensor that depends on all of inputs and holds nothing (no task runs for it): the target
 * of a training step built from several updates. */
TFC_API tfc_tensor *tfc_group(tfc_graph *g, int n, tfc_tensor *const *inputs);

/* ---- Dynamic control flow: cond and while_loop (graph/control_flow.c) -------------------
 * A cond or while_loop is one node that owns two regions of the graph: then/else, or the
 * loop's cond/body. Each region is built through a callback (or the two-step form below) into
 * its own input placeholders: the loop variables for a while, none for a cond. A tensor from
 * outside used inside a region is captured once (a loop-invariant input of the node);
 * variables and constants are used as they are. A region's tensors cannot be used outside it:
 * use the node's outputs. Runs drive it from the host: the predicate's one element is read
 * back, then only the branch taken or the next iteration is submitted. Such a run plans its
 * segments as it goes (tfc_session_run_async gives it a thread of its own): do not add nodes
 * to the graph while one is in flight. Feeds, fetches and targets inside a region are
 * TFC_ERR_INVALID_ARGUMENT at run time.
 *
 *   static tfc_status lt10(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
 *   { out[0] = tfc_less(g, v[0], tfc_scalar(g, TFC_INT32, 10)); return TFC_OK; }
 *   static tfc_status step(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
 *   { out[0] = tfc_add(g, v[0], tfc_scalar(g, TFC_INT32, 1));   // i + 1
 *     out[1] = tfc_add(g, v[1], tfc_cast(g, v[0], TFC_FLOAT32)); return TFC_OK; } // s + i
 *   tfc_tensor *init[2] = {tfc_scalar(g, TFC_INT32, 0), tfc_scalar(g, TFC_FLOAT32, 0)}, *r[2];
 *   tfc_while_loop(g, "sum", lt10, step, NULL, 2, init, NULL, r);   // r[1] is 45
 *
 * A region function fills out (one tensor per output) from in and returns TFC_OK; another
 * status, or an error recorded on g, fails the builder. Errors are sticky on g like every
 * builder's: a predicate that is not a one-element bool/int32/int64, a body output whose dtype
 * or shape does not match its loop variable (the message names both), wrong counts, NULLs.
 *
 * Gradients (tfc_gradients, tfc_minimize) flow through both: a cond's through the branch that
 * ran; a while's through every iteration, in reverse, to the initial loop variables, the
 * captured tensors and the variables read inside (those among the xs). The backward pass
 * recomputes each branch or body from the loop variables the forward loop kept, so a
 * differentiated region may hold only pure ops (an assign inside is an error naming it).
 * Gradients of a loop's gradient work too (second order, pure and mixed, nested loops and
 * cond included); a third order through a loop is an error naming the gradient loop. */
typedef tfc_status (*tfc_region_fn)(tfc_graph *g, void *arg, tfc_tensor *const *in,
                                    tfc_tensor **out);

typedef struct tfc_while_opts {
    int64_t maximum_iterations;        /* 0: no limit; n > 0: at most n iterations (TF's
                                        * maximum_iterations); negative is an error */
    const tfc_shape *shape_invariants; /* NULL, or per loop variable the shapes it may take
                                        * (TF's shape_invariants): -1 dims take any size, so a
                                        * loop variable may grow; by default it keeps its shape */
} tfc_while_opts;

/* Repeats body while cond holds, from the n_loop_vars (1..32) initial values loop_vars; writes
 * the final values to outputs[n_loop_vars]. A loop that never runs its body returns its inputs.
 * opts may be NULL. name may be NULL (generated). Returns g's status. */
TFC_API tfc_status tfc_while_loop(tfc_graph *g, const char *name, tfc_region_fn cond_fn,
                                  tfc_region_fn body_fn, void *arg, int n_loop_vars,
                                  tfc_tensor *const *loop_vars, const tfc_while_opts *opts,
                                  tfc_tensor **outputs);
/* then_fn's outputs when pred (a one-element bool or integer, nonzero: true) holds at run time,
 * else else_fn's; both give n_outputs tensors of the same dtypes and ranks (dims that differ
 * are -1 in the outputs). Returns g's status. */
TFC_API tfc_status tfc_cond(tfc_graph *g, const char *name, tfc_tensor *pred,
                            tfc_region_fn then_fn, tfc_region_fn else_fn, void *arg,
                            int n_outputs, tfc_tensor **outputs);

/* The two-step form (an importer's, like TF_NewWhile/TF_FinishWhile): create the node's
 * builder, enter each region (0: a while's cond or a cond's then; 1: body or else) to get its
 * input placeholders (a while's loop variables; a cond has none, inputs may be NULL), build
 * into them, leave it with its outputs (a while's cond: the predicate), then finish to get the
 * node's outputs. The builder belongs to g; errors are sticky on g and returned. */
typedef struct tfc_cflow tfc_cflow;
TFC_API tfc_cflow *tfc_while_new(tfc_graph *g, const char *name, int n_loop_vars,
                                 tfc_tensor *const *loop_vars, const tfc_while_opts *opts);
TFC_API tfc_cflow *tfc_cond_new(tfc_graph *g, const char *name, tfc_tensor *pred,
                                int n_outputs);
TFC_API tfc_status tfc_cflow_enter(tfc_cflow *cf, int region, tfc_tensor **inputs);
TFC_API tfc_status tfc_cflow_leave(tfc_cflow *cf, int n_outputs, tfc_tensor *const *outputs);
TFC_API tfc_status tfc_cflow_finish(tfc_cflow *cf, tfc_tensor **outputs);

/* ---- Automatic differentiation ---------------------------------------------------------- */

/* Adds the nodes computing d(sum of ys)/d(xs) to the graph (reverse mode, as graph
 * construction), writing one tensor per x to dxs. grad_ys may be NULL (ones) or give the
 * gradient flowing into each y (same shape and dtype as y; entries may be NULL). An x that no y
 * depends on gets zeros. A path through an op without a gradient is an error naming the op and
 * the node; integer and bool tensors carry no gradient. */
TFC_API tfc_status tfc_gradients(tfc_graph *g, int n_ys, tfc_tensor *const *ys,
                                 tfc_tensor *const *grad_ys, int n_xs, tfc_tensor *const *xs,
                                 tfc_tensor **dxs);
/* Identity in the forward pass; no gradient flows through it. */
TFC_API tfc_tensor *tfc_stop_gradient(tfc_graph *g, tfc_tensor *x);

/* A gradient written by the user: sets dxs[i] (NULL for none) from the node's inputs, outputs
 * and output gradients (dys[k] NULL when none reaches output k), adding nodes to g. */
typedef tfc_status (*tfc_gradient_fn)(tfc_graph *g, int n_inputs, tfc_tensor *const *inputs,
                                      int n_outputs, tfc_tensor *const *outputs,
                                      tfc_tensor *const *dys, tfc_tensor **dxs, void *user);
/* Replaces the gradient of every node of op `op` (process-wide, like TensorFlow's
 * RegisterGradient); fn NULL restores the built-in one. */
TFC_API tfc_status tfc_register_gradient(const char *op, tfc_gradient_fn fn, void *user);
/* Replaces the gradient of the node producing t only. */
TFC_API tfc_status tfc_tensor_set_gradient(tfc_tensor *t, tfc_gradient_fn fn, void *user);

/* ---- Optimizers (graph builders) -------------------------------------------------------- */

typedef enum tfc_optimizer_kind {
    TFC_OPT_SGD, TFC_OPT_MOMENTUM, TFC_OPT_ADAGRAD, TFC_OPT_RMSPROP, TFC_OPT_ADAM, TFC_OPT_ADAMW
} tfc_optimizer_kind;

/* Hyperparameters, with torch.optim's meaning and formulas (Adam: eps is added after the square
 * root of the bias-corrected second moment). tfc_optimizer_default fills torch's defaults. */
typedef struct tfc_optimizer {
    tfc_optimizer_kind kind;
    double lr;               /* used when lr_tensor is NULL */
    tfc_tensor *lr_tensor;   /* a scalar learning rate, e.g. a schedule (optional) */
    double momentum;         /* momentum, rmsprop */
    int nesterov;            /* momentum */
    double beta1, beta2;     /* adam, adamw */
    double alpha;            /* rmsprop's smoothing constant */
    int centered;            /* rmsprop */
    double eps;              /* adagrad, rmsprop, adam */
    double initial_accumulator; /* adagrad */
    double weight_decay;     /* L2 added to the gradient; decoupled (AdamW) for TFC_OPT_ADAMW */
    double clip_norm;        /* > 0: gradients are clipped by their global norm first */
} tfc_optimizer;

TFC_API tfc_optimizer tfc_optimizer_default(tfc_optimizer_kind kind, double lr);

/* Adds the gradient of loss with respect to vars (n_vars 0 and vars NULL: every trainable
 * variable the loss depends on, see tfc_trainable_variables; none is TFC_ERR_INVALID_ARGUMENT)
 * and one update per variable, each a task that updates the variable and its slot variables
 * (named "<var>/<slot>", ordinary variables that are not trainable, so they are initialized
 * and checkpointed like any other) in place. Any number of variables (n_vars >= 1; so for
 * tfc_apply_gradients and tfc_clip_by_global_norm). Returns the training step to run as a
 * target. Every read of a variable built before the call precedes its update within a run.
 * global_step, when given (tfc_global_step), is incremented by each step. */
TFC_API tfc_tensor *tfc_minimize(tfc_graph *g, tfc_tensor *loss, int n_vars,
                                 tfc_tensor *const *vars, const tfc_optimizer *opt,
                                 tfc_tensor *global_step);
/* The same from gradients the caller computed (grads[i] for vars[i]). */
TFC_API tfc_tensor *tfc_apply_gradients(tfc_graph *g, int n_vars, tfc_tensor *const *grads,
                                        tfc_tensor *const *vars, const tfc_optimizer *opt,
                                        tfc_tensor *global_step);
/* The graph's int64 scalar variable "global_step" (created at the first call, zeros). */
TFC_API tfc_tensor *tfc_global_step(tfc_graph *g);
/* Scales grads so that their global norm is at most clip_norm (out may equal grads); returns
 * the norm before clipping. */
TFC_API tfc_tensor *tfc_clip_by_global_norm(tfc_graph *g, int n, tfc_tensor *const *grads,
                                            double clip_norm, tfc_tensor **out);
/* Learning-rate schedules of an integer step tensor (a float32 scalar):
 * step decay base * gamma^floor(step / period); exponential base * gamma^(step / period);
 * cosine floor + (base - floor) (1 + cos(pi min(step, period) / period)) / 2. */
TFC_API tfc_tensor *tfc_lr_step_decay(tfc_graph *g, double base, tfc_tensor *step, double period,
                                      double gamma);
TFC_API tfc_tensor *tfc_lr_exponential(tfc_graph *g, double base, tfc_tensor *step,
                                       double period, double gamma);
TFC_API tfc_tensor *tfc_lr_cosine(tfc_graph *g, double base, tfc_tensor *step, double period,
                                  double floor);

/* ---- Layers, name scopes and trainable variables ----------------------------------------- */

/* Layer builders create their own variables, under a name scope of their own, and mark them
 * trainable, so a model trains without listing its variables:
 *
 *   tfc_scope_push(g, "mlp");
 *   tfc_tensor *h = tfc_dense(g, x, 256, TFC_ACT_RELU, "hidden");     // mlp/hidden/kernel, ...
 *   tfc_tensor *logits = tfc_dense(g, h, 10, TFC_ACT_NONE, "logits");
 *   tfc_scope_pop(g);
 *   tfc_tensor *loss = tfc_reduce_mean(g, tfc_sparse_softmax_cross_entropy(g, logits, y),
 *                                      0, NULL, 0);
 *   tfc_optimizer opt = tfc_optimizer_default(TFC_OPT_ADAM, 1e-3);
 *   tfc_tensor *step = tfc_minimize(g, loss, 0, NULL, &opt, tfc_global_step(g));
 */

/* Name scopes: every node built between tfc_scope_push(g, "block1") and the matching pop has
 * its name (given or generated) prefixed with "block1/"; scopes nest ("block1/conv/kernel").
 * Names stay unique in the graph as outside scopes (a given name already used is an error, a
 * generated one gets a suffix). Stores keep the full names. tfc_tensor_set_name and
 * tfc_graph_find take full names; optimizer slots ("<var>/<slot>"), optimizer counters and
 * global_step ignore the open scope. An invalid scope name, or a pop without a push, is
 * TFC_ERR_INVALID_ARGUMENT, recorded on the graph like a build error. */
TFC_API tfc_status tfc_scope_push(tfc_graph *g, const char *name);
TFC_API tfc_status tfc_scope_pop(tfc_graph *g);
/* The open scope's full name ("" outside every scope); borrowed until the next push or pop. */
TFC_API const char *tfc_scope_current(const tfc_graph *g);

/* Trainable variables. Every variable is trainable when created, except those an optimizer
 * creates (its slots, its iteration counter) and global_step. tfc_minimize with n_vars 0 and
 * vars NULL trains the trainable variables the loss depends on through differentiable ops.
 * The flag is saved with the graph in a model store. set_trainable on a tensor that is not a
 * variable is TFC_ERR_INVALID_ARGUMENT (recorded on its graph). */
TFC_API tfc_status tfc_variable_set_trainable(tfc_tensor *var, int trainable);
/* 1 when var is a trainable variable, else 0. */
TFC_API int tfc_variable_trainable(const tfc_tensor *var);
/* The graph's trainable variables in creation order: returns how many there are and writes
 * the first `capacity` of them to vars (may be NULL with capacity 0, to count). */
TFC_API int tfc_trainable_variables(const tfc_graph *g, tfc_tensor **vars, int capacity);

/* He (Kaiming) initializers for layers followed by ReLU, as TF and PyTorch define them:
 * normal with stddev sqrt(2 / fan_in), uniform in [-sqrt(6 / fan_in), sqrt(6 / fan_in)).
 * fan_in is the second-to-last dimension times the leading (receptive field) ones. */
TFC_API tfc_init tfc_init_he_normal(uint64_t seed);
TFC_API tfc_init tfc_init_he_uniform(uint64_t seed);

/* The activation a layer applies to its output. */
typedef enum tfc_activation {
    TFC_ACT_NONE, TFC_ACT_RELU, TFC_ACT_TANH, TFC_ACT_SIGMOID, TFC_ACT_GELU
} tfc_activation;

/* A dense (fully connected) layer: activation(x @ kernel + bias) for x of shape [batch, in]
 * (float32 or float64; in must be known), output [batch, units]. Inside the name scope `name`
 * (NULL: "dense"; when that scope already holds a layer, name_1, name_2, ...) it creates the
 * trainable variables "kernel" [in, units] (He normal for TFC_ACT_RELU, else Glorot uniform;
 * the seed is a hash of the variable's full name, so it depends on the name only) and "bias"
 * [units] (zeros). Errors (units < 1, x not rank 2, unknown activation) are recorded on g and
 * name the layer; the result is then NULL. */
TFC_API tfc_tensor *tfc_dense(tfc_graph *g, tfc_tensor *x, int64_t units,
                              tfc_activation activation, const char *name);
/* A convolution layer: activation(conv(x, kernel, p) + bias) for x = [N, C, spatial...] with
 * n_spatial (1 to 3) spatial dims and C known (float32 or float64). kernel holds n_spatial
 * window sizes; p as for tfc_conv (NULL: stride 1, SAME_UPPER padding, so the spatial size
 * stays). Inside the name scope `name` (NULL: "conv"; taken: name_1, ...) it creates the
 * trainable "kernel" [filters, C/groups, kernel...], He normal (stddev sqrt(2/fan_in)) for
 * TFC_ACT_RELU, else Glorot uniform, with fan_in = C/groups * kernel volume and fan_out =
 * filters * kernel volume, seeded by its full name; and with use_bias a "bias" [filters]
 * (zeros). Errors (a bad n_spatial or kernel size, x of another rank, channels not divisible by
 * groups) are recorded on g, naming the layer. */
TFC_API tfc_tensor *tfc_conv_layer(tfc_graph *g, tfc_tensor *x, int64_t filters, int n_spatial,
                                   const int64_t *kernel, const tfc_conv_params *p,
                                   tfc_activation activation, int use_bias, const char *name);
/* Pooling layers over the last n_spatial dims of x: a window of `size` in each, moved by
 * stride (0: size), no padding; as tfc_max_pool and tfc_avg_pool (no variables). */
TFC_API tfc_tensor *tfc_max_pool_layer(tfc_graph *g, tfc_tensor *x, int n_spatial, int64_t size,
                                       int64_t stride);
TFC_API tfc_tensor *tfc_avg_pool_layer(tfc_graph *g, tfc_tensor *x, int n_spatial, int64_t size,
                                       int64_t stride);

/* ---- Normalization ----------------------------------------------------------------------- */

/* Batch normalization of x = [N, C] or [N, C, spatial...] (float32 or float64) per channel
 * (axis 1): y = gamma * (x - mean) / sqrt(var + epsilon) + beta; gamma, beta, moving_mean and
 * moving_var are [C] of x's dtype. The mode is chosen at run time by `training`, a scalar float
 * tensor (nonzero: training), so one stored graph serves training and evaluation:
 *   training: mean and var are the batch's (over N and the spatial dims, the biased variance);
 *     when moving_mean and moving_var are variables, such a run also updates them once, as
 *     PyTorch does: moving = (1 - momentum) * moving + momentum * batch, with the unbiased
 *     batch variance for moving_var (so each channel needs 2 values or more);
 *   inference: mean and var are moving_mean and moving_var, which stay untouched.
 * The update is a control input of the returned y: any run that computes y (or what depends
 * on it, such as a loss) performs it. p NULL: epsilon 1e-5, momentum 0.1 (PyTorch's).
 * Gradients reach x, gamma and beta in both modes (and the moving statistics in inference
 * mode). Errors name the tensor at fault. */
typedef struct tfc_batch_norm_params {
    double epsilon;  /* added to the variance; > 0 */
    double momentum; /* weight of the batch statistics in the moving ones; in [0, 1] */
} tfc_batch_norm_params;
TFC_API tfc_tensor *tfc_batch_norm(tfc_graph *g, tfc_tensor *x, tfc_tensor *gamma,
                                   tfc_tensor *beta, tfc_tensor *moving_mean,
                                   tfc_tensor *moving_var, tfc_tensor *training,
                                   const tfc_batch_norm_params *p);
/* Layer normalization over the last n_axes dims of x (1 to its rank; they are PyTorch's
 * normalized_shape): (x - mean) / sqrt(var + epsilon) * gamma + beta, with the mean and the
 * biased variance over those dims. gamma and beta (each may be NULL: none) have the shape of
 * those dims; epsilon > 0. */
TFC_API tfc_tensor *tfc_layer_norm(tfc_graph *g, tfc_tensor *x, tfc_tensor *gamma,
                                   tfc_tensor *beta, int n_axes, double epsilon);
/* Layers (graph/layers_norm.c), named like tfc_dense (NULL: "batch_norm", "layer_norm"). The
 * batch norm layer creates under its scope the trainable gamma (ones) and beta (zeros) and the
 * untrainable moving_mean (zeros) and moving_variance (ones), all [C], and normalizes x with
 * tfc_batch_norm. The layer norm layer creates trainable gamma (ones) and beta (zeros) of the
 * shape of x's last n_axes dims (which must be known). Results NULL on error (recorded on g). */
TFC_API tfc_tensor *tfc_batch_norm_layer(tfc_graph *g, tfc_tensor *x, tfc_tensor *training,
                                         double momentum, double epsilon, const char *name);
TFC_API tfc_tensor *tfc_layer_norm_layer(tfc_graph *g, tfc_tensor *x, int n_axes,
                                         double epsilon, const char *name);

/* Recurrent layers (graph/layers_rnn.c). The time loop runs as a tfc_while_loop or unrolled
 * into a static graph of `steps` steps; both give the same bits. MODE_DEFAULT is the unrolled
 * graph for now: training needs gradients through tfc_while_loop, which are not there yet. */
typedef enum tfc_rnn_mode {
    TFC_RNN_MODE_DEFAULT, TFC_RNN_UNROLLED, TFC_RNN_WHILE_LOOP
} tfc_rnn_mode;

typedef struct tfc_rnn_opts {
    int return_sequences;  /* 0: the last state [batch, units]; 1: every step's output
                            * [batch, steps, units] (zeros at a row's steps past its length) */
    tfc_tensor *initial_h; /* [batch, units] of x's dtype, or NULL: zeros */
    tfc_tensor *initial_c; /* LSTM's initial cell state, the same; NULL: zeros */
    tfc_tensor *lengths;   /* int32 [batch]: row b runs lengths[b] steps and then keeps its
                            * state (masked); NULL: every row runs all steps */
    tfc_rnn_mode mode;
} tfc_rnn_opts;

/* An LSTM layer over x = [batch, steps, features] (float32 or float64; steps and features
 * known), gates i, f, g, o as Keras and PyTorch: c = f c + i g, h = o tanh(c). Inside the name
 * scope `name` (NULL: "lstm"; taken: name_1, ...) it creates the trainable "kernel" [features,
 * 4 units] and "recurrent_kernel" [units, 4 units] (Glorot uniform, seeded by the full name)
 * and "bias" [4 units] (zeros; the forget gate adds a constant 1 on top, Keras's
 * unit_forget_bias). opts may be NULL (last state, zero initial state, full lengths, the
 * default mode). Errors (units < 1, x not rank 3, a state of the wrong shape, lengths not
 * int32 [batch], an unknown mode) are recorded on g and name the layer; the result is NULL. */
TFC_API tfc_tensor *tfc_lstm_layer(tfc_graph *g, tfc_tensor *x, int64_t units,
                                   const tfc_rnn_opts *opts, const char *name);
/* A GRU layer, the same way, in PyTorch's (and cuDNN's, Keras's reset_after) form: r and z
 * from x and h, n = tanh(x W_n + b_n + r (h U_n + rb_n)), h = (1 - z) n + z h; variables
 * "kernel" [features, 3 units], "recurrent_kernel" [units, 3 units], "bias" and
 * "recurrent_bias" [3 units] (zeros), gates ordered r, z, n. initial_c must be NULL. */
TFC_API tfc_tensor *tfc_gru_layer(tfc_graph *g, tfc_tensor *x, int64_t units,
                                  const tfc_rnn_opts *opts, const char *name);

/* ---- Scheduling hints ------------------------------------------------------------------ */

/* Placement hints. device is "cpu", "cuda", "cuda:N", "opencl" or "opencl:N" (N: the N-th
 * device of that kind StarPU uses, from 0; with several workers per device, all of them);
 * NULL or "" means no hint. At plan time a hint becomes the tasks' worker mask, and for one
 * device also their worker list, so StarPU's scheduler still chooses among the allowed
 * workers. It covers every task of the node (its op, and the copy of a fetched variable);
 * sources (placeholders, constants, variables) otherwise run no task.
 * hard = 1: a hint no worker can satisfy (no worker of that kind or index, or the op has no
 * implementation for that kind) fails the run at plan time with TFC_ERR_NO_DEVICE and a
 * message naming the node and the device. hard = 0 (soft): such a task may run on any worker;
 * the run still succeeds, tfc_session_stats.soft_fallbacks counts the tasks, and
 * tfc_session_last_warning names the nodes. A bad device string is TFC_ERR_INVALID_ARGUMENT,
 * recorded on the graph like a build error. Hints are not saved in model stores.
 * Model parallelism (README "Model parallelism"): "rank:R" or "rank:R/DEVICE" (DEVICE as
 * above, with its meaning on rank R) runs the node on MPI rank R of a distributed context
 * (tfc_ctx_create_dist); every rank builds the same graph and runs the same calls, each
 * submits its own nodes' tasks, and values crossing ranks travel by StarPU-MPI. Nodes
 * without a rank run on rank 0, except that assignments and optimizer updates run on their
 * variable's rank; tfc_gradients gives the nodes it builds the rank of the node they
 * differentiate. Fetched values are returned on every rank. A rank >= the number of ranks,
 * a rank other than 0 without a distributed context (or without MPI), or in a graph with
 * cond or while, fails the run with TFC_ERR_INVALID_ARGUMENT naming the node. */
/* Sets (replaces) the hint of the node producing t; plans built before are rebuilt. */
TFC_API tfc_status tfc_tensor_set_device(tfc_tensor *t, const char *device, int hard);
/* Opens a scope: every node built until the matching pop gets this hint (NULL: none). Scopes
 * nest; the innermost applies. A pop without a push is TFC_ERR_INVALID_ARGUMENT. */
TFC_API tfc_status tfc_graph_push_device(tfc_graph *g, const char *device, int hard);
TFC_API tfc_status tfc_graph_pop_device(tfc_graph *g);

/* Task priorities: each run's tasks get StarPU priorities from their critical-path rank in
 * the plan (the longest estimated time from the task to the end of the run), mapped into the
 * scheduler's [starpu_sched_get_min_priority(), starpu_sched_get_max_priority()] (all 0 when
 * that range is [0, 0], as for eager, dmda and heteroprio). They are computed when the plan
 * is built, so cached runs pay nothing. The environment variable TFC_PRIORITIES (read at
 * tfc_session_create) turns them off with 0 (on with 1, the default); any other value fails
 * session creation with TFC_ERR_INVALID_ARGUMENT. */

/* ---- Sessions and runs ----------------------------------------------------------------- */

typedef struct tfc_session tfc_session;
typedef struct tfc_run tfc_run;

/* A session runs one graph on one context; it owns the variables' state. The graph and the
 * context must outlive it; nodes may still be added to the graph between runs. */
TFC_API tfc_status tfc_session_create(tfc_ctx *ctx, tfc_graph *g, tfc_session **out);
/* Frees the session. A run of tfc_session_run_async not yet passed to tfc_run_wait is waited
 * for first (its tasks still read the feeds and the session's buffers; StarPU cannot withdraw
 * them), its fetched values are dropped and its tfc_run handle is freed; each such run is
 * reported on stderr ("tfc: warning: tfc_session_destroy: session N still has run M (fetches
 * 'y') in flight ..."), as is its failure if it failed. Not to be called while another thread
 * uses the session or waits for one of its runs. */
TFC_API void tfc_session_destroy(tfc_session *s);
TFC_API const char *tfc_session_errmsg(const tfc_session *s);
/* The graph the session runs (borrowed). */
TFC_API tfc_graph *tfc_session_graph(const tfc_session *s);

/* Runs the part of the graph that fetches and targets need. feeds[i] gives the value of the
 * placeholder (or any tensor) feed_tensors[i]; fetched values are new tfc_values written to
 * fetch_values[i], owned by the caller. Safe to call from several threads at once.
 * A tensor the run needs may hold at most 2^32-1 elements (StarPU 1.3 counts a buffer's elements
 * in 32 bits; more is TFC_ERR_INVALID_ARGUMENT) and no more bytes than the largest memory node
 * (TFC_ERR_OUT_OF_MEMORY), each refused before any task starts, naming the tensor. */
TFC_API tfc_status tfc_session_run(tfc_session *s, int n_feeds, tfc_tensor *const *feed_tensors,
                                   tfc_value *const *feeds, int n_fetches,
                                   tfc_tensor *const *fetches, tfc_value **fetch_values,
                                   int n_targets, tfc_tensor *const *targets);
/* The same, returning once the run is submitted; tfc_run_wait gives its fetches. Feeds are
 * read while the run executes: keep them alive until tfc_run_wait returns. */
TFC_API tfc_status tfc_session_run_async(tfc_session *s, int n_feeds,
                                         tfc_tensor *const *feed_tensors, tfc_value *const *feeds,
                                         int n_fetches, tfc_tensor *const *fetches,
                                         int n_targets, tfc_tensor *const *targets,
                                         tfc_run **out);
/* Waits for the run, hands over its fetched values (fetch_values may be NULL to drop them) and
 * destroys the run. Returns the run's status; its message is on the session. */
TFC_API tfc_status tfc_run_wait(tfc_run *run, tfc_value **fetch_values);

/* Initializes every variable of the graph from its initializer (those already initialized
 * are reset to it too). */
TFC_API tfc_status tfc_session_init_variables(tfc_session *s);
TFC_API tfc_status tfc_session_init_variable(tfc_session *s, tfc_tensor *var);
TFC_API int tfc_session_variable_initialized(tfc_session *s, tfc_tensor *var);
/* A host copy of a variable's current value (acquired through StarPU). */
TFC_API tfc_status tfc_session_read_variable(tfc_session *s, tfc_tensor *var, tfc_value **out);
/* Host copies of several variables taken as one consistent cut between runs (all copies are
 * queued under the session's submission lock): what a checkpoint needs. */
TFC_API tfc_status tfc_session_read_variables(tfc_session *s, int n, tfc_tensor *const *vars,
                                              tfc_value **out);
/* Sets a variable from a host value of its dtype and shape. */
TFC_API tfc_status tfc_session_write_variable(tfc_session *s, tfc_tensor *var,
                                              const tfc_value *value);

typedef struct tfc_session_stats {
    uint64_t runs;          /* completed runs */
    uint64_t lowerings;     /* plans built (graph work); stays flat on repeated runs */
    uint64_t plan_hits;     /* runs that found their plan in the cache */
    uint64_t tasks;         /* StarPU tasks submitted */
    int cached_plans;       /* plans in the cache now */
    uint64_t soft_fallbacks; /* tasks submitted whose soft placement hint could not be honoured
                              * (tfc_session_last_warning names them) */
    uint64_t loop_iterations; /* while-loop bodies run (all loops, nested ones included) */
    uint64_t cond_then, cond_else; /* cond branches taken */
    uint64_t loop_iterations_kept; /* forward loop iterations whose loop variables were kept
                                    * for a gradient loop of the same run */
    uint64_t loops_count_known; /* while-loop runs whose trip count was computed before they
                                 * ran, so no predicate was read back (TFC_WHILE_COUNT) */
} tfc_session_stats;

TFC_API void tfc_session_get_stats(tfc_session *s, tfc_session_stats *out);
/* The warnings of the last run submitted on s, "" when it had none: today the soft placement
 * hints that could not be honoured ("node 'x' (op): soft device 'opencl' not satisfied (...);
 * any worker may run it"). Borrowed until the next run on s. */
TFC_API const char *tfc_session_last_warning(const tfc_session *s);
/* Bound on cached plans (LRU; default 32). */
TFC_API void tfc_session_set_plan_cache_size(tfc_session *s, int n);

/* Tiling: a 2-D float32/float64 matmul node of at least `min_flops` (2*m*n*k) runs as one task
 * per tile of its output (tile edge `tile_size` elements; the last row and column of tiles may
 * be smaller), so several workers share it. Its operands are partitioned with StarPU's
 * asynchronous partitioning around the tile tasks, each of which reads strided 2-D views
 * (StarPU matrix interfaces); BLAS stays single-threaded inside each task. A node whose output
 * would be a single tile is split along its inner dimension instead, when that gives more than
 * one chunk: one task per chunk of k (tile_size long; auto: 2 chunks per worker, at least 256)
 * writing partial products, and one task adding them. The environment sets the session's
 * values at tfc_session_create: TFC_TILE_MIN (flops, a decimal integer; 0 or "off": no tiling;
 * default 268435456 = 2*512^3) and TFC_TILE_SIZE ("auto", the default: the largest of 1024,
 * 512, 256 giving at least 4 output tiles per StarPU worker, else 256, and no tiling with a
 * single worker; or an edge from 1 to 65536). Any other value fails tfc_session_create with
 * TFC_ERR_INVALID_ARGUMENT. The call below replaces both (min_flops 0: off; tile_size 0: auto)
 * and rebuilds cached plans; a negative or NaN min_flops or a tile_size outside [0, 65536] is
 * TFC_ERR_INVALID_ARGUMENT. Tiles show up as separate tasks in tfc_session_stats.tasks and in
 * the task records, each with the node's name. A plan split across MPI ranks (model
 * parallelism: "rank:R" hints) is never tiled. */
TFC_API tfc_status tfc_session_set_tiling(tfc_session *s, double min_flops, int tile_size);

/* Per-task records of the runs that follow (StarPU's profiling information): on/off. */
TFC_API tfc_status tfc_session_set_profiling(tfc_session *s, int on);

typedef struct tfc_task_record {
    const char *node;       /* node name, borrowed from the graph */
    const char *op;
    int worker;             /* StarPU worker id */
    char worker_name[48];
    double start_us, end_us; /* StarPU's clock, microseconds (measured: end_us - start_us) */
    double predicted_us;     /* the perfmodel's time for the worker it ran on: StarPU's own
                              * prediction under dm* schedulers (task->predicted), else
                              * starpu_task_expected_length at completion; NaN when the
                              * codelet has no model or the model is not calibrated */
} tfc_task_record;

/* The records of the last run that completed with profiling on (borrowed until the next run
 * completes on this session). */
TFC_API int tfc_session_last_records(tfc_session *s, const tfc_task_record **out);

/* Where things ran: the summary of the last run that completed with profiling on. Bus and
 * worker figures are differences of StarPU's profiling counters taken when the run was
 * submitted and when it completed, so they include whatever else ran in that interval
 * (concurrent runs, other sessions). StarPU's getters reset its counters: the library
 * accumulates them process-wide, so STARPU_BUS_STATS / STARPU_WORKER_STATS at shutdown only
 * show what happened after the library's last read. */
typedef struct tfc_link_record {
    int src_node, dst_node;  /* StarPU memory nodes */
    char src[32], dst[32];   /* their names ("NUMA 0", "OpenCL 0") */
    uint64_t bytes;          /* bytes moved from src to dst during the run */
    uint64_t transfers;
} tfc_link_record;

typedef struct tfc_worker_record {
    int worker;              /* StarPU worker id */
    char name[48];
    double total_us;         /* the run's interval as the worker measured it */
    double executing_us, sleeping_us;
    double idle_us;          /* total_us - executing_us (sleeping and scheduling included) */
    int tasks;               /* tasks it executed in the interval (any session's) */
} tfc_worker_record;

typedef struct tfc_run_summary {
    double start_us, end_us; /* submission and completion, StarPU's clock */
    int n_tasks;
    const tfc_task_record *tasks;
    int n_links;             /* only links that moved bytes */
    const tfc_link_record *links;
    int n_workers;
    const tfc_worker_record *workers;
    int n_steps;             /* the steps run inside chain tasks (a plan pinned to one worker,
                              * a block of rows: one task "chain" each), timed by the chain
                              * task's kernel: node and op the step's, worker and times within
                              * its chain's; predicted_us NaN */
    const tfc_task_record *steps;
} tfc_run_summary;

/* Fills *out with the last profiled run's summary (arrays borrowed until the next profiled
 * run completes on s); TFC_ERR_INVALID_ARGUMENT when no profiled run has completed. */
TFC_API tfc_status tfc_session_last_summary(tfc_session *s, tfc_run_summary *out);
/* Writes the last profiled run's report (a table per task, per link, per worker) to out. */
TFC_API tfc_status tfc_session_write_report(tfc_session *s, FILE *out);
/* Writes the last profiled run as a Chrome trace (chrome://tracing, ui.perfetto.dev) in the
 * JSON array format: one complete event per task, pid = the process id, tid = worker id,
 * ts/dur in microseconds. A path that a session's TFC_TRACE holds (see below) is refused with
 * TFC_ERR_INVALID_ARGUMENT naming the holder. */
TFC_API tfc_status tfc_session_write_trace(tfc_session *s, const char *path);
/* Environment (read at tfc_session_create; either one turns profiling on for the session):
 * TFC_REPORT=1 prints every run's report on stderr (0: off, the default). TFC_TRACE=path gives
 * each session a Chrome trace of all its runs: path, with %p replaced by the process id, %s
 * by the session number (the n-th session of the process) and %% by '%', is created (or
 * emptied) at tfc_session_create and held, under a lock, until tfc_session_destroy. The file
 * starts with '[' and each run's events are appended with one write as the run is waited for
 * (tfc_run_wait, or the end of tfc_session_run), so between runs it is a JSON array without
 * its closing ']', which Chrome and Perfetto open as it is (appending ']' makes it strict
 * JSON): a process that crashes or is killed leaves a trace of every run it completed. The
 * ']' is written at tfc_session_destroy. A path another live session holds, in this process
 * or another, fails tfc_session_create with TFC_ERR_INVALID_ARGUMENT and a message naming the
 * path and the holder (its session number and process id); a dead process's lock is released
 * by the kernel. Any other TFC_REPORT value, an empty TFC_TRACE, a '%' followed by anything
 * but p, s or %, or a path that cannot be created fails tfc_session_create the same way. */

/* Plan-time graph passes, run when a plan is built (cached runs pay nothing), in this order:
 * TFC_PASS_CSE merges a node into an earlier one with the same op, attributes, inputs and
 * placement hint (never nodes that update variables, have control inputs, or read a variable
 * the same run updates); TFC_PASS_CONST_FOLD evaluates once, with the CPU kernels, every node
 * whose inputs are all constants (not under a hard placement hint; a soft one folds) and keeps
 * the result for the plan's runs; TFC_PASS_FUSION turns each chain or tree of element-wise ops
 * of one float dtype and output shape (up to 8 distinct inputs, which may broadcast; same
 * placement hint) into one task running a fused kernel on the CPU, CUDA or OpenCL, so
 * intermediates never reach memory; an intermediate that is fetched or read by another op
 * stays an output of the task; a max pool of such a task's result, when the task is exactly
 * non-decreasing in one input (add, subtract, maximum, minimum, relu, leaky relu, clip) and
 * its other inputs are the same across the pooled dims (a bias per channel), runs before it
 * and the task on the pooled values (the same values, NaNs aside; TensorFlow's grappler swaps
 * a max pool and a monotone function so). Results equal those without the passes within
 * float rounding.
 * All are on by default; the environment variables TFC_CSE, TFC_CONST_FOLD and TFC_FUSION
 * (read at tfc_session_create) turn one off with 0 (on with 1); any other value fails session
 * creation with TFC_ERR_INVALID_ARGUMENT. The test hooks that pin every op task drop folding
 * and fusion. */
enum tfc_pass {
    TFC_PASS_CSE = 1 << 0,
    TFC_PASS_CONST_FOLD = 1 << 1,
    TFC_PASS_FUSION = 1 << 2,
    TFC_PASS_PIN_CHAINS = 1 << 3, /* a plan whose tasks form a chain runs on one CPU worker,
                                   * as one task (README: graph passes) */
    TFC_PASS_ALL = (1 << 4) - 1,
};
/* Sets which passes the session's plans use (a set of TFC_PASS_* bits); plans built before are
 * rebuilt. Unknown bits are TFC_ERR_INVALID_ARGUMENT (nothing changes). */
TFC_API tfc_status tfc_session_set_passes(tfc_session *s, unsigned passes);
/* The TFC_PASS_* bits in effect (0 for NULL). */
TFC_API unsigned tfc_session_get_passes(tfc_session *s);

/* ---- Input pipeline -------------------------------------------------------------------- */

/* The input pipeline: idx (MNIST) and NumPy .npy readers, a .npy writer, value
 * helpers (uint8 normalization, reshape) and a batcher that shuffles deterministically and
 * prefetches the next batch on its own thread.
 *
 *   tfc_value *x, *y, *xf;
 *   tfc_idx_read("train-images-idx3-ubyte.gz", &x);          // uint8 [60000, 28, 28]
 *   tfc_idx_read("train-labels-idx1-ubyte.gz", &y);          // uint8 [60000]
 *   tfc_value_normalize_u8(x, 1.0f / 255, 0.0f, &xf);        // float32 [60000, 28, 28]
 *   tfc_value_reshape(xf, tfc_shape_of(2, (int64_t[]){60000, 784}));
 *   tfc_batcher *b;
 *   tfc_batcher_create(2, (tfc_value *[]){xf, y}, 64, seed, TFC_BATCHER_SHUFFLE, &b);
 *   for (int done = 0, epochs = 0; epochs < 10; epochs += done) {
 *       tfc_value *batch[2];                                 // borrowed from the batcher
 *       tfc_batcher_next(b, batch, &done);                   // batch k+1 loads meanwhile
 *       ... feed batch[0], batch[1] ...
 *   }
 *   tfc_batcher_destroy(b);                                  // before xf and y
 */
/* ---- Files ----------------------------------------------------------------------------- */

/* Reads an idx file (MNIST, Fashion-MNIST), gzip-compressed or plain (told apart by content),
 * into a new value owned by the caller. The magic is 0x00 0x00 <type> <rank>; rank 1 to 8;
 * dims are big-endian uint32. Element types: 0x08 uint8 -> TFC_UINT8, 0x0C int32 -> TFC_INT32,
 * 0x0D float32 -> TFC_FLOAT32, 0x0E float64 -> TFC_FLOAT64, and, widened without loss because
 * the runtime has no narrow signed types, 0x09 int8 and 0x0B int16 -> TFC_INT32.
 * Bad files (missing, empty, short header, wrong magic, unknown type, data shorter or longer
 * than the header says, dims whose size overflows or exceeds what the file can hold) give
 * TFC_ERR_INVALID_ARGUMENT (TFC_ERR_NOT_FOUND for a missing file, TFC_ERR_OUT_OF_MEMORY), a
 * message naming the path on tfc_errmsg(), and *out = NULL. Sizes are checked against the file
 * (or, for gzip, against the most that deflate can expand it to) before allocating. */
TFC_API tfc_status tfc_idx_read(const char *path, tfc_value **out);

/* Reads a NumPy .npy file (format 1.0, 2.0 or 3.0; C order) into a new value owned by the
 * caller. dtypes: '<f4' float32, '<f8' float64, '<i4' int32, '<i8' int64, '|u1' uint8, '|b1'
 * bool (nonzero bytes read as 1). Big-endian, other dtypes, fortran_order True, more than 8
 * dims, and files whose size does not match the header are errors with a message naming the
 * path, as for tfc_idx_read. */
TFC_API tfc_status tfc_npy_read(const char *path, tfc_value **out);
/* Writes v (any dtype, rank 0 to 8) as a .npy file, format 1.0, replacing path; the header is
 * padded to a multiple of 64 bytes as NumPy does. TFC_ERR_NOT_FOUND when the directory is
 * missing, TFC_ERR_RUNTIME when a write fails (the partial file is removed); message on
 * tfc_errmsg(). */
TFC_API tfc_status tfc_npy_write(const char *path, const tfc_value *v);

/* ---- Value helpers --------------------------------------------------------------------- */

/* A new float32 value of in's shape holding in[i] * scale + shift (in is uint8), e.g. scale
 * 1/255 and shift 0 for pixels in [0, 1]. TFC_ERR_DTYPE when in is not uint8. */
TFC_API tfc_status tfc_value_normalize_u8(const tfc_value *in, float scale, float shift,
                                          tfc_value **out);
/* Gives v a new shape with the same number of elements (no dimension may be -1), in place: the
 * row-major data keeps its order. TFC_ERR_SHAPE when the element counts differ. */
TFC_API tfc_status tfc_value_reshape(tfc_value *v, tfc_shape shape);

/* ---- Batcher --------------------------------------------------------------------------- */

typedef struct tfc_batcher tfc_batcher;

enum {
    TFC_BATCHER_SHUFFLE = 1u << 0,   /* a new permutation of the rows every epoch */
    TFC_BATCHER_DROP_LAST = 1u << 1, /* skip the last batch of an epoch when it is partial */
};

/* A batcher over n_sources values that share their leading dimension n (rows: images
 * [n, 784], labels [n], ...). Each batch holds the same rows of every source. The row order
 * of epoch e is a pure function of (seed, e): a Fisher-Yates shuffle driven by a splitmix64
 * stream keyed by both, or 0..n-1 without TFC_BATCHER_SHUFFLE. An epoch has
 * tfc_batcher_steps_per_epoch batches of `batch` rows, the last one partial unless
 * TFC_BATCHER_DROP_LAST. A loader thread gathers batch k+1 into a preallocated double buffer
 * while the caller uses batch k. The sources are borrowed, read by the loader thread: they must
 * stay alive and unchanged until tfc_batcher_destroy. Errors: TFC_ERR_INVALID_ARGUMENT (NULL,
 * n_sources < 1, batch < 1, no full batch with DROP_LAST, unknown flags), TFC_ERR_SHAPE
 * (rank 0, n == 0, leading dimensions that differ), TFC_ERR_OUT_OF_MEMORY, TFC_ERR_RUNTIME
 * (no thread); message on tfc_errmsg(). */
TFC_API tfc_status tfc_batcher_create(int n_sources, tfc_value *const *sources, int64_t batch,
                                      uint64_t seed, unsigned flags, tfc_batcher **out);
/* Joins the loader thread and frees the buffers (the batch values handed out die with them). */
/* The same for one rank of n_ranks in data-parallel training (issue 15): batch is the global
 * batch and the row order the same on every rank, a pure function of (seed, epoch); rank r gets
 * rows [g r / n_ranks, g (r + 1) / n_ranks) of each global batch of g rows, so the ranks'
 * slices in rank order are the batch one process gets. A rank left no row of a batch (the
 * global batch smaller than n_ranks, or a short last batch: use DROP_LAST) and a rank outside
 * [0, n_ranks) are TFC_ERR_INVALID_ARGUMENT. tfc_batcher_create is rank 0 of 1. */
TFC_API tfc_status tfc_batcher_create_shard(int n_sources, tfc_value *const *sources,
                                            int64_t batch, uint64_t seed, unsigned flags,
                                            int rank, int n_ranks, tfc_batcher **out);
TFC_API void tfc_batcher_destroy(tfc_batcher *b);
/* Hands out the batch at the current position and advances it, waiting for the loader when the
 * batch is not ready yet. batch_values[i] (n_sources entries) receives the rows of source i,
 * shape [rows, source dims 1...], owned by the batcher and valid until the next call of
 * tfc_batcher_next, tfc_batcher_seek or tfc_batcher_destroy: copy what must live longer.
 * *epoch_done (may be NULL) is set to 1 when this batch is the last of its epoch, else 0.
 * Batches go on across epochs without end. One caller thread at a time. */
TFC_API tfc_status tfc_batcher_next(tfc_batcher *b, tfc_value **batch_values, int *epoch_done);
/* The position of the batch the next tfc_batcher_next returns (epoch from 0, step in
 * [0, steps_per_epoch)). After the last batch of epoch e it is (e + 1, 0). */
TFC_API void tfc_batcher_position(const tfc_batcher *b, int64_t *epoch, int64_t *step);
/* Moves to (epoch, step), e.g. a position saved with a checkpoint: the batches that follow are
 * exactly those an uninterrupted run gives from there. Invalidates the batch handed out last
 * and discards prefetched ones. TFC_ERR_OUT_OF_RANGE for a negative epoch or a step outside
 * [0, steps_per_epoch); message on tfc_batcher_errmsg. */
TFC_API tfc_status tfc_batcher_seek(tfc_batcher *b, int64_t epoch, int64_t step);
TFC_API int64_t tfc_batcher_steps_per_epoch(const tfc_batcher *b);
/* Seconds the caller spent blocked in tfc_batcher_next waiting for the loader, in total (near
 * zero when loading keeps up with the training step). */
TFC_API double tfc_batcher_wait_seconds(const tfc_batcher *b);
TFC_API const char *tfc_batcher_errmsg(const tfc_batcher *b);

/* ---- Model store (SQLite) ---------------------------------------------------------------- */

/* One SQLite file per model holds the graph, named signatures, checkpoints of every variable
 * (optimizer slots and the global step included) with the input pipeline's position, and run
 * metrics. It is transactional, survives kill -9, and can be queried with the sqlite3 shell.
 */
typedef struct tfc_store tfc_store;

enum tfc_store_flags {
    TFC_STORE_READONLY = 1u << 0,  /* open read-only (the file must exist) */
    TFC_STORE_CREATE = 1u << 1,    /* create the file when it does not exist */
    TFC_STORE_EXCLUSIVE = 1u << 2, /* exclusive locking mode, for file systems without shared
                                    * memory locking (NFS, Lustre): one process at a time */
    TFC_STORE_TRAINER = 1u << 3,   /* take the store's training lock now (see below) */
};
/* Locking. By default the store uses SQLite's WAL mode, whose index lives in a memory-mapped
 * "-shm" file next to the database: any number of processes may read while one writes, which
 * needs a local file system (or one with coherent mmap and POSIX locks). On NFS and Lustre open
 * it with TFC_STORE_EXCLUSIVE (PRAGMA locking_mode=EXCLUSIVE before the WAL is entered): the
 * index stays in the process's memory and the process holds the file's lock from open to close,
 * so other processes, readers included, wait (busy timeout 5 s) and then fail with a message
 * naming the holder when it is on this host. A write that finds another writer waits the same
 * 5 s, then fails with TFC_ERR_STORE "locked by process N".
 * Training. One training writer per store, across processes and hosts: a store opened with
 * TFC_STORE_TRAINER, or the first tfc_store_checkpoint on a store opened without it, takes the
 * store's training lock until close: an fcntl lock on a byte of the file that SQLite never
 * locks (it dies with the process) and a record of the holder in the meta table (trainer_pid,
 * trainer_host, trainer_since). A second writer fails with TFC_ERR_STORE naming the holder's
 * process id, host and start; a record left by a killed writer is taken over (its lock is
 * free; where the file system has no locks: same host and the process is gone). Readers never
 * take it, and a read-only open leaves the file as it was, one file. */

/* Opens (or creates) a model store: WAL journal, schema migrated forward to the current
 * version in one transaction (a failed migration leaves the store as it was). Errors:
 * TFC_ERR_STORE with a message naming the file and the cause (not a database, corrupted or
 * truncated, newer schema than this library, an older one opened read-only, not a tfc store,
 * read-only file or mount opened without TFC_STORE_READONLY, locked by process N, disk full),
 * TFC_ERR_NOT_FOUND for a missing file without TFC_STORE_CREATE, TFC_ERR_INVALID_ARGUMENT
 * (READONLY with CREATE, unknown flags). The message is on tfc_errmsg(); nothing in the file
 * is changed by a failed open. A read-only store on read-only media is read as immutable. */
TFC_API tfc_status tfc_store_open(const char *path, unsigned flags, tfc_store **out);
/* Waits for pending writes, checkpoints the WAL into the main file (a closed model is one
 * file) and closes. Write errors found here are dropped: call tfc_store_flush first to see
 * them. NULL is a no-op. */
TFC_API void tfc_store_close(tfc_store *st);
/* The message of the last failed call on st (tfc_errmsg() when st is NULL). */
TFC_API const char *tfc_store_errmsg(const tfc_store *st);
/* The schema version this library writes (PRAGMA user_version). */
TFC_API int tfc_store_schema_version(void);

/* The graph: every node, op, attribute (as text from the op's attribute table), input and
 * control edge, constants' data and variables' initializers, and the graph seed. Saving
 * replaces the stored graph, in one transaction; a graph with a build error is refused
 * (TFC_ERR_INVALID_ARGUMENT). User gradient functions are C code and are not stored. */
TFC_API tfc_status tfc_store_save_graph(tfc_store *st, tfc_graph *g);
/* A new graph built from the store, runnable without the code that built the original (same
 * node names and order). TFC_ERR_NOT_FOUND when no graph is stored. A damaged graph fails with
 * a message naming the node: an unknown op or input (TFC_ERR_NOT_FOUND), bad attributes or
 * input counts, a cycle (TFC_ERR_CYCLE), rows out of order or a node count that differs from
 * the graph row (TFC_ERR_STORE). */
TFC_API tfc_status tfc_store_load_graph(tfc_store *st, tfc_graph **out);

/* Named signatures: "train" (feeds, loss, metrics, train_op) and "predict" (feeds, outputs),
 * by tensor names ("node" or "node:k"). Setting one replaces the signature of that name; when a
 * graph is stored every name must be one of its tensors (TFC_ERR_NOT_FOUND otherwise). */
typedef struct tfc_signature {
    int n_feeds;
    const char **feeds;
    int n_outputs;
    const char **outputs;
    int n_metrics;
    const char **metrics;
    const char *loss;      /* may be NULL */
    const char *train_op;  /* may be NULL */
} tfc_signature;

TFC_API tfc_status tfc_store_set_signature(tfc_store *st, const char *name,
                                           const tfc_signature *sig);
/* A copy owned by the caller (tfc_signature_free); TFC_ERR_NOT_FOUND when absent,
 * TFC_ERR_STORE when a stored name is no node of the stored graph (a damaged store). */
TFC_API tfc_status tfc_store_get_signature(tfc_store *st, const char *name, tfc_signature **out);
TFC_API void tfc_signature_free(tfc_signature *sig);

/* Where the input pipeline stands, saved with a checkpoint so training resumes exactly. */
typedef struct tfc_input_position {
    uint64_t seed;
    int64_t epoch, step;
} tfc_input_position;

typedef struct tfc_checkpoint_info {
    int64_t id;            /* increasing */
    int64_t step;          /* training step (global step) */
    double time;           /* seconds since the epoch */
    tfc_input_position position;
    int n_variables;
    int64_t bytes;
} tfc_checkpoint_info;

/* Takes a checkpoint of every variable of the session's graph (slots and global step
 * included) as one consistent cut between runs, then writes it in one transaction on the
 * store's writer thread while training goes on, together with the metrics logged so far for
 * steps up to `step` (a checkpoint that survives a crash has its steps' metrics). Returns once
 * the snapshot is taken (a host copy; at most two snapshots wait for the disk, a third call
 * waits for the first): tfc_store_committed_checkpoints says when it is on disk. Variables
 * never initialized hold no value and are left out. Data is stored little-endian, row-major,
 * in chunks of at most 64 MiB, each with a CRC-32. pos may be NULL. Nothing partial is
 * stored. A write that fails on the writer thread (disk full, file size limit, locked by
 * another process) is sticky: the writes queued behind it are dropped (nothing is written
 * out of order), and this call, tfc_store_log_metric, tfc_store_set_retention,
 * tfc_store_truncate_metrics and tfc_store_committed_checkpoints return it (TFC_ERR_STORE,
 * naming the file and the cause) and queue nothing until tfc_store_flush reports it.
 * A graph split across ranks ("rank:R" hints) is gathered by a run: every rank calls this,
 * each with a store of its own, and each store gets every variable's current value. */
TFC_API tfc_status tfc_store_checkpoint(tfc_store *st, tfc_session *s, int64_t step,
                                        const tfc_input_position *pos);
/* Without waiting: *count receives the number of checkpoints committed through st since it
 * was opened (in the order they were taken), *step the step of the newest of them (-1: none);
 * either may be NULL. Returns the sticky write error, if any (see tfc_store_checkpoint); the
 * count and step are filled in then too. */
TFC_API tfc_status tfc_store_committed_checkpoints(tfc_store *st, int64_t *count,
                                                   int64_t *step);
/* Hands buffered metrics to the writer, waits for it, and returns the first write error since
 * the last flush (its message on tfc_store_errmsg); write calls are accepted again after it. */
TFC_API tfc_status tfc_store_flush(tfc_store *st);
/* Keeps the newest keep_last checkpoints (0: all), plus one every keep_every steps (0: none):
 * the oldest checkpoint of each window of steps [k * keep_every, (k + 1) * keep_every).
 * Applied now and in the transaction of every checkpoint; deleting a checkpoint deletes its
 * data. */
TFC_API tfc_status tfc_store_set_retention(tfc_store *st, int keep_last, int64_t keep_every);
/* The stored checkpoints in step order, the latest last (by step, then id: never by arrival);
 * array owned by the caller: free(). */
TFC_API tfc_status tfc_store_list_checkpoints(tfc_store *st, int *n, tfc_checkpoint_info **out);

typedef struct tfc_restore_options {
    int64_t step;              /* the checkpoint of this step; -1: the latest (highest step) */
    int n_names;               /* restore only these variables (0: all) */
    const char *const *names;
    const char *const *from;   /* optional name map: variable names[i] takes the stored
                                * variable from[i] (fine-tuning) */
    int allow_missing;         /* variables absent from the checkpoint keep their value */
} tfc_restore_options;

typedef struct tfc_restore_report {
    int64_t step;              /* of the checkpoint restored */
    tfc_input_position position;
    int n_missing, n_extra;    /* graph variables not in the checkpoint; stored ones not in the graph */
    char **missing, **extra;   /* names, freed by tfc_restore_report_clear */
} tfc_restore_report;

/* Restores a checkpoint into the session's variables (shapes and dtypes must match the graph:
 * TFC_ERR_SHAPE naming the variable otherwise, and nothing is changed). opt and report may be
 * NULL (latest checkpoint, all variables, missing ones are an error). Every shape is checked
 * and every chunk read and CRC-checked before the first variable is written, so a failure
 * changes nothing: TFC_ERR_NOT_FOUND (no such checkpoint or variable; missing variables are
 * listed), TFC_ERR_SHAPE, TFC_ERR_STORE (corrupted data, I/O). "Extra" variables are stored
 * ones that no graph variable has the name of and the name map does not use. */
TFC_API tfc_status tfc_store_restore(tfc_store *st, tfc_session *s,
                                     const tfc_restore_options *opt, tfc_restore_report *report);
TFC_API void tfc_restore_report_clear(tfc_restore_report *report);

/* Run metrics (loss, accuracy, anything): buffered and written in batches by the writer (1024
 * values or 10 s, one transaction each; a checkpoint commits those up to its step;
 * tfc_store_flush writes the rest now). A step has one value per name: logging it again
 * replaces the stored one. NaN is stored as NULL and read back as NaN. */
TFC_API tfc_status tfc_store_log_metric(tfc_store *st, int64_t step, const char *name,
                                        double value);
/* Discards every metric of a step after after_step, stored or buffered (in a writer
 * transaction; errors are sticky as for tfc_store_checkpoint). Training that resumes from
 * the checkpoint of step S calls it with S before it logs again, so that the steps a crashed
 * run took past its last checkpoint leave no values behind. */
TFC_API tfc_status tfc_store_truncate_metrics(tfc_store *st, int64_t after_step);
/* The metric's values in step order, including those still buffered (arrays owned by the
 * caller: free(); NULL and n = 0 when there are none). */
TFC_API tfc_status tfc_store_read_metric(tfc_store *st, const char *name, int *n,
                                         int64_t **steps, double **values);
/* One metric of a store: its name and the steps its values cover. */
typedef struct tfc_metric_info {
    const char *name;
    int64_t count;                 /* values logged */
    int64_t first_step, last_step; /* the least and greatest step */
    double last_value;             /* the last of tfc_store_read_metric's values (NaN if NaN) */
} tfc_metric_info;
/* Every metric in the store, including those still buffered, in the order they were first
 * logged (one allocation with the names, owned by the caller: free(); NULL and n = 0 when
 * there are none). TFC_ERR_STORE on a read error. */
TFC_API tfc_status tfc_store_list_metrics(tfc_store *st, int *n, tfc_metric_info **out);

/* ---- ONNX import and export (onnx/; built with --with-onnx) ------------------------------- */

/* Adds the graph of an ONNX model file (opsets up to TFC_ONNX_MAX_OPSET of the default
 * domain) to g: each graph input without an initializer becomes a placeholder of its name
 * (dtype and shape from the model; a symbolic leading dimension is -1; ':' ',' '"' in ONNX
 * names become '_'), each initializer a constant (or, with trainable, a float variable, see
 * below), each node one or a few of our ops, named after the node's outputs. Value-dependent
 * arguments (Reshape's shape, Slice's bounds, ReduceSum's axes, Expand's shape, OneHot's depth,
 * ...) must be constants, initializers, frozen inputs or computed from them: a node whose
 * inputs are all known runs during the import (in a context of its own, which joins a StarPU
 * the application already started). A worked example:
 *     tfc_graph *g; tfc_graph_create(&g);
 *     tfc_onnx_options o = {0};                    (o.trainable = 1: initializers as variables)
 *     tfc_onnx_model *m;
 *     if (tfc_onnx_import(g, "mlp.onnx", &o, &m)) puts(tfc_graph_errmsg(g));
 *     tfc_tensor *x = tfc_graph_find(g, m->predict->feeds[0]);
 *     tfc_tensor *y = tfc_graph_find(g, m->predict->outputs[0]);
 *     ... tfc_session_create; with trainable, tfc_onnx_init_variables(s, m); run x -> y ...
 *     tfc_onnx_model_free(m); tfc_graph_destroy(g);
 * Errors are recorded on g (tfc_graph_errmsg) and returned: TFC_ERR_NOT_FOUND (no such file, an
 * external data file missing, an op we do not map: the message names the op type, the node and
 * the opset), TFC_ERR_INVALID_ARGUMENT (not an ONNX model, truncated, a newer opset, an
 * attribute outside what we support, a value-dependent input that is not constant, a tensor
 * whose data does not match its dims), TFC_ERR_DTYPE, TFC_ERR_SHAPE (from the ops built). Without
 * ONNX support in the build: TFC_ERR_INVALID_ARGUMENT saying so. */
#define TFC_ONNX_MAX_OPSET 17 /* ONNX 1.12's default-domain opset */
typedef struct tfc_onnx_options {
    int trainable;                    /* 1: float initializers become trainable variables */
    int n_frozen;                     /* graph inputs given values: they become constants */
    const char *const *frozen_names;  /* (borrowed; the values are copied) */
    const tfc_value *const *frozen_values;
} tfc_onnx_options;
typedef struct tfc_onnx_model {
    tfc_signature *predict;  /* feeds: the placeholders; outputs: the graph's outputs */
    int64_t opset;           /* the model's default-domain opset */
    int n_variables;         /* with trainable: the variables and their initializer values */
    tfc_tensor **variables;
    tfc_value **values;
} tfc_onnx_model;
/* options may be NULL (the defaults); out may be NULL. *out is owned by the caller. */
TFC_API tfc_status tfc_onnx_import(tfc_graph *g, const char *path, const tfc_onnx_options *options,
                                   tfc_onnx_model **out);
/* Writes each variable of an import with trainable its initializer's value (a session of g). */
TFC_API tfc_status tfc_onnx_init_variables(tfc_session *s, const tfc_onnx_model *m);
TFC_API void tfc_onnx_model_free(tfc_onnx_model *m);
/* Writes the part of g that the signature's outputs need (from its feeds) to path as an ONNX
 * model (opset 17, IR version 8), so that ONNX Runtime and other frameworks run a model built
 * or trained here: feeds become graph inputs (a -1 leading dim the symbolic dim "N"), outputs
 * keep their tensor names, constants become initializers, and variables graph inputs or, with
 * options->variables (a session of g), initializers holding their values in that session. An
 * unfed placeholder with a default (the training flag) is its default, and dropout and batch
 * norm export in inference mode when their training input is known to be 0. Our ops map to
 * ONNX ops (gelu, silu, log1p, expm1, rsqrt, square, not_equal, batch_matmul's adjoints and
 * the dense softmax cross-entropy as a few nodes); optimizer updates, gradients, assignments and control flow have no ONNX form.
 * Errors on tfc_errmsg(): TFC_ERR_NOT_FOUND (a signature name that is no tensor; an op with no
 * ONNX form: the message names the op and the node), TFC_ERR_INVALID_ARGUMENT (NULL arguments,
 * no outputs, a placeholder the outputs need that is not fed, a training input fed at run
 * time, a file that cannot be written, a model above protobuf's 2 GiB), TFC_ERR_UNINITIALIZED
 * (a variable without a value in the session). Nothing is left at path after an error. Without
 * ONNX support in the build: TFC_ERR_INVALID_ARGUMENT saying so. */
typedef struct tfc_onnx_export_options {
    tfc_session *variables;  /* NULL: variables become graph inputs */
} tfc_onnx_export_options;
TFC_API tfc_status tfc_onnx_export(tfc_graph *g, const tfc_signature *sig,
                                   const tfc_onnx_export_options *options, const char *path);
/* ---- Distributed training (issue 15) ---------------------------------------------------- */

/* Synchronous data-parallel training (sched/dist_train.c), parameter-server style. Built on g
 * before its sessions: the gradients of loss for vars (float32) and, per variable, an update
 * by opt from a summed gradient and an assign from the owner's value. Each variable has an
 * owner rank: the largest variables first to the rank with the fewest bytes (traffic balanced
 * across ranks), or all on rank 0 with TFC_DIST_OWNERS_RANK0. A step on each rank computes the
 * gradients of its slice (tfc_batcher_create_shard), the owners gather them through StarPU-MPI,
 * sum them in rank order weighted by each slice's share of the global batch's rows, apply the
 * optimizer and send the new values to the other ranks. Every rank calls tfc_dist_train_step
 * with the same sequence of steps. tfc_dist_train_step_local is the one-process reference: it
 * computes the n_ranks slices in turn (slices: n_ranks groups of n_feeds values, in rank
 * order) and sums and applies the same way, so both give the same bits. global_rows is the
 * row count of this step's global batch (the ranks' slices together; a short last batch of an
 * epoch has fewer): it weights each slice. Errors name the variable or the run; messages on
 * tfc_dist_train_errmsg (creation: tfc_errmsg). */
typedef struct tfc_dist_train tfc_dist_train;
enum { TFC_DIST_OWNERS_RANK0 = 1u << 0, TFC_DIST_WHOLE_VARIABLES = 1u << 1 };
TFC_API tfc_status tfc_dist_train_create(tfc_graph *g, tfc_tensor *loss, int n_vars,
                                         tfc_tensor *const *vars, const tfc_optimizer *opt,
                                         int n_ranks, unsigned flags, tfc_dist_train **out);
TFC_API void tfc_dist_train_destroy(tfc_dist_train *t);
/* The owner rank of vars[i] (of its first tile when tiled; -1 outside the list). */
TFC_API int tfc_dist_train_owner(const tfc_dist_train *t, int i);
/* Tiles (sched/dist_tile.c): a variable of more than TFC_DIST_TILE_BYTES bytes (default: of
 * more than the model's bytes / ranks) is split into row tiles, min(ranks, rows) ranges of its
 * leading dimension as even as the batcher's slices, each owned by a different rank (the
 * largest pieces first to the rank with the fewest bytes, as whole variables are); the owner
 * of a tile sums that tile's gradient slices in rank order, updates the tile (optimizer slots
 * tiled alike; the updates are element-wise, so the bits are the whole variable's) and sends
 * it to the others. None with TFC_DIST_WHOLE_VARIABLES, TFC_DIST_OWNERS_RANK0, backup workers
 * or an optimizer with clip_norm (the global norm needs the whole gradient). set_tiling (before
 * the first step) sets the threshold: min_bytes > 0, 0 no tiles, -1 the default; it re-chooses
 * the owners. tiles: variable i's number of tiles (1: whole; -1 outside the list); tile: the
 * owner of its tile k and the tile's rows [*row0, *row1) (-1 outside). */
TFC_API tfc_status tfc_dist_train_set_tiling(tfc_dist_train *t, long long min_bytes);
TFC_API int tfc_dist_train_tiles(const tfc_dist_train *t, int i);
TFC_API int tfc_dist_train_tile(const tfc_dist_train *t, int i, int k, int64_t *row0,
                                int64_t *row1);
TFC_API tfc_status tfc_dist_train_step(tfc_dist_train *t, tfc_ctx *ctx, tfc_session *s,
                                       int n_feeds, tfc_tensor *const *feeds,
                                       tfc_value *const *slice, int64_t global_rows);
TFC_API tfc_status tfc_dist_train_step_local(tfc_dist_train *t, tfc_session *s, int n_feeds,
                                             tfc_tensor *const *feeds,
                                             tfc_value *const *slices, int64_t global_rows);
TFC_API const char *tfc_dist_train_errmsg(const tfc_dist_train *t);
/* Checkpoints across ranks (sched/dist_state.c): every rank calls it between steps, in the
 * same order; the owners send rank 0 the variables only they keep current (the optimizer slots
 * and iteration counter of each update), so that rank 0's session holds the whole training
 * state as one consistent cut. Rank 0 then takes the checkpoint with tfc_store_checkpoint (the
 * ordinary store format, read by `tfc`); the others open no store for writing. A restart, on
 * any number of ranks, restores that checkpoint on every rank (tfc_store_restore; ranks other
 * than 0 open the store TFC_STORE_READONLY), builds its trainer for the new number of ranks and
 * seeks its shard batcher to the saved position: it goes on with the bits of a run that
 * changed its number of ranks at that step without stopping. Without MPI and with one rank:
 * nothing to do. */
TFC_API tfc_status tfc_dist_train_gather(tfc_dist_train *t, tfc_ctx *ctx, tfc_session *s);
/* Backup workers (the TensorFlow paper's section 4.4; sched/dist_backup.c): with b backups
 * (0 <= b < ranks, at most 64 ranks; every rank sets the same b), rank 0 owns every variable
 * and each tfc_dist_train_step applies the gradients of the first ranks - b ranks to arrive
 * (rank 0's own among them), weighted by their slices' share of their rows and summed in rank
 * order, and drops the late ones; the new values go back without rank 0 waiting for a
 * straggler. tfc_dist_train_chosen gives the ranks the last step applied (bit r: rank r), to
 * be recorded with the step (e.g. as a metric, committed with the checkpoint);
 * tfc_dist_train_replay makes the next step (tfc_dist_train_step on every rank, or
 * tfc_dist_train_step_local) apply exactly those ranks', so a replay gives the same bits. */
TFC_API tfc_status tfc_dist_train_set_backups(tfc_dist_train *t, int backups);
TFC_API unsigned long long tfc_dist_train_chosen(const tfc_dist_train *t);
TFC_API tfc_status tfc_dist_train_replay(tfc_dist_train *t, unsigned long long ranks);
/* Data-parallel steps of a stored training op (sched/dist_op.c; what `mpirun tfc train` runs):
 * train_op groups optimizer updates (tfc_minimize's). A step on every rank computes, for its
 * slice, the gradients those updates read and the fetches; rank 0 sums them (float32 scalar
 * fetches too) in rank order weighted by each slice's share of the global_rows rows, runs
 * train_op with the sums fed in the gradients' place (and its own slice, for whatever else the
 * op reads), and sends every variable of the graph to the other ranks: rank 0 holds the whole
 * state and takes the checkpoints. That is TFC_DIST_OWNERS_RANK0=1; by default each update
 * runs instead on the owner rank of its variable, or of each row tile of a large one (chosen by
 * size, as tfc_dist_train does), which sums those gradients (the same bits) and broadcasts the
 * new values; the slots stay on the owners until tfc_dist_op_gather. fetched[k] (owned by the
 * caller): on rank 0 the global batch's value of a float32 scalar fetch, the slice's
 * otherwise. With one rank, a plain run
 * of train_op. A gradient clipped by its global norm is clipped per slice. Errors:
 * TFC_ERR_INVALID_ARGUMENT, TFC_ERR_DTYPE (a gradient not float32), TFC_ERR_RUNTIME; messages
 * on tfc_dist_op_errmsg (creation: tfc_errmsg). */
typedef struct tfc_dist_op tfc_dist_op;
TFC_API tfc_status tfc_dist_op_create(tfc_graph *g, tfc_tensor *train_op, tfc_dist_op **out);
TFC_API void tfc_dist_op_destroy(tfc_dist_op *d);
TFC_API tfc_status tfc_dist_op_step(tfc_dist_op *d, tfc_ctx *ctx, tfc_session *s, int n_feeds,
                                    tfc_tensor *const *feeds, tfc_value *const *slice,
                                    int64_t global_rows, int n_fetches,
                                    tfc_tensor *const *fetches, tfc_value **fetched);
TFC_API const char *tfc_dist_op_errmsg(const tfc_dist_op *d);
/* Every rank calls it before rank 0 checkpoints: the optimizer slots each owner keeps current
 * go to rank 0 (the variables are everywhere after a step). Nothing to do with
 * TFC_DIST_OWNERS_RANK0=1 or one rank. Errors: TFC_ERR_RUNTIME, on tfc_dist_op_errmsg. */
TFC_API tfc_status tfc_dist_op_gather(tfc_dist_op *d, tfc_ctx *ctx, tfc_session *s);

#ifdef __cplusplus
}
#endif
#endif /* TFC_H */
