/* train.c: `tfc train` (training through the "train" signature, resumable: the latest
 * checkpoint restores the variables and the input position; SIGINT/SIGTERM end the run after
 * the current step with a checkpoint) and `tfc eval` (loss and metrics over a data set). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tool.h"

static const char train_usage[] =
    "usage: tfc train MODEL.db --data NAME=FILE ... [--epochs N] [--batch B]\n"
    "                 [--checkpoint-every N] [--keep K] [--seed S] [--quiet]\n\n"
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
    "  --quiet               no progress bar\n\n"
    "Checkpoints are numbered by the graph's \"global_step\" variable when it has one, else by\n"
    "a step counter. SIGINT or SIGTERM finish the current step, checkpoint, and exit with\n"
    "130 or 143. Progress (step, loss, examples/s, time left) goes to stderr; epoch summaries\n"
    "and checkpoint notes to stdout.\n\n";

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

static void progress(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                     double ex_per_s, double left)
{
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

struct trainer {
    struct tool_model m;
    tfc_signature *sig;
    struct tool_feeds feeds;
    tfc_batcher *batcher;
    uint64_t seed;
    int64_t gstep;         /* steps taken in all */
    int64_t last_ckpt;     /* gstep of the last checkpoint written or restored */
};

/* Checkpoints the variables and the input position (unless one was just taken at this step)
 * and says so on stdout, after `why`. */
static int checkpoint(struct trainer *t, const char *why)
{
    tfc_input_position pos = {.seed = t->seed};
    tfc_batcher_position(t->batcher, &pos.epoch, &pos.step);
    if (t->last_ckpt != t->gstep &&
        tfc_store_checkpoint(t->m.store, t->m.session, t->gstep, &pos))
        return tool_error("train", "checkpoint at step %lld: %s", (long long)t->gstep,
                          tfc_store_errmsg(t->m.store));
    t->last_ckpt = t->gstep;
    if (isatty(STDERR_FILENO) && isatty(STDOUT_FILENO)) fprintf(stderr, "\r\033[K");
    printf("%scheckpoint at step %lld (epoch %lld, batch %lld)\n", why, (long long)t->gstep,
           (long long)pos.epoch, (long long)pos.step);
    fflush(stdout);
    return TOOL_OK;
}

