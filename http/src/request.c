/*
 * One request's handling, once the connection has read it whole: its
 * request id and trace context, CORS, the rate limit, the server's own
 * answers (OPTIONS, 501), routing and the handler, 405 with Allow, then the
 * metrics and the access line.
 *
 * The HTTP/1.1 connection (connection.c: reads, framing, pipelining,
 * 100-continue, linger, flush) hands each complete request here through
 * http_request_handle() and knows nothing of routes or handlers; this file
 * knows nothing of sockets or framing. The split is h2o's: lib/http1.c
 * apart from lib/core/request.c.
 */
#include "internal.h"

#include "coring/core/clock.h"
#include "coring/core/coro.h"
#include "coring/core/log.h"
#include "coring/http/request_id.h"
#include "coring/http/trace.h"
#include "coring/net/io.h"

#include <string.h>

/* The access line (docs/logs.md): in text `METHOD TARGET STATUS D ms`
 * then client, client_port, protocol, bytes, user_agent, request_id (and
 * invalid_request_id when one was replaced); in JSON every one a field. */
static void log_access(const char *client, const http_peer *peer, const http_request *req,
                       int status, size_t bytes, uint64_t duration_ns, const char *request_id,
                       const http_str *bad_id)
{
    double ms = (double)duration_ns / 1e6;
    /* In the thread's memory, not on the connection's stack. */
    http_thread *t = http_tl;
    char *path = t->access_target, *method = t->access_method;
    cr_log_escape(path, sizeof(t->access_target), req->target.ptr, req->target.len);
    cr_log_escape(method, sizeof(t->access_method), req->method_str.ptr, req->method_str.len);
    const http_str *ua = http_request_header(req, "User-Agent");
    cr_log_field f[] = {
        {.key = "method", .type = CR_LOG_STR, .str = req->method_str.ptr,
         .len = req->method_str.len, .json_only = true},
        {.key = "target", .type = CR_LOG_STR, .str = req->target.ptr, .len = req->target.len,
         .json_only = true},
        {.key = "status", .type = CR_LOG_INT, .num = status, .json_only = true},
        {.key = "duration_ms", .type = CR_LOG_MS, .ms = ms, .json_only = true},
        CR_LOG_FIELD_STR("client", client, strlen(client)),
        CR_LOG_FIELD_INT("client_port", peer->port),
        CR_LOG_FIELD_STR("protocol", req->minor_version == 0 ? "HTTP/1.0" : "HTTP/1.1", 8),
        CR_LOG_FIELD_INT("bytes", (long long)bytes),
        CR_LOG_FIELD_STR("user_agent", ua ? ua->ptr : "", ua ? ua->len : 0),
        CR_LOG_FIELD_STR("request_id", request_id, strlen(request_id)),
        CR_LOG_FIELD_STR("invalid_request_id", bad_id ? bad_id->ptr : NULL,
                         bad_id ? bad_id->len : 0),
    };
    cr_log_kv(CR_LOG_INFO, f, cr_countof(f), "%s %s %d %.3f ms", method, path, status, ms);
}

/* Route @ctx's request and run its handler, or answer for the server: a
 * CORS preflight, 429 over the rate limit (at @start_ns), 501, OPTIONS, 404,
 * 405. @m: the match, which holds the path parameters @ctx points to while
 * the handler runs (the caller's, so that they outlive this call as @ctx
 * does). Returns the route index that
 * labels the request's metrics (http_metrics_unmatched() for none). */
