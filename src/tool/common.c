/* common.c: what the `tfc` commands share: option parsing, error messages, opening a model
 * (store, graph, context, session), restoring or initializing variables, loading --data files
 * into feeds with the conversion rules, and the graph walk used by `info` and `dot`. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tool.h"
#include "../../graph/serialize.h"

const char tool_data_rules[] =
    "Data files (--data NAME=FILE): NAME is a feed of the signature (a placeholder), FILE an\n"
    "idx file (MNIST style, gzip-compressed or plain) or a NumPy .npy file, told apart by\n"
    "content. The first dimension of every file is the row (example) count; all feeds need the\n"
    "same count. A file whose dtype differs from the placeholder's is converted: uint8 into a\n"
    "float32/float64 placeholder is scaled to [0,1] (x / 255, image data sets); other\n"
    "combinations convert by value (an integer placeholder takes only whole values in its\n"
    "range). Rows are reshaped to the placeholder's trailing dimensions when the element\n"
    "counts per row match (e.g. uint8 [n,28,28] into float32 [-1,784]); anything else is an\n"
    "error naming the feed.\n";

int tool_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tfc%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return TOOL_FAIL;
}

/* ---- Options ------------------------------------------------------------------------- */

static int usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "tfc %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see 'tfc %s --help')\n", cmd);
    return TOOL_USAGE;
}

/* An integer in [min, max]; strtoll's leading blanks and clamping on overflow are refused. */
static int parse_int(const char *cmd, const char *opt, const char *v, int64_t min, int64_t max,
                     int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || isspace((unsigned char)*v) || *end || errno || x < min || x > max) {
        if (max == INT64_MAX)
            fprintf(stderr, "tfc %s: %s needs an integer >= %lld, not '%s'\n", cmd, opt,
                    (long long)min, v);
        else
            fprintf(stderr, "tfc %s: %s needs an integer in [%lld, %lld], not '%s'\n", cmd, opt,
                    (long long)min, (long long)max, v);
        return TOOL_USAGE;
    }
    *out = x;
    return 0;
}

/* The command-line options, for every command; each command allows a subset. */
static const struct option_def {
    const char *name;
    unsigned flag;
    int has_value;
} options[] = {
    {"--data", OPT_DATA, 1},       {"--epochs", OPT_EPOCHS, 1},
    {"--batch", OPT_BATCH, 1},     {"--checkpoint-every", OPT_CKPT, 1},
    {"--keep", OPT_KEEP, 1},       {"--seed", OPT_SEED, 1},
    {"--out", OPT_OUTDIR, 1},      {"-o", OPT_OUTFILE, 1},
    {"--output", OPT_OUTFILE, 1},  {"--metric", OPT_METRIC, 1},
    {"--quiet", OPT_QUIET, 0},     {"-q", OPT_QUIET, 0},
    {"--rows", OPT_ROWS, 1},       {"--val-data", OPT_VAL_DATA, 1},
    {"--early-stop", OPT_EARLY_STOP, 1}, {"--early-stop-metric", OPT_EARLY_STOP, 1},
    {"--log-y", OPT_LOG_Y, 0},
};

/* The allowed option named by the first len characters of a; NULL when there is none. */
static const struct option_def *find_option(const char *a, size_t len, unsigned allowed)
{
    for (size_t t = 0; t < sizeof options / sizeof options[0]; t++)
        if (strlen(options[t].name) == len && !strncmp(options[t].name, a, len) &&
            (allowed & options[t].flag))
            return &options[t];
    return NULL;
}

