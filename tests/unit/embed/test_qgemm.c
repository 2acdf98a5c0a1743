/*
 * Unit tests for the int8 linear layers (coring/embed/qgemm.h): weight and
 * activation quantisation round-trip within half a step; the product within
 * the error that quantisation allows of the float32 product; the VNNI
 * kernel equal to the portable one on every tile and block remainder;
 * accumulation into the output; and the GELU epilogue within 1e-5 of
 * exact GELU of the product, in both.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coring/embed/qgemm.h"

/* Deterministic values in [-1, 1) with a few larger outliers (as real
 * activations have), from a 64-bit LCG. */
static uint64_t lcg = 42;
static float rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((lcg >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
    return (lcg >> 20) % 97 == 0 ? v * 8 : v;
}

static float *random_matrix(size_t rows, size_t cols)
{
    float *m = malloc(rows * cols * sizeof(float));
    cr_assert_not_null(m);
    for (size_t i = 0; i < rows * cols; i++)
        m[i] = rnd();
    return m;
}

typedef struct quantised {
    uint8_t *q;
    float *scale;
    int32_t *zero;
    size_t ldq;
} quantised;

static quantised quantise(const float *x, size_t n, size_t in)
{
    quantised r = {.ldq = (in + 3) / 4 * 4};
    r.q = malloc(n * r.ldq);
    r.scale = malloc(n * sizeof(float));
    r.zero = malloc(n * sizeof(int32_t));
    cr_assert(r.q && r.scale && r.zero);
    memset(r.q, 0xAA, n * r.ldq); /* the padding must be overwritten */
    embed_quantize_rows(x, n, in, in, r.q, r.ldq, r.scale, r.zero);
    return r;
}

static void quantised_free(quantised *r)
{
    free(r->q);
    free(r->scale);
    free(r->zero);
}

Test(qgemm, activation_rows_round_trip_within_half_a_step)
{
    size_t n = 7, in = 37;
    float *x = random_matrix(n, in);
    x[2 * in + 5] = 0.0f;
    for (size_t k = 0; k < in; k++)
        x[4 * in + k] = 0.0f; /* an all-zero row */
    for (size_t k = 0; k < in; k++)
        x[5 * in + k] = fabsf(x[5 * in + k]) + 0.5f; /* all positive: range widened to 0 */
    quantised r = quantise(x, n, in);
    for (size_t row = 0; row < n; row++) {
        cr_assert_geq(r.zero[row], 0);
        cr_assert_leq(r.zero[row], 255);
        for (size_t k = 0; k < in; k++) {
            float back = r.scale[row] * (float)((int)r.q[row * r.ldq + k] - r.zero[row]);
            cr_assert_leq(fabsf(back - x[row * in + k]), r.scale[row] * 0.5f + 1e-6f,
                          "row %zu col %zu: %g -> %g (scale %g)", row, k, x[row * in + k], back,
                          r.scale[row]);
        }
        for (size_t k = in; k < r.ldq; k++)
            cr_assert_eq(r.q[row * r.ldq + k], r.zero[row], "padding must be the zero point");
    }
    cr_assert_eq(r.q[2 * r.ldq + 5], r.zero[2], "0 maps exactly to the zero point");
    cr_assert_eq(r.zero[5], 0, "an all-positive row's range starts at 0");
    for (size_t k = 0; k < in; k++)
        cr_assert_eq(r.q[4 * r.ldq + k], r.zero[4]);
    quantised_free(&r);
    free(x);
}

/* The portable quantiser gives the bytes embed_quantize_rows gives (the
 * AVX-512 one where the CPU has VNNI): widths below, at and past one
 * vector and past 64 floats (the packed step), with and without padding,
 * rows farther apart than their width. */
Test(qgemm, portable_quantisation_gives_the_same_bytes)
{
    if (strcmp(embed_qgemm_kernel(), "portable C") == 0)
        cr_log_warn("no AVX-512 VNNI here: the portable quantiser is compared with itself");
    static const size_t widths[] = {1, 3, 4, 15, 16, 17, 32, 37, 64, 100, 384, 1536};
    size_t n = 5;
    for (size_t wi = 0; wi < sizeof(widths) / sizeof(widths[0]); wi++) {
        size_t in = widths[wi], ldx = in + 7, ldq = (in + 3) / 4 * 4 + 8;
        float *x = random_matrix(n, ldx);
        uint8_t *qa = calloc(n, ldq), *qp = calloc(n, ldq);
        float sa[5], sp[5];
        int32_t za[5], zp[5];
        cr_assert(qa && qp);
        embed_quantize_rows(x, n, in, ldx, qa, ldq, sa, za);
        embed_quantize_rows_portable(x, n, in, ldx, qp, ldq, sp, zp);
        cr_assert_arr_eq(qa, qp, n * ldq, "width %zu: bytes differ", in);
        cr_assert_arr_eq(sa, sp, sizeof(sa), "width %zu: scales differ", in);
        cr_assert_arr_eq(za, zp, sizeof(za), "width %zu: zero points differ", in);
        free(x), free(qa), free(qp);
    }
}

Test(qgemm, weights_beyond_exact_int32_sums_are_refused)
{
    float w[4] = {0};
    embed_qweights q;
    cr_assert_eq(embed_qweights_init(&q, w, 1, EMBED_QGEMM_MAX_IN + 1), -EINVAL);
    cr_assert_null(q.packed);
    cr_assert_eq(embed_qweights_init(&q, w, 0, 4), -EINVAL);
}

/* Float32 reference y = x W^T + b. */
static void reference(const float *x, size_t n, size_t in, const float *w, size_t out,
                      const float *b, float *y)
{
    for (size_t r = 0; r < n; r++)
        for (size_t o = 0; o < out; o++) {
            double acc = b[o];
            for (size_t k = 0; k < in; k++)
                acc += (double)x[r * in + k] * w[o * in + k];
            y[r * out + o] = (float)acc;
        }
}

/* Shapes that cover every tile remainder (rows mod 6: 1, 2, 3, 4, 5, 0,
 * and 100 = a chunk of 96 then 4), partial blocks of outputs (out not a
 * multiple of 16 or 64) and inputs not a multiple of 4. */
static const size_t shapes[][3] = {
    {1, 4, 1},    {2, 20, 16},      {3, 37, 65},    {5, 37, 70},    {6, 64, 64},
    {9, 130, 33}, {13, 384, 130},   {29, 1536, 384}, {100, 33, 17},
};

Test(qgemm, product_is_within_the_quantisation_error_of_float32)
{
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        size_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = random_matrix(n, in), *w = random_matrix(out, in), *b = random_matrix(1, out);
        float *want = malloc(n * out * sizeof(float)), *got = malloc(n * out * sizeof(float));
        embed_qweights qw;
        cr_assert_eq(embed_qweights_init(&qw, w, out, in), 0);
        quantised r = quantise(x, n, in);
        reference(x, n, in, w, out, b, want);
        embed_qgemm(r.q, n, r.ldq, r.scale, r.zero, &qw, b, got, out, EMBED_EPI_BIAS);
        for (size_t row = 0; row < n; row++)
            for (size_t o = 0; o < out; o++) {
                /* |xw - x'w'| <= sum |x||w - w'| + |w'||x - x'|, each error at
                 * most half a step (plus float rounding of the sum). */
                double bound = 1e-5 * (1 + fabs(want[row * out + o]));
                for (size_t k = 0; k < in; k++)
                    bound += fabs(x[row * in + k]) * qw.scale[o] * 0.5 +
                             (fabs(w[o * in + k]) + qw.scale[o] * 0.5) * r.scale[row] * 0.5;
                double err = fabs((double)got[row * out + o] - want[row * out + o]);
                cr_assert_leq(err, bound, "shape %zu row %zu out %zu: %g vs %g (bound %g)", s,
                              row, o, got[row * out + o], want[row * out + o], bound);
            }
        quantised_free(&r);
        embed_qweights_free(&qw);
        free(x), free(w), free(b), free(want), free(got);
    }
}

