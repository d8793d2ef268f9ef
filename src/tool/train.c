/* train.c: `tfc train` (training through the "train" signature, resumable: the latest
 * checkpoint restores the variables and the input position; SIGINT/SIGTERM end the run after
 * the current step with a checkpoint; validation after each epoch, with early stopping) and
 * `tfc eval` (loss and metrics over a data set, the code validation runs too). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tool.h"

static const char train_usage[] =
    "usage: tfc train MODEL.db --data NAME=FILE ... [--epochs N] [--batch B]\n"
    "                 [--checkpoint-every N] [--keep K] [--seed S] [--quiet]\n"
    "                 [--val-data NAME=FILE ... [--early-stop N [--early-stop-metric M]]]\n\n"
    "Trains through the model's \"train\" signature: each step feeds a batch of rows of the\n"
    "--data files to the signature's feeds, runs its train_op and fetches its loss and metrics,\n"
    "which are logged to the store at every step. Rows are shuffled every epoch, in an order\n"
    "fixed by the seed and the epoch.\n\n"
    "Training resumes from the latest checkpoint (variables, optimizer state, global step and\n"
    "the input position), or starts from the variables' initializers when there is none, and\n"
    "goes on until N epochs in all are done, so the same command run again after an\n"
    "interruption finishes the job.\n\n"
    "  --data NAME=FILE      a feed of the signature and its data file (repeat per feed)\n"
    "  --epochs N            train until N epochs are done in all (default 1)\n"
    "  --batch B             rows per step (default 32)\n"
    "  --checkpoint-every N  checkpoint every N steps (default 0: at the end of every epoch);\n"
    "                        there is always one at the end\n"
    "  --keep K              keep the newest K checkpoints (default 5; 0 keeps all)\n"
    "  --seed S              the shuffling seed (default: the checkpoint's, else 1)\n"
    "  --quiet               no progress bar\n"
    "  --val-data NAME=FILE  a feed and its validation file (repeat per feed, as --data):\n"
    "                        after each epoch, the loss and metrics over it, in batches of\n"
    "                        B rows (as `tfc eval` computes them), are logged as val_loss,\n"
    "                        val_<metric> at the epoch's last step (committed with the next\n"
    "                        checkpoint) and shown in the epoch summary\n"
    "  --early-stop N        stop after N epochs (N >= 1) in a row without a better\n"
    "                        validation value than the best so far, after a checkpoint; a\n"
    "                        resumed run counts on from the values in the store\n"
    "  --early-stop-metric M the validation metric to watch (default val_loss; the val_\n"
    "                        prefix may be left out): maximized when its name contains\n"
    "                        \"accuracy\", else minimized\n\n"
    "When the graph has a training flag (a float32 scalar placeholder_with_default named\n"
    "\"training\", see tfc_training_flag), training steps feed it 1; validation, `tfc eval`\n"
    "and `tfc run` leave its default 0 (dropout and batch norm in inference mode).\n\n"
    "Checkpoints are numbered by the graph's \"global_step\" variable when it has one, else by\n"
    "a step counter, and announced on stdout once they are on disk. SIGINT or SIGTERM finish\n"
    "the current step, checkpoint, and exit with 130 or 143. A checkpoint or metric that\n"
    "cannot be written (disk full, file size limit, store locked) stops training at once with\n"
    "exit status 1 and a message naming the cause; the next run resumes from the last\n"
    "checkpoint announced. Progress (step, loss, examples/s, time left) goes to stderr; epoch\n"
    "summaries and checkpoint notes to stdout.\n\n"
    "Under mpirun (`mpirun -np N tfc train MODEL.db ...`, a library built with MPI) the ranks\n"
    "train data-parallel: each computes the gradients of its slice of every batch, rank 0 sums\n"
    "them in rank order, updates and sends the variables to the others. Rank 0 alone writes\n"
    "the store (checkpoints, metrics of the whole batch) and prints; a run resumes from the\n"
    "last checkpoint on any number of ranks. A signal ends the job at once (no last\n"
    "checkpoint); --val-data is not available there yet.\n\n";

static const char eval_usage[] =
    "usage: tfc eval MODEL.db --data NAME=FILE ... [--batch B]\n\n"
    "Evaluates the loss and metrics of the \"train\" signature (without its train_op) over the\n"
    "data, in batches (default 256 rows), averaged over the examples, with the variables of the\n"
    "latest checkpoint. Prints one \"name: value\" line each.\n\n";

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds between two progress lines when stderr is not a terminal (a log file, a pipe). */
#define PLAIN_PROGRESS_EVERY_S 10.0

/* An epoch's progress on stderr: on a terminal (tty) a bar redrawn in place with \r; elsewhere
 * a plain line, with no carriage return or escape code, so that logs stay readable. */
