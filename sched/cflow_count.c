/* cflow_count.c: recognizing count-known while loops and computing their trip count (see
 * cflow_count.h). The pattern: the predicate is `i REL n` (less, greater, not_equal or equal,
 * either operand order, under any number of logical_not), i a loop variable, n a constant or a
 * capture (computed outside the loop, so invariant); the body's output for i is i + c, c + i
 * or i - c, c a constant or a capture. Anything else is not a counter loop. */
#include <math.h>
#include <string.h>
#include "cflow_count.h"

/* The relation of `a op b` as `counter REL bound`, the counter on the left when left. */
static int rel_of(const char *op, int left, enum tfc_cf_rel *rel)
{
    if (!strcmp(op, "less")) *rel = left ? TFC_REL_LT : TFC_REL_GT;
    else if (!strcmp(op, "greater")) *rel = left ? TFC_REL_GT : TFC_REL_LT;
    else if (!strcmp(op, "not_equal")) *rel = TFC_REL_NE;
    else if (!strcmp(op, "equal")) *rel = TFC_REL_EQ;
    else return 0;
    return 1;
}

static enum tfc_cf_rel rel_not(enum tfc_cf_rel r)
{
    static const enum tfc_cf_rel neg[] = {TFC_REL_GE, TFC_REL_GT, TFC_REL_LE, TFC_REL_LT,
                                          TFC_REL_EQ, TFC_REL_NE};
    return neg[r];
}

/* t, used in region r of cf, as a loop-invariant one-element operand of dtype dt. */
static int invariant(const struct tfc_cflow *cf, int r, const tfc_tensor *t, enum tfc_dtype dt,
                     struct tfc_cf_operand *op)
{
    const struct tfc_node *n = t->node;
    if (t->desc.dtype != dt) return 0;
    if (n->op == &tfc_op_constant) {
        if (!n->value || tfc_value_numel(n->value) != 1) return 0;
        *op = (struct tfc_cf_operand){n->value, -1};
        return 1;
    }
    const struct tfc_region *reg = &cf->g->regions[cf->reg[r].id];
    if (n->region != cf->reg[r].id || n->op != &tfc_op_placeholder) return 0;
    for (int k = 0; k < reg->n_caps; k++)
        if (reg->cap_inner[k] == t) { /* its value: the node input feeding the capture */
            *op = (struct tfc_cf_operand){NULL, cf->reg[r].cap_base + k};
            return 1;
        }
    return 0;
}

static int counter_dtype(enum tfc_dtype dt)
{
    return dt == TFC_INT32 || dt == TFC_INT64 || dt == TFC_FLOAT32 || dt == TFC_FLOAT64;
}

/* The predicate's comparison of loop variable k->var with an invariant bound. */
static int find_predicate(const struct tfc_cflow *cf, struct tfc_cf_counter *k)
{
    const tfc_tensor *p = cf->reg[0].out[0];
    int negated = 0;
    for (int depth = 0; depth < 8 && !strcmp(p->node->op->name, "logical_not"); depth++) {
        negated ^= 1;
        p = p->node->inputs[0];
    }
    const struct tfc_node *cmp = p->node;
    if (cmp->n_inputs != 2) return 0;
    for (int v = 0; v < cf->n_vars; v++) {
        const tfc_tensor *var = cf->reg[0].in[v];
        int left = cmp->inputs[0] == var;
        if (!left && cmp->inputs[1] != var) continue;
        if (!counter_dtype(var->desc.dtype) || !rel_of(cmp->op->name, left, &k->rel)) return 0;
        if (!invariant(cf, 0, cmp->inputs[left ? 1 : 0], var->desc.dtype, &k->bound)) return 0;
        k->var = v;
        k->dtype = var->desc.dtype;
        if (negated) k->rel = rel_not(k->rel);
        return 1;
    }
    return 0;
}