Test(qgemm, kernel_matches_portable_c_and_accumulates)
{
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        size_t n = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        float *x = random_matrix(n, in), *w = random_matrix(out, in), *b = random_matrix(1, out);
        float *base = random_matrix(n, out);
        float *a = malloc(n * out * sizeof(float)), *p = malloc(n * out * sizeof(float));
        embed_qweights qw;
        cr_assert_eq(embed_qweights_init(&qw, w, out, in), 0);
        quantised r = quantise(x, n, in);
        embed_qgemm(r.q, n, r.ldq, r.scale, r.zero, &qw, b, a, out, EMBED_EPI_BIAS);
        embed_qgemm_portable(r.q, n, r.ldq, r.scale, r.zero, &qw, b, p, out, EMBED_EPI_BIAS);
        for (size_t i = 0; i < n * out; i++)
            cr_assert_float_eq(a[i], p[i], 1e-5f * (1 + fabsf(p[i])), "shape %zu [%zu] (%s)", s,
                               i, embed_qgemm_kernel());
        /* accumulate: y = base + product */
        memcpy(p, base, n * out * sizeof(float));
        embed_qgemm(r.q, n, r.ldq, r.scale, r.zero, &qw, b, p, out, EMBED_EPI_BIAS_ADD);
        for (size_t i = 0; i < n * out; i++)
            cr_assert_float_eq(p[i], base[i] + a[i], 1e-5f * (1 + fabsf(p[i])), "shape %zu [%zu]",
                               s, i);
        /* GELU of the product, in the kernel's epilogue and in portable C */
        float *g = malloc(n * out * sizeof(float));
        cr_assert_not_null(g);
        embed_qgemm(r.q, n, r.ldq, r.scale, r.zero, &qw, b, g, out, EMBED_EPI_BIAS_GELU);
        embed_qgemm_portable(r.q, n, r.ldq, r.scale, r.zero, &qw, b, p, out, EMBED_EPI_BIAS_GELU);
        for (size_t i = 0; i < n * out; i++) {
            double want = 0.5 * a[i] * (1.0 + erf(a[i] / sqrt(2.0)));
            cr_assert_float_eq(g[i], want, 2e-6 + 1e-5 * fabs(want), "shape %zu [%zu] GELU (%s)", s,
                               i, embed_qgemm_kernel());
            cr_assert_float_eq(p[i], want, 2e-6 + 1e-5 * fabs(want), "shape %zu [%zu] GELU", s, i);
        }
        free(g);
        quantised_free(&r);
        embed_qweights_free(&qw);
        free(x), free(w), free(b), free(base), free(a), free(p);
    }
}

Test(qgemm, output_past_out_is_never_written)
{
    size_t n = 3, in = 8, out = 5, ldy = 24;
    float *x = random_matrix(n, in), *w = random_matrix(out, in), *b = random_matrix(1, out);
    float y[3 * 24];
    for (size_t i = 0; i < sizeof(y) / sizeof(y[0]); i++)
        y[i] = 1234.5f;
    embed_qweights qw;
    cr_assert_eq(embed_qweights_init(&qw, w, out, in), 0);
    cr_assert_eq(qw.out_pad % 64, 0);
    quantised r = quantise(x, n, in);
    embed_qgemm(r.q, n, r.ldq, r.scale, r.zero, &qw, b, y, ldy, EMBED_EPI_BIAS);
    for (size_t row = 0; row < n; row++)
        for (size_t o = out; o < ldy; o++)
            cr_assert_eq(y[row * ldy + o], 1234.5f, "row %zu col %zu was written", row, o);
    quantised_free(&r);
    embed_qweights_free(&qw);
    free(x), free(w), free(b);
}
