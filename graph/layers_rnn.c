/* layers_rnn.c: the recurrent layers tfc_lstm_layer and tfc_gru_layer over batch-major
 * sequences [batch, steps, features]. The input projection of all steps is one matmul (the
 * unrolled graph: one per chunk of steps); each step then adds h @ recurrent_kernel and
 * applies the cell. The time loop is either a tfc_while_loop or unrolled into a static graph
 * of `steps` steps: both build each step with the same cell function (rnn_step), so they
 * compute the same forward bits. */
#include <stdio.h>
#include <string.h>
#include "layers.h"

struct rnn {
    tfc_graph *g;
    const char *label;  /* the layer's name, for messages */
    int gru;            /* 0: LSTM (gates i, f, g, o); 1: GRU (gates r, z, n, PyTorch's form) */
    int gates;          /* 4 or 3 */
    int64_t steps, units;
    enum tfc_dtype dtype;
    tfc_tensor *xw;     /* loop: [steps, batch, gates * units]: x @ kernel + bias, time-major */
    tfc_tensor *xflat;  /* loop: the same as [steps * batch, gates * units], as the matmul gives it */
    tfc_tensor *parts[TFC_MAX_OPERANDS]; /* unrolled: step t's x @ kernel + bias [batch, gates * units] */
    int split;          /* parts holds the steps (unrolled, steps <= TFC_MAX_OPERANDS) */
    int zero_start;     /* LSTM whose initial h and c are zeros (no initial state given) */
    tfc_tensor *u;      /* recurrent_kernel [units, gates * units] */
    tfc_tensor *rb;     /* GRU's recurrent_bias [gates * units]; NULL for LSTM */
    tfc_tensor *scale;  /* LSTM: [4 units], 2 on gate g's slice, else 1 (see rnn_step) */
    tfc_tensor *lengths; /* int32 [batch] or NULL: every row runs all steps */
    int sequences;      /* 1: every step's output is kept */
};

/* The one place the time loop's default is chosen. The loop is the better default (one body
 * planned once, any number of steps), but training needs gradients through tfc_while_loop
 * (issue 13, item 3); until they exist the default is the unrolled graph. */
static tfc_rnn_mode default_mode(void) { return TFC_RNN_UNROLLED; }

/* The step's new state from its input projection xt [batch, gates * units]: h (and *cell
 * for LSTM), then, with lengths, rows at or past their length keep the old state. *y is the
 * step's output: the new h, zeros for rows past their length. t is an int32 scalar. first:
 * the first step, where an LSTM's zero state drops h @ recurrent_kernel and f * c (the same
 * values: xt + 0 and 0 + i g), a matmul forward and one backward fewer. */
static void rnn_step(struct rnn *r, int first, tfc_tensor *t, tfc_tensor *xt, tfc_tensor *h,
                     tfc_tensor **cell, tfc_tensor **h_out, tfc_tensor **y)
{
    tfc_graph *g = r->g;
    int zero = first && r->zero_start;
    tfc_tensor *hu = zero ? NULL : tfc_matmul(g, h, r->u, 0, 0), *hn, *cn = NULL, *p[4];
    if (!r->gru) {
        /* One sigmoid over the four gates with g's pre-activation doubled, as tanh(v) =
         * 2 sigmoid(2v) - 1: the step's gate maths is one fused task over [batch, 4 units]
         * (with the add), where a split before the activations made four small tasks. */
        tfc_split(g, tfc_sigmoid(g, tfc_mul(g, zero ? xt : tfc_add(g, xt, hu), r->scale)), 4, 1, p);
        tfc_tensor *gg = tfc_sub(g, tfc_mul(g, p[2], tfc_scalar(g, r->dtype, 2)),
                                 tfc_scalar(g, r->dtype, 1));
        cn = zero ? tfc_mul(g, p[0], gg) : tfc_add(g, tfc_mul(g, p[1], *cell), tfc_mul(g, p[0], gg));
        hn = tfc_mul(g, p[3], tfc_tanh(g, cn));
    } else {
        tfc_tensor *xp[3], *hp[3];
        tfc_split(g, xt, 3, 1, xp);
        tfc_split(g, tfc_add(g, hu, r->rb), 3, 1, hp);
        tfc_tensor *rg = tfc_sigmoid(g, tfc_add(g, xp[0], hp[0]));
        tfc_tensor *z = tfc_sigmoid(g, tfc_add(g, xp[1], hp[1]));
        tfc_tensor *n = tfc_tanh(g, tfc_add(g, xp[2], tfc_mul(g, rg, hp[2])));
        hn = tfc_add(g, n, tfc_mul(g, z, tfc_sub(g, h, n))); /* (1 - z) n + z h */
    }
    if (!r->lengths) {
        *h_out = hn, *y = hn;
        if (cell) *cell = cn;
        return;
    }
    tfc_tensor *running = tfc_unsqueeze(g, tfc_less(g, t, r->lengths), 1); /* [batch, 1] */
    *h_out = tfc_select(g, running, hn, h);
    if (cell) *cell = tfc_select(g, running, cn, *cell);
    *y = r->sequences ? tfc_select(g, running, hn, tfc_zeros_like(g, hn)) : *h_out;
}

