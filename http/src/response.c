/*
 * Response serialisation: status line, the headers every response carries
 * (Server, Date, Content-Type, Content-Length, Connection), handler headers,
 * body. Written straight into the connection's output buffer so that the
 * responses of a pipelined batch leave in one send. A compressible body is
 * compressed where it is final (compress.c decides).
 */
#include "internal.h"

#include "coring/http/compress.h"
#include "coring/http/trace.h"

#include "coring/core/clock.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

_Thread_local http_thread *http_tl;

const char *http_status_reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage";
    default:
        return "Unknown";
    }
}

const char *http_date_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    http_thread *t = http_tl;
    if (ts.tv_sec != t->date_second) {
        cr_clock_http_date(t->date);
        t->date_second = ts.tv_sec;
    }
    return t->date;
}

/* Digits of Content-Length reserved by http_response_begin: bodies of
 * 100..999 bytes are patched in place; another width moves the body by the
 * difference (one memmove, what a body built elsewhere paid always). */
#define RESERVED_LENGTH_DIGITS 3

/* @v in decimal into the end of @tmp (20 bytes); returns where it starts. */
static char *format_decimal(char tmp[20], size_t v)
{
    char *p = tmp + 20;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

static char *put(char *p, const void *src, size_t n)
{
    memcpy(p, src, n);
    return p + n;
}

/* put() for a length known only at run time and usually short (a content
 * type, a request id, a small body): 8 to 32 bytes as two overlapping
 * copies of a fixed size, inline, rather than a call to memcpy. */
static inline char *put_short(char *p, const void *src, size_t n)
{
    const char *s = src;
    if (n >= 16 && n <= 32) {
        memcpy(p, s, 16);
        memcpy(p + n - 16, s + n - 16, 16);
        return p + n;
    }
    if (n >= 8 && n < 16) {
        memcpy(p, s, 8);
        memcpy(p + n - 8, s + n - 8, 8);
        return p + n;
    }
    return put(p, s, n);
}

/* RFC 9110 sections 6.4.1 and 8.6: 1xx, 204 and 304 carry no content. */
static bool has_no_content(int status)
{
    return status == 204 || status == 304 || status < 200;
}

/*
 * The status line and header section of a response, up to and including
 * "Content-Length: " (left out for a status without content), written into
 * @in->out with one capacity check. Content-Length comes last so that the
 * digits, known or patched later, sit just before the body. Returns a
 * pointer just past what was written (out->len is moved there), or NULL
 * when the buffer could not grow (out->failed set).
 */
static inline __attribute__((always_inline)) char *
write_head(struct http_ctx_internal *in, int status, const char *content_type, size_t room_after)
{
    cr_buf *out = in->out;
    const char *reason = status == 200 ? "OK" : http_status_reason(status);
    size_t reason_len = status == 200 ? 2 : strlen(reason);
    size_t type_len = content_type ? strlen(content_type) : 0;
    size_t id_len = in->request_id ? in->request_id_len : 0;
    size_t extra_len = 0;
    for (size_t i = 0; i < in->num_extra; i++)
        extra_len += 4 + strlen(in->extra_name[i]) + strlen(in->extra_value[i]);
    size_t trace_len = in->traceresponse ? 17 + HTTP_TRACEPARENT_LEN : 0;
    size_t need = 15 + reason_len + 22 + 29 + 16 + type_len + 16 + id_len + trace_len + extra_len +
                  in->cors_lines_len + in->coding_lines_len + 24 + 18 + room_after + 4;
    if (out->cap - out->len < need && cr_buf_reserve(out, need) < 0)
        return NULL;
    char *p = out->data + out->len;
    if (status == 200) {
        p = put(p, "HTTP/1.1 200 OK\r\nServer: coring\r\nDate: ", 39);
    } else {
        p = put(p, "HTTP/1.1 ", 9);
        *p++ = (char)('0' + status / 100 % 10);
        *p++ = (char)('0' + status / 10 % 10);
        *p++ = (char)('0' + status % 10);
        *p++ = ' ';
        p = put(p, reason, reason_len);
        p = put(p, "\r\nServer: coring\r\nDate: ", 24);
    }
    p = put(p, http_date_now(), 29);
    if (content_type && !has_no_content(status)) {
        p = put(p, "\r\nContent-Type: ", 16);
        p = put_short(p, content_type, type_len);
    }
    if (in->request_id) {
        p = put(p, "\r\nX-Request-Id: ", 16);
        p = put_short(p, in->request_id, id_len);
    }
    if (in->traceresponse) {
        p = put(p, "\r\ntraceresponse: ", 17);
        p = put(p, in->traceresponse, HTTP_TRACEPARENT_LEN);
    }
    for (size_t i = 0; i < in->num_extra; i++) {
        p = put(p, "\r\n", 2);
        p = put(p, in->extra_name[i], strlen(in->extra_name[i]));
        p = put(p, ": ", 2);
        p = put(p, in->extra_value[i], strlen(in->extra_value[i]));
    }
    if (in->cors_lines_len)
        p = put(p, in->cors_lines, in->cors_lines_len);
    if (in->coding_lines_len)
        p = put(p, in->coding_lines, in->coding_lines_len);
    /* The drain began while the handler ran: this answer is the
     * connection's last (connection.c reads in->close back). */
    if (!in->close && net_draining())
        in->close = true;
    if (in->close)
        p = put(p, "\r\nConnection: close", 19);
    else if (in->keep_alive_10)
        p = put(p, "\r\nConnection: keep-alive", 24);
    if (!has_no_content(status))
        p = put(p, "\r\nContent-Length: ", 18);
    out->len = (size_t)(p - out->data);
    return p;
}

/* A compressed body stays in the thread's buffer between responses; past
 * this size (bytes) its memory is given back after each. */
#define COMPRESSED_KEEP_BYTES (64 * 1024)

/* The thread's buffer holding @len bytes at @body compressed in @coding;
 * NULL when that failed (the response then goes out in identity). */
static cr_buf *compress_body(struct http_ctx_internal *in, http_coding coding, const void *body,
                             size_t len)
{
    cr_buf *z = &http_tl->compressed;
    cr_buf_reset(z);
    if (http_compress(coding, body, len, z) == 0)
        return z;
    http_compress_fall_back(in);
    return NULL;
}

/* The whole response, its body @len bytes at @body as they are, in one
 * function with its head (http_write_response's every call below the
 * compression minimum, and http_write_encoded's). */
static inline __attribute__((always_inline)) void write_whole(struct http_ctx_internal *in,
                                                              int status, const char *content_type,
                                                              const void *body, size_t len)
{
    bool no_content = has_no_content(status);
    bool send_body = !no_content && !in->head;
    char tmp[20];
    char *digits = format_decimal(tmp, len);
    size_t n = (size_t)(tmp + sizeof(tmp) - digits);
    char *p = write_head(in, status, content_type, n + (send_body ? len : 0));
    if (p) {
        if (!no_content)
            p = put(p, digits, n);
        p = put(p, "\r\n\r\n", 4);
        if (send_body)
            p = put_short(p, body, len);
        in->out->len = (size_t)(p - in->out->data);
    }
    in->responded = true;
    in->status = status;
}

/* A body at or over the compression minimum: compressed and written when
 * compress.c chooses a coding and it succeeds (returns true); otherwise
 * nothing is written (false) and the caller writes it as it is. */
static __attribute__((noinline)) bool write_compressed(struct http_ctx_internal *in, int status,
                                                       const char *content_type, const void *body,
                                                       size_t len)
{
    http_coding coding = http_compress_choose(in, status, content_type, len);
    cr_buf *z = coding != HTTP_CODING_IDENTITY ? compress_body(in, coding, body, len) : NULL;
    if (!z)
        return false;
    write_whole(in, status, content_type, z->data, z->len);
    cr_buf_shrink(z, COMPRESSED_KEEP_BYTES);
    return true;
}

/* http_write_response, inlined where a handler's answer comes in
 * (http_respond): below the compression minimum, one test and write_whole. */
static inline __attribute__((always_inline)) void write_response(struct http_ctx_internal *in,
                                                                 int status,
                                                                 const char *content_type,
                                                                 const void *body, size_t len)
{
    if (in->compression && len >= in->compression->compression_min_bytes &&
        write_compressed(in, status, content_type, body, len))
        return;
    write_whole(in, status, content_type, body, len);
}

void http_write_response(struct http_ctx_internal *in, int status, const char *content_type,
                         const void *body, size_t len)
{
    write_response(in, status, content_type, body, len);
}

void http_write_encoded(struct http_ctx_internal *in, int status, const char *content_type,
                        const void *body, size_t len)
{
    write_whole(in, status, content_type, body, len);
}

/*
 * A second answer to a request that has one: the handler's bug. A debug
 * build says so and aborts, at the place (a core dump or a debugger shows
 * the handler); a release build logs it once per process and drops the
 * second answer, so that the client gets the first.
 */
static void second_answer(struct http_ctx_internal *in, const char *call, int status)
{
#ifndef NDEBUG
    cr_log_error("%s(%d): the request was already answered (%d%s): one answer per request; "
                 "aborting (debug build)",
                 call, status, in->status, in->building ? ", response being built" : "");
    abort();
#else
    static atomic_bool logged;
    if (!atomic_exchange_explicit(&logged, true, memory_order_relaxed))
        cr_log_error("%s(%d): the request was already answered (%d%s): one answer per "
                     "request; dropped (logged once)",
                     call, status, in->status, in->building ? ", response being built" : "");
#endif
}

void http_respond(http_ctx *ctx, int status, const char *content_type, const void *body, size_t len)
{
    struct http_ctx_internal *in = ctx->internal;
    if (in->responded) {
        second_answer(in, "http_respond", status);
        return;
    }
    write_response(in, status, content_type, body, len);
}

void http_respond_json(http_ctx *ctx, int status, const cr_buf *json)
{
    http_respond(ctx, status, "application/json", json->data, json->len);
}

cr_buf *http_response_begin(http_ctx *ctx, int status, const char *content_type)
{
    struct http_ctx_internal *in = ctx->internal;
    if (in->responded) {
        second_answer(in, "http_response_begin", status);
        /* Release build: the handler writes on into a thread's discard
         * buffer, emptied here, so no caller needs a NULL check. */
        cr_buf_reset(&http_tl->discard);
        return &http_tl->discard;
    }
    cr_buf *out = in->out;
    in->responded = true;
    in->building = true;
    in->status = status;
    in->content_type = content_type;
    in->response_start = out->len;
    char *p = write_head(in, status, content_type, RESERVED_LENGTH_DIGITS);
    if (!p) {
        /* out->failed: the connection closes after the handler; the
         * handler's appends to a failed buffer are dropped. */
        in->length_at = in->body_start = out->len;
        return out;
    }
    in->length_at = out->len;
    if (!has_no_content(status))
        p += RESERVED_LENGTH_DIGITS;
    p = put(p, "\r\n\r\n", 4);
    out->len = in->body_start = (size_t)(p - out->data);
    return out;
}

/*
 * End a response built in place whose body (@len bytes at body_start) is
 * compressible: rewrite it from its "\r\nContent-Length: " on, with the
 * coding lines chosen before it, and the body compressed in @coding (or
 * moved along, identity; dropped for HEAD).
 */
static void end_with_coding(struct http_ctx_internal *in, http_coding coding, size_t len)
{
    cr_buf *out = in->out;
    cr_buf *z = coding != HTTP_CODING_IDENTITY
                    ? compress_body(in, coding, out->data + in->body_start, len)
                    : NULL;
    size_t body_len = z ? z->len : len;
    char tmp[20];
    char *digits = format_decimal(tmp, body_len);
    size_t num_digits = (size_t)(tmp + sizeof(tmp) - digits);
    size_t head_at = in->length_at - 18; /* "\r\nContent-Length: " */
    size_t body_at = head_at + in->coding_lines_len + 18 + num_digits + 4;
    size_t send = in->head ? 0 : body_len;
    if (body_at + send > out->len && cr_buf_reserve(out, body_at + send - out->len) < 0)
        return; /* out->failed: the connection closes */
    if (z)
        memcpy(out->data + body_at, z->data, send);
    else
        memmove(out->data + body_at, out->data + in->body_start, send);
    char *p = out->data + head_at;
    p = put(p, in->coding_lines, in->coding_lines_len);
    p = put(p, "\r\nContent-Length: ", 18);
    p = put(p, digits, num_digits);
    put(p, "\r\n\r\n", 4);
    out->len = body_at + send;
    if (z)
        cr_buf_shrink(z, COMPRESSED_KEEP_BYTES);
}

void http_response_end(http_ctx *ctx)
{
    struct http_ctx_internal *in = ctx->internal;
    cr_buf *out = in->out;
    if (!in->building) {
        second_answer(in, "http_response_end", in->status);
        return;
    }
    in->building = false;
    if (out->failed || out->len < in->body_start)
        return;
    size_t len = out->len - in->body_start;
    if (has_no_content(in->status)) {
        out->len = in->body_start; /* no body, and no Content-Length to patch */
        return;
    }
    if (in->compression && len >= in->compression->compression_min_bytes) {
        http_coding coding = http_compress_choose(in, in->status, in->content_type, len);
        if (in->coding_lines_len) {
            end_with_coding(in, coding, len);
            return;
        }
    }
    if (in->head)
        out->len = in->body_start; /* the length of the body a GET would get */
    char tmp[20];
    char *text = format_decimal(tmp, len);
    size_t digits = (size_t)(tmp + sizeof(tmp) - text);
    size_t tail = in->length_at + RESERVED_LENGTH_DIGITS; /* "\r\n\r\n" then the body */
    if (digits > RESERVED_LENGTH_DIGITS && cr_buf_reserve(out, digits - RESERVED_LENGTH_DIGITS) < 0)
        return;
    if (digits != RESERVED_LENGTH_DIGITS) {
        memmove(out->data + in->length_at + digits, out->data + tail, out->len - tail);
        out->len = out->len + digits - RESERVED_LENGTH_DIGITS;
    }
    memcpy(out->data + in->length_at, text, digits);
}

/* Take the response being built back out of the output buffer. */
static void take_back(struct http_ctx_internal *in)
{
    in->out->len = in->response_start;
    in->building = false;
    in->responded = false;
    in->status = 0;
}

void http_response_cancel(http_ctx *ctx)
{
    struct http_ctx_internal *in = ctx->internal;
    if (!in->building) {
        second_answer(in, "http_response_cancel", in->status);
        return;
    }
    take_back(in);
}

void http_response_drop_unfinished(struct http_ctx_internal *in)
{
    if (!in->building)
        return;
    cr_log_error("the handler began a response (%d) and did not end it (http_response_end): "
                 "dropped",
                 in->status);
    take_back(in);
}

void http_error_body(cr_buf *out, const char *message, size_t len)
{
    cr_buf_append(out, "{\"error\":", 9);
    cr_json_escape_string(out, message, len);
    cr_buf_append(out, "}", 1);
}

void http_respond_error(http_ctx *ctx, int status, const char *message)
{
    cr_buf *out = http_response_begin(ctx, status, "application/json");
    if (!out)
        return; /* a second answer, reported */
    http_error_body(out, message, strlen(message));
    http_response_end(ctx);
}

void http_respond_errorf(http_ctx *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *message = n < 0 ? NULL : cr_arena_alloc(ctx->arena, (size_t)n + 1);
    if (!message) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    va_start(ap, fmt);
    vsnprintf(message, (size_t)n + 1, fmt, ap);
    va_end(ap);
    http_respond_error(ctx, status, message);
}

int http_add_header(http_ctx *ctx, const char *name, const char *value)
{
    struct http_ctx_internal *in = ctx->internal;
    if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n") || !*name)
        return -EINVAL;
    if (in->num_extra >= HTTP_MAX_EXTRA_HEADERS)
        return -ENOSPC;
    char *n = cr_arena_strndup(ctx->arena, name, strlen(name));
    char *v = cr_arena_strndup(ctx->arena, value, strlen(value));
    if (!n || !v)
        return -ENOMEM;
    in->extra_name[in->num_extra] = n;
    in->extra_value[in->num_extra] = v;
    in->num_extra++;
    return 0;
}

cr_buf *http_scratch(void)
{
    cr_buf *b = &http_tl->scratch;
    cr_buf_reset(b);
    return b;
}

cr_json_parser *http_json_parser(void)
{
    return http_tl->json;
}

bool http_request_is_json(const http_request *req)
{
    static const char json[] = "application/json";
    const http_str *type = NULL;
    for (size_t i = 0; i < req->num_headers; i++)
        if (http_str_equal_ci(req->headers[i].name, "content-type")) {
            if (type)
                return false; /* a singleton field sent twice */
            type = &req->headers[i].value;
        }
    size_t n = sizeof(json) - 1;
    if (!type || type->len < n || strncasecmp(type->ptr, json, n) != 0)
        return false;
    while (n < type->len && (type->ptr[n] == ' ' || type->ptr[n] == '\t'))
        n++;
    return n == type->len || type->ptr[n] == ';';
}

/* A body answered many times, each coding compressed once
 * (coring/http/compress.h). */
void http_respond_cached(http_ctx *ctx, int status, const char *content_type, const cr_buf *body,
                         http_encoded_cache *cache)
{
    struct http_ctx_internal *in = ctx->internal;
    if (in->responded) {
        http_respond(ctx, status, content_type, body->data, body->len); /* reports it */
        return;
    }
    http_coding coding = http_compress_choose(in, status, content_type, body->len);
    if (coding != HTTP_CODING_IDENTITY && !cache->valid[coding]) {
        cr_buf *e = &cache->encoded[coding];
        cr_buf_reset(e);
        e->failed = false;
        cache->valid[coding] = http_compress(coding, body->data, body->len, e) == 0;
    }
    if (coding != HTTP_CODING_IDENTITY && cache->valid[coding]) {
        http_write_encoded(in, status, content_type, cache->encoded[coding].data,
                           cache->encoded[coding].len);
        return;
    }
    if (coding != HTTP_CODING_IDENTITY)
        http_compress_fall_back(in); /* could not compress: identity, with Vary */
    http_write_encoded(in, status, content_type, body->data, body->len);
}
