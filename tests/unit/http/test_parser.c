/*
 * Tests of the HTTP/1.1 request parser and the chunked decoder
 * (http/src/parser.c): a table of requests, valid and malformed, each with
 * the expected result, in the manner of picohttpparser's tests. Every input
 * is also fed in pieces, from a heap buffer of exactly its length so that
 * the sanitizer build catches any read past the end.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coring/http/parser.h"

#define OK 0 /* .result: the request parses; consumed = len - trailing */

typedef struct parse_case {
    const char *input;
    size_t len;
    int result; /* OK, HTTP_PARSE_INCOMPLETE or HTTP_PARSE_ERROR */
    int status; /* with HTTP_PARSE_ERROR */
    const http_limits *lim;
    /* Valid requests only. */
    size_t trailing; /* bytes after the header section (body, next request) */
    http_method method;
    const char *path;
    const char *query;
    uint64_t cl;
    int minor;
    bool keep_alive;
    bool has_cl;
    bool chunked;
    bool expect_continue;
    const char *header; /* if set, this header's value must be .value */
    const char *value;
} parse_case;

/* String literals only: the length comes from sizeof, so NULs may appear. */
#define IN(s) .input = (s), .len = sizeof(s) - 1
#define GOOD(s, m, p, q, v, ka, ...)                                                               \
    {                                                                                              \
        IN(s), .result = OK, .method = (m), .path = (p), .query = (q), .minor = (v),               \
               .keep_alive = (ka), __VA_ARGS__                                                     \
    }
#define BAD(s, st, ...)                                                                            \
    {                                                                                              \
        IN(s), .result = HTTP_PARSE_ERROR, .status = (st), __VA_ARGS__                             \
    }
#define MORE(s, ...)                                                                               \
    {                                                                                              \
        IN(s), .result = HTTP_PARSE_INCOMPLETE, __VA_ARGS__                                        \
    }

#define H "Host: a\r\n"
#define GET11 "GET / HTTP/1.1\r\n"
#define A8 "aaaaaaaa"
#define A32 A8 A8 A8 A8

static const http_limits lim64 = {
    .max_header_bytes = 64, .max_headers = 100, .max_body_bytes = 100};
static const http_limits lim3h = {
    .max_header_bytes = 1024, .max_headers = 3, .max_body_bytes = 100};
static const http_limits lim_huge = {
    .max_header_bytes = 1024, .max_headers = 100, .max_body_bytes = SIZE_MAX};
/* --allow-bare-lf */
static const http_limits lim_lf = {.max_header_bytes = HTTP_MAX_HEADER_BYTES_DEFAULT,
                                   .max_headers = HTTP_MAX_HEADERS_DEFAULT,
                                   .max_body_bytes = HTTP_MAX_BODY_BYTES_DEFAULT,
                                   .allow_bare_lf = true};