/* The body's output for the counter: the counter plus (or minus) an invariant step. */
static int find_step(const struct tfc_cflow *cf, struct tfc_cf_counter *k)
{
    const tfc_tensor *out = cf->reg[1].out[k->var], *in = cf->reg[1].in[k->var];
    const struct tfc_node *n = out->node;
    int add = !strcmp(n->op->name, "add"), sub = !strcmp(n->op->name, "sub");
    if ((!add && !sub) || n->n_inputs != 2 || out->desc.dtype != k->dtype) return 0;
    const tfc_tensor *other;
    if (n->inputs[0] == in) other = n->inputs[1];
    else if (add && n->inputs[1] == in) other = n->inputs[0];
    else return 0;
    k->negate_step = sub;
    return invariant(cf, 1, other, k->dtype, &k->step);
}

int tfc_cf_counter_find(const struct tfc_cflow *cf, struct tfc_cf_counter *out)
{
    if (cf->kind != TFC_CF_WHILE || cf->fwd || cf->reg[0].n_out != 1) return 0;
    struct tfc_cf_counter k = {0};
    if (!find_predicate(cf, &k) || !find_step(cf, &k)) return 0;
    *out = k;
    return 1;
}

/* ---- the count ------------------------------------------------------------------------- */

/* The integers a counter of dt holds exactly (and, for floats, computes with exactly). */
static void exact_range(enum tfc_dtype dt, __int128 *lo, __int128 *hi)
{
    switch (dt) {
    case TFC_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case TFC_INT64: *lo = INT64_MIN; *hi = INT64_MAX; break;
    case TFC_FLOAT32: *hi = (__int128)1 << 24; *lo = -*hi; break;
    default: *hi = (__int128)1 << 53; *lo = -*hi; break;
    }
}

/* One element of dt as an integer; 0 for a float that is not one or lies outside the range. */
static int as_integer(enum tfc_dtype dt, const void *p, __int128 *out)
{
    __int128 lo, hi;
    double x;
    exact_range(dt, &lo, &hi);
    switch (dt) {
    case TFC_INT32: *out = *(const int32_t *)p; return 1;
    case TFC_INT64: *out = *(const int64_t *)p; return 1;
    case TFC_FLOAT32: x = *(const float *)p; break;
    default: x = *(const double *)p; break;
    }
    if (!(x >= (double)lo && x <= (double)hi) || x != floor(x)) return 0;
    *out = (__int128)x;
    return 1;
}

static int holds(enum tfc_cf_rel r, __int128 a, __int128 b)
{
    switch (r) {
    case TFC_REL_LT: return a < b;
    case TFC_REL_LE: return a <= b;
    case TFC_REL_GT: return a > b;
    case TFC_REL_GE: return a >= b;
    case TFC_REL_NE: return a != b;
    default: return a == b;
    }
}

/* Iterations until `i REL n` fails, i from i0 by c, for a predicate true at i0; -1 when it
 * never fails (a step of the wrong sign or zero, or not equal never reached). */
static __int128 iterations(enum tfc_cf_rel r, __int128 i0, __int128 n, __int128 c)
{
    switch (r) {
    case TFC_REL_LT: return c > 0 ? (n - i0 + c - 1) / c : -1;
    case TFC_REL_LE: return c > 0 ? (n - i0) / c + 1 : -1;
    case TFC_REL_GT: return c < 0 ? (i0 - n - c - 1) / -c : -1;
    case TFC_REL_GE: return c < 0 ? (i0 - n) / -c + 1 : -1;
    case TFC_REL_NE: return c && (n - i0) % c == 0 && (n - i0) / c > 0 ? (n - i0) / c : -1;
    default: return c ? 1 : -1;
    }
}

int tfc_cf_trip_count(const struct tfc_cf_counter *k, const void *i0p, const void *np,
                      const void *cp, int64_t max_iter, int64_t *count)
{
    __int128 i0, n, c, lo, hi;
    if (!as_integer(k->dtype, i0p, &i0) || !as_integer(k->dtype, np, &n) ||
        !as_integer(k->dtype, cp, &c))
        return 0;
    if (k->negate_step) c = -c;
    __int128 m = holds(k->rel, i0, n) ? iterations(k->rel, i0, n, c) : 0;
    if (m < 0) return 0;
    if (max_iter > 0 && m > max_iter) m = max_iter;
    exact_range(k->dtype, &lo, &hi);
    __int128 last = i0 + m * c; /* the counter after the last iteration: it must not wrap */
    if (m > INT64_MAX || last < lo || last > hi) return 0;
    *count = (int64_t)m;
    return 1;
}
