/*
 * Leveled logging to stderr that never blocks the thread that logs.
 *
 * A ring thread that called write(2) on stderr for every line stalled its
 * whole loop as soon as stderr was slow (journald, a full pipe). So each
 * thread formats its lines into a buffer of its own, and one logger thread
 * writes them out:
 *
 *   producer (any thread)        logger thread (every 10 ms)
 *   lock own buffer              lock writer
 *   append line, or drop+count   for each thread's buffer:
 *   unlock                         lock it, swap its full half with the
 *                                  logger's empty one, take the dropped
 *                                  count and due rate-limit summaries, unlock
 *                                  write(2) the half (may block: only the
 *                                  logger waits)
 *
 * The lock of a buffer is shared by one producer thread and the logger
 * only, never between cores, and held for a memcpy. A full buffer drops the
 * line and counts it; the count is written as a line of its own. WARN and
 * ERROR lines are rate-limited per thread and format string (at most
 * LOG_RATE_LIMIT a second), and the number suppressed is reported once the
 * second is over. cr_log_flush(), also run at exit, writes everything still
 * buffered, so a clean shutdown loses nothing. See coring/core/log.h.
 */
#include "coring/core/log.h"
#include "coring/core/coro.h"
#include "coring/core/error.h"
#include "coring/core/utf8.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024             /* bytes per TEXT line, newline included */
#define LOG_JSON_LINE_MAX 2048        /* bytes per JSON line, newline included */
#define LOG_BUFFER_BYTES (256 * 1024) /* per thread, each of the two halves */
#define LOG_INTERVAL_MS 10            /* the logger's period */
#define LOG_RATE_LIMIT 10             /* WARN/ERROR lines per format, thread and second */
#define LOG_RATE_SLOTS 64             /* formats tracked per thread (direct-mapped) */
#define LOG_EXIT_WAIT_MS 5000         /* at exit: how long stderr may take the rest */
#define LOG_PIPE_BUF 4096             /* a pipe with room (POLLOUT) takes this much whole */
#define LOG_FIELDS_MAX 32             /* fields per line (cr_log_kv): more are left out */
#define LOG_CUT_FLOOR 64              /* a value (escaped) this long or shorter is never cut */

cr_log_level cr_log_threshold = CR_LOG_INFO;
static cr_log_format log_format = CR_LOG_FORMAT_TEXT;
static _Thread_local char thread_name[16] = "main";
static _Thread_local const char *thread_request_id; /* outside coroutines */
static _Thread_local const cr_trace_context *thread_trace; /* outside coroutines */

/* One format string's count in the current second. */
typedef struct rate_slot {
    const char *fmt; /* NULL: free */
    cr_log_level level;
    time_t second;       /* the window (CLOCK_REALTIME seconds) */
    unsigned count;      /* lines written in the window */
    unsigned suppressed; /* lines dropped in the window, not yet reported */
} rate_slot;

/* One thread's lines waiting for the logger. */
typedef struct log_buffer {
    pthread_mutex_t lock; /* the owning thread and the logger only */
    char *data;           /* LOG_BUFFER_BYTES */
    size_t len;
    uint64_t dropped; /* lines that did not fit since the last swap */
    /* When the oldest of len and dropped came (the lines' clock, µs, at
     * least 1), 0 while neither: stored under `lock`, read without it by
     * the logger to choose which buffer to drain first. */
    _Atomic uint64_t pending_since;
    bool orphaned;    /* the thread exited: free once drained */
    char name[16];    /* the thread's name when it last logged */
    rate_slot rate[LOG_RATE_SLOTS];
    struct log_buffer *next;
} log_buffer;

static _Thread_local log_buffer *tl_buffer;

/*
 * Where each thread formats its lines: per thread, not on the stack. A
 * worker's lines are logged from its coroutines, whose stacks the pool
 * hands from connection to connection: 7 KiB of arrays there made every
 * stack that ever logged keep those pages resident (the access line: 20
 * KiB per idle keep-alive connection before connections gave their
 * stacks back, issue 39). format_line uses msg and the member arrays;
 * log_line the line and the note; format_note, which calls format_line
 * only once log_line's own line is formatted, `full`.
 */
static _Thread_local struct log_scratch {
    char line[LOG_JSON_LINE_MAX];
    char note[LOG_JSON_LINE_MAX];
    char full[LOG_JSON_LINE_MAX];
    char msg[LOG_LINE_MAX];
    const cr_log_field *member[LOG_FIELDS_MAX + 3];
    const cr_log_field *truncated[LOG_FIELDS_MAX + 3];
    size_t value_len[LOG_FIELDS_MAX + 3];
    size_t long_len[LOG_FIELDS_MAX + 3];
} scratch;