/* seq with row t (of its time-major [steps, batch, units]) set to y, where it held zeros:
 * seq + onehot(t) y, so the other rows add zeros and keep their bits. */
static tfc_tensor *put_step(struct rnn *r, tfc_tensor *seq, tfc_tensor *t, tfc_tensor *y)
{
    tfc_graph *g = r->g;
    tfc_tensor *at = tfc_reshape(g, tfc_one_hot(g, t, r->steps, r->dtype, 1, 0),
                                 tfc_shape_of(3, (int64_t[]){r->steps, 1, 1}));
    return tfc_add(g, seq, tfc_mul(g, at, tfc_unsqueeze(g, y, 0)));
}

/* Loop variables of the while form: t, h, [c], [seq]. */
static tfc_status loop_cond(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct rnn *r = arg;
    out[0] = tfc_less(g, v[0], tfc_scalar(g, TFC_INT32, (double)r->steps));
    return tfc_graph_status(g);
}

static tfc_status loop_body(tfc_graph *g, void *arg, tfc_tensor *const *v, tfc_tensor **out)
{
    struct rnn *r = arg;
    int k = 1;
    tfc_tensor *t = v[0], *h = v[k++], *cell = r->gru ? NULL : v[k++], *y;
    tfc_tensor *xt = tfc_gather(g, r->xw, t); /* [batch, gates * units] */
    rnn_step(r, 0, t, xt, h, r->gru ? NULL : &cell, &h, &y);
    k = 0;
    out[k++] = tfc_add(g, t, tfc_scalar(g, TFC_INT32, 1));
    out[k++] = h;
    if (!r->gru) out[k++] = cell;
    if (r->sequences) out[k] = put_step(r, v[k], t, y);
    return tfc_graph_status(g);
}

/* The time loop as a tfc_while_loop over steps 1.. after step 0 built before it: the loop's
 * initial values are then computed data, never zeros the plan folds into constants (a folded
 * constant as a loop's initial value reads as garbage; seen with TFC_CONST_FOLD=1). */
static void run_loop(struct rnn *r, tfc_tensor **h, tfc_tensor *cell, tfc_tensor **seq)
{
    tfc_graph *g = r->g;
    tfc_tensor *init[4], *out[4], *t0 = tfc_scalar(g, TFC_INT32, 0), *y;
    rnn_step(r, 1, t0, tfc_gather(g, r->xw, t0), *h, r->gru ? NULL : &cell, h, &y);
    int n = 0;
    init[n++] = tfc_scalar(g, TFC_INT32, 1);
    init[n++] = *h;
    if (!r->gru) init[n++] = cell;
    if (r->sequences) /* onehot(0) y: row 0 is y, the others zeros */
        init[n++] = tfc_mul(g, tfc_reshape(g, tfc_one_hot(g, t0, r->steps, r->dtype, 1, 0),
                                           tfc_shape_of(3, (int64_t[]){r->steps, 1, 1})),
                            tfc_unsqueeze(g, y, 0));
    if (g->status || tfc_while_loop(g, "loop", loop_cond, loop_body, r, n, init, NULL, out)) return;
    *h = out[1];
    if (r->sequences) *seq = out[n - 1];
}

