/* tool.h: the `tfc` command-line tool's private declarations: the commands (one file each
 * family), option parsing, opening a model store, loading data files into feeds, and the
 * graph walk that `info` and `dot` share. Uses the public API, plus the graph's node records
 * (graph/serialize.h) to list nodes and edges, which the public API does not expose. */
#ifndef TFC_TOOL_H
#define TFC_TOOL_H

#include <stdint.h>
#include <stdio.h>
#include "tfc.h"

/* Exit statuses: 0 success, 1 a failure (file, model, run), 2 misuse (unknown command or option,
 * bad value), 128 + signal for an interrupted training run. */
enum { TOOL_OK = 0, TOOL_FAIL = 1, TOOL_USAGE = 2 };

/* ---- Options ------------------------------------------------------------------------- */

#define TOOL_MAX_DATA 64
#define TOOL_MAX_METRICS 64

struct tool_data {
    char name[256];   /* feed name as given */
    const char *path;
};

struct tool_opts {
    const char *cmd;          /* "train", ... */
    const char *model;        /* MODEL.db */
    int n_data;
    struct tool_data data[TOOL_MAX_DATA];
    int n_val_data;           /* train: --val-data, the validation set */
    struct tool_data val_data[TOOL_MAX_DATA];
    int64_t early_stop;       /* train: patience in epochs; -1: not given */
    const char *early_stop_metric; /* train: NULL: val_loss */
    int log_y;                /* plot: --log-y */
    int n_metrics;
    const char *metrics[TOOL_MAX_METRICS];
    int64_t epochs;           /* -1: not given */
    int64_t batch;            /* -1: not given */
    int64_t checkpoint_every; /* -1: not given */
    int64_t keep;             /* -1: not given */
    int64_t rows;             /* run: rows printed per output; -1: not given */
    int have_seed;
    uint64_t seed;
    const char *out;          /* run: --out DIR; plot: -o FILE */
    int quiet;
};

/* The options a command takes: a string of flag letters, see tool_parse. */
enum {
    OPT_DATA = 1u << 0, OPT_EPOCHS = 1u << 1, OPT_BATCH = 1u << 2, OPT_CKPT = 1u << 3,
    OPT_KEEP = 1u << 4, OPT_SEED = 1u << 5, OPT_OUTDIR = 1u << 6, OPT_OUTFILE = 1u << 7,
    OPT_METRIC = 1u << 8, OPT_QUIET = 1u << 9, OPT_ROWS = 1u << 10,
    OPT_VAL_DATA = 1u << 11, OPT_EARLY_STOP = 1u << 12, OPT_LOG_Y = 1u << 13,
};

/* Parses argv (argv[0] is the command name) into o, accepting the options in `allowed` and
 * exactly one positional MODEL argument. Returns -1 when --help was asked (usage printed on
 * stdout), TOOL_USAGE after a message on stderr, 0 otherwise. */
int tool_parse(int argc, char **argv, unsigned allowed, const char *usage, struct tool_opts *o);

/* Prints "tfc CMD: message" on stderr; returns TOOL_FAIL. */
int tool_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- Models -------------------------------------------------------------------------- */

struct tool_model {
    tfc_store *store;
    tfc_graph *graph;
    tfc_ctx *ctx;          /* only when a session was asked for */
    tfc_session *session;
};

/* Opens the store (read-only unless writable: then for training, holding its training lock),
 * loads its graph and, when with_session, starts a context and a session. Prints the error
 * and returns TOOL_FAIL on failure. */
int tool_model_open(const char *cmd, const char *path, int writable, int with_session,
                    struct tool_model *m);
void tool_model_close(struct tool_model *m);
/* The signature `name`; prints an error naming the model when absent. */
int tool_signature(const char *cmd, struct tool_model *m, const char *path, const char *name,
                   tfc_signature **out);
/* Restores the latest checkpoint into the session (report filled, returns 1), or initializes
 * the variables when the store has none (returns 0); -1 after an error was printed. */
int tool_restore_or_init(const char *cmd, struct tool_model *m, tfc_restore_report *report);

/* ---- Data ---------------------------------------------------------------------------- */

/* The feeds of a signature, loaded from the --data files and converted to the placeholders'
 * dtypes and row shapes (see tool_data_rules). */
struct tool_feeds {
    int n;
    tfc_tensor *tensors[TOOL_MAX_DATA];
    tfc_value *values[TOOL_MAX_DATA];
    int64_t rows;          /* shared leading dimension */
};

extern const char tool_data_rules[]; /* the conversion rules, for --help */

/* Matches the --data options against the signature's feeds (every feed needs one, each NAME
 * must be a feed), reads each file (idx or .npy, told apart by content) and converts it.
 * Prints an error naming the feed and returns TOOL_FAIL on failure. */
int tool_feeds_load(const char *cmd, struct tool_model *m, const tfc_signature *sig,
                    const struct tool_opts *o, struct tool_feeds *f);
/* The same from a list of files given by `flag` ("--val-data", ...), named in the errors. */
int tool_feeds_load_list(const char *cmd, struct tool_model *m, const tfc_signature *sig,
                         const char *model, const char *flag, int n_data,
                         const struct tool_data *data, struct tool_feeds *f);
void tool_feeds_clear(struct tool_feeds *f);

/* A fetched value's mean (the scalar itself for rank 0). */
double tool_value_mean(const tfc_value *v);

/* ---- Graph walk (info, dot) ---------------------------------------------------------- */

struct tool_node {
    const char *name;      /* borrowed from the graph */
    const char *op;
    int n_inputs;
    const char **inputs;   /* tensor names "node" or "node:k" */
    int n_ctrl;
    const char **ctrl;     /* node names */
};

/* The graph's nodes in creation order (an array owned by the caller: tool_nodes_free). */
int tool_nodes(tfc_graph *g, int *n, struct tool_node **out);
void tool_nodes_free(int n, struct tool_node *nodes);

/* Variable roles, for the parameter count: a slot is "<var>/<slot>" where <var> is another
 * variable; a counter is an integer scalar variable (global_step, optimizer/iterations). */
enum tool_var_role { VAR_PARAM, VAR_SLOT, VAR_COUNTER };
enum tool_var_role tool_var_role(tfc_graph *g, const char *name);

/* ---- Commands ------------------------------------------------------------------------ */

int cmd_info(int argc, char **argv);
int cmd_dot(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_plot(int argc, char **argv);

/* Writes an SVG or (path ending in .png) PNG chart of the series, the y axes log10 with
 * log_y (values <= 0 left out, with a note on stderr; an error when a series has none > 0). */
struct tool_series {
    const char *name;
    int n;
    int64_t *steps;
    double *values;
};
int tool_plot_write(const char *cmd, const char *path, int n, const struct tool_series *series,
                    int log_y);

#endif
