/*
 * Response serialisation: status line, the headers every response carries
 * (Server, Date, Content-Type, Content-Length, Connection), handler headers,
 * body. Written straight into the connection's output buffer so that the
 * responses of a pipelined batch leave in one send.
 */
#include "internal.h"

#include "coring/core/clock.h"
#include "coring/core/json_writer.h"

#include <errno.h>
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

static void append_status_line(cr_buf *out, int status)
{
    if (status == 200) {
        cr_buf_append(out, "HTTP/1.1 200 OK\r\n", 17);
        return;
    }
    char line[64];
    const char *reason = http_status_reason(status);
    size_t n = 0;
    memcpy(line, "HTTP/1.1 ", 9);
    n = 9;
    line[n++] = (char)('0' + status / 100 % 10);
    line[n++] = (char)('0' + status / 10 % 10);
    line[n++] = (char)('0' + status % 10);
    line[n++] = ' ';
    size_t rl = strlen(reason);
    memcpy(line + n, reason, rl);
    n += rl;
    line[n++] = '\r';
    line[n++] = '\n';
    cr_buf_append(out, line, n);
}

void http_write_response(struct http_ctx_internal *in, int status, const char *content_type,
                         const void *body, size_t len)
{
    cr_buf *out = in->out;
    bool no_content = status == 204 || status == 304 || status < 200;
    append_status_line(out, status);
    cr_buf_append(out, "Server: coring\r\nDate: ", 22);
    cr_buf_append(out, http_date_now(), 29);
    if (!no_content) {
        if (content_type) {
            cr_buf_append(out, "\r\nContent-Type: ", 16);
            cr_buf_append_str(out, content_type);
        }
        cr_buf_append(out, "\r\nContent-Length: ", 18);
        cr_buf_append_u64(out, len);
    }
    if (in->request_id) {
        cr_buf_append(out, "\r\nX-Request-Id: ", 16);
        cr_buf_append_str(out, in->request_id);
    }
    for (size_t i = 0; i < in->num_extra; i++) {
        cr_buf_append(out, "\r\n", 2);
        cr_buf_append_str(out, in->extra_name[i]);
        cr_buf_append(out, ": ", 2);
        cr_buf_append_str(out, in->extra_value[i]);
    }
    if (in->cors_lines_len)
        cr_buf_append(out, in->cors_lines, in->cors_lines_len);
    if (in->close)
        cr_buf_append(out, "\r\nConnection: close", 19);
    else if (in->keep_alive_10)
        cr_buf_append(out, "\r\nConnection: keep-alive", 24);
    cr_buf_append(out, "\r\n\r\n", 4);
    if (!no_content && !in->head)
        cr_buf_append(out, body, len);
    in->responded = true;
    in->status = status;
}

void http_respond(http_ctx *ctx, int status, const char *content_type, const void *body, size_t len)
{
    if (ctx->internal->responded)
        return;
    http_write_response(ctx->internal, status, content_type, body, len);
}

void http_respond_json(http_ctx *ctx, int status, const cr_buf *json)
{
    http_respond(ctx, status, "application/json", json->data, json->len);
}

void http_error_body(cr_buf *out, const char *message, size_t len)
{
    cr_buf_append(out, "{\"error\":", 9);
    cr_json_escape_string(out, message, len);
    cr_buf_append(out, "}", 1);
}

void http_respond_error(http_ctx *ctx, int status, const char *message)
{
    cr_buf *b = http_scratch();
    http_error_body(b, message, strlen(message));
    http_respond_json(ctx, status, b);
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