static struct {
    pthread_mutex_t registry; /* guards `buffers` and `started` */
    log_buffer *buffers;
    pthread_mutex_t writer; /* held while writing to stderr */
    pthread_cond_t wake;    /* signalled to stop the logger (with `writer`) */
    pthread_t thread;
    bool started; /* the logger thread runs */
    bool stopping;
    atomic_bool direct; /* no logger (failed to start, or stopped at exit): write(2) */
    /* Past this CLOCK_MONOTONIC time (ns; 0: never) writes give up: set at
     * exit, so that a stderr nobody reads cannot hold the process. */
    _Atomic uint64_t give_up_ns;
    char *spare;        /* the logger's empty half */
    pthread_key_t key;  /* its destructor orphans a thread's buffer */
} lg = {
    .registry = PTHREAD_MUTEX_INITIALIZER,
    .writer = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t once = PTHREAD_ONCE_INIT;

void cr_log_set_level(cr_log_level level)
{
    cr_log_threshold = level;
}

int cr_log_parse_level(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (size_t i = 0; i < cr_countof(names); i++)
        if (strcasecmp(name, names[i]) == 0)
            return (int)i;
    return -EINVAL;
}

void cr_log_set_format(cr_log_format format)
{
    log_format = format;
}

int cr_log_parse_format(const char *name)
{
    if (strcmp(name, "text") == 0)
        return CR_LOG_FORMAT_TEXT;
    if (strcmp(name, "json") == 0)
        return CR_LOG_FORMAT_JSON;
    return -EINVAL;
}

void cr_log_set_request_id(const char *id)
{
    cr_coro *co = cr_coro_current();
    if (co) {
        cr_coro_set_log_tag(co, id); /* and clears its trace */
    } else {
        thread_request_id = id;
        thread_trace = NULL;
    }
}

void cr_log_set_trace(const cr_trace_context *trace)
{
    cr_coro *co = cr_coro_current();
    if (co)
        cr_coro_set_log_trace(co, trace);
    else
        thread_trace = trace;
}

const cr_trace_context *cr_log_trace(void)
{
    cr_coro *co = cr_coro_current();
    return co ? cr_coro_log_trace(co) : thread_trace;
}

const char *cr_log_request_id(void)
{
    cr_coro *co = cr_coro_current();
    return co ? cr_coro_log_tag(co) : thread_request_id;
}

void cr_log_set_thread_name(const char *name)
{
    snprintf(thread_name, sizeof(thread_name), "%s", name);
}

/* --- writing to stderr ---------------------------------------------------- */

static uint64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Write all of @len bytes to stderr, waiting as long as it takes (an
 * O_NONBLOCK stderr is waited for with poll), or until lg.give_up_ns once
 * that is set: then each write waits for room with poll(2) first and is at
 * most a pipe's atomic size, so that it cannot block past the deadline.
 * Gives up on other errors. */
static void write_all(const char *p, size_t len)
{
    while (len) {
        size_t n = len;
        uint64_t give_up = atomic_load(&lg.give_up_ns);
        if (give_up) {
            uint64_t now = monotonic_ns();
            struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};
            if (now >= give_up || poll(&pfd, 1, (int)((give_up - now) / 1000000u) + 1) <= 0)
                return;
            if (n > LOG_PIPE_BUF)
                n = LOG_PIPE_BUF;
        }
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};
            poll(&pfd, 1, 100);
        } else {
            return;
        }
    }
}

static const char *level_tag(cr_log_level level)
{
    static const char *tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
    return tags[level < CR_LOG_OFF ? level : 3];
}

/* The line prefix `2026-11-29T23:11:11.123Z INFO  [t0] ` into @line. Its
 * length. @tv: the time to show. */
static int format_prefix(char *line, size_t size, const struct timeval *tv, cr_log_level level,
                         const char *name)
{
    struct tm tm;
    gmtime_r(&tv->tv_sec, &tm);
    int n = snprintf(line, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %s [%s] ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv->tv_usec / 1000), level_tag(level), name);
    return n < 0 ? 0 : n;
}

static const char *level_name(cr_log_level level)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    return names[level < CR_LOG_OFF ? level : 3];
}

/* The JSON line's start `{"ts":"2026-11-29T23:11:11.123Z","level":"info",
 * "thread":"t0","msg":"` into @line; its length. */
