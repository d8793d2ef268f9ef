/* test_vexpf: the CPU's float32 sigmoid and tanh (codelets/ew_vexpf.h, through ew_math.h's
 * tfc_ew_sigmoid_f32 and tfc_ew_tanh_f32, the formulas every CPU kernel runs) against float64
 * libm over a dense grid of [-100, 100] and at the special values: within 1e-6 * (1 + |want|),
 * ten times tighter than test_ops' float32 tolerance (1e-5); NaN stays NaN, -0 stays -0,
 * the infinities give the limits. */
#include <float.h>
#include <math.h>
#include "testutil.h"
#include "../codelets/ew_math.h"

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static void check_grid(float (*f)(float, float, float), double (*ref)(double), const char *name)
{
    double worst = 0, worst_x = 0;
    for (double xd = -100.0; xd <= 100.0; xd += 1.0 / 4096) {
        float x = (float)xd;
        double want = ref((double)x), err = fabs((double)f(x, 0, 0) - want) / (1.0 + fabs(want));
        if (err > worst) worst = err, worst_x = x;
    }
    if (worst > 1e-6) printf("\n%s: error %g at x = %.9g (allowed 1e-6)\n", name, worst, worst_x);
    CU_ASSERT(worst <= 1e-6);
}

static void test_sigmoid_grid(void) { check_grid(tfc_ew_sigmoid_f32, ref_sigmoid, "sigmoid"); }
static void test_tanh_grid(void) { check_grid(tfc_ew_tanh_f32, tanh, "tanh"); }

/* small arguments: tanh keeps its relative accuracy where 1 - exp(-2|x|) would cancel */
static void test_tanh_small_relative(void)
{
    for (float x = 1e-30f; x < 0.7f; x *= 1.01f) {
        double want = tanh((double)x);
        CU_ASSERT(fabs(tfc_ew_tanh_f32(x, 0, 0) - want) <= 1e-6 * want);
        CU_ASSERT(fabs(tfc_ew_tanh_f32(-x, 0, 0) + want) <= 1e-6 * want);
    }
}

static void test_special_values(void)
{
    CU_ASSERT(isnan(tfc_ew_sigmoid_f32(NAN, 0, 0)));
    CU_ASSERT(isnan(tfc_ew_tanh_f32(NAN, 0, 0)));
    CU_ASSERT(tfc_ew_sigmoid_f32(INFINITY, 0, 0) == 1.0f);
    CU_ASSERT(tfc_ew_sigmoid_f32(-INFINITY, 0, 0) == 0.0f);
    CU_ASSERT(tfc_ew_tanh_f32(INFINITY, 0, 0) == 1.0f);
    CU_ASSERT(tfc_ew_tanh_f32(-INFINITY, 0, 0) == -1.0f);
    CU_ASSERT(tfc_ew_sigmoid_f32(0.0f, 0, 0) == 0.5f);
    CU_ASSERT(tfc_ew_sigmoid_f32(-0.0f, 0, 0) == 0.5f);
    float nz = tfc_ew_tanh_f32(-0.0f, 0, 0);
    CU_ASSERT(nz == 0.0f && signbit(nz));
    CU_ASSERT(tfc_ew_sigmoid_f32(FLT_MAX, 0, 0) == 1.0f);
    CU_ASSERT(tfc_ew_sigmoid_f32(-FLT_MAX, 0, 0) == 0.0f);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) return 1;
    TEST_SUITE("vexpf", NULL, NULL);
    TEST_ADD(test_sigmoid_grid);
    TEST_ADD(test_tanh_grid);
    TEST_ADD(test_tanh_small_relative);
    TEST_ADD(test_special_values);
    return test_main();
}