static unsigned route(const http_server *srv, http_ctx *ctx, http_route_match *m, bool body_unread,
                      uint64_t start_ns, net_stop_cause *stop)
{
    const http_request *req = ctx->req;
    /* CORS off (the default): nothing but this test. */
    const struct http_cors *cors = srv->cfg.cors;
    if (cors && http_cors_handle(cors, srv->router, ctx)) {
        /* a CORS preflight, answered */
    } else if (srv->cfg.rate_limit && http_rate_limit_refuse(srv->cfg.rate_limit, ctx, start_ns)) {
        /* over its client's rate: 429 (rate_limit.c) */
    } else if (req->method == HTTP_CONNECT) {
        http_respond_error(ctx, 501, "CONNECT is not supported");
    } else if (req->method == HTTP_METHOD_OTHER) {
        /* RFC 9110 sections 9.1 and 15.6.2: 501 for a method the server does
         * not recognise (none of RFC 9110's, nor PATCH; the router takes no
         * other). The request was framed well: the connection stays open. */
        http_respond_error(ctx, 501, "method not implemented");
    } else if (req->method == HTTP_OPTIONS && req->path.len == 1 && req->path.ptr[0] == '*') {
        /* RFC 9110 section 9.3.7: the server as a whole; Allow says every
         * method some route has. */
        char allow[96];
        unsigned methods = http_router_methods(srv->router, req->path);
        http_router_format_allow(methods | HTTP_METHOD_BIT(HTTP_OPTIONS), allow, sizeof(allow));
        http_add_header(ctx, "Allow", allow);
        http_respond(ctx, 204, NULL, NULL, 0);
    } else {
        switch (http_router_match(srv->router, req->method, req->path, m)) {
        case HTTP_ROUTE_FOUND:
            if (body_unread) {
                /* http_request_refused_early said so: the one refusal of a
                 * route that does not need its body. */
                http_respond_error(ctx, 415, HTTP_NOT_JSON_MESSAGE);
                return m->route;
            }
            ctx->params = &m->params;
            /* The route's deadline (docs/deadlines.md): on the loop's tick,
             * no syscall; the drain's deadline ends the handler the same way. */
            if (m->deadline_ns)
                net_deadline_set(start_ns + m->deadline_ns);
            m->handler(ctx, m->user);
            *stop = m->deadline_ns ? net_deadline_clear() : net_stop_cause_get();
            http_response_drop_unfinished(ctx->internal);
            if (!ctx->internal->responded) {
                char path[80];
                cr_log_escape(path, sizeof(path), req->path.ptr, req->path.len);
                cr_log_error("handler for %s answered nothing: 500", path);
                http_respond_error(ctx, 500, "internal error");
            }
            return m->route;
        case HTTP_ROUTE_METHOD_NOT_ALLOWED:
            /* The server answers OPTIONS on every known path: Allow says so
             * (RFC 9110 sections 10.2.1 and 15.5.6). */
            http_router_format_allow(m->methods | HTTP_METHOD_BIT(HTTP_OPTIONS), m->allow,
                                     sizeof(m->allow));
            http_add_header(ctx, "Allow", m->allow);
            if (req->method == HTTP_OPTIONS) /* RFC 9110 section 9.3.7 */
                http_respond(ctx, 204, NULL, NULL, 0);
            else
                http_respond_error(ctx, 405, "method not allowed");
            break;
        case HTTP_ROUTE_NOT_FOUND:
        default:
            http_respond_error(ctx, 404, "not found");
            break;
        }
    }
    return http_metrics_unmatched();
}

/* Methods whose body a route reads: coring's routes take JSON bodies only
 * (docs/handlers.md), so such a body of another type is refused (415). */
static bool reads_body(http_method method)
{
    return method == HTTP_POST || method == HTTP_PUT || method == HTTP_PATCH;
}

bool http_request_refused_early(const http_server *srv, const http_request *req)
{
    if (req->method == HTTP_CONNECT || req->method == HTTP_METHOD_OTHER)
        return true; /* 501 */
    if (req->method == HTTP_OPTIONS)
        return false; /* CORS preflights and OPTIONS: answered as usual */
    http_route_match m;
    switch (http_router_match(srv->router, req->method, req->path, &m)) {
    case HTTP_ROUTE_FOUND:
        return reads_body(req->method) && !http_request_is_json(req); /* 415 */
    default:
        return true; /* 404, 405 */
    }
}

