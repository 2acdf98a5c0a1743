/*
 * Response compression: the per-thread compressors (libzstd, libbrotli,
 * libdeflate for gzip) and the decision, per response, whether and how to
 * compress (docs/compression.md). The negotiation itself is
 * accept_encoding.c; response.c calls http_compress_choose() and writes
 * what it returns at the few places a response's body is final.
 *
 * Nothing here is shared between threads: each worker thread makes its own
 * compressors on first use. zstd and gzip reuse their state for every
 * response; brotli's encoder cannot be reset, so each response's instance
 * takes its memory from a per-thread region that is reused (a bump
 * allocator), not from malloc.
 */
#include "coring/http/compress.h"

#include "internal.h"

#include <brotli/encode.h>
#include <libdeflate.h>
#include <zstd.h>

#include <errno.h>
#include <stdlib.h>
#include <strings.h>

/* Levels chosen from perf/compression.sh (docs/compression.md): past them
 * each level costs more CPU than it saves bytes on coring's JSON. */
#define ZSTD_LEVEL 1
#define BROTLI_QUALITY 2
#define GZIP_LEVEL 1

/* A per-thread region for brotli's allocations: bump-allocated while one
 * instance lives, emptied when it is destroyed. An allocation past its end
 * comes from malloc, and the region grows to fit for the next response. */
typedef struct brotli_region {
    char *base;
    size_t size;     /* bytes at base */
    size_t used;     /* bytes handed out since the last reset */
    size_t overflow; /* bytes malloc'd since the last reset */
} brotli_region;

typedef struct compressors {
    ZSTD_CCtx *zstd;
    struct libdeflate_compressor *gzip;
    brotli_region brotli;
} compressors;

static _Thread_local compressors *tl_compressors;

static compressors *thread_compressors(void)
{
    if (!tl_compressors)
        tl_compressors = calloc(1, sizeof(*tl_compressors));
    return tl_compressors;
}

void http_compress_thread_fini(void)
{
    compressors *c = tl_compressors;
    if (!c)
        return;
    ZSTD_freeCCtx(c->zstd);
    libdeflate_free_compressor(c->gzip);
    free(c->brotli.base);
    free(c);
    tl_compressors = NULL;
}

#define REGION_ALIGN 64

static void *region_alloc(void *opaque, size_t size)
{
    brotli_region *r = opaque;
    size_t at = (r->used + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1);
    if (r->base && at + size <= r->size) {
        r->used = at + size;
        return r->base + at;
    }
    r->overflow += size + REGION_ALIGN;
    return malloc(size);
}

static void region_free(void *opaque, void *p)
{
    brotli_region *r = opaque;
    if (p && !((char *)p >= r->base && (char *)p < r->base + r->size))
        free(p);
}

/* After an instance is destroyed: empty the region, grown to hold what the
 * last one needed when it overflowed. */
static void region_reset(brotli_region *r)
{
    if (r->overflow) {
        size_t want = r->used + r->overflow;
        char *grown =
            aligned_alloc(REGION_ALIGN, (want + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1));
        if (grown) {
            free(r->base);
            r->base = grown;
            r->size = want;
        }
    }
    r->used = 0;
    r->overflow = 0;
}

static int compress_brotli(brotli_region *r, const void *src, size_t len, cr_buf *dst)
{
    size_t bound = BrotliEncoderMaxCompressedSize(len);
    if (!bound)
        return -EIO;
    if (cr_buf_reserve(dst, bound) < 0)
        return -ENOMEM;
    BrotliEncoderState *s = BrotliEncoderCreateInstance(region_alloc, region_free, r);
    if (!s) {
        region_reset(r);
        return -ENOMEM;
    }
    BrotliEncoderSetParameter(s, BROTLI_PARAM_QUALITY, BROTLI_QUALITY);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_MODE, BROTLI_MODE_TEXT);
    BrotliEncoderSetParameter(s, BROTLI_PARAM_SIZE_HINT,
                              len > UINT32_MAX ? UINT32_MAX : (uint32_t)len);
    /* A window no larger than the body: less memory to set up. */
    uint32_t lgwin = BROTLI_MIN_WINDOW_BITS;
    while (lgwin < BROTLI_MAX_WINDOW_BITS && ((size_t)1 << lgwin) - 16 < len)
        lgwin++;
    BrotliEncoderSetParameter(s, BROTLI_PARAM_LGWIN, lgwin);
    const uint8_t *in = src;
    size_t in_left = len;
    uint8_t *out = (uint8_t *)dst->data + dst->len;
    size_t out_left = bound;
    BROTLI_BOOL ok = BrotliEncoderCompressStream(s, BROTLI_OPERATION_FINISH, &in_left, &in,
                                                 &out_left, &out, NULL);
    ok = ok && BrotliEncoderIsFinished(s);
    BrotliEncoderDestroyInstance(s);
    region_reset(r);
    if (!ok)
        return -EIO;
    dst->len += bound - out_left;
    return 0;
}

