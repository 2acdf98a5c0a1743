/*
 * The BERT forward pass (see coring/embed/bert.h).
 *
 * Per batch, with N = the tokens of all sequences stacked (no padding):
 *   x = LayerNorm(word[id] + position[t] + token_type[0])          [N, H]
 *   per layer:
 *     q, k, v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv                [N, H]
 *     per sequence and head: ctx = softmax(q k^T / sqrt(d)) v       [L, d]
 *     x = LayerNorm(x + ctx Wo^T + bo)
 *     x = LayerNorm(x + GELU(x Wi^T + bi) Wo2^T + bo2)              [N, I] inside
 *   out[b] = mean of x over sequence b's rows
 * Linear layers compute "bias rows, then sgemm with beta = 1".
 */
#include "coring/embed/bert.h"

#include "coring/core/json.h"
#include "coring/embed/blas.h"
#include "coring/embed/qgemm.h"
#include "vmath.h"

#include <cblas.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct bert_layer {
    const float *query_w, *query_b, *key_w, *key_b, *value_w, *value_b;
    const float *attn_out_w, *attn_out_b, *attn_norm_w, *attn_norm_b;
    const float *inter_w, *inter_b, *out_w, *out_b, *out_norm_w, *out_norm_b;
} bert_layer;

/* A layer's float32 linear weights packed once at load (embed_fweights). */
typedef struct bert_flayer {
    embed_fweights query, key, value, attn_out, inter, out;
} bert_flayer;

/* A layer's linear weights in int8 (embed_bert_quantize_int8). */
typedef struct bert_qlayer {
    embed_qweights query, key, value, attn_out, inter, out;
} bert_qlayer;

struct embed_bert {
    embed_bert_config cfg;
    const embed_safetensors *st;
    const float *word, *position, *token_type, *emb_norm_w, *emb_norm_b;
    bert_layer *layers;
    bert_qlayer *qlayers; /* NULL: float32 linear layers */
    bert_flayer *flayers; /* NULL: OpenBLAS on the unpacked weights */
};

struct embed_bert_workspace {
    float *block;  /* one allocation holding the arrays below */
    size_t floats; /* its size */
    float *x, *q, *k, *v, *ctx, *inter, *scores;
    /* int8 models: one quantised input, its rows' scales and zero points */
    uint8_t *xq;
    size_t xq_bytes;
    float *xs;
    int32_t *xz;
    size_t rows;
};

/* Rows per pass through the feed-forward block in int8: its [rows, 1536]
 * intermediate then stays in L2 between the first product, GELU,
 * quantisation and the second product; the same with float32 weights
 * packed once (with OpenBLAS, which repacks the weights on every call,
 * all rows at once). */
#ifndef FFN_ROWS_INT8
#define FFN_ROWS_INT8 64
#endif

/* --- config.json ---------------------------------------------------------- */

static int config_uint(cr_json_value root, const char *key, unsigned min, unsigned max,
                       unsigned *out, bool required, char *err, size_t err_len)
{
    cr_json_value v;
    if (cr_json_object_get(root, key, strlen(key), &v) != CR_JSON_OK) {
        if (!required)
            return 0;
        snprintf(err, err_len, "config.json: missing \"%s\"", key);
        return -EINVAL;
    }
    uint64_t n;
    if (cr_json_get_uint64(v, &n) != CR_JSON_OK || n < min || n > max) {
        snprintf(err, err_len, "config.json: \"%s\" must be an integer from %u to %u", key, min,
                 max);
        return -EINVAL;
    }
    *out = (unsigned)n;
    return 0;
}

int embed_bert_config_parse(const char *json, size_t len, embed_bert_config *cfg, char *err,
                            size_t err_len)
{
    *cfg =
        (embed_bert_config){.type_vocab_size = 2, .layer_norm_eps = 1e-12f, .max_positions = 512};
    cr_json_parser *p = cr_json_parser_create(len + 64, 32);
    if (!p) {
        snprintf(err, err_len, "out of memory");
        return -ENOMEM;
    }
    int ret = -EINVAL;
    cr_json_value root, v;
    const char *s;
    size_t slen;
    cr_json_error jerr = cr_json_parse(p, json, len, &root);
    if (jerr != CR_JSON_OK || cr_json_type_of(root) != CR_JSON_OBJECT) {
        snprintf(err, err_len, "config.json: not a JSON object (%s)",
                 jerr ? cr_json_error_message(jerr) : "wrong type");
        goto out;
    }
    if (cr_json_object_get(root, "model_type", 10, &v) == CR_JSON_OK &&
        (cr_json_get_string(v, &s, &slen) != CR_JSON_OK || slen != 4 || memcmp(s, "bert", 4))) {
        snprintf(err, err_len, "config.json: model_type must be \"bert\"");
        goto out;
    }
    if (cr_json_object_get(root, "hidden_act", 10, &v) == CR_JSON_OK &&
        (cr_json_get_string(v, &s, &slen) != CR_JSON_OK || slen != 4 || memcmp(s, "gelu", 4))) {
        snprintf(err, err_len, "config.json: hidden_act must be \"gelu\" (exact erf GELU)");
        goto out;
    }
    if (config_uint(root, "vocab_size", 1, 1u << 22, &cfg->vocab_size, true, err, err_len) ||
        config_uint(root, "hidden_size", 1, 16384, &cfg->hidden_size, true, err, err_len) ||
        config_uint(root, "num_hidden_layers", 1, 256, &cfg->num_layers, true, err, err_len) ||
        config_uint(root, "num_attention_heads", 1, 1024, &cfg->num_heads, true, err, err_len) ||
        config_uint(root, "intermediate_size", 1, 65536, &cfg->intermediate_size, true, err,
                    err_len) ||
        config_uint(root, "max_position_embeddings", 2, 65536, &cfg->max_positions, false, err,
                    err_len) ||
        config_uint(root, "type_vocab_size", 1, 1024, &cfg->type_vocab_size, false, err, err_len))
        goto out;
    if (cfg->hidden_size % cfg->num_heads) {
        snprintf(err, err_len,
                 "config.json: hidden_size %u is not a multiple of num_attention_heads %u",
                 cfg->hidden_size, cfg->num_heads);
        goto out;
    }
    if (cr_json_object_get(root, "layer_norm_eps", 14, &v) == CR_JSON_OK) {
        double eps;
        if (cr_json_get_double(v, &eps) != CR_JSON_OK || !(eps > 0 && eps < 1)) {
            snprintf(err, err_len, "config.json: layer_norm_eps must be a number in (0, 1)");
            goto out;
        }
        cfg->layer_norm_eps = (float)eps;
    }
    ret = 0;
out:
    cr_json_parser_destroy(p);
    return ret;
}

/* --- weights ---------------------------------------------------------------- */

