/* info.c: `tfc info` (a model's graph summary, parameter count, signatures, variables,
 * checkpoints and latest metrics) and `tfc dot` (the graph in Graphviz DOT). Both read the
 * store only: no runtime is started. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tool.h"
#include "info_topology.h"

static const char info_usage[] =
    "usage: tfc info MODEL.db\n"
    "       tfc info --topology   (the node and StarPU's workers: tfc info --topology --help)\n\n"
    "Prints a summary of the model: node count and nodes by op, the parameter count (elements\n"
    "of the variables, not counting optimizer slots \"<var>/<slot>\" and integer counters such\n"
    "as global_step, which are counted apart), the \"train\" and \"predict\" signatures, every\n"
    "variable (name, dtype, shape), the checkpoints (step, time, size, input position) and\n"
    "every metric recorded in the store (its latest value, count and first step).\n";

static const char dot_usage[] =
    "usage: tfc dot MODEL.db > graph.dot\n\n"
    "Writes the graph in Graphviz DOT on stdout (draw it with `dot -Tsvg graph.dot`): one node\n"
    "per graph node labelled with its name and op; placeholders are blue ellipses, variables\n"
    "orange boxes (optimizer slots and counters paler), constants grey; edges carry the output\n"
    "index when it is not 0; control dependencies are dashed. The branches and bodies of cond\n"
    "and while_loop nodes are dashed clusters named after their region_enter node.\n";

static const char *shape_text(const tfc_shape *s, char *buf, size_t len)
{
    size_t pos = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s->rank && pos < len; i++)
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%lld", i ? ", " : "", (long long)s->dims[i]);
    if (pos < len) snprintf(buf + pos, len - pos, "]");
    return buf;
}

static const char *bytes_text(int64_t b, char *buf, size_t len)
{
    if (b < 1024) snprintf(buf, len, "%lld B", (long long)b);
    else if (b < 1024 * 1024) snprintf(buf, len, "%.1f KiB", (double)b / 1024);
    else if (b < 1024LL * 1024 * 1024) snprintf(buf, len, "%.1f MiB", (double)b / 1048576);
    else snprintf(buf, len, "%.2f GiB", (double)b / 1073741824.0);
    return buf;
}

struct op_count {
    const char *op;
    int n;
};

static int by_count(const void *a, const void *b)
{
    const struct op_count *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->op, y->op);
}

static void print_list(const char *label, int n, const char *const *names)
{
    printf("    %-9s", label);
    for (int i = 0; i < n; i++) printf("%s%s", i ? ", " : "", names[i]);
    printf("%s\n", n ? "" : "(none)");
}

/* The node count and the nodes by op, most frequent first, wrapped at 92 columns. */
static void print_ops(int n, const struct tool_node *nodes)
{
    printf("graph: %d nodes\n", n);
    struct op_count *ops = calloc((size_t)n + 1, sizeof *ops);
    int n_ops = 0;
    for (int i = 0; ops && i < n; i++) {
        int k = 0;
        while (k < n_ops && strcmp(ops[k].op, nodes[i].op)) k++;
        if (k == n_ops) ops[n_ops++] = (struct op_count){nodes[i].op, 0};
        ops[k].n++;
    }
    if (ops) qsort(ops, (size_t)n_ops, sizeof *ops, by_count);
    int col = printf("  by op:");
    for (int k = 0; k < n_ops; k++) {
        char item[96];
        int len = snprintf(item, sizeof item, " %s %d%s", ops[k].op, ops[k].n, k + 1 < n_ops ? "," : "");
        if (col + len > 92) col = printf("\n        ") - 1;
        col += printf("%s", item);
    }
    printf("\n");
    free(ops);
}

/* Elements of the parameters, and apart from them the optimizer slots and counters. */
static void print_parameters(tfc_graph *g, int n, const struct tool_node *nodes)
{
    int64_t params = 0, slot_elems = 0;
    int n_params = 0, n_slots = 0, n_counters = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(nodes[i].op, "variable")) continue;
        tfc_tensor *t = tfc_graph_find(g, nodes[i].name);
        tfc_shape s = tfc_tensor_shape(t);
        int64_t numel = tfc_shape_numel(&s);
        switch (tool_var_role(g, nodes[i].name)) {
        case VAR_PARAM: params += numel, n_params++; break;
        case VAR_SLOT: slot_elems += numel, n_slots++; break;
        case VAR_COUNTER: n_counters++; break;
        }
    }
    printf("parameters: %lld in %d variables (not counted: %lld in %d optimizer slots, "
           "%d counters)\n", (long long)params, n_params, (long long)slot_elems, n_slots, n_counters);
}

