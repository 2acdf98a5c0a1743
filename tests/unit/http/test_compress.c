/*
 * Response compression (http/src/compress.c with response.c): which
 * responses are compressed and which get Vary; a response built in place
 * is byte for byte the one http_respond writes, compressed; the body
 * decodes back (zstd and gzip here, with libzstd's and libdeflate's
 * decoders; every coding with independent decoders in
 * tests/integration/test_compression.py); http_respond_cached compresses
 * once.
 */
#include "coring/core/buffer.h"
#include "coring/http/compress.h"
#include "coring/http/server.h"
#include "http/src/internal.h"

#include <criterion/criterion.h>
#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

static http_thread thread;
static cr_buf out;
static struct http_ctx_internal in;
static http_ctx ctx;
static http_server_config cfg;
static http_request req;
static http_header headers[2];

/* A request accepting @accept (NULL: no Accept-Encoding). */
static void next_request_accepting(const char *accept)
{
    req = (http_request){.headers = headers};
    if (accept) {
        headers[0] =
            (http_header){.name = {"Accept-Encoding", 15}, .value = {accept, strlen(accept)}};
        req.num_headers = 1;
    }
    in = (struct http_ctx_internal){.out = &out, .compression = &cfg, .req = &req};
    ctx = (http_ctx){.internal = &in, .req = &req};
}

static void setup(void)
{
    http_tl = &thread;
    out = CR_BUF_INIT;
    cfg = http_server_config_default();
    next_request_accepting(NULL);
}

static void teardown(void)
{
    cr_buf_free(&out);
    cr_buf_free(&thread.compressed);
    cr_buf_free(&thread.discard);
    http_compress_thread_fini();
}

/* A JSON-like body of @len bytes that compresses. */
static char *json_body(size_t len)
{
    char *b = malloc(len + 1);
    cr_assert(b);
    for (size_t i = 0; i < len; i++)
        b[i] = "{\"id\":12,\"name\":\"User 12\"},"[i % 27];
    b[len] = '\0';
    return b;
}

static bool has(const char *field)
{
    return memmem(out.data, out.len, field, strlen(field)) != NULL;
}

/* The body of the one response in out, and its Content-Length. */
static const char *body_of(size_t *len)
{
    const char *end = memmem(out.data, out.len, "\r\n\r\n", 4);
    cr_assert(end);
    const char *cl = memmem(out.data, (size_t)(end - out.data), "Content-Length: ", 16);
    cr_assert(cl);
    *len = strtoul(cl + 16, NULL, 10);
    cr_assert_eq((size_t)(out.data + out.len - (end + 4)), *len, "Content-Length is the body's");
    return end + 4;
}

/* @p's @len bytes with the Date field's value blanked (the second may
 * turn); bodies hold NUL bytes: compare with same(). */
static char *without_date(const char *p, size_t len)
{
    char *s = malloc(len + 1);
    cr_assert(s);
    memcpy(s, p, len);
    s[len] = '\0';
    for (char *d = memmem(s, len, "\r\nDate: ", 8); d;
         d = memmem(d + 1, len - (size_t)(d + 1 - s), "\r\nDate: ", 8))
        memset(d + 8, 'x', 29);
    return s;
}

/* Whether the responses at @a and @b (@alen, @blen bytes) are the same but
 * for their Date. */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
    char *x = without_date(a, alen), *y = without_date(b, blen);
    bool eq = alen == blen && memcmp(x, y, alen) == 0;
    free(x);
    free(y);
    return eq;
}

Test(compress, zstd_round_trip, .init = setup, .fini = teardown)
{
    next_request_accepting("gzip, br, zstd");
    char *body = json_body(5000);
    http_respond(&ctx, 200, "application/json", body, 5000);
    cr_expect(has("\r\nVary: Accept-Encoding\r\n"));
    cr_expect(has("\r\nContent-Encoding: zstd\r\n"));
    size_t len;
    const char *z = body_of(&len);
    cr_expect_lt(len, 1000);
    char back[6000];
    size_t n = ZSTD_decompress(back, sizeof(back), z, len);
    cr_assert_not(ZSTD_isError(n));
    cr_expect_eq(n, 5000);
    cr_expect(memcmp(back, body, 5000) == 0);
    free(body);
}

Test(compress, gzip_round_trip, .init = setup, .fini = teardown)
{
    next_request_accepting("gzip");
    char *body = json_body(3000);
    http_respond(&ctx, 200, "text/plain; charset=utf-8", body, 3000);
    cr_expect(has("\r\nContent-Encoding: gzip\r\n"));
    size_t len;
    const char *z = body_of(&len);
    char back[4000];
    size_t n = 0;
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    cr_assert(d);
    cr_expect_eq(libdeflate_gzip_decompress(d, z, len, back, sizeof(back), &n), LIBDEFLATE_SUCCESS);
    libdeflate_free_decompressor(d);
    cr_expect_eq(n, 3000);
    cr_expect(memcmp(back, body, 3000) == 0);
    free(body);
}

