/*
 * apps/embed/vmath.h - exp and GELU 16 floats at a time, inline, for the
 * encoder's AVX-512 kernels: the softmax of attention (bert.c), the GELU
 * of the OpenBLAS path (bert.c) and the packed float32 and int8 products'
 * epilogues (blas.c, qgemm.c); the mask of a row's last vector; and the
 * scalar GELU of the portable kernels. Private to apps/embed. Inline, so that a kernel keeps its
 * registers: a call to glibc's libmvec (_ZGVeN16v_expf, _erff) clobbers
 * every zmm register, and attention's score rows were spilled around it.
 *
 * exp(y) = 2^n e^g with n = round(y log2 e) and g = y - n ln 2, |g| <=
 * ln 2 / 2: e^g by its Taylor series to the sixth power (within 1.2e-7,
 * relative), 2^n by vscalefps (IEEE 754's scaleB).
 *
 * GELU(x) = x Phi(x) = x/2 (1 + erf(x / sqrt 2)) (Hendrycks and Gimpel,
 * "Gaussian Error Linear Units", 2016), the form BERT uses, by table:
 * [-6, 6) in 32 intervals of 0.375, on each a polynomial of degree 4 in
 * the position u in [0, 1) inside it (embed_gelu_table, fitted and
 * checked by apps/embed/gelu_table.py). The interval's five coefficients
 * come out of two registers each by vpermt2ps (32 lanes, index = the
 * interval), so 16 lanes cost about 17 vector instructions and no
 * division or exp: 2.1 ns on the project's machine, against 5.0 for the
 * erfc form it replaced (Abramowitz and Stegun 7.1.26, with an exp and a
 * reciprocal), in the same loop over a 64 x 1536 block in L2
 * (docs/embeddings.md). Past 6 it returns x (GELU(6) =
 * 6 - 6e-9); at or below -6, GELU(-6) = -6e-9. Each lane is within 9.1e-7
 * of GELU(x) (float32 arithmetic against double erf every 1e-4 over
 * [-12, 12]; tests/unit/embed/test_vmath.c holds it to 1e-6).
 */
#ifndef CORING_EMBED_VMATH_H
#define CORING_EMBED_VMATH_H

#include <math.h>
#include <stddef.h>

/* embed_gelu1 - GELU(x) = x/2 (1 + erf(x / sqrt 2)) with the C library's
 * erff: the portable kernels' GELU. Any CPU. */
static inline float embed_gelu1(float x)
{
    return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
}

#if defined(__x86_64__)
#include <immintrin.h>

/* embed_tail_mask - lanes [0, n - i) of the 16 from @i (i < n), as a
 * mask: all 16 but in a row's last vector. */
static inline __mmask16 embed_tail_mask(size_t i, size_t n)
{
    return n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
}

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

/* Coefficients of embed_gelu16's polynomials: embed_gelu_table[j][k] is
 * c_j of interval k, GELU(-6 + 0.375 (k + u)) ~ sum_j c_j u^j; printed by
 * apps/embed/gelu_table.py, which also gives the error quoted above. */
