/* fuzz_attrs.c: libFuzzer target of the attribute text ("transpose_a=1,axes=[0,1]") as the
 * store's node rows and tfc_op hold it: a node record with that text goes through
 * tfc_graph_import_node, the path tfc_store_load_graph takes (attributes parsed, then the op's
 * shape inference on them), over inputs of the shapes the input picks.
 *
 * Input: byte 0 picks the op (index into the op table), byte 1 the input count of a variadic
 * op (1 to 4), bytes 2..5 the inputs (low 3 bits a dtype, the next 4 a shape from `shapes`;
 * input k >= 4 reuses byte 2 + k % 4), the rest is the attribute text (up to a NUL).
 * Checked: a failure is a status with a message naming the node; a success saves and loads
 * back: the node's attributes formatted as text (tfc_attrs_format, what the store writes)
 * parse to the same values, and format to the same text again. */
#include <math.h>
#include "fuzz_common.h"
#include "../../graph/serialize.h"

#define NODE "fz_node"

static const tfc_shape shapes[16] = {
    {.rank = 0},
    {.rank = 1, .dims = {3}},
    {.rank = 2, .dims = {2, 3}},
    {.rank = 2, .dims = {-1, 3}}, /* a placeholder's unknown batch dimension */
    {.rank = 3, .dims = {2, 3, 4}},
    {.rank = 1, .dims = {0}},
    {.rank = 2, .dims = {1, 1}},
    {.rank = 3, .dims = {4, 1, 3}},
    /* sizes at the edge of int64, which a stored placeholder may have (for one-byte dtypes) */
    {.rank = 1, .dims = {INT64_MAX}},
    {.rank = 1, .dims = {(int64_t)1 << 62}},
    {.rank = 2, .dims = {3, (int64_t)1 << 61}},
    {.rank = 2, .dims = {(int64_t)1 << 31, (int64_t)1 << 31}},
    {.rank = 2, .dims = {-1, (int64_t)1 << 40}},
    {.rank = 3, .dims = {0, INT64_MAX, 2}},
    {.rank = 4, .dims = {1, 2, 1, 2}},
    {.rank = 2, .dims = {5, 1}},
};

/* Input k of the node: a variable for a state input (whose shape must be known), else a
 * placeholder; NULL with the error on g when it cannot be built. */
static tfc_tensor *make_input(tfc_graph *g, const struct tfc_op *op, int k, uint8_t desc)
{
    char name[16];
    snprintf(name, sizeof name, "in%d", k);
    enum tfc_dtype dtype = (enum tfc_dtype)((desc & 7) % TFC_NUM_DTYPES);
    tfc_shape s = shapes[(desc >> 3) & 15];
    if (k >= op->n_state) return tfc_placeholder(g, name, dtype, s);
    for (int i = 0; i < s.rank; i++)
        if (s.dims[i] < 0) s.dims[i] = 2;
    return tfc_variable(g, name, dtype, s, tfc_init_zeros());
}

static int same_attr(const struct tfc_attr_def *def, const struct tfc_kattr *a,
                     const struct tfc_kattr *b)
{
    switch (def->type) {
    case TFC_ATTR_INT:
    case TFC_ATTR_DTYPE: return a->i == b->i;
    case TFC_ATTR_FLOAT:
        return (isnan(a->f) && isnan(b->f)) || !memcmp(&a->f, &b->f, sizeof a->f);
    case TFC_ATTR_INTS:
        return a->n == b->n && !memcmp(a->v, b->v, sizeof a->v[0] * (size_t)a->n);
    }
    return 0;
}

/* The node's attributes as the store writes them parse back to the same values, and format
 * to the same text. */
static void check_roundtrip(const struct tfc_node *n)
{
    char text[1024], again[1024], msg[TFC_MSG_LEN];
    struct tfc_kattr parsed[TFC_MAX_ATTRS];
    tfc_attrs_format(n->op, n->attrs, text, sizeof text);
    if (tfc_attrs_parse(n->op, text, parsed, msg))
        fuzz_die("op %s: the saved attributes \"%s\" do not load: %s", n->op->name, text, msg);
    for (int i = 0; i < n->op->n_attrs; i++)
        if (!same_attr(&n->op->attrs[i], &n->attrs[i], &parsed[i]))
            fuzz_die("op %s: attribute '%s' changes when saved as \"%s\" and loaded",
                     n->op->name, n->op->attrs[i].name, text);
    tfc_attrs_format(n->op, parsed, again, sizeof again);
    if (strcmp(text, again))
        fuzz_die("op %s: attributes saved as \"%s\" save again as \"%s\"", n->op->name, text,
                 again);
}

/* Builds the node of the record (its status on g); -1 when an input could not be built. */
static int import(tfc_graph *g, const struct tfc_op *op, const uint8_t *data, size_t size)
{
    int n_in = op->flags & TFC_OP_VARIADIC ? 1 + data[1] % 4 : op->n_inputs;
    if (op->flags & TFC_OP_SOURCE) n_in = 0;
    char names[TFC_MAX_OPERANDS][16];
    const char *inputs[TFC_MAX_OPERANDS];
    for (int k = 0; k < n_in && k < TFC_MAX_OPERANDS; k++) {
        if (!make_input(g, op, k, data[2 + k % 4])) return -1;
        snprintf(names[k], sizeof names[k], "in%d", k);
        inputs[k] = names[k];
    }
    struct tfc_node_record rec = {.name = NODE, .op = op->name, .n_inputs = n_in,
                                  .inputs = inputs, .init = tfc_init_zeros()};
    size_t len = strnlen((const char *)data + 6, size - 6);
    if (len >= sizeof rec.attrs) len = sizeof rec.attrs - 1; /* as the store's loader cuts it */
    memcpy(rec.attrs, data + 6, len);
    rec.attrs[len] = 0;
    tfc_value *value = NULL;
    if (op == &tfc_op_constant) { /* the data the store's loader gives a constant (small) */
        tfc_shape s = shapes[(data[2] >> 3) & 7];
        for (int i = 0; i < s.rank; i++)
            if (s.dims[i] < 0) s.dims[i] = 2;
        if (tfc_value_create((enum tfc_dtype)((data[2] & 7) % TFC_NUM_DTYPES), s, &value))
            fuzz_die("a constant's value: %s", tfc_errmsg());
        rec.value = value;
    }
    tfc_graph_import_node(g, &rec);
    tfc_value_destroy(value);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 6) return 0;
    const struct tfc_op *op = tfc_op_table[data[0] % tfc_op_table_size];
    tfc_graph *g;
    if (tfc_graph_create(&g)) fuzz_die("tfc_graph_create: %s", tfc_errmsg());
    if (import(g, op, data, size)) { /* an input the op cannot take (a variable's dtype) */
        tfc_graph_destroy(g);
        return 0;
    }
    tfc_status st = tfc_graph_status(g);
    tfc_tensor *t = tfc_graph_find(g, NODE);
    if (st) {
        fuzz_check_failure("tfc_graph_import_node", st, tfc_graph_errmsg(g), "'" NODE "'");
    } else {
        if (!t) fuzz_die("op %s: import succeeded without a node", op->name);
        check_roundtrip(t->node);
    }
    tfc_graph_destroy(g);
    return 0;
}