/* In place (http_response_begin/_end) is what http_respond writes. */
Test(compress, built_in_place_equals_respond, .init = setup, .fini = teardown)
{
    static const char *const accepts[] = {"zstd", "br", "gzip", NULL, "identity"};
    static const size_t lengths[] = {1023, 1024, 5000, 250000};
    for (size_t a = 0; a < 5; a++)
        for (size_t l = 0; l < 4; l++)
            for (int head = 0; head < 2; head++) {
                size_t blen = lengths[l];
                char *body = json_body(blen);
                cr_buf_reset(&out);
                next_request_accepting(accepts[a]);
                in.head = head;
                http_respond(&ctx, 200, "application/json", body, blen);
                size_t first = out.len;
                next_request_accepting(accepts[a]);
                in.head = head;
                cr_buf *b = http_response_begin(&ctx, 200, "application/json");
                for (size_t i = 0; i < blen; i += 100)
                    cr_buf_append(b, body + i, blen - i < 100 ? blen - i : 100);
                http_response_end(&ctx);
                cr_expect(same(out.data + first, out.len - first, out.data, first),
                          "%s, %zu bytes%s:\n%.*s\n%.*s", accepts[a] ? accepts[a] : "(none)", blen,
                          head ? ", HEAD" : "", 300, out.data, 300, out.data + first);
                free(body);
            }
}

Test(compress, what_is_left_alone, .init = setup, .fini = teardown)
{
    char *body = json_body(4000);
    /* under the minimum: no Vary either */
    next_request_accepting("gzip");
    http_respond(&ctx, 200, "application/json", body, 1023);
    cr_expect_not(has("Vary"));
    cr_expect_not(has("Content-Encoding"));
    /* not a compressible type */
    cr_buf_reset(&out);
    next_request_accepting("gzip");
    http_respond(&ctx, 200, "image/png", body, 4000);
    cr_expect_not(has("Vary"));
    cr_expect_not(has("Content-Encoding"));
    /* no Accept-Encoding: identity, with Vary */
    cr_buf_reset(&out);
    next_request_accepting(NULL);
    http_respond(&ctx, 200, "application/json", body, 4000);
    cr_expect(has("\r\nVary: Accept-Encoding\r\n"));
    cr_expect_not(has("Content-Encoding"));
    cr_expect(has("Content-Length: 4000\r\n"));
    /* HEAD: the identity length, Vary, no body */
    cr_buf_reset(&out);
    next_request_accepting("gzip");
    in.head = true;
    http_respond(&ctx, 200, "application/json", body, 4000);
    cr_expect(has("\r\nVary: Accept-Encoding\r\n"));
    cr_expect_not(has("Content-Encoding"));
    cr_expect(memcmp(out.data + out.len - 26, "\r\nContent-Length: 4000\r\n\r\n", 26) == 0);
    /* 204 and 304: nothing */
    cr_buf_reset(&out);
    next_request_accepting("gzip");
    http_respond(&ctx, 304, "application/json", body, 4000);
    cr_expect_not(has("Vary"));
    cr_expect_not(has("Content-"));
    /* a Content-Encoding the handler set */
    cr_buf_reset(&out);
    next_request_accepting("gzip");
    cr_arena arena;
    cr_arena_init(&arena, 4096);
    ctx.arena = &arena;
    http_add_header(&ctx, "Content-Encoding", "zstd");
    http_respond(&ctx, 200, "application/json", body, 4000);
    cr_expect_not(has("Content-Encoding: gzip"));
    cr_expect(has("Content-Length: 4000\r\n"));
    cr_arena_free(&arena);
    /* off */
    cr_buf_reset(&out);
    next_request_accepting("gzip");
    in.compression = NULL;
    http_respond(&ctx, 200, "application/json", body, 4000);
    cr_expect_not(has("Vary"));
    /* a coding not offered */
    cr_buf_reset(&out);
    cfg.compression_codings = HTTP_CODING_BIT(HTTP_CODING_BR);
    next_request_accepting("gzip");
    http_respond(&ctx, 200, "application/json", body, 4000);
    cr_expect(has("\r\nVary: Accept-Encoding\r\n"));
    cr_expect_not(has("Content-Encoding"));
    free(body);
}

Test(compress, cached_compresses_once, .init = setup, .fini = teardown)
{
    http_encoded_cache cache = {0};
    cr_buf body = CR_BUF_INIT;
    char *text = json_body(6000);
    cr_buf_append(&body, text, 6000);
    next_request_accepting("br");
    http_respond(&ctx, 200, "application/json", text, 6000);
    cr_buf want = CR_BUF_INIT;
    cr_buf_append(&want, out.data, out.len);
    for (int i = 0; i < 2; i++) {
        cr_buf_reset(&out);
        next_request_accepting("br");
        http_respond_cached(&ctx, 200, "application/json", &body, &cache);
        cr_expect(same(out.data, out.len, want.data, want.len), "answer %d", i);
        cr_expect(cache.valid[HTTP_CODING_BR]);
        cr_expect_not(cache.valid[HTTP_CODING_GZIP]);
    }
    /* A hit sends the kept bytes, not a new compression: spoil them and see. */
    cr_buf *kept = &cache.encoded[HTTP_CODING_BR];
    kept->data[kept->len - 1] ^= 0x55;
    cr_buf_reset(&out);
    next_request_accepting("br");
    http_respond_cached(&ctx, 200, "application/json", &body, &cache);
    cr_expect_eq(out.data[out.len - 1], kept->data[kept->len - 1]);
    cr_expect_not(same(out.data, out.len, want.data, want.len));
    /* Cleared: compressed anew. */
    http_encoded_cache_clear(&cache);
    cr_buf_reset(&out);
    next_request_accepting("br");
    http_respond_cached(&ctx, 200, "application/json", &body, &cache);
    cr_expect(same(out.data, out.len, want.data, want.len));
    cr_buf_free(&want);
    free(text);
    cr_buf_free(&body);
    http_encoded_cache_free(&cache);
}