/* The F32 tensor @name (tried as given, then with "bert."), of shape
 * [d0] or [d0, d1] (d1 == 0 for one dimension). NULL with a message. */
static const float *weight(const embed_safetensors *st, const char *name, int64_t d0, int64_t d1,
                           char *err, size_t err_len)
{
    char prefixed[160];
    snprintf(prefixed, sizeof(prefixed), "bert.%s", name);
    const embed_tensor *t = embed_safetensors_find(st, name);
    if (!t)
        t = embed_safetensors_find(st, prefixed);
    if (!t) {
        snprintf(err, err_len, "model.safetensors: missing tensor %s (or %s)", name, prefixed);
        return NULL;
    }
    if (strcmp(t->dtype, "F32") != 0) {
        snprintf(err, err_len, "model.safetensors: tensor %s is %s; only F32 is supported", t->name,
                 t->dtype);
        return NULL;
    }
    unsigned ndim = d1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        char got[96] = "";
        size_t used = 0;
        for (unsigned i = 0; i < t->ndim && used < sizeof(got); i++)
            used += (size_t)snprintf(got + used, sizeof(got) - used, "%s%lld", i ? ", " : "",
                                     (long long)t->shape[i]);
        if (d1)
            snprintf(err, err_len,
                     "model.safetensors: tensor %s has shape [%s], expected [%lld, %lld]", t->name,
                     got, (long long)d0, (long long)d1);
        else
            snprintf(err, err_len, "model.safetensors: tensor %s has shape [%s], expected [%lld]",
                     t->name, got, (long long)d0);
        return NULL;
    }
    return t->data;
}

/* Free @n layers of packed float32 weights (any possibly empty) and @f. */
static void free_flayers(bert_flayer *f, unsigned n)
{
    for (unsigned i = 0; f && i < n; i++) {
        embed_fweights *all[] = {&f[i].query,    &f[i].key,   &f[i].value,
                                 &f[i].attn_out, &f[i].inter, &f[i].out};
        for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); j++)
            embed_fweights_free(all[j]);
    }
    free(f);
}

/* Pack every linear layer's weights for embed_sgemm_packed; the mapped
 * originals leave the resident set (read again from the file only by
 * embed_bert_quantize_int8). */
static int pack_float32(embed_bert *m)
{
    const embed_bert_config *c = &m->cfg;
    size_t h = c->hidden_size, inter = c->intermediate_size;
    bert_flayer *f = calloc(c->num_layers, sizeof(*f));
    if (!f)
        return -ENOMEM;
    for (unsigned i = 0; i < c->num_layers; i++) {
        const bert_layer *l = &m->layers[i];
        struct {
            embed_fweights *dst;
            const float *w;
            size_t out, in;
        } todo[] = {
            {&f[i].query, l->query_w, h, h},     {&f[i].key, l->key_w, h, h},
            {&f[i].value, l->value_w, h, h},     {&f[i].attn_out, l->attn_out_w, h, h},
            {&f[i].inter, l->inter_w, inter, h}, {&f[i].out, l->out_w, h, inter},
        };
        for (size_t j = 0; j < sizeof(todo) / sizeof(todo[0]); j++) {
            int err = embed_fweights_init(todo[j].dst, todo[j].w, todo[j].out, todo[j].in);
            if (err < 0) {
                free_flayers(f, c->num_layers);
                return err;
            }
            embed_safetensors_drop(m->st, todo[j].w, todo[j].out * todo[j].in * sizeof(float));
        }
    }
    m->flayers = f;
    return 0;
}

int embed_bert_load(const embed_bert_config *cfg, const embed_safetensors *st, embed_bert **out,
                    char *err, size_t err_len)
{
    *out = NULL;
    int ret;
    embed_bert *m = calloc(1, sizeof(*m));
    if (!m || !(m->layers = calloc(cfg->num_layers, sizeof(*m->layers)))) {
        free(m);
        snprintf(err, err_len, "out of memory");
        return -ENOMEM;
    }
    m->cfg = *cfg;
    m->st = st;
    int64_t h = cfg->hidden_size, inter = cfg->intermediate_size;
#define W(dst, name, d0, d1)                                                                       \
    do {                                                                                           \
        if (!((dst) = weight(st, (name), (d0), (d1), err, err_len)))                               \
            goto bad;                                                                              \
    } while (0)
    W(m->word, "embeddings.word_embeddings.weight", cfg->vocab_size, h);
    W(m->position, "embeddings.position_embeddings.weight", cfg->max_positions, h);
    W(m->token_type, "embeddings.token_type_embeddings.weight", cfg->type_vocab_size, h);
    W(m->emb_norm_w, "embeddings.LayerNorm.weight", h, 0);
    W(m->emb_norm_b, "embeddings.LayerNorm.bias", h, 0);
    for (unsigned i = 0; i < cfg->num_layers; i++) {
        bert_layer *l = &m->layers[i];
        char name[128];
#define LW(dst, suffix, d0, d1)                                                                    \
    do {                                                                                           \
        snprintf(name, sizeof(name), "encoder.layer.%u.%s", i, (suffix));                          \
        W(dst, name, d0, d1);                                                                      \
    } while (0)
        LW(l->query_w, "attention.self.query.weight", h, h);
        LW(l->query_b, "attention.self.query.bias", h, 0);
        LW(l->key_w, "attention.self.key.weight", h, h);
        LW(l->key_b, "attention.self.key.bias", h, 0);
        LW(l->value_w, "attention.self.value.weight", h, h);
        LW(l->value_b, "attention.self.value.bias", h, 0);
        LW(l->attn_out_w, "attention.output.dense.weight", h, h);
        LW(l->attn_out_b, "attention.output.dense.bias", h, 0);
        LW(l->attn_norm_w, "attention.output.LayerNorm.weight", h, 0);
        LW(l->attn_norm_b, "attention.output.LayerNorm.bias", h, 0);
        LW(l->inter_w, "intermediate.dense.weight", inter, h);
        LW(l->inter_b, "intermediate.dense.bias", inter, 0);
        LW(l->out_w, "output.dense.weight", h, inter);
        LW(l->out_b, "output.dense.bias", h, 0);
        LW(l->out_norm_w, "output.LayerNorm.weight", h, 0);
        LW(l->out_norm_b, "output.LayerNorm.bias", h, 0);
#undef LW
    }
#undef W
    if (embed_sgemm_packed_available() && (ret = pack_float32(m)) < 0) {
        snprintf(err, err_len, "out of memory packing the weights");
        embed_bert_free(m);
        return ret;
    }
    *out = m;
    return 0;
bad:
    embed_bert_free(m);
    return -EINVAL;
}