static int format_json_prefix(char *line, size_t size, const struct timeval *tv,
                              cr_log_level level, const char *name)
{
    struct tm tm;
    gmtime_r(&tv->tv_sec, &tm);
    char shown[100];
    cr_log_json_escape(shown, sizeof(shown), name, strlen(name));
    int n = snprintf(line, size,
                     "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":\"%s\","
                     "\"thread\":\"%s\",\"msg\":\"",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv->tv_usec / 1000), level_name(level), shown);
    return n < 0 ? 0 : n;
}

/* Escape @len bytes of untrusted @src into @dst (NULL: only measure), at
 * most @cap bytes, cut before an escape or UTF-8 sequence that would not
 * fit. @json: as the inside of a JSON string (cr_log_json_escape's rule);
 * else as a TEXT value: bytes outside 0x20..0x7e, '\\' and '"' as \xHH.
 * *@whole: whether all of @src went in. Returns the bytes written (or that
 * would be). */
static size_t escape_value(bool json, char *dst, size_t cap, const char *src, size_t len,
                           bool *whole)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0, i = 0;
    while (i < len) {
        unsigned char c = s[i];
        char esc[6];
        const char *out = esc;
        size_t w, used = 1;
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out = src + i, w = 1;
        } else if (json && (c == '"' || c == '\\')) {
            esc[0] = '\\', esc[1] = (char)c, w = 2;
        } else if (!json) {
            esc[0] = '\\', esc[1] = 'x', esc[2] = hex[c >> 4], esc[3] = hex[c & 15], w = 4;
        } else if (c < 0x80) {
            memcpy(esc, "\\u00", 4), esc[4] = hex[c >> 4], esc[5] = hex[c & 15], w = 6;
        } else if ((used = cr_utf8_sequence_length(s + i, len - i)) != 0) {
            out = src + i, w = used;
        } else {
            out = "\\ufffd", w = 6, used = 1;
        }
        if (o + w > cap)
            break;
        if (dst)
            memcpy(dst + o, out, w);
        o += w;
        i += used;
    }
    *whole = i == len;
    return o;
}

/* A field's value as written, with its quotes and escapes, into @dst (NULL:
 * only measure), at most @cap bytes: a string that is longer is cut inside
 * its quotes (*@cut set); a number that is longer is not written. Returns
 * its length (a number's whole length, even when over @cap). */
static size_t render_value(bool json, char *dst, size_t cap, const cr_log_field *f, bool *cut)
{
    *cut = false;
    if (f->type == CR_LOG_STR) {
        if (cap < 2) {
            *cut = true;
            return 0;
        }
        bool whole;
        size_t n = escape_value(json, dst ? dst + 1 : NULL, cap - 2, f->str, f->len, &whole);
        if (dst) {
            dst[0] = '"';
            dst[n + 1] = '"';
        }
        *cut = !whole;
        return n + 2;
    }
    /* snprintf's NUL lands at dst[cap] at most: inside the line (the
     * callers keep room for '}' and '\n' after cap). */
    int m = f->type == CR_LOG_INT ? snprintf(dst, dst ? cap + 1 : 0, "%lld", f->num)
                                  : snprintf(dst, dst ? cap + 1 : 0, "%.3f", f->ms);
    return m < 0 ? 0 : (size_t)m;
}

/* The bytes a member takes before its value: `,"key":` or ` key=`. */
static size_t member_overhead(bool json, const cr_log_field *f)
{
    return strlen(f->key) + (json ? 4 : 2);
}

/* Write @f's key into @p: `,"key":` (JSON) or ` key=` (TEXT). Returns the
 * bytes written (member_overhead). */
static size_t write_key(bool json, char *p, const cr_log_field *f)
{
    size_t klen = strlen(f->key);
    if (json) {
        p[0] = ',', p[1] = '"';
        memcpy(p + 2, f->key, klen);
        p[klen + 2] = '"', p[klen + 3] = ':';
        return klen + 4;
    }
    p[0] = ' ';
    memcpy(p + 1, f->key, klen);
    p[klen + 1] = '=';
    return klen + 2;
}

/* Whether a field is always written whole: numbers, identifying fields (a
 * `request_id` always is), and strings whose written value (@value_len,
 * quotes included) is LOG_CUT_FLOOR bytes or less. */
static bool keep_whole(const cr_log_field *f, size_t value_len)
{
    return f->type != CR_LOG_STR || f->identifying || value_len <= LOG_CUT_FLOOR + 2 ||
           strcmp(f->key, "request_id") == 0;
}

/* The largest length (in bytes, inside the quotes) to which every value in
 * @len[0..@n) that is over it is cut so that all @n fit in @budget bytes:
 * the longest values give way first, the short ones stay whole ("water
 * filling"). Never under LOG_CUT_FLOOR: a line with no room for that much
 * leaves out what does not fit instead. */
