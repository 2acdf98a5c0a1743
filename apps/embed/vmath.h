/*
 * apps/embed/vmath.h - exp and GELU 16 floats at a time, inline, for the
 * encoder's AVX-512 kernels: the softmax of attention (bert.c), the int8
 * path's GELU (bert.c) and the packed float32 product's epilogue
 * (blas.c). Private to apps/embed. Inline, so that a kernel keeps its
 * registers: a call to glibc's libmvec (_ZGVeN16v_expf, _erff) clobbers
 * every zmm register, and attention's score rows were spilled around it.
 *
 * exp(y) = 2^n e^g with n = round(y log2 e) and g = y - n ln 2, |g| <=
 * ln 2 / 2: e^g by its Taylor series to the sixth power (within 1.2e-7,
 * relative), 2^n by vscalefps (IEEE 754's scaleB).
 *
 * GELU(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)) (Hendrycks and Gimpel,
 * "Gaussian Error Linear Units", 2016), the form BERT uses. With
 * a = |x| / sqrt 2, 1 + erf(x / sqrt 2) is 2 - erfc(a) for x >= 0 and
 * erfc(a) below, and
 *
 *   erfc(a) = (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-a^2) + e(a),
 *   t = 1 / (1 + p a), |e(a)| <= 1.5e-7 for a >= 0
 *
 * (Abramowitz and Stegun, Handbook of Mathematical Functions, 7.1.26), so
 * the negative side is a product, without the cancellation of 1 + erf.
 * a is clamped at 4: erfc(4) = 1.5e-8 is below float's resolution at 2,
 * and exp(-a^2) stays a normal number. 1 / (1 + p a) is vrcp14ps and one
 * Newton step. About 25 vector instructions: 4.4 ns for 16 lanes on the
 * project's machine, where libmvec's _ZGVeN16v_erff (4 ulp) and the GELU
 * around it took 7.5 (docs/embeddings.md). Each lane is within
 * 3e-7 |x| + 1 ulp of GELU(x) (checked against double erf every 1e-5 over
 * [-12, 12]).
 */
#ifndef CORING_EMBED_VMATH_H
#define CORING_EMBED_VMATH_H

#if defined(__x86_64__)
#include <immintrin.h>

/* embed_exp16 - e^y of each of the 16 lanes of @y (above), for y in
 * [-87, 88] (a normal result); below, 0 or a subnormal, above, +inf. Needs
 * AVX-512F: call it from a function compiled for it, on a CPU that has it. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 embed_exp16(__m512 y)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 z = _mm512_mul_ps(y, _mm512_set1_ps(1.44269504f));
    __m512 n = _mm512_roundscale_ps(z, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 g = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), y); /* ln 2 in two parts */
    g = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), g);
    __m512 e = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720), g, _mm512_set1_ps(1.0f / 120));
    e = _mm512_fmadd_ps(e, g, _mm512_set1_ps(1.0f / 24));
    e = _mm512_fmadd_ps(e, g, _mm512_set1_ps(1.0f / 6));
    e = _mm512_fmadd_ps(e, g, _mm512_set1_ps(0.5f));
    e = _mm512_fmadd_ps(e, g, one);
    e = _mm512_fmadd_ps(e, g, one);
    return _mm512_scalef_ps(e, n);
}

/* embed_gelu16 - GELU(x) of each of the 16 lanes of @x (above). Needs
 * AVX-512F: call it from a function compiled for it, on a CPU that has
 * it. A NaN lane gives NaN. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 embed_gelu16(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 a = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678f));
    a = _mm512_min_ps(a, _mm512_set1_ps(4.0f)); /* NaN: 4, and x keeps the NaN */
    __m512 d = _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, one);
    __m512 t = _mm512_rcp14_ps(d);
    t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f)));
    __m512 s = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
    s = _mm512_fmadd_ps(s, t, _mm512_set1_ps(1.421413741f));
    s = _mm512_fmadd_ps(s, t, _mm512_set1_ps(-0.284496736f));
    s = _mm512_fmadd_ps(s, t, _mm512_set1_ps(0.254829592f));
    s = _mm512_mul_ps(s, t);
    __m512 erfc =
        _mm512_mul_ps(s, embed_exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), a), a)));
    /* Phi(x) = 1 - erfc(a) / 2 for x >= 0, erfc(a) / 2 below */
    __m512 half = _mm512_mul_ps(erfc, _mm512_set1_ps(0.5f));
    __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mul_ps(x, _mm512_mask_mov_ps(_mm512_sub_ps(one, half), neg, half));
}
#endif

#endif