static void progress(int tty, int64_t epoch, int64_t epochs, int64_t step, int64_t steps,
                     double loss, double ex_per_s, double left)
{
    if (!tty) {
        fprintf(stderr, "epoch %lld/%lld: step %lld/%lld, loss %.4f, %.0f ex/s, %.0f s left\n",
                (long long)epoch, (long long)epochs, (long long)step, (long long)steps, loss,
                ex_per_s, left);
        fflush(stderr);
        return;
    }
    char bar[31];
    int fill = (int)(30 * step / steps);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[30] = 0;
    fprintf(stderr, "\repoch %lld/%lld [%s] %5lld/%lld loss %.4f %7.0f ex/s %4.0fs left ",
            (long long)epoch, (long long)epochs, bar, (long long)step, (long long)steps, loss,
            ex_per_s, left);
    fflush(stderr);
}

/* The fetches of the train signature: loss first (when there is one), then the metrics. */
struct fetches {
    int n;
    tfc_tensor *tensors[TOOL_MAX_METRICS + 1];
    const char *names[TOOL_MAX_METRICS + 1];
    int has_loss;
};

static int resolve_fetches(const char *cmd, tfc_graph *g, const tfc_signature *sig,
                           struct fetches *f)
{
    memset(f, 0, sizeof *f);
    if (sig->n_metrics > TOOL_MAX_METRICS) return tool_error(cmd, "too many metrics");
    if (sig->loss) {
        f->names[f->n++] = sig->loss;
        f->has_loss = 1;
    }
    for (int i = 0; i < sig->n_metrics; i++) f->names[f->n++] = sig->metrics[i];
    for (int i = 0; i < f->n; i++)
        if (!(f->tensors[i] = tfc_graph_find(g, f->names[i])))
            return tool_error(cmd, "the 'train' signature names '%s', which is not in the graph",
                              f->names[i]);
    return TOOL_OK;
}

/* The means of the fetches over the data, in batches of `batch` rows in file order, averaged
 * over the examples (each batch's mean weighted by its rows): what `tfc eval` prints and what
 * `tfc train --val-data` logs. means has f->n entries. */
static int evaluate(const char *cmd, tfc_session *s, struct fetches *f, struct tool_feeds *feeds,
                    int64_t batch, double *means)
{
    tfc_batcher *b = NULL;
    tfc_value *out[TOOL_MAX_METRICS + 1];
    if (tfc_batcher_create(feeds->n, feeds->values, batch, 0, 0, &b))
        return tool_error(cmd, "%s", tfc_errmsg());
    for (int k = 0; k < f->n; k++) means[k] = 0;
    int rc = TOOL_OK;
    for (int64_t i = 0, steps = tfc_batcher_steps_per_epoch(b); i < steps && !rc; i++) {
        tfc_value *bv[TOOL_MAX_DATA];
        if (tfc_batcher_next(b, bv, NULL)) {
            rc = tool_error(cmd, "%s", tfc_batcher_errmsg(b));
        } else if (tfc_session_run(s, feeds->n, feeds->tensors, bv, f->n,
                                   f->tensors, out, 0, NULL)) {
            rc = tool_error(cmd, "%s", tfc_session_errmsg(s));
        } else {
            double r = (double)tfc_value_shape(bv[0]).dims[0];
            for (int k = 0; k < f->n; k++) {
                means[k] += tool_value_mean(out[k]) * r;
                tfc_value_destroy(out[k]);
            }
        }
    }
    tfc_batcher_destroy(b);
    for (int k = 0; k < f->n; k++) means[k] /= (double)feeds->rows;
    return rc;
}

/* Validation after each epoch (--val-data) and early stopping on one of its metrics. */
#define VAL_NAME_MAX 300
struct validation {
    int on;
    struct tool_feeds feeds;
    char names[TOOL_MAX_METRICS + 1][VAL_NAME_MAX]; /* val_loss, then val_<metric> */
    double means[TOOL_MAX_METRICS + 1];
    int64_t patience;      /* epochs without improvement; 0: no early stopping */
    int watch;             /* the index in names of the metric watched */
    int maximize;
    double best;           /* NaN: no value yet */
    int64_t best_step, since; /* epochs since the best */
};

/* A checkpoint taken (its snapshot queued) whose commit is not yet announced. */
struct taken_ckpt {
    int64_t step, epoch, batch;
    const char *why;       /* "" or "interrupted: " */
};
#define MAX_TAKEN 8        /* the store lets at most 2 wait for the disk; we poll every step */

