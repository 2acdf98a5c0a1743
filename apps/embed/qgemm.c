/*
 * Int8 linear layers (see coring/embed/qgemm.h).
 *
 * Packed weights: block j holds outputs 64j .. 64j+63; inside it, input
 * group g (inputs 4g .. 4g+3) takes 256 bytes: four 64-byte vectors c =
 * 0..3, each 16 outputs (64j + 16c + i) times 4 inputs. One VPDPBUSD of
 * vector c with a row's 4 input bytes broadcast to all lanes adds those
 * 4 products to the row's 16 int32 sums for those outputs.
 *
 * The VNNI kernel computes a tile of up to 6 rows x 64 outputs in 24
 * registers, walking the block's inputs once, and applies the epilogue
 * (bias, residual or GELU) to the sums while they are in registers; rows
 * are taken in chunks so that a chunk's quantised rows stay in L2 while
 * every block passes over them.
 */
#include "coring/embed/qgemm.h"

#include "coring/embed/blas.h"
#include "vmath.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

#define BLOCK 64       /* outputs per block */
#define GROUP 4        /* inputs per VPDPBUSD lane */
#define TILE_ROWS 6    /* rows per VNNI tile */
#define CHUNK_ROWS 96  /* rows per pass over all blocks */
#define PREFETCH_TILES 4 /* tiles that prefetch the next block, a quarter each */

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

/* Where qw[o][k] lives in the packed matrix. */
static size_t packed_index(size_t o, size_t k, size_t in_pad)
{
    size_t j = o / BLOCK, c = o % BLOCK / 16, i = o % 16;
    return j * BLOCK * in_pad + k / GROUP * (BLOCK * GROUP) + c * 64 + i * GROUP + k % GROUP;
}

int embed_qweights_init(embed_qweights *q, const float *w, size_t out, size_t in)
{
    memset(q, 0, sizeof(*q));
    if (in == 0 || in > EMBED_QGEMM_MAX_IN || out == 0)
        return -EINVAL;
    size_t in_pad = round_up(in, GROUP), out_pad = round_up(out, BLOCK);
    q->packed = aligned_alloc(64, round_up(out_pad * in_pad, 64));
    q->scale = calloc(out_pad, sizeof(float));
    q->colsum = calloc(out_pad, sizeof(int32_t));
    if (!q->packed || !q->scale || !q->colsum) {
        embed_qweights_free(q);
        return -ENOMEM;
    }
    memset(q->packed, 0, out_pad * in_pad);
    q->in = in, q->out = out, q->in_pad = in_pad, q->out_pad = out_pad;
    for (size_t o = 0; o < out; o++) {
        const float *row = w + o * in;
        float max = 0;
        for (size_t k = 0; k < in; k++)
            max = fabsf(row[k]) > max ? fabsf(row[k]) : max;
        float scale = max > 0 ? max / 127.0f : 1.0f;
        int32_t sum = 0;
        for (size_t k = 0; k < in; k++) {
            long v = lrintf(row[k] / scale);
            v = v > 127 ? 127 : v < -127 ? -127 : v;
            q->packed[packed_index(o, k, in_pad)] = (int8_t)v;
            sum += (int32_t)v;
        }
        q->scale[o] = scale;
        q->colsum[o] = sum;
    }
    return 0;
}

void embed_qweights_free(embed_qweights *q)
{
    free(q->packed);
    free(q->scale);
    free(q->colsum);
    memset(q, 0, sizeof(*q));
}

/* --- activations --------------------------------------------------------------- */

/* Scale and zero point for a row whose values span [lo, hi]. */
static void row_params(float lo, float hi, float *scale, int32_t *zero)
{
    lo = lo < 0 ? lo : 0;
    hi = hi > 0 ? hi : 0;
    float s = (hi - lo) / 255.0f;
    if (!(s > 0)) {
        *scale = 1.0f;
        *zero = 0;
        return;
    }
    long z = lrintf(-lo / s);
    *scale = s;
    *zero = (int32_t)(z < 0 ? 0 : z > 255 ? 255 : z);
}