/* The time loop unrolled: the step inputs are splits of the projection's rows (project_chunks;
 * a split's gradient is one concat, where a slice per step would add steps full-size gradients; splitting the 2-D
 * matmul output gives [batch, gates * units] parts with no squeeze, which would copy each
 * step's input forward and its gradient backward). */
static void run_unrolled(struct rnn *r, tfc_tensor **h, tfc_tensor *cell, tfc_tensor **seq)
{
    tfc_graph *g = r->g;
    tfc_tensor *ys[TFC_MAX_OPERANDS];
    int split = r->split;
    for (int64_t t = 0; t < r->steps && !g->status; t++) {
        tfc_tensor *xt = split ? r->parts[t]
                               : tfc_squeeze(g, tfc_slice(g, r->xw, (int64_t[]){t, 0, 0},
                                                          (int64_t[]){1, -1, -1}),
                                             1, (int64_t[]){0});
        tfc_tensor *ti = tfc_scalar(g, TFC_INT32, (double)t), *y;
        rnn_step(r, t == 0, ti, xt, *h, r->gru ? NULL : &cell, h, &y);
        if (r->sequences && split) ys[t] = tfc_unsqueeze(g, y, 0);
        else if (r->sequences) *seq = put_step(r, *seq, ti, y);
    }
    /* one concat where it fits (the same values as the loop's put_step: 0 + y is y) */
    if (r->sequences && split && !g->status) *seq = tfc_concat(g, (int)r->steps, ys, 0);
}

/* Checks of the input, the options and the initial states; a message names the layer. */
static tfc_status check_rnn(tfc_graph *g, struct rnn *r, tfc_tensor *x, const tfc_rnn_opts *o)
{
    char sh[96];
    const char *kind = r->gru ? "gru" : "lstm";
    if (!x) return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': input is NULL", kind, r->label), g->status;
    const tfc_shape *s = &x->desc.shape;
    if (r->units < 1)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': units is %lld (at least 1)",
                              kind, r->label, (long long)r->units), g->status;
    if (s->rank != 3 || s->dims[1] < 1 || s->dims[2] < 1)
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "%s '%s': input '%s' has shape %s (needs [batch, "
                              "steps, features] with steps and features known)", kind, r->label,
                              x->name, tfc_shape_str(s, sh, sizeof sh)), g->status;
    if (x->desc.dtype != TFC_FLOAT32 && x->desc.dtype != TFC_FLOAT64)
        return tfc_graph_fail(g, TFC_ERR_DTYPE, "%s '%s': input '%s' is %s (float32 or float64)",
                              kind, r->label, x->name, tfc_dtype_name(x->desc.dtype)), g->status;
    if (o->mode < TFC_RNN_MODE_DEFAULT || o->mode > TFC_RNN_WHILE_LOOP)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "%s '%s': unknown mode %d (TFC_RNN_"
                              "MODE_DEFAULT, _UNROLLED or _WHILE_LOOP)", kind, r->label,
                              (int)o->mode), g->status;
    if (r->gru && o->initial_c)
        return tfc_graph_fail(g, TFC_ERR_INVALID_ARGUMENT, "gru '%s': initial_c is given (a GRU "
                              "has no cell state)", r->label), g->status;
    const tfc_tensor *st[2] = {o->initial_h, o->initial_c};
    for (int k = 0; k < 2; k++) {
        if (!st[k]) continue;
        const tfc_shape *ss = &st[k]->desc.shape;
        if (ss->rank != 2 || ss->dims[1] != r->units || st[k]->desc.dtype != x->desc.dtype ||
            (ss->dims[0] >= 0 && s->dims[0] >= 0 && ss->dims[0] != s->dims[0]))
            return tfc_graph_fail(g, TFC_ERR_SHAPE, "%s '%s': %s '%s' is %s %s (needs %s [batch, "
                                  "%lld])", kind, r->label, k ? "initial_c" : "initial_h",
                                  st[k]->name, tfc_dtype_name(st[k]->desc.dtype),
                                  tfc_shape_str(ss, sh, sizeof sh), tfc_dtype_name(x->desc.dtype),
                                  (long long)r->units), g->status;
    }
    const tfc_tensor *len = o->lengths;
    if (len && (len->desc.dtype != TFC_INT32 || len->desc.shape.rank != 1))
        return tfc_graph_fail(g, TFC_ERR_SHAPE, "%s '%s': lengths '%s' is %s %s (needs int32 "
                              "[batch])", kind, r->label, len->name, tfc_dtype_name(len->desc.dtype),
                              tfc_shape_str(&len->desc.shape, sh, sizeof sh)), g->status;
    return TFC_OK;
}

