/*
 * Which kernels run the encoder (see coring/embed/blas.h).
 */
#include "coring/embed/blas.h"

#include "coring/embed/bert.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool portable_only;

int embed_kernels_select(const char *value)
{
    if (!value || !*value || strcmp(value, "auto") == 0)
        portable_only = false;
    else if (strcmp(value, "portable") == 0)
        portable_only = true;
    else
        return -EINVAL;
    return 0;
}

bool embed_kernels_portable(void)
{
    return portable_only;
}

void embed_blas_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    const char *forced = getenv("OPENBLAS_CORETYPE");
    char blas[160];
    if (forced)
        snprintf(blas, sizeof(blas), "OpenBLAS %s kernels (OPENBLAS_CORETYPE=%s in the environment)",
                 core ? core : "?", forced);
    else
        snprintf(blas, sizeof(blas), "OpenBLAS %s kernels", core ? core : "?");
    snprintf(buf, len, "%s%s; element-wise kernels %s%s",
             embed_sgemm_packed_available()
                 ? "float32 linear layers on AVX-512 with weights packed at load, attention "
                   "on AVX-512, "
                 : "",
             blas, embed_bert_avx512() ? "AVX-512" : "portable C",
             portable_only ? " (CORING_EMBED_KERNELS=portable)" : "");
}

/* --- float32 weights packed once --------------------------------------------- */

#define FBLOCK 64    /* outputs per packed block: four 16-lane vectors */
#define FTILE_ROWS 6 /* rows per tile: 24 accumulators */
#define FPREFETCH_TILES 4 /* tiles that prefetch the next block, a quarter each */

int embed_fweights_init(embed_fweights *q, const float *w, size_t out, size_t in)
{
    memset(q, 0, sizeof(*q));
    if (out == 0 || in == 0)
        return -EINVAL;
    size_t out_pad = (out + FBLOCK - 1) / FBLOCK * FBLOCK;
    q->packed = aligned_alloc(64, out_pad * in * sizeof(float));
    if (!q->packed)
        return -ENOMEM;
    q->in = in, q->out = out, q->out_pad = out_pad;
    for (size_t j = 0; j < out_pad; j += FBLOCK) {
        float *blk = q->packed + j * in;
        for (size_t k = 0; k < in; k++)
            for (size_t i = 0; i < FBLOCK; i++)
                blk[k * FBLOCK + i] = j + i < out ? w[(j + i) * in + k] : 0.0f;
    }
    return 0;
}

void embed_fweights_free(embed_fweights *q)
{
    free(q->packed);
    memset(q, 0, sizeof(*q));
}

#if defined(__x86_64__)
#include "vmath.h"

#include <immintrin.h>
#define FAVX512 __attribute__((target("avx512f")))

bool embed_sgemm_packed_available(void)
{
    return !portable_only && __builtin_cpu_supports("avx512f");
}

/* @rows (1..6, a constant after inlining) rows of @x times the 64 outputs
 * of the block at @wp, from output @o0 on, into @y; meanwhile one cache
 * line a step from @pf on (@in lines) is asked into L2. */
FAVX512 static inline __attribute__((always_inline)) void
ftile(const int rows, const float *x, size_t ldx, const float *wp, size_t in,
      const embed_fweights *w, size_t o0, const float *bias, float *y, size_t ldy,
      embed_epilogue epi, const float *pf)
{
    __m512 acc[FTILE_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < FTILE_ROWS; r++)
        if (r < rows)
            for (int c = 0; c < 4; c++)
                acc[r][c] = _mm512_setzero_ps();
    for (size_t k = 0; k < in; k++) {
        const float *wk = wp + k * FBLOCK;
        _mm_prefetch((const char *)(pf + k * 16), _MM_HINT_T1);
        __m512 w0 = _mm512_load_ps(wk), w1 = _mm512_load_ps(wk + 16);
        __m512 w2 = _mm512_load_ps(wk + 32), w3 = _mm512_load_ps(wk + 48);
#pragma GCC unroll 6
        for (int r = 0; r < FTILE_ROWS; r++) {
            if (r >= rows)
                continue;
            __m512 a = _mm512_set1_ps(x[(size_t)r * ldx + k]);
            acc[r][0] = _mm512_fmadd_ps(a, w0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(a, w1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(a, w2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(a, w3, acc[r][3]);
        }
    }
    for (int c = 0; c < 4; c++) {
        size_t o = o0 + (size_t)c * 16;
        if (o >= w->out)
            break;
        __mmask16 m = embed_tail_mask(o, w->out);
        __m512 b = _mm512_maskz_loadu_ps(m, bias + o);
#pragma GCC unroll 6
        for (int r = 0; r < FTILE_ROWS; r++) {
            if (r >= rows)
                continue;
            float *dst = y + (size_t)r * ldy + o;
            __m512 v = _mm512_add_ps(acc[r][c], b);
            if (epi == EMBED_EPI_BIAS_ADD)
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, dst));
            else if (epi == EMBED_EPI_BIAS_GELU)
                v = embed_gelu16(v);
            _mm512_mask_storeu_ps(dst, m, v);
        }
    }
}

FAVX512 void embed_sgemm_packed(const float *x, size_t n, size_t ldx, const embed_fweights *w,
                                const float *b, float *y, size_t ldy, embed_epilogue epi)
{
    /* Rows a chunk at a time, so that a chunk (~128 KiB) stays in L2 while
     * every block of weights passes over it once. */
    size_t chunk = 32768 / w->in / FTILE_ROWS * FTILE_ROWS;
    chunk = chunk < FTILE_ROWS ? FTILE_ROWS : chunk;
    for (size_t r0 = 0; r0 < n; r0 += chunk) {
        size_t end = n - r0 < chunk ? n : r0 + chunk;
        for (size_t o0 = 0; o0 < w->out; o0 += FBLOCK) {
            const float *wp = w->packed + o0 * w->in;
            /* The first FPREFETCH_TILES tiles of a block bring the next
             * block (in x 256 bytes: in lines each) from L3 or memory into
             * L2, so that its first tile does not wait for it: without
             * this, every block's first tile ran at the rate weights
             * stream in (a float32 pass of one text took 1.14x the CPU
             * time). Past the last block (or tile) they touch this block
             * again, in cache. */
            const float *next = o0 + FBLOCK < w->out ? wp + FBLOCK * w->in : wp;
            size_t r = r0, tile = 0;
#define FTILE(rows)                                                                                \
    ftile(rows, x + r * ldx, ldx, wp, w->in, w, o0, b, y + r * ldy, ldy, epi,                      \
          tile < FPREFETCH_TILES ? next + tile * w->in * 16 : wp)
            for (; r + FTILE_ROWS <= end; r += FTILE_ROWS, tile++)
                FTILE(6);
            switch (end - r) {
            case 5: FTILE(5); break;
            case 4: FTILE(4); break;
            case 3: FTILE(3); break;
            case 2: FTILE(2); break;
            case 1: FTILE(1); break;
            default: break;
            }
#undef FTILE
        }
    }
}
#else
bool embed_sgemm_packed_available(void)
{
    return false;
}

void embed_sgemm_packed(const float *x, size_t n, size_t ldx, const embed_fweights *w,
                        const float *b, float *y, size_t ldy, embed_epilogue epi)
{
    (void)x, (void)n, (void)ldx, (void)w, (void)b, (void)y, (void)ldy, (void)epi;
}
#endif
