/*
 * W3C Trace Context (Level 1, https://www.w3.org/TR/trace-context/): a
 * request's `traceparent` and `tracestate` are taken when valid, and a new
 * trace is started when they are absent or invalid. coring's span for the
 * request gets a new id each time; the trace id and that span id go into
 * every log line of the request (cr_log_set_trace), back to the client as
 * `traceresponse` (Trace Context Level 2, section 3.4), to upstream
 * requests (http_fetch: `traceparent` with a new span id, `tracestate` as
 * received) and, for sampled traces, to PostgreSQL as a SQL comment
 * (db_run). docs/tracing.md.
 *
 * Ids come from a per-thread xoshiro256** generator seeded by getrandom(2)
 * once per thread: no lock, no system call per request.
 */
#ifndef CORING_HTTP_TRACE_H
#define CORING_HTTP_TRACE_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/core/trace_context.h"
#include "coring/http/parser.h"

/* A version-00 traceparent (and traceresponse): 2 + 1 + 32 + 1 + 16 + 1 + 2 bytes. */
#define HTTP_TRACEPARENT_LEN 55
/* tracestate passed on at most, bytes (commas included): the 512 the spec
 * says to propagate at least (section 3.3.1.5); a longer one is dropped. */
#define HTTP_TRACESTATE_MAX 512
/* List members of a tracestate at most (section 3.3.1.1). */
#define HTTP_TRACESTATE_MAX_MEMBERS 32

/* A traceparent's fields as parsed (http_traceparent_parse). */
typedef struct http_traceparent {
    unsigned char version; /* 0x00, or a later version read as 00 (never 0xff) */
    char trace_id[33];     /* 32 lowercase hex digits, not all zero, NUL */
    char parent_id[17];    /* 16 lowercase hex digits, not all zero, NUL */
    unsigned char flags;   /* trace-flags */
} http_traceparent;

/*
 * http_traceparent_parse - parse the @len bytes at @s as a traceparent
 * (section 3.2): `version-trace_id-parent_id-trace_flags`, every field
 * lowercase hex. Version 00 is exactly 55 bytes. Version ff is invalid. A
 * later version is read as version 00 is (section 3.2.4.1: its first 55
 * bytes, then, if there is more, a '-' and fields this parser ignores).
 * A trace id or parent id of all zeros is invalid. Pure; any thread.
 * Returns 0 with *@out filled, or -EINVAL.
 */
int http_traceparent_parse(const char *s, size_t len, http_traceparent *out);

/*
 * http_tracestate_valid - whether the @len bytes at @s are a tracestate
 * that coring passes on (section 3.3.1): a list of at most 32 `key=value`
 * members (simple or `tenant@system` keys, each unique; values of 1 to 256
 * printable bytes without ',' or '=', not ending in a space), separated by
 * commas with optional spaces or tabs, empty members allowed, at most
 * HTTP_TRACESTATE_MAX bytes in all. Pure; any thread.
 */
bool http_tracestate_valid(const char *s, size_t len);

/*
 * http_trace_new_trace_id / http_trace_new_span_id - a new random id,
 * never all zero, as lowercase hex into @dst (33 / 17 bytes: 32 / 16
 * digits and a NUL). Any thread; no system call after the thread's first
 * id (the seed falls back to the clock and a thread address when
 * getrandom fails).
 */
void http_trace_new_trace_id(char *dst);
void http_trace_new_span_id(char *dst);

/*
 * http_trace_format - write `00-@trace_id-@span_id-FF` (FF: @flags in
 * hex) into @dst (HTTP_TRACEPARENT_LEN + 1 bytes) with its NUL: a
 * traceparent or a traceresponse. Returns HTTP_TRACEPARENT_LEN.
 */
size_t http_trace_format(char *dst, const char *trace_id, const char *span_id, unsigned flags);

/* One request's trace context and what its answer and upstream calls need. */
typedef struct http_trace {
    cr_trace_context ctx;  /* what the log, the client and db/ read */
    bool invalid;          /* a traceparent came and was not valid (a new trace began) */
    char state[HTTP_TRACESTATE_MAX + 1]; /* several tracestate fields, joined */
    char response[HTTP_TRACEPARENT_LEN + 1]; /* the traceresponse value */
} http_trace;

/*
 * http_trace_begin - the trace context of @req into @t: its traceparent's
 * trace id and flags when it has exactly one and it is valid (with its
 * tracestate fields, joined by commas, when valid), else a new trace id
 * and flags 00 (not sampled) and no tracestate; a new span id for coring
 * either way; @t->response the traceresponse. Only the trace-flags' sampled
 * bit is kept (section 3.2.2.5: the other bits are not known to version 00).
 * @t->ctx.state points into @req's memory or into @t: valid while both
 * are. Connection coroutine (or any thread, for tests). Returns nothing.
 */
void http_trace_begin(http_trace *t, const http_request *req);

#endif
