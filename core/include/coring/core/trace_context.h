/*
 * A request's trace context (W3C Trace Context), as the layers share it:
 * the HTTP layer fills it (coring/http/trace.h), the logger writes its ids
 * on the request's lines and the outbound client and the database layer
 * pass it on (cr_log_trace in coring/core/log.h). Its own header so that a
 * layer can use the type without the logger.
 */
#ifndef CORING_CORE_TRACE_CONTEXT_H
#define CORING_CORE_TRACE_CONTEXT_H

#include <stddef.h>

/* The ids and flags of W3C Trace Context Level 1, section 3.2
 * (https://www.w3.org/TR/trace-context/#traceparent-header); ids are
 * lowercase hex, NUL-terminated. */
typedef struct cr_trace_context {
    char trace_id[33];   /* the trace's id: 32 hex digits, never all zero */
    char span_id[17];    /* coring's span for the request: 16 hex digits, never all zero */
    unsigned char flags; /* trace-flags (bit 0: sampled, CR_TRACE_SAMPLED) */
    const char *state;   /* tracestate to pass on as received, or NULL: none */
    size_t state_len;    /* bytes at @state */
} cr_trace_context;

#define CR_TRACE_SAMPLED 0x01u

#endif
