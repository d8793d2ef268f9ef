/* ops_rnn.c: ONNX RNN, GRU and LSTM (forward or reverse, default activations, optional biases,
 * initial states and LSTM peepholes), unrolled over the static sequence length: the input
 * projections for all steps are one matmul, then each step is a matmul with R and the gate
 * maths. Y [seq, 1, batch, hidden], Y_h and Y_c [1, batch, hidden]. */
#include <string.h>
#include "onnx_import.h"

struct rnn {
    tfc_graph *g;
    int kind;          /* 0 RNN, 1 GRU, 2 LSTM */
    int gates;         /* 1, 3, 4 */
    int64_t seq, batch, hidden;
    tfc_tensor *xw;    /* [seq, batch, gates * hidden]: X W^T + Wb */
    tfc_tensor *r;     /* [gates * hidden, hidden] */
    tfc_tensor *rb;    /* [gates * hidden] or NULL */
    tfc_tensor *p;     /* LSTM peepholes [3 * hidden] (i, o, f) or NULL */
    int linear_before_reset;
};

/* Rows [k h, (k + n) h) of a [G h, ...] tensor (a gate's weights), or of a [G h] vector. */
static tfc_tensor *rows(struct rnn *c, tfc_tensor *t, int k, int n)
{
    int64_t b[TFC_MAX_RANK] = {0}, s[TFC_MAX_RANK];
    for (int d = 0; d < TFC_MAX_RANK; d++) s[d] = -1;
    b[0] = k * c->hidden;
    s[0] = n * c->hidden;
    return tfc_slice(c->g, t, b, s);
}

/* Columns of gate k of a [batch, G h] tensor. */
static tfc_tensor *gate(struct rnn *c, tfc_tensor *t, int k)
{
    int64_t b[2] = {0, k * c->hidden}, s[2] = {-1, c->hidden};
    return tfc_slice(c->g, t, b, s);
}

static tfc_tensor *step_input(struct rnn *c, int64_t t)
{
    int64_t b[3] = {t, 0, 0}, s[3] = {1, -1, -1};
    return tfc_reshape(c->g, tfc_slice(c->g, c->xw, b, s),
                       tfc_shape_of(2, (int64_t[]){c->batch, c->gates * c->hidden}));
}

static tfc_tensor *affine_h(struct rnn *c, tfc_tensor *h, tfc_tensor *r, tfc_tensor *rb)
{
    tfc_tensor *y = tfc_matmul(c->g, h, r, 0, 1);
    return rb ? tfc_add(c->g, y, rb) : y;
}

/* One step: the new h (and *cell for LSTM) from the step's input projection xt. */
static tfc_tensor *rnn_step(struct rnn *c, tfc_tensor *xt, tfc_tensor *h, tfc_tensor **cell)
{
    tfc_graph *g = c->g;
    if (c->kind == 0) return tfc_tanh(g, tfc_add(g, xt, affine_h(c, h, c->r, c->rb)));
    if (c->kind == 1) { /* GRU: gates z, r, h */
        tfc_tensor *xzr = tfc_slice(g, xt, (int64_t[]){0, 0}, (int64_t[]){-1, 2 * c->hidden});
        tfc_tensor *zr = tfc_add(g, xzr, affine_h(c, h, rows(c, c->r, 0, 2),
                                                  c->rb ? rows(c, c->rb, 0, 2) : NULL));
        tfc_tensor *z = tfc_sigmoid(g, gate(c, zr, 0)), *rg = tfc_sigmoid(g, gate(c, zr, 1));
        tfc_tensor *rh = rows(c, c->r, 2, 1), *rbh = c->rb ? rows(c, c->rb, 2, 1) : NULL;
        tfc_tensor *hh = c->linear_before_reset ? tfc_mul(g, rg, affine_h(c, h, rh, rbh))
                                                : affine_h(c, tfc_mul(g, rg, h), rh, rbh);
        hh = tfc_tanh(g, tfc_add(g, gate(c, xt, 2), hh));
        tfc_tensor *one = tfc_scalar(g, tfc_tensor_dtype(h), 1);
        return tfc_add(g, tfc_mul(g, tfc_sub(g, one, z), hh), tfc_mul(g, z, h));
    }
    /* LSTM: gates i, o, f, c; peepholes i, o, f */
    tfc_tensor *a = tfc_add(g, xt, affine_h(c, h, c->r, c->rb));
    tfc_tensor *ai = gate(c, a, 0), *ao = gate(c, a, 1), *af = gate(c, a, 2), *ac = gate(c, a, 3);
    if (c->p) {
        ai = tfc_add(g, ai, tfc_mul(g, rows(c, c->p, 0, 1), *cell));
        af = tfc_add(g, af, tfc_mul(g, rows(c, c->p, 2, 1), *cell));
    }
    tfc_tensor *ct = tfc_add(g, tfc_mul(g, tfc_sigmoid(g, af), *cell),
                             tfc_mul(g, tfc_sigmoid(g, ai), tfc_tanh(g, ac)));
    if (c->p) ao = tfc_add(g, ao, tfc_mul(g, rows(c, c->p, 1, 1), ct));
    *cell = ct;
    return tfc_mul(g, tfc_sigmoid(g, ao), tfc_tanh(g, ct));
}

/* Input i of shape [1, ...] without its leading num_directions dim; NULL when absent. */
static tfc_tensor *one_direction(struct onnx_import *im, int i)
{
    if (!onnx_has_input(im, i)) return NULL;
    tfc_tensor *t = onnx_input(im, i);
    return t ? tfc_squeeze(im->g, t, 1, (int64_t[]){0}) : NULL;
}

