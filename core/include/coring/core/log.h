/*
 * Logging with levels, to stderr, one line per call.
 *
 * Lines look like `2026-11-29T23:11:11.123Z INFO  [t0] message`, or are
 * one JSON object each after cr_log_set_format(CR_LOG_FORMAT_JSON); fields
 * (cr_log_kv) and the coroutine's request id follow the message. The level
 * is process-wide and set once at start-up. Calls below the level cost one
 * comparison. Request data must be passed through cr_log_escape() before it
 * reaches a log line.
 *
 * Logging never blocks the caller on stderr: a line is formatted and copied
 * into a buffer of the calling thread's (256 KiB; its lock is shared with
 * the logger thread only), and a logger thread writes the buffers out every
 * 10 ms. When stderr is slower than the lines come (a full pipe, a stalled
 * journald), a thread's buffer fills and further lines are dropped and
 * counted: `log buffer full: dropped N lines` follows once there is room.
 * WARN and ERROR lines are rate-limited per thread and format string: at
 * most 10 a second, then `... (suppressed K similar messages: "FORMAT")`
 * once that second is over. Everything buffered is written at exit (atexit)
 * or by cr_log_flush(), so a clean shutdown loses no line, unless stderr
 * takes nothing for 5 s then (a pipe nobody reads): the rest is given up
 * rather than holding the process.
 */
#ifndef CORING_CORE_LOG_H
#define CORING_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/core/error.h"
#include "coring/core/trace_context.h"

typedef enum cr_log_level {
    CR_LOG_DEBUG = 0,
    CR_LOG_INFO = 1,
    CR_LOG_WARN = 2,
    CR_LOG_ERROR = 3,
    CR_LOG_OFF = 4,
} cr_log_level;

extern cr_log_level cr_log_threshold;

/*
 * cr_log_set_level - set the process-wide threshold. Call before threads
 * start. Returns nothing.
 */
void cr_log_set_level(cr_log_level level);

/*
 * cr_log_parse_level - "debug", "info", "warn", "error" or "off" to a level.
 * Returns the level, or -EINVAL for any other string.
 */
int cr_log_parse_level(const char *name);

/*
 * cr_log_set_thread_name - a short tag (up to 15 bytes) shown in every line
 * this thread logs, e.g. "t0" for worker 0. Copies @name.
 */
void cr_log_set_thread_name(const char *name);

/*
 * cr_log_write - log one line at @level (printf format). Any thread; never
 * blocks on stderr (see above). Lines of different threads never
 * interleave; a thread's lines stay in order. Lines over 1 KiB are cut.
 * @fmt must be a string literal or otherwise outlive the process's
 * logging: the rate limit keys on its address.
 */
