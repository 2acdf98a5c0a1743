/*
 * Unit tests for the float32 weights packed once (coring/embed/blas.h):
 * embed_sgemm_packed against a plain double-precision product on every
 * row-tile and output-block remainder, for each epilogue (bias, bias plus
 * the residual already in y, bias then exact GELU); and the
 * CORING_EMBED_KERNELS switch (embed_kernels_select).
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "coring/embed/blas.h"

static uint64_t lcg = 7;
static float rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static float *random_matrix(size_t rows, size_t cols)
{
    float *m = malloc(rows * cols * sizeof(float));
    cr_assert_not_null(m);
    for (size_t i = 0; i < rows * cols; i++)
        m[i] = rnd();
    return m;
}

/* One shape and epilogue: @n rows, @in inputs, @out outputs; y has 3 spare
 * columns (ldy > out) that must stay untouched. */
static void check(size_t n, size_t in, size_t out, embed_epilogue epi)
{
    float *x = random_matrix(n, in), *w = random_matrix(out, in), *b = random_matrix(1, out);
    size_t ldy = out + 3;
    float *y = random_matrix(n, ldy), *y0 = malloc(n * ldy * sizeof(float));
    cr_assert_not_null(y0);
    for (size_t i = 0; i < n * ldy; i++)
        y0[i] = y[i];
    embed_fweights fw;
    cr_assert_eq(embed_fweights_init(&fw, w, out, in), 0);
    embed_sgemm_packed(x, n, in, &fw, b, y, ldy, epi);
    for (size_t r = 0; r < n; r++) {
        for (size_t o = 0; o < out; o++) {
            double v = b[o];
            for (size_t k = 0; k < in; k++)
                v += (double)x[r * in + k] * w[o * in + k];
            if (epi == EMBED_EPI_BIAS_ADD)
                v += y0[r * ldy + o];
            else if (epi == EMBED_EPI_BIAS_GELU)
                v = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            cr_assert(fabs(y[r * ldy + o] - v) <= 1e-5 * (1 + fabs(v) + (double)in / 64),
                      "n %zu in %zu out %zu epi %d: y[%zu][%zu] = %g, want %g", n, in, out,
                      (int)epi, r, o, (double)y[r * ldy + o], v);
        }
        for (size_t o = out; o < ldy; o++)
            cr_assert_eq(y[r * ldy + o], y0[r * ldy + o], "column %zu past out written", o);
    }
    embed_fweights_free(&fw);
    free(x), free(w), free(b), free(y), free(y0);
}

Test(sgemm_packed, matches_the_plain_product_on_every_remainder)
{
    cr_assert_eq(embed_kernels_select(NULL), 0);
    if (!embed_sgemm_packed_available())
        cr_skip_test("no AVX-512F here: OpenBLAS runs the linear layers");
    const size_t rows[] = {1, 2, 3, 4, 5, 6, 7, 13, 40};
    const size_t outs[] = {1, 16, 17, 64, 70, 130};
    const size_t ins[] = {1, 5, 33, 384};
    for (size_t a = 0; a < sizeof(rows) / sizeof(rows[0]); a++)
        for (size_t c = 0; c < sizeof(outs) / sizeof(outs[0]); c++)
            for (size_t d = 0; d < sizeof(ins) / sizeof(ins[0]); d++)
                for (int e = EMBED_EPI_BIAS; e <= EMBED_EPI_BIAS_GELU; e++)
                    check(rows[a], ins[d], outs[c], (embed_epilogue)e);
}

Test(sgemm_packed, many_rows_cross_the_row_chunks)
{
    cr_assert_eq(embed_kernels_select(NULL), 0);
    if (!embed_sgemm_packed_available())
        cr_skip_test("no AVX-512F here");
    check(200, 1536, 70, EMBED_EPI_BIAS_ADD); /* chunks of 18 rows at in = 1536 */
}

Test(sgemm_packed, zero_sizes_are_einval)
{
    embed_fweights fw;
    float w = 1;
    cr_assert_eq(embed_fweights_init(&fw, &w, 0, 1), -EINVAL);
    cr_assert_eq(embed_fweights_init(&fw, &w, 1, 0), -EINVAL);
    embed_fweights_free(&fw); /* zeroed: nothing to free */
}

Test(kernels, portable_switch)
{
    cr_assert_eq(embed_kernels_select("portable"), 0);
    cr_assert(embed_kernels_portable());
    cr_assert_not(embed_sgemm_packed_available());
    cr_assert_eq(embed_kernels_select("avx1024"), -EINVAL);
    cr_assert(embed_kernels_portable(), "a bad value leaves the choice as it was");
    cr_assert_eq(embed_kernels_select("auto"), 0);
    cr_assert_not(embed_kernels_portable());
    cr_assert_eq(embed_kernels_select(""), 0);
    cr_assert_not(embed_kernels_portable());
}