/* An initial state input as [batch, hidden] (its direction dim dropped); NULL when absent. */
static tfc_tensor *initial_state(struct onnx_import *im, int i, int batch_first)
{
    if (!onnx_has_input(im, i)) return NULL;
    tfc_tensor *t = onnx_input(im, i);
    return t ? tfc_squeeze(im->g, t, 1, (int64_t[]){batch_first}) : NULL;
}

/* The attributes we take: one direction (forward or reverse), default activations, no clip;
 * sequence_lens, when given, must be known and all the full length (checked by the caller). */
static tfc_status rnn_supported(struct onnx_import *im, int *reverse)
{
    *reverse = 0;
    const Onnx__NodeProto *n = im->node;
    char buf[32];
    const char *dir = onnx_attr_str(n, "direction", "forward", buf, sizeof buf);
    if (strcmp(dir, "forward") && strcmp(dir, "reverse")) return onnx_unsupported(im, "direction '%s'", dir);
    *reverse = !strcmp(dir, "reverse");
    if (onnx_attr(n, "activations")) return onnx_unsupported(im, "the activations attribute");
    if (onnx_attr(n, "clip")) return onnx_unsupported(im, "clip");
    if (onnx_attr_int(n, "input_forget", 0)) return onnx_unsupported(im, "input_forget");
    return TFC_OK;
}

/* sequence_lens of the full length everywhere: the same as none. */
static tfc_status full_lengths(struct onnx_import *im, int64_t seq)
{
    if (!onnx_has_input(im, 4)) return TFC_OK;
    const tfc_value *v = onnx_input_value(im, 4);
    if (!v) return onnx_unsupported(im, "sequence_lens computed when the graph runs (it must be known at import time)");
    for (int64_t i = 0; i < tfc_value_numel(v); i++)
        if ((int64_t)tfc_value_get(v, i) != seq) return onnx_unsupported(im, "sequences shorter than X");
    return TFC_OK;
}

ONNX_BUILDER(onnx_rnn)
{
    tfc_graph *g = im->g;
    const char *op = im->node->op_type;
    int reverse;
    tfc_status st = rnn_supported(im, &reverse);
    if (st) return st;
    struct rnn c = {.g = g, .kind = !strcmp(op, "GRU") ? 1 : !strcmp(op, "LSTM") ? 2 : 0,
                    .linear_before_reset = (int)onnx_attr_int(im->node, "linear_before_reset", 0)};
    c.gates = c.kind == 0 ? 1 : c.kind == 1 ? 3 : 4;
    tfc_tensor *x = onnx_input(im, 0), *w = one_direction(im, 1);
    c.r = one_direction(im, 2);
    if (!x || !w || !c.r) return tfc_graph_status(g);
    int batch_first = (int)onnx_attr_int(im->node, "layout", 0); /* X [batch, seq, input] */
    if (batch_first) x = tfc_transpose(g, x, (int64_t[]){1, 0, 2});
    tfc_shape xs = tfc_tensor_shape(x);
    if (xs.rank != 3 || xs.dims[0] < 1 || xs.dims[1] < 0) return onnx_unsupported(im, "X of unknown sequence length or batch");
    c.seq = xs.dims[0], c.batch = xs.dims[1], c.hidden = tfc_tensor_shape(c.r).dims[1];
    if ((st = full_lengths(im, c.seq))) return st;
    tfc_tensor *flat = tfc_reshape(g, x, tfc_shape_of(2, (int64_t[]){c.seq * c.batch, xs.dims[2]}));
    tfc_tensor *xw = tfc_matmul(g, flat, w, 0, 1);
    tfc_tensor *b = one_direction(im, 3);
    if (b) {
        xw = tfc_add(g, xw, rows(&c, b, 0, c.gates));
        c.rb = rows(&c, b, c.gates, c.gates);
    }
    c.xw = tfc_reshape(g, xw, tfc_shape_of(3, (int64_t[]){c.seq, c.batch, c.gates * c.hidden}));
    tfc_shape hs = tfc_shape_of(2, (int64_t[]){c.batch, c.hidden});
    tfc_tensor *h = initial_state(im, 5, batch_first);
    tfc_tensor *cell = c.kind == 2 ? initial_state(im, 6, batch_first) : NULL;
    if (!h) h = tfc_fill(g, hs, tfc_tensor_dtype(x), 0);
    if (c.kind == 2 && !cell) cell = tfc_fill(g, hs, tfc_tensor_dtype(x), 0);
    if (c.kind == 2) c.p = one_direction(im, 7);
    tfc_tensor *ys[1024];
    if (c.seq > 1024) return onnx_unsupported(im, "a sequence longer than 1024 steps");
    for (int64_t k = 0; k < c.seq && h; k++) {
        int64_t t = reverse ? c.seq - 1 - k : k;
        h = rnn_step(&c, step_input(&c, t), h, &cell);
        ys[t] = h ? tfc_unsqueeze(g, tfc_unsqueeze(g, h, 0), 0) : NULL; /* [1, 1, batch, hidden] */
    }
    if (!h) return tfc_graph_status(g);
    /* layout 0: Y [seq, 1, batch, hidden], states [1, batch, hidden]; layout 1: Y [batch, seq,
     * 1, hidden], states [batch, 1, hidden] */
    tfc_tensor *y = c.seq > 1 ? tfc_concat(g, (int)c.seq, ys, 0) : tfc_identity(g, ys[0]);
    if (im->node->n_output > 0) outs[0] = batch_first ? tfc_transpose(g, y, (int64_t[]){2, 0, 1, 3}) : y;
    if (im->node->n_output > 1) outs[1] = tfc_unsqueeze(g, h, batch_first);
    if (im->node->n_output > 2 && c.kind == 2) outs[2] = tfc_unsqueeze(g, cell, batch_first);
    return tfc_graph_status(g);
}
