/*
 * CORS (Fetch standard, "CORS protocol"): the policy read from
 * --cors-origins, and per request the choice of the CORS header lines of
 * the response, or the answer to a preflight. See coring/http/cors.h.
 *
 * Everything that does not depend on the request is written once, at
 * start-up: each allowed origin keeps the header lines of its responses
 * ready, so an actual request costs a scan for Origin and a comparison per
 * configured origin, and allocates nothing. Every response of a server
 * with CORS on says Vary: Origin, with or without an Origin in the request
 * (Fetch standard, "CORS protocol and HTTP caches"): a cache must not hand
 * the answer to one origin to another.
 */
#include "internal.h"

#include "coring/http/cors.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest origin accepted in --cors-origins, bytes, and how many. */
#define CORS_MAX_ORIGIN 256
#define CORS_MAX_ORIGINS 64

/* The lines of an actual response from an allowed origin: the origin, the
 * one response header a page cannot read without it (X-Request-Id). */
#define ALLOW_ORIGIN "\r\nAccess-Control-Allow-Origin: "
#define ACTUAL_TAIL "\r\nAccess-Control-Expose-Headers: X-Request-Id\r\nVary: Origin"
#define VARY_ORIGIN "\r\nVary: Origin"
#define PREFLIGHT_VARY                                                                             \
    "\r\nVary: Origin, Access-Control-Request-Method, Access-Control-Request-Headers"

typedef struct cors_origin {
    char *origin; /* as matched, NUL-terminated */
    size_t len;
    char *lines; /* ALLOW_ORIGIN origin ACTUAL_TAIL */
    size_t lines_len;
} cors_origin;

struct http_cors {
    bool any; /* "*" */
    size_t count;
    cors_origin origins[]; /* "*" has one: origin "*" */
};

/* The headers of HTTP_CORS_ALLOWED_HEADERS, one by one. */
static const char *const allowed_headers[] = {
    "Accept",       "Accept-Language", "Content-Language",
    "Content-Type", "Authorization",   "X-Request-Id",
    "Idempotency-Key",
};
#define NUM_ALLOWED_HEADERS (sizeof(allowed_headers) / sizeof(allowed_headers[0]))

static bool is_scheme_char(unsigned char c)
{
    return isalnum(c) || c == '+' || c == '-' || c == '.';
}

/* reg-name's unreserved and sub-delims (RFC 3986 section 3.2.2), less the
 * ones a browser never leaves in a serialised host. */