/* Free @n layers of int8 weights (any of them possibly empty) and @q. */
static void free_qlayers(bert_qlayer *q, unsigned n)
{
    for (unsigned i = 0; q && i < n; i++) {
        embed_qweights *all[] = {&q[i].query,    &q[i].key,   &q[i].value,
                                 &q[i].attn_out, &q[i].inter, &q[i].out};
        for (size_t j = 0; j < sizeof(all) / sizeof(all[0]); j++)
            embed_qweights_free(all[j]);
    }
    free(q);
}

void embed_bert_free(embed_bert *m)
{
    if (!m)
        return;
    free_qlayers(m->qlayers, m->cfg.num_layers);
    free_flayers(m->flayers, m->cfg.num_layers);
    free(m->layers);
    free(m);
}

const embed_bert_config *embed_bert_config_of(const embed_bert *m)
{
    return &m->cfg;
}

int embed_bert_quantize_int8(embed_bert *m)
{
    if (m->qlayers)
        return 0;
    const embed_bert_config *c = &m->cfg;
    size_t h = c->hidden_size, inter = c->intermediate_size;
    bert_qlayer *q = calloc(c->num_layers, sizeof(*q));
    if (!q)
        return -ENOMEM;
    for (unsigned i = 0; i < c->num_layers; i++) {
        const bert_layer *l = &m->layers[i];
        struct {
            embed_qweights *dst;
            const float *w;
            size_t out, in;
        } todo[] = {
            {&q[i].query, l->query_w, h, h},     {&q[i].key, l->key_w, h, h},
            {&q[i].value, l->value_w, h, h},     {&q[i].attn_out, l->attn_out_w, h, h},
            {&q[i].inter, l->inter_w, inter, h}, {&q[i].out, l->out_w, h, inter},
        };
        for (size_t j = 0; j < sizeof(todo) / sizeof(todo[0]); j++) {
            int err = embed_qweights_init(todo[j].dst, todo[j].w, todo[j].out, todo[j].in);
            if (err < 0) {
                free_qlayers(q, c->num_layers);
                return err;
            }
            /* The float32 copy is not read again: out of the resident set. */
            embed_safetensors_drop(m->st, todo[j].w, todo[j].out * todo[j].in * sizeof(float));
        }
    }
    m->qlayers = q;
    free_flayers(m->flayers, c->num_layers); /* not used again */
    m->flayers = NULL;
    return 0;
}

/* --- workspace ------------------------------------------------------------ */

/* Heads at most this wide take the fused attention kernel. */
#define ATTN_MAX_D 256
/* Query rows per tile of that kernel: independent FMA chains per key
 * block and per output vector, each load of K or V shared by them. */
#define ATTN_TILE 8

embed_bert_workspace *embed_bert_workspace_create(void)
{
    return calloc(1, sizeof(embed_bert_workspace));
}

void embed_bert_workspace_free(embed_bert_workspace *ws)
{
    if (!ws)
        return;
    free(ws->block);
    free(ws->xq);
    free(ws->xs);
    free(ws->xz);
    free(ws);
}

/* Scratch floats for the attention of a sequence of @longest tokens with
 * heads @d wide: its score matrix (the OpenBLAS path) or the fused
 * kernel's transposed K and score rows (attention_head_avx512). */
static size_t attention_scratch(size_t longest, size_t d)
{
    size_t fused = (ATTN_TILE + d) * ((longest + 15) / 16 * 16);
    return fused > longest * longest ? fused : longest * longest;
}

/* Room for @tokens rows (@h wide), @ffn_rows of the intermediate (@inter
 * wide) and @parts attention scratch areas of @scratch floats (one per
 * thread of a split pass). */
static int workspace_fit(embed_bert_workspace *ws, size_t tokens, size_t ffn_rows, size_t scratch,
                         size_t h, size_t inter, size_t parts)
{
    size_t need = tokens * h * 5 + ffn_rows * inter + scratch * parts;
    if (need > ws->floats) {
        float *block = malloc(need * sizeof(float));
        if (!block)
            return -ENOMEM;
        free(ws->block);
        ws->block = block;
        ws->floats = need;
    }
    float *p = ws->block;
    ws->x = p, p += tokens * h;
    ws->q = p, p += tokens * h;
    ws->k = p, p += tokens * h;
    ws->v = p, p += tokens * h;
    ws->ctx = p, p += tokens * h;
    ws->inter = p, p += ffn_rows * inter;
    ws->scores = p;
    return 0;
}

/* Room for @tokens quantised rows of up to @width bytes. */
static int workspace_fit_int8(embed_bert_workspace *ws, size_t tokens, size_t width)
{
    if (tokens * width > ws->xq_bytes) {
        uint8_t *xq = malloc(tokens * width);
        if (!xq)
            return -ENOMEM;
        free(ws->xq);
        ws->xq = xq;
        ws->xq_bytes = tokens * width;
    }
    if (tokens > ws->rows) {
        float *xs = malloc(tokens * sizeof(float));
        int32_t *xz = malloc(tokens * sizeof(int32_t));
        if (!xs || !xz) {
            free(xs);
            free(xz);
            return -ENOMEM;
        }
        free(ws->xs);
        free(ws->xz);
        ws->xs = xs, ws->xz = xz, ws->rows = tokens;
    }
    return 0;
}

/* --- kernels ------------------------------------------------------------------ */

/*
 * The element-wise kernels (LayerNorm, GELU, softmax) in AVX-512 where the
 * CPU has it: at 30 tokens they are a third of a forward pass once the
 * linear layers run in int8, most of it in scalar erff and expf calls.
 * exp and GELU come from vmath.h, inline.
 */
#if defined(__x86_64__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

static bool have_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && !embed_kernels_portable();
}

/* Over the @h floats of @row, the sum of x - @mean, or with @squares (a
 * constant once inlined) of its squares, in four chains of 16 lanes (one
 * chain waited on each add's latency: 24 in a row at hidden 384). */
AVX512 static inline __attribute__((always_inline)) float row_sum(const float *row, size_t h,
                                                                 __m512 mean, const bool squares)
{
    __m512 sum[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        sum[i] = _mm512_setzero_ps();
    size_t j = 0;
    for (; j + 64 <= h; j += 64)
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(row + j + 16 * i), mean);
            sum[i] = squares ? _mm512_fmadd_ps(d, d, sum[i]) : _mm512_add_ps(sum[i], d);
        }
    for (; j < h; j += 16) {
        __mmask16 m = embed_tail_mask(j, h);
        __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, row + j), mean);
        sum[0] = squares ? _mm512_fmadd_ps(d, d, sum[0]) : _mm512_add_ps(sum[0], d);
    }
    return _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(sum[0], sum[1]), _mm512_add_ps(sum[2], sum[3])));
}