struct trainer {
    struct tool_model m;
    tfc_signature *sig;
    tfc_tensor *train_op;
    struct fetches f;
    struct tool_feeds feeds;
    tfc_restore_report report;
    int restored;          /* 1: from a checkpoint; 0: from the initializers */
    tfc_batcher *batcher;
    uint64_t seed;
    int64_t epochs;        /* to reach in all */
    int64_t batch;         /* rows per step (and per validation batch) */
    int64_t every;         /* checkpoint every N steps; 0: at the end of each epoch */
    int quiet;
    int64_t steps;         /* batches per epoch */
    int64_t gstep;         /* steps taken in all */
    int64_t last_ckpt;     /* gstep of the last checkpoint taken or restored */
    struct taken_ckpt taken[MAX_TAKEN]; /* not yet announced, oldest first */
    int n_taken;
    int64_t n_announced;   /* checkpoints committed and announced */
    tfc_value **out;       /* a step's fetches */
    double *sums;          /* the epoch's fetch means, weighted by rows */
    struct validation val;
    tfc_tensor *flag;      /* the graph's training flag, fed 1 by training steps; NULL: none */
    tfc_value *flag_on;    /* float32 1 */
    /* under mpirun (issue 15): the data-parallel steps; rank 0 alone writes the store and
     * prints, the others open it read-only */
    tfc_dist_op *dist;
    int distributed;       /* a distributed context (its steps go through dist) */
    int rank, ranks;
    int64_t global_rows;   /* rows of the current step's global batch */
};

static void say_committed(const struct taken_ckpt *c)
{
    if (isatty(STDERR_FILENO) && isatty(STDOUT_FILENO)) fprintf(stderr, "\r\033[K");
    printf("%scheckpoint at step %lld (epoch %lld, batch %lld)\n", c->why, (long long)c->step,
           (long long)c->epoch, (long long)c->batch);
    fflush(stdout);
}

/* Announces on stdout each checkpoint the store has committed since the last call, after its
 * `why`; with wait, waits for the writer first. A failed write (sticky in the store) stops
 * training: the message names the checkpoint or metrics not written and the cause. */
static int announce_committed(struct trainer *t, int wait)
{
    if (t->rank) return TOOL_OK; /* its store is read-only */
    int64_t committed = 0;
    tfc_status status = wait ? tfc_store_flush(t->m.store) : TFC_OK;
    /* the count comes with an error too: what did commit before the failure is announced */
    tfc_status now = tfc_store_committed_checkpoints(t->m.store, &committed, NULL);
    if (!status) status = now;
    for (; t->n_announced < committed && t->n_taken > 0; t->n_announced++) {
        say_committed(&t->taken[0]);
        memmove(&t->taken[0], &t->taken[1], (size_t)--t->n_taken * sizeof t->taken[0]);
    }
    if (status)
        return tool_error("train", "stopped at step %lld: %s", (long long)t->gstep,
                          tfc_store_errmsg(t->m.store));
    return TOOL_OK;
}

/* A store call failed: a failure an earlier write left is sticky, so first announce what did
 * commit before it (announce_committed reports the failure); else say what failed. */
static int store_failed(struct trainer *t, const char *what, const char *name)
{
    if (announce_committed(t, 0)) return TOOL_FAIL;
    return tool_error("train", "stopped at step %lld: %s%s: %s", (long long)t->gstep, what, name,
                      tfc_store_errmsg(t->m.store));
}

/* Checkpoints the variables and the input position (unless one was just taken at this step);
 * it is announced on stdout, after `why`, once committed (the next step, or the end, polls). */
static int checkpoint(struct trainer *t, const char *why)
{
    tfc_input_position pos = {.seed = t->seed};
    tfc_batcher_position(t->batcher, &pos.epoch, &pos.step);
    if (t->last_ckpt == t->gstep) return TOOL_OK;
    /* the owners' optimizer slots to rank 0 (every rank takes part) */
    if (t->dist && tfc_dist_op_gather(t->dist, t->m.ctx, t->m.session))
        return tool_error("train", "stopped at step %lld: gathering the optimizer state for "
                          "the checkpoint: %s", (long long)t->gstep, tfc_dist_op_errmsg(t->dist));
    if (t->rank) { /* rank 0 checkpoints the job */
        t->last_ckpt = t->gstep;
        return TOOL_OK;
    }
    if (t->n_taken == MAX_TAKEN && announce_committed(t, 1)) return TOOL_FAIL;
    if (tfc_store_checkpoint(t->m.store, t->m.session, t->gstep, &pos))
        return store_failed(t, "checkpoint", "");
    t->last_ckpt = t->gstep;
    t->taken[t->n_taken++] = (struct taken_ckpt){t->gstep, pos.epoch, pos.step, why};
    return TOOL_OK;
}

/* The model's "train" signature, its train op and fetches, and the feeds from --data. */
/* The graph's training flag (tfc_training_flag: "training", a float32 scalar
 * placeholder_with_default), which training steps feed 1 so that dropout and batch norm train;
 * evaluation leaves its default. Not when the signature feeds it from a file itself. */