static bool is_host_char(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

/*
 * Checks one --cors-origins entry @s (@n bytes) and writes it, lower-cased,
 * to @out (CORS_MAX_ORIGIN + 1 bytes). 0 or -EINVAL with the reason.
 */
static int parse_origin(const char *s, size_t n, char *out, char *error, size_t size)
{
    if (n == 0)
        return http_setting_refused(error, size, "an empty origin in the list");
    if (n > CORS_MAX_ORIGIN)
        return http_setting_refused(error, size, "'%.40s...': longer than %d bytes", s,
                                    CORS_MAX_ORIGIN);
    if (n == 4 && memcmp(s, "null", 4) == 0)
        return http_setting_refused(error, size,
                                    "'null': any sandboxed or file: page sends it; not allowed");
    for (size_t i = 0; i < n; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[n] = '\0';

    const char *sep = strstr(out, "://");
    size_t scheme_len = sep ? (size_t)(sep - out) : 0;
    if (scheme_len == 0 || !isalpha((unsigned char)out[0]))
        return http_setting_refused(
            error, size, "'%.*s': expected scheme://host[:port], e.g. https://app.example", (int)n,
            s);
    for (size_t i = 0; i < scheme_len; i++)
        if (!is_scheme_char((unsigned char)out[i]))
            return http_setting_refused(error, size, "'%.*s': bad scheme", (int)n, s);

    const char *host = sep + 3, *end = out + n, *p = host;
    if (*p == '[') {
        /* An IPv6 literal: hex digits, ':' and '.' up to ']'. */
        p++;
        while (p < end && (isxdigit((unsigned char)*p) || *p == ':' || *p == '.'))
            p++;
        if (p == host + 1 || p == end || *p != ']')
            return http_setting_refused(error, size, "'%.*s': bad IPv6 literal", (int)n, s);
        p++;
    } else {
        while (p < end && is_host_char((unsigned char)*p))
            p++;
        if (p == host)
            return http_setting_refused(error, size, "'%.*s': no host", (int)n, s);
    }
    if (p < end && *p == '/')
        return http_setting_refused(error, size, "'%.*s': an origin has no path, not even '/'",
                                    (int)n, s);
    if (p < end && *p == '@')
        return http_setting_refused(error, size, "'%.*s': an origin has no user info", (int)n, s);
    if (p < end && *p == ':') {
        const char *digits = ++p;
        unsigned long port = 0;
        while (p < end && isdigit((unsigned char)*p) && port <= 65535)
            port = port * 10 + (unsigned long)(*p++ - '0');
        if (p == digits || p != end || port == 0 || port > 65535 || *digits == '0')
            return http_setting_refused(error, size, "'%.*s': bad port", (int)n, s);
        if ((scheme_len == 4 && memcmp(out, "http", 4) == 0 && port == 80) ||
            (scheme_len == 5 && memcmp(out, "https", 5) == 0 && port == 443))
            return http_setting_refused(
                error, size,
                "'%.*s': a browser leaves the scheme's default port out of Origin: "
                "write the origin without it",
                (int)n, s);
    }
    if (p != end)
        return http_setting_refused(error, size, "'%.*s': unexpected '%c' after the host", (int)n,
                                    s, *p);
    return 0;
}

static int add_origin(cors_origin *o, const char *origin)
{
    size_t n = strlen(origin);
    o->origin = strdup(origin);
    o->lines_len = sizeof(ALLOW_ORIGIN) - 1 + n + sizeof(ACTUAL_TAIL) - 1;
    o->lines = malloc(o->lines_len + 1);
    if (!o->origin || !o->lines)
        return -ENOMEM;
    o->len = n;
    snprintf(o->lines, o->lines_len + 1, "%s%s%s", ALLOW_ORIGIN, origin, ACTUAL_TAIL);
    return 0;
}

int http_cors_create(const char *origins, http_cors **out, char *error, size_t error_size)
{
    *out = NULL;
    if (!origins)
        return http_setting_refused(error, error_size, "no origins");
    size_t count = 1;
    for (const char *p = origins; *p; p++)
        count += *p == ',';
    if (count > CORS_MAX_ORIGINS)
        return http_setting_refused(error, error_size, "more than %d origins", CORS_MAX_ORIGINS);
    http_cors *cors = calloc(1, sizeof(*cors) + count * sizeof(cors_origin));
    if (!cors)
        return -ENOMEM;

    int err = 0;
    const char *list = origins, *p;
    size_t n;
    while (http_list_next(&list, &p, &n)) {
        char origin[CORS_MAX_ORIGIN + 1] = "";
        if (n == 1 && *p == '*') {
            if (count != 1) {
                err = http_setting_refused(error, error_size,
                                           "'*' (any origin) must stand alone in the list");
                break;
            }
            cors->any = true;
            memcpy(origin, "*", 2);
        } else if ((err = parse_origin(p, n, origin, error, error_size)) < 0) {
            break;
        }
        bool twice = false;
        for (size_t i = 0; i < cors->count; i++)
            twice |= strcmp(cors->origins[i].origin, origin) == 0;
        if (!twice && (err = add_origin(&cors->origins[cors->count++], origin)) < 0)
            break;
    }
    if (err < 0) {
        http_cors_destroy(cors);
        return err;
    }
    *out = cors;
    return 0;
}

void http_cors_destroy(http_cors *cors)
{
    if (!cors)
        return;
    for (size_t i = 0; i < cors->count; i++) {
        free(cors->origins[i].origin);
        free(cors->origins[i].lines);
    }
    free(cors);
}

/* The configured origin @origin is, or NULL. */
static const cors_origin *find_origin(const http_cors *cors, http_str origin)
{
    if (cors->any)
        return &cors->origins[0];
    for (size_t i = 0; i < cors->count; i++)
        if (cors->origins[i].len == origin.len &&
            memcmp(cors->origins[i].origin, origin.ptr, origin.len) == 0)
            return &cors->origins[i];
    return NULL;
}

bool http_cors_origin_allowed(const http_cors *cors, http_str origin)
{
    return cors && find_origin(cors, origin) != NULL;
}

/* The method named exactly @s (methods are case-sensitive, RFC 9110
 * section 9.1: a page's fetch() upper-cases only DELETE, GET, HEAD,
 * OPTIONS, POST and PUT, so "patch" is not PATCH), or HTTP_METHOD_OTHER. */
static http_method method_named(http_str s)
{
    static const struct {
        const char *name;
        http_method method;
    } names[] = {
        {"GET", HTTP_GET},         {"HEAD", HTTP_HEAD},   {"POST", HTTP_POST},
        {"PUT", HTTP_PUT},         {"PATCH", HTTP_PATCH}, {"DELETE", HTTP_DELETE},
        {"OPTIONS", HTTP_OPTIONS}, {"TRACE", HTTP_TRACE},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strlen(names[i].name) == s.len && memcmp(names[i].name, s.ptr, s.len) == 0)
            return names[i].method;
    return HTTP_METHOD_OTHER;
}

/* Adds to @granted (a bit per allowed_headers entry) the headers of one
 * Access-Control-Request-Headers value @v, a comma-separated list of
 * field names (Fetch standard: lower-cased, sorted). Others are ignored. */
static unsigned grant_headers(http_str v, unsigned granted)
{
    const char *p = v.ptr, *end = v.ptr + v.len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *a = p;
        while (a < e && (*a == ' ' || *a == '\t'))
            a++;
        while (e > a && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        for (size_t i = 0; i < NUM_ALLOWED_HEADERS; i++)
            if (http_str_equal_ci((http_str){a, (size_t)(e - a)}, allowed_headers[i]))
                granted |= 1u << i;
        p = comma ? comma + 1 : end;
    }
    return granted;
}

/* Answers a preflight from @o's origin for @mask's path with 204 and the
 * grant; false when @method (Access-Control-Request-Method) is not one of
 * the path's: no grant then. */
static bool answer_preflight(http_ctx *ctx, const cors_origin *o, unsigned mask, http_str method)
{
    http_method m = method_named(method);
    if (m == HTTP_METHOD_OTHER || !(mask & HTTP_METHOD_BIT(m)))
        return false;
    unsigned granted = 0;
    const http_request *req = ctx->req;
    for (size_t i = 0; i < req->num_headers; i++)
        if (http_str_equal_ci(req->headers[i].name, "access-control-request-headers"))
            granted = grant_headers(req->headers[i].value, granted);

    char methods[96];
    http_router_format_allow(mask, methods, sizeof(methods));
    char headers[sizeof(HTTP_CORS_ALLOWED_HEADERS) + 2] = "";
    size_t hl = 0;
    for (size_t i = 0; i < NUM_ALLOWED_HEADERS; i++)
        if (granted & (1u << i))
            hl += (size_t)snprintf(headers + hl, sizeof(headers) - hl, "%s%s", hl ? ", " : "",
                                   allowed_headers[i]);

    size_t size = 512 + o->len;
    char *lines = cr_arena_alloc(ctx->arena, size);
    if (!lines) {
        http_respond_error(ctx, 500, "out of memory");
        return true;
    }
    int n = snprintf(lines, size,
                     ALLOW_ORIGIN "%s\r\nAccess-Control-Allow-Methods: %s%s%s"
                                  "\r\nAccess-Control-Max-Age: %d" PREFLIGHT_VARY,
                     o->origin, methods, hl ? "\r\nAccess-Control-Allow-Headers: " : "", headers,
                     HTTP_CORS_MAX_AGE_S);
    ctx->internal->cors_lines = lines;
    ctx->internal->cors_lines_len = n > 0 && (size_t)n < size ? (size_t)n : 0;
    http_respond(ctx, 204, NULL, NULL, 0);
    return true;
}

bool http_cors_handle(const http_cors *cors, const http_router *router, http_ctx *ctx)
{
    struct http_ctx_internal *in = ctx->internal;
    const http_request *req = ctx->req;
    in->cors_lines = VARY_ORIGIN;
    in->cors_lines_len = sizeof(VARY_ORIGIN) - 1;

    const http_str *origin = NULL;
    const http_str *method = NULL;
    for (size_t i = 0; i < req->num_headers; i++) {
        http_str name = req->headers[i].name;
        if (name.len == 6 && http_str_equal_ci(name, "origin")) {
            if (origin)
                return false; /* Origin twice: not from a browser; no grant */
            origin = &req->headers[i].value;
        } else if (name.len == 29 && http_str_equal_ci(name, "access-control-request-method")) {
            method = &req->headers[i].value;
        }
    }
    const cors_origin *o = origin ? find_origin(cors, *origin) : NULL;
    if (!o)
        return false;

    bool preflight =
        req->method == HTTP_OPTIONS && method && !(req->path.len == 1 && req->path.ptr[0] == '*');
    if (preflight) {
        unsigned mask = http_router_methods(router, req->path);
        if (mask == 0) {
            /* Unknown path: the 404 of any request, readable by the page. */
            in->cors_lines = o->lines;
            in->cors_lines_len = o->lines_len;
            return false;
        }
        return answer_preflight(ctx, o, mask, *method);
    }
    in->cors_lines = o->lines;
    in->cors_lines_len = o->lines_len;
    return false;
}