AVX512 static void layer_norm_avx512(float *x, size_t n, size_t h, const float *w, const float *b,
                                     float eps)
{
    for (size_t r = 0; r < n; r++) {
        float *row = x + r * h;
        __m512 mean = _mm512_set1_ps(row_sum(row, h, _mm512_setzero_ps(), false) / (float)h);
        __m512 inv = _mm512_set1_ps(1.0f / sqrtf(row_sum(row, h, mean, true) / (float)h + eps));
        for (size_t j = 0; j < h; j += 16) {
            __mmask16 m = embed_tail_mask(j, h);
            __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, row + j), mean), inv);
            d = _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(m, w + j),
                                _mm512_maskz_loadu_ps(m, b + j));
            _mm512_mask_storeu_ps(row + j, m, d);
        }
    }
}

/* dst = a + b + c over @n floats (the embedding layer's sum). */
AVX512 static void add3_avx512(float *dst, const float *a, const float *b, const float *c, size_t n)
{
    for (size_t j = 0; j < n; j += 16) {
        __mmask16 m = embed_tail_mask(j, n);
        __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + j), _mm512_maskz_loadu_ps(m, b + j));
        _mm512_mask_storeu_ps(dst + j, m, _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, c + j)));
    }
}

/* embed_mean_pool in AVX-512 (@tokens > 0): 128 columns a sweep over
 * the rows, their sums in registers. */
AVX512 static void mean_pool_avx512(const float *hidden, size_t tokens, size_t dim, float *out)
{
    for (size_t j0 = 0; j0 < dim; j0 += 128) { /* 8 vectors of columns a sweep */
        __m512 acc[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            acc[i] = _mm512_setzero_ps();
        for (size_t t = 0; t < tokens; t++)
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) {
                size_t j = j0 + (size_t)i * 16;
                if (j < dim)
                    acc[i] = _mm512_add_ps(
                        acc[i], _mm512_maskz_loadu_ps(embed_tail_mask(j, dim), hidden + t * dim + j));
            }
        __m512 inv = _mm512_set1_ps(1.0f / (float)tokens);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            size_t j = j0 + (size_t)i * 16;
            if (j < dim)
                _mm512_mask_storeu_ps(out + j, embed_tail_mask(j, dim), _mm512_mul_ps(acc[i], inv));
        }
    }
}

AVX512 static void gelu_avx512(float *x, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 m = embed_tail_mask(i, n);
        _mm512_mask_storeu_ps(x + i, m, embed_gelu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

/* Each of @rows rows (@ld floats apart) of @s over its first @cols:
 * softmax of @scale times the row, in place (@scale > 0). */
AVX512 static void softmax_rows_avx512(float *s, size_t rows, size_t cols, size_t ld, float scale)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    for (size_t r = 0; r < rows; r++) {
        float *row = s + r * ld;
        __m512 max = _mm512_set1_ps(row[0]);
        for (size_t j = 0; j < cols; j += 16) {
            __mmask16 m = embed_tail_mask(j, cols);
            max = _mm512_mask_max_ps(max, m, max, _mm512_maskz_loadu_ps(m, row + j));
        }
        __m512 top = _mm512_mul_ps(_mm512_set1_ps(_mm512_reduce_max_ps(max)), vscale);
        __m512 sum = _mm512_setzero_ps();
        for (size_t j = 0; j < cols; j += 16) {
            __mmask16 m = embed_tail_mask(j, cols);
            __m512 e = embed_exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(m, row + j), vscale, top));
            e = _mm512_maskz_mov_ps(m, e);
            sum = _mm512_add_ps(sum, e);
            _mm512_mask_storeu_ps(row + j, m, e);
        }
        __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
        for (size_t j = 0; j < cols; j += 16) {
            __mmask16 m = embed_tail_mask(j, cols);
            _mm512_mask_storeu_ps(row + j, m,
                                  _mm512_mul_ps(_mm512_maskz_loadu_ps(m, row + j), inv));
        }
    }
}

/* kt[c][j] = k[j][c] for the @len rows of @k (@ld floats apart, @d
 * columns, @d a multiple of 16) into @kt (rows @len16 floats, lanes past
 * @len zero), a 16 x 16 block at a time in registers: 16 row loads, four
 * rounds of in-lane and cross-lane shuffles, 16 column stores (element by
 * element it was a fifth of the attention kernel's time). */
AVX512 static void transpose_k(const float *k, size_t len, size_t d, size_t ld, float *kt,
                               size_t len16)
{
    for (size_t j0 = 0; j0 < len16; j0 += 16)
        for (size_t c0 = 0; c0 < d; c0 += 16) {
            __m512 r[16], t[16];
            for (size_t i = 0; i < 16; i++)
                r[i] = j0 + i < len ? _mm512_loadu_ps(k + (j0 + i) * ld + c0) : _mm512_setzero_ps();
            /* t[2i], t[2i + 1]: rows 2i and 2i + 1 interleaved in each
             * 128-bit lane (columns 4L + 0, 1 and 4L + 2, 3 of lane L) */
            for (size_t i = 0; i < 8; i++) {
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            /* r[4g + e]: rows 4g .. 4g + 3 of column 4L + e in lane L */
            for (size_t g = 0; g < 4; g++) {
                __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
                __m512d c = _mm512_castps_pd(t[4 * g + 2]), e = _mm512_castps_pd(t[4 * g + 3]);
                r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
                r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
                r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, e));
                r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, e));
            }
            /* column 4L + e: lane L of r[e], r[4 + e], r[8 + e], r[12 + e] */
            for (size_t e = 0; e < 4; e++) {
                __m512 lo01 = _mm512_shuffle_f32x4(r[e], r[4 + e], _MM_SHUFFLE(1, 0, 1, 0));
                __m512 lo23 = _mm512_shuffle_f32x4(r[e], r[4 + e], _MM_SHUFFLE(3, 2, 3, 2));
                __m512 hi01 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], _MM_SHUFFLE(1, 0, 1, 0));
                __m512 hi23 = _mm512_shuffle_f32x4(r[8 + e], r[12 + e], _MM_SHUFFLE(3, 2, 3, 2));
                float *col = kt + (c0 + e) * len16 + j0;
                _mm512_storeu_ps(col, _mm512_shuffle_f32x4(lo01, hi01, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_storeu_ps(col + 4 * len16,
                                 _mm512_shuffle_f32x4(lo01, hi01, _MM_SHUFFLE(3, 1, 3, 1)));
                _mm512_storeu_ps(col + 8 * len16,
                                 _mm512_shuffle_f32x4(lo23, hi23, _MM_SHUFFLE(2, 0, 2, 0)));
                _mm512_storeu_ps(col + 12 * len16,
                                 _mm512_shuffle_f32x4(lo23, hi23, _MM_SHUFFLE(3, 1, 3, 1)));
            }
        }
}

/* The ATTN_TILE query rows of a tile from row @i0 of @q (@len rows @ld
 * floats apart) into @qr: those past @len repeat row @i0, computed but
 * not stored. Returns how many are real. */