static int find_training_flag(struct trainer *t)
{
    tfc_tensor *flag = tfc_graph_find(t->m.graph, "training");
    if (!flag || strcmp(tfc_tensor_op(flag), "placeholder_with_default") ||
        tfc_tensor_dtype(flag) != TFC_FLOAT32 || tfc_tensor_shape(flag).rank != 0)
        return TOOL_OK;
    for (int i = 0; i < t->feeds.n; i++)
        if (t->feeds.tensors[i] == flag) return TOOL_OK;
    if (tfc_value_scalar(TFC_FLOAT32, 1.0, &t->flag_on))
        return tool_error("train", "%s", tfc_errmsg());
    t->flag = flag;
    return TOOL_OK;
}

static int train_open(struct trainer *t, const struct tool_opts *o)
{
    if (tool_signature("train", &t->m, o->model, "train", &t->sig)) return TOOL_FAIL;
    if (!t->sig->train_op)
        return tool_error("train", "%s: the 'train' signature has no train_op", o->model);
    t->train_op = tfc_graph_find(t->m.graph, t->sig->train_op);
    if (!t->train_op)
        return tool_error("train", "the 'train' signature's train_op '%s' is not in the graph",
                          t->sig->train_op);
    if (resolve_fetches("train", t->m.graph, t->sig, &t->f)) return TOOL_FAIL;
    if (tool_feeds_load("train", &t->m, t->sig, o, &t->feeds)) return TOOL_FAIL;
    return find_training_flag(t);
}

/* Restores the latest checkpoint (or initializes the variables), then makes the batcher and
 * moves it to the checkpoint's input position. */
static int train_resume(struct trainer *t, const struct tool_opts *o, int64_t batch)
{
    const tfc_input_position *p = &t->report.position;
    t->restored = tool_restore_or_init("train", &t->m, &t->report);
    if (t->restored < 0) return TOOL_FAIL;
    t->seed = o->have_seed ? o->seed : t->restored ? p->seed : 1;
    if (t->restored && o->have_seed && o->seed != p->seed)
        fprintf(stderr, "tfc train: note: --seed %llu differs from the checkpoint's seed %llu: "
                        "the rows come in a new order\n",
                (unsigned long long)o->seed, (unsigned long long)p->seed);
    if (tfc_batcher_create_shard(t->feeds.n, t->feeds.values, batch, t->seed,
                                 TFC_BATCHER_SHUFFLE, t->rank, t->dist ? t->ranks : 1,
                                 &t->batcher))
        return tool_error("train", "%s", tfc_errmsg());
    t->steps = tfc_batcher_steps_per_epoch(t->batcher);
    if (t->restored && tfc_batcher_seek(t->batcher, p->epoch, p->step)) {
        fprintf(stderr, "tfc train: note: cannot resume at batch %lld of epoch %lld with %lld "
                        "batches per epoch (was --batch changed?): starting that epoch over\n",
                (long long)p->step, (long long)p->epoch, (long long)t->steps);
        if (tfc_batcher_seek(t->batcher, p->epoch < 0 ? 0 : p->epoch, 0))
            return tool_error("train", "%s", tfc_batcher_errmsg(t->batcher));
    }
    return TOOL_OK;
}

/* The step count: the graph's global step when it has one, else the checkpoint's step. Sets
 * the retention policy too. */
static int train_count_steps(struct trainer *t, int keep)
{
    tfc_tensor *gs = tfc_graph_find(t->m.graph, "global_step");
    if (gs && (strcmp(tfc_tensor_op(gs), "variable") || tfc_tensor_shape(gs).rank != 0)) gs = NULL;
    if (gs) {
        tfc_value *v;
        if (tfc_session_read_variable(t->m.session, gs, &v))
            return tool_error("train", "reading global_step: %s",
                              tfc_session_errmsg(t->m.session));
        t->gstep = (int64_t)tfc_value_get(v, 0);
        tfc_value_destroy(v);
    } else {
        t->gstep = t->restored ? t->report.step : 0;
    }
    t->last_ckpt = t->restored ? t->gstep : -1;
    if (t->rank == 0 && tfc_store_set_retention(t->m.store, keep, 0))
        return tool_error("train", "%s", tfc_store_errmsg(t->m.store));
    return TOOL_OK;
}

/* The validation metrics' names (val_loss, val_<metric>), the one early stopping watches, and
 * the --val-data feeds. A watched metric that is not there is misuse (TOOL_USAGE). */
