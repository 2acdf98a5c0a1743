/*
 * Internal to http/: per-request state behind http_ctx, and the per-thread
 * state of the HTTP layer. Not a public header.
 */
#ifndef CORING_HTTP_INTERNAL_H
#define CORING_HTTP_INTERNAL_H

#include "coring/http/proxy.h"
#include "coring/http/accept_encoding.h"
#include "coring/http/server.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define HTTP_MAX_EXTRA_HEADERS 8

/* The answer of a *_create that refuses a setting it reads at start-up
 * (cors.c, proxy.c, rate_limit.c): the reason, formatted by printf(3) from
 * @fmt, written into @error (@size bytes, NUL-terminated; nothing when
 * @error is NULL), and -EINVAL. */
static inline __attribute__((format(printf, 3, 4))) int
http_setting_refused(char *error, size_t size, const char *fmt, ...)
{
    if (error && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(error, size, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* The next entry of a comma-separated setting (--cors-origins,
 * --rate-limit-exempt): from *@p up to the next ',' or the end, spaces and
 * tabs around it dropped, as the @len bytes at *@entry (0 for an empty
 * entry). *@p moves past the comma, to NULL after the last entry; returns
 * false when *@p is NULL (the list is over). */
static inline bool http_list_next(const char **p, const char **entry, size_t *len)
{
    const char *s = *p;
    if (!s)
        return false;
    const char *comma = strchr(s, ',');
    const char *e = comma ? comma : s + strlen(s);
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *entry = s;
    *len = (size_t)(e - s);
    *p = comma ? comma + 1 : NULL;
    return true;
}

/* The connection's peer, its address and port: asked of the kernel
 * (getpeername) the first time a request needs it (http_peer_get, proxy.c:
 * the access line, http_request_client), once per connection; "" and 0
 * when that fails. */
typedef struct http_peer {
    int fd;                      /* the connection's socket */
    bool known;                  /* addr and port filled */
    char addr[INET6_ADDRSTRLEN];
    uint8_t bytes[16];           /* addr as IPv6, an IPv4 one IPv4-mapped; 0s when unknown */
    int port;
} http_peer;

/* http_peer_get - @peer with its address and port filled (once). The
 * connection's coroutine. */
const http_peer *http_peer_get(http_peer *peer);

/* http_request_client_bytes - the client of @ctx's request as
 * http_request_client finds it (the peer, or the X-Forwarded-For client
 * behind --trusted-proxies), as 16 bytes of IPv6 (an IPv4 address
 * IPv4-mapped, all 0 when the peer is unknown) into @out: nothing
 * formatted. The connection's coroutine (proxy.c). */
void http_request_client_bytes(http_ctx *ctx, uint8_t out[16]);

struct http_ctx_internal {
    cr_buf *out;             /* the connection's output buffer */
    bool responded;
    bool head;               /* HEAD request: no body in the response */
    bool close;              /* add Connection: close */
    bool keep_alive_10;      /* HTTP/1.0 keep-alive: say so */
    bool building;           /* between http_response_begin and _end */
    int status;
    /* The response being built (response.c), as offsets into *out, which
     * may move as it grows: where it starts, where the Content-Length
     * digits are reserved, where the body starts. */
    size_t response_start;
    size_t length_at;
    size_t body_start;
    const char *request_id;  /* X-Request-Id to send back, or NULL */
    size_t request_id_len;   /* its length, bytes */
    http_peer *peer;         /* the connection's peer (proxy.c) */
    const http_trusted_proxies *proxies; /* --trusted-proxies, or NULL */
    bool client_known;       /* @client holds http_request_client's answer */
    /* CORS header lines, each "\r\n" name ": " value (cors.c); 0 bytes: none. */
    const char *cors_lines;
    size_t cors_lines_len;
    /* Compression (compress.c): the server's settings (NULL: off), the
     * request whose Accept-Encoding decides, the type given to
     * http_response_begin, and the lines Vary/Content-Encoding chosen for
     * the response (0 bytes: none). */
    const http_server_config *compression;
    const http_request *req;
    const char *content_type;
    const char *coding_lines;
    size_t coding_lines_len;
    /* The traceresponse value (trace.c: HTTP_TRACEPARENT_LEN bytes), or
     * NULL: written after X-Request-Id, before the extra headers. */
    const char *traceresponse;
    size_t num_extra;
    /* Last, and read only below num_extra: http_ctx_internal_start zeroes
     * what comes before them, not these (once per request). */
    const char *extra_name[HTTP_MAX_EXTRA_HEADERS];
    const char *extra_value[HTTP_MAX_EXTRA_HEADERS];
    char client[HTTP_CLIENT_ADDRESS_SIZE]; /* read only once client_known */
};

/* Start @in for a response into @out: every field zero up to the extra
 * headers, which num_extra (0) keeps unread. */
static inline void http_ctx_internal_start(struct http_ctx_internal *in, cr_buf *out)
{
    memset(in, 0, offsetof(struct http_ctx_internal, extra_name));
    in->out = out;
}

/* Drop the response @in was building (its bytes the caller's to cut from
 * out), keeping what the request set before its handler: framing (head,
 * close), the request id, peer and client, CORS lines, compression
 * settings, traceresponse. The handler's extra headers go with it. */
static inline void http_ctx_internal_restart(struct http_ctx_internal *in)
{
    in->responded = false;
    in->building = false;
    in->status = 0;
    in->response_start = in->length_at = in->body_start = 0;
    in->content_type = NULL;
    in->coding_lines = NULL;
    in->coding_lines_len = 0;
    in->num_extra = 0;
}

/* Per worker thread. */
typedef struct http_thread {
    cr_json_parser *json;
    cr_buf scratch;
    cr_buf discard;          /* where a second answer's body goes (release builds) */
    cr_buf compressed;       /* a response's compressed body, before it is copied out */
    char date[30];           /* IMF-fixdate, refreshed once a second */
    long date_second;
    struct http_header_block *spare_headers; /* header arrays not lent (connection.c) */
    unsigned num_spare_headers;
    char *spare_out[64];     /* output buffers of HTTP_CONN_BUF_FLOOR bytes not lent
                                (connection.c) */
    unsigned num_spare_out;
    /* The access line's escaped method and target (request.c): formatted
     * here, not on a connection's stack. */
    char access_target[256];
    char access_method[40];
} http_thread;

/* What a connection keeps at most in each of its input and output buffers
 * between the batches of a run (connection.c). */
#define HTTP_CONN_BUF_FLOOR 4096u

extern _Thread_local http_thread *http_tl;

/* Append a complete response to @out (internal form of http_respond). */
void http_write_response(struct http_ctx_internal *in, int status, const char *content_type,
                         const void *body, size_t len);

/* http_write_response with the body as given, never compressed: the
 * coding lines already chosen (in->coding_lines) are sent with it. */
void http_write_encoded(struct http_ctx_internal *in, int status, const char *content_type,
                        const void *body, size_t len);

/* Whether and how to compress a response (compress.c): its @status,
 * @content_type and body length @len (bytes) against the server's settings
 * and the request's Accept-Encoding. Sets in->coding_lines (Vary, and
 * Content-Encoding unless identity) when the response is compressible;
 * returns the coding chosen (identity for HEAD). */
http_coding http_compress_choose(struct http_ctx_internal *in, int status, const char *content_type,
                                 size_t len);

/* A compression chosen by http_compress_choose that failed: the response
 * goes out in identity, still with Vary. */
void http_compress_fall_back(struct http_ctx_internal *in);

/* After the handler returned: a response begun and never ended is taken
 * back out of the output buffer, with an error logged, and the request is
 * left unanswered (the connection then answers 500). */
void http_response_drop_unfinished(struct http_ctx_internal *in);

/* The current HTTP date for this thread (formatted at most once a second). */
const char *http_date_now(void);

struct http_trace;
/* The trace context of @ctx's request (trace.c) into @t: begun from its
 * traceparent and tracestate (http_trace_begin), set for the coroutine's
 * log lines and outbound calls (cr_log_set_trace, until the request id is
 * cleared), and sent back as traceresponse (an extra header pointing into
 * @t, which must outlive the response). Connection coroutine. */
void http_trace_request(http_ctx *ctx, struct http_trace *t);

/* CORS for the request of @ctx (cors.c): chooses the CORS header lines
 * of its response, and answers a CORS preflight from an allowed origin for
 * a method of the path itself. Returns true when it answered. */
bool http_cors_handle(const struct http_cors *cors, const http_router *router, http_ctx *ctx);

/* The rate limit for the request of @ctx at @now_ns (rate_limit.c): unless
 * its path is exempt, takes a token of its client's bucket, or answers 429
 * with Retry-After and the RateLimit fields and returns true. */
bool http_rate_limit_refuse(struct http_rate_limit *rl, http_ctx *ctx, uint64_t now_ns);


/* One complete request, as the connection (connection.c) hands it to its
 * handling (request.c). Everything points into the connection's memory and
 * is valid for the call only. */
typedef struct http_exchange {
    const http_request *req; /* parsed; its strings in the connection's input */
    const char *body;        /* the body, decoded when chunked; NULL if none */
    size_t body_len;         /* bytes at @body */
    size_t wire_bytes;       /* header section and body as counted in the metrics */
    bool close;              /* the connection closes after this answer */
    bool closed;             /* out: the answer said Connection: close (@close, or
                                the drain began while the handler ran, or its
                                deadline cut the handler) */
    bool body_unread;        /* its body was not read: http_request_refused_early said
                                it is refused without it (@body NULL) */
    uint64_t start_ns;       /* monotonic clock reading that starts its duration */
    http_peer *peer;         /* the connection's peer, asked for on first use */
    cr_buf *out;             /* the connection's output: the response goes here */
} http_exchange;

/*
 * http_request_handle - answer @x's request on @srv (request.c): its request
 * id, CORS, the server's own answers (CONNECT and unknown methods 501,
 * OPTIONS, 404, 405 with Allow), else the route's handler (500 when it
 * answers nothing); then its metrics and, with --access-log, its access
 * line. The response is appended to @x->out (the buffer marked failed when
 * memory runs out). Returns the monotonic clock at its end, which starts
 * the next request of a pipelined batch: one reading per request.
 * A handler that its route's deadline cancelled (deadline.c,
 * docs/deadlines.md) and that answered a 5xx (what it waited for failed
 * because of the cancel) is answered 504 {"error":"deadline exceeded"}
 * instead, the connection kept; one that the drain's deadline cancelled
 * and that answered a 5xx other than 504, 503 {"error":"shutting down"}
 * with Connection: close. Any other answer stands (the handler finished
 * its work). Sets @x->closed.
 * Connection coroutine; the handler may yield.
 */
uint64_t http_request_handle(const http_server *srv, http_exchange *x);

/*
 * http_request_refused_early - whether the server answers @req on @srv
 * without reading its body: 501 (CONNECT, an unknown method), 404, 405, or
 * 415 for a POST, PUT or PATCH whose Content-Type is not JSON on a route
 * that exists (coring's routes take JSON bodies only). For Expect:
 * 100-continue (RFC 9110 section 10.1.1): such a request gets its final
 * status instead of 100 Continue, answered by http_request_handle with
 * body_unread set. OPTIONS is never refused early. Any thread.
 */
bool http_request_refused_early(const http_server *srv, const http_request *req);

/* The connection coroutine: net_hooks.on_connection. It runs while the
 * connection has something to do and leaves it idle between requests
 * (net_connection_idle), with its http_conn_state (connection.c). */
void http_connection_main(int fd, void *server);

/* net_hooks.on_idle_close: the runtime closed an idle connection; free
 * @state, count the close. Worker thread, outside any coroutine. */
void http_connection_closed(void *state, void *server);

/* Free the connection loop's per-thread memory in @t (spare header
 * arrays and output buffers). Worker thread, at its end, once no
 * connection runs. */
void http_connection_thread_fini(http_thread *t);

/* Metrics (metrics.c). Register the HTTP families, the route label taking
 * @router's patterns: main thread, before serving; 0 or -errno. */
int http_metrics_register(const http_router *router);

/* The route index that labels a request no route matched ("unmatched"). */
unsigned http_metrics_unmatched(void);

/* Count one answered request on this worker thread: @route (an index of
 * the router, or http_metrics_unmatched()), @duration_ns from dispatch to
 * the response queued, @request_bytes as received, @response_bytes queued. */
void http_metrics_request(unsigned route, http_method method, int status, uint64_t duration_ns,
                          size_t request_bytes, size_t response_bytes);

/* Count one request whose handler a deadline cancelled (its route's, or
 * the drain's): @route and @method as http_metrics_request; this worker
 * thread. */
void http_metrics_deadline(unsigned route, http_method method);

/* Count one request refused with @status while it was read, before
 * routing (reject() in connection.c); this worker thread. */
void http_metrics_refused(int status);

/* Count one request refused by the rate limit (429) on this worker thread. */
void http_metrics_rate_limited(void);

/* Count @bytes read by the request parser on this worker thread (the
 * http_parse_progress count, re-reads included; connection.c). */
void http_metrics_parser_read(size_t bytes);

/* An outbound transfer (client.c) entered (@open) or left libcurl's multi
 * handle on this worker thread. */
void http_metrics_client_transfer(bool open);

/* A client connection opened (@open) or closed on this worker thread. */
void http_metrics_connection(bool open);

#endif