/* A constant [4 units] of the LSTM: on gate `gate`'s slice (gates i, f, g, o), else off. */
static tfc_tensor *gate_constant(struct rnn *r, const char *name, int gate, double on, double off)
{
    int64_t gh = 4 * r->units;
    tfc_value *v;
    if (tfc_value_create(r->dtype, tfc_shape_of(1, &gh), &v)) {
        tfc_graph_fail(r->g, TFC_ERR_OUT_OF_MEMORY, "lstm '%s': no memory for the %s", r->label, name);
        return NULL;
    }
    void *d = tfc_value_data(v);
    for (int64_t i = 0; i < gh; i++) {
        double x = i >= gate * r->units && i < (gate + 1) * r->units ? on : off;
        if (r->dtype == TFC_FLOAT32) ((float *)d)[i] = (float)x;
        else ((double *)d)[i] = x;
    }
    tfc_tensor *t = tfc_constant(r->g, name, v);
    tfc_value_destroy(v);
    return t;
}

/* The number of chunks of steps that the unrolled graph projects apart: the largest divisor
 * of steps up to INPUT_CHUNKS. */
#define INPUT_CHUNKS 4
static int input_chunks(int64_t steps)
{
    int n = INPUT_CHUNKS;
    while (n > 1 && steps % n) n--;
    return n;
}

/* Unrolled: the input projection of the time-major rows flat [steps * batch, features] in
 * chunks of consecutive steps, each one matmul and bias_add split into its steps' parts. The
 * first step waits only for the first chunk's projection, the later chunks run beside the
 * recurrence on another worker, and backward each chunk's kernel gradient (one GEMM over its
 * steps) starts when its steps are done, where one projection made the first step wait for
 * all of it and its gradient wait for the last step. */
static void project_chunks(struct rnn *r, tfc_tensor *flat, tfc_tensor *w, tfc_tensor *b)
{
    tfc_graph *g = r->g;
    int n = input_chunks(r->steps), per = (int)(r->steps / n);
    tfc_tensor *rows[INPUT_CHUNKS] = {flat};
    if (n > 1) tfc_split(g, flat, n, 0, rows);
    for (int c = 0; c < n && !g->status; c++) {
        tfc_tensor *proj = tfc_bias_add(g, tfc_matmul(g, rows[c], w, 0, 0), b);
        if (per > 1) tfc_split(g, proj, per, 0, &r->parts[c * per]);
        else r->parts[c] = proj;
    }
}

/* The layer's variables and the input projection (xw, or the unrolled graph's parts); LSTM's forget-gate slice of the bias gets a constant 1 on top
 * (Keras's unit_forget_bias, as an offset: the variable itself starts at zeros). */