static int val_open(struct trainer *t, const struct tool_opts *o)
{
    struct validation *v = &t->val;
    v->best = NAN;
    if (!o->n_val_data) return TOOL_OK;
    if (t->f.n == 0)
        return tool_error("train", "%s: --val-data: the 'train' signature has neither a loss "
                          "nor metrics to validate", o->model);
    char list[1024] = "";
    size_t pos = 0;
    for (int k = 0; k < t->f.n; k++) {
        if (k == 0 && t->f.has_loss) snprintf(v->names[k], VAL_NAME_MAX, "val_loss");
        else snprintf(v->names[k], VAL_NAME_MAX, "val_%s", t->f.names[k]);
        if (pos < sizeof list)
            pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s%s", k ? ", " : "",
                                    v->names[k]);
    }
    const char *watch = o->early_stop_metric ? o->early_stop_metric : "val_loss";
    v->watch = -1;
    for (int k = 0; k < t->f.n && v->watch < 0; k++)
        if (!strcmp(v->names[k], watch) ||
            (strncmp(watch, "val_", 4) && !strcmp(v->names[k] + 4, watch)))
            v->watch = k;
    if (o->early_stop > 0 && v->watch < 0) {
        fprintf(stderr, "tfc train: %s %s: no such validation metric (the model's: %s)\n",
                o->early_stop_metric ? "--early-stop-metric" : "--early-stop: the default",
                watch, list);
        return TOOL_USAGE;
    }
    v->patience = o->early_stop > 0 ? o->early_stop : 0;
    v->maximize = v->watch >= 0 && strstr(v->names[v->watch], "accuracy") != NULL;
    if (tool_feeds_load_list("train", &t->m, t->sig, o->model, "--val-data", o->n_val_data,
                             o->val_data, &v->feeds))
        return TOOL_FAIL;
    v->on = 1;
    return TOOL_OK;
}

/* Counts one epoch's value x (at step) of the watched metric: a new best, or one more epoch
 * without improvement. NaN never improves. */
static void val_record(struct validation *v, int64_t step, double x)
{
    int better = !isnan(x) && (isnan(v->best) || (v->maximize ? x > v->best : x < v->best));
    if (better) {
        v->best = x;
        v->best_step = step;
        v->since = 0;
    } else {
        v->since++;
    }
}

/* The best value and the epochs since, from the watched metric's values in the store up to the
 * checkpoint's step (the later ones a crashed run logged do not count: they are discarded), so
 * that a resumed run stops where an uninterrupted one would. */
static int val_resume(struct trainer *t)
{
    struct validation *v = &t->val;
    if (!v->on || !v->patience) return TOOL_OK;
    int n = 0;
    int64_t *steps = NULL;
    double *values = NULL;
    tfc_status st = tfc_store_read_metric(t->m.store, v->names[v->watch], &n, &steps, &values);
    if (st && st != TFC_ERR_NOT_FOUND)
        return tool_error("train", "reading %s: %s", v->names[v->watch],
                          tfc_store_errmsg(t->m.store));
    for (int i = 0; !st && i < n; i++)
        if (steps[i] <= t->gstep) val_record(v, steps[i], values[i]);
    free(steps);
    free(values);
    return TOOL_OK;
}

/* Whether early stopping ends the training now. */
static int val_stops(const struct validation *v)
{
    return v->on && v->patience > 0 && v->since >= v->patience;
}

/* Evaluates the validation set at the end of an epoch (in batches of `batch` rows, as `tfc
 * eval` does) and logs its metrics at the epoch's last step: they commit with the next
 * checkpoint. */
static int validate(struct trainer *t, int64_t batch)
{
    struct validation *v = &t->val;
    if (!v->on) return TOOL_OK;
    if (evaluate("train", t->m.session, &t->f, &v->feeds, batch, v->means)) return TOOL_FAIL;
    for (int k = 0; k < t->f.n; k++)
        if (tfc_store_log_metric(t->m.store, t->gstep, v->names[k], v->means[k]))
            return store_failed(t, "logging ", v->names[k]);
    if (v->watch >= 0) val_record(v, t->gstep, v->means[v->watch]);
    return TOOL_OK;
}

/* Where an epoch stands, for its progress bar and summary. */
struct epoch_run {
    int64_t epoch;         /* from 0 */
    int64_t bstep;         /* the next batch */
    int64_t first;         /* the batch it started at (resumed when > 0) */
    int64_t done_steps, rows;
    double t0;
};

/* One step on batch b: runs the train op, adds each fetch's mean, weighted by the batch's
 * rows, to the epoch's sums, and logs it as a metric. */
static int train_step(struct trainer *t, tfc_value **b, struct epoch_run *e)
{
    tfc_tensor *ft[TOOL_MAX_DATA + 1];
    tfc_value *fv[TOOL_MAX_DATA + 1];
    int n = t->feeds.n;
    memcpy(ft, t->feeds.tensors, sizeof *ft * (size_t)n);
    memcpy(fv, b, sizeof *fv * (size_t)n);
    if (t->flag) ft[n] = t->flag, fv[n++] = t->flag_on;
    if (t->dist && tfc_dist_op_step(t->dist, t->m.ctx, t->m.session, n, ft, fv, t->global_rows,
                                    t->f.n, t->f.tensors, t->out))
        return tool_error("train", "rank %d: step %lld: %s", t->rank, (long long)t->gstep + 1,
                          tfc_dist_op_errmsg(t->dist));
    if (!t->dist &&
        tfc_session_run(t->m.session, n, ft, fv, t->f.n, t->f.tensors, t->out, 1, &t->train_op))
        return tool_error("train", "step %lld: %s", (long long)t->gstep + 1,
                          tfc_session_errmsg(t->m.session));
    /* distributed, rank 0's scalar fetches are the global batch's */
    int64_t r = t->dist ? t->global_rows : tfc_value_shape(b[0]).dims[0];
    int failed = 0;
    t->gstep++;
    if (announce_committed(t, 0)) failed = 1; /* a failed write stops training now */
    e->done_steps++;
    e->bstep++;
    e->rows += r;
    for (int k = 0; k < t->f.n; k++) {
        double x = tool_value_mean(t->out[k]);
        tfc_value_destroy(t->out[k]);
        t->sums[k] += x * (double)r;
        if (!failed && t->rank == 0 && tfc_store_log_metric(t->m.store, t->gstep, t->f.names[k], x))
            failed = store_failed(t, "logging ", t->f.names[k]);
    }
    return failed;
}

