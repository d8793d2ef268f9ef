/* run.c: `tfc run`: inference through the "predict" signature over data files, in batches;
 * each output is gathered over all rows and written as DIR/<name>.npy, or its first rows are
 * printed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tool.h"

static const char run_usage[] =
    "usage: tfc run MODEL.db --data NAME=FILE ... [--out DIR] [--batch B] [--rows N]\n\n"
    "Runs the model's \"predict\" signature on the rows of the data files, in batches (default\n"
    "256 rows), with the variables of the latest checkpoint. With --out, each output is written\n"
    "as DIR/<name>.npy (all rows; characters of the name other than letters, digits, '.', '-'\n"
    "and '_' become '_'; DIR is created when missing). Without it, the first rows of each\n"
    "output are printed (--rows, default 5). The graph's training flag, when it has one (see\n"
    "`tfc train --help`), keeps its default 0: dropout and batch norm run in inference mode.\n\n";

/* One output gathered over the batches. */
struct gathered {
    const char *name;
    tfc_tensor *tensor;
    enum tfc_dtype dtype;
    tfc_shape shape;      /* of the first batch; dims[0] becomes the total */
    int batched;          /* leading dimension follows the batch */
    unsigned char *data;
    size_t bytes, cap;
};

static int append(struct gathered *g, const tfc_value *v, int64_t rows)
{
    tfc_shape s = tfc_value_shape(v);
    size_t nb = tfc_value_nbytes(v);
    if (!g->data && !g->bytes) {
        g->dtype = tfc_value_dtype(v);
        g->shape = s;
        g->batched = s.rank > 0 && s.dims[0] == rows;
    } else {
        if (!g->batched) return 0; /* not per row: keep the first batch's value */
        int same = s.rank == g->shape.rank && s.rank > 0 && s.dims[0] == rows;
        for (int i = 1; same && i < s.rank; i++) same = s.dims[i] == g->shape.dims[i];
        if (!same) return tool_error("run", "output '%s' changes shape between batches", g->name);
        g->shape.dims[0] += rows;
    }
    if (g->bytes + nb > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->bytes + nb) cap *= 2;
        unsigned char *p = realloc(g->data, cap);
        if (!p) return tool_error("run", "out of memory gathering '%s'", g->name);
        g->data = p;
        g->cap = cap;
    }
    if (nb) memcpy(g->data + g->bytes, tfc_value_cdata(v), nb);
    g->bytes += nb;
    return TOOL_OK;
}

static void sanitize(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < len; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '-' || c == '_';
        out[k++] = ok ? c : '_';
    }
    out[k] = 0;
    if (!k || !strcmp(out, ".") || !strcmp(out, "..")) snprintf(out, len, "output");
}

/* Prints the first rows of v; total is the row count over all the data (v may hold fewer). */
static void print_output(const struct gathered *g, const tfc_value *v, int64_t max_rows,
                         int64_t total)
{
    tfc_shape s = tfc_value_shape(v);
    printf("%s: %s [", g->name, tfc_dtype_name(g->dtype));
    for (int i = 0; i < s.rank; i++)
        printf("%s%lld", i ? ", " : "", (long long)(i == 0 && g->batched ? total : s.dims[i]));
    printf("]\n");
    int64_t numel = tfc_value_numel(v), rows = s.rank ? s.dims[0] : 1;
    int64_t per_row = rows ? numel / rows : 0;
    int is_float = g->dtype == TFC_FLOAT32 || g->dtype == TFC_FLOAT64;
    for (int64_t r = 0; r < rows && r < max_rows; r++) {
        printf("  [%lld]", (long long)r);
        for (int64_t c = 0; c < per_row && c < 10; c++) {
            double x = tfc_value_get(v, r * per_row + c);
            if (is_float) printf(" %.5g", x);
            else printf(" %lld", (long long)x);
        }
        printf("%s\n", per_row > 10 ? " ..." : "");
    }
    if (g->batched ? total > max_rows : rows > max_rows)
        printf("  ... (%lld rows)\n", (long long)(g->batched ? total : rows));
}

/* What `tfc run` holds. */
struct predictor {
    struct tool_model m;
    tfc_signature *sig;
    struct tool_feeds feeds;
    tfc_restore_report report;
    tfc_batcher *b;
    int n;                /* outputs */
    struct gathered *outs;
    tfc_value **vals;     /* one batch's fetches */
    tfc_tensor **tensors;
};

/* The "predict" signature's outputs, found in the graph. */
static int find_outputs(struct predictor *p, const char *model)
{
    if (p->sig->n_outputs == 0)
        return tool_error("run", "%s: the 'predict' signature has no outputs", model);
    p->n = p->sig->n_outputs;
    p->outs = calloc((size_t)p->n, sizeof *p->outs);
    p->vals = calloc((size_t)p->n, sizeof *p->vals);
    p->tensors = calloc((size_t)p->n, sizeof *p->tensors);
    if (!p->outs || !p->vals || !p->tensors) return tool_error("run", "out of memory");
    for (int k = 0; k < p->n; k++) {
        const char *name = p->sig->outputs[k];
        p->outs[k].name = name;
        if (!(p->tensors[k] = p->outs[k].tensor = tfc_graph_find(p->m.graph, name)))
            return tool_error("run", "the 'predict' signature's output '%s' is not in the graph",
                              name);
    }
    return TOOL_OK;
}

