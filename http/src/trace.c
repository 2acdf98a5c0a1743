/*
 * W3C Trace Context (coring/http/trace.h): parsing traceparent and
 * tracestate, making ids, and a request's trace context. Section numbers
 * are those of Trace Context Level 1 (W3C Recommendation, 2021-11-23).
 */
#include "coring/http/trace.h"

#include "internal.h"
#include "coring/core/log.h"
#include "coring/core/random.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

static const char hex[] = "0123456789abcdef";

/* Each byte's value as a lowercase hex digit plus one; 0: not one
 * (section 3.2.2: HEXDIGLC): for the version and the flags. */
static const unsigned char hex_value_1[256] = {
    ['0'] = 1,  ['1'] = 2,  ['2'] = 3,  ['3'] = 4,  ['4'] = 5,  ['5'] = 6,
    ['6'] = 7,  ['7'] = 8,  ['8'] = 9,  ['9'] = 10, ['a'] = 11, ['b'] = 12,
    ['c'] = 13, ['d'] = 14, ['e'] = 15, ['f'] = 16,
};

/* The value of a lowercase hex digit, or -1. */
static int hex_value(char c)
{
    return (int)hex_value_1[(unsigned char)c] - 1;
}

/* Each byte as a digit of an id: 0 not a lowercase hex digit, 1 '0',
 * 3 any other digit. ANDed over an id, bit 0 says all are digits; ORed,
 * bit 1 says one is not '0'. */
static const unsigned char id_digit[256] = {
    ['0'] = 1, ['1'] = 3, ['2'] = 3, ['3'] = 3, ['4'] = 3, ['5'] = 3, ['6'] = 3, ['7'] = 3,
    ['8'] = 3, ['9'] = 3, ['a'] = 3, ['b'] = 3, ['c'] = 3, ['d'] = 3, ['e'] = 3, ['f'] = 3,
};

/* Copy @n lowercase hex digits at @s into @dst with a NUL. False when one
 * is not a lowercase hex digit, or all are '0'. */
static bool take_id(char *dst, const char *s, size_t n)
{
    unsigned all = 1, any = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned d = id_digit[(unsigned char)s[i]];
        all &= d;
        any |= d;
    }
    memcpy(dst, s, n);
    dst[n] = '\0';
    return (all & 1) && (any & 2);
}

int http_traceparent_parse(const char *s, size_t len, http_traceparent *out)
{
    /* Section 3.2.4.1: at least the 55 bytes of version 00; version 00
     * exactly that; a later version may go on after a '-'. */
    if (len < HTTP_TRACEPARENT_LEN)
        return -EINVAL;
    int v1 = hex_value(s[0]), v0 = hex_value(s[1]);
    if (v1 < 0 || v0 < 0)
        return -EINVAL;
    unsigned version = (unsigned)(v1 << 4 | v0);
    if (version == 0xff) /* section 3.2.2.1: forbidden */
        return -EINVAL;
    if (version == 0 && len != HTTP_TRACEPARENT_LEN)
        return -EINVAL;
    if (len > HTTP_TRACEPARENT_LEN && s[HTTP_TRACEPARENT_LEN] != '-')
        return -EINVAL;
    if (s[2] != '-' || s[35] != '-' || s[52] != '-')
        return -EINVAL;
    int f1 = hex_value(s[53]), f0 = hex_value(s[54]);
    if (f1 < 0 || f0 < 0)
        return -EINVAL;
    if (!take_id(out->trace_id, s + 3, 32) || !take_id(out->parent_id, s + 36, 16))
        return -EINVAL; /* sections 3.2.2.3, 3.2.2.4: all zeros are invalid */
    out->version = (unsigned char)version;
    out->flags = (unsigned char)(f1 << 4 | f0);
    return 0;
}

/* Section 3.3.1.3's character classes. */
static bool lcalpha(char c)
{
    return c >= 'a' && c <= 'z';
}

static bool key_char(char c)
{
    return lcalpha(c) || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '*' || c == '/';
}

static bool nblk_char(char c)
{
    return c >= 0x21 && c <= 0x7e && c != ',' && c != '=';
}

/* Whether the @len bytes at @k are a key: simple-key, or tenant-id '@'
 * system-id (section 3.3.1.3.1). */
static bool valid_key(const char *k, size_t len)
{
    const char *at = memchr(k, '@', len);
    if (!at) {
        if (len < 1 || len > 256 || !lcalpha(k[0]))
            return false;
        for (size_t i = 1; i < len; i++)
            if (!key_char(k[i]))
                return false;
        return true;
    }
    size_t tenant = (size_t)(at - k), system = len - tenant - 1;
    if (tenant < 1 || tenant > 241 || system < 1 || system > 14)
        return false;
    if (!lcalpha(k[0]) && !(k[0] >= '0' && k[0] <= '9'))
        return false;
    for (size_t i = 1; i < tenant; i++)
        if (!key_char(k[i]))
            return false;
    if (!lcalpha(at[1]))
        return false;
    for (size_t i = 2; i <= system; i++)
        if (!key_char(at[i]))
            return false;
    return true;
}