static size_t fair_cut(const size_t *len, size_t n, size_t budget)
{
    bool fits[LOG_FIELDS_MAX + 3] = {false};
    size_t left = n, cap = 0;
    for (bool changed = true; changed && left;) {
        changed = false;
        cap = budget / left;
        for (size_t i = 0; i < n; i++) {
            if (!fits[i] && len[i] <= cap) {
                fits[i] = true;
                budget -= len[i];
                left--;
                changed = true;
            }
        }
    }
    if (left)
        cap = budget / left;
    return cap < LOG_CUT_FLOOR ? LOG_CUT_FLOOR : cap;
}

/* Format a whole line (prefix, message, fields, request id, newline) into
 * @line (LOG_JSON_LINE_MAX bytes); its length.
 *
 * When everything fits, everything is written whole. When not, the
 * request's identifying fields stay whole and the rest gives way: the
 * message (in JSON already at most half the line) is shortened to leave
 * room for every field that is kept whole and for LOG_CUT_FLOOR bytes of
 * each of the others; then the long string values (user agents, targets)
 * are shortened, the longest first, each to the same length; and every
 * member shortened is named in a last member, `"truncated":["msg",
 * "user_agent"]` (TEXT: ` truncated="msg,user_agent"`). */
static size_t format_line(char *line, const struct timeval *tv, cr_log_level level,
                          const char *name, bool with_id, const cr_log_field *fields,
                          size_t n, const char *fmt, va_list ap)
{
    bool json = log_format == CR_LOG_FORMAT_JSON;
    size_t size = json ? LOG_JSON_LINE_MAX : LOG_LINE_MAX;
    size_t limit = size - 2; /* room for '}' and '\n' */

    /* The members after the message: the caller's fields that apply to
     * this format, then the request id unless a field is one, then the
     * trace context's ids. */
    const cr_log_field **member = scratch.member;
    size_t count = 0;
    bool has_id = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(fields[i].key, "request_id") == 0)
            has_id = true;
        if ((fields[i].type == CR_LOG_STR && !fields[i].str) || (fields[i].json_only && !json))
            continue;
        if (count < LOG_FIELDS_MAX)
            member[count++] = &fields[i];
    }
    const char *id = has_id || !with_id ? NULL : cr_log_request_id();
    cr_log_field id_field = CR_LOG_FIELD_STR("request_id", id, id ? strlen(id) : 0);
    id_field.identifying = true;
    if (id)
        member[count++] = &id_field;
    const cr_trace_context *trace = with_id ? cr_log_trace() : NULL;
    cr_log_field trace_field[2];
    if (trace) {
        trace_field[0] = CR_LOG_FIELD_STR("trace_id", trace->trace_id, 32);
        trace_field[1] = CR_LOG_FIELD_STR("span_id", trace->span_id, 16);
        trace_field[0].identifying = trace_field[1].identifying = true;
        member[count++] = &trace_field[0];
        member[count++] = &trace_field[1];
    }

    /* Each member's length whole (a value is measured up to the line's
     * size: past that, only "too long" matters). */
    size_t *value_len = scratch.value_len;
    size_t all_need = 0;   /* every member whole */
    size_t fixed_need = 0; /* those kept whole, and LOG_CUT_FLOOR of the others */
    size_t names_need = 0; /* the names in a `truncated` member naming them all */
    for (size_t i = 0; i < count; i++) {
        bool cut;
        size_t over = member_overhead(json, member[i]);
        value_len[i] = render_value(json, NULL, size, member[i], &cut);
        all_need += over + value_len[i];
        if (keep_whole(member[i], value_len[i])) {
            fixed_need += over + value_len[i];
        } else {
            fixed_need += over + 2 + LOG_CUT_FLOOR;
            names_need += strlen(member[i]->key) + 3;
        }
    }
    /* `,"truncated":["msg",...]` or ` truncated="msg,..."` */
    size_t mark_need = sizeof(",\"truncated\":[]") - 1 + sizeof("\"msg\",") - 1 + names_need;

    /* The prefix and the message, whole if all fits. */
    size_t len;
    size_t msg_at;        /* where the message starts in @line */
    size_t msg_len;       /* its length there, whole (JSON: escaped, quote included) */
    bool msg_cut = false; /* vsnprintf had to cut it already */
    char *msg = scratch.msg;
    size_t raw_len = 0;
    if (json) {
        int m = vsnprintf(msg, LOG_LINE_MAX, fmt, ap);
        raw_len = m < 0 ? 0 : (size_t)m >= LOG_LINE_MAX ? LOG_LINE_MAX - 1 : (size_t)m;
        msg_cut = m >= LOG_LINE_MAX;
        len = (size_t)format_json_prefix(line, size, tv, level, name);
        msg_at = len;
        bool whole;
        msg_len = escape_value(true, NULL, size, msg, raw_len, &whole) + 1;
    } else {
        len = (size_t)format_prefix(line, size, tv, level, name);
        msg_at = len;
        int m = vsnprintf(line + len, size - len, fmt, ap);
        msg_len = m < 0 ? 0 : (size_t)m;
        if (msg_len > size - len - 1) {
            msg_len = size - len - 1;
            msg_cut = true;
        }
    }
    size_t msg_max = json ? size / 2 - msg_at : limit - msg_at;
    bool all_fit = !msg_cut && msg_len <= msg_max && msg_at + msg_len + all_need <= limit;

    /* The message: whole, or cut to leave the fields their room. */
    if (!all_fit) {
        size_t room = limit - msg_at, others = fixed_need + mark_need;
        size_t fair = room > others + LOG_CUT_FLOOR ? room - others : LOG_CUT_FLOOR;
        if (fair < msg_max)
            msg_max = fair;
        if (msg_len > msg_max) {
            msg_len = msg_max;
            msg_cut = true;
        }
    }
    if (json) {
        bool whole;
        len += escape_value(true, line + len, msg_len - 1, msg, raw_len, &whole);
        line[len++] = '"';
    } else {
        len += msg_len;
    }

    /* The fields: whole, or the long strings cut to a fair share. */
    size_t cut_to = SIZE_MAX;
    if (!all_fit && len + all_need + mark_need > limit) {
        size_t *long_len = scratch.long_len;
        size_t n_long = 0, budget = limit > len + mark_need ? limit - len - mark_need : 0;
        for (size_t i = 0; i < count; i++) {
            size_t over = member_overhead(json, member[i]);
            if (keep_whole(member[i], value_len[i])) {
                budget -= budget > over + value_len[i] ? over + value_len[i] : budget;
            } else {
                budget -= budget > over + 2 ? over + 2 : budget;
                long_len[n_long++] = value_len[i] - 2;
            }
        }
        cut_to = fair_cut(long_len, n_long, budget);
    }
    const cr_log_field **truncated = scratch.truncated;
    size_t n_truncated = 0;
    for (size_t i = 0; i < count; i++) {
        const cr_log_field *f = member[i];
        size_t over = member_overhead(json, f);
        size_t want = value_len[i];
        if (!keep_whole(f, value_len[i]) && want - 2 > cut_to)
            want = cut_to + 2;
        if (len + over + 2 > limit || (f->type != CR_LOG_STR && len + over + want > limit)) {
            truncated[n_truncated++] = f; /* no room left even for that: left out */
            continue;
        }
        if (len + over + want > limit)
            want = limit - len - over;
        bool cut;
        size_t key_len = write_key(json, line + len, f);
        len += key_len + render_value(json, line + len + key_len, want, f, &cut);
        if (cut)
            truncated[n_truncated++] = f;
    }

    /* The mark: which members were shortened (or left out). */
    if (msg_cut || n_truncated) {
        size_t need = mark_need - names_need;
        for (size_t i = 0; i < n_truncated; i++)
            need += strlen(truncated[i]->key) + 3;
        if (len + need <= limit) {
            len += (size_t)sprintf(line + len, json ? ",\"truncated\":[" : " truncated=\"");
            bool first = true;
            if (msg_cut) {
                len += (size_t)sprintf(line + len, json ? "\"msg\"" : "msg");
                first = false;
            }
            for (size_t i = 0; i < n_truncated; i++, first = false)
                len += (size_t)sprintf(line + len, json ? "%s\"%s\"" : "%s%s", first ? "" : ",",
                                       truncated[i]->key);
            line[len++] = json ? ']' : '"';
        }
    }
    if (json)
        line[len++] = '}';
    line[len++] = '\n';
    return len;
}