/* The "train" and "predict" signatures. */
static void print_signatures(tfc_store *store)
{
    printf("signatures:\n");
    static const char *const sig_names[] = {"train", "predict"};
    for (int k = 0; k < 2; k++) {
        tfc_signature *sig = NULL;
        tfc_status st = tfc_store_get_signature(store, sig_names[k], &sig);
        if (st == TFC_ERR_NOT_FOUND) {
            printf("  %s: (none)\n", sig_names[k]);
            continue;
        }
        if (st) {
            printf("  %s: unreadable: %s\n", sig_names[k], tfc_store_errmsg(store));
            continue;
        }
        printf("  %s:\n", sig_names[k]);
        print_list("feeds", sig->n_feeds, sig->feeds);
        if (sig->n_outputs || !sig->loss) print_list("outputs", sig->n_outputs, sig->outputs);
        if (sig->loss) printf("    %-9s%s\n", "loss", sig->loss);
        if (sig->n_metrics || sig->loss) print_list("metrics", sig->n_metrics, sig->metrics);
        if (sig->train_op) printf("    %-9s%s\n", "train_op", sig->train_op);
        tfc_signature_free(sig);
    }
}

static void print_variables(tfc_graph *g, int n, const struct tool_node *nodes)
{
    printf("variables:\n");
    for (int i = 0; i < n; i++) {
        if (strcmp(nodes[i].op, "variable")) continue;
        tfc_tensor *t = tfc_graph_find(g, nodes[i].name);
        tfc_shape s = tfc_tensor_shape(t);
        char buf[160];
        enum tool_var_role role = tool_var_role(g, nodes[i].name);
        printf("  %-32s %-8s %s%s\n", nodes[i].name, tfc_dtype_name(tfc_tensor_dtype(t)),
               shape_text(&s, buf, sizeof buf),
               role == VAR_SLOT ? "  (slot)" : role == VAR_COUNTER ? "  (counter)" : "");
    }
}

static void print_checkpoints(tfc_store *store)
{
    int n_ckpt = 0;
    tfc_checkpoint_info *ck = NULL;
    if (tfc_store_list_checkpoints(store, &n_ckpt, &ck)) {
        printf("checkpoints: unreadable: %s\n", tfc_store_errmsg(store));
        return;
    }
    printf("checkpoints: %d\n", n_ckpt);
    for (int i = 0; i < n_ckpt; i++) {
        char when[64], size[32];
        time_t t = (time_t)ck[i].time;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
        printf("  step %-8lld %s  %9s  %d variables  input epoch %lld batch %lld\n",
               (long long)ck[i].step, when, bytes_text(ck[i].bytes, size, sizeof size),
               ck[i].n_variables, (long long)ck[i].position.epoch,
               (long long)ck[i].position.step);
    }
    free(ck);
}

/* Every metric recorded in the store (whatever logged it, signature or not), in the order first
 * logged: its latest value, how many values and the steps they span. */
static void print_metrics(tfc_store *store)
{
    int n = 0;
    tfc_metric_info *m = NULL;
    if (tfc_store_list_metrics(store, &n, &m)) {
        printf("metrics: unreadable: %s\n", tfc_store_errmsg(store));
        return;
    }
    if (!n) printf("metrics: none\n");
    else printf("metrics (latest):\n");
    for (int i = 0; i < n; i++)
        printf("  %-24s %-12.6g at step %lld (%lld values), from step %lld\n", m[i].name,
               m[i].last_value, (long long)m[i].last_step, (long long)m[i].count,
               (long long)m[i].first_step);
    free(m);
}

int cmd_info(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--topology")) {
        if (argc == 2) return tool_topology();
        fputs(tool_topology_usage, strcmp(argv[2], "--help") ? stderr : stdout);
        return strcmp(argv[2], "--help") ? TOOL_USAGE : -1;
    }
    struct tool_opts o;
    int rc = tool_parse(argc, argv, 0, info_usage, &o);
    if (rc) return rc;
    struct tool_model m;
    if (tool_model_open("info", o.model, 0, 0, &m)) return TOOL_FAIL;
    int n = 0;
    struct tool_node *nodes = NULL;
    if (tool_nodes(m.graph, &n, &nodes)) {
        tool_model_close(&m);
        return tool_error("info", "cannot list the graph's nodes: %s", tfc_errmsg());
    }
    printf("model %s\n", o.model);
    print_ops(n, nodes);
    print_parameters(m.graph, n, nodes);
    print_signatures(m.store);
    print_variables(m.graph, n, nodes);
    print_checkpoints(m.store);
    print_metrics(m.store);
    tool_nodes_free(n, nodes);
    tool_model_close(&m);
    return TOOL_OK;
}

/* ---- dot ----------------------------------------------------------------------------- */

struct name_index {
    const char *name;
    int index;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct name_index *)a)->name, ((const struct name_index *)b)->name);
}

static int find_node(const struct name_index *idx, int n, const char *name)
{
    struct name_index key = {name, 0};
    const struct name_index *hit = bsearch(&key, idx, (size_t)n, sizeof *idx, by_name);
    return hit ? hit->index : -1;
}

