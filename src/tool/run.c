/* run.c: `tfc run`: inference through the "predict" signature over data files, in batches;
 * each output is gathered over all rows and written as DIR/<name>.npy, or its first rows are
 * printed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "tool.h"

static const char run_usage[] =
    "usage: tfc run MODEL.db --data NAME=FILE ... [--whole NAME] ... [--out DIR] [--batch B]\n"
    "               [--rows N]\n\n"
    "Runs the model's \"predict\" signature on the rows of the data files, in batches (default\n"
    "256 rows), with the variables of the latest checkpoint. A feed whose placeholder has no\n"
    "unknown leading dimension (a scalar, a parameter vector, a fixed-size input), or one named\n"
    "by --whole, is not batched: its file is passed whole, in every batch, and must hold the\n"
    "placeholder's shape (same element count when the rank differs) and a dtype convertible\n"
    "by value. Batched feeds must have the same row count. With --out, each output is written\n"
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
    tfc_signature batched;  /* sig's batched feeds (borrowed names) */
    const char *batched_names[TOOL_MAX_DATA];
    struct tool_feeds feeds; /* the batched ones */
    int n_whole;            /* feeds passed whole, in every run */
    tfc_tensor *whole_t[TOOL_MAX_DATA];
    tfc_value *whole_v[TOOL_MAX_DATA];
    tfc_restore_report report;
    tfc_batcher *b;
    int n;                /* outputs */
    struct gathered *outs;
    tfc_value **vals;     /* one batch's fetches */
    tfc_tensor **tensors;
};

/* ---- whole feeds ------------------------------------------------------------------------ */

/* Feed names as the tool compares them: "x" and "x:0" are one tensor. */
static int same_feed(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 2 && !strcmp(a + la - 2, ":0")) la -= 2;
    if (lb > 2 && !strcmp(b + lb - 2, ":0")) lb -= 2;
    return la == lb && !strncmp(a, b, la);
}

/* Takes the --whole NAME options out of argv (tool_parse does not know them). */
static int take_whole_opts(int *argc, char **argv, const char **names, int *n)
{
    int k = 1;
    for (int i = 1; i < *argc; i++) {
        int eq = !strncmp(argv[i], "--whole=", 8);
        if (!eq && strcmp(argv[i], "--whole")) {
            argv[k++] = argv[i];
            continue;
        }
        const char *v = eq ? argv[i] + 8 : i + 1 < *argc ? argv[++i] : NULL;
        if (!v || !*v) {
            fprintf(stderr, "tfc run: --whole needs a feed NAME\n");
            return TOOL_USAGE;
        }
        if (*n == TOOL_MAX_DATA) {
            fprintf(stderr, "tfc run: more than %d --whole options\n", TOOL_MAX_DATA);
            return TOOL_USAGE;
        }
        names[(*n)++] = v;
    }
    *argc = k;
    argv[k] = NULL;
    return TOOL_OK;
}