void embed_quantize_rows_portable(const float *x, size_t n, size_t in, size_t ldx, uint8_t *q,
                                  size_t ldq, float *scale, int32_t *zero)
{
    for (size_t r = 0; r < n; r++) {
        const float *row = x + r * ldx;
        float lo = row[0], hi = row[0];
        for (size_t k = 1; k < in; k++) {
            lo = row[k] < lo ? row[k] : lo;
            hi = row[k] > hi ? row[k] : hi;
        }
        row_params(lo, hi, &scale[r], &zero[r]);
        float inv = 1.0f / scale[r];
        uint8_t *dst = q + r * ldq;
        for (size_t k = 0; k < in; k++) {
            long v = lrintf(row[k] * inv) + zero[r];
            dst[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
        for (size_t k = in; k < round_up(in, GROUP); k++)
            dst[k] = (uint8_t)zero[r];
    }
}

#if HAVE_X86
#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* The row's range with four minimum and maximum chains (one would wait
 * on each instruction's latency: a 1,536-float row is 96 in a row), then
 * 64 floats a step to bytes: four vectors scaled, rounded and offset, then
 * packed with saturation (vpackssdw, vpackuswb, which clamp to [0, 255])
 * and put back in order with one vpermd, a single 64-byte store. */
VNNI static void quantize_rows_avx512(const float *x, size_t n, size_t in, size_t ldx, uint8_t *q,
                                      size_t ldq, float *scale, int32_t *zero)
{
    /* after the packs, dword 4L + j holds elements 4L..4L+3 of vector j */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (size_t r = 0; r < n; r++) {
        const float *row = x + r * ldx;
        __m512 lo[4], hi[4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++)
            lo[i] = hi[i] = _mm512_set1_ps(row[0]);
        size_t k = 0;
        for (; k + 64 <= in; k += 64)
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                __m512 v = _mm512_loadu_ps(row + k + 16 * i);
                lo[i] = _mm512_min_ps(lo[i], v);
                hi[i] = _mm512_max_ps(hi[i], v);
            }
        for (; k < in; k += 16) {
            __mmask16 m = embed_tail_mask(k, in);
            __m512 v = _mm512_maskz_loadu_ps(m, row + k);
            lo[0] = _mm512_mask_min_ps(lo[0], m, lo[0], v);
            hi[0] = _mm512_mask_max_ps(hi[0], m, hi[0], v);
        }
        __m512 vlo = _mm512_min_ps(_mm512_min_ps(lo[0], lo[1]), _mm512_min_ps(lo[2], lo[3]));
        __m512 vhi = _mm512_max_ps(_mm512_max_ps(hi[0], hi[1]), _mm512_max_ps(hi[2], hi[3]));
        row_params(_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi), &scale[r], &zero[r]);
        __m512 inv = _mm512_set1_ps(1.0f / scale[r]);
        __m512i z = _mm512_set1_epi32(zero[r]), zero_i = _mm512_setzero_si512();
        uint8_t *dst = q + r * ldq;
        for (k = 0; k + 64 <= in; k += 64) {
            __m512i v[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++)
                v[i] = _mm512_add_epi32(
                    _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(row + k + 16 * i), inv)), z);
            __m512i b =
                _mm512_packus_epi16(_mm512_packs_epi32(v[0], v[1]), _mm512_packs_epi32(v[2], v[3]));
            _mm512_storeu_si512(dst + k, _mm512_permutexvar_epi32(order, b));
        }
        for (; k < in; k += 16) {
            __mmask16 m = embed_tail_mask(k, in);
            __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + k), inv));
            v = _mm512_max_epi32(_mm512_add_epi32(v, z), zero_i); /* cvtusepi32 clamps >255 */
            _mm_mask_storeu_epi8(dst + k, m, _mm512_cvtusepi32_epi8(v));
        }
        for (k = in; k < round_up(in, GROUP); k++)
            dst[k] = (uint8_t)zero[r];
    }
}

/* acc += a (unsigned bytes) . b (signed bytes), four products per lane, in
 * place: GCC 12 gives _mm512_dpbusd_epi32 a destination apart from its
 * accumulator and then copies every sum back (a register move per
 * product, and spills past 24 accumulators), which halved the kernel's
 * rate; the constraint "+v" ties them. */
VNNI static inline __attribute__((always_inline)) __m512i dpbusd(__m512i acc, __m512i a,
                                                               __m512i b)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

/* One tile: @rows (1..6, a constant after inlining) rows of @qx times the
 * 64 outputs of the block at @wp (@groups input groups), written to @y
 * for the outputs below @w->out as @epi (a constant after inlining) says;
 * meanwhile one cache line a group from @pf on (@groups lines) is asked
 * into L2. */
