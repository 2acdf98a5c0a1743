/*
 * The HTTP/1.1 server: one coroutine per connection reads requests into
 * provided buffers, parses them in place, routes them, runs the handler and
 * appends the response to the connection's output buffer; the responses of
 * a pipelined batch leave in one send. Keep-alive per RFC 9112 section 9.
 *
 * Handlers run in the connection's coroutine and may block on coroutine
 * I/O (net_call, net_poll, the database...). A handler must answer exactly
 * once: with one of the http_respond* functions, or with a response built
 * in place (http_response_begin ... http_response_end). A handler that
 * returns without answering gets a 500. A second answer is the handler's
 * bug: a debug build (NDEBUG not defined) logs it and aborts; a release
 * build logs the first one of the process and drops it (docs/handlers.md).
 */
#ifndef CORING_HTTP_SERVER_H
#define CORING_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coring/core/arena.h"
#include "coring/core/buffer.h"
#include "coring/core/json.h"
#include "coring/http/parser.h"
#include "coring/http/router.h"
#include "coring/net/runtime.h"

typedef struct http_server_config {
    http_limits limits;
    uint64_t keepalive_timeout_ns; /* idle time allowed between requests (60 s) */
    uint64_t header_timeout_ns;    /* time to receive a whole header section (10 s) */
    uint64_t body_timeout_ns;      /* time to receive a whole body, from its headers (10 s) */
    uint64_t send_timeout_ns;      /* time allowed for one send to progress (30 s) */
    size_t output_flush_bytes;     /* send mid-batch once this much output is queued (64 KiB) */
    bool access_log;               /* one log line per request */
    const struct http_cors *cors;  /* CORS policy (coring/http/cors.h); NULL: none (default) */
    /* Peers whose X-Forwarded-For names the client (coring/http/proxy.h);
     * NULL: none, the peer is the client (default). */
    const struct http_trusted_proxies *trusted_proxies;
    unsigned compression_codings;  /* codings offered, HTTP_CODING_BIT set (coring/http/
                                      compress.h); 0: compression off (default: all) */
    size_t compression_min_bytes;  /* bodies this size and over are compressed (1024) */
    /* Requests a second per client (coring/http/rate_limit.h), shared by
     * every worker thread; NULL: no limit (default). */
    struct http_rate_limit *rate_limit;
    bool trace_context_off;        /* no W3C trace context (coring/http/trace.h); default
                                      false: traceparent taken or started, traceresponse */
} http_server_config;

typedef struct http_server {
    http_server_config cfg;
    const http_router *router;
    /* Per worker thread, after the HTTP layer's own set-up; 0 or -errno. */
    int (*thread_init)(void *user);
    void (*thread_fini)(void *user);
    /* Once listening (main thread): the place for the start-up log line. */
    void (*on_listening)(const char *host, uint16_t port, unsigned threads, void *user);
    /* After the listeners are bound, before the workers start (main thread):
     * drop privileges here. 0 or -errno (aborts start-up). May be NULL. */
    int (*after_bind)(void *user);
    void *user;
} http_server;

/* The request as a handler sees it. Fields above `internal` are public. */
struct http_ctx {
    const http_request *req;
    const http_route_params *params; /* the route's path parameters; never NULL (none
                                        for a request no route took) */
    const char *body;        /* decoded body (Content-Length or chunked); NULL if none */
    size_t body_len;
    cr_arena *arena;         /* freed after the response is sent */
    struct http_ctx_internal *internal;
};

/* http_server_config_default - the defaults listed in the struct. */
http_server_config http_server_config_default(void);

/*
 * http_serve - run @srv on the runtime configured by @net until SIGINT or
 * SIGTERM (see net_run). Returns 0 after a clean shutdown or a negative
 * errno when start-up failed. Main thread only; @srv must outlive the call.
 */
int http_serve(http_server *srv, const net_config *net);

/*
 * http_respond - answer with @status, a @content_type (NULL for none) and a
 * body of @len bytes at @body (copied). Content-Length, Date, Server and
 * Connection are added; for HEAD the body is left out, for 204 and 304
 * neither body nor Content-Type/Content-Length are sent.
 */
void http_respond(http_ctx *ctx, int status, const char *content_type, const void *body,
                  size_t len);

/* http_respond_json - http_respond with application/json and @json's bytes. */
void http_respond_json(http_ctx *ctx, int status, const cr_buf *json);

/*
 * http_response_begin - start the answer to @ctx's request in place: the
 * status line and headers (@status; @content_type, NUL-terminated, NULL
 * for none; the headers added so far with http_add_header) are written
 * into the connection's output buffer, with the digits of Content-Length
 * reserved, and that buffer is returned for the body to be appended to it
 * (cr_buf_append*, or a cr_json_writer over it), with no copy. The body
 * ends with http_response_end, which patches Content-Length. In between:
 * no yield that lets another request of the connection run is possible
 * (one request at a time per connection), so the handler may block on
 * coroutine I/O; but nothing else may answer (a second answer), headers
 * added after begin are not sent, and the buffer's data pointer may move
 * as it grows (keep offsets, not pointers). For HEAD the body is measured
 * and dropped; for 1xx, 204 and 304 it is dropped with no Content-Type or
 * Content-Length. An allocation failure marks the buffer failed and the
 * connection closes after the handler, as for http_respond.
 * Returns the buffer (not owned: valid until http_response_end). When the
 * request already has an answer (see the top of this file), a release
 * build returns a per-thread buffer whose bytes are discarded, never NULL.
 * Handler context. RFC 9112 section 6.3, RFC 9110 section 8.6.
 */