/* --data or --val-data (flag) NAME=FILE into the list data of *n entries. */
static int add_data(const char *cmd, const char *flag, const char *v, int *n,
                    struct tool_data *data)
{
    char msg[128];
    const char *sep = strchr(v, '=');
    if (!sep || sep == v || !sep[1]) {
        snprintf(msg, sizeof msg, "%s needs NAME=FILE, not '%%s'", flag);
        return usage_error(cmd, msg, v);
    }
    if (*n == TOOL_MAX_DATA) {
        snprintf(msg, sizeof msg, "too many %s (%%s)", flag);
        return usage_error(cmd, msg, v);
    }
    if ((size_t)(sep - v) >= sizeof data[0].name) {
        snprintf(msg, sizeof msg, "%s: feed name too long in '%%s'", flag);
        return usage_error(cmd, msg, v);
    }
    memcpy(data[*n].name, v, (size_t)(sep - v));
    data[*n].name[sep - v] = 0;
    data[(*n)++].path = sep + 1;
    return 0;
}

/* Option od with value v (NULL for a flag) into o; TOOL_USAGE after a message. */
static int set_option(const char *cmd, const struct option_def *od, const char *v,
                      struct tool_opts *o)
{
    int64_t x;
    switch (od->flag) {
    case OPT_DATA: return add_data(cmd, "--data", v, &o->n_data, o->data);
    case OPT_VAL_DATA: return add_data(cmd, "--val-data", v, &o->n_val_data, o->val_data);
    case OPT_EARLY_STOP:
        if (strcmp(od->name, "--early-stop")) { /* --early-stop-metric NAME */
            if (!*v) return usage_error(cmd, "option %s needs a metric name", od->name);
            o->early_stop_metric = v;
            return 0;
        }
        return parse_int(cmd, "--early-stop", v, 1, INT64_MAX, &o->early_stop) ? TOOL_USAGE : 0;
    case OPT_LOG_Y: o->log_y = 1; return 0;
    case OPT_EPOCHS:
        return parse_int(cmd, "--epochs", v, 1, INT64_MAX, &o->epochs) ? TOOL_USAGE : 0;
    case OPT_BATCH: return parse_int(cmd, "--batch", v, 1, INT64_MAX, &o->batch) ? TOOL_USAGE : 0;
    case OPT_CKPT:
        return parse_int(cmd, "--checkpoint-every", v, 0, INT64_MAX, &o->checkpoint_every)
                   ? TOOL_USAGE : 0;
    case OPT_KEEP: /* the retention count is an int */
        return parse_int(cmd, "--keep", v, 0, INT_MAX, &o->keep) ? TOOL_USAGE : 0;
    case OPT_ROWS: return parse_int(cmd, "--rows", v, 0, INT64_MAX, &o->rows) ? TOOL_USAGE : 0;
    case OPT_SEED:
        if (parse_int(cmd, "--seed", v, 0, INT64_MAX, &x)) return TOOL_USAGE;
        o->seed = (uint64_t)x;
        o->have_seed = 1;
        return 0;
    case OPT_OUTDIR:
    case OPT_OUTFILE:
        if (!*v) return usage_error(cmd, "option %s needs a non-empty value", od->name);
        o->out = v;
        return 0;
    case OPT_METRIC:
        if (o->n_metrics == TOOL_MAX_METRICS) return usage_error(cmd, "too many --metric (%s)", v);
        o->metrics[o->n_metrics++] = v;
        return 0;
    case OPT_QUIET: o->quiet = 1; return 0;
    }
    return 0;
}

int tool_parse(int argc, char **argv, unsigned allowed, const char *usage, struct tool_opts *o)
{
    const char *cmd = argv[0];
    *o = (struct tool_opts){.cmd = cmd, .epochs = -1, .batch = -1, .checkpoint_every = -1,
                            .keep = -1, .rows = -1, .early_stop = -1};
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || !a[1]) {
            if (o->model) return usage_error(cmd, "unexpected argument '%s'", a);
            o->model = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            options_done = 1;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return -1;
        }
        /* --name=value or --name value */
        const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
        const struct option_def *od = find_option(a, eq ? (size_t)(eq - a) : strlen(a), allowed);
        if (!od) return usage_error(cmd, "unknown option '%s'", a);
        const char *v = NULL;
        if (od->has_value) {
            if (eq) v = eq + 1;
            else if (i + 1 < argc) v = argv[++i];
            else return usage_error(cmd, "option %s needs a value", od->name);
        } else if (eq) {
            return usage_error(cmd, "option %s takes no value", od->name);
        }
        int rc = set_option(cmd, od, v, o);
        if (rc) return rc;
    }
    if (!o->model) return usage_error(cmd, "%s", "missing MODEL argument");
    return 0;
}