static const float embed_gelu_table[5][32] __attribute__((aligned(64))) = {
    {-5.9300751e-09f,  -5.22322274e-08f, -3.99527067e-07f, -2.65321228e-06f,
     -1.52925859e-05f, -7.64712167e-05f, -0.000331576623f, -0.0012456486f,
     -0.00404967694f,  -0.0113726044f,   -0.0275049377f,   -0.0569930784f,
     -0.10021086f,     -0.14658159f,     -0.169970855f,    -0.132686496f,
     1.55648422e-07f,  0.242313996f,     0.580029726f,     0.978418708f,
     1.39978909f,      1.81800675f,      2.22249484f,      2.6136272f,
     2.99595022f,      3.37375426f,      3.74966836f,      4.12492371f,
     4.49998474f,      4.87499714f,      5.24999952f,      5.625f},
    {-1.28028388e-08f, -1.07105741e-07f, -7.71547377e-07f, -4.78586435e-06f, -2.55505711e-05f,
     -0.000117284348f, -0.000462096534f, -0.00155849196f,  -0.00448040804f,  -0.0109042218f,
     -0.0222023875f,   -0.0369718783f,   -0.0477985367f,   -0.040512152f,    0.000307167909f,
     0.0804024264f,    0.187492743f,     0.294589162f,     0.374696195f,     0.41552189f,
     0.422805816f,     0.411973029f,     0.397199899f,     0.38590163f,      0.3794792f,
     0.376558363f,     0.375462323f,     0.375117481f,     0.37502566f,      0.375004828f,
     0.375000775f,     0.375000119f},
    {-1.8259442e-08f,  -1.3278958e-07f,  -8.38675987e-07f, -4.58724617e-06f, -2.16502776e-05f,
     -8.77620769e-05f, -0.000303677225f, -0.00088931236f,  -0.00217557745f,  -0.0043482692f,
     -0.00678521767f,  -0.00728792604f,  -0.00229281816f,  0.0108402986f,    0.0303022899f,
     0.0485456288f,    0.0561548062f,    0.0487472638f,    0.03054717f,      0.0109683704f,
     -0.00231403904f,  -0.00738130976f,  -0.00686541712f,  -0.00438358122f,  -0.00217816839f,
     -0.000880723237f, -0.000296038692f, -8.37218613e-05f, -2.00709801e-05f, -4.09943004e-06f,
     -7.15896647e-07f, -1.07174145e-07f},
    {-7.04205139e-10f, -1.97804599e-08f, -1.97459968e-07f, -1.36315543e-06f, -7.24457641e-06f,
     -3.06544534e-05f, -0.000104206512f, -0.000282845896f, -0.000598062761f, -0.000921033032f,
     -0.000802824215f, 0.000425994775f,  0.00302147679f,   0.00599743938f,   0.00720245484f,
     0.0049407878f,    -0.000131995941f, -0.00509419432f,  -0.00714047439f,  -0.00581931556f,
     -0.0028899298f,   -0.000405429601f, 0.000757065718f,  0.000873939658f,  0.000576391467f,
     0.000280490814f,  0.000108196626f,  3.41364757e-05f,  8.95933408e-06f,  1.9763761e-06f,
     3.68957529e-07f,  5.85722972e-08f},
    {-1.44670063e-08f, -8.72942962e-08f, -4.44729039e-07f, -1.89904472e-06f, -6.72297529e-06f,
     -1.93855431e-05f, -4.40710755e-05f, -7.33863926e-05f, -6.89692242e-05f, 4.09918393e-05f,
     0.000302063447f,  0.000615983794f,  0.00069945975f,   0.000285758695f,  -0.000527065131f,
     -0.00120219798f,  -0.00120219798f,  -0.000527065131f, 0.000285758695f,  0.00069945975f,
     0.000615983794f,  0.000302063447f,  4.09918393e-05f,  -6.89692242e-05f, -7.33863926e-05f,
     -4.40710755e-05f, -1.93855431e-05f, -6.72297529e-06f, -1.89904483e-06f, -4.44729011e-07f,
     -8.72942536e-08f, -1.44670391e-08f},
};

/* embed_gelu16 - GELU(x) of each of the 16 lanes of @x (above). Needs
 * AVX-512F: call it from a function compiled for it, on a CPU that has
 * it. A NaN lane gives NaN; +inf gives +inf, -inf about 0. */
static inline __attribute__((always_inline, target("avx512f"))) __m512 embed_gelu16(__m512 x)
{
    /* t = (x + 6) / 0.375 clamped to [0, 32): max and min take their
     * second operand when either is NaN, so a NaN stays one */
    __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(1.0f / 0.375f), _mm512_set1_ps(16.0f));
    t = _mm512_min_ps(_mm512_set1_ps(31.999998f), _mm512_max_ps(_mm512_setzero_ps(), t));
    __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 u = _mm512_sub_ps(t, k);
    __m512i i = _mm512_cvttps_epi32(k);
#define COEF(j)                                                                                    \
    _mm512_permutex2var_ps(_mm512_load_ps(embed_gelu_table[j]), i,                                 \
                           _mm512_load_ps(embed_gelu_table[j] + 16))
    __m512 p = _mm512_fmadd_ps(COEF(4), u, COEF(3));
    p = _mm512_fmadd_ps(p, u, COEF(2));
    p = _mm512_fmadd_ps(p, u, COEF(1));
    p = _mm512_fmadd_ps(p, u, COEF(0));
#undef COEF
    return _mm512_mask_mov_ps(p, _mm512_cmp_ps_mask(x, _mm512_set1_ps(6.0f), _CMP_GE_OQ), x);
}
#endif

#endif