/* The batches of one epoch from e->bstep, until its last or a signal, with the progress bar
 * and the checkpoints every `every` steps. */
static int train_epoch(struct trainer *t, struct epoch_run *e)
{
    int tty = isatty(STDERR_FILENO); /* a bar every 0.1 s, else a line every 10 s */
    double last_bar = tty ? 0 : e->t0;
    memset(t->sums, 0, sizeof *t->sums * (size_t)t->f.n);
    for (int epoch_done = 0; !epoch_done && !stop_signal;) {
        tfc_value *b[TOOL_MAX_DATA];
        int64_t at_epoch, at_step; /* the global batch: every rank's slice of it */
        tfc_batcher_position(t->batcher, &at_epoch, &at_step);
        t->global_rows = t->feeds.rows - at_step * t->batch < t->batch
                             ? t->feeds.rows - at_step * t->batch : t->batch;
        if (tfc_batcher_next(t->batcher, b, &epoch_done))
            return tool_error("train", "%s", tfc_batcher_errmsg(t->batcher));
        if (train_step(t, b, e)) return TOOL_FAIL;
        double tn = now();
        if (!t->quiet && (tn - last_bar > (tty ? 0.1 : PLAIN_PROGRESS_EVERY_S) || epoch_done)) {
            double dt = tn - e->t0;
            progress(tty, e->epoch + 1, t->epochs, e->bstep, t->steps,
                     t->f.has_loss ? t->sums[0] / (double)e->rows : 0, (double)e->rows / dt,
                     dt / (double)e->done_steps * (double)(t->steps - e->bstep));
            last_bar = tn;
        }
        if (t->every > 0 && t->gstep % t->every == 0 && checkpoint(t, "")) return TOOL_FAIL;
    }
    if (!t->quiet && tty) fputc('\n', stderr); /* plain lines end with theirs */
    return TOOL_OK;
}

static void epoch_summary(const struct trainer *t, const struct epoch_run *e)
{
    double dt = now() - e->t0;
    printf("epoch %lld/%lld: ", (long long)e->epoch + 1, (long long)t->epochs);
    for (int k = 0; k < t->f.n; k++)
        printf("%s %.4f, ", t->f.names[k], t->sums[k] / (double)e->rows);
    for (int k = 0; t->val.on && k < t->f.n; k++)
        printf("%s %.4f, ", t->val.names[k], t->val.means[k]);
    printf("%lld steps%s, %.1f s, %.0f examples/s\n", (long long)e->done_steps,
           e->first ? " (resumed)" : "", dt, (double)e->rows / dt);
    fflush(stdout);
}

/* The checkpoint at the end, or at a signal, where the step's own may already be taken (then
 * it is announced as the interrupted one) or even committed (restored, or announced). */
static int last_checkpoint(struct trainer *t)
{
    const char *why = stop_signal ? "interrupted: " : "";
    if (t->last_ckpt != t->gstep) return checkpoint(t, why);
    if (t->n_taken && t->taken[t->n_taken - 1].step == t->gstep) {
        t->taken[t->n_taken - 1].why = why;
        return TOOL_OK;
    }
    struct taken_ckpt c = {.step = t->gstep, .why = why};
    tfc_batcher_position(t->batcher, &c.epoch, &c.batch);
    say_committed(&c);
    return TOOL_OK;
}

/* The end of a run that early stopping ended (now or in an earlier run): which metric, how
 * long without improvement, the best value and its step. */
static int say_stopped_early(const struct trainer *t, const char *what)
{
    const struct validation *v = &t->val;
    int64_t epoch, bstep;
    tfc_batcher_position(t->batcher, &epoch, &bstep);
    printf("%s at epoch %lld, step %lld: %s has not %s for %lld epoch%s (--early-stop %lld); "
           "best %.6f at step %lld\n", what, (long long)epoch, (long long)t->gstep,
           v->names[v->watch], v->maximize ? "risen" : "fallen", (long long)v->since,
           v->since == 1 ? "" : "s", (long long)v->patience, v->best, (long long)v->best_step);
    return TOOL_OK;
}