int cmd_train(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv,
                        OPT_DATA | OPT_EPOCHS | OPT_BATCH | OPT_CKPT | OPT_KEEP | OPT_SEED | OPT_QUIET,
                        train_usage, &o);
    if (rc == -1) fputs(tool_data_rules, stdout);
    if (rc) return rc;
    int64_t epochs = o.epochs > 0 ? o.epochs : 1, batch = o.batch > 0 ? o.batch : 32;
    int64_t every = o.checkpoint_every >= 0 ? o.checkpoint_every : 0;
    int keep = o.keep >= 0 ? (int)o.keep : 5;

    struct trainer t = {0};
    struct fetches f;
    tfc_restore_report report = {0};
    tfc_value **out = NULL;
    double *sums = NULL;
    rc = TOOL_FAIL;
    if (tool_model_open("train", o.model, 1, 1, &t.m)) return TOOL_FAIL;
    if (tool_signature("train", &t.m, o.model, "train", &t.sig)) goto done;
    if (!t.sig->train_op) {
        tool_error("train", "%s: the 'train' signature has no train_op", o.model);
        goto done;
    }
    tfc_tensor *train_op = tfc_graph_find(t.m.graph, t.sig->train_op);
    if (!train_op) {
        tool_error("train", "the 'train' signature's train_op '%s' is not in the graph",
                   t.sig->train_op);
        goto done;
    }
    if (resolve_fetches("train", t.m.graph, t.sig, &f)) goto done;
    if (tool_feeds_load("train", &t.m, t.sig, &o, &t.feeds)) goto done;

    int restored = tool_restore_or_init("train", &t.m, &report);
    if (restored < 0) goto done;
    t.seed = o.have_seed ? o.seed : restored ? report.position.seed : 1;
    if (restored && o.have_seed && o.seed != report.position.seed)
        fprintf(stderr, "tfc train: note: --seed %llu differs from the checkpoint's seed %llu: "
                        "the rows come in a new order\n",
                (unsigned long long)o.seed, (unsigned long long)report.position.seed);
    if (tfc_batcher_create(t.feeds.n, t.feeds.values, batch, t.seed, TFC_BATCHER_SHUFFLE,
                           &t.batcher)) {
        tool_error("train", "%s", tfc_errmsg());
        goto done;
    }
    int64_t steps = tfc_batcher_steps_per_epoch(t.batcher);
    if (restored && tfc_batcher_seek(t.batcher, report.position.epoch, report.position.step)) {
        fprintf(stderr, "tfc train: note: cannot resume at batch %lld of epoch %lld with %lld "
                        "batches per epoch (was --batch changed?): starting that epoch over\n",
                (long long)report.position.step, (long long)report.position.epoch, (long long)steps);
        if (tfc_batcher_seek(t.batcher, report.position.epoch < 0 ? 0 : report.position.epoch, 0)) {
            tool_error("train", "%s", tfc_batcher_errmsg(t.batcher));
            goto done;
        }
    }

    /* the step count: the graph's global step when it has one */
    tfc_tensor *gs = tfc_graph_find(t.m.graph, "global_step");
    if (gs && (strcmp(tfc_tensor_op(gs), "variable") || tfc_tensor_shape(gs).rank != 0)) gs = NULL;
    if (gs) {
        tfc_value *v;
        if (tfc_session_read_variable(t.m.session, gs, &v)) {
            tool_error("train", "reading global_step: %s", tfc_session_errmsg(t.m.session));
            goto done;
        }
        t.gstep = (int64_t)tfc_value_get(v, 0);
        tfc_value_destroy(v);
    } else {
        t.gstep = restored ? report.step : 0;
    }
    t.last_ckpt = restored ? t.gstep : -1;
    if (tfc_store_set_retention(t.m.store, keep, 0)) {
        tool_error("train", "%s", tfc_store_errmsg(t.m.store));
        goto done;
    }

    int64_t epoch, bstep;
    tfc_batcher_position(t.batcher, &epoch, &bstep);
    if (restored)
        printf("resuming from the checkpoint at step %lld (epoch %lld, batch %lld of %lld)\n",
               (long long)t.gstep, (long long)epoch, (long long)bstep, (long long)steps);
    else
        printf("no checkpoint: starting from initialized variables\n");
    if (epoch >= epochs) {
        printf("already trained %lld epochs (step %lld): nothing to do\n", (long long)epoch,
               (long long)t.gstep);
        rc = TOOL_OK;
        goto done;
    }
    fflush(stdout);

    /* StarPU installs its own handlers when it starts: ours go in after it */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    out = calloc((size_t)f.n + 1, sizeof *out);
    sums = calloc((size_t)f.n + 1, sizeof *sums);
    if (!out || !sums) {
        tool_error("train", "out of memory");
        goto done;
    }
    int failed = 0;
    while (epoch < epochs && !stop_signal && !failed) {
        double t0 = now(), last_bar = 0;
        int64_t rows = 0, first = bstep, done_steps = 0;
        memset(sums, 0, sizeof *sums * (size_t)f.n);
        for (int epoch_done = 0; !epoch_done && !stop_signal;) {
            tfc_value *b[TOOL_MAX_DATA];
            if (tfc_batcher_next(t.batcher, b, &epoch_done)) {
                failed = tool_error("train", "%s", tfc_batcher_errmsg(t.batcher));
                break;
            }
            if (tfc_session_run(t.m.session, t.feeds.n, t.feeds.tensors, b, f.n, f.tensors, out,
                                1, &train_op)) {
                failed = tool_error("train", "step %lld: %s", (long long)t.gstep + 1,
                                    tfc_session_errmsg(t.m.session));
                break;
            }
            int64_t r = tfc_value_shape(b[0]).dims[0];
            t.gstep++;
            done_steps++;
            bstep++;
            rows += r;
            for (int k = 0; k < f.n; k++) {
                double x = tool_value_mean(out[k]);
                tfc_value_destroy(out[k]);
                sums[k] += x * (double)r;
                if (tfc_store_log_metric(t.m.store, t.gstep, f.names[k], x) && !failed)
                    failed = tool_error("train", "logging %s: %s", f.names[k],
                                        tfc_store_errmsg(t.m.store));
            }
            if (failed) break;
            double tn = now();
            if (!o.quiet && (tn - last_bar > 0.1 || epoch_done)) {
                double dt = tn - t0;
                progress(epoch + 1, epochs, bstep, steps, f.has_loss ? sums[0] / (double)rows : 0,
                         (double)rows / dt, dt / (double)done_steps * (double)(steps - bstep));
                last_bar = tn;
            }
            if (every > 0 && t.gstep % every == 0 && checkpoint(&t, "")) failed = 1;
        }
        if (failed) break;
        if (!o.quiet) fputc('\n', stderr);
        if (stop_signal) break;
        double dt = now() - t0;
        printf("epoch %lld/%lld: ", (long long)epoch + 1, (long long)epochs);
        for (int k = 0; k < f.n; k++) printf("%s %.4f, ", f.names[k], sums[k] / (double)rows);
        printf("%lld steps%s, %.1f s, %.0f examples/s\n", (long long)done_steps,
               first ? " (resumed)" : "", dt, (double)rows / dt);
        fflush(stdout);
        tfc_batcher_position(t.batcher, &epoch, &bstep);
        if (every == 0 && t.last_ckpt != t.gstep && checkpoint(&t, "")) failed = 1;
    }
    if (!failed && (t.last_ckpt != t.gstep || stop_signal))
        failed = checkpoint(&t, stop_signal ? "interrupted: " : "") != TOOL_OK;
    if (tfc_store_flush(t.m.store) && !failed)
        failed = tool_error("train", "%s", tfc_store_errmsg(t.m.store));
    if (failed) goto done;
    if (stop_signal) {
        fprintf(stderr, "tfc train: stopped by %s after step %lld\n",
                stop_signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)t.gstep);
        rc = 128 + stop_signal;
    } else {
        printf("trained to epoch %lld, step %lld\n", (long long)epochs, (long long)t.gstep);
        rc = TOOL_OK;
    }