int http_compress(http_coding coding, const void *src, size_t len, cr_buf *dst)
{
    compressors *c = thread_compressors();
    if (!c)
        return -ENOMEM;
    size_t n;
    switch (coding) {
    case HTTP_CODING_ZSTD:
        if (!c->zstd && !(c->zstd = ZSTD_createCCtx()))
            return -ENOMEM;
        if (cr_buf_reserve(dst, ZSTD_compressBound(len)) < 0)
            return -ENOMEM;
        n = ZSTD_compressCCtx(c->zstd, dst->data + dst->len, dst->cap - dst->len, src, len,
                              ZSTD_LEVEL);
        if (ZSTD_isError(n))
            return -EIO;
        break;
    case HTTP_CODING_GZIP:
        if (!c->gzip && !(c->gzip = libdeflate_alloc_compressor(GZIP_LEVEL)))
            return -ENOMEM;
        if (cr_buf_reserve(dst, libdeflate_gzip_compress_bound(c->gzip, len)) < 0)
            return -ENOMEM;
        n = libdeflate_gzip_compress(c->gzip, src, len, dst->data + dst->len, dst->cap - dst->len);
        if (!n)
            return -EIO;
        break;
    case HTTP_CODING_BR:
        return compress_brotli(&c->brotli, src, len, dst);
    default:
        return -EINVAL;
    }
    dst->len += n;
    return 0;
}

/* --- the decision, per response ------------------------------------------ */

/* Media types worth compressing: text/ (any subtype), application/json and
 * application/<x>+json (RFC 6839), JavaScript; compared case-insensitively,
 * parameters ignored. Images, archives and already-compressed types are
 * left alone. */
static bool compressible_type(const char *type)
{
    if (!type)
        return false;
    if (strncasecmp(type, "text/", 5) == 0)
        return true;
    if (strncasecmp(type, "application/", 12) != 0)
        return false;
    const char *sub = type + 12;
    size_t n = strcspn(sub, "; \t");
    if (n == 4 && strncasecmp(sub, "json", 4) == 0)
        return true;
    if (n == 10 && strncasecmp(sub, "javascript", 10) == 0)
        return true;
    return n > 5 && strncasecmp(sub + n - 5, "+json", 5) == 0;
}

/* The header lines a response gets, by coding: Vary alone for identity. */
static const char *const coding_lines[HTTP_CODING_COUNT] = {
    "\r\nVary: Accept-Encoding",
    "\r\nVary: Accept-Encoding\r\nContent-Encoding: zstd",
    "\r\nVary: Accept-Encoding\r\nContent-Encoding: br",
    "\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip",
};

http_coding http_compress_choose(struct http_ctx_internal *in, int status, const char *content_type,
                                 size_t len)
{
    const http_server_config *cfg = in->compression;
    if (!cfg || len < cfg->compression_min_bytes || status < 200 || status == 204 ||
        status == 304 || !compressible_type(content_type))
        return HTTP_CODING_IDENTITY;
    for (size_t i = 0; i < in->num_extra; i++)
        if (strcasecmp(in->extra_name[i], "Content-Encoding") == 0)
            return HTTP_CODING_IDENTITY; /* the handler encoded it */
    http_coding coding = HTTP_CODING_IDENTITY;
    if (!in->head && in->req) {
        http_accept_encoding ae;
        http_accept_encoding_init(&ae);
        const http_request *req = in->req;
        for (size_t i = 0; i < req->num_headers; i++)
            if (http_str_equal_ci(req->headers[i].name, "accept-encoding"))
                http_accept_encoding_parse(&ae, req->headers[i].value.ptr,
                                           req->headers[i].value.len);
        coding = http_accept_encoding_choose(&ae, cfg->compression_codings);
    }
    /* The representation depends on Accept-Encoding: say so, compressed or
     * not (RFC 9110 section 12.5.5), HEAD included (the GET's fields). */
    in->coding_lines = coding_lines[coding];
    in->coding_lines_len = strlen(coding_lines[coding]);
    return coding;
}

void http_compress_fall_back(struct http_ctx_internal *in)
{
    in->coding_lines = coding_lines[HTTP_CODING_IDENTITY];
    in->coding_lines_len = strlen(coding_lines[HTTP_CODING_IDENTITY]);
}

/* --- a body answered many times ------------------------------------------ */

void http_encoded_cache_clear(http_encoded_cache *cache)
{
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        cache->valid[c] = false;
        cr_buf_reset(&cache->encoded[c]);
    }
}

void http_encoded_cache_free(http_encoded_cache *cache)
{
    for (int c = 0; c < HTTP_CODING_COUNT; c++) {
        cache->valid[c] = false;
        cr_buf_free(&cache->encoded[c]);
    }
}