void cr_log_write(cr_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * cr_log_flush - write every line buffered by any thread to stderr now,
 * with the pending drop counts and rate-limit summaries, and return once
 * written, or after 5 s when stderr takes nothing (then the rest is lost,
 * and every later line's write is bounded the same way). Any thread; for
 * the moments before an _exit(2), since exit(3) already flushes.
 */
void cr_log_flush(void);

/*
 * cr_log_escape - copy @len bytes of untrusted @src into @dst as printable
 * ASCII: bytes outside 0x20..0x7e and the backslash become \xHH.
 * @dst_size: bytes available at @dst, including the NUL; the output is cut
 *            to fit. Returns @dst.
 */
char *cr_log_escape(char *dst, size_t dst_size, const char *src, size_t len);

/* Line formats (cr_log_set_format). TEXT: `TS LEVEL [thread] msg key=value...`;
 * JSON: one object a line, {"ts","level","thread","msg",fields...}. */
typedef enum cr_log_format {
    CR_LOG_FORMAT_TEXT = 0,
    CR_LOG_FORMAT_JSON = 1,
} cr_log_format;

/*
 * cr_log_set_format - the process-wide line format. Call before threads
 * start. Returns nothing.
 */
void cr_log_set_format(cr_log_format format);

/*
 * cr_log_parse_format - "text" or "json" to a format. Returns the format,
 * or -EINVAL for any other string.
 */
int cr_log_parse_format(const char *name);

/* One field of a line (cr_log_kv). @key: a literal of [a-z_] (not
 * escaped). Strings are escaped (request data is safe). */
typedef enum cr_log_field_type { CR_LOG_STR, CR_LOG_INT, CR_LOG_MS } cr_log_field_type;
typedef struct cr_log_field {
    const char *key;
    cr_log_field_type type;
    const char *str; /* CR_LOG_STR: @len bytes, any bytes; NULL: field left out */
    size_t len;
    long long num;   /* CR_LOG_INT */
    double ms;       /* CR_LOG_MS: a duration in ms, written with 3 decimals */
    bool json_only;  /* left out of TEXT lines (already in the message there) */
    bool identifying; /* never shortened to fit the line (a request or trace
                       * id); numbers, a `request_id` and strings of up to 64
                       * bytes as written never are either */
} cr_log_field;

#define CR_LOG_FIELD_STR(k, s, l) ((cr_log_field){.key = (k), .type = CR_LOG_STR, .str = (s), .len = (l)})
#define CR_LOG_FIELD_INT(k, v) ((cr_log_field){.key = (k), .type = CR_LOG_INT, .num = (v)})

/*
 * cr_log_kv - like cr_log_write, with @n @fields after the message: in
 * TEXT ` key=value` each (strings in double quotes, escaped as by
 * cr_log_escape, with '"' as \x22; json_only fields skipped), in JSON
 * `"key":value` members (strings escaped by cr_log_json_escape). The
 * current request id (cr_log_set_request_id) is added as `request_id`
 * unless a field already has that key, and the current trace context
 * (cr_log_set_trace) as `trace_id` and `span_id`. Same threads, rate
 * limit (keyed on @fmt) and drops as cr_log_write. At most 32 fields
 * (more are left out).
 *
 * A line over its size (TEXT 1 KiB, JSON 2 KiB) keeps every field, and the
 * fields that identify a request whole: the message is shortened first (in
 * JSON it gets at most half the line anyway) to leave room for every field
 * kept whole and for 64 bytes of each other one; then the string values
 * over 64 bytes that are not identifying (a user agent, a target) are
 * shortened, the longest first, each to the same length; and a last member
 * names what was shortened: `"truncated":["msg","user_agent"]` in JSON,
 * ` truncated="msg,user_agent"` in TEXT. The line stays one valid JSON
 * object. Only a line with more long fields than room (over about 20)
 * leaves out what does not fit, and names it there too. docs/logs.md.
 */
void cr_log_kv(cr_log_level level, const cr_log_field *fields, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * cr_log_set_request_id - the request id that every line logged by the
 * calling coroutine carries from now on (`request_id`), until set again;
 * NULL clears it. Either way the trace context (cr_log_set_trace) is
 * cleared. Outside a coroutine it applies to the calling thread.
 * @id (NUL-terminated) is not copied: it must stay valid until cleared.
 */
void cr_log_set_request_id(const char *id);

/* cr_log_request_id - the calling coroutine's (or thread's) request id, or NULL. */
const char *cr_log_request_id(void);

/*
 * cr_log_set_trace - the trace context that every line logged by the
 * calling coroutine carries from now on (`trace_id`, `span_id` after the
 * request id), until set again; NULL clears it. cr_log_set_request_id
 * clears it too (a request's log context starts with its id): set the
 * trace after the id. Outside a coroutine it applies to the calling
 * thread. @trace is not copied: it must stay valid until cleared.
 */
void cr_log_set_trace(const cr_trace_context *trace);

/* cr_log_trace - the calling coroutine's (or thread's) trace context, or NULL. */
const cr_trace_context *cr_log_trace(void);

/*
 * cr_log_json_escape - copy @len bytes of untrusted @src into @dst as the
 * inside of a JSON string (RFC 8259 section 7): '"' and '\\' get a
 * backslash, bytes 0x00..0x1f and 0x7f become \u00XX, well-formed UTF-8
 * (RFC 3629) is copied, and every byte of an ill-formed sequence becomes
 * \ufffd. @dst_size: bytes at @dst including the NUL; the output is cut
 * before an escape or sequence that does not fit. Returns the length
 * written (without the NUL).
 */
size_t cr_log_json_escape(char *dst, size_t dst_size, const char *src, size_t len);

#define cr_log_debug(...) \
    do { if (cr_log_threshold <= CR_LOG_DEBUG) cr_log_write(CR_LOG_DEBUG, __VA_ARGS__); } while (0)
#define cr_log_info(...) \
    do { if (cr_log_threshold <= CR_LOG_INFO) cr_log_write(CR_LOG_INFO, __VA_ARGS__); } while (0)
#define cr_log_warn(...) \
    do { if (cr_log_threshold <= CR_LOG_WARN) cr_log_write(CR_LOG_WARN, __VA_ARGS__); } while (0)
#define cr_log_error(...) \
    do { if (cr_log_threshold <= CR_LOG_ERROR) cr_log_write(CR_LOG_ERROR, __VA_ARGS__); } while (0)

#endif