static inline size_t query_tile(const float *q, size_t i0, size_t len, size_t ld, const float **qr)
{
    size_t rows = len - i0 < ATTN_TILE ? len - i0 : ATTN_TILE;
#pragma GCC unroll 8
    for (size_t r = 0; r < ATTN_TILE; r++)
        qr[r] = q + (i0 + (r < rows ? r : 0)) * ld;
    return rows;
}

/* ctx = p v for a tile: @p, ATTN_TILE rows of @len16 probabilities (the
 * first @len used); @v, @len rows @ld floats apart, @d columns (a multiple
 * of 16); the first @rows rows of the result into @ctx (@ld apart). Two
 * output vectors a step, so that each load of V feeds 2 ATTN_TILE FMAs. */
AVX512 static inline __attribute__((always_inline)) void
attention_pv(const float *p, size_t len16, const float *v, size_t len, size_t d, size_t ld,
             float *ctx, size_t rows)
{
    for (size_t c = 0; c < d; c += 32) {
        const int two = c + 16 < d; /* a second output vector */
        __m512 o[ATTN_TILE][2];
#pragma GCC unroll 8
        for (size_t r = 0; r < ATTN_TILE; r++)
            o[r][0] = o[r][1] = _mm512_setzero_ps();
        for (size_t j = 0; j < len; j++) {
            __m512 v0 = _mm512_loadu_ps(v + j * ld + c);
            __m512 v1 = two ? _mm512_loadu_ps(v + j * ld + c + 16) : v0;
#pragma GCC unroll 8
            for (size_t r = 0; r < ATTN_TILE; r++) {
                __m512 pj = _mm512_set1_ps(p[r * len16 + j]);
                o[r][0] = _mm512_fmadd_ps(pj, v0, o[r][0]);
                o[r][1] = _mm512_fmadd_ps(pj, v1, o[r][1]);
            }
        }
        for (size_t r = 0; r < rows; r++) {
            _mm512_storeu_ps(ctx + r * ld + c, o[r][0]);
            if (two)
                _mm512_storeu_ps(ctx + r * ld + c + 16, o[r][1]);
        }
    }
}

/*
 * attention_head_avx512 for a sequence of at most 16 @nv tokens (@nv 1 to
 * 4, a constant once inlined): a tile's ATTN_TILE x @nv scores stay in
 * registers from q k^T through the softmax (the scale folded into its
 * exponent), and ctx = p v takes two output vectors a step, so that every
 * load of K or V feeds ATTN_TILE FMAs.
 */
AVX512 static inline __attribute__((always_inline)) void
attention_short(const int nv, const float *q, const float *k, const float *v, float *ctx,
                size_t len, size_t d, size_t ld, float scale, float *scratch)
{
    const size_t len16 = (size_t)nv * 16;
    float *kt = scratch + ATTN_TILE * len16, *p = scratch;
    transpose_k(k, len, d, ld, kt, len16);
    const __mmask16 last = embed_tail_mask((size_t)(nv - 1) * 16, len);
    const __m512 vscale = _mm512_set1_ps(scale);
    for (size_t i0 = 0; i0 < len; i0 += ATTN_TILE) {
        const float *qr[ATTN_TILE];
        size_t rows = query_tile(q, i0, len, ld, qr);
        __m512 s[ATTN_TILE][4];
#pragma GCC unroll 8
        for (size_t r = 0; r < ATTN_TILE; r++)
#pragma GCC unroll 4
            for (int b = 0; b < nv; b++)
                s[r][b] = _mm512_setzero_ps();
        for (size_t c = 0; c < d; c++) {
            __m512 kc[4];
#pragma GCC unroll 4
            for (int b = 0; b < nv; b++)
                kc[b] = _mm512_loadu_ps(kt + c * len16 + (size_t)b * 16);
#pragma GCC unroll 8
            for (size_t r = 0; r < ATTN_TILE; r++) {
                __m512 qc = _mm512_set1_ps(qr[r][c]);
#pragma GCC unroll 4
                for (int b = 0; b < nv; b++)
                    s[r][b] = _mm512_fmadd_ps(qc, kc[b], s[r][b]);
            }
        }
#pragma GCC unroll 8
        for (size_t r = 0; r < ATTN_TILE; r++) {
            __m512 top = nv > 1 ? s[r][0] : _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 4
            for (int b = 1; b < nv - 1; b++)
                top = _mm512_max_ps(top, s[r][b]);
            top = _mm512_mask_max_ps(top, last, top, s[r][nv - 1]);
            top = _mm512_mul_ps(_mm512_set1_ps(_mm512_reduce_max_ps(top)), vscale);
            __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 4
            for (int b = 0; b < nv; b++) { /* lanes past len: finite in, 0 out */
                s[r][b] = embed_exp16(_mm512_fmsub_ps(s[r][b], vscale, top));
                if (b == nv - 1)
                    s[r][b] = _mm512_maskz_mov_ps(last, s[r][b]);
                sum = _mm512_add_ps(sum, s[r][b]);
            }
            __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum));
#pragma GCC unroll 4
            for (int b = 0; b < nv; b++)
                _mm512_storeu_ps(p + r * len16 + (size_t)b * 16, _mm512_mul_ps(s[r][b], inv));
        }
        attention_pv(p, len16, v, len, d, ld, ctx + i0 * ld, rows);
    }
}

/*
 * One sequence's head for @d a multiple of 16 (at most ATTN_MAX_D), with
 * no BLAS call (two OpenBLAS calls per sequence, head and layer cost more
 * than the arithmetic at 30 tokens). K is first copied transposed into
 * @scratch (kt[c][j] = k[j][c], rows len16 = @len rounded up to 16
 * floats), so that 16 scores of a query row are one FMA per column c with
 * q[i][c] broadcast, instead of a dot product and a horizontal sum per
 * score. Query rows go ATTN_TILE at a time: softmax per row over its
 * len16 scores (past @len masked off, @scale applied in the exponent),
 * then ctx = p v. Up to 64 tokens, attention_short, with the scores in
 * registers. @q, @k, @v, @ctx: @len rows @ld floats apart, from this
 * head's first column; @scratch: attention_scratch(@len, @d) floats.
 */