/*
 * A deadline (@stop says whose) cancelled the handler of @ctx (its waits
 * returned -ECANCELED) and it answered a failure that says nothing true (a
 * 503 "database unavailable" for a database that is up): the answer it
 * wrote into @out from @out_before on is replaced by the deadline's.
 * The route's own deadline: 504 "deadline exceeded" (RFC 9110 section
 * 15.6.5: what the server waited on did not answer in time; for a write,
 * as any 504, its outcome is unknown), the connection kept (the request
 * was read whole). The drain's deadline: 503 "shutting down" with
 * Connection: close, so that the client gets an answer rather than a
 * silent close (which a load balancer or client may take for a lost
 * request and send again: issue 40 item 7); there a 504 (the outcome of a
 * write is unknown) says more and stands. Any other answer stands (the
 * handler finished its work).
 */
static void answer_cut(http_ctx *ctx, cr_buf *out, size_t out_before, net_stop_cause stop)
{
    struct http_ctx_internal *in = ctx->internal;
    bool own = stop == NET_STOP_DEADLINE;
    if (stop == NET_STOP_NONE || in->status < 500 || (in->status == 504 && !own))
        return;
    /* The handler's response is dropped, not what the request set before
     * it (the access line reads the peer). */
    out->len = out_before;
    http_ctx_internal_restart(in);
    in->close = own ? in->close : true;
    in->keep_alive_10 = own && in->keep_alive_10;
    if (own)
        http_respond_error(ctx, 504, "deadline exceeded");
    else
        http_respond_error(ctx, 503, "shutting down");
}

uint64_t http_request_handle(const http_server *srv, http_exchange *x)
{
    const http_request *req = x->req;
    cr_buf *out = x->out;
    size_t out_before = out->len;
    /* The request id (coring/http/request_id.h): the client's when valid,
     * else a new one; an invalid one is replaced, not refused. */
    char request_id[HTTP_REQUEST_ID_SIZE];
    size_t request_id_len;
    const http_str *given = req->request_id;
    const http_str *bad_id = NULL;
    if (given && http_request_id_valid(given->ptr, given->len)) {
        memcpy(request_id, given->ptr, given->len);
        request_id[given->len] = '\0';
        request_id_len = given->len;
    } else {
        bad_id = given;
        request_id_len = http_request_id_make(request_id);
    }
    cr_log_set_request_id(request_id);
    struct http_ctx_internal in;
    http_ctx_internal_start(&in, out);
    in.head = req->method == HTTP_HEAD;
    in.close = x->close;
    in.keep_alive_10 = !x->close && req->minor_version == 0;
    in.request_id = request_id;
    in.request_id_len = request_id_len;
    in.peer = x->peer;
    in.proxies = srv->cfg.trusted_proxies;
    in.compression = srv->cfg.compression_codings ? &srv->cfg : NULL;
    in.req = req;
    static const http_route_params no_params;
    http_ctx ctx = {
        .req = req,
        .params = &no_params,
        .body = x->body,
        .body_len = x->body_len,
        .arena = cr_coro_arena(cr_coro_current()),
        .internal = &in,
    };
    http_trace trace; /* coring/http/trace.h; off: this branch only */
    if (!srv->cfg.trace_context_off)
        http_trace_request(&ctx, &trace);
    http_route_match match;
    net_stop_cause stop = NET_STOP_NONE;
    unsigned route_index = route(srv, &ctx, &match, x->body_unread, x->start_ns, &stop);
    if (stop != NET_STOP_NONE) {
        answer_cut(&ctx, out, out_before, stop);
        http_metrics_deadline(route_index, req->method);
    }
    x->closed = in.close;

    /* Once, for the metrics and the access line alike. */
    uint64_t end_ns = cr_clock_now_ns();
    uint64_t duration_ns = end_ns - x->start_ns;
    size_t response_bytes = out->len >= out_before ? out->len - out_before : out->len;
    http_metrics_request(route_index, req->method, in.status, duration_ns, x->wire_bytes,
                         response_bytes);
    if (srv->cfg.access_log)
        log_access(http_request_client(&ctx), http_peer_get(x->peer), req, in.status,
                   response_bytes, duration_ns, request_id, bad_id);
    cr_log_set_request_id(NULL);
    return end_ns;
}