/* Format a line of the logger's own (drops, suppressions) for thread @name
 * into @line; its length. */
static size_t format_note(char *line, size_t size, cr_log_level level, const char *name,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static size_t format_note(char *line, size_t size, cr_log_level level, const char *name,
                          const char *fmt, ...)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char *full = scratch.full;
    va_list ap;
    va_start(ap, fmt);
    size_t len = format_line(full, &tv, level, name, false, NULL, 0, fmt, ap);
    va_end(ap);
    if (size == 0)
        return 0;
    if (len > size) { /* never with the sizes used: keep the newline */
        len = size;
        full[len - 1] = '\n';
    }
    memcpy(line, full, len);
    return len;
}

/* A rate slot's summary line into @line (its length), and the slot reset. */
static size_t summarise(rate_slot *s, const char *name, char *line, size_t size)
{
    char shown[80];
    cr_log_escape(shown, sizeof(shown), s->fmt, strlen(s->fmt));
    size_t len = format_note(line, size, s->level, name,
                             "... (suppressed %u similar messages: \"%s\")", s->suppressed, shown);
    s->suppressed = 0;
    return len;
}

/* --- the logger ------------------------------------------------------------ */

/* Write out what @b holds. Called with lg.writer held, by the logger or a
 * flush. @all: report every pending suppression, even of this second. */