/* ---- Models -------------------------------------------------------------------------- */

int tool_model_open(const char *cmd, const char *path, int writable, int with_session,
                    struct tool_model *m)
{
    *m = (struct tool_model){0};
    if (access(path, F_OK)) return tool_error(cmd, "%s: %s", path, strerror(errno));
    /* a writer here trains: it takes the store's training lock at once, before the runtime
     * starts; readers take none and leave the store one file, as it was */
    if (tfc_store_open(path, writable ? TFC_STORE_TRAINER : TFC_STORE_READONLY, &m->store)) {
        m->store = NULL;
        return tool_error(cmd, "%s: %s", path, tfc_errmsg());
    }
    if (tfc_store_load_graph(m->store, &m->graph)) {
        tool_error(cmd, "%s: %s", path, tfc_store_errmsg(m->store));
        m->graph = NULL;
        tool_model_close(m);
        return TOOL_FAIL;
    }
    if (!with_session) return TOOL_OK;
    if (tfc_ctx_create(&m->ctx)) {
        m->ctx = NULL;
        tool_error(cmd, "cannot start the runtime: %s", tfc_errmsg());
        tool_model_close(m);
        return TOOL_FAIL;
    }
    if (tfc_session_create(m->ctx, m->graph, &m->session)) {
        m->session = NULL;
        tool_error(cmd, "%s: %s", path, tfc_errmsg());
        tool_model_close(m);
        return TOOL_FAIL;
    }
    return TOOL_OK;
}

void tool_model_close(struct tool_model *m)
{
    tfc_session_destroy(m->session);
    tfc_graph_destroy(m->graph);
    tfc_store_close(m->store);
    tfc_ctx_destroy(m->ctx);
    *m = (struct tool_model){0};
}

int tool_signature(const char *cmd, struct tool_model *m, const char *path, const char *name,
                   tfc_signature **out)
{
    *out = NULL;
    tfc_status st = tfc_store_get_signature(m->store, name, out);
    if (st == TFC_ERR_NOT_FOUND)
        return tool_error(cmd, "%s: the model has no '%s' signature", path, name);
    if (st) return tool_error(cmd, "%s: %s", path, tfc_store_errmsg(m->store));
    return TOOL_OK;
}

int tool_restore_or_init(const char *cmd, struct tool_model *m, tfc_restore_report *report)
{
    int n = 0;
    tfc_checkpoint_info *list = NULL;
    memset(report, 0, sizeof *report);
    if (tfc_store_list_checkpoints(m->store, &n, &list))
        return tool_error(cmd, "%s", tfc_store_errmsg(m->store)), -1;
    free(list);
    if (n == 0) {
        if (tfc_session_init_variables(m->session))
            return tool_error(cmd, "%s", tfc_session_errmsg(m->session)), -1;
        return 0;
    }
    if (tfc_store_restore(m->store, m->session, NULL, report))
        return tool_error(cmd, "restoring the latest checkpoint: %s", tfc_store_errmsg(m->store)), -1;
    return 1;
}

/* ---- Data ---------------------------------------------------------------------------- */

/* Feed names compare without a trailing ":0" ("x" and "x:0" are one tensor). */
static int same_tensor(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 2 && !strcmp(a + la - 2, ":0")) la -= 2;
    if (lb > 2 && !strcmp(b + lb - 2, ":0")) lb -= 2;
    return la == lb && !strncmp(a, b, la);
}