/* The epochs from (epoch, bstep) until t->epochs are done, a signal arrives or early stopping
 * ends the run; each complete epoch is validated, summarized, and (without
 * --checkpoint-every) checkpointed. Returns nonzero on a failure. */
static int train_epochs(struct trainer *t, int64_t epoch, int64_t bstep)
{
    while (epoch < t->epochs && !stop_signal) {
        struct epoch_run e = {.epoch = epoch, .bstep = bstep, .first = bstep, .t0 = now()};
        if (train_epoch(t, &e)) return TOOL_FAIL;
        if (e.bstep < t->steps) break; /* a signal, within the epoch */
        /* a signal at the epoch's last step: the epoch is whole, and validated as such, so that
         * a resumed run finds its value */
        if (validate(t, t->batch)) return TOOL_FAIL;
        epoch_summary(t, &e);
        if (stop_signal) break;
        tfc_batcher_position(t->batcher, &epoch, &bstep);
        if (t->every == 0 && t->last_ckpt != t->gstep && checkpoint(t, "")) return TOOL_FAIL;
        if (val_stops(&t->val)) break;
    }
    return TOOL_OK;
}

/* Trains from the batcher's position until t->epochs are done or a signal arrives, then takes
 * the last checkpoint. Returns the command's exit status. */
static int train_run(struct trainer *t)
{
    int64_t epoch, bstep;
    tfc_batcher_position(t->batcher, &epoch, &bstep);
    if (t->restored)
        printf("resuming from the checkpoint at step %lld (epoch %lld, batch %lld of %lld)\n",
               (long long)t->gstep, (long long)epoch, (long long)bstep, (long long)t->steps);
    else
        printf("no checkpoint: starting from initialized variables\n");
    if (val_stops(&t->val)) return say_stopped_early(t, "already stopped early");
    if (epoch >= t->epochs) {
        printf("already trained %lld epochs (step %lld): nothing to do\n", (long long)epoch,
               (long long)t->gstep);
        return TOOL_OK;
    }
    fflush(stdout);
    /* the steps after the checkpoint that an earlier, crashed run logged are taken again */
    if (t->rank == 0 && tfc_store_truncate_metrics(t->m.store, t->gstep))
        return tool_error("train", "%s", tfc_store_errmsg(t->m.store));

    /* StarPU installs its own handlers when it starts: ours go in after it. Not under mpirun:
     * the ranks would stop after different steps; the signal ends the job there, and the next
     * run resumes from the last checkpoint. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (!t->dist) sigaction(SIGINT, &sa, NULL);
    if (!t->dist) sigaction(SIGTERM, &sa, NULL);

    t->out = calloc((size_t)t->f.n + 1, sizeof *t->out);
    t->sums = calloc((size_t)t->f.n + 1, sizeof *t->sums);
    if (!t->out || !t->sums) return tool_error("train", "out of memory");
    int failed = train_epochs(t, epoch, bstep);
    if (!failed && (t->last_ckpt != t->gstep || stop_signal))
        failed = last_checkpoint(t) != TOOL_OK;
    if (!failed) failed = announce_committed(t, 1) != TOOL_OK;
    if (failed) return TOOL_FAIL;
    if (stop_signal) {
        fprintf(stderr, "tfc train: stopped by %s after step %lld\n",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)t->gstep);
        return 128 + stop_signal;
    }
    if (val_stops(&t->val)) return say_stopped_early(t, "stopped early");
    printf("trained to epoch %lld, step %lld\n", (long long)t->epochs, (long long)t->gstep);
    return TOOL_OK;
}

/* The ranks mpirun (Open MPI) or a PMI launcher (srun) says the job has; 0: not launched so. */
static int getenv_ranks(void)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    return n ? atoi(n) : 0;
}

/* Opens the model: as one process, or under mpirun as one rank of a distributed context (rank
 * 0 holds the store's training lock; the others read it and print nothing on stdout). */
static int train_start(struct trainer *t, const struct tool_opts *o)
{
    int ranks = getenv_ranks();
    t->ranks = 1;
    if (ranks == 0 || (ranks == 1 && !tfc_dist_available()))
        return tool_model_open("train", o->model, 1, 1, &t->m);
    if (o->n_val_data) {
        fprintf(stderr, "tfc train: --val-data is not available under mpirun yet (%d ranks)\n",
                ranks);
        return TOOL_USAGE;
    }
    tfc_ctx *ctx;
    if (tfc_ctx_create_dist(TFC_DIST_MPI, &ctx))
        return tool_error("train", "under mpirun (%d ranks): %s", ranks, tfc_errmsg());
    t->distributed = 1;
    t->rank = tfc_dist_rank(ctx);
    t->ranks = tfc_dist_size(ctx);
    if (tool_model_open("train", o->model, t->rank == 0, 0, &t->m)) {
        tfc_ctx_destroy(ctx);
        return TOOL_FAIL;
    }
    t->m.ctx = ctx;
    if (tfc_session_create(ctx, t->m.graph, &t->m.session)) {
        t->m.session = NULL;
        return tool_error("train", "%s: %s", o->model, tfc_errmsg());
    }
    if (t->rank) {
        t->quiet = 1;
        if (!freopen("/dev/null", "w", stdout)) return tool_error("train", "no /dev/null");
    }
    return TOOL_OK;
}

