/* ops_state.c: the source ops (placeholder, constant, variable) and the stateful ops that
 * update a variable in place (assign, assign_add, assign_sub). Sources have no codelet: the
 * session gives them data handles (feeds, constant data, the variable's own state). */
#include <string.h>
#include "graph.h"

/* sources: attrs dtype, shape (slots SOURCE_DTYPE, SOURCE_SHAPE in codelets/op_attrs.h: the
 * store reads them too); the output is what the attributes say */
static tfc_status infer_source(const struct tfc_infer *in)
{
    const struct tfc_kattr *shape = &in->attrs[SOURCE_SHAPE];
    int64_t dtype = in->attrs[SOURCE_DTYPE].i;
    if (!tfc_dtype_valid((int)dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "invalid dtype %lld", (long long)dtype);
    in->out[0].dtype = (enum tfc_dtype)dtype;
    in->out[0].shape.rank = shape->n;
    for (int i = 0; i < shape->n; i++) in->out[0].shape.dims[i] = shape->v[i];
    return TFC_OK;
}

static tfc_status infer_assign(const struct tfc_infer *in)
{
    const struct tfc_desc *v = &in->in[0], *x = &in->in[1];
    char a[96], b[96];
    if (v->dtype != x->dtype)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "variable is %s, value is %s",
                        tfc_dtype_name(v->dtype), tfc_dtype_name(x->dtype));
    int same = v->shape.rank == x->shape.rank;
    for (int d = 0; same && d < v->shape.rank; d++)
        same = v->shape.dims[d] == x->shape.dims[d] || x->shape.dims[d] < 0;
    if (!same)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "variable has shape %s, value %s",
                        tfc_shape_str(&v->shape, a, sizeof a), tfc_shape_str(&x->shape, b, sizeof b));
    in->out[0] = *v;
    return TFC_OK;
}

static tfc_status infer_assign_arith(const struct tfc_infer *in)
{
    if (in->in[0].dtype == TFC_BOOL || in->in[0].dtype == TFC_UINT8)
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "does not take %s",
                        tfc_dtype_name(in->in[0].dtype));
    return infer_assign(in);
}

static const struct tfc_attr_def source_attrs[] = {
    [SOURCE_DTYPE] = {"dtype", TFC_ATTR_DTYPE, TFC_FLOAT32},
    [SOURCE_SHAPE] = {"shape", TFC_ATTR_INTS, 0},
};

const struct tfc_op tfc_op_placeholder = {
    .name = "placeholder", .flags = TFC_OP_SOURCE,
    .attrs = source_attrs, .n_attrs = TFC_ATTR_COUNT(source_attrs), .infer = infer_source,
};
const struct tfc_op tfc_op_constant = {
    .name = "constant", .flags = TFC_OP_SOURCE,
    .attrs = source_attrs, .n_attrs = TFC_ATTR_COUNT(source_attrs), .infer = infer_source,
};
const struct tfc_op tfc_op_variable = {
    .name = "variable", .flags = TFC_OP_SOURCE | TFC_OP_VARIABLE,
    .attrs = source_attrs, .n_attrs = TFC_ATTR_COUNT(source_attrs), .infer = infer_source,
};
/* input 0 is the variable (n_state 1): assign writes it whole, the others read it too */
const struct tfc_op tfc_op_assign = {
    .name = "assign", .n_inputs = 2, .kind = TFC_K_ASSIGN, .flags = TFC_OP_NO_GRADIENT,
    .var_access = TFC_VAR_WRITE, .infer = infer_assign, .codelet = &tfc_cl_assign, .n_state = 1,
};
const struct tfc_op tfc_op_assign_add = {
    .name = "assign_add", .n_inputs = 2, .kind = TFC_K_ASSIGN_ADD, .flags = TFC_OP_NO_GRADIENT,
    .var_access = TFC_VAR_UPDATE, .infer = infer_assign_arith, .codelet = &tfc_cl_assign,
    .n_state = 1,
};
const struct tfc_op tfc_op_assign_sub = {
    .name = "assign_sub", .n_inputs = 2, .kind = TFC_K_ASSIGN_SUB, .flags = TFC_OP_NO_GRADIENT,
    .var_access = TFC_VAR_UPDATE, .infer = infer_assign_arith, .codelet = &tfc_cl_assign,
    .n_state = 1,
};