/* Whether the @len bytes at @v are a value: 0 to 255 chr (space or
 * nblk-chr) and a last nblk-chr (section 3.3.1.3.2). */
static bool valid_value(const char *v, size_t len)
{
    if (len < 1 || len > 256 || !nblk_char(v[len - 1]))
        return false;
    for (size_t i = 0; i + 1 < len; i++)
        if (v[i] != ' ' && !nblk_char(v[i]))
            return false;
    return true;
}

bool http_tracestate_valid(const char *s, size_t len)
{
    if (len > HTTP_TRACESTATE_MAX)
        return false;
    struct { const char *ptr; size_t len; } keys[HTTP_TRACESTATE_MAX_MEMBERS];
    size_t members = 0;
    size_t i = 0;
    for (;;) {
        /* One list member between commas: OWS, and key=value or nothing. */
        while (i < len && (s[i] == ' ' || s[i] == '\t'))
            i++;
        size_t start = i;
        while (i < len && s[i] != ',')
            i++;
        size_t end = i;
        while (end > start && (s[end - 1] == ' ' || s[end - 1] == '\t'))
            end--;
        if (end > start) {
            const char *eq = memchr(s + start, '=', end - start);
            if (!eq)
                return false;
            size_t klen = (size_t)(eq - (s + start));
            if (!valid_key(s + start, klen) || !valid_value(eq + 1, end - start - klen - 1))
                return false;
            if (members == HTTP_TRACESTATE_MAX_MEMBERS)
                return false;
            for (size_t m = 0; m < members; m++) /* section 3.3.1.1: unique keys */
                if (keys[m].len == klen && memcmp(keys[m].ptr, s + start, klen) == 0)
                    return false;
            keys[members].ptr = s + start;
            keys[members].len = klen;
            members++;
        }
        if (i == len)
            return true;
        i++; /* the comma */
    }
}

/* --- ids --------------------------------------------------------------- */

/* This thread's xoshiro256** state (Blackman and Vigna, "Scrambled linear
 * pseudorandom number generators", 2021); all zero until seeded. */
static _Thread_local uint64_t rng[4];

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* Out of line: once per thread, so that draw() keeps no frame for it. */
__attribute__((noinline, cold)) static void seed(void)
{
    cr_random_seed(rng, sizeof(rng));
    if (!(rng[0] | rng[1] | rng[2] | rng[3]))
        rng[0] = 1; /* the one state xoshiro never leaves */
}

/* @n draws of this thread's generator into @out, its state held in
 * registers across them (seeded on the thread's first draw). */
static inline void draw(uint64_t *out, int n)
{
    if (!(rng[0] | rng[1] | rng[2] | rng[3]))
        seed();
    uint64_t s0 = rng[0], s1 = rng[1], s2 = rng[2], s3 = rng[3];
    for (int i = 0; i < n; i++) {
        out[i] = rotl(s1 * 5, 7) * 9;
        uint64_t t = s1 << 17;
        s2 ^= s0;
        s3 ^= s1;
        s1 ^= s2;
        s0 ^= s3;
        s2 ^= t;
        s3 = rotl(s3, 45);
    }
    rng[0] = s0, rng[1] = s1, rng[2] = s2, rng[3] = s3;
}

/* @x as 16 lowercase hex digits at @dst, most significant first. With
 * SSE2 (x86-64's baseline): the eight bytes split into their 16 nibbles
 * in one register and turned into digits all at once; otherwise each
 * half's nibbles spread into the bytes of a word and turned the same way.
 * No loop over the digits: a new trace makes 48 of them a request. */
static inline void put_hex64(char *dst, uint64_t x)
{
#ifdef __SSE2__
    __m128i v = _mm_cvtsi64_si128((long long)__builtin_bswap64(x));
    __m128i low_nibbles = _mm_set1_epi8(0x0f);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
    __m128i lo = _mm_and_si128(v, low_nibbles);
    __m128i nibbles = _mm_unpacklo_epi8(hi, lo); /* byte by byte, high nibble first */
    __m128i letters =
        _mm_and_si128(_mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
    __m128i digits = _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8('0')), letters);
    _mm_storeu_si128((__m128i *)(void *)dst, digits);
#else
    for (int half = 0; half < 2; half++) {
        uint64_t v = half ? x & 0xffffffffu : x >> 32;
        v = ((v & 0xffff0000u) << 16) | (v & 0xffffu);
        v = ((v & 0x0000ff000000ff00u) << 8) | (v & 0x000000ff000000ffu);
        v = ((v & 0x00f000f000f000f0u) << 4) | (v & 0x000f000f000f000fu);
        /* Byte k (from the least significant) holds nibble k; 1 in the
         * bytes whose nibble is 10 or more. */
        uint64_t letters = ((v + 0x0606060606060606u) >> 4) & 0x0101010101010101u;
        v += 0x3030303030303030u + letters * ('a' - '0' - 10);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        v = __builtin_bswap64(v); /* most significant nibble first */
#endif
        memcpy(dst + half * 8, &v, 8);
    }
#endif
}

