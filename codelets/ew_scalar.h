/* ew_scalar.h: every element-wise formula, written once for one float type T. The CPU and CUDA
 * kernels include it through ew_math.h (once for float, once for double); the OpenCL programs
 * are built from this same text (codelets/ew_math_cl.c), so every device evaluates the same
 * expression. Before including: T, EW(name) (the function's name for this T), EWS(f) (the
 * same from tfc_ew_<name>) and TFC_EW_FN (the qualifiers). Math calls are type-generic: <tgmath.h> in C, overloads in CUDA and
 * OpenCL, so float stays float. Constants are cast to T for the same reason.
 * No include guard: included once per type. */

/* ---- unary: T f(T x, T p0, T p1); p0 and p1 are the op's float attributes ---------------- */

TFC_EW_FN T EW(neg)(T x, T p0, T p1) { return -x; }
TFC_EW_FN T EW(abs)(T x, T p0, T p1) { return fabs(x); }
TFC_EW_FN T EW(square)(T x, T p0, T p1) { return x * x; }
TFC_EW_FN T EW(sign)(T x, T p0, T p1) { return x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : x; }
/* min p0, max p1; when p0 > p1 every element is p1, as torch.clamp; NaN stays NaN */
TFC_EW_FN T EW(clip)(T x, T p0, T p1)
{
    T v = x < p0 ? p0 : x;
    return v > p1 ? p1 : v;
}
TFC_EW_FN T EW(floor)(T x, T p0, T p1) { return floor(x); }
TFC_EW_FN T EW(ceil)(T x, T p0, T p1) { return ceil(x); }
TFC_EW_FN T EW(round)(T x, T p0, T p1) { return rint(x); } /* halves to even */
TFC_EW_FN T EW(sqrt)(T x, T p0, T p1) { return sqrt(x); }
TFC_EW_FN T EW(rsqrt)(T x, T p0, T p1) { return (T)1 / sqrt(x); }
TFC_EW_FN T EW(exp)(T x, T p0, T p1) { return exp(x); }
TFC_EW_FN T EW(log)(T x, T p0, T p1) { return log(x); }
TFC_EW_FN T EW(relu)(T x, T p0, T p1) { return x > (T)0 ? x : (T)0; }
/* the stable forms: no exp of a large positive argument */
#ifdef TFC_EW_CPU_F32
/* C float32: ew_vexpf.h's forms, which gcc vectorizes (the LSTM's gates) */
TFC_EW_FN T EW(sigmoid)(T x, T p0, T p1) { return tfc_vsigmoidf(x); }
TFC_EW_FN T EW(tanh)(T x, T p0, T p1) { return tfc_vtanhf(x); }
#else
TFC_EW_FN T EW(sigmoid)(T x, T p0, T p1)
{
    return x >= (T)0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x));
}
TFC_EW_FN T EW(tanh)(T x, T p0, T p1) { return tanh(x); }
#endif
TFC_EW_FN T EW(softplus)(T x, T p0, T p1)
{
    return x > (T)0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
TFC_EW_FN T EW(erf)(T x, T p0, T p1) { return erf(x); }
/* x Phi(x), Phi the normal CDF */
TFC_EW_FN T EW(gelu)(T x, T p0, T p1)
{
    return (T)0.5 * x * ((T)1 + erf(x * (T)0.70710678118654752440));
}
/* the tanh approximation (PyTorch's approximate='tanh'): sqrt(2/pi) = 0.79788... */
TFC_EW_FN T EW(gelu_tanh)(T x, T p0, T p1)
{
    return (T)0.5 * x *
           ((T)1 + tanh((T)0.79788456080286535588 * (x + (T)0.044715 * x * x * x)));
}
TFC_EW_FN T EW(elu)(T x, T p0, T p1) { return x > (T)0 ? x : p0 * expm1(x); } /* p0: alpha */
/* the constants of Klambauer et al. 2017, as PyTorch and ONNX */
TFC_EW_FN T EW(selu)(T x, T p0, T p1)
{
    return (T)1.05070098735548049342 *
           (x > (T)0 ? x : (T)1.67326324235437728482 * expm1(x));
}
TFC_EW_FN T EW(leaky_relu)(T x, T p0, T p1) { return x > (T)0 ? x : p0 * x; } /* p0: alpha */
TFC_EW_FN T EW(silu)(T x, T p0, T p1) { return x * EW(sigmoid)(x, p0, p1); }
/* clamp(alpha x + beta, 0, 1): p0 alpha, p1 beta (ONNX: 0.2, 0.5; PyTorch: 1/6, 0.5) */
TFC_EW_FN T EW(hard_sigmoid)(T x, T p0, T p1)
{
    T v = p0 * x + p1;
    return v < (T)0 ? (T)0 : v > (T)1 ? (T)1 : v;
}
TFC_EW_FN T EW(softsign)(T x, T p0, T p1) { return x / ((T)1 + fabs(x)); }
TFC_EW_FN T EW(sin)(T x, T p0, T p1) { return sin(x); }
TFC_EW_FN T EW(cos)(T x, T p0, T p1) { return cos(x); }
TFC_EW_FN T EW(reciprocal)(T x, T p0, T p1) { return (T)1 / x; }
TFC_EW_FN T EW(log1p)(T x, T p0, T p1) { return log1p(x); }
TFC_EW_FN T EW(expm1)(T x, T p0, T p1) { return expm1(x); }

/* ---- predicates: int f(T x) ------------------------------------------------------------ */

TFC_EW_FN int EW(is_nan)(T x) { return x != x; }
TFC_EW_FN int EW(is_inf)(T x) { return x == (T)INFINITY || x == -(T)INFINITY; }

/* ---- binary: T f(T x, T y) ------------------------------------------------------------- */

TFC_EW_FN T EW(add)(T x, T y) { return x + y; }
TFC_EW_FN T EW(sub)(T x, T y) { return x - y; }
TFC_EW_FN T EW(mul)(T x, T y) { return x * y; }
TFC_EW_FN T EW(div)(T x, T y) { return x / y; }
/* NaN propagates, as in NumPy and PyTorch */
TFC_EW_FN T EW(maximum)(T x, T y) { return (x > y || x != x) ? x : y; }
TFC_EW_FN T EW(minimum)(T x, T y) { return (x < y || x != x) ? x : y; }
TFC_EW_FN T EW(pow)(T x, T y) { return pow(x, y); }
TFC_EW_FN T EW(relu_grad)(T x, T y) { return y > (T)0 ? x : (T)0; }

/* ---- comparisons and logic: int f(T x, T y) --------------------------------------------- */

TFC_EW_FN int EW(equal)(T x, T y) { return x == y; }
TFC_EW_FN int EW(not_equal)(T x, T y) { return x != y; }
TFC_EW_FN int EW(less)(T x, T y) { return x < y; }
TFC_EW_FN int EW(greater)(T x, T y) { return x > y; }
TFC_EW_FN int EW(logical_and)(T x, T y) { return x != (T)0 && y != (T)0; }
TFC_EW_FN int EW(logical_or)(T x, T y) { return x != (T)0 || y != (T)0; }

/* ---- one entry per class, for kernels that take the kind at run time (the per-element
 * interpreters of CUDA and OpenCL); the CPU loops expand the tables instead. The names are
 * pasted whole (EWS(tfc_ew_##name)): a bare `name` argument would be macro-expanded first, and
 * OpenCL implementations define builtins such as abs and exp as macros. ----------------- */

#define TFC_EW_CASE_UNARY_(K, name) case TFC_K_##K: return EWS(tfc_ew_##name)(x, p0, p1);
TFC_EW_FN T EW(unary)(int kind, T x, T p0, T p1)
{
    switch (kind) {
    TFC_EW_UNARY_ANY(TFC_EW_CASE_UNARY_) TFC_EW_UNARY_FLOAT(TFC_EW_CASE_UNARY_)
    default: return x;
    }
}
#undef TFC_EW_CASE_UNARY_

#define TFC_EW_CASE_PREDICATE_(K, name) case TFC_K_##K: return EWS(tfc_ew_##name)(x);
TFC_EW_FN int EW(predicate)(int kind, T x)
{
    switch (kind) {
    TFC_EW_PREDICATE(TFC_EW_CASE_PREDICATE_)
    default: return 0;
    }
}
#undef TFC_EW_CASE_PREDICATE_

#define TFC_EW_CASE_BINARY_(K, name) case TFC_K_##K: return EWS(tfc_ew_##name)(x, y);
TFC_EW_FN T EW(binary)(int kind, T x, T y)
{
    switch (kind) {
    TFC_EW_BINARY(TFC_EW_CASE_BINARY_)
    default: return x;
    }
}

TFC_EW_FN int EW(compare)(int kind, T x, T y)
{
    switch (kind) {
    TFC_EW_COMPARE(TFC_EW_CASE_BINARY_)
    default: return 0;
    }
}
#undef TFC_EW_CASE_BINARY_
