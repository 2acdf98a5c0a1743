/*
 * One connection's life: read into provided buffers, parse every complete
 * request in place, answer each into the output buffer, send the batch
 * once, repeat until the client closes, an idle or header timeout, a
 * framing error, `Connection: close`, or shutdown.
 *
 * Between requests (the answers sent, nothing received) the connection
 * holds no coroutine: http_connection_main returns after
 * net_connection_idle, its stack goes back to the pool, and the runtime
 * runs it again in a new coroutine when the next bytes arrive. What stays
 * is http_conn_state (its client's address, whether it served a request),
 * on the heap; a request being received, the output and the parser's
 * progress live in the run, on its stack (http_conn).
 *
 * A request that spans reads is gathered in the connection's own buffer;
 * a request that fits one read is parsed from a copy in the coroutine's
 * arena, and the provided buffer the kernel put it in goes back to the ring
 * before any handler can wait.
 *
 * This file is the HTTP/1.1 protocol only (h2o's lib/http1.c): each complete
 * request goes to http_request_handle() (request.c) for its id, CORS,
 * routing, handler, metrics and access line.
 */
#include "internal.h"

#include "coring/core/coro.h"
#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/net/io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum conn_action { CONN_CONTINUE, CONN_CLOSE };

/* What a connection keeps between its runs, while idle with no coroutine
 * (net_connection_idle): a flag, and its peer's address as text once a
 * request needed it (http_peer_get: the access line, --trusted-proxies),
 * 64 bytes in all. */
typedef struct http_conn_state {
    bool served;    /* a request was answered: idle waits get the keep-alive timeout */
    http_peer peer; /* the client: its socket, and getpeername's answer once asked */
} http_conn_state;

/* One run of a connection, on its coroutine's stack: from the bytes that
 * woke it until it goes idle again or closes. */
typedef struct http_conn {
    int fd;
    const http_server *srv;
    http_conn_state *st; /* kept between runs */
    cr_buf in;          /* a request gathered across reads; after each batch cut back to
                           HTTP_CONN_BUF_FLOOR, and freed before going idle */
    cr_buf out;         /* responses not yet sent: a buffer lent by the thread for the
                           run (out_take) */
    /* The pending request, at in.data[0], costs each read the bytes that
     * read brought, not a scan from its first byte (linear however it is
     * cut). While its header section arrives, the parser resumes from
     * `parse`. Once the section is complete and the body is awaited, its
     * length and framing are kept (head_len != 0) and the section is not
     * parsed again until the body is whole. A chunked body is kept as the
     * header section followed by the chunk_decoded bytes decoded so far;
     * the decoder has consumed every byte of the coding it was given and
     * resumes from its state with the next read. */
    http_parse_progress parse;
    size_t head_len;         /* the header section's bytes; 0: not complete */
    uint64_t content_length; /* its Content-Length (0 without) */
    bool chunked;            /* its body is chunked: `chunk` decodes it */
    http_chunked_decoder chunk;
    size_t chunk_decoded;
    bool sent_continue; /* 100 Continue sent for the request being read */
    uint64_t request_start_ns; /* first byte of the pending request arrived */
    uint64_t body_start_ns;    /* the pending request's headers were complete */
    bool error_close;   /* closing after an error: linger to deliver it */
} http_conn;

/* Output buffers are lent to a run by the thread, HTTP_CONN_BUF_FLOOR bytes
 * each: a connection that idles holds none, and the steady state of a
 * keep-alive connection takes no malloc per request. At most
 * CONN_SPARE_OUT are kept per thread; more are freed when given back. */
#define CONN_SPARE_OUT 64u

static void out_take(cr_buf *b)
{
    http_thread *t = http_tl;
    if (t->num_spare_out) {
        b->data = t->spare_out[--t->num_spare_out];
        b->cap = HTTP_CONN_BUF_FLOOR;
        b->len = 0;
    }
}

/* A buffer that grew past HTTP_CONN_BUF_FLOOR is freed, not cut back with
 * realloc: glibc cuts a mapped block (128 KiB and more) back with
 * mremap(2) and keeps it mapped, so the next large answer mapped and
 * faulted its pages in again (pipelined GET /todos: 10 times the CPU per
 * response); freed, the block raises malloc's mmap threshold and the next
 * comes from the heap. */
static void out_give(cr_buf *b)
{
    http_thread *t = http_tl;
    if (b->cap == HTTP_CONN_BUF_FLOOR && !b->failed && t->num_spare_out < CONN_SPARE_OUT) {
        t->spare_out[t->num_spare_out++] = b->data;
        *b = CR_BUF_INIT;
        return;
    }
    cr_buf_free(b);
}