/* A new trace id's 32 digits at @trace (NULL: none wanted) and a new
 * span id's 16 at @span, no NULs: one draw per id word, none all zero. */
static void put_new_ids(char *trace, char *span)
{
    uint64_t w[3];
    if (trace)
        draw(w, 3);
    else
        draw(w + 2, 1);
    while (trace && !(w[0] | w[1]))
        draw(w, 2);
    while (!w[2])
        draw(w + 2, 1);
    if (trace) {
        put_hex64(trace, w[0]);
        put_hex64(trace + 16, w[1]);
    }
    put_hex64(span, w[2]);
}

void http_trace_new_trace_id(char *dst)
{
    char span[16];
    put_new_ids(dst, span);
    dst[32] = '\0';
}

void http_trace_new_span_id(char *dst)
{
    put_new_ids(NULL, dst);
    dst[16] = '\0';
}

size_t http_trace_format(char *dst, const char *trace_id, const char *span_id, unsigned flags)
{
    dst[0] = '0', dst[1] = '0', dst[2] = '-';
    memcpy(dst + 3, trace_id, 32);
    dst[35] = '-';
    memcpy(dst + 36, span_id, 16);
    dst[52] = '-';
    dst[53] = hex[(flags >> 4) & 15];
    dst[54] = hex[flags & 15];
    dst[55] = '\0';
    return HTTP_TRACEPARENT_LEN;
}

/* --- a request's context ----------------------------------------------- */

/* Whether the @n bytes at @name are @lower (lowercase letters and '-')
 * in any case: a field name is a token, and a token's bytes that fold to
 * a lowercase letter with 0x20 are that letter in either case. */
static bool lower_equal(const char *name, const char *lower, size_t n)
{
    unsigned diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(name[i] | 0x20) ^ (unsigned char)lower[i];
    return diff == 0;
}

/* The tracestate of @req's fields @first.. (the first one at index
 * @first): one field as it is, several joined with commas into @t->state
 * (RFC 9110 section 5.3). Sets @t->ctx.state when the whole is valid. */
static void take_state(http_trace *t, const http_request *req, size_t first)
{
    const http_str *v = &req->headers[first].value;
    const char *s = v->ptr;
    size_t len = v->len;
    for (size_t i = first + 1; i < req->num_headers; i++) {
        const http_str *name = &req->headers[i].name;
        if (name->len != 10 || !lower_equal(name->ptr, "tracestate", 10))
            continue;
        if (s != t->state) {
            if (len > HTTP_TRACESTATE_MAX)
                return;
            memcpy(t->state, s, len);
            s = t->state;
        }
        const http_str *more = &req->headers[i].value;
        if (len + 1 + more->len > HTTP_TRACESTATE_MAX)
            return;
        t->state[len++] = ',';
        memcpy(t->state + len, more->ptr, more->len);
        len += more->len;
    }
    if (len && http_tracestate_valid(s, len)) {
        t->ctx.state = s;
        t->ctx.state_len = len;
    }
}

void http_trace_begin(http_trace *t, const http_request *req)
{
    t->ctx.state = NULL;
    t->ctx.state_len = 0;
    t->invalid = false;
    const http_str *parent = NULL;
    size_t state_at = 0;
    bool has_state = false, several = false;
    for (size_t i = 0; i < req->num_headers; i++) {
        const http_str *name = &req->headers[i].name;
        if (name->len == 11 && lower_equal(name->ptr, "traceparent", 11)) {
            several |= parent != NULL;
            parent = &req->headers[i].value;
        } else if (!has_state && name->len == 10 && lower_equal(name->ptr, "tracestate", 10)) {
            has_state = true;
            state_at = i;
        }
    }
    /* The traceresponse is written first and the context's ids copied
     * from it: each digit made once, fixed-size copies after. */
    char *r = t->response;
    r[0] = '0', r[1] = '0', r[2] = '-';
    http_traceparent p;
    bool taken = parent && !several && http_traceparent_parse(parent->ptr, parent->len, &p) == 0;
    if (taken) {
        memcpy(r + 3, p.trace_id, 32);
        t->ctx.flags = p.flags & CR_TRACE_SAMPLED;
        if (has_state) /* section 3.3: only beside a valid traceparent */
            take_state(t, req, state_at);
    } else {
        t->invalid = parent != NULL;
        t->ctx.flags = 0;
    }
    put_new_ids(taken ? NULL : r + 3, r + 36);
    r[35] = '-';
    r[52] = '-';
    r[53] = hex[(t->ctx.flags >> 4) & 15];
    r[54] = hex[t->ctx.flags & 15];
    r[55] = '\0';
    memcpy(t->ctx.trace_id, r + 3, 32);
    t->ctx.trace_id[32] = '\0';
    memcpy(t->ctx.span_id, r + 36, 16);
    t->ctx.span_id[16] = '\0';
}

void http_trace_request(http_ctx *ctx, http_trace *t)
{
    http_trace_begin(t, ctx->req);
    cr_log_set_trace(&t->ctx);
    /* Written by the response's head, after X-Request-Id, before any
     * header the handler adds. Not copied: @t outlives the response. */
    ctx->internal->traceresponse = t->response;
}