static const parse_case cases[] = {
    /* Valid requests. */
    GOOD(GET11 H "\r\n", HTTP_GET, "/", "", 1, true),
    GOOD("GET /search?q=1&x=2 HTTP/1.1\r\n" H "\r\n", HTTP_GET, "/search", "q=1&x=2", 1, true),
    GOOD("GET /a? HTTP/1.1\r\n" H "\r\n", HTTP_GET, "/a", "", 1, true),
    GOOD("GET /a?b?c HTTP/1.1\r\n" H "\r\n", HTTP_GET, "/a", "b?c", 1, true),
    GOOD("GET /%7Euser/a.b-c_d~e!$&'()*+,;=:@ HTTP/1.1\r\n" H "\r\n", HTTP_GET,
         "/%7Euser/a.b-c_d~e!$&'()*+,;=:@", "", 1, true),
    GOOD("HEAD /x HTTP/1.1\r\n" H "\r\n", HTTP_HEAD, "/x", "", 1, true),
    GOOD("POST /todos HTTP/1.1\r\n" H "Content-Length: 7\r\n\r\n{\"a\":1}", HTTP_POST, "/todos", "",
         1, true, .trailing = 7, .has_cl = true, .cl = 7),
    GOOD("PUT /t/1 HTTP/1.1\r\n" H "Content-Length: 0\r\n\r\n", HTTP_PUT, "/t/1", "", 1, true,
         .has_cl = true, .cl = 0),
    GOOD("PATCH /p HTTP/1.1\r\n" H "\r\n", HTTP_PATCH, "/p", "", 1, true),
    GOOD("DELETE /d HTTP/1.1\r\n" H "\r\n", HTTP_DELETE, "/d", "", 1, true),
    GOOD("TRACE /t HTTP/1.1\r\n" H "\r\n", HTTP_TRACE, "/t", "", 1, true),
    GOOD("PROPFIND /x HTTP/1.1\r\n" H "\r\n", HTTP_METHOD_OTHER, "/x", "", 1, true),
    /* RFC 9110 9.1: methods are case-sensitive; "get" is some other token. */
    GOOD("get / HTTP/1.1\r\n" H "\r\n", HTTP_METHOD_OTHER, "/", "", 1, true),
    GOOD(A32 " / HTTP/1.1\r\n" H "\r\n", HTTP_METHOD_OTHER, "/", "", 1, true),
    /* HTTP/1.0: no Host needed; persistent only with keep-alive. */
    GOOD("GET / HTTP/1.0\r\n\r\n", HTTP_GET, "/", "", 0, false),
    GOOD("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", HTTP_GET, "/", "", 0, true),
    GOOD("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", HTTP_GET, "/", "", 0, true),
    GOOD("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", HTTP_GET, "/", "", 0, false),
    GOOD(GET11 H "Connection: close\r\n\r\n", HTTP_GET, "/", "", 1, false),
    GOOD(GET11 H "Connection: Upgrade, CLOSE\r\n\r\n", HTTP_GET, "/", "", 1, false),
    GOOD(GET11 H "Connection: foo\r\nConnection: close\r\n\r\n", HTTP_GET, "/", "", 1, false),
    GOOD(GET11 H "Connection: keep-alive\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 H "Connection: closed\r\n\r\n", HTTP_GET, "/", "", 1, true),
    /* Field names are case-insensitive; values lose their OWS. */
    GOOD(GET11 "hOsT: a\r\nCONTENT-length: 5\r\n\r\nhello", HTTP_GET, "/", "", 1, true,
         .trailing = 5, .has_cl = true, .cl = 5),
    GOOD(GET11 H "X-A: \t a b \t\r\n\r\n", HTTP_GET, "/", "", 1, true, .header = "x-a",
         .value = "a b"),
    GOOD(GET11 H "X-A:v\r\n\r\n", HTTP_GET, "/", "", 1, true, .header = "X-A", .value = "v"),
    GOOD(GET11 H "X-A:\r\n\r\n", HTTP_GET, "/", "", 1, true, .header = "X-A", .value = ""),
    GOOD(GET11 H "X-A:   \r\n\r\n", HTTP_GET, "/", "", 1, true, .header = "X-A", .value = ""),
    GOOD(GET11 H "X-A: caf\xc3\xa9 \xff\r\n\r\n", HTTP_GET, "/", "", 1, true, .header = "X-A",
         .value = "caf\xc3\xa9 \xff"),
    GOOD(GET11 H "X-Long: 0123456789abcdef0123456789abcdef\t0123456789\r\n\r\n", HTTP_GET, "/", "",
         1, true, .header = "x-long", .value = "0123456789abcdef0123456789abcdef\t0123456789"),
    /* RFC 9112 2.2: empty lines before the request are ignored. */
    GOOD("\r\n\r\n" GET11 H "\r\n", HTTP_GET, "/", "", 1, true),
    /* A bare LF ends a line only with allow_bare_lf (RFC 9112 2.2 MAY). */
    GOOD("GET / HTTP/1.1\nHost: a\n\n", HTTP_GET, "/", "", 1, true, .lim = &lim_lf),
    GOOD("GET / HTTP/1.1\r\nHost: a\n\r\n", HTTP_GET, "/", "", 1, true, .lim = &lim_lf),
    GOOD("\n" GET11 H "\r\n", HTTP_GET, "/", "", 1, true, .lim = &lim_lf),
    GOOD(GET11 H "\n", HTTP_GET, "/", "", 1, true, .lim = &lim_lf),
    GOOD(GET11 H "Dummy: x\nContent-Length: 2\r\n\r\nhi", HTTP_GET, "/", "", 1, true, .trailing = 2,
         .has_cl = true, .cl = 2, .header = "dummy", .value = "x", .lim = &lim_lf),
    /* Content-Length. */
    GOOD(GET11 H "Content-Length: 5\r\nContent-Length: 5\r\n\r\n", HTTP_GET, "/", "", 1, true,
         .has_cl = true, .cl = 5),
    GOOD(GET11 H "Content-Length: 5, 5\r\n\r\n", HTTP_GET, "/", "", 1, true, .has_cl = true,
         .cl = 5),
    GOOD(GET11 H "Content-Length: 007\r\n\r\n", HTTP_GET, "/", "", 1, true, .has_cl = true,
         .cl = 7),
    GOOD(GET11 H "Content-Length: 1048576\r\n\r\n", HTTP_GET, "/", "", 1, true, .has_cl = true,
         .cl = 1048576),
    GOOD(GET11 H "Content-Length: 18446744073709551615\r\n\r\n", HTTP_GET, "/", "", 1, true,
         .has_cl = true, .cl = UINT64_MAX, .lim = &lim_huge),
    /* Transfer-Encoding. */
    GOOD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", HTTP_POST, "/", "",
         1, true, .trailing = 5, .chunked = true),
    GOOD("POST / HTTP/1.1\r\n" H "transfer-encoding: CHUNKED\r\n\r\n", HTTP_POST, "/", "", 1, true,
         .chunked = true),
    GOOD("POST / HTTP/1.1\r\n" H "Transfer-Encoding: , chunked\r\n\r\n", HTTP_POST, "/", "", 1,
         true, .chunked = true),
    /* Expect. */
    GOOD("POST / HTTP/1.1\r\n" H "Expect: 100-continue\r\nContent-Length: 1\r\n\r\n", HTTP_POST,
         "/", "", 1, true, .expect_continue = true, .has_cl = true, .cl = 1),
    GOOD("POST / HTTP/1.1\r\n" H "Expect: 100-Continue\r\n\r\n", HTTP_POST, "/", "", 1, true,
         .expect_continue = true),
    GOOD("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n", HTTP_POST, "/", "", 0, false),
    /* Request-target forms (RFC 9112 3.2). */
    GOOD("GET http://example.com/a/b?x=1 HTTP/1.1\r\n" H "\r\n", HTTP_GET, "/a/b", "x=1", 1, true),
    GOOD("GET HTTP://example.com:8080 HTTP/1.1\r\n" H "\r\n", HTTP_GET, "/", "", 1, true),
    GOOD("OPTIONS * HTTP/1.1\r\n" H "\r\n", HTTP_OPTIONS, "*", "", 1, true),
    GOOD("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", HTTP_CONNECT,
         "example.com:443", "", 1, true),
    /* Limits: exactly at them is fine. */
    GOOD(GET11 H "X: " A32 "\r\n\r\n", HTTP_GET, "/", "", 1, true, .lim = &lim64),
    GOOD(GET11 H "A: 1\r\nB: 2\r\n\r\n", HTTP_GET, "/", "", 1, true, .lim = &lim3h),
    GOOD(GET11 H "Content-Length: 100\r\n\r\n", HTTP_GET, "/", "", 1, true, .has_cl = true,
         .cl = 100, .lim = &lim64),

    /* Incomplete. */
    MORE(""),
    MORE("G"),
    MORE("GET"),
    MORE("GET /index.html HTT"),
    MORE("GET / HTTP/1.1"),
    MORE("GET / HTTP/1.1\r"),
    MORE(GET11 H),
    MORE(GET11 H "\r"),
    MORE(GET11 "Host: a"),
    MORE("\r\n\r\n"),
    MORE("\r"),

    /* Request line. */
    BAD(A32 "X / HTTP/1.1\r\n" H "\r\n", 501),
    BAD(A32 A32 A32, 501), /* even before the line ends */
    BAD("GE(T / HTTP/1.1\r\n" H "\r\n", 400),
    BAD(" / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET  / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET\t/ HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1 \r\n" H "\r\n", 400),
    BAD("GET /a\x01z HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /a\x7fz HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /caf\xc3\xa9 HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /a\tb HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /a\0b HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET /\r\n" H "\r\n", 400),
    BAD("GET / \r\n" H "\r\n", 400),
    BAD("GET / HTTP/2.0\r\n" H "\r\n", 505),
    BAD("GET / HTTP/0.9\r\n" H "\r\n", 505),
    BAD("GET / HTTP/2.0\r\n", 505), /* known before the header section ends */
    BAD("GET / http/1.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/11.1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1x\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1\r\n" H "\r\n", 400),
    BAD("GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
    BAD("\rGET / HTTP/1.1\r\n" H "\r\n", 400),
    BAD("\x16\x03\x01\x02\x00\x01", 400), /* TLS on a plain port: no need to wait */
    BAD("GET * HTTP/1.1\r\n" H "\r\n", 400),
    BAD("OPTIONS *x HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET foo HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http:/a HTTP/1.1\r\n" H "\r\n", 400),
    BAD("GET http:///a HTTP/1.1\r\n" H "\r\n", 400),
    /* Field lines. */
    BAD(GET11 "Host : a\r\n\r\n", 400),
    BAD(GET11 "Host\t: a\r\n\r\n", 400),
    BAD(GET11 H "X: a\r\n b\r\n\r\n", 400),
    BAD(GET11 H "X: a\r\n\tb\r\n\r\n", 400),
    BAD(GET11 " Host: a\r\n\r\n", 400),
    BAD(GET11 H ": a\r\n\r\n", 400),
    BAD(GET11 H "X@Y: a\r\n\r\n", 400),
    BAD(GET11 H "X Y: a\r\n\r\n", 400),
    BAD(GET11 H "NoColon\r\n\r\n", 400),
    BAD(GET11 H "X: a\rb\r\n\r\n", 400),
    BAD(GET11 H "X: a\r\r\n\r\n", 400),
    BAD(GET11 H "X: a\r\n\r\r\n", 400),
    BAD(GET11 H "X: a\0b\r\n\r\n", 400),
    BAD(GET11 H "X\0: a\r\n\r\n", 400),
    BAD(GET11 H "X: a\x01\r\n\r\n", 400),
    BAD(GET11 H "X: a\x7f\r\n\r\n", 400),
    BAD(GET11 H "X: a\x1b[0m\r\n\r\n", 400),
    /* Bare LF anywhere in the header section: 400 by default (a proxy that
     * keeps it inside a field value sees no Content-Length here). */
    BAD("GET / HTTP/1.1\nHost: a\n\n", 400),
    BAD("GET / HTTP/1.1\n" H "\r\n", 400),
    BAD(GET11 "Host: a\n\r\n", 400),
    BAD(GET11 H "\n", 400),
    BAD("\n" GET11 H "\r\n", 400),
    BAD("\r\n\n" GET11 H "\r\n", 400),
    BAD(GET11 H "Dummy: x\nContent-Length: 23\r\n\r\n", 400),
    BAD(GET11 H "Dummy: x\n", 400), /* known before the section ends */
    BAD("GET / HTTP/1.1\n", 400),
    BAD("\n", 400),
    /* Host (RFC 9112 3.2). */
    BAD(GET11 "Host:\r\n\r\n", 400),
    BAD(GET11 "Host: \t \r\n\r\n", 400),
    BAD(GET11 "Host: :80\r\n\r\n", 400),
    BAD(GET11 "Host: [zz]\r\n\r\n", 400),
    BAD(GET11 "Host: [::1::2]\r\n\r\n", 400),
    BAD(GET11 "Host: [1:2:3:4:5:6:7:8:9]\r\n\r\n", 400),
    BAD(GET11 "Host: [127.0.0.1]\r\n\r\n", 400),
    BAD(GET11 "Host: [v1]\r\n\r\n", 400),
    BAD(GET11 "Host: [v.x]\r\n\r\n", 400),
    BAD(GET11 "Host: [v1.]\r\n\r\n", 400),
    BAD(GET11 "Host: [v1.a/b]\r\n\r\n", 400),
    BAD(GET11 "Host: [::1]]\r\n\r\n", 400),
    GOOD(GET11 "Host: [1:2:3:4:5:6:7:8]\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: [::ffff:192.0.2.1]:8080\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: [v1.fe80::a+en1]\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: 192.0.2.1:80\r\n\r\n", HTTP_GET, "/", "", 1, true),
    BAD(GET11 "\r\n", 400),
    BAD(GET11 "X: a\r\n\r\n", 400),
    BAD(GET11 H "Host: b\r\n\r\n", 400),
    BAD(GET11 "Host: a b\r\n\r\n", 400),
    BAD(GET11 "Host: a, b\r\n\r\n", 400),
    BAD(GET11 "Host: a/b\r\n\r\n", 400),
    BAD(GET11 "Host: u@a\r\n\r\n", 400),
    BAD(GET11 "Host: a:8x\r\n\r\n", 400),
    BAD(GET11 "Host: a:1:2\r\n\r\n", 400),
    BAD(GET11 "Host: [::1\r\n\r\n", 400),
    BAD(GET11 "Host: []\r\n\r\n", 400),
    BAD(GET11 "Host: [::1]x\r\n\r\n", 400),
    BAD(GET11 "Host: a%2\r\n\r\n", 400),
    BAD(GET11 "Host: a\x80\r\n\r\n", 400),
    GOOD(GET11 "Host: example.com:8080\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: [::1]:80\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: 127.0.0.1:\r\n\r\n", HTTP_GET, "/", "", 1, true),
    GOOD(GET11 "Host: a%20b.x_y~z\r\n\r\n", HTTP_GET, "/", "", 1, true),
    /* RFC 9110 2.5: a later HTTP/1 minor version is served as 1.1. */
    GOOD("GET / HTTP/1.2\r\n" H "\r\n", HTTP_GET, "/", "", 1, true),
    GOOD("GET / HTTP/1.9\r\n" H "\r\n", HTTP_GET, "/", "", 1, true),
    BAD(GET11 H "HOST: a\r\n\r\n", 400),
    /* Content-Length (RFC 9110 8.6, RFC 9112 6.3). */
    BAD(GET11 H "Content-Length: +3\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: -1\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 0x10\r\n\r\n", 400),
    BAD(GET11 H "Content-Length:  12 3\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 1.5\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: \r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 18446744073709551616\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 99999999999999999999999\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 5, 6\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 5,\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 1048577\r\n\r\n", 413),
    BAD(GET11 H "Content-Length: 101\r\n\r\n", 413, .lim = &lim64),
    /* Transfer-Encoding (RFC 9112 6.1, 6.3). */
    BAD(GET11 H "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400),
    BAD(GET11 H "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: gzip\r\n\r\n", 501),
    BAD(GET11 H "Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
    BAD(GET11 H "Transfer-Encoding: identity\r\n\r\n", 501),
    BAD(GET11 H "Transfer-Encoding: x-custom;q=1, chunked\r\n\r\n", 501),
    BAD(GET11 H "Transfer-Encoding: \r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chunked;x=1\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: chun ked\r\n\r\n", 400),
    BAD(GET11 H "Transfer-Encoding: \"chunked\"\r\n\r\n", 400),
    BAD("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    /* Limits: 414 when the request line does not fit, 431 when the rest. */
    BAD("GET /" A32 A32 " HTTP/1.1\r\n" H "\r\n", 414, .lim = &lim64),
    BAD("GET /" A32 A32, 414, .lim = &lim64),
    BAD(GET11 H "X: " A32 "a\r\n\r\n", 431, .lim = &lim64),
    BAD(GET11 H "X: " A32 A32, 431, .lim = &lim64),
    BAD(GET11 H "X: " A32 "\x01" A32, 400, .lim = &lim64), /* the first error wins */
    BAD("\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n"
        "\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n",
        431, .lim = &lim64),
    BAD(GET11 H "A: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431, .lim = &lim3h),
};

#define NCASES (sizeof(cases) / sizeof(cases[0]))

static bool str_is(http_str s, const char *want)
{
    return s.len == strlen(want) && (s.len == 0 || memcmp(s.ptr, want, s.len) == 0);
}

static char *heap_copy(const char *s, size_t len)
{
    char *p = malloc(len ? len : 1);
    cr_assert(p != NULL);
    memcpy(p, s, len);
    return p;
}

static int parse(const char *buf, size_t len, http_request *req, http_header *headers,
                 const http_limits *lim)
{
    static const http_limits defaults = {HTTP_MAX_HEADER_BYTES_DEFAULT, HTTP_MAX_HEADERS_DEFAULT,
                                         HTTP_MAX_BODY_BYTES_DEFAULT, false};
    req->headers = headers;
    return http_parse_request(buf, len, NULL, req, lim ? lim : &defaults);
}

/* parse(), resumed from @progress. */
static int parse_resumed(const char *buf, size_t len, http_parse_progress *progress,
                         http_request *req, http_header *headers, const http_limits *lim)
{
    req->headers = headers;
    return http_parse_request(buf, len, progress, req, lim);
}

/* The fields a valid case expects, for the whole input or any longer prefix. */
static void check_fields(size_t i, const parse_case *c, const http_request *req)
{
    cr_expect(req->method == c->method, "case %zu: method %d", i, req->method);
    cr_expect(str_is(req->path, c->path), "case %zu: path '%.*s'", i, (int)req->path.len,
              req->path.ptr);
    cr_expect(str_is(req->query, c->query), "case %zu: query '%.*s'", i, (int)req->query.len,
              req->query.ptr);
    cr_expect(req->minor_version == c->minor, "case %zu: minor version", i);
    cr_expect(req->keep_alive == c->keep_alive, "case %zu: keep_alive", i);
    cr_expect(req->has_content_length == c->has_cl, "case %zu: has_content_length", i);
    cr_expect(req->content_length == c->cl, "case %zu: content_length %llu", i,
              (unsigned long long)req->content_length);
    cr_expect(req->chunked == c->chunked, "case %zu: chunked", i);
    cr_expect(req->expect_continue == c->expect_continue, "case %zu: expect_continue", i);
    if (c->header) {
        const http_str *v = http_request_header(req, c->header);
        cr_expect(v && str_is(*v, c->value), "case %zu: header %s", i, c->header);
    }
}

Test(parser, table)
{
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    for (size_t i = 0; i < NCASES; i++) {
        const parse_case *c = &cases[i];
        char *buf = heap_copy(c->input, c->len);
        http_request req;
        int r = parse(buf, c->len, &req, headers, c->lim);
        if (c->result == OK) {
            cr_expect(r == (int)(c->len - c->trailing), "case %zu: got %d (%d %s)", i, r,
                      req.error_status, req.error ? req.error : "");
            if (r > 0)
                check_fields(i, c, &req);
        } else {
            cr_expect(r == c->result, "case %zu: got %d, want %d", i, r, c->result);
            if (c->result == HTTP_PARSE_ERROR) {
                cr_expect(req.error_status == c->status, "case %zu: status %d, want %d", i,
                          req.error_status, c->status);
                cr_expect(req.error != NULL, "case %zu: no reason", i);
            }
        }
        free(buf);
    }
}

/* Every valid request, cut at every byte: incomplete until its last header
 * byte, then the same result as whole, however many bytes follow. */
Test(parser, byte_by_byte)
{
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    for (size_t i = 0; i < NCASES; i++) {
        const parse_case *c = &cases[i];
        if (c->result != OK)
            continue;
        size_t want = c->len - c->trailing;
        for (size_t k = 0; k <= c->len; k++) {
            char *buf = heap_copy(c->input, k);
            http_request req;
            int r = parse(buf, k, &req, headers, c->lim);
            if (k < want) {
                cr_expect(r == HTTP_PARSE_INCOMPLETE, "case %zu, %zu bytes: got %d (%d)", i, k, r,
                          req.error_status);
            } else {
                cr_expect(r == (int)want, "case %zu, %zu bytes: got %d", i, k, r);
                if (r == (int)want)
                    check_fields(i, c, &req);
            }
            free(buf);
        }
    }
}

/* The result a case expects from its whole input. */
static void check_case(size_t i, const char *how, const parse_case *c, int r,
                       const http_request *req)
{
    if (c->result == OK) {
        cr_expect(r == (int)(c->len - c->trailing), "case %zu (%s): got %d (%d %s)", i, how, r,
                  req->error_status, req->error ? req->error : "");
        if (r == (int)(c->len - c->trailing))
            check_fields(i, c, req);
    } else {
        cr_expect(r == c->result, "case %zu (%s): got %d, want %d", i, how, r, c->result);
        if (c->result == HTTP_PARSE_ERROR)
            cr_expect(req->error_status == c->status, "case %zu (%s): status %d, want %d", i, how,
                      req->error_status, c->status);
    }
}

/* Every case of the table, valid or not, split in two at every byte: the
 * first piece parsed, then the whole resumed from its progress, as a
 * connection does when a request spans two reads. The same result as
 * whole. */
Test(parser, resumed_after_every_split)
{
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    for (size_t i = 0; i < NCASES; i++) {
        const parse_case *c = &cases[i];
        for (size_t k = 0; k <= c->len; k++) {
            char how[32];
            snprintf(how, sizeof(how), "split at %zu", k);
            http_parse_progress progress = {0};
            http_request req;
            char *first = heap_copy(c->input, k);
            int r = parse_resumed(first, k, &progress, &req, headers, c->lim);
            free(first);
            if (r == HTTP_PARSE_INCOMPLETE) {
                char *whole = heap_copy(c->input, c->len);
                r = parse_resumed(whole, c->len, &progress, &req, headers, c->lim);
                check_case(i, how, c, r, &req);
                free(whole);
            } else if (c->result != HTTP_PARSE_ERROR) {
                /* Only an error may show before the whole input (a bad
                 * request line, a bare LF); a request ends where it ends. */
                cr_expect(r == (int)(c->len - c->trailing) && k >= (size_t)r,
                          "case %zu (%s): got %d from the first piece", i, how, r);
            } else {
                cr_expect(r == HTTP_PARSE_ERROR && req.error_status == c->status,
                          "case %zu (%s): got %d (%d) from the first piece", i, how, r,
                          req.error_status);
            }
        }
    }
}

/* Every case fed a byte at a time with one progress, each call on a fresh
 * buffer of exactly that many bytes: every prefix gets the result a parse
 * from the first byte gets, until the first result that is not "need
 * more". */
Test(parser, resumed_byte_by_byte)
{
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    http_header fresh_headers[HTTP_MAX_HEADERS_DEFAULT];
    for (size_t i = 0; i < NCASES; i++) {
        const parse_case *c = &cases[i];
        http_parse_progress progress = {0};
        int r = HTTP_PARSE_INCOMPLETE;
        for (size_t k = 0; k <= c->len && r == HTTP_PARSE_INCOMPLETE; k++) {
            char *buf = heap_copy(c->input, k);
            http_request req, fresh;
            r = parse_resumed(buf, k, &progress, &req, headers, c->lim);
            int want = parse(buf, k, &fresh, fresh_headers, c->lim);
            cr_expect(r == want, "case %zu, %zu bytes: resumed %d, from the start %d", i, k, r,
                      want);
            if (r == HTTP_PARSE_ERROR && want == HTTP_PARSE_ERROR)
                cr_expect(req.error_status == fresh.error_status && req.error == fresh.error,
                          "case %zu, %zu bytes: %d '%s', from the start %d '%s'", i, k,
                          req.error_status, req.error, fresh.error_status, fresh.error);
            if (r > 0 && c->result == OK)
                check_fields(i, c, &req);
            free(buf);
        }
        if (c->result != HTTP_PARSE_INCOMPLETE)
            cr_expect(r != HTTP_PARSE_INCOMPLETE, "case %zu: still incomplete when whole", i);
    }
}

/*
 * A header section trickled a byte at a time (slowloris), 4, 8 and 16 KiB
 * of it, in three shapes: one long field, a long request-target, and the
 * empty lines allowed before the request line. The parser's own count of
 * the bytes it read is linear in the section's length: the same few bytes
 * per byte at 16 KiB as at 4 KiB (a resumed call re-reads a bounded tail:
 * the 2 bytes after the last LF, the method and the last 10 bytes of a
 * request-target), where a search from the first byte on every call reads
 * n/2 per byte (134 MB for 16 KiB). Counted bytes, not time: nothing here
 * depends on the machine.
 */
Test(parser, trickled_header_reads_linear)
{
    enum { PER_BYTE_MAX = 32 };
    static const http_limits lim = {
        .max_header_bytes = 64 * 1024, .max_headers = 100, .max_body_bytes = 100};
    http_header headers[100];
    for (int shape = 0; shape < 3; shape++) {
        double per_byte_4kib = 0;
        for (size_t kib = 4; kib <= 16; kib *= 2) {
            size_t n = kib * 1024;
            char *in = malloc(n);
            cr_assert(in != NULL);
            memset(in, 'a', n);
            static const char field_head[] = "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ";
            static const char target_tail[] = " HTTP/1.1\r\nHost: a\r\n\r\n";
            /* An even length, so that the CRLFs before it stay whole. */
            static const char request[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n";
            const char *what;
            if (shape == 0) {
                what = "a field value";
                memcpy(in, field_head, sizeof(field_head) - 1);
                memcpy(in + n - 4, "\r\n\r\n", 4);
            } else if (shape == 1) {
                what = "a request-target";
                memcpy(in, "GET /", 5);
                memcpy(in + n - (sizeof(target_tail) - 1), target_tail, sizeof(target_tail) - 1);
            } else {
                what = "empty lines before the request line";
                for (size_t k = 0; k + 1 < n; k += 2)
                    memcpy(in + k, "\r\n", 2);
                memcpy(in + n - (sizeof(request) - 1), request, sizeof(request) - 1);
            }
            http_parse_progress progress = {0};
            http_request req;
            int r = HTTP_PARSE_INCOMPLETE;
            size_t k = 0;
            while (r == HTTP_PARSE_INCOMPLETE && k < n)
                r = parse_resumed(in, ++k, &progress, &req, headers, &lim);
            cr_expect_eq(r, (int)n, "%s, %zu KiB: got %d after %zu bytes (%d %s)", what, kib, r,
                         k, req.error_status, req.error ? req.error : "");
            double per_byte = (double)progress.bytes_read / (double)n;
            printf("trickled %zu KiB (%s) a byte at a time: the parser read %zu bytes, %.2f per "
                   "byte\n", kib, what, progress.bytes_read, per_byte);
            cr_expect(per_byte <= PER_BYTE_MAX,
                      "%s, %zu KiB a byte at a time: the parser read %zu bytes, %.1f per byte",
                      what, kib, progress.bytes_read, per_byte);
            if (kib == 4)
                per_byte_4kib = per_byte;
            else
                cr_expect(per_byte <= 1.1 * per_byte_4kib,
                          "%s: %.2f bytes read per byte at %zu KiB, %.2f at 4 KiB: not linear",
                          what, per_byte, kib, per_byte_4kib);
            free(in);
        }
    }
}

Test(parser, pipelined)
{
    static const char in[] = "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"
                             "POST /b?x HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"
                             "GET /c HTTP/1.0\r\n\r\n";
    http_header headers[8];
    http_limits lim = http_limits_default();
    lim.max_headers = 8;
    http_request req = {.headers = headers};
    size_t off = 0;

    int r = http_parse_request(in + off, sizeof(in) - 1 - off, NULL, &req, &lim);
    cr_assert_eq(r, 28);
    cr_expect(req.method == HTTP_GET && str_is(req.path, "/a") && req.keep_alive);
    off += (size_t)r;

    r = http_parse_request(in + off, sizeof(in) - 1 - off, NULL, &req, &lim);
    cr_assert_eq(r, 50);
    cr_expect(req.method == HTTP_POST && str_is(req.path, "/b") && str_is(req.query, "x"));
    cr_expect(req.content_length == 2 && req.num_headers == 2);
    off += (size_t)r + req.content_length;

    r = http_parse_request(in + off, sizeof(in) - 1 - off, NULL, &req, &lim);
    cr_assert_eq(r, (int)(sizeof(in) - 1 - off));
    cr_expect(req.method == HTTP_GET && str_is(req.path, "/c") && !req.keep_alive);
}

Test(parser, fields_in_order)
{
    static const char in[] = "GET / HTTP/1.1\r\nHost: h\r\nX-One: 1\r\nx-two:2 \r\n\r\n";
    http_header headers[4];
    http_limits lim = {.max_header_bytes = 1024, .max_headers = 4, .max_body_bytes = 0};
    http_request req = {.headers = headers};
    cr_assert_eq(http_parse_request(in, sizeof(in) - 1, NULL, &req, &lim), (int)sizeof(in) - 1);
    cr_assert_eq(req.num_headers, 3);
    cr_expect(str_is(req.headers[1].name, "X-One") && str_is(req.headers[1].value, "1"));
    cr_expect(str_is(req.headers[2].name, "x-two") && str_is(req.headers[2].value, "2"));
    cr_expect(str_is(req.method_str, "GET") && str_is(req.target, "/"));
    cr_expect(req.has_host);
    cr_expect(http_request_header(&req, "X-TWO") == &req.headers[2].value);
    cr_expect(http_request_header(&req, "x-three") == NULL);
}

/* X-Request-Id: the first one, found whatever its case; NULL without one. */
Test(parser, request_id_field)
{
    static const char two[] = "GET / HTTP/1.1\r\nHost: h\r\nx-request-ID: a1\r\n"
                              "X-Request-Id: b2\r\n\r\n";
    static const char none[] = "GET / HTTP/1.1\r\nHost: h\r\nX-Request: c\r\n\r\n";
    http_header headers[4];
    http_limits lim = {.max_header_bytes = 1024, .max_headers = 4, .max_body_bytes = 0};
    http_request req = {.headers = headers};
    cr_assert_eq(http_parse_request(two, sizeof(two) - 1, NULL, &req, &lim), (int)sizeof(two) - 1);
    cr_assert(req.request_id != NULL);
    cr_expect(str_is(*req.request_id, "a1"));
    cr_expect(req.request_id == http_request_header(&req, "X-Request-Id"));
    cr_assert_eq(http_parse_request(none, sizeof(none) - 1, NULL, &req, &lim), (int)sizeof(none) - 1);
    cr_expect(req.request_id == NULL);
}

/* A header section received whole is read once: the first look parses
 * it, with no search for its end before (http_parser_read_bytes_total,
 * about 1 per byte: docs/metrics.md). The framing fields' names are
 * matched in any case, and a name one tchar away from one is not it. */
Test(parser, whole_section_read_once)
{
    static const char in[] = "GET /a?b HTTP/1.1\r\nhOST: h:80\r\nCONTENT-length: 4\r\n"
                             "Transfer_Encoding: chunked\r\nX-REQUEST-ID: r1\r\n\r\nbody";
    http_header headers[8];
    http_limits lim = {.max_header_bytes = 1024, .max_headers = 8, .max_body_bytes = 16};
    http_request req = {.headers = headers};
    http_parse_progress progress = {0};
    size_t n = sizeof(in) - 1 - 4;
    cr_assert_eq(http_parse_request(in, sizeof(in) - 1, &progress, &req, &lim), (int)n);
    cr_expect_eq(progress.bytes_read, n, "a %zu-byte section received whole: %zu bytes read", n,
                 progress.bytes_read);
    cr_expect(req.has_host && req.has_content_length && req.content_length == 4);
    cr_expect(!req.chunked, "Transfer_Encoding is not Transfer-Encoding");
    cr_assert(req.request_id != NULL);
    cr_expect(str_is(*req.request_id, "r1"));
}

/* Every byte in a Host reg-name: unreserved and sub-delims (RFC 3986
 * section 2) pass, anything else gets 400. '%' starts a pct-encoded
 * triplet and ':' the port, so both are left to the table above. */
Test(parser, host_bytes)
{
    static const char allowed[] = "-._~!$&'()*+,;=";
    for (int b = 1; b < 256; b++) {
        if (b == '%' || b == ':' || b == '\r' || b == '\n')
            continue;
        char in[64];
        int n = snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: a%cb\r\n\r\n", b);
        http_header headers[4];
        http_limits lim = {.max_header_bytes = 1024, .max_headers = 4, .max_body_bytes = 0};
        http_request req = {.headers = headers};
        bool want = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
                    strchr(allowed, b) != NULL;
        int r = http_parse_request(in, (size_t)n, NULL, &req, &lim);
        if (want)
            cr_expect_eq(r, n, "byte 0x%02x in Host: %d", b, r);
        else
            cr_expect(r == HTTP_PARSE_ERROR && req.error_status == 400, "byte 0x%02x in Host: %d",
                      b, r);
    }
}

/* The default limit of 100 fields: 100 pass, 101 get 431. */
Test(parser, header_count_limit)
{
    static char buf[8192];
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    http_limits lim = http_limits_default();
    for (int extra = 0; extra <= 1; extra++) {
        size_t n = (size_t)snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n");
        for (int i = 1; i < HTTP_MAX_HEADERS_DEFAULT + extra; i++)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "X-%d: %d\r\n", i, i);
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "\r\n");
        http_request req = {.headers = headers};
        int r = http_parse_request(buf, n, NULL, &req, &lim);
        if (extra) {
            cr_expect_eq(r, HTTP_PARSE_ERROR);
            cr_expect_eq(req.error_status, 431);
        } else {
            cr_expect_eq(r, (int)n);
            cr_expect_eq(req.num_headers, HTTP_MAX_HEADERS_DEFAULT);
        }
    }
}

/* The default 16 KiB limit, with more bytes received than that. */
Test(parser, header_size_limit)
{
    size_t size = HTTP_MAX_HEADER_BYTES_DEFAULT + 100;
    char *buf = malloc(size);
    cr_assert(buf != NULL);
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    http_limits lim = http_limits_default();
    http_request req = {.headers = headers};

    memset(buf, 'a', size);
    memcpy(buf, "GET /", 5);
    cr_expect_eq(http_parse_request(buf, size, NULL, &req, &lim), HTTP_PARSE_ERROR);
    cr_expect_eq(req.error_status, 414);
    /* Below the limit it is only incomplete. */
    cr_expect_eq(http_parse_request(buf, HTTP_MAX_HEADER_BYTES_DEFAULT - 1, NULL, &req, &lim),
                 HTTP_PARSE_INCOMPLETE);

    static const char head[] = "GET / HTTP/1.1\r\nHost: a\r\nCookie: ";
    memcpy(buf, head, sizeof(head) - 1);
    cr_expect_eq(http_parse_request(buf, size, NULL, &req, &lim), HTTP_PARSE_ERROR);
    cr_expect_eq(req.error_status, 431);
    memcpy(buf + size - 4, "\r\n\r\n", 4);
    cr_expect_eq(http_parse_request(buf, size, NULL, &req, &lim), HTTP_PARSE_ERROR);
    cr_expect_eq(req.error_status, 431);
    /* Exactly at the limit it fits. */
    memcpy(buf + HTTP_MAX_HEADER_BYTES_DEFAULT - 4, "\r\n\r\n", 4);
    cr_expect_eq(http_parse_request(buf, size, NULL, &req, &lim), (int)HTTP_MAX_HEADER_BYTES_DEFAULT);
    free(buf);
}

Test(parser, helpers)
{
    cr_expect(http_str_equal_ci((http_str){"Content-Length", 14}, "content-LENGTH"));
    cr_expect(!http_str_equal_ci((http_str){"Content-Length", 14}, "content-lengt"));
    cr_expect(!http_str_equal_ci((http_str){"\r", 1}, "-"));
    cr_expect(http_str_equal_ci((http_str){"", 0}, ""));
    http_limits d = http_limits_default();
    cr_expect_eq(d.max_header_bytes, HTTP_MAX_HEADER_BYTES_DEFAULT);
    cr_expect_eq(d.max_headers, HTTP_MAX_HEADERS_DEFAULT);
    cr_expect_eq(d.max_body_bytes, HTTP_MAX_BODY_BYTES_DEFAULT);
    cr_expect(!d.allow_bare_lf);
}

/* The reason given with an error says what is wrong. */
Test(parser, error_reasons)
{
    static const struct {
        const char *input;
        const char *error;
    } cases[] = {
        {GET11 H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         "chunked applied more than once"},
        {GET11 H "Transfer-Encoding: chunked, chunked\r\n\r\n", "chunked applied more than once"},
        {GET11 H "Transfer-Encoding: chunked, gzip\r\n\r\n", "chunked is not the final coding"},
        {GET11 H "Dummy: x\nContent-Length: 23\r\n\r\n", "bare LF"},
        {GET11 "Host:\r\n\r\n", "invalid Host"},
    };
    http_header headers[HTTP_MAX_HEADERS_DEFAULT];
    http_limits lim = http_limits_default();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_request req = {.headers = headers};
        int r = http_parse_request(cases[i].input, strlen(cases[i].input), NULL, &req, &lim);
        cr_expect_eq(r, HTTP_PARSE_ERROR, "case %zu", i);
        cr_expect(req.error && strcmp(req.error, cases[i].error) == 0, "case %zu: '%s'", i,
                  req.error ? req.error : "(none)");
    }
}

/* ------------------------------------------------------------------------ */
/* Chunked transfer coding (RFC 9112 section 7.1)                            */

typedef struct chunk_case {
    const char *input;
    size_t len;
    int result; /* OK (consumed = len - trailing), INCOMPLETE or ERROR */
    int status;
    const char *body; /* decoded, for OK and INCOMPLETE */
    size_t body_len;
    size_t trailing;
    uint64_t max_body; /* 0: 1 MiB */
} chunk_case;

#define CGOOD(s, b, ...)                                                                           \
    {                                                                                              \
        IN(s), .result = OK, .body = (b), .body_len = sizeof(b) - 1, __VA_ARGS__                   \
    }
#define CMORE(s, b, ...)                                                                           \
    {                                                                                              \
        IN(s), .result = HTTP_PARSE_INCOMPLETE, .body = (b), .body_len = sizeof(b) - 1,            \
               __VA_ARGS__                                                                         \
    }
#define CBAD(s, st, ...)                                                                           \
    {                                                                                              \
        IN(s), .result = HTTP_PARSE_ERROR, .status = (st), __VA_ARGS__                             \
    }

static const chunk_case chunk_cases[] = {
    CGOOD("5\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"),
    CGOOD("A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n", "0123456789abcdefghij"),
    CGOOD("1\r\n\0\r\n0\r\n\r\n", "\0"),
    CGOOD("0\r\n\r\n", ""),
    CGOOD("000\r\n\r\n", ""),
    CGOOD("0005\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("000000000000000000000005\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5;foo=bar\r\nhello\r\n0;x\r\n\r\n", "hello"),
    CGOOD("5;a=\"b c;d\"\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5 ;a\r\nhello\r\n0\t; b = 1\r\n\r\n", "hello"),
    /* chunk-ext (RFC 9112 7.1.1): names, token and quoted-string values. */
    CGOOD("5;a;b;c=d\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5;a=\"x\\\"y\\\\\";b\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5;a=\"\" ;b= \"\t\xff\"\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5;!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~\r\nhello\r\n0\r\n\r\n", "hello"),
    CGOOD("5\r\nhello\r\n0\r\nX-Trailer: 1\r\nY:2 \t\r\n\r\n", "hello"),
    CGOOD("5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "hello", .trailing = 16),
    CGOOD("5\r\nhello\r\n0\r\n\r\n", "hello", .max_body = 5),
    CGOOD("3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", "abcde", .max_body = 5),
    CMORE("5\r\nhel", "hel"),
    CMORE("5\r\nhello\r\n0\r\n", "hello"),
    CMORE("5\r\nhello\r\n0\r\n\r", "hello"),
    CMORE("FFFFFFFFFFFFFFFF\r\nabc", "abc", .max_body = UINT64_MAX),
    CMORE("", ""),
    CBAD("FFFFFFFFFFFFFFFF\r\n", 413),
    CBAD("10000000000000000\r\n", 400),
    CBAD("123x\r\n", 400),
    CBAD("x\r\n", 400),
    CBAD("\r\n", 400),
    CBAD(";a\r\n", 400),
    CBAD("-1\r\n", 400),
    CBAD("0x5\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5 \r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5 x\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a\x01\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5; \r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;;a\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;=1\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a==1\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=b c\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=b=c\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a b\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a \r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=1 \r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"x\" \r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a@b\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=(x)\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"x\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"x\"y\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"x\x7f\"\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=x\x80\r\nhello\r\n0\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0;\r\n\r\n", 400),
    CBAD("5\rhello\r\n0\r\n\r\n", 400),
    CBAD("5\r\nhelloX\r\n0\r\n\r\n", 400),
    CBAD("5\r\nhello world\r\n0\r\n\r\n", 400),
    CBAD("5\r\nhello\rX0\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\n\rX", 400),
    CBAD("5\r\nhello\r\n0\r\n X: 1\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\nNoColon\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\n: v\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\nX: a\0b\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\nX: a\rb\r\n\r\n", 400),
    /* RFC 9112 7.1: CRLF only inside the chunked coding (no bare LF). */
    CBAD("5\nhello\r\n0\r\n\r\n", 400),
    CBAD("5;a=1\nhello\r\n0\r\n\r\n", 400),
    CBAD("5\r\nhello\n0\r\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\nX: y\n\r\n", 400),
    CBAD("5\r\nhello\r\n0\r\n\n", 400),
    CBAD("5\r\nhello\r\n0\r\n\r\n", 413, .max_body = 4),
    CBAD("3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n", 413, .max_body = 5),
};

#define NCHUNK (sizeof(chunk_cases) / sizeof(chunk_cases[0]))

/* Decodes @c->input fed in pieces of the sizes in @cuts (the rest last);
 * returns the result and the decoded bytes in @out. */
static ssize_t chunk_feed(const chunk_case *c, const size_t *cuts, size_t ncuts, char *out,
                          size_t *out_len, size_t *consumed, int *status)
{
    http_chunked_decoder d;
    http_chunked_init(&d, c->max_body ? c->max_body : HTTP_MAX_BODY_BYTES_DEFAULT);
    size_t off = 0;
    ssize_t r = HTTP_PARSE_INCOMPLETE;
    *out_len = 0;
    *consumed = 0;
    for (size_t i = 0; i <= ncuts && off <= c->len; i++) {
        size_t piece = i < ncuts ? cuts[i] : c->len - off;
        if (off + piece > c->len)
            piece = c->len - off;
        char *buf = heap_copy(c->input + off, piece);
        size_t len = piece;
        r = http_chunked_decode(&d, buf, &len);
        memcpy(out + *out_len, buf, len);
        *out_len += len;
        free(buf);
        if (r == HTTP_PARSE_ERROR)
            break;
        *consumed += r >= 0 ? (size_t)r : piece;
        if (r >= 0)
            break;
        off += piece;
    }
    *status = d.error_status;
    return r;
}

static void check_chunk(size_t i, const char *how, const chunk_case *c, ssize_t r, const char *out,
                        size_t out_len, size_t consumed, int status)
{
    if (c->result == OK) {
        cr_expect(r >= 0, "chunk case %zu (%s): got %zd (%d)", i, how, r, status);
        cr_expect(consumed == c->len - c->trailing, "chunk case %zu (%s): consumed %zu", i, how,
                  consumed);
    } else {
        cr_expect(r == c->result, "chunk case %zu (%s): got %zd, want %d", i, how, r, c->result);
    }
    if (c->result == HTTP_PARSE_ERROR) {
        cr_expect(status == c->status, "chunk case %zu (%s): status %d", i, how, status);
    } else {
        cr_expect(out_len == c->body_len && memcmp(out, c->body, out_len) == 0,
                  "chunk case %zu (%s): body '%.*s'", i, how, (int)out_len, out);
    }
}

Test(chunked, table)
{
    char out[256];
    for (size_t i = 0; i < NCHUNK; i++) {
        const chunk_case *c = &chunk_cases[i];
        size_t out_len, consumed;
        int status;
        ssize_t r = chunk_feed(c, NULL, 0, out, &out_len, &consumed, &status);
        check_chunk(i, "whole", c, r, out, out_len, consumed, status);
    }
}

/* Split in two at every byte, then fed one byte at a time: the same result. */
Test(chunked, every_split)
{
    char out[256];
    size_t ones[256];
    for (size_t k = 0; k < 256; k++)
        ones[k] = 1;
    for (size_t i = 0; i < NCHUNK; i++) {
        const chunk_case *c = &chunk_cases[i];
        size_t out_len, consumed;
        int status;
        char how[32];
        for (size_t k = 0; k <= c->len; k++) {
            ssize_t r = chunk_feed(c, &k, 1, out, &out_len, &consumed, &status);
            snprintf(how, sizeof(how), "split at %zu", k);
            check_chunk(i, how, c, r, out, out_len, consumed, status);
        }
        cr_assert(c->len <= 256);
        ssize_t r = chunk_feed(c, ones, c->len, out, &out_len, &consumed, &status);
        check_chunk(i, "byte by byte", c, r, out, out_len, consumed, status);
    }
}

/* Long extensions and trailers are bounded. */
Test(chunked, line_limits)
{
    size_t size = 16 * 1024;
    char *buf = malloc(size);
    cr_assert(buf != NULL);
    http_chunked_decoder d;

    /* A size line of 5000 bytes of extensions. */
    memset(buf, 'a', size);
    memcpy(buf, "5;", 2);
    size_t len = 5000;
    http_chunked_init(&d, 1024);
    cr_expect_eq(http_chunked_decode(&d, buf, &len), HTTP_PARSE_ERROR);
    cr_expect_eq(d.error_status, 400);

    /* A 9 KiB trailer section. */
    memcpy(buf, "0\r\nX: ", 6);
    len = 9 * 1024;
    http_chunked_init(&d, 1024);
    cr_expect_eq(http_chunked_decode(&d, buf, &len), HTTP_PARSE_ERROR);
    cr_expect_eq(d.error_status, 431);

    /* Once failed, it stays failed; once done, it consumes nothing more. */
    len = 3;
    cr_expect_eq(http_chunked_decode(&d, buf, &len), HTTP_PARSE_ERROR);
    memcpy(buf, "0\r\n\r\n0\r\n", 8);
    len = 8;
    http_chunked_init(&d, 1024);
    cr_expect_eq(http_chunked_decode(&d, buf, &len), 5);
    len = 3;
    cr_expect_eq(http_chunked_decode(&d, buf + 5, &len), 0);
    cr_expect_eq(len, 0);
    free(buf);
}

/* The bounds exactly as docs/hardening.md gives them (issue 39: it said a
 * size line could be 4 KiB, and one of 4,096 bytes was refused): a size
 * line of up to 4,095 bytes of size and extensions (4 KiB with its CR), a
 * trailer section of up to 8 KiB with its final CRLF. */
Test(chunked, line_limits_at_their_boundaries)
{
    size_t size = 16 * 1024;
    char *buf = malloc(size);
    cr_assert(buf != NULL);
    for (size_t line = 4094; line <= 4097; line++) {
        /* "1;aaa...a" of @line bytes, then CRLF, one byte of data, the end. */
        memset(buf, 'a', line);
        memcpy(buf, "1;", 2);
        memcpy(buf + line, "\r\nx\r\n0\r\n\r\n", 10);
        http_chunked_decoder d;
        http_chunked_init(&d, 1024);
        size_t len = line + 10;
        ssize_t r = http_chunked_decode(&d, buf, &len);
        if (line <= 4095) {
            cr_expect_eq(r, (ssize_t)(line + 10), "a size line of %zu bytes", line);
            cr_expect_eq(len, 1);
        } else {
            cr_expect_eq(r, HTTP_PARSE_ERROR, "a size line of %zu bytes", line);
            cr_expect_eq(d.error_status, 400);
            cr_expect(d.error && strcmp(d.error, "chunk-size line too long") == 0);
        }
    }
    for (size_t trailers = 8191; trailers <= 8193; trailers++) {
        /* "0\r\n", then one field "X: vvv...v\r\n" and the final CRLF:
         * @trailers bytes from the X to the end. */
        memcpy(buf, "0\r\nX: ", 6);
        memset(buf + 6, 'v', trailers - 3 - 4);
        memcpy(buf + 3 + trailers - 4, "\r\n\r\n", 4);
        http_chunked_decoder d;
        http_chunked_init(&d, 1024);
        size_t len = 3 + trailers;
        ssize_t r = http_chunked_decode(&d, buf, &len);
        if (trailers <= 8192) {
            cr_expect_eq(r, (ssize_t)(3 + trailers), "a trailer section of %zu bytes", trailers);
        } else {
            cr_expect_eq(r, HTTP_PARSE_ERROR, "a trailer section of %zu bytes", trailers);
            cr_expect_eq(d.error_status, 431);
        }
    }
    free(buf);
}

/* Every chunk-size line within its 4 KiB, but 16 KiB of extensions in all. */
Test(chunked, extension_total_limit)
{
    char ext[1000];
    memset(ext, 'e', sizeof(ext));
    ext[0] = ';';
    size_t size = 32 * (sizeof(ext) + 16);
    char *buf = malloc(size);
    cr_assert(buf != NULL);
    for (size_t chunks = 15; chunks <= 17; chunks += 2) {
        size_t n = 0;
        for (size_t i = 0; i < chunks; i++) {
            buf[n++] = '1';
            memcpy(buf + n, ext, sizeof(ext));
            n += sizeof(ext);
            memcpy(buf + n, "\r\nx\r\n", 5);
            n += 5;
        }
        memcpy(buf + n, "0\r\n\r\n", 5);
        n += 5;
        http_chunked_decoder d;
        http_chunked_init(&d, 1024);
        size_t len = n;
        ssize_t r = http_chunked_decode(&d, buf, &len);
        if (chunks == 15) { /* 15 * 1001 bytes: under the limit */
            cr_expect_eq(r, (ssize_t)n);
            cr_expect_eq(len, 15);
        } else {
            cr_expect_eq(r, HTTP_PARSE_ERROR);
            cr_expect_eq(d.error_status, 400);
            cr_expect(d.error && strcmp(d.error, "chunk extensions too long") == 0, "%s",
                      d.error ? d.error : "(none)");
        }
    }
    free(buf);
}

/* The reason given with an error: 413 says "body too large", as for
 * Content-Length. */
Test(chunked, error_reasons)
{
    static const struct {
        const char *input;
        int status;
        const char *error;
    } cases[] = {
        {"ffffffff\r\n", 413, "body too large"},
        {"3\r\nabc\r\n3\r\ndef\r\n", 413, "body too large"},
        {"3;a=b c\r\n", 400, "invalid chunk extension"},
        {"3x\r\n", 400, "malformed chunked body"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        size_t len = strlen(cases[i].input);
        memcpy(buf, cases[i].input, len);
        http_chunked_decoder d;
        http_chunked_init(&d, 5);
        cr_expect_eq(http_chunked_decode(&d, buf, &len), HTTP_PARSE_ERROR, "case %zu", i);
        cr_expect_eq(d.error_status, cases[i].status, "case %zu", i);
        cr_expect(d.error && strcmp(d.error, cases[i].error) == 0, "case %zu: '%s'", i,
                  d.error ? d.error : "(none)");
    }
}