done:
    free(out);
    free(sums);
    tfc_batcher_destroy(t.batcher);
    tool_feeds_clear(&t.feeds);
    tfc_restore_report_clear(&report);
    tfc_signature_free(t.sig);
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
    tfc_batcher *b = NULL;
    tfc_value **out = NULL;
    double *sums = NULL;
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
    out = calloc((size_t)f.n, sizeof *out);
    sums = calloc((size_t)f.n, sizeof *sums);
    if (!out || !sums) {
        tool_error("eval", "out of memory");
        goto done;
    }
    if (tfc_batcher_create(feeds.n, feeds.values, batch, 0, 0, &b)) {
        tool_error("eval", "%s", tfc_errmsg());
        goto done;
    }
    for (int64_t i = 0, steps = tfc_batcher_steps_per_epoch(b); i < steps; i++) {
        tfc_value *bv[TOOL_MAX_DATA];
        if (tfc_batcher_next(b, bv, NULL)) {
            tool_error("eval", "%s", tfc_batcher_errmsg(b));
            goto done;
        }
        if (tfc_session_run(m.session, feeds.n, feeds.tensors, bv, f.n, f.tensors, out, 0, NULL)) {
            tool_error("eval", "%s", tfc_session_errmsg(m.session));
            goto done;
        }
        double r = (double)tfc_value_shape(bv[0]).dims[0];
        for (int k = 0; k < f.n; k++) {
            sums[k] += tool_value_mean(out[k]) * r;
            tfc_value_destroy(out[k]);
        }
    }
    printf("checkpoint step: %lld\n", restored ? (long long)report.step : 0LL);
    printf("examples: %lld\n", (long long)feeds.rows);
    for (int k = 0; k < f.n; k++) printf("%s: %.6f\n", f.names[k], sums[k] / (double)feeds.rows);
    rc = TOOL_OK;

done:
    free(out);
    free(sums);
    tfc_batcher_destroy(b);
    tool_feeds_clear(&feeds);
    tfc_restore_report_clear(&report);
    tfc_signature_free(sig);
    tool_model_close(&m);
    return rc;
}