static int flush(http_conn *c)
{
    if (c->out.len == 0)
        return 0;
    if (c->out.failed) {
        cr_log_error("out of memory building a response: closing the connection");
        return -ENOMEM;
    }
    /* Cancelled (the drain's deadline): the answers are the connection's
     * last, whole (a send the deadline cut ended the connection before it
     * came here), sent once without waiting. */
    ssize_t n = net_cancelled()
                    ? net_send_last(c->fd, c->out.data, c->out.len)
                    : net_send_all(c->fd, c->out.data, c->out.len, c->srv->cfg.send_timeout_ns);
    cr_buf_reset(&c->out);
    return n < 0 ? (int)n : 0;
}

/* An error found before routing: answer it and close (RFC 9112 section 9.6
 * and 11: after a framing error the rest of the stream cannot be trusted). */
static void reject(http_conn *c, int status, const char *message)
{
    struct http_ctx_internal in = {.out = &c->out, .close = true};
    cr_buf *b = http_scratch();
    http_error_body(b, message, strlen(message));
    http_write_response(&in, status, "application/json", b->data, b->len);
    c->error_close = true;
    http_metrics_refused(status);
}

/* The headers are in, the body is not: from now on the body timeout
 * applies, and a client that asked for it (@expect_continue) gets 100
 * Continue (RFC 9110 section 10.1.1) once, before the body (unless
 * answer_unread answered first). */
