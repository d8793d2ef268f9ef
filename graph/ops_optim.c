/* ops_optim.c: descriptors of the fused optimizer updates (one task per variable updates the
 * variable and its slots in place) and of the learning-rate schedule op. */
#include "grad.h"

/* Every apply op has the same attribute table; codelets/optimizer.c reads it by position. */
static const struct tfc_attr_def apply_attrs[] = {
    {"weight_decay", TFC_ATTR_FLOAT, 0}, {"decoupled", TFC_ATTR_INT, 0},
    {"momentum", TFC_ATTR_FLOAT, 0},     {"nesterov", TFC_ATTR_INT, 0},
    {"beta1", TFC_ATTR_FLOAT, 0.9},      {"beta2", TFC_ATTR_FLOAT, 0.999},
    {"eps", TFC_ATTR_FLOAT, 1e-8},       {"centered", TFC_ATTR_INT, 0},
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

/* lr_schedule: attrs kind (0 step, 1 exponential, 2 cosine), base, gamma, period, floor */
static tfc_status infer_schedule(const struct tfc_infer *in)
{
    if (tfc_shape_numel(&in->in[0].shape) != 1)
        return tfc_fail(in->msg, TFC_ERR_SHAPE, "the step must be a scalar");
    if (in->attrs[3].f <= 0) return tfc_fail(in->msg, TFC_ERR_INVALID_ARGUMENT, "period must be > 0");
    in->out[0].dtype = TFC_FLOAT32;
    in->out[0].shape.rank = 0;
    return TFC_OK;
}

static const struct tfc_attr_def schedule_attrs[] = {
    {"kind", TFC_ATTR_INT, 0}, {"base", TFC_ATTR_FLOAT, 0.001}, {"gamma", TFC_ATTR_FLOAT, 0.1},
    {"period", TFC_ATTR_FLOAT, 1}, {"floor", TFC_ATTR_FLOAT, 0}};

#define NG TFC_OP_NO_GRADIENT
const struct tfc_op tfc_op_apply_sgd = {"apply_sgd", 3, TFC_K_APPLY_SGD, NG, TFC_VAR_UPDATE, apply_attrs, 8, NULL, infer_sgd, &tfc_cl_optimizer, NULL, 1};
const struct tfc_op tfc_op_apply_momentum = {"apply_momentum", 4, TFC_K_APPLY_MOMENTUM, NG, TFC_VAR_UPDATE, apply_attrs, 8, NULL, infer_two_slot, &tfc_cl_optimizer, NULL, 2};
const struct tfc_op tfc_op_apply_adagrad = {"apply_adagrad", 4, TFC_K_APPLY_ADAGRAD, NG, TFC_VAR_UPDATE, apply_attrs, 8, NULL, infer_two_slot, &tfc_cl_optimizer, NULL, 2};
const struct tfc_op tfc_op_apply_rmsprop = {"apply_rmsprop", 6, TFC_K_APPLY_RMSPROP, NG, TFC_VAR_UPDATE, apply_attrs, 8, NULL, infer_rmsprop, &tfc_cl_optimizer, NULL, 4};
const struct tfc_op tfc_op_apply_adam = {"apply_adam", 6, TFC_K_APPLY_ADAM, NG, TFC_VAR_UPDATE, apply_attrs, 8, NULL, infer_adam, &tfc_cl_optimizer, NULL, 3};
const struct tfc_op tfc_op_lr_schedule = {"lr_schedule", 1, TFC_K_LR_SCHEDULE, NG, 0, schedule_attrs, 5, NULL, infer_schedule, &tfc_cl_optimizer};
#undef NG