VNNI static inline __attribute__((always_inline)) void
tile_vnni(const int rows, const uint8_t *qx, size_t ldq, const float *sx, const int32_t *zx,
          const int8_t *wp, size_t groups, const embed_qweights *w, size_t o0, const float *bias,
          float *y, size_t ldy, const embed_epilogue epi, const int8_t *pf)
{
    __m512i acc[TILE_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < TILE_ROWS; r++)
        if (r < rows)
            for (int c = 0; c < 4; c++)
                acc[r][c] = _mm512_setzero_si512();
    for (size_t g = 0; g < groups; g++) {
        const int8_t *wg = wp + g * (BLOCK * GROUP);
        _mm_prefetch((const char *)(pf + g * 64), _MM_HINT_T1);
        __m512i w0 = _mm512_load_si512(wg), w1 = _mm512_load_si512(wg + 64);
        __m512i w2 = _mm512_load_si512(wg + 128), w3 = _mm512_load_si512(wg + 192);
#pragma GCC unroll 6
        for (int r = 0; r < TILE_ROWS; r++) {
            if (r >= rows)
                continue;
            int32_t four;
            memcpy(&four, qx + (size_t)r * ldq + g * GROUP, sizeof(four));
            __m512i a = _mm512_set1_epi32(four);
            acc[r][0] = dpbusd(acc[r][0], a, w0);
            acc[r][1] = dpbusd(acc[r][1], a, w1);
            acc[r][2] = dpbusd(acc[r][2], a, w2);
            acc[r][3] = dpbusd(acc[r][3], a, w3);
        }
    }
    for (int c = 0; c < 4; c++) {
        size_t o = o0 + (size_t)c * 16;
        if (o >= w->out)
            break;
        __mmask16 m = embed_tail_mask(o, w->out);
        __m512 sw = _mm512_loadu_ps(w->scale + o);
        __m512i colsum = _mm512_loadu_si512(w->colsum + o);
        __m512 b = _mm512_maskz_loadu_ps(m, bias + o);
#pragma GCC unroll 6
        for (int r = 0; r < TILE_ROWS; r++) {
            if (r >= rows)
                continue;
            __m512i t = _mm512_sub_epi32(acc[r][c],
                                         _mm512_mullo_epi32(_mm512_set1_epi32(zx[r]), colsum));
            __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t),
                                       _mm512_mul_ps(_mm512_set1_ps(sx[r]), sw), b);
            float *dst = y + (size_t)r * ldy + o;
            if (epi == EMBED_EPI_BIAS_ADD)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, dst));
            else if (epi == EMBED_EPI_BIAS_GELU)
                v = embed_gelu16(v);
            _mm512_mask_storeu_ps(dst, m, v);
        }
    }
}

/* embed_qgemm on VNNI, for one epilogue @epi (a constant after inlining). */
VNNI static inline __attribute__((always_inline)) void
qgemm_vnni_epi(const uint8_t *qx, size_t n, size_t ldq, const float *sx, const int32_t *zx,
               const embed_qweights *w, const float *bias, float *y, size_t ldy,
               const embed_epilogue epi)
{
    size_t groups = w->in_pad / GROUP;
    for (size_t r0 = 0; r0 < n; r0 += CHUNK_ROWS) {
        size_t end = n - r0 < CHUNK_ROWS ? n : r0 + CHUNK_ROWS;
        for (size_t o0 = 0; o0 < w->out; o0 += BLOCK) {
            const int8_t *wp = w->packed + o0 * w->in_pad;
            /* The first PREFETCH_TILES tiles of a block bring the next
             * block (groups x 4 lines) into L2, a quarter each, so that
             * its first tile does not wait for it; past the last block
             * (or tile) they touch this block again, in cache. */
            const int8_t *next = o0 + BLOCK < w->out ? wp + BLOCK * w->in_pad : wp;
            size_t r = r0, tile = 0;
#define TILE(rows)                                                                                 \
    tile_vnni(rows, qx + r * ldq, ldq, sx + r, zx + r, wp, groups, w, o0, bias, y + r * ldy, ldy, \
              epi, tile < PREFETCH_TILES ? next + tile * groups * 64 : wp)
            for (; r + TILE_ROWS <= end; r += TILE_ROWS, tile++)
                TILE(6);
            switch (end - r) {
            case 5: TILE(5); break;
            case 4: TILE(4); break;
            case 3: TILE(3); break;
            case 2: TILE(2); break;
            case 1: TILE(1); break;
            default: break;
            }
#undef TILE
        }
    }
}