static const char *shape_text(const tfc_shape *s, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s->rank && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? "," : "", (long long)s->dims[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

/* Sorts the signature's feeds into batched ones and whole ones: a placeholder with no unknown
 * leading dimension, or one named by --whole. */
static int split_feeds(struct predictor *p, const char *const *whole, int n_whole)
{
    for (int j = 0; j < n_whole; j++) {
        int found = 0;
        for (int i = 0; i < p->sig->n_feeds; i++) found |= same_feed(whole[j], p->sig->feeds[i]);
        if (!found)
            return tool_error("run", "--whole %s: not a feed of the 'predict' signature", whole[j]);
    }
    p->batched = *p->sig;
    p->batched.feeds = p->batched_names;
    p->batched.n_feeds = 0;
    for (int i = 0; i < p->sig->n_feeds; i++) {
        const char *name = p->sig->feeds[i];
        tfc_tensor *t = tfc_graph_find(p->m.graph, name);
        if (!t) return tool_error("run", "the signature's feed '%s' is not in the graph", name);
        tfc_shape s = tfc_tensor_shape(t);
        int named = 0;
        for (int j = 0; j < n_whole; j++) named |= same_feed(whole[j], name);
        if (named || s.rank == 0 || s.dims[0] >= 0) p->whole_t[p->n_whole++] = t;
        else p->batched_names[p->batched.n_feeds++] = name;
    }
    return TOOL_OK;
}

/* v (a whole feed's file) in the placeholder's shape: the same where the placeholder's dims
 * are known, or reshaped when it is fully known and the element counts agree. */
static int whole_shape(const char *feed, const char *path, tfc_tensor *ph, tfc_value *v)
{
    tfc_shape ps = tfc_tensor_shape(ph), vs = tfc_value_shape(v);
    int fits = ps.rank == vs.rank, known = 1;
    int64_t numel = 1;
    for (int i = 0; i < ps.rank; i++) {
        if (fits && ps.dims[i] >= 0 && ps.dims[i] != vs.dims[i]) fits = 0;
        known &= ps.dims[i] >= 0;
        numel *= ps.dims[i];
    }
    if (fits) return TOOL_OK;
    if (known && numel == tfc_value_numel(v) && !tfc_value_reshape(v, ps)) return TOOL_OK;
    char a[160], b[160];
    return tool_error("run", "feed '%s' is passed whole (not batched): %s holds shape %s, the "
                      "placeholder takes %s", feed, path, shape_text(&vs, a, sizeof a),
                      shape_text(&ps, b, sizeof b));
}

/* *v converted by value to dtype dt (integer targets take integral values only). */
static int whole_dtype(const char *feed, const char *path, enum tfc_dtype dt, tfc_value **v)
{
    enum tfc_dtype fd = tfc_value_dtype(*v);
    if (fd == dt) return TOOL_OK;
    tfc_value *c;
    if (tfc_value_create(dt, tfc_value_shape(*v), &c))
        return tool_error("run", "feed '%s': %s", feed, tfc_errmsg());
    void *d = tfc_value_data(c);
    int is_float = dt == TFC_FLOAT32 || dt == TFC_FLOAT64;
    for (int64_t i = 0; i < tfc_value_numel(*v); i++) {
        double x = tfc_value_get(*v, i);
        if (!is_float && dt != TFC_BOOL && x != (double)(int64_t)x) {
            tfc_value_destroy(c);
            return tool_error("run", "feed '%s': %s holds %g at element %lld, which %s cannot "
                              "hold", feed, path, x, (long long)i, tfc_dtype_name(dt));
        }
        switch (dt) {
        case TFC_FLOAT32: ((float *)d)[i] = (float)x; break;
        case TFC_FLOAT64: ((double *)d)[i] = x; break;
        case TFC_INT32: ((int32_t *)d)[i] = (int32_t)x; break;
        case TFC_INT64: ((int64_t *)d)[i] = (int64_t)x; break;
        case TFC_UINT8: ((uint8_t *)d)[i] = (uint8_t)x; break;
        default: ((uint8_t *)d)[i] = x != 0; break;
        }
    }
    tfc_value_destroy(*v);
    *v = c;
    return TOOL_OK;
}

/* Reads whole feed k from its --data file (.npy or idx, told apart by content). */
static int load_whole(struct predictor *p, const struct tool_opts *o, int k)
{
    const char *feed = tfc_tensor_name(p->whole_t[k]), *path = NULL;
    for (int d = 0; d < o->n_data; d++)
        if (same_feed(o->data[d].name, feed)) {
            if (path) return tool_error("run", "--data %s given twice", o->data[d].name);
            path = o->data[d].path;
        }
    if (!path) return tool_error("run", "no --data %s=FILE for feed '%s'", feed, feed);
    unsigned char magic[6] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return tool_error("run", "feed '%s': %s: %s", feed, path, strerror(errno));
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    tfc_status st = got == 6 && !memcmp(magic, "\x93NUMPY", 6) ? tfc_npy_read(path, &p->whole_v[k])
                                                                : tfc_idx_read(path, &p->whole_v[k]);
    if (st) return tool_error("run", "feed '%s': %s", feed, tfc_errmsg());
    if (whole_shape(feed, path, p->whole_t[k], p->whole_v[k])) return TOOL_FAIL;
    return whole_dtype(feed, path, tfc_tensor_dtype(p->whole_t[k]), &p->whole_v[k]);
}

/* The whole feeds, then the batched ones from the other --data files. */
static int load_feeds(struct predictor *p, const struct tool_opts *o)
{
    if (p->sig->n_feeds == 0 && o->n_data > 0)
        return tool_error("run", "%s: the signature has no feeds: nothing to read the --data "
                          "files into", o->model);
    for (int d = 0; d < o->n_data; d++) {
        int found = 0;
        for (int i = 0; i < p->sig->n_feeds; i++) found |= same_feed(o->data[d].name, p->sig->feeds[i]);
        if (!found)
            return tool_error("run", "--data %s: '%s' is not a feed of the 'predict' signature",
                              o->data[d].name, o->data[d].name);
    }
    for (int k = 0; k < p->n_whole; k++)
        if (load_whole(p, o, k)) return TOOL_FAIL;
    if (p->batched.n_feeds == 0) return TOOL_OK;
    static struct tool_data data[TOOL_MAX_DATA];
    int n = 0;
    for (int d = 0; d < o->n_data; d++) {
        int whole = 0;
        for (int k = 0; k < p->n_whole; k++)
            whole |= same_feed(o->data[d].name, tfc_tensor_name(p->whole_t[k]));
        if (!whole) data[n++] = o->data[d];
    }
    return tool_feeds_load_list("run", &p->m, &p->batched, o->model, "--data", n, data,
                                &p->feeds);
}

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

/* One run: the batch's feeds (bv, rows of them; none: -1) and the whole ones; gathers the
 * outputs. */
static int run_once(struct predictor *p, tfc_value *const *bv, int64_t rows)
{
    tfc_tensor *t[2 * TOOL_MAX_DATA];
    tfc_value *v[2 * TOOL_MAX_DATA];
    int n = 0;
    for (int i = 0; i < p->feeds.n; i++) t[n] = p->feeds.tensors[i], v[n++] = bv[i];
    for (int k = 0; k < p->n_whole; k++) t[n] = p->whole_t[k], v[n++] = p->whole_v[k];
    if (tfc_session_run(p->m.session, n, t, v, p->n, p->tensors, p->vals, 0, NULL))
        return tool_error("run", "%s", tfc_session_errmsg(p->m.session));
    int bad = 0;
    for (int k = 0; k < p->n; k++) {
        if (!bad && append(&p->outs[k], p->vals[k], rows)) bad = 1;
        tfc_value_destroy(p->vals[k]);
        p->vals[k] = NULL;
    }
    return bad ? TOOL_FAIL : TOOL_OK;
}

/* Runs the outputs over the data in batches, gathering them; without --out, only until the
 * rows to print are there. With whole feeds only, one run. */
static int run_batches(struct predictor *p, const struct tool_opts *o, int64_t batch)
{
    if (p->feeds.n == 0) return run_once(p, NULL, -1);
    if (tfc_batcher_create(p->feeds.n, p->feeds.values, batch, 0, 0, &p->b))
        return tool_error("run", "%s", tfc_errmsg());
    for (int64_t i = 0, steps = tfc_batcher_steps_per_epoch(p->b); i < steps; i++) {
        tfc_value *bv[TOOL_MAX_DATA];
        if (tfc_batcher_next(p->b, bv, NULL))
            return tool_error("run", "%s", tfc_batcher_errmsg(p->b));
        if (run_once(p, bv, tfc_value_shape(bv[0]).dims[0])) return TOOL_FAIL;
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
static int predict(struct predictor *p, const struct tool_opts *o, int64_t batch,
                   const char *const *whole, int n_whole)
{
    if (tool_signature("run", &p->m, o->model, "predict", &p->sig)) return TOOL_FAIL;
    if (find_outputs(p, o->model)) return TOOL_FAIL;
    if (o->out && mkdir(o->out, 0777) && errno != EEXIST)
        return tool_error("run", "--out %s: %s", o->out, strerror(errno));
    if (split_feeds(p, whole, n_whole) || load_feeds(p, o)) return TOOL_FAIL;
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
    const char *whole[TOOL_MAX_DATA];
    int n_whole = 0;
    int rc = take_whole_opts(&argc, argv, whole, &n_whole);
    if (rc) return rc;
    rc = tool_parse(argc, argv, OPT_DATA | OPT_BATCH | OPT_OUTDIR | OPT_ROWS, run_usage, &o);
    if (rc == -1) fputs(tool_data_rules, stdout);
    if (rc) return rc;
    int64_t batch = o.batch > 0 ? o.batch : 256;
    struct predictor p = {0};
    if (tool_model_open("run", o.model, 0, 1, &p.m)) return TOOL_FAIL;
    rc = predict(&p, &o, batch, whole, n_whole) ? TOOL_FAIL : TOOL_OK;
    for (int k = 0; k < p.n_whole; k++) tfc_value_destroy(p.whole_v[k]);
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