static struct tfc_node *source(tfc_graph *g, const struct tfc_op *op, const char *name,
                               enum tfc_dtype dtype, const tfc_shape *shape, int allow_unknown)
{
    if (!g) return NULL;
    char buf[96];
    if (shape->rank < 0 || shape->rank > TFC_MAX_RANK)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "%s '%s': rank %d is outside [0, %d]", op->name,
                              name ? name : "?", shape->rank, TFC_MAX_RANK);
    for (int i = 0; i < shape->rank; i++) {
        int64_t d = shape->dims[i];
        if (d < -1 || (d == -1 && (!allow_unknown || i != 0)))
            return tfc_graph_fail(g, TFC_ERR_SHAPE,
                                  "%s '%s': shape %s (only a placeholder's leading dimension may "
                                  "be -1)",
                                  op->name, name ? name : "?", tfc_shape_str(shape, buf, sizeof buf));
    }
    struct tfc_kattr at[TFC_MAX_ATTRS];
    tfc_attrs_default(op, at);
    at[SOURCE_DTYPE].i = dtype;
    at[SOURCE_SHAPE].n = shape->rank;
    for (int i = 0; i < shape->rank; i++) at[SOURCE_SHAPE].v[i] = shape->dims[i];
    return tfc_node_build(g, op, name, 0, NULL, at);
}

tfc_tensor *tfc_placeholder(tfc_graph *g, const char *name, enum tfc_dtype dtype, tfc_shape shape)
{
    struct tfc_node *n = source(g, &tfc_op_placeholder, name, dtype, &shape, 1);
    return n ? &n->outputs[0] : NULL;
}

tfc_tensor *tfc_constant_take(tfc_graph *g, const char *name, tfc_value *value)
{
    if (!g) return NULL;
    if (!value)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "constant '%s': value is NULL",
                              name ? name : "?");
    tfc_shape shape = tfc_value_shape(value);
    struct tfc_node *n = source(g, &tfc_op_constant, name, tfc_value_dtype(value), &shape, 0);
    if (!n) return NULL;
    n->value = value;
    return &n->outputs[0];
}

tfc_tensor *tfc_constant(tfc_graph *g, const char *name, const tfc_value *value)
{
    if (!g) return NULL;
    if (!value)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "constant '%s': value is NULL",
                              name ? name : "?");
    tfc_value *copy;
    if (tfc_value_from_data(tfc_value_dtype(value), tfc_value_shape(value),
                            tfc_value_cdata(value), &copy))
        return tfc_graph_fail(g, TFC_ERR_OUT_OF_MEMORY, "constant '%s': %s", name ? name : "?",
                              tfc_errmsg());
    tfc_tensor *t = tfc_constant_take(g, name, copy);
    if (!t) tfc_value_destroy(copy);
    return t;
}

tfc_tensor *tfc_scalar(tfc_graph *g, enum tfc_dtype dtype, double x)
{
    tfc_value *v;
    if (!g) return NULL;
    if (tfc_value_scalar(dtype, x, &v))
        return tfc_graph_fail(g, TFC_ERR_DTYPE, "scalar: %s", tfc_errmsg());
    tfc_tensor *t = tfc_constant(g, NULL, v);
    tfc_value_destroy(v);
    return t;
}

tfc_tensor *tfc_variable(tfc_graph *g, const char *name, enum tfc_dtype dtype, tfc_shape shape,
                         tfc_init init)
{
    if (g && !g->status && (init.kind < TFC_INIT_ZEROS || init.kind > TFC_INIT_HE_UNIFORM))
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "variable '%s': unknown initializer %d",
                              name ? name : "?", (int)init.kind);
    struct tfc_node *n = source(g, &tfc_op_variable, name, dtype, &shape, 0);
    if (!n) return NULL;
    n->init = init;
    return &n->outputs[0];
}

static tfc_tensor *assign_op(tfc_graph *g, const struct tfc_op *op, tfc_tensor *var, tfc_tensor *v)
{
    tfc_tensor *in[2] = {var, v};
    return tfc_build(g, op, 2, in, NULL);
}

tfc_tensor *tfc_assign(tfc_graph *g, tfc_tensor *var, tfc_tensor *v) { return assign_op(g, &tfc_op_assign, var, v); }
tfc_tensor *tfc_assign_add(tfc_graph *g, tfc_tensor *var, tfc_tensor *v) { return assign_op(g, &tfc_op_assign_add, var, v); }
tfc_tensor *tfc_assign_sub(tfc_graph *g, tfc_tensor *var, tfc_tensor *v) { return assign_op(g, &tfc_op_assign_sub, var, v); }