/* Runs the outputs over the data in batches, gathering them; without --out, only until the
 * rows to print are there. */
static int run_batches(struct predictor *p, const struct tool_opts *o, int64_t batch)
{
    if (tfc_batcher_create(p->feeds.n, p->feeds.values, batch, 0, 0, &p->b))
        return tool_error("run", "%s", tfc_errmsg());
    for (int64_t i = 0, steps = tfc_batcher_steps_per_epoch(p->b); i < steps; i++) {
        tfc_value *bv[TOOL_MAX_DATA];
        if (tfc_batcher_next(p->b, bv, NULL))
            return tool_error("run", "%s", tfc_batcher_errmsg(p->b));
        if (tfc_session_run(p->m.session, p->feeds.n, p->feeds.tensors, bv, p->n, p->tensors,
                            p->vals, 0, NULL))
            return tool_error("run", "%s", tfc_session_errmsg(p->m.session));
        int64_t rows = tfc_value_shape(bv[0]).dims[0];
        int bad = 0;
        for (int k = 0; k < p->n; k++) {
            if (!bad && append(&p->outs[k], p->vals[k], rows)) bad = 1;
            tfc_value_destroy(p->vals[k]);
            p->vals[k] = NULL;
        }
        if (bad) return TOOL_FAIL;
        /* printing needs only the first rows */
        if (!o->out && (i + 1) * batch >= (o->rows >= 0 ? o->rows : 5)) {
            int all_batched = 1;
            for (int k = 0; k < p->n; k++) all_batched &= p->outs[k].batched;
            if (all_batched) break;
        }
    }
    return TOOL_OK;
}

/* Writes each gathered output as DIR/<name>.npy (o->out), or prints its first rows. */
static int write_outputs(struct predictor *p, const struct tool_opts *o)
{
    for (int k = 0; k < p->n; k++) {
        const struct gathered *g = &p->outs[k];
        tfc_value *v;
        if (tfc_value_wrap(g->dtype, g->shape, g->data, &v))
            return tool_error("run", "output '%s': %s", g->name, tfc_errmsg());
        if (o->out) {
            char file[256], path[4096];
            sanitize(g->name, file, sizeof file);
            snprintf(path, sizeof path, "%s/%s.npy", o->out, file);
            tfc_status st = tfc_npy_write(path, v);
            if (st) {
                tfc_value_destroy(v);
                return tool_error("run", "%s", tfc_errmsg());
            }
            printf("%s: %s [", g->name, tfc_dtype_name(g->dtype));
            for (int i = 0; i < g->shape.rank; i++)
                printf("%s%lld", i ? ", " : "", (long long)g->shape.dims[i]);
            printf("] -> %s\n", path);
        } else {
            print_output(g, v, o->rows >= 0 ? o->rows : 5, p->feeds.rows);
        }
        tfc_value_destroy(v);
    }
    return TOOL_OK;
}

/* The signature, the output directory, the feeds and the variables, then the run. */
static int predict(struct predictor *p, const struct tool_opts *o, int64_t batch)
{
    if (tool_signature("run", &p->m, o->model, "predict", &p->sig)) return TOOL_FAIL;
    if (find_outputs(p, o->model)) return TOOL_FAIL;
    if (o->out && mkdir(o->out, 0777) && errno != EEXIST)
        return tool_error("run", "--out %s: %s", o->out, strerror(errno));
    if (tool_feeds_load("run", &p->m, p->sig, o, &p->feeds)) return TOOL_FAIL;
    int restored = tool_restore_or_init("run", &p->m, &p->report);
    if (restored < 0) return TOOL_FAIL;
    if (!restored)
        fprintf(stderr, "tfc run: note: the model has no checkpoint: using the variables' "
                        "initial values\n");
    if (run_batches(p, o, batch)) return TOOL_FAIL;
    return write_outputs(p, o);
}

int cmd_run(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv, OPT_DATA | OPT_BATCH | OPT_OUTDIR | OPT_ROWS, run_usage, &o);
    if (rc == -1) fputs(tool_data_rules, stdout);
    if (rc) return rc;
    int64_t batch = o.batch > 0 ? o.batch : 256;
    struct predictor p = {0};
    if (tool_model_open("run", o.model, 0, 1, &p.m)) return TOOL_FAIL;
    rc = predict(&p, &o, batch) ? TOOL_FAIL : TOOL_OK;
    for (int k = 0; p.outs && k < p.n; k++) free(p.outs[k].data);
    for (int k = 0; p.vals && k < p.n; k++) tfc_value_destroy(p.vals[k]);
    free(p.outs);
    free(p.vals);
    free(p.tensors);
    tfc_batcher_destroy(p.b);
    tool_feeds_clear(&p.feeds);
    tfc_restore_report_clear(&p.report);
    tfc_signature_free(p.sig);
    tool_model_close(&p.m);
    return rc;
}
