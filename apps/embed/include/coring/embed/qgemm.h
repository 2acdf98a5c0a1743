/*
 * Int8 linear layers: dynamic quantisation as PyTorch's
 * torch.ao.quantization.quantize_dynamic and onnxruntime's
 * DynamicQuantizeLinear + MatMulInteger do it (Jacob et al., "Quantization
 * and Training of Neural Networks for Efficient Integer-Arithmetic-Only
 * Inference", CVPR 2018, section 2):
 *
 * - weights, once at load: per output row o, symmetric int8,
 *   w[o][k] ~ sw[o] * qw[o][k], qw in [-127, 127], sw = max|w[o]| / 127;
 * - activations, per call: per row r (one token), asymmetric uint8,
 *   x[r][k] ~ sx[r] * (qx[r][k] - zx[r]), qx in [0, 255], the range
 *   [min(x[r]), max(x[r])] widened to hold 0;
 * - y[r][o] = sx[r] sw[o] (sum_k qx[r][k] qw[o][k] - zx[r] sum_k qw[o][k])
 *   + b[o], the sum exact in int32 (255 * 127 * in < 2^31: at most
 *   EMBED_QGEMM_MAX_IN inputs).
 *
 * Inputs must be finite: a NaN or infinity in a row makes its
 * quantisation (and so that row's outputs) meaningless.
 *
 * The product runs on AVX-512 VNNI (VPDPBUSD: four uint8 x int8 products
 * added into each int32 lane; Intel SDM vol. 2C) where the CPU has it,
 * else on portable C that gives the same integers, more slowly.
 */
#ifndef CORING_EMBED_QGEMM_H
#define CORING_EMBED_QGEMM_H

#include "coring/embed/blas.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most inputs a row may have for its int32 sums to stay exact. */
#define EMBED_QGEMM_MAX_IN 65536

/* A weight matrix [out, in] in int8, packed for the kernel: outputs in
 * blocks of 64, and within a block, groups of 4 inputs (one VPDPBUSD
 * lane) for 16 outputs at a time. in_pad: in rounded up to 4; out_pad:
 * out rounded up to 64 (padding is zero and never stored). */
typedef struct embed_qweights {
    int8_t *packed;  /* out_pad * in_pad bytes, 64-byte aligned */
    float *scale;    /* sw, out_pad floats */
    int32_t *colsum; /* sum_k qw[o][k], out_pad */
    size_t in, out, in_pad, out_pad;
} embed_qweights;

/*
 * embed_qweights_init - quantise @w (@out rows of @in floats, row-major,
 * as a Hugging Face nn.Linear weight stores them) into @q. @w is only
 * read. Returns 0, -EINVAL (@in is 0 or over EMBED_QGEMM_MAX_IN, or @out
 * is 0) or -ENOMEM; on error @q is left empty. Any thread.
 */
int embed_qweights_init(embed_qweights *q, const float *w, size_t out, size_t in);

/* embed_qweights_free - release what embed_qweights_init allocated. */
void embed_qweights_free(embed_qweights *q);

/*
 * embed_quantize_rows - quantise @n rows of @x (@in floats each, rows
 * @ldx floats apart) to uint8 rows of @q (@ldq bytes apart, @ldq >= in
 * rounded up to 4; the bytes past @in are set to the row's zero point,
 * so they add nothing once the zero point is taken off), with each row's
 * scale in @scale[r] and zero point in @zero[r]; bytes from there to
 * @ldq are not touched. Any thread.
 */
void embed_quantize_rows(const float *x, size_t n, size_t in, size_t ldx, uint8_t *q, size_t ldq,
                         float *scale, int32_t *zero);

/* embed_quantize_rows_portable - the same in portable C (what
 * embed_quantize_rows runs without AVX-512 VNNI), for tests: the same
 * bytes for finite inputs. */
void embed_quantize_rows_portable(const float *x, size_t n, size_t in, size_t ldx, uint8_t *q,
                                  size_t ldq, float *scale, int32_t *zero);

/*
 * embed_qgemm - v[r][o] = sx[r] sw[o] (qx[r] . qw[o] - zx[r] colsum[o]),
 * for @n rows and @w->out outputs, into @y as @epi says (blas.h): v +
 * bias, v + bias added to what @y holds (a residual), or GELU(v + bias)
 * (vmath.h's within 1e-6 on AVX-512, erff in portable C). @qx/@sx/@zx:
 * rows of @w->in values quantised by embed_quantize_rows, @ldq >=
 * @w->in_pad bytes apart; @y: rows @ldy >= @w->out floats apart. Uses
 * AVX-512 VNNI when the CPU has it. Any thread.
 */
void embed_qgemm(const uint8_t *qx, size_t n, size_t ldq, const float *sx, const int32_t *zx,
                 const embed_qweights *w, const float *bias, float *y, size_t ldy,
                 embed_epilogue epi);

/* embed_qgemm_portable - the same in portable C (what embed_qgemm runs
 * without VNNI); exposed so that tests compare the two. */
void embed_qgemm_portable(const uint8_t *qx, size_t n, size_t ldq, const float *sx,
                          const int32_t *zx, const embed_qweights *w, const float *bias, float *y,
                          size_t ldy, embed_epilogue epi);

/* embed_qgemm_kernel - which kernel embed_qgemm runs here: "AVX-512 VNNI"
 * or "portable C". */
const char *embed_qgemm_kernel(void);

#endif