AVX512 static void attention_head_avx512(const float *q, const float *k, const float *v, float *ctx,
                                         size_t len, size_t d, size_t ld, float scale,
                                         float *scratch)
{
    switch ((len + 15) / 16) {
    case 1: attention_short(1, q, k, v, ctx, len, d, ld, scale, scratch); return;
    case 2: attention_short(2, q, k, v, ctx, len, d, ld, scale, scratch); return;
    case 3: attention_short(3, q, k, v, ctx, len, d, ld, scale, scratch); return;
    case 4: attention_short(4, q, k, v, ctx, len, d, ld, scale, scratch); return;
    }
    size_t len16 = (len + 15) / 16 * 16;
    float *kt = scratch + ATTN_TILE * len16, *scores = scratch;
    transpose_k(k, len, d, ld, kt, len16);
    for (size_t i0 = 0; i0 < len; i0 += ATTN_TILE) {
        const float *qr[ATTN_TILE];
        size_t rows = query_tile(q, i0, len, ld, qr);
        for (size_t jb = 0; jb < len16; jb += 16) {
            __m512 acc[ATTN_TILE];
#pragma GCC unroll 8
            for (size_t r = 0; r < ATTN_TILE; r++)
                acc[r] = _mm512_setzero_ps();
            for (size_t c = 0; c < d; c++) {
                __m512 kc = _mm512_loadu_ps(kt + c * len16 + jb);
#pragma GCC unroll 8
                for (size_t r = 0; r < ATTN_TILE; r++)
                    acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(qr[r][c]), kc, acc[r]);
            }
#pragma GCC unroll 8
            for (size_t r = 0; r < ATTN_TILE; r++)
                _mm512_storeu_ps(scores + r * len16 + jb, acc[r]);
        }
        softmax_rows_avx512(scores, rows, len, len16, scale);
        attention_pv(scores, len16, v, len, d, ld, ctx + i0 * ld, rows);
    }
}
#else
static bool have_avx512(void)
{
    return false;
}
#endif

/* Each of the @n rows of @x (@h wide): (x - mean) / sqrt(var + eps) * w + b. */
static void layer_norm(float *x, size_t n, size_t h, const float *w, const float *b, float eps)
{
#if defined(__x86_64__)
    if (have_avx512()) {
        layer_norm_avx512(x, n, h, w, b, eps);
        return;
    }
#endif
    for (size_t r = 0; r < n; r++) {
        float *row = x + r * h;
        double sum = 0, sq = 0;
        for (size_t j = 0; j < h; j++)
            sum += row[j];
        double mean = sum / (double)h;
        for (size_t j = 0; j < h; j++) {
            double d = row[j] - mean;
            sq += d * d;
        }
        float inv = (float)(1.0 / sqrt(sq / (double)h + eps));
        float fmean = (float)mean;
        for (size_t j = 0; j < h; j++)
            row[j] = (row[j] - fmean) * inv * w[j] + b[j];
    }
}

/* GELU with the exact error function: x/2 (1 + erf(x / sqrt 2)). */
static void gelu(float *x, size_t n)
{
#if defined(__x86_64__)
    if (have_avx512()) {
        gelu_avx512(x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        x[i] = embed_gelu1(x[i]);
}

static void softmax_rows(float *s, size_t rows, size_t cols)
{
#if defined(__x86_64__)
    if (have_avx512()) {
        softmax_rows_avx512(s, rows, cols, cols, 1.0f);
        return;
    }
#endif
    for (size_t r = 0; r < rows; r++) {
        float *row = s + r * cols;
        float max = row[0];
        for (size_t j = 1; j < cols; j++)
            max = row[j] > max ? row[j] : max;
        float sum = 0;
        for (size_t j = 0; j < cols; j++)
            sum += row[j] = expf(row[j] - max);
        float inv = 1.0f / sum;
        for (size_t j = 0; j < cols; j++)
            row[j] *= inv;
    }
}

bool embed_bert_avx512(void)
{
    return have_avx512();
}

void embed_mean_pool(const float *hidden, size_t tokens, size_t dim, float *out)
{
#if defined(__x86_64__)
    if (tokens > 0 && have_avx512()) {
        mean_pool_avx512(hidden, tokens, dim, out);
        return;
    }
#endif
    for (size_t j = 0; j < dim; j++)
        out[j] = 0;
    for (size_t t = 0; t < tokens; t++)
        for (size_t j = 0; j < dim; j++)
            out[j] += hidden[t * dim + j];
    float inv = 1.0f / (float)tokens;
    for (size_t j = 0; j < dim; j++)
        out[j] *= inv;
}

void embed_l2_normalize(float *v, size_t dim)
{
    double sq = 0;
    for (size_t j = 0; j < dim; j++)
        sq += (double)v[j] * v[j];
    double norm = sqrt(sq);
    float inv = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
    for (size_t j = 0; j < dim; j++)
        v[j] *= inv;
}

/* --- forward pass --------------------------------------------------------------- */

/* Check @count sequences' lengths and ids against @m's config and total
 * them: *@tokens rows in all, the *@longest sequence. 0 or -EINVAL. */
static int pass_size(const embed_bert *m, size_t count, const int32_t *const *ids,
                     const size_t *lens, size_t *tokens, size_t *longest)
{
    const embed_bert_config *c = &m->cfg;
    *tokens = *longest = 0;
    for (size_t b = 0; b < count; b++) {
        if (lens[b] == 0 || lens[b] > c->max_positions)
            return -EINVAL;
        for (size_t t = 0; t < lens[b]; t++)
            if (ids[b][t] < 0 || (unsigned)ids[b][t] >= c->vocab_size)
                return -EINVAL;
        *tokens += lens[b];
        *longest = lens[b] > *longest ? lens[b] : *longest;
    }
    return 0;
}

/* Attention of one (sequence, head): the head's @d columns at @off in
 * ws->q/k/v (rows @h wide, @len of them) into ws->ctx, with @scores room
 * for attention_scratch(@len, @d) floats. */
static void attention_one(embed_bert_workspace *ws, size_t off, size_t len, size_t d, size_t h,
                          float scale, float *scores)
{
#if defined(__x86_64__)
    if (d % 16 == 0 && d <= ATTN_MAX_D && have_avx512()) {
        attention_head_avx512(ws->q + off, ws->k + off, ws->v + off, ws->ctx + off, len, d, h,
                              scale, scores);
        return;
    }
#endif
    int n = (int)len;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, (int)d, scale, ws->q + off, (int)h,
                ws->k + off, (int)h, 0.0f, scores, n);
    softmax_rows(scores, len, len);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, (int)d, n, 1.0f, scores, n,
                ws->v + off, (int)h, 0.0f, ws->ctx + off, (int)h);
}

/* Ask for the q, k and v columns of (sequence, head) pair @i (@heads a
 * sequence; @b, @start: the sequence and first row of pair i - 1) to be
 * brought into cache while pair i - 1 computes: a head reads @d columns of
 * rows @h floats apart, a stride the hardware prefetchers do not follow,
 * and past one text q, k and v no longer fit in L2 (at 32 texts every
 * head's first touch of a row missed to L3: attention was 16 % of an int8
 * pass of 32 texts). */