static void drain(log_buffer *b, bool all)
{
    char notes[4 * LOG_JSON_LINE_MAX];
    size_t notes_len = 0;
    time_t now = time(NULL);
    pthread_mutex_lock(&b->lock);
    char *full = b->data;
    size_t len = b->len;
    if (len) {
        b->data = lg.spare;
        b->len = 0;
        lg.spare = full;
    }
    uint64_t dropped = b->dropped;
    b->dropped = 0;
    atomic_store_explicit(&b->pending_since, 0, memory_order_relaxed);
    char name[16];
    memcpy(name, b->name, sizeof(name));
    for (size_t i = 0; i < LOG_RATE_SLOTS; i++) {
        rate_slot *s = &b->rate[i];
        if (s->suppressed && (all || s->second != now) && notes_len + LOG_JSON_LINE_MAX <= sizeof(notes))
            notes_len += summarise(s, name, notes + notes_len, sizeof(notes) - notes_len);
    }
    pthread_mutex_unlock(&b->lock);
    if (len)
        write_all(full, len);
    if (dropped)
        notes_len +=
            format_note(notes + notes_len, sizeof(notes) - notes_len, CR_LOG_WARN, name,
                        "log buffer full: dropped %llu lines", (unsigned long long)dropped);
    if (notes_len)
        write_all(notes, notes_len);
}

/* The buffer whose pending lines (or dropped count) are the oldest, or
 * NULL when none has any: read without taking the buffers' locks. */
static log_buffer *oldest_pending(log_buffer *list)
{
    log_buffer *oldest = NULL;
    uint64_t oldest_us = UINT64_MAX;
    for (log_buffer *b = list; b; b = b->next) {
        uint64_t since = atomic_load_explicit(&b->pending_since, memory_order_relaxed);
        if (since && since < oldest_us) {
            oldest = b;
            oldest_us = since;
        }
    }
    return oldest;
}

/* Drain every buffer; free those of threads that exited. Buffers go out
 * oldest pending line first, not in list order: while one buffer's write
 * blocks (a slow stderr), its thread may fill the other half and drop
 * lines, and another thread may log after that ("stopped" at exit); the
 * first thread's lines and its dropped count must still come out first.
 * At most twice as many writes as buffers, so that a busy thread cannot
 * keep the pass going; the rest waits for the next pass. */
static void drain_all(bool all)
{
    pthread_mutex_lock(&lg.registry);
    log_buffer *list = lg.buffers;
    pthread_mutex_unlock(&lg.registry);
    /* Buffers are only added at the head, and removed here (under writer):
     * walking the list taken above is safe without the registry lock. */
    size_t n = 0;
    for (log_buffer *b = list; b; b = b->next)
        n++;
    log_buffer *b;
    for (size_t i = 0; i < 2 * n && (b = oldest_pending(list)); i++)
        drain(b, all);
    /* The rate-limit summaries that fall due without a line pending. */
    for (b = list; b; b = b->next)
        drain(b, all);
    pthread_mutex_lock(&lg.registry);
    for (log_buffer **p = &lg.buffers; *p;) {
        log_buffer *b = *p;
        pthread_mutex_lock(&b->lock);
        bool gone = b->orphaned && b->len == 0 && b->dropped == 0;
        for (size_t i = 0; gone && i < LOG_RATE_SLOTS; i++)
            gone = b->rate[i].suppressed == 0;
        pthread_mutex_unlock(&b->lock);
        if (gone) {
            *p = b->next;
            pthread_mutex_destroy(&b->lock);
            free(b->data);
            free(b);
        } else {
            p = &b->next;
        }
    }
    pthread_mutex_unlock(&lg.registry);
}

static void *logger_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lg.writer);
    while (!lg.stopping) {
        drain_all(false);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += LOG_INTERVAL_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&lg.wake, &lg.writer, &until);
    }
    pthread_mutex_unlock(&lg.writer);
    return NULL;
}