static void make_inputs(struct rnn *r, tfc_tensor *x, int64_t features)
{
    tfc_graph *g = r->g;
    int64_t gh = r->gates * r->units;
    tfc_tensor *w = tfc_layer_variable(g, "kernel", r->dtype, tfc_shape_of(2, (int64_t[]){features, gh}),
                                       tfc_init_glorot_uniform(0));
    r->u = tfc_layer_variable(g, "recurrent_kernel", r->dtype,
                              tfc_shape_of(2, (int64_t[]){r->units, gh}), tfc_init_glorot_uniform(0));
    tfc_tensor *b = tfc_layer_variable(g, "bias", r->dtype, tfc_shape_of(1, &gh), tfc_init_zeros());
    if (r->gru)
        r->rb = tfc_layer_variable(g, "recurrent_bias", r->dtype, tfc_shape_of(1, &gh),
                                   tfc_init_zeros());
    else {
        b = tfc_add(g, b, gate_constant(r, "forget_bias", 1, 1, 0));
        r->scale = gate_constant(r, "gate_scale", 2, 2, 1);
    }
    tfc_tensor *xt = tfc_transpose(g, x, (int64_t[]){1, 0, 2}); /* time-major */
    tfc_tensor *flat = tfc_reshape(g, xt, tfc_shape_of(2, (int64_t[]){-1, features}));
    if (r->split) {
        project_chunks(r, flat, w, b);
        return;
    }
    r->xflat = tfc_bias_add(g, tfc_matmul(g, flat, w, 0, 0), b);
    r->xw = tfc_reshape(g, r->xflat, tfc_shape_of(3, (int64_t[]){r->steps, -1, gh}));
}

/* Zeros [d0, batch, units] with the batch of xw (which may be known only at run time); from
 * step 0's part when split, so the unrolled graph never needs xw's reshape. */
static tfc_tensor *zeros_state(struct rnn *r, int64_t d0)
{
    if (d0 == 1 && r->split)
        return tfc_zeros_like(r->g, tfc_slice(r->g, r->parts[0], (int64_t[]){0, 0},
                                              (int64_t[]){-1, r->units}));
    tfc_tensor *s = tfc_slice(r->g, r->xw, (int64_t[]){0, 0, 0}, (int64_t[]){d0, -1, r->units});
    return tfc_zeros_like(r->g, d0 == 1 ? tfc_squeeze(r->g, s, 1, (int64_t[]){0}) : s);
}

static tfc_tensor *rnn_layer(tfc_graph *g, int gru, tfc_tensor *x, int64_t units,
                             const tfc_rnn_opts *opts, const char *name)
{
    if (!g || g->status) return NULL;
    const tfc_rnn_opts none = {0}, *o = opts ? opts : &none;
    struct rnn r = {.g = g, .label = name ? name : gru ? "gru" : "lstm", .gru = gru,
                    .gates = gru ? 3 : 4, .units = units, .lengths = o->lengths,
                    .sequences = o->return_sequences != 0};
    if (check_rnn(g, &r, x, o)) return NULL;
    r.steps = x->desc.shape.dims[1];
    r.dtype = x->desc.dtype;
    tfc_rnn_mode mode = o->mode == TFC_RNN_MODE_DEFAULT ? default_mode() : o->mode;
    r.split = mode != TFC_RNN_WHILE_LOOP && r.steps <= TFC_MAX_OPERANDS;
    r.zero_start = !gru && !o->initial_h && !o->initial_c;
    if (tfc_layer_push_scope(g, r.label, "kernel")) return NULL;
    make_inputs(&r, x, x->desc.shape.dims[2]);
    tfc_tensor *h = o->initial_h ? o->initial_h : zeros_state(&r, 1);
    tfc_tensor *cell = gru ? NULL : o->initial_c ? o->initial_c : zeros_state(&r, 1);
    tfc_tensor *seq = r.sequences && mode != TFC_RNN_WHILE_LOOP && r.steps > TFC_MAX_OPERANDS
                          ? zeros_state(&r, r.steps) : NULL;
    if (!g->status) {
        if (mode == TFC_RNN_WHILE_LOOP) run_loop(&r, &h, cell, &seq);
        else run_unrolled(&r, &h, cell, &seq);
    }
    tfc_tensor *y = r.sequences ? tfc_transpose(g, seq, (int64_t[]){1, 0, 2}) : h;
    tfc_scope_pop(g);
    return g->status ? NULL : y;
}

tfc_tensor *tfc_lstm_layer(tfc_graph *g, tfc_tensor *x, int64_t units, const tfc_rnn_opts *opts,
                           const char *name)
{
    return rnn_layer(g, 0, x, units, opts, name);
}

tfc_tensor *tfc_gru_layer(tfc_graph *g, tfc_tensor *x, int64_t units, const tfc_rnn_opts *opts,
                          const char *name)
{
    return rnn_layer(g, 1, x, units, opts, name);
}