cr_buf *http_response_begin(http_ctx *ctx, int status, const char *content_type);

/*
 * http_response_end - end the response begun by http_response_begin: its
 * Content-Length is the bytes appended since. Without a begin, it is a
 * misuse reported like a second answer. Handler context.
 */
void http_response_end(http_ctx *ctx);

/*
 * http_response_cancel - take back the response begun by
 * http_response_begin (headers and the body so far leave the output
 * buffer), so that the handler may answer otherwise: an error found
 * halfway through the body. Without a begin, a misuse reported like a
 * second answer. Handler context.
 */
void http_response_cancel(http_ctx *ctx);

/*
 * http_respond_error - answer @status with application/json and the body
 * every error of coring carries, {"error":"<message>"} (built by
 * http_error_body). @message: NUL-terminated UTF-8, copied. Handler
 * context; a second answer is ignored, like every http_respond*.
 */
void http_respond_error(http_ctx *ctx, int status, const char *message);

/*
 * http_respond_errorf - http_respond_error with the message formatted by
 * printf(3) from @fmt (in the request arena: no length limit). Out of
 * memory for the message answers 500 "out of memory". Handler context.
 */
void http_respond_errorf(http_ctx *ctx, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * http_error_body - append {"error":"<message>"} to @out: @len bytes at
 * @message as one JSON string, escaped per RFC 8259 section 7 (quote,
 * backslash and control characters; other bytes as they are, so @message
 * should be UTF-8). The one place the error body is spelled: the
 * http_respond_error* functions, the connection's own 4xx answers and
 * bodies built ahead of a response (the cep app's shared upstream
 * outcome) all use it. An allocation failure marks @out failed (see
 * cr_buf). Any thread.
 */
void http_error_body(cr_buf *out, const char *message, size_t len);

/*
 * http_add_header - add a response header before responding. @name and
 * @value are copied into the request arena; they must not contain CR or LF
 * (-EINVAL). Returns 0, -EINVAL, -ENOSPC (more than 8 headers) or -ENOMEM.
 */
int http_add_header(http_ctx *ctx, const char *name, const char *value);

/*
 * http_scratch - a per-thread buffer, emptied at each call, for building a
 * response body. Valid until the next call on this thread (do not hold it
 * across a yield that lets another request run).
 */
cr_buf *http_scratch(void);

/* http_json_parser - this worker thread's JSON parser (max 1 MiB, depth 64). */
cr_json_parser *http_json_parser(void);

/*
 * http_request_is_json - whether @req declares a JSON body: exactly one
 * Content-Type field whose media type is application/json, type and
 * subtype compared case-insensitively, parameters (charset=utf-8, ...)
 * allowed and not checked (RFC 9110 section 8.3.1; RFC 8259 section 11).
 * A JSON route checks it before reading a body, and answers 415 with
 * HTTP_NOT_JSON_MESSAGE when false: a page on another site can make a
 * browser POST text/plain or a form without a CORS preflight, but not
 * application/json (Fetch standard, CORS-safelisted request-header; the
 * hole FastAPI closed for CVE-2021-32677). Any thread.
 */
bool http_request_is_json(const http_request *req);

/* The 415 message for a body that http_request_is_json refuses. */
#define HTTP_NOT_JSON_MESSAGE "the body must be JSON: send Content-Type: application/json"

/*
 * http_json_object_body - the preamble of a route that takes a JSON
 * object: check the request's Content-Type, parse its body with this
 * thread's parser (http_json_parser) and check that the root is an object.
 * Returns true with *@obj the root object (valid until the next parse on
 * this thread: copy what must outlive a yield that lets another request
 * run). Returns false after answering the error itself, with
 * http_respond_error:
 *   415 HTTP_NOT_JSON_MESSAGE  a body whose Content-Type is not JSON
 *                              (http_request_is_json);
 *   400 "request body must be a JSON object"  no body or an empty one;
 *   400 "invalid JSON: <simdjson's reason>"   a syntax error, with the
 *                              reason from cr_json_parser_detail ("invalid
 *                              JSON: the JSON document has an improper
 *                              structure: ..."); other parse errors with
 *                              cr_json_error_message: "invalid UTF-8 in
 *                              JSON", "JSON nested too deep" (over 64
 *                              levels), "JSON document too large";
 *   500 "out of memory parsing JSON";
 *   422 "body must be a JSON object"  valid JSON of another type.
 * Handler context (the connection's coroutine).
 */
bool http_json_object_body(http_ctx *ctx, cr_json_value *obj);

/*
 * http_json_object_parse - the checks of http_json_object_body without the
 * answer, for a route that answers errors in a shape of its own (the embed
 * app's OpenAI error objects). Returns 0 with *@obj the root object, or
 * the status above (415, 400, 500 or 422) with *@message the message above
 * (static, or in the request arena). Handler context.
 */
int http_json_object_parse(http_ctx *ctx, cr_json_value *obj, const char **message);

/* http_status_reason - "OK", "Not Found", ... for @status; "Unknown" otherwise. */
const char *http_status_reason(int status);

#endif