static void await_body(http_conn *c, bool expect_continue)
{
    if (c->body_start_ns == 0)
        c->body_start_ns = cr_clock_now_ns();
    if (expect_continue && !c->sent_continue) {
        cr_buf_append_str(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
        c->sent_continue = true;
    }
}

/*
 * A request with Expect: 100-continue whose body is not in yet, that the
 * server refuses without it (http_request_refused_early: 404, 405, 415,
 * 501): its final status now instead of 100 Continue (RFC 9110 section
 * 10.1.1), so that the client does not upload a body for nothing. Then the
 * connection closes: the client may send the body anyway or not at all
 * (both are allowed), so what follows on it cannot be framed; the linger
 * reads and discards what it does send, so that the close does not reset
 * the answer. Returns true when it answered.
 */
static bool answer_unread(http_conn *c, const http_request *req, size_t head, uint64_t clock_ns)
{
    if (!req->expect_continue || c->sent_continue || !http_request_refused_early(c->srv, req))
        return false;
    c->head_len = 0;
    http_exchange x = {
        .req = req,
        .wire_bytes = head,
        .close = true,
        .body_unread = true,
        .start_ns = clock_ns,
        .peer = &c->st->peer,
        .out = &c->out,
    };
    http_request_handle(c->srv, &x);
    c->st->served = true;
    c->error_close = true;
    return true;
}

/* Parse the header section of the request at @p (@n bytes received),
 * resuming the scan from c->parse: its length, HTTP_PARSE_INCOMPLETE or
 * HTTP_PARSE_ERROR, as http_parse_request. The bytes the parser read go to
 * the metrics; once the section is complete its length and framing are
 * kept in @c. */
static int parse_head(http_conn *c, const char *p, size_t n, http_request *req)
{
    int r = http_parse_request(p, n, &c->parse, req, &c->srv->cfg.limits);
    http_metrics_parser_read(c->parse.bytes_read);
    c->parse.bytes_read = 0;
    if (r == HTTP_PARSE_INCOMPLETE)
        return r;
    c->parse = (http_parse_progress){0};
    if (r > 0) {
        c->head_len = (size_t)r;
        c->content_length = req->content_length;
        c->chunked = req->chunked;
        if (req->chunked) {
            http_chunked_init(&c->chunk, c->srv->cfg.limits.max_body_bytes);
            c->chunk_decoded = 0;
        }
    }
    return r;
}

/* The header section of the request kept at @data since an earlier read,
 * @head bytes, parsed again now that its body is whole: the same bytes give
 * the same request (a chunked body was decoded after it, not over it).
 * Returns 0, or -EPROTO should the parser ever disagree with itself. */
static int reparse_head(http_conn *c, const char *data, size_t head, http_request *req)
{
    http_metrics_parser_read(head);
    int r = http_parse_request(data, head, NULL, req, &c->srv->cfg.limits);
    return r == (int)head ? 0 : -EPROTO;
}

/*
 * Header arrays for the parser, sized --max-headers, lent to a batch of
 * requests from a per-thread list: not on the coroutine stack (up to 8 KiB,
 * over any guard page, and a VLA), not held by an idle connection, and no
 * malloc in the steady state. A handler may yield with its request's
 * headers in use, so each batch has an array of its own.
 */
struct http_header_block {
    struct http_header_block *next; /* in the thread's spare list */
    size_t count;                   /* entries in headers[] */
    http_header headers[];
};

/* Spare arrays kept per thread at most; more are freed when given back. */
#define CONN_SPARE_HEADER_BLOCKS 64u

static struct http_header_block *headers_take(size_t count)
{
    http_thread *t = http_tl;
    struct http_header_block *b = t->spare_headers;
    if (b && b->count == count) {
        t->spare_headers = b->next;
        t->num_spare_headers--;
        return b;
    }
    b = malloc(sizeof(*b) + count * sizeof(http_header));
    if (b)
        b->count = count;
    return b;
}

static void headers_give(struct http_header_block *b)
{
    http_thread *t = http_tl;
    if (t->num_spare_headers >= CONN_SPARE_HEADER_BLOCKS) {
        free(b);
        return;
    }
    b->next = t->spare_headers;
    t->spare_headers = b;
    t->num_spare_headers++;
}

void http_connection_thread_fini(http_thread *t)
{
    struct http_header_block *b = t->spare_headers;
    while (b) {
        struct http_header_block *next = b->next;
        free(b);
        b = next;
    }
    t->spare_headers = NULL;
    t->num_spare_headers = 0;
    while (t->num_spare_out)
        free(t->spare_out[--t->num_spare_out]);
}

/*
 * Answer every complete request in data[0..len). Sets *used to the bytes
 * consumed and *kept to how many bytes after them must be kept for the next
 * read (the pending request: all the rest, or for a chunked body its header
 * section and the bytes decoded so far). Returns CONN_CLOSE when the
 * connection must close after the output is sent.
 */
static enum conn_action process(http_conn *c, char *data, size_t len, size_t *used, size_t *kept)
{
    const http_server_config *cfg = &c->srv->cfg;
    size_t max_headers = cfg->limits.max_headers ? cfg->limits.max_headers : 1;
    size_t pos = 0, pending_end = len;
    enum conn_action action = CONN_CONTINUE;
    uint64_t clock_ns = cr_clock_now_ns(); /* moved on by each request handled */

    struct http_header_block *headers = headers_take(max_headers);
    if (!headers) {
        reject(c, 500, "out of memory");
        *used = len;
        *kept = 0;
        return CONN_CLOSE;
    }
    while (pos < len) {
        /* Not zeroed here: the parser clears it (http_parse_request) before
         * any field is read, on every path below. */
        http_request req;
        req.headers = headers->headers;
        /* The request kept from an earlier read may have its header section
         * complete already: then only its body is looked at. */
        bool head_known = pos == 0 && c->head_len != 0;
        if (!head_known) {
            int r = parse_head(c, data + pos, len - pos, &req);
            if (r == HTTP_PARSE_INCOMPLETE)
                break;
            if (r == HTTP_PARSE_ERROR) {
                reject(c, req.error_status, req.error ? req.error : "bad request");
                action = CONN_CLOSE;
                pos = len;
                break;
            }
        }
        size_t head = c->head_len;
        size_t avail = len - pos - head;
        const char *body = NULL;
        size_t body_len = 0, consumed = head;

        if (c->chunked) {
            /* Decode in place what arrived since the last read; the decoded
             * bytes land right after those decoded before. */
            size_t before = c->chunk_decoded < avail ? c->chunk_decoded : avail;
            size_t n = avail - before;
            ssize_t done = http_chunked_decode(&c->chunk, data + pos + head + before, &n);
            if (done == HTTP_PARSE_ERROR) {
                c->head_len = 0;
                reject(c, c->chunk.error_status ? c->chunk.error_status : 400,
                       c->chunk.error ? c->chunk.error : "malformed chunked body");
                action = CONN_CLOSE;
                pos = len;
                break;
            }
            c->chunk_decoded = before + n;
            if (done == HTTP_PARSE_INCOMPLETE) {
                if (!head_known && answer_unread(c, &req, head, clock_ns)) {
                    action = CONN_CLOSE;
                    pos = len;
                    break;
                }
                pending_end = pos + head + c->chunk_decoded;
                await_body(c, !head_known && req.expect_continue);
                break;
            }
            body = data + pos + head;
            body_len = c->chunk_decoded;
            consumed += before + (size_t)done;
        } else if (c->content_length > 0) {
            if (avail < c->content_length) {
                if (!head_known && answer_unread(c, &req, head, clock_ns)) {
                    action = CONN_CLOSE;
                    pos = len;
                    break;
                }
                await_body(c, !head_known && req.expect_continue);
                break;
            }
            body = data + pos + head;
            body_len = (size_t)c->content_length;
            consumed += body_len;
        }
        c->head_len = 0;
        if (head_known && reparse_head(c, data, head, &req) < 0) {
            reject(c, 500, "internal error");
            action = CONN_CLOSE;
            pos = len;
            break;
        }

        c->sent_continue = false;
        c->body_start_ns = 0;
        /* CONNECT is refused (501) and the connection closed: a client may
         * already have sent tunnel bytes (a TLS ClientHello) behind it. */
        bool close = !req.keep_alive || net_draining() || req.method == HTTP_CONNECT;
        http_exchange x = {
            .req = &req,
            .body = body,
            .body_len = body_len,
            .wire_bytes = head + body_len,
            .close = close,
            .start_ns = clock_ns,
            .peer = &c->st->peer,
            .out = &c->out,
        };
        clock_ns = http_request_handle(c->srv, &x);
        c->st->served = true;
        pos += consumed;
        if (close || x.closed) {
            action = CONN_CLOSE;
            break;
        }
        if (c->out.len >= cfg->output_flush_bytes) {
            if (flush(c) < 0) {
                action = CONN_CLOSE;
                break;
            }
            /* The send may have waited on a slow reader: not the next
             * request's time. */
            clock_ns = cr_clock_now_ns();
        }
    }
    headers_give(headers);
    if (pending_end < pos)
        pending_end = pos;
    *used = pos;
    *kept = pending_end - pos;
    return action;
}

/* Is a request that is still being received over what we would accept? */
static bool pending_too_large(const http_conn *c, size_t pending)
{
    const http_limits *l = &c->srv->cfg.limits;
    /* Headers, body, and the chunked coding's overhead. */
    return pending > l->max_header_bytes + 2 * l->max_body_bytes + 4096;
}

/* After an error response: stop writing, then read and discard what the
 * client still sends for a short while, so that closing does not reset
 * the connection before the client has read our answer. */
static void linger(http_conn *c)
{
    net_shutdown(c->fd, SHUT_WR);
    net_task_set_idle(true); /* shutdown need not wait for this */
    /* The sink comes from the arena, not the stack (a 4 KiB frame would
     * step over a 4 KiB guard page in one go). */
    enum { SINK_BYTES = 4096 };
    char *sink = cr_arena_alloc(cr_coro_arena(cr_coro_current()), SINK_BYTES);
    size_t total = 0;
    if (!sink)
        return;
    uint64_t deadline = cr_clock_now_ns() + 2 * CR_NS_PER_S;
    while (total < 1024 * 1024) {
        uint64_t now = cr_clock_now_ns();
        if (now >= deadline)
            break;
        ssize_t n = net_recv(c->fd, sink, SINK_BYTES, deadline - now);
        if (n <= 0)
            break;
        total += (size_t)n;
    }
}

/* Say, at most once a minute per thread, that the provided receive buffers
 * ran out: connections then read into memory of their own, which they hold
 * until their request is answered (--recv-buffers may be too small). */
static void warn_no_provided_buffers(void)
{
    static _Thread_local uint64_t last_ns;
    uint64_t now = cr_clock_now_ns();
    if (last_ns != 0 && now - last_ns < 60 * CR_NS_PER_S)
        return;
    last_ns = now;
    cr_log_warn("every provided receive buffer is in use: connections read into their own memory");
}

void http_connection_main(int fd, void *server)
{
    const http_server *srv = server;
    const http_server_config *cfg = &srv->cfg;
    http_conn_state *st = net_connection_state();
    if (!st) {
        /* Just accepted: what it keeps while idle. */
        st = calloc(1, sizeof(*st));
        if (!st) {
            cr_log_error("out of memory for a connection: closing it");
            net_close(fd);
            return;
        }
        st->peer.fd = fd; /* its address: asked for when first needed */
        http_metrics_connection(true);
    }
    http_conn c = {.fd = fd, .srv = srv, .st = st};
    cr_arena *arena = cr_coro_arena(cr_coro_current());

    for (;;) {
        bool partial = c.in.len > 0;
        /* Idle: the keep-alive timeout (the header timeout before the first
         * request, as a new connection owes us one). Headers: one deadline for the
         * whole header section, so a byte every few seconds cannot hold
         * the connection (slowloris). Body: likewise one deadline for the
         * whole body, counted from the end of its headers (a per-read timeout
         * would let a byte every few seconds hold it for days). */
        uint64_t timeout = st->served ? cfg->keepalive_timeout_ns : cfg->header_timeout_ns;
        if (!partial) {
            /* Between requests, the answers sent: give the coroutine up
             * until the next bytes come (net_connection_idle), holding no
             * buffer. Once the drain's idle grace is over the runtime
             * says no, and the read below ends at once unless a request
             * is already waiting (then it is answered, with Connection:
             * close). */
            net_task_set_idle(true);
            cr_buf_free(&c.in);
            out_give(&c.out);
            if (net_connection_idle(st, timeout) == 0)
                return;
        }
        if (partial && c.head_len != 0) {
            uint64_t spent = cr_clock_now_ns() - c.body_start_ns;
            timeout = spent < cfg->body_timeout_ns ? cfg->body_timeout_ns - spent : 1;
        } else if (partial) {
            uint64_t spent = cr_clock_now_ns() - c.request_start_ns;
            timeout = spent < cfg->header_timeout_ns ? cfg->header_timeout_ns - spent : 1;
        }
        net_rbuf rb = {0};
        ssize_t n = net_recv_provided(fd, &rb, timeout);
        if (n == -ENOBUFS) {
            /* Every provided buffer is in use: read into our own memory. */
            warn_no_provided_buffers();
            if (cr_buf_reserve(&c.in, 16 * 1024) < 0)
                break;
            n = net_recv(fd, c.in.data + c.in.len, c.in.cap - c.in.len, timeout);
        }
        net_task_set_idle(false);
        if (n <= 0) {
            if (n == -ETIMEDOUT && partial) {
                reject(&c, 408, "request timeout");
                flush(&c);
            }
            break;
        }

        char *data;
        size_t len;
        bool copied = false;
        if (!rb.provided) {
            c.in.len += (size_t)n;
            data = c.in.data;
            len = c.in.len;
        } else if (c.in.len == 0) {
            /* Parse a copy in the coroutine's arena and give the provided
             * buffer back now: a handler may wait seconds on PostgreSQL, the
             * upstream or inference, and a buffer held meanwhile is one fewer
             * for every other connection of the thread. A small request
             * fits the arena chunk the coroutine keeps: no malloc. */
            data = cr_arena_alloc(arena, rb.len);
            if (data)
                memcpy(data, rb.data, rb.len);
            len = rb.len;
            net_rbuf_release(&rb);
            if (!data)
                break;
            copied = true;
        } else {
            int err = cr_buf_append(&c.in, rb.data, rb.len);
            net_rbuf_release(&rb);
            if (err < 0)
                break;
            data = c.in.data;
            len = c.in.len;
        }

        if (!c.out.data)
            out_take(&c.out);
        size_t used = 0, kept = 0;
        enum conn_action action = process(&c, data, len, &used, &kept);
        if (copied) {
            if (kept > 0 && action == CONN_CONTINUE && cr_buf_append(&c.in, data + used, kept) < 0)
                action = CONN_CLOSE;
        } else {
            c.in.len = used + kept;
            cr_buf_consume(&c.in, used);
        }
        /* The header deadline runs from the first byte of the request
         * being received: a completed request starts the next one's. */
        if (c.in.len == 0)
            c.request_start_ns = 0;
        else if (c.request_start_ns == 0 || used > 0)
            c.request_start_ns = cr_clock_now_ns();
        if (action == CONN_CONTINUE && pending_too_large(&c, c.in.len)) {
            reject(&c, 413, "request too large");
            action = CONN_CLOSE;
        }
        int sent = flush(&c);
        cr_arena_reset(arena);
        /* What a large request or answer took goes now, not when the
         * connection closes. */
        cr_buf_shrink(&c.in, HTTP_CONN_BUF_FLOOR);
        if (c.out.cap > HTTP_CONN_BUF_FLOOR)
            out_give(&c.out);
        if (action == CONN_CLOSE || sent < 0)
            break;
    }
    if (c.error_close)
        linger(&c);
    net_close(fd);
    cr_buf_free(&c.in);
    out_give(&c.out);
    free(st);
    http_metrics_connection(false);
}

void http_connection_closed(void *state, void *server)
{
    (void)server;
    free(state);
    http_metrics_connection(false);
}