static void attention_prefetch(const embed_bert_workspace *ws, const size_t *lens, size_t i,
                               size_t heads, size_t b, size_t start, size_t d, size_t h)
{
    if (i / heads != b) /* the next sequence's first head */
        start += lens[b++];
    size_t off = start * h + (i % heads) * d;
    for (size_t r = 0; r < lens[b]; r++)
        for (size_t c = 0; c < d; c += 64 / sizeof(float)) {
            __builtin_prefetch(ws->q + off + r * h + c);
            __builtin_prefetch(ws->k + off + r * h + c);
            __builtin_prefetch(ws->v + off + r * h + c);
        }
}

/* The embedding layer: row by row of the @count sequences (@tokens rows in
 * all), word + position + token type 0, then its LayerNorm, into @x. */
static void embeddings(const embed_bert *m, size_t count, const int32_t *const *ids,
                       const size_t *lens, size_t tokens, float *x)
{
    size_t h = m->cfg.hidden_size;
    for (size_t b = 0, row = 0; b < count; b++)
        for (size_t t = 0; t < lens[b]; t++, row++) {
            const float *w = m->word + (size_t)ids[b][t] * h, *p = m->position + t * h;
            float *dst = x + row * h;
#if defined(__x86_64__)
            if (have_avx512()) {
                add3_avx512(dst, w, p, m->token_type, h);
                continue;
            }
#endif
            for (size_t j = 0; j < h; j++)
                dst[j] = w[j] + p[j] + m->token_type[j];
        }
    layer_norm(x, tokens, h, m->emb_norm_w, m->emb_norm_b, m->cfg.layer_norm_eps);
}

/* Size @ws for a pass over @tokens rows, the @longest sequence, split in
 * @parts, and choose the rows the feed-forward block takes at a time
 * (*@ffn_rows: a chunk that stays in L2 with int8 or packed weights, all
 * rows with OpenBLAS). 0 or -ENOMEM. */
static int pass_workspace(const embed_bert *m, embed_bert_workspace *ws, size_t tokens,
                          size_t longest, unsigned parts, size_t *ffn_rows)
{
    const embed_bert_config *c = &m->cfg;
    size_t h = c->hidden_size, inter = c->intermediate_size, d = h / c->num_heads;
    *ffn_rows = (m->qlayers || m->flayers) && tokens > FFN_ROWS_INT8 ? FFN_ROWS_INT8 : tokens;
    if (workspace_fit(ws, tokens, *ffn_rows, attention_scratch(longest, d), h, inter, parts) < 0)
        return -ENOMEM;
    if (m->qlayers && workspace_fit_int8(ws, tokens, (inter > h ? inter : h) + 3) < 0)
        return -ENOMEM;
    return 0;
}

int embed_bert_encode(const embed_bert *m, embed_bert_workspace *ws, size_t count,
                      const int32_t *const *ids, const size_t *lens, float *const *out)
{
    /* The split pass with no helpers: its barriers return at once. */
    embed_bert_team alone = {.parts = 1};
    return embed_bert_encode_split(m, ws, count, ids, lens, out, &alone);
}

/* --- the layers: on one thread, or split across several ---------------------- */

/* Iterations a thread spins at a barrier before it sleeps (each a pause
 * instruction, ~10-140 cycles): a step of a split pass lasts tens of
 * microseconds, so the wait is usually over before the spin is. */
#define BARRIER_SPIN 4000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Wait until all @t->parts participants have arrived (futex(2): the
 * sleepers count is read after the generation moves on, and a sleeper
 * counts itself before FUTEX_WAIT compares the generation, so no wake-up
 * is lost). The last to arrive resets the count for the next barrier. */
static void team_barrier(embed_bert_team *t)
{
    unsigned g = atomic_load(&t->gen);
    if (atomic_fetch_add(&t->count, 1) + 1 == t->parts) {
        atomic_store(&t->count, 0);
        atomic_fetch_add(&t->gen, 1);
        if (atomic_load(&t->sleepers))
            syscall(SYS_futex, &t->gen, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        return;
    }
    for (unsigned i = 0; i < BARRIER_SPIN; i++) {
        if (atomic_load_explicit(&t->gen, memory_order_acquire) != g)
            return;
        cpu_relax();
    }
    atomic_fetch_add(&t->sleepers, 1);
    while (atomic_load(&t->gen) == g)
        syscall(SYS_futex, &t->gen, FUTEX_WAIT_PRIVATE, g, NULL, NULL, 0);
    atomic_fetch_sub(&t->sleepers, 1);
}

/* Part @part of @parts of [0, @n): [*lo, *hi). */
static void share(size_t n, unsigned part, unsigned parts, size_t *lo, size_t *hi)
{
    *lo = n * part / parts;
    *hi = n * (part + 1) / parts;
}

/* Output columns of the split products go in blocks of this many (the
 * packed kernel's block: a part starts on one). */
#define SPLIT_COLS 64

/* Columns [c0, c1) of y[n, out] = x[n, in] W^T + b, then as @epi says
 * (the GELU applied here in the OpenBLAS path): with @fw
 * packed, in int8 with @qw (@ws holding x quantised), else OpenBLAS on
 * @w. */
static void dense_cols(const embed_bert_workspace *ws, const float *x, size_t n, size_t in,
                       const float *w, const embed_qweights *qw, const embed_fweights *fw,
                       const float *b, size_t out, float *y, size_t c0, size_t c1,
                       embed_epilogue epi)
{
    if (c0 >= c1)
        return;
    if (qw) { /* a view of blocks c0 / 64 .. (c1 - 1) / 64 of the packed matrix */
        embed_qweights view = *qw;
        view.packed = qw->packed + c0 * qw->in_pad;
        view.scale = qw->scale + c0;
        view.colsum = qw->colsum + c0;
        view.out = c1 - c0;
        view.out_pad = (c1 - c0 + SPLIT_COLS - 1) / SPLIT_COLS * SPLIT_COLS;
        embed_qgemm(ws->xq, n, qw->in_pad, ws->xs, ws->xz, &view, b + c0, y + c0, out, epi);
        return;
    }
    if (fw) {
        embed_fweights view = *fw;
        view.packed = fw->packed + c0 * in;
        view.out = c1 - c0;
        view.out_pad = (c1 - c0 + SPLIT_COLS - 1) / SPLIT_COLS * SPLIT_COLS;
        embed_sgemm_packed(x, n, in, &view, b + c0, y + c0, out, epi);
        return;
    }
    for (size_t r = 0; r < n; r++) {
        float *row = y + r * out + c0;
        if (epi == EMBED_EPI_BIAS_ADD)
            for (size_t j = c0; j < c1; j++)
                row[j - c0] += b[j];
        else
            memcpy(row, b + c0, (c1 - c0) * sizeof(float));
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)(c1 - c0), (int)in, 1.0f, x,
                (int)in, w + c0 * in, (int)in, 1.0f, y + c0, (int)out);
    if (epi == EMBED_EPI_BIAS_GELU)
        for (size_t r = 0; r < n; r++)
            gelu(y + r * out + c0, c1 - c0);
}