/* The node producing tensor "node" or "node:k", and k. */
static int tensor_node(const struct name_index *idx, int n, const char *tensor, int *out_index)
{
    *out_index = 0;
    const char *colon = strrchr(tensor, ':');
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        char node[512];
        size_t len = (size_t)(colon - tensor);
        if (len < sizeof node) {
            memcpy(node, tensor, len);
            node[len] = 0;
            int k = find_node(idx, n, node);
            if (k >= 0) {
                long idx_k = strtol(colon + 1, NULL, 10); /* digits only: no sign, may be huge */
                if (idx_k <= INT_MAX) {
                    *out_index = (int)idx_k;
                    return k;
                }
            }
        }
    }
    return find_node(idx, n, tensor);
}

static void dot_escaped(const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        if (*s == '\n') fputs("\\n", stdout);
        else putchar(*s);
    }
}

/* Control-flow regions: each opens with a region_enter node ("loop/body") and holds the nodes
 * named under it; region[i] is the innermost one node i lies in (its region_enter's index),
 * -1 for none. 0 when the graph has no region (nothing to do). */
static int dot_regions(const struct tool_node *nodes, int n, int *region)
{
    int any = 0;
    for (int i = 0; i < n; i++) {
        size_t best = 0;
        region[i] = -1;
        for (int r = 0; r < n; r++) {
            size_t len = strlen(nodes[r].name);
            if (strcmp(nodes[r].op, "region_enter") || len <= best) continue;
            if (!strncmp(nodes[i].name, nodes[r].name, len) && nodes[i].name[len] == '/') {
                region[i] = r;
                best = len;
                any = 1;
            }
        }
    }
    return any;
}

static void dot_cluster(const struct tool_node *nodes, int n, const int *region, int r)
{
    printf("  subgraph cluster_%d {\n    label=\"", r);
    dot_escaped(nodes[r].name);
    printf("\"; style=\"rounded,dashed\"; color=\"#888888\";\n");
    for (int i = 0; i < n; i++)
        if (region[i] == r) printf("    n%d;\n", i);
    for (int c = 0; c < n; c++) /* nested regions: their region_enter lies in this one */
        if (region[c] == r && !strcmp(nodes[c].op, "region_enter")) dot_cluster(nodes, n, region, c);
    printf("  }\n");
}

int cmd_dot(int argc, char **argv)
{
    struct tool_opts o;
    int rc = tool_parse(argc, argv, 0, dot_usage, &o);
    if (rc) return rc;
    struct tool_model m;
    if (tool_model_open("dot", o.model, 0, 0, &m)) return TOOL_FAIL;
    int n = 0;
    struct tool_node *nodes = NULL;
    struct name_index *idx = NULL;
    if (tool_nodes(m.graph, &n, &nodes) || !(idx = calloc((size_t)n + 1, sizeof *idx))) {
        tool_nodes_free(n, nodes);
        tool_model_close(&m);
        return tool_error("dot", "cannot list the graph's nodes");
    }
    for (int i = 0; i < n; i++) idx[i] = (struct name_index){nodes[i].name, i};
    qsort(idx, (size_t)n, sizeof *idx, by_name);

    printf("digraph \"");
    dot_escaped(o.model);
    printf("\" {\n"
           "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t, label=\"");
    dot_escaped(o.model);
    printf(" (%d nodes)\"];\n"
           "  node [shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\", "
           "fontname=\"Helvetica\", fontsize=10];\n"
           "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n", n);
    for (int i = 0; i < n; i++) {
        printf("  n%d [label=\"", i);
        dot_escaped(nodes[i].name);
        printf("\\n");
        dot_escaped(nodes[i].op);
        printf("\"");
        if (!strcmp(nodes[i].op, "placeholder"))
            printf(", shape=ellipse, style=filled, fillcolor=\"#cfe2ff\"");
        else if (!strcmp(nodes[i].op, "variable"))
            printf(", shape=box, style=filled, fillcolor=\"%s\"",
                   tool_var_role(m.graph, nodes[i].name) == VAR_PARAM ? "#ffd699" : "#fff0d6");
        else if (!strcmp(nodes[i].op, "constant"))
            printf(", shape=box, style=filled, fillcolor=\"#e6e6e6\"");
        printf("];\n");
    }
    int *region = malloc(sizeof(int) * (size_t)(n + 1));
    if (region && dot_regions(nodes, n, region))
        for (int r = 0; r < n; r++)
            if (region[r] < 0 && !strcmp(nodes[r].op, "region_enter"))
                dot_cluster(nodes, n, region, r);
    free(region);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < nodes[i].n_inputs; k++) {
            int out_index, src = tensor_node(idx, n, nodes[i].inputs[k], &out_index);
            if (src < 0) continue;
            printf("  n%d -> n%d", src, i);
            if (out_index > 0) printf(" [label=\"%d\"]", out_index);
            printf(";\n");
        }
        for (int k = 0; k < nodes[i].n_ctrl; k++) {
            int src = find_node(idx, n, nodes[i].ctrl[k]);
            if (src >= 0) printf("  n%d -> n%d [style=dashed];\n", src, i);
        }
    }
    printf("}\n");
    free(idx);
    tool_nodes_free(n, nodes);
    tool_model_close(&m);
    return fflush(stdout) ? tool_error("dot", "cannot write the output") : TOOL_OK;
}