static const char *shape_str(const tfc_shape *s, int from, char *buf, size_t len)
{
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = from; i < s->rank && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i > from ? "," : "",
                                (long long)s->dims[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

static int read_any(const char *cmd, const char *feed, const char *path, tfc_value **out)
{
    unsigned char magic[6] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return tool_error(cmd, "feed '%s': %s: %s", feed, path, strerror(errno));
    size_t got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    tfc_status st = got == 6 && !memcmp(magic, "\x93NUMPY", 6) ? tfc_npy_read(path, out)
                                                                : tfc_idx_read(path, out);
    if (st) return tool_error(cmd, "feed '%s': %s", feed, tfc_errmsg());
    return TOOL_OK;
}

static void set_elem(void *data, enum tfc_dtype dt, int64_t i, double x)
{
    switch (dt) {
    case TFC_FLOAT32: ((float *)data)[i] = (float)x; break;
    case TFC_FLOAT64: ((double *)data)[i] = x; break;
    case TFC_INT32: ((int32_t *)data)[i] = (int32_t)x; break;
    case TFC_INT64: ((int64_t *)data)[i] = (int64_t)x; break;
    case TFC_UINT8: ((uint8_t *)data)[i] = (uint8_t)x; break;
    default: ((uint8_t *)data)[i] = x != 0; break;
    }
}

/* Whether x fits an integer dtype exactly. */
static int fits(enum tfc_dtype dt, double x)
{
    if (dt == TFC_FLOAT32 || dt == TFC_FLOAT64 || dt == TFC_BOOL) return 1;
    if (x != floor(x)) return 0;
    if (dt == TFC_UINT8) return x >= 0 && x <= 255;
    if (dt == TFC_INT32) return x >= -2147483648.0 && x <= 2147483647.0;
    return x >= -9223372036854775808.0 && x < 9223372036854775808.0;
}

/* Converts *v (the file's data) to the placeholder's dtype and row shape, replacing *v. */
static int convert(const char *cmd, const char *feed, const char *path, tfc_tensor *ph,
                   tfc_value **v)
{
    enum tfc_dtype pd = tfc_tensor_dtype(ph), fd = tfc_value_dtype(*v);
    tfc_shape ps = tfc_tensor_shape(ph), fs = tfc_value_shape(*v);
    char b1[128], b2[128];
    if (ps.rank == 0)
        return tool_error(cmd, "feed '%s': the placeholder is a scalar; files feed rows", feed);
    if (fs.rank == 0) return tool_error(cmd, "feed '%s': %s holds a scalar, not rows", feed, path);
    int64_t n = fs.dims[0], per_file = 1, per_ph = 1;
    for (int i = 1; i < fs.rank; i++) per_file *= fs.dims[i];
    for (int i = 1; i < ps.rank; i++) per_ph *= ps.dims[i];
    int same = fs.rank == ps.rank;
    for (int i = 1; same && i < fs.rank; i++) same = fs.dims[i] == ps.dims[i];
    if (!same) {
        if (per_file != per_ph)
            return tool_error(cmd,
                              "feed '%s': %s has rows of shape %s (%lld values), the placeholder "
                              "takes rows of shape %s (%lld values)",
                              feed, path, shape_str(&fs, 1, b1, sizeof b1), (long long)per_file,
                              shape_str(&ps, 1, b2, sizeof b2), (long long)per_ph);
        tfc_shape to = ps;
        to.dims[0] = n;
        if (tfc_value_reshape(*v, to))
            return tool_error(cmd, "feed '%s': %s", feed, tfc_errmsg());
    }
    if (pd == fd) return TOOL_OK;
    tfc_value *c = NULL;
    int64_t numel = tfc_value_numel(*v);
    if (fd == TFC_UINT8 && pd == TFC_FLOAT32) {
        if (tfc_value_normalize_u8(*v, 1.0f / 255.0f, 0.0f, &c))
            return tool_error(cmd, "feed '%s': %s", feed, tfc_errmsg());
    } else {
        if (tfc_value_create(pd, tfc_value_shape(*v), &c))
            return tool_error(cmd, "feed '%s': %s", feed, tfc_errmsg());
        void *dst = tfc_value_data(c);
        int scale = fd == TFC_UINT8 && pd == TFC_FLOAT64;
        const int64_t *i64 = fd == TFC_INT64 ? tfc_value_cdata(*v) : NULL;
        for (int64_t i = 0; i < numel; i++) {
            if (i64 && pd == TFC_INT64) { /* exact beyond 2^53 */
                ((int64_t *)dst)[i] = i64[i];
                continue;
            }
            double x = tfc_value_get(*v, i);
            if (scale) x /= 255.0;
            if (!fits(pd, x)) {
                tool_error(cmd, "feed '%s': %s holds %g at element %lld, which %s cannot hold",
                           feed, path, x, (long long)i, tfc_dtype_name(pd));
                tfc_value_destroy(c);
                return TOOL_FAIL;
            }
            set_elem(dst, pd, i, x);
        }
    }
    tfc_value_destroy(*v);
    *v = c;
    return TOOL_OK;
}

int tool_feeds_load(const char *cmd, struct tool_model *m, const tfc_signature *sig,
                    const struct tool_opts *o, struct tool_feeds *f)
{
    return tool_feeds_load_list(cmd, m, sig, o->model, "--data", o->n_data, o->data, f);
}

/* The file of each feed of sig from the list (every feed needs one, each NAME a feed). */
static int match_feeds(const char *cmd, const tfc_signature *sig, const char *flag, int n_data,
                       const struct tool_data *data, const char **paths)
{
    for (int d = 0; d < n_data; d++) {
        int k = -1;
        for (int i = 0; i < sig->n_feeds; i++)
            if (same_tensor(data[d].name, sig->feeds[i])) k = i;
        if (k < 0) {
            char list[512];
            size_t pos = 0;
            list[0] = 0;
            for (int i = 0; i < sig->n_feeds && pos < sizeof list; i++)
                pos += (size_t)snprintf(list + pos, sizeof list - pos, "%s%s", i ? ", " : "",
                                        sig->feeds[i]);
            return tool_error(cmd, "%s %s: '%s' is not a feed of the signature (feeds: %s)",
                              flag, data[d].name, data[d].name, list);
        }
        if (paths[k]) return tool_error(cmd, "%s %s given twice", flag, data[d].name);
        paths[k] = data[d].path;
    }
    for (int i = 0; i < sig->n_feeds; i++)
        if (!paths[i])
            return tool_error(cmd, "no %s %s=FILE for feed '%s'", flag, sig->feeds[i],
                              sig->feeds[i]);
    return TOOL_OK;
}

int tool_feeds_load_list(const char *cmd, struct tool_model *m, const tfc_signature *sig,
                         const char *model, const char *flag, int n_data,
                         const struct tool_data *data, struct tool_feeds *f)
{
    memset(f, 0, sizeof *f);
    if (sig->n_feeds > TOOL_MAX_DATA) return tool_error(cmd, "the signature has too many feeds");
    if (sig->n_feeds == 0) /* else "not a feed (feeds: )", or a batcher of no source */
        return tool_error(cmd, "%s: the signature has no feeds: nothing to read the %s "
                          "files into", model, flag);
    const char *paths[TOOL_MAX_DATA] = {0};
    if (match_feeds(cmd, sig, flag, n_data, data, paths)) return TOOL_FAIL;
    for (int i = 0; i < sig->n_feeds; i++) {
        tfc_tensor *t = tfc_graph_find(m->graph, sig->feeds[i]);
        if (!t) {
            tool_feeds_clear(f);
            return tool_error(cmd, "the signature's feed '%s' is not in the graph", sig->feeds[i]);
        }
        if (strcmp(tfc_tensor_op(t), "placeholder"))
            fprintf(stderr, "tfc %s: note: feed '%s' is a %s, not a placeholder\n", cmd,
                    sig->feeds[i], tfc_tensor_op(t));
        f->tensors[i] = t;
        if (read_any(cmd, sig->feeds[i], paths[i], &f->values[i])) {
            tool_feeds_clear(f);
            return TOOL_FAIL;
        }
        f->n = i + 1; /* values[i] is freed by tool_feeds_clear from here on */
        if (convert(cmd, sig->feeds[i], paths[i], t, &f->values[i])) {
            tool_feeds_clear(f);
            return TOOL_FAIL;
        }
        int64_t rows = tfc_value_shape(f->values[i]).dims[0];
        if (i == 0) f->rows = rows;
        else if (rows != f->rows) {
            tool_error(cmd, "feed '%s' has %lld rows but feed '%s' has %lld", sig->feeds[i],
                       (long long)rows, sig->feeds[0], (long long)f->rows);
            tool_feeds_clear(f);
            return TOOL_FAIL;
        }
    }
    if (f->n > 0 && f->rows == 0) {
        tool_feeds_clear(f);
        return tool_error(cmd, "the data files hold no rows");
    }
    return TOOL_OK;
}

void tool_feeds_clear(struct tool_feeds *f)
{
    for (int i = 0; i < f->n; i++) tfc_value_destroy(f->values[i]);
    memset(f, 0, sizeof *f);
}

double tool_value_mean(const tfc_value *v)
{
    int64_t n = tfc_value_numel(v);
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += tfc_value_get(v, i);
    return n > 0 ? sum / (double)n : 0.0;
}

/* ---- Graph walk ---------------------------------------------------------------------- */

int tool_nodes(tfc_graph *g, int *n, struct tool_node **out)
{
    int count = tfc_graph_num_nodes(g);
    struct tool_node *nodes = calloc((size_t)count + 1, sizeof *nodes);
    *n = 0;
    *out = NULL;
    if (!nodes) return TOOL_FAIL;
    for (int i = 0; i < count; i++) {
        struct tfc_node_record rec;
        if (tfc_graph_export_node(g, i, &rec)) {
            tool_nodes_free(i, nodes);
            return TOOL_FAIL;
        }
        /* the record's arrays are plain heap arrays, now owned by the tool_node */
        nodes[i] = (struct tool_node){rec.name, rec.op, rec.n_inputs, rec.inputs, rec.n_ctrl,
                                      rec.ctrl};
    }
    *n = count;
    *out = nodes;
    return TOOL_OK;
}

void tool_nodes_free(int n, struct tool_node *nodes)
{
    for (int i = 0; i < n && nodes; i++) {
        struct tfc_node_record rec = {.inputs = nodes[i].inputs, .ctrl = nodes[i].ctrl};
        tfc_node_record_clear(&rec);
    }
    free(nodes);
}

enum tool_var_role tool_var_role(tfc_graph *g, const char *name)
{
    tfc_tensor *t = tfc_graph_find(g, name);
    if (t) {
        enum tfc_dtype dt = tfc_tensor_dtype(t);
        tfc_shape s = tfc_tensor_shape(t);
        if (s.rank == 0 && dt != TFC_FLOAT32 && dt != TFC_FLOAT64) return VAR_COUNTER;
    }
    char prefix[512];
    for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
        size_t len = (size_t)(p - name);
        if (len == 0 || len >= sizeof prefix) continue;
        memcpy(prefix, name, len);
        prefix[len] = 0;
        tfc_tensor *v = tfc_graph_find(g, prefix);
        if (v && !strcmp(tfc_tensor_op(v), "variable")) return VAR_SLOT;
    }
    return VAR_PARAM;
}