VNNI static void qgemm_vnni(const uint8_t *qx, size_t n, size_t ldq, const float *sx,
                            const int32_t *zx, const embed_qweights *w, const float *bias, float *y,
                            size_t ldy, embed_epilogue epi)
{
    switch (epi) {
    case EMBED_EPI_BIAS_ADD:
        qgemm_vnni_epi(qx, n, ldq, sx, zx, w, bias, y, ldy, EMBED_EPI_BIAS_ADD);
        break;
    case EMBED_EPI_BIAS_GELU:
        qgemm_vnni_epi(qx, n, ldq, sx, zx, w, bias, y, ldy, EMBED_EPI_BIAS_GELU);
        break;
    default:
        qgemm_vnni_epi(qx, n, ldq, sx, zx, w, bias, y, ldy, EMBED_EPI_BIAS);
        break;
    }
}

/* libgcc reads CPUID in a constructor; this only tests its bits. */
static bool have_vnni(void)
{
    return !embed_kernels_portable() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}
#else
static bool have_vnni(void)
{
    return false;
}
#endif

void embed_quantize_rows(const float *x, size_t n, size_t in, size_t ldx, uint8_t *q, size_t ldq,
                         float *scale, int32_t *zero)
{
#if HAVE_X86
    if (have_vnni()) {
        quantize_rows_avx512(x, n, in, ldx, q, ldq, scale, zero);
        return;
    }
#endif
    embed_quantize_rows_portable(x, n, in, ldx, q, ldq, scale, zero);
}

/* --- products ---------------------------------------------------------------- */

void embed_qgemm_portable(const uint8_t *qx, size_t n, size_t ldq, const float *sx,
                          const int32_t *zx, const embed_qweights *w, const float *bias, float *y,
                          size_t ldy, embed_epilogue epi)
{
    /* A block's 64 outputs (64 x in_pad bytes) stay in cache while every
     * row passes over them; output o's 4 inputs of group g lie at
     * packed_index(o, 4g, in_pad), 256 bytes after those of group g - 1. */
    size_t groups = w->in_pad / GROUP;
    for (size_t o0 = 0; o0 < w->out; o0 += BLOCK) {
        size_t end = w->out - o0 < BLOCK ? w->out : o0 + BLOCK;
        for (size_t r = 0; r < n; r++) {
            const uint8_t *row = qx + r * ldq;
            for (size_t o = o0; o < end; o++) {
                const int8_t *wo = w->packed + packed_index(o, 0, w->in_pad);
                int32_t acc = 0;
                for (size_t g = 0; g < groups; g++) {
                    const int8_t *wg = wo + g * (BLOCK * GROUP);
                    const uint8_t *xg = row + g * GROUP;
                    acc += (int32_t)xg[0] * wg[0] + (int32_t)xg[1] * wg[1] +
                           (int32_t)xg[2] * wg[2] + (int32_t)xg[3] * wg[3];
                }
                float v = (float)(acc - zx[r] * w->colsum[o]) * (sx[r] * w->scale[o]) + bias[o];
                if (epi == EMBED_EPI_BIAS_ADD)
                    v += y[r * ldy + o];
                else if (epi == EMBED_EPI_BIAS_GELU)
                    v = embed_gelu1(v);
                y[r * ldy + o] = v;
            }
        }
    }
}

void embed_qgemm(const uint8_t *qx, size_t n, size_t ldq, const float *sx, const int32_t *zx,
                 const embed_qweights *w, const float *bias, float *y, size_t ldy,
                 embed_epilogue epi)
{
#if HAVE_X86
    if (have_vnni()) {
        qgemm_vnni(qx, n, ldq, sx, zx, w, bias, y, ldy, epi);
        return;
    }
#endif
    embed_qgemm_portable(qx, n, ldq, sx, zx, w, bias, y, ldy, epi);
}

const char *embed_qgemm_kernel(void)
{
    return have_vnni() ? "AVX-512 VNNI" : "portable C";
}
