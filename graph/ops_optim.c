/* ops_optim.c: descriptors of the fused optimizer updates (one task per variable updates the
 * variable and its slots in place) and of the learning-rate schedule op. Their attribute slots
 * are named in codelets/op_attrs.h: the optimizer kernels read them. */
#include "grad.h"

/* Every apply op has the same attribute table. */
static const struct tfc_attr_def apply_attrs[] = {
    [APPLY_WEIGHT_DECAY] = {"weight_decay", TFC_ATTR_FLOAT, 0},
    [APPLY_DECOUPLED] = {"decoupled", TFC_ATTR_INT, 0},
    [APPLY_MOMENTUM] = {"momentum", TFC_ATTR_FLOAT, 0},
    [APPLY_NESTEROV] = {"nesterov", TFC_ATTR_INT, 0},
    [APPLY_BETA1] = {"beta1", TFC_ATTR_FLOAT, 0.9}, /* rmsprop: alpha */
    [APPLY_BETA2] = {"beta2", TFC_ATTR_FLOAT, 0.999},
    [APPLY_EPS] = {"eps", TFC_ATTR_FLOAT, 1e-8},
    [APPLY_CENTERED] = {"centered", TFC_ATTR_INT, 0},
};

/* inputs: n_state variables (the variable, then its slots), grad, lr[, step] */
static tfc_status infer_apply(const struct tfc_infer *in, int n_state, int has_step)
{
    const struct tfc_desc *v = &in->in[0];
    char a[96], b[96];
    if (!tfc_dtype_is_float(v->dtype))
        return tfc_fail(in->msg, TFC_ERR_DTYPE, "variable must be float, not %s", tfc_dtype_name(v->dtype));
    for (int i = 1; i <= n_state; i++) { /* slots and the gradient match the variable */
        const struct tfc_desc *s = &in->in[i];
        if (s->dtype != v->dtype || !tfc_shape_equal(&s->shape, &v->shape))
            return tfc_fail(in->msg, TFC_ERR_SHAPE, "input %d is %s %s, the variable %s %s", i,
                            tfc_dtype_name(s->dtype), tfc_shape_str(&s->shape, a, sizeof a),
                            tfc_dtype_name(v->dtype), tfc_shape_str(&v->shape, b, sizeof b));
    }
    const struct tfc_desc *lr = &in->in[n_state + 1];
    if (!tfc_dtype_is_float(lr->dtype) || tfc_shape_numel(&lr->shape) != 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "the learning rate must be one float");
    if (has_step && (tfc_dtype_is_float(in->in[n_state + 2].dtype) ||
                     tfc_shape_numel(&in->in[n_state + 2].shape) != 1))
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "the step count must be one integer");
    in->out[0] = *v;
    return TFC_OK;
}

static tfc_status infer_sgd(const struct tfc_infer *in) { return infer_apply(in, 1, 0); }
static tfc_status infer_two_slot(const struct tfc_infer *in) { return infer_apply(in, 2, 0); }
static tfc_status infer_rmsprop(const struct tfc_infer *in) { return infer_apply(in, 4, 0); }
static tfc_status infer_adam(const struct tfc_infer *in) { return infer_apply(in, 3, 1); }

/* lr_schedule: attrs kind (LR_STEP_DECAY, LR_EXPONENTIAL, LR_COSINE), base, gamma, period,
 * floor */
static tfc_status infer_schedule(const struct tfc_infer *in)
{
    if (tfc_shape_numel(&in->in[0].shape) != 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "the step must be a scalar");
    if (in->attrs[LR_SCHEDULE_PERIOD].f <= 0)
        return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "period must be > 0");
    in->out[0].dtype = TFC_FLOAT32;
    in->out[0].shape.rank = 0;
    return TFC_OK;
}

static const struct tfc_attr_def schedule_attrs[] = {
    [LR_SCHEDULE_KIND] = {"kind", TFC_ATTR_INT, LR_STEP_DECAY},
    [LR_SCHEDULE_BASE] = {"base", TFC_ATTR_FLOAT, 0.001},
    [LR_SCHEDULE_GAMMA] = {"gamma", TFC_ATTR_FLOAT, 0.1},
    [LR_SCHEDULE_PERIOD] = {"period", TFC_ATTR_FLOAT, 1},
    [LR_SCHEDULE_FLOOR] = {"floor", TFC_ATTR_FLOAT, 0},
};

/* n_state: the variable, then its slots, all updated in place (momentum and adagrad: one slot;
 * adam: m and v; rmsprop: square_avg, momentum, grad_avg) */
const struct tfc_op tfc_op_apply_sgd = {
    .name = "apply_sgd", .n_inputs = 3, .kind = TFC_K_APPLY_SGD, .flags = TFC_OP_NO_GRADIENT,
    .var_access = TFC_VAR_UPDATE, .attrs = apply_attrs, .n_attrs = TFC_ATTR_COUNT(apply_attrs),
    .infer = infer_sgd, .codelet = &tfc_cl_optimizer, .n_state = 1,
};
const struct tfc_op tfc_op_apply_momentum = {
    .name = "apply_momentum", .n_inputs = 4, .kind = TFC_K_APPLY_MOMENTUM,
    .flags = TFC_OP_NO_GRADIENT, .var_access = TFC_VAR_UPDATE,
    .attrs = apply_attrs, .n_attrs = TFC_ATTR_COUNT(apply_attrs),
    .infer = infer_two_slot, .codelet = &tfc_cl_optimizer, .n_state = 2,
};
const struct tfc_op tfc_op_apply_adagrad = {
    .name = "apply_adagrad", .n_inputs = 4, .kind = TFC_K_APPLY_ADAGRAD,
    .flags = TFC_OP_NO_GRADIENT, .var_access = TFC_VAR_UPDATE,
    .attrs = apply_attrs, .n_attrs = TFC_ATTR_COUNT(apply_attrs),
    .infer = infer_two_slot, .codelet = &tfc_cl_optimizer, .n_state = 2,
};
const struct tfc_op tfc_op_apply_rmsprop = {
    .name = "apply_rmsprop", .n_inputs = 6, .kind = TFC_K_APPLY_RMSPROP,
    .flags = TFC_OP_NO_GRADIENT, .var_access = TFC_VAR_UPDATE,
    .attrs = apply_attrs, .n_attrs = TFC_ATTR_COUNT(apply_attrs),
    .infer = infer_rmsprop, .codelet = &tfc_cl_optimizer, .n_state = 4,
};
const struct tfc_op tfc_op_apply_adam = {
    .name = "apply_adam", .n_inputs = 6, .kind = TFC_K_APPLY_ADAM,
    .flags = TFC_OP_NO_GRADIENT, .var_access = TFC_VAR_UPDATE,
    .attrs = apply_attrs, .n_attrs = TFC_ATTR_COUNT(apply_attrs),
    .infer = infer_adam, .codelet = &tfc_cl_optimizer, .n_state = 3,
};
const struct tfc_op tfc_op_lr_schedule = {
    .name = "lr_schedule", .n_inputs = 1, .kind = TFC_K_LR_SCHEDULE, .flags = TFC_OP_NO_GRADIENT,
    .attrs = schedule_attrs, .n_attrs = TFC_ATTR_COUNT(schedule_attrs),
    .infer = infer_schedule, .codelet = &tfc_cl_optimizer,
};