static void on_thread_exit(void *arg)
{
    log_buffer *b = arg;
    pthread_mutex_lock(&b->lock);
    b->orphaned = true;
    pthread_mutex_unlock(&b->lock);
    tl_buffer = NULL;
}

/* The CLOCK_REALTIME time @ms from now, for pthread's timed waits. */
static struct timespec realtime_in(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Stop the logger and write what is left: at exit, within LOG_EXIT_WAIT_MS
 * (a stderr that takes nothing for that long, a pipe nobody reads, loses
 * the rest rather than holding the process forever). */
static void log_at_exit(void)
{
    atomic_store(&lg.give_up_ns, monotonic_ns() + LOG_EXIT_WAIT_MS * 1000000ull);
    struct timespec until = realtime_in(LOG_EXIT_WAIT_MS);
    pthread_mutex_lock(&lg.registry);
    bool started = lg.started;
    lg.started = false;
    pthread_mutex_unlock(&lg.registry);
    if (started) {
        if (pthread_mutex_timedlock(&lg.writer, &until) != 0)
            return; /* the logger is stuck in a write(2) that began before */
        lg.stopping = true;
        pthread_cond_signal(&lg.wake);
        pthread_mutex_unlock(&lg.writer);
        if (pthread_timedjoin_np(lg.thread, NULL, &until) != 0)
            return;
    }
    /* Lines logged from here on (other atexit handlers) go out directly.
     * cr_log_write reads `direct` under its buffer's lock: once every lock
     * has been taken once below, no line can enter a buffer any more. */
    atomic_store(&lg.direct, true);
    pthread_mutex_lock(&lg.registry);
    for (log_buffer *b = lg.buffers; b; b = b->next) {
        pthread_mutex_lock(&b->lock);
        pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&lg.registry);
    pthread_mutex_lock(&lg.writer);
    drain_all(true);
    pthread_mutex_unlock(&lg.writer);
}

/* fork(2): the child has no logger thread. Hold every lock across the fork
 * so that none is copied held; the child drops what the parent will write
 * and starts a logger of its own on its first line. */
static void before_fork(void)
{
    pthread_mutex_lock(&lg.writer);
    pthread_mutex_lock(&lg.registry);
    for (log_buffer *b = lg.buffers; b; b = b->next)
        pthread_mutex_lock(&b->lock);
}

static void after_fork_parent(void)
{
    for (log_buffer *b = lg.buffers; b; b = b->next)
        pthread_mutex_unlock(&b->lock);
    pthread_mutex_unlock(&lg.registry);
    pthread_mutex_unlock(&lg.writer);
}

static void after_fork_child(void)
{
    for (log_buffer *b = lg.buffers; b; b = b->next) {
        b->len = 0;
        b->dropped = 0;
        atomic_store_explicit(&b->pending_since, 0, memory_order_relaxed);
        memset(b->rate, 0, sizeof(b->rate));
        if (b != tl_buffer)
            b->orphaned = true;
        pthread_mutex_unlock(&b->lock);
    }
    lg.started = false;
    lg.stopping = false;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
    pthread_mutex_unlock(&lg.registry);
    pthread_mutex_unlock(&lg.writer);
}

static void start_logger(void)
{
    static bool registered;
    if (!registered) {
        registered = true;
        if (pthread_key_create(&lg.key, on_thread_exit) != 0 ||
            pthread_atfork(before_fork, after_fork_parent, after_fork_child) != 0 ||
            atexit(log_at_exit) != 0) {
            atomic_store(&lg.direct, true);
            return;
        }
    }
    if (!lg.spare && !(lg.spare = malloc(LOG_BUFFER_BYTES))) {
        atomic_store(&lg.direct, true);
        return;
    }
    pthread_mutex_lock(&lg.registry);
    lg.stopping = false;
    /* The logger blocks every signal: they belong to the threads that
     * expect them (net_run's main thread). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    lg.started = pthread_create(&lg.thread, NULL, logger_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_unlock(&lg.registry);
    if (!lg.started)
        atomic_store(&lg.direct, true);
}

/* This thread's buffer, made on its first line; NULL without memory. */
static log_buffer *thread_buffer(void)
{
    if (tl_buffer)
        return tl_buffer;
    log_buffer *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    if (!(b->data = malloc(LOG_BUFFER_BYTES))) {
        free(b);
        return NULL;
    }
    pthread_mutex_init(&b->lock, NULL);
    pthread_mutex_lock(&lg.registry);
    b->next = lg.buffers;
    lg.buffers = b;
    pthread_mutex_unlock(&lg.registry);
    pthread_setspecific(lg.key, b);
    tl_buffer = b;
    return b;
}

/* Rate limit: whether a @level line of @fmt may be written now, at second
 * @now. May put a summary of an earlier window into @note (*@note_len).
 * Called with @b's lock held. */
static bool rate_allows(log_buffer *b, cr_log_level level, const char *fmt, time_t now, char *note,
                        size_t note_size, size_t *note_len)
{
    *note_len = 0;
    if (level < CR_LOG_WARN)
        return true; /* access log and debug lines: bounded by the buffer alone */
    uintptr_t h = (uintptr_t)fmt;
    rate_slot *s = &b->rate[(h ^ (h >> 7) ^ (h >> 13)) % LOG_RATE_SLOTS];
    if (s->fmt != fmt || s->second != now) {
        if (s->suppressed)
            *note_len = summarise(s, thread_name, note, note_size);
        *s = (rate_slot){.fmt = fmt, .level = level, .second = now};
    }
    if (s->count >= LOG_RATE_LIMIT) {
        s->suppressed++;
        return false;
    }
    s->count++;
    return true;
}

static void log_line(cr_log_level level, const cr_log_field *fields, size_t n, const char *fmt,
                     va_list ap)
{
    char *line = scratch.line;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    size_t len = format_line(line, &tv, level, thread_name, true, fields, n, fmt, ap);

    pthread_once(&once, start_logger);
    log_buffer *b = atomic_load(&lg.direct) ? NULL : thread_buffer();
    if (!b) {
        write_all(line, len); /* no logger: as before, one write(2) a line */
        return;
    }
    char *note = scratch.note;
    size_t note_len;
    pthread_mutex_lock(&b->lock);
    if (atomic_load(&lg.direct)) { /* the logger stopped meanwhile (exit) */
        pthread_mutex_unlock(&b->lock);
        write_all(line, len);
        return;
    }
    memcpy(b->name, thread_name, sizeof(b->name));
    bool was_empty = b->len == 0 && b->dropped == 0;
    if (rate_allows(b, level, fmt, tv.tv_sec, note, LOG_JSON_LINE_MAX, &note_len)) {
        if (b->len + note_len + len <= LOG_BUFFER_BYTES) {
            memcpy(b->data + b->len, note, note_len);
            memcpy(b->data + b->len + note_len, line, len);
            b->len += note_len + len;
        } else {
            b->dropped += 1 + (note_len != 0);
        }
    } else if (note_len) {
        if (b->len + note_len <= LOG_BUFFER_BYTES) {
            memcpy(b->data + b->len, note, note_len);
            b->len += note_len;
        } else {
            b->dropped++;
        }
    }
    if (was_empty && (b->len || b->dropped)) {
        uint64_t us = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
        atomic_store_explicit(&b->pending_since, us ? us : 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&b->lock);
}

void cr_log_write(cr_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line(level, NULL, 0, fmt, ap);
    va_end(ap);
}

void cr_log_kv(cr_log_level level, const cr_log_field *fields, size_t n, const char *fmt, ...)
{
    if (level < cr_log_threshold)
        return;
    va_list ap;
    va_start(ap, fmt);
    log_line(level, fields, n, fmt, ap);
    va_end(ap);
}

void cr_log_flush(void)
{
    /* Before an _exit: bounded like the exit flush, and skipped when the
     * logger is stuck in a write(2) of its own. */
    atomic_store(&lg.give_up_ns, monotonic_ns() + LOG_EXIT_WAIT_MS * 1000000ull);
    struct timespec until = realtime_in(LOG_EXIT_WAIT_MS);
    if (pthread_mutex_timedlock(&lg.writer, &until) != 0)
        return;
    drain_all(true);
    pthread_mutex_unlock(&lg.writer);
}

char *cr_log_escape(char *dst, size_t dst_size, const char *src, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (dst_size == 0)
        return dst;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 1 >= dst_size)
                break;
            dst[o++] = (char)c;
        } else {
            if (o + 4 >= dst_size)
                break;
            dst[o++] = '\\', dst[o++] = 'x', dst[o++] = hex[c >> 4], dst[o++] = hex[c & 15];
        }
    }
    dst[o] = '\0';
    return dst;
}

size_t cr_log_json_escape(char *dst, size_t dst_size, const char *src, size_t len)
{
    if (dst_size == 0)
        return 0;
    bool whole;
    size_t o = escape_value(true, dst, dst_size - 1, src, len, &whole);
    dst[o] = '\0';
    return o;
}

const char *cr_strerror(int err)
{
    const char *s = strerrordesc_np(err < 0 ? -err : err);
    return s ? s : "unknown error";
}
