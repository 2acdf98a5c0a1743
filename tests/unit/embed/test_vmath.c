/*
 * Unit tests for the encoder's inline vector math (apps/embed/vmath.h):
 * embed_gelu16 against GELU with double erf every 1e-4 over [-12, 12]
 * (within 1e-6, the bound vmath.h gives with its margin), at and past the
 * table's ends, and for NaN and infinities; embed_exp16 against double
 * exp over the range it is for (within 2.5e-7, relative). Skipped on a
 * CPU without AVX-512F, where the encoder does not call them.
 */
#include <criterion/criterion.h>

#include <math.h>

#if defined(__x86_64__)
#include "apps/embed/vmath.h"

static bool have_avx512f(void)
{
    return __builtin_cpu_supports("avx512f");
}

static double gelu_exact(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

/* Lane i of embed_gelu16 / embed_exp16 over 16 floats from @in into @out. */
__attribute__((target("avx512f"))) static void gelu16(const float *in, float *out)
{
    _mm512_storeu_ps(out, embed_gelu16(_mm512_loadu_ps(in)));
}

__attribute__((target("avx512f"))) static void exp16(const float *in, float *out)
{
    _mm512_storeu_ps(out, embed_exp16(_mm512_loadu_ps(in)));
}

/* The largest error of @kernel over x = i * 1e-4 for i in [@from, @to)
 * against @exact, absolute or (@relative) relative; where, into *@at. */
static double worst_error(void (*kernel)(const float *, float *), double (*exact)(double),
                          long from, long to, bool relative, double *at)
{
    double worst = 0;
    float in[16], out[16];
    for (long n = from; n < to; n += 16) {
        for (int i = 0; i < 16; i++)
            in[i] = (float)((double)(n + i) * 1e-4);
        kernel(in, out);
        for (int i = 0; i < 16; i++) {
            double want = exact(in[i]), e = fabs((double)out[i] - want);
            if (relative)
                e /= want;
            if (e > worst)
                worst = e, *at = in[i];
        }
    }
    return worst;
}

Test(vmath, gelu_within_1e6_over_the_line)
{
    if (!have_avx512f())
        cr_skip_test("no AVX-512F");
    double at = 0, worst = worst_error(gelu16, gelu_exact, -120000, 120000, false, &at);
    cr_expect_leq(worst, 1e-6, "largest error %.3g at x = %.6f", worst, at);
}

Test(vmath, gelu_at_the_ends_and_past_them)
{
    if (!have_avx512f())
        cr_skip_test("no AVX-512F");
    const float in[16] = {-6.0f,    6.0f,      -5.9999995f, 5.9999995f, -6.0000005f, 6.0000005f,
                          -1e30f,   1e30f,     -100.0f,     100.0f,     0.0f,        -0.0f,
                          INFINITY, -INFINITY, NAN,         1.0f};
    float out[16];
    gelu16(in, out);
    for (int i = 0; i < 12; i++)
        cr_expect_leq(fabs((double)out[i] - gelu_exact(in[i])), 1e-6 + 1e-7 * fabs(in[i]),
                      "GELU(%g) = %g", in[i], out[i]);
    cr_expect(isinf(out[12]) && out[12] > 0, "GELU(+inf) = %g", out[12]);
    cr_expect(fabsf(out[13]) < 1e-6f, "GELU(-inf) = %g", out[13]);
    cr_expect(isnan(out[14]), "GELU(NaN) = %g", out[14]);
    cr_expect_leq(fabs((double)out[15] - gelu_exact(1.0)), 1e-6);
}

Test(vmath, exp_within_2_5e7_relative)
{
    if (!have_avx512f())
        cr_skip_test("no AVX-512F");
    double at = 0, worst = worst_error(exp16, exp, -870000, 880000, true, &at);
    cr_expect_leq(worst, 2.5e-7, "largest relative error %.3g at y = %.6f", worst, at);
}
#else
Test(vmath, not_x86)
{
    cr_skip_test("vmath.h is x86-64 only");
}
#endif