/* This part's columns of a product @out wide (dense_cols). */
static void dense_part(const embed_bert_workspace *ws, const float *x, size_t n, size_t in,
                       const float *w, const embed_qweights *qw, const embed_fweights *fw,
                       const float *b, size_t out, float *y, embed_epilogue epi, unsigned part,
                       unsigned parts)
{
    size_t lo, hi;
    share((out + SPLIT_COLS - 1) / SPLIT_COLS, part, parts, &lo, &hi);
    lo *= SPLIT_COLS;
    hi = hi * SPLIT_COLS < out ? hi * SPLIT_COLS : out;
    dense_cols(ws, x, n, in, w, qw, fw, b, out, y, lo, hi, epi);
}

/* This part's rows of @n rows of @x (@in wide) quantised into @ws, for
 * the int8 product after. */
static void quantize_part(embed_bert_workspace *ws, const float *x, size_t n, size_t in,
                          unsigned part, unsigned parts)
{
    size_t lo, hi, ldq = (in + 3) / 4 * 4;
    share(n, part, parts, &lo, &hi);
    if (hi > lo)
        embed_quantize_rows(x + lo * in, hi - lo, in, in, ws->xq + lo * ldq, ldq, ws->xs + lo,
                            ws->xz + lo);
}

/* This part's rows of @n rows in LayerNorm. */
static void layer_norm_part(float *x, size_t n, size_t h, const float *w, const float *b, float eps,
                            unsigned part, unsigned parts)
{
    size_t lo, hi;
    share(n, part, parts, &lo, &hi);
    if (hi > lo)
        layer_norm(x + lo * h, hi - lo, h, w, b, eps);
}

/* With int8 layers: this part's rows of @x quantised, then a barrier, so
 * that every part's product after it reads all rows (nothing to do in
 * float32). */
static void quantize_step(embed_bert_team *t, const float *x, size_t n, size_t in, unsigned part)
{
    if (!t->m->qlayers)
        return;
    quantize_part(t->ws, x, n, in, part, t->parts);
    team_barrier(t);
}

/* The encoder layers of @t's pass, part @part: every participant runs
 * this same sequence of steps and barriers. */
static void layers_part(embed_bert_team *t, unsigned part)
{
    const embed_bert *m = t->m;
    embed_bert_workspace *ws = t->ws;
    const embed_bert_config *c = &m->cfg;
    size_t h = c->hidden_size, inter = c->intermediate_size, heads = c->num_heads, d = h / heads;
    size_t tokens = t->tokens, ffn_rows = t->ffn_rows, count = t->count_seqs;
    unsigned parts = t->parts;
    float *x = ws->x, *scores = ws->scores + (size_t)part * attention_scratch(t->longest, d);
    float scale = 1.0f / sqrtf((float)d);
    for (unsigned li = 0; li < c->num_layers; li++) {
        const bert_layer *l = &m->layers[li];
        const bert_flayer *fl = m->flayers ? &m->flayers[li] : NULL;
        const bert_qlayer *ql = m->qlayers ? &m->qlayers[li] : NULL;
#define W(name) l->name##_w, ql ? &ql->name : NULL, fl ? &fl->name : NULL, l->name##_b
        quantize_step(t, x, tokens, h, part);
        dense_part(ws, x, tokens, h, W(query), h, ws->q, EMBED_EPI_BIAS, part, parts);
        dense_part(ws, x, tokens, h, W(key), h, ws->k, EMBED_EPI_BIAS, part, parts);
        dense_part(ws, x, tokens, h, W(value), h, ws->v, EMBED_EPI_BIAS, part, parts);
        team_barrier(t);
        /* attention: this part's (sequence, head) pairs */
        size_t lo, hi;
        share(count * heads, part, parts, &lo, &hi);
        size_t b = 0, start = 0;
        for (size_t i = lo; i < hi; i++) {
            while (b < i / heads)
                start += t->lens[b++];
            if (i + 1 < hi)
                attention_prefetch(ws, t->lens, i + 1, heads, b, start, d, h);
            attention_one(ws, start * h + (i % heads) * d, t->lens[b], d, h, scale, scores);
        }
        team_barrier(t);
        quantize_step(t, ws->ctx, tokens, h, part);
        dense_part(ws, ws->ctx, tokens, h, W(attn_out), h, x, EMBED_EPI_BIAS_ADD, part, parts);
        team_barrier(t);
        layer_norm_part(x, tokens, h, l->attn_norm_w, l->attn_norm_b, c->layer_norm_eps, part,
                        parts);
        team_barrier(t);
        for (size_t r0 = 0; r0 < tokens; r0 += ffn_rows) {
            size_t n = tokens - r0 < ffn_rows ? tokens - r0 : ffn_rows;
            float *xr = x + r0 * h;
            quantize_step(t, xr, n, h, part);
            dense_part(ws, xr, n, h, W(inter), inter, ws->inter, EMBED_EPI_BIAS_GELU, part, parts);
            team_barrier(t);
            quantize_step(t, ws->inter, n, inter, part);
            dense_part(ws, ws->inter, n, inter, W(out), h, xr, EMBED_EPI_BIAS_ADD, part, parts);
            team_barrier(t);
            layer_norm_part(xr, n, h, l->out_norm_w, l->out_norm_b, c->layer_norm_eps, part, parts);
            team_barrier(t);
        }
#undef W
    }
}

int embed_bert_encode_split(const embed_bert *m, embed_bert_workspace *ws, size_t count,
                            const int32_t *const *ids, const size_t *lens, float *const *out,
                            embed_bert_team *team)
{
    size_t h = m->cfg.hidden_size;
    size_t tokens, longest, ffn_rows = 0;
    int status = pass_size(m, count, ids, lens, &tokens, &longest);
    if (status == 0 && count == 0)
        status = -ECANCELED; /* no pass: the helpers leave */
    if (status == 0 && pass_workspace(m, ws, tokens, longest, team->parts, &ffn_rows) < 0)
        status = -ENOMEM;
    if (status == 0)
        embeddings(m, count, ids, lens, tokens, ws->x);
    team->m = m;
    team->ws = ws;
    team->count_seqs = count;
    team->tokens = tokens;
    team->ffn_rows = ffn_rows;
    team->longest = longest;
    team->lens = lens;
    team->status = status;
    team_barrier(team); /* the helpers start */
    if (status < 0)
        return status == -ECANCELED ? 0 : status;
    layers_part(team, 0);
    for (size_t b = 0, start = 0; b < count; start += lens[b], b++)
        embed_mean_pool(ws->x + start * h, lens[b], h, out[b]);
    return 0;
}

void embed_bert_help(embed_bert_team *team, unsigned part)
{
    team_barrier(team);
    if (team->status == 0)
        layers_part(team, part);
}