int cmd_train(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv,
                        OPT_DATA | OPT_EPOCHS | OPT_BATCH | OPT_CKPT | OPT_KEEP | OPT_SEED |
                            OPT_QUIET | OPT_VAL_DATA | OPT_EARLY_STOP,
                        train_usage, &o);
    if (rc == -1) fputs(tool_data_rules, stdout);
    if (rc) return rc;
    if ((o.early_stop >= 0 || o.early_stop_metric) && !o.n_val_data)
        return fprintf(stderr, "tfc train: %s needs --val-data NAME=FILE ... (the validation "
                               "set it watches)\n",
                       o.early_stop >= 0 ? "--early-stop" : "--early-stop-metric"),
               TOOL_USAGE;
    if (o.early_stop_metric && o.early_stop < 0)
        return fprintf(stderr, "tfc train: --early-stop-metric %s needs --early-stop N\n",
                       o.early_stop_metric),
               TOOL_USAGE;
    int64_t batch = o.batch > 0 ? o.batch : 32;
    struct trainer t = {.epochs = o.epochs > 0 ? o.epochs : 1,
                        .every = o.checkpoint_every >= 0 ? o.checkpoint_every : 0,
                        .quiet = o.quiet, .batch = batch};
    int keep = o.keep >= 0 ? (int)o.keep : 5;
    /* past the file size limit (ulimit -f) a write then fails with EFBIG, which the store
     * reports, instead of SIGXFSZ killing the process in the middle of a transaction */
    signal(SIGXFSZ, SIG_IGN);
    rc = train_start(&t, &o);
    if (rc) {
        tool_model_close(&t.m);
        return rc;
    }
    rc = train_open(&t, &o);
    if (!rc && t.distributed && tfc_dist_op_create(t.m.graph, t.train_op, &t.dist))
        rc = tool_error("train", "%s", tfc_errmsg());
    if (!rc) rc = val_open(&t, &o);
    if (!rc)
        rc = train_resume(&t, &o, batch) || train_count_steps(&t, keep) || val_resume(&t)
                 ? TOOL_FAIL : train_run(&t);
    free(t.out);
    free(t.sums);
    tfc_batcher_destroy(t.batcher);
    tool_feeds_clear(&t.feeds);
    tool_feeds_clear(&t.val.feeds);
    tfc_value_destroy(t.flag_on);
    tfc_restore_report_clear(&t.report);
    tfc_signature_free(t.sig);
    tfc_dist_op_destroy(t.dist);
    tool_model_close(&t.m);
    return rc;
}

int cmd_eval(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv, OPT_DATA | OPT_BATCH, eval_usage, &o);
    if (rc == -1) fputs(tool_data_rules, stdout);
    if (rc) return rc;
    int64_t batch = o.batch > 0 ? o.batch : 256;
    struct tool_model m;
    tfc_signature *sig = NULL;
    struct tool_feeds feeds = {0};
    struct fetches f;
    tfc_restore_report report = {0};
    rc = TOOL_FAIL;
    if (tool_model_open("eval", o.model, 0, 1, &m)) return TOOL_FAIL;
    if (tool_signature("eval", &m, o.model, "train", &sig)) goto done;
    if (resolve_fetches("eval", m.graph, sig, &f)) goto done;
    if (f.n == 0) {
        tool_error("eval", "%s: the 'train' signature has neither a loss nor metrics", o.model);
        goto done;
    }
    if (tool_feeds_load("eval", &m, sig, &o, &feeds)) goto done;
    int restored = tool_restore_or_init("eval", &m, &report);
    if (restored < 0) goto done;
    if (!restored)
        fprintf(stderr, "tfc eval: note: the model has no checkpoint: evaluating the "
                        "variables' initial values\n");
    double means[TOOL_MAX_METRICS + 1];
    if (evaluate("eval", m.session, &f, &feeds, batch, means)) goto done;
    printf("checkpoint step: %lld\n", restored ? (long long)report.step : 0LL);
    printf("examples: %lld\n", (long long)feeds.rows);
    for (int k = 0; k < f.n; k++) printf("%s: %.6f\n", f.names[k], means[k]);
    rc = TOOL_OK;

done:
    tool_feeds_clear(&feeds);
    tfc_restore_report_clear(&report);
    tfc_signature_free(sig);
    tool_model_close(&m);
    return rc;
}
