/*
 * The logger: lines leave through a logger thread, so a stderr nobody
 * reads never blocks the caller (lines are dropped and counted instead),
 * WARN/ERROR lines of one format are rate-limited with a count of those
 * suppressed, and cr_log_flush writes everything buffered.
 *
 * Each test points stderr at a pipe of its own (Criterion runs each test
 * in a process of its own).
 */
#include "coring/core/clock.h"
#include "coring/core/coro.h"
#include "coring/core/json.h"

/* Criterion has an enum cr_log_level and cr_log_* macros of its own:
 * include coring's header under other names, then Criterion's. */
#define cr_log_level coring_log_level
#define CR_LOG_DEBUG CORING_LOG_DEBUG
#define CR_LOG_INFO CORING_LOG_INFO
#define CR_LOG_WARN CORING_LOG_WARN
#define CR_LOG_ERROR CORING_LOG_ERROR
#define CR_LOG_OFF CORING_LOG_OFF
#include "coring/core/log.h"
#undef cr_log_level
#undef CR_LOG_DEBUG
#undef CR_LOG_INFO
#undef CR_LOG_WARN
#undef CR_LOG_ERROR
#undef CR_LOG_OFF
#undef cr_log_debug
#undef cr_log_info
#undef cr_log_warn
#undef cr_log_error
#define log_info(...) cr_log_write(CORING_LOG_INFO, __VA_ARGS__)
#define log_warn(...) cr_log_write(CORING_LOG_WARN, __VA_ARGS__)

#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int pipe_rd = -1;

/* stderr into a new pipe of @size bytes (0: the default); returns nothing,
 * the read end is pipe_rd. */
static void stderr_to_pipe(int size)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    if (size)
        cr_assert_geq(fcntl(p[1], F_SETPIPE_SZ, size), size);
    cr_assert_geq(dup2(p[1], STDERR_FILENO), 0);
    close(p[1]);
    pipe_rd = p[0];
}

typedef struct reader {
    pthread_t thread;
    char *data;
    size_t len, cap;
} reader;

static void *read_main(void *arg)
{
    reader *r = arg;
    for (;;) {
        if (r->cap - r->len < 65536) {
            r->cap = r->cap ? r->cap * 2 : 1 << 20;
            r->data = realloc(r->data, r->cap + 1);
        }
        ssize_t n = read(pipe_rd, r->data + r->len, r->cap - r->len);
        if (n <= 0)
            break;
        r->len += (size_t)n;
    }
    r->data[r->len] = '\0';
    return NULL;
}

/* Close our stderr (after a flush) and return what was read. */
static char *finish(reader *r)
{
    cr_log_flush();
    int null = open("/dev/null", O_WRONLY);
    dup2(null, STDERR_FILENO); /* the pipe's last writer goes: EOF */
    close(null);
    pthread_join(r->thread, NULL);
    return r->data;
}

static size_t count(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

Test(log, warn_lines_of_one_format_are_rate_limited)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    for (int i = 0; i < 100; i++)
        log_warn("upstream failed for request %d", i);
    char *text = finish(&r);
    size_t shown = count(text, "] upstream failed for request");
    /* 10 a second; the loop may straddle one second boundary. */
    cr_assert(shown >= 10 && shown <= 20, "lines written: %zu\n%s", shown, text);
    const char *s = strstr(text, "... (suppressed ");
    cr_assert(s, "no suppression summary:\n%s", text);
    unsigned suppressed = 0, more = 0;
    cr_assert_eq(sscanf(s, "... (suppressed %u", &suppressed), 1);
    const char *s2 = strstr(s + 1, "... (suppressed ");
    if (s2)
        cr_assert_eq(sscanf(s2, "... (suppressed %u", &more), 1);
    cr_assert_eq(shown + suppressed + more, 100, "shown %zu + suppressed %u + %u", shown,
                 suppressed, more);
    cr_assert(strstr(s, "upstream failed for request %d"), "the summary names the format");
    free(text);
}

Test(log, info_lines_are_not_rate_limited)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    for (int i = 0; i < 500; i++)
        log_info("GET /%d 200", i);
    char *text = finish(&r);
    cr_assert_eq(count(text, " 200\n"), 500);
    cr_assert_null(strstr(text, "suppressed"));
    free(text);
}

/* A stderr pipe that nobody reads: the old logger blocked in write(2) on
 * the caller's thread (this test then hung until Criterion's timeout). */
Test(log, a_stderr_nobody_reads_never_blocks_the_caller, .timeout = 20)
{
    stderr_to_pipe(4096);
    char pad[200];
    memset(pad, 'x', sizeof(pad) - 1);
    pad[sizeof(pad) - 1] = '\0';
    enum { LINES = 5000 };
    uint64_t worst = 0, t0 = cr_clock_now_ns();
    for (int i = 0; i < LINES; i++) {
        uint64_t a = cr_clock_now_ns();
        log_info("line %d %s", i, pad);
        uint64_t d = cr_clock_now_ns() - a;
        if (d > worst)
            worst = d;
    }
    uint64_t total = cr_clock_now_ns() - t0;
    fprintf(stdout,
            "%d lines of ~250 bytes into an unread 4 KiB pipe: %.1f ms in all, "
            "slowest call %.3f ms\n",
            LINES, (double)total / 1e6, (double)worst / 1e6);
    cr_assert_lt(worst, 50 * CR_NS_PER_MS, "a log call blocked %.1f ms", (double)worst / 1e6);
    /* Now read: every line is either written or counted as dropped. */
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    char *text = finish(&r);
    size_t written = count(text, pad);
    unsigned long long dropped = 0;
    const char *d = strstr(text, "log buffer full: dropped ");
    cr_assert(d, "no drop count:\n%.400s", text);
    for (; d; d = strstr(d + 1, "log buffer full: dropped ")) {
        unsigned long long k = 0;
        cr_assert_eq(sscanf(d, "log buffer full: dropped %llu", &k), 1);
        dropped += k;
    }
    fprintf(stdout, "written %zu, dropped %llu\n", written, dropped);
    cr_assert_eq(written + dropped, LINES, "written %zu + dropped %llu", written, dropped);
    cr_assert(strstr(text, "line 0 "), "the first lines are kept");
    free(text);
}

/* --- JSON lines (issue 14) ------------------------------------------------ */

static size_t json_escape(char *dst, size_t size, const char *s, size_t len)
{
    return cr_log_json_escape(dst, size, s, len);
}

Test(log_json, escape_one_rule_for_quotes_controls_and_bad_utf8)
{
    char out[256];
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"plain /path?q=1", 15, "plain /path?q=1"},
        {"a\"b\\c", 5, "a\\\"b\\\\c"},
        {"\n\t\r\x01\x7f", 5, "\\u000a\\u0009\\u000d\\u0001\\u007f"},
        {"nul\0x", 5, "nul\\u0000x"},
        {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
        {"\xff", 1, "\\ufffd"},
        {"\xc3", 1, "\\ufffd"},                 /* truncated */
        {"\xc0\xaf", 2, "\\ufffd\\ufffd"},      /* overlong '/' */
        {"\xed\xa0\x80", 3, "\\ufffd\\ufffd\\ufffd"}, /* a surrogate */
        {"\x80x", 2, "\\ufffdx"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = json_escape(out, sizeof(out), cases[i].in, cases[i].len);
        cr_expect_str_eq(out, cases[i].want, "case %zu", i);
        cr_expect_eq(n, strlen(cases[i].want), "case %zu", i);
    }
    /* Cut before an escape that does not fit, never inside it. */
    size_t n = json_escape(out, 8, "ab\x01", 3);
    cr_expect_str_eq(out, "ab");
    cr_expect_eq(n, 2);
    n = json_escape(out, 4, "a\xe2\x82\xac", 4);
    cr_expect_str_eq(out, "a");
}

Test(log_json, lines_carry_ts_level_thread_msg_fields_and_request_id)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    cr_log_set_thread_name("t3");
    log_warn("upstream \"%s\" failed", "viacep");
    cr_log_set_request_id("rid-42");
    cr_log_field f[] = {
        CR_LOG_FIELD_STR("target", "/a\"b\n\xff", 6),
        CR_LOG_FIELD_INT("status", 404),
        {.key = "duration_ms", .type = CR_LOG_MS, .ms = 1.5},
        CR_LOG_FIELD_STR("skipped", NULL, 0),
    };
    cr_log_kv(CORING_LOG_INFO, f, 4, "GET %s", "/x");
    cr_log_set_request_id(NULL);
    char *text = finish(&r);
    char *second = strchr(text, '\n');
    cr_assert(second, "%s", text);
    *second++ = '\0';
    cr_assert(strncmp(text, "{\"ts\":\"", 7) == 0, "%s", text);
    /* 2026-12-01T23:44:45.425Z */
    cr_assert_eq(strlen(text + 7) > 24 && text[7 + 4] == '-' && text[7 + 10] == 'T' &&
                     text[7 + 19] == '.' && text[7 + 23] == 'Z' && text[7 + 24] == '"',
                 1, "%s", text);
    cr_assert(strstr(text, "\",\"level\":\"warn\",\"thread\":\"t3\","
                           "\"msg\":\"upstream \\\"viacep\\\" failed\"}"),
              "%s", text);
    cr_assert(strstr(second, "\"level\":\"info\",\"thread\":\"t3\",\"msg\":\"GET /x\","
                             "\"target\":\"/a\\\"b\\u000a\\ufffd\",\"status\":404,"
                             "\"duration_ms\":1.500,\"request_id\":\"rid-42\"}\n"),
              "%s", second);
    cr_assert_null(strstr(second, "skipped"));
    free(text);
}

Test(log_json, text_lines_show_fields_after_the_message)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    cr_log_set_request_id("r1");
    cr_log_field f[] = {
        {.key = "status", .type = CR_LOG_INT, .num = 200, .json_only = true},
        CR_LOG_FIELD_STR("user_agent", "a \"b\"\x01", 6),
        CR_LOG_FIELD_INT("bytes", 12),
    };
    cr_log_kv(CORING_LOG_INFO, f, 3, "GET / %d", 200);
    char *text = finish(&r);
    cr_assert(strstr(text, "] GET / 200 user_agent=\"a \\x22b\\x22\\x01\" bytes=12 request_id=\"r1\"\n"),
              "%s", text);
    free(text);
}

Test(log_json, lines_carry_the_trace_context_after_the_request_id)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    cr_trace_context t = {.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
                          .span_id = "00f067aa0ba902b7", .flags = CR_TRACE_SAMPLED};
    cr_log_set_request_id("r7");
    cr_log_set_trace(&t);
    cr_assert_eq(cr_log_trace(), &t);
    log_info("traced");
    cr_log_set_request_id("r8"); /* a new request id clears the trace */
    cr_assert_null(cr_log_trace());
    log_info("untraced");
    cr_log_set_request_id(NULL);
    char *text = finish(&r);
    cr_assert(strstr(text, "\"msg\":\"traced\",\"request_id\":\"r7\","
                           "\"trace_id\":\"4bf92f3577b34da6a3ce929d0e0e4736\","
                           "\"span_id\":\"00f067aa0ba902b7\"}\n"),
              "%s", text);
    cr_assert(strstr(text, "\"msg\":\"untraced\",\"request_id\":\"r8\"}\n"), "%s", text);
    free(text);
}

Test(log_json, a_long_line_is_cut_and_stays_one_json_object)
{
    stderr_to_pipe(0);
    reader r = {0};
    pthread_create(&r.thread, NULL, read_main, &r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    char big[3000];
    memset(big, '"', sizeof(big));
    cr_log_field f[] = {CR_LOG_FIELD_STR("target", big, sizeof(big)), CR_LOG_FIELD_INT("status", 1)};
    cr_log_kv(CORING_LOG_INFO, f, 2, "%.*s", 2000, big);
    char *text = finish(&r);
    size_t len = strlen(text);
    cr_assert(len > 100 && len <= 2048, "%zu", len);
    cr_assert_eq(text[len - 1], '\n');
    cr_assert_eq(text[len - 2], '}', "%s", text);
    cr_assert(strstr(text, "\"status\":1,\"truncated\":[\"msg\",\"target\"]}"), "%s", text);
    free(text);
}

/* --- lines over their size keep what identifies a request (issue 39) ----- */

/* From now on stderr goes into a pipe that @r's thread reads (finish()). */
static void capture_stderr(reader *r)
{
    stderr_to_pipe(0);
    *r = (reader){0};
    pthread_create(&r->thread, NULL, read_main, r);
}

/* The one line in @text, parsed: *@root is its object. Fails the test when
 * it is not exactly one valid JSON object of at most 2 KiB. */
static cr_json_parser *parse_line(const char *text, cr_json_value *root)
{
    size_t len = strlen(text);
    cr_assert(len > 0 && len <= 2048 && text[len - 1] == '\n', "%zu bytes: %s", len, text);
    cr_assert_eq(strchr(text, '\n'), text + len - 1, "one line: %s", text);
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_eq(cr_json_parse(p, text, len - 1, root), CR_JSON_OK, "%s", text);
    cr_assert_eq(cr_json_type_of(*root), CR_JSON_OBJECT, "%s", text);
    return p;
}

/* @root's string member @key (NULL when absent); its length in *@len. */
static const char *member_str(cr_json_value root, const char *key, size_t *len)
{
    cr_json_value v;
    const char *s = NULL;
    *len = 0;
    if (cr_json_object_get(root, key, strlen(key), &v) != CR_JSON_OK ||
        cr_json_get_string(v, &s, len) != CR_JSON_OK)
        return NULL;
    return s;
}

/* Whether @root's string member @key is exactly @want. */
static bool member_is(cr_json_value root, const char *key, const char *want)
{
    size_t len;
    const char *s = member_str(root, key, &len);
    return s && len == strlen(want) && memcmp(s, want, len) == 0;
}

/* The `truncated` member's names joined with ',' into @out ("" when absent). */
static const char *truncated_names(cr_json_value root, char *out, size_t size)
{
    cr_json_value arr, v;
    out[0] = '\0';
    if (cr_json_object_get(root, "truncated", 9, &arr) != CR_JSON_OK)
        return out;
    for (long i = 0; i < cr_json_array_size(arr); i++) {
        const char *s;
        size_t len;
        cr_assert_eq(cr_json_array_at(arr, (size_t)i, &v), CR_JSON_OK);
        cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
        size_t o = strlen(out);
        snprintf(out + o, size - o, "%s%.*s", i ? "," : "", (int)len, s);
    }
    return out;
}

/* What an access line says of its request. */
typedef struct access_line {
    const char *method;
    size_t method_len;
    const char *target;
    size_t target_len;
    int status;
    double ms;
    const char *client;
    int port;
    long long bytes;
    const char *ua;
    size_t ua_len;
} access_line;

/* The access line's fields in the order and with the flags http/ gives
 * them (its request id and the rest follow), into @f[0..ACCESS_FIELDS). */
enum { ACCESS_FIELDS = 9 };
static void access_fields(cr_log_field *f, const access_line *a)
{
    cr_log_field fields[ACCESS_FIELDS] = {
        {.key = "method",
         .type = CR_LOG_STR,
         .str = a->method,
         .len = a->method_len,
         .json_only = true},
        {.key = "target",
         .type = CR_LOG_STR,
         .str = a->target,
         .len = a->target_len,
         .json_only = true},
        {.key = "status", .type = CR_LOG_INT, .num = a->status, .json_only = true},
        {.key = "duration_ms", .type = CR_LOG_MS, .ms = a->ms, .json_only = true},
        CR_LOG_FIELD_STR("client", a->client, strlen(a->client)),
        CR_LOG_FIELD_INT("client_port", a->port),
        CR_LOG_FIELD_STR("protocol", "HTTP/1.1", 8),
        CR_LOG_FIELD_INT("bytes", a->bytes),
        CR_LOG_FIELD_STR("user_agent", a->ua, a->ua_len),
    };
    memcpy(f, fields, sizeof(fields));
}

/* The access line's fields as http/ passes them, with a User-Agent of 1,772
 * bytes: it fitted whole with room for nothing after it, and the line lost
 * its request id (the fields were left out whole, in order). */
Test(log_json, a_long_user_agent_is_cut_and_the_request_id_kept)
{
    reader r;
    capture_stderr(&r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    cr_log_set_thread_name("t0");
    enum { UA = 1772 };
    char ua[UA];
    memset(ua, 'u', sizeof(ua));
    access_line a = {"GET", 3, "/?long-ua", 9, 200, 0.012, "127.0.0.1", 54321, 172, ua, sizeof(ua)};
    cr_log_field f[ACCESS_FIELDS + 1];
    access_fields(f, &a);
    f[ACCESS_FIELDS] = CR_LOG_FIELD_STR("request_id", "trace-1", 7);
    cr_log_kv(CORING_LOG_INFO, f, cr_countof(f), "GET /?long-ua 200 0.012 ms");
    char *text = finish(&r);
    cr_json_value root;
    cr_json_parser *p = parse_line(text, &root);
    cr_expect(member_is(root, "request_id", "trace-1"), "%s", text);
    cr_expect(member_is(root, "method", "GET"), "%s", text);
    cr_expect(member_is(root, "client", "127.0.0.1"), "%s", text);
    cr_expect(member_is(root, "msg", "GET /?long-ua 200 0.012 ms"), "%s", text);
    cr_expect(strstr(text, "\"status\":200,"), "%s", text);
    size_t ua_len;
    const char *shown = member_str(root, "user_agent", &ua_len);
    cr_expect(shown && ua_len >= 1000 && ua_len < UA && memcmp(shown, ua, ua_len) == 0,
              "user_agent cut to a prefix: %zu bytes", ua_len);
    char names[200];
    cr_expect_str_eq(truncated_names(root, names, sizeof(names)), "user_agent");
    cr_json_parser_destroy(p);
    free(text);
}

/* The worst access line a client can cause: a 2,000-byte message, a method
 * of 32 bytes, a target, a User-Agent and an invalid X-Request-Id of 8 KiB
 * each whose bytes all need escapes, and a request id of 128 quotes (256
 * bytes escaped). Everything that identifies the request is there whole;
 * the long values share what is left, none under 64 bytes. */
Test(log_json, the_worst_line_keeps_every_identifying_field_whole)
{
    reader r;
    capture_stderr(&r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    enum { BIG = 8192 };
    static char target[BIG], ua[BIG], bad_id[BIG], id[129], msg[2001];
    memset(target, '"', BIG);
    memset(ua, 0x01, BIG);
    memset(bad_id, 0xff, BIG);
    memset(id, '"', 128);
    memset(msg, 'm', 2000);
    const char *method = "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF"; /* 32 bytes */
    cr_log_set_request_id(id);
    access_line a = {method,
                     32,
                     target,
                     BIG,
                     501,
                     123456.789,
                     "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
                     65535,
                     1048576,
                     ua,
                     BIG};
    cr_log_field f[ACCESS_FIELDS + 2];
    access_fields(f, &a);
    f[ACCESS_FIELDS] = (cr_log_field){
        .key = "trace_id", .type = CR_LOG_STR, .str = target, .len = 100, .identifying = true};
    f[ACCESS_FIELDS + 1] = CR_LOG_FIELD_STR("invalid_request_id", bad_id, BIG);
    cr_log_kv(CORING_LOG_INFO, f, cr_countof(f), "%s", msg);
    cr_log_set_request_id(NULL);
    char *text = finish(&r);
    cr_json_value root;
    cr_json_parser *p = parse_line(text, &root);
    fprintf(stdout, "%zu bytes: %s", strlen(text), text);
    size_t len;
    const char *s = member_str(root, "request_id", &len);
    cr_expect(s && len == 128 && memcmp(s, id, 128) == 0, "request_id whole: %s", text);
    s = member_str(root, "trace_id", &len);
    cr_expect(s && len == 100 && memcmp(s, target, 100) == 0, "identifying field whole: %s", text);
    cr_expect(member_is(root, "method", method), "%s", text);
    cr_expect(member_is(root, "client", "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255"), "%s",
              text);
    cr_expect(member_is(root, "protocol", "HTTP/1.1"), "%s", text);
    cr_expect(strstr(text, "\"status\":501,\"duration_ms\":123456.789,"), "%s", text);
    cr_expect(strstr(text, "\"client_port\":65535,"), "%s", text);
    cr_expect(strstr(text, "\"bytes\":1048576,"), "%s", text);
    /* Each long value is cut to a prefix of itself, of at least 64 bytes
     * as written (one escape is 2 to 6 bytes). */
    s = member_str(root, "target", &len);
    cr_expect(s && len >= 32 && len < BIG && memcmp(s, target, len) == 0, "target: %zu", len);
    s = member_str(root, "user_agent", &len);
    cr_expect(s && len >= 10 && len < BIG && memcmp(s, ua, len) == 0, "user_agent: %zu", len);
    s = member_str(root, "invalid_request_id", &len);
    cr_expect(s && len >= 3 * 10 && len % 3 == 0 && memcmp(s, "\xef\xbf\xbd", 3) == 0,
              "invalid_request_id: %zu bytes of U+FFFD", len);
    s = member_str(root, "msg", &len);
    cr_expect(s && len >= 64 && len < 2000, "msg: %zu", len);
    char names[200];
    cr_expect_str_eq(truncated_names(root, names, sizeof(names)),
                     "msg,target,user_agent,invalid_request_id");
    cr_json_parser_destroy(p);
    free(text);
}

/* TEXT lines (1 KiB) too: a long message and User-Agent give way to the
 * request id, and the line says so. */
Test(log, a_long_text_line_keeps_the_request_id_and_names_what_was_cut)
{
    reader r;
    capture_stderr(&r);
    static char ua[2000], msg[1501];
    memset(ua, 'u', sizeof(ua));
    memset(msg, 'm', 1500);
    cr_log_set_request_id("trace-1");
    cr_log_field f[] = {
        {.key = "status", .type = CR_LOG_INT, .num = 200, .json_only = true},
        CR_LOG_FIELD_STR("client", "127.0.0.1", 9),
        CR_LOG_FIELD_STR("user_agent", ua, sizeof(ua)),
    };
    cr_log_kv(CORING_LOG_INFO, f, cr_countof(f), "%s", msg);
    cr_log_set_request_id(NULL);
    char *text = finish(&r);
    size_t len = strlen(text);
    cr_expect(len <= 1024 && strchr(text, '\n') == text + len - 1, "%zu bytes: %s", len, text);
    cr_expect(strstr(text, "] mmmmmmmm"), "%s", text);
    cr_expect(strstr(text, "m client=\"127.0.0.1\" user_agent=\"uuuuuuuu"), "%s", text);
    cr_expect(strstr(text, "uuu\" request_id=\"trace-1\" truncated=\"msg,user_agent\"\n"), "%s",
              text);
    cr_expect_null(strstr(text, "status="), "json_only fields stay out of TEXT lines");
    free(text);
}

/* A line that fits is written whole, with no mark. */
Test(log_json, a_line_that_fits_is_not_marked)
{
    reader r;
    capture_stderr(&r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    static char ua[1500];
    memset(ua, 'u', sizeof(ua));
    cr_log_field f[] = {CR_LOG_FIELD_STR("user_agent", ua, sizeof(ua))};
    cr_log_kv(CORING_LOG_INFO, f, 1, "GET / 200");
    char *text = finish(&r);
    cr_json_value root;
    cr_json_parser *p = parse_line(text, &root);
    size_t len;
    cr_expect(member_str(root, "user_agent", &len) && len == sizeof(ua), "%s", text);
    cr_expect_null(strstr(text, "truncated"), "%s", text);
    cr_json_parser_destroy(p);
    free(text);
}

/* A worker logs from its coroutines, whose stacks the pool passes from
 * connection to connection: the line is formatted in per-thread memory,
 * not in arrays on the stack (7 KiB of them made every stack that logged
 * an access line keep those pages). */
static void log_worst_access_line(void *arg)
{
    (void)arg;
    enum { BIG = 4096 };
    static char ua[BIG];
    memset(ua, '"', sizeof(ua));
    access_line a = {"GET", 3, ua, BIG, 200, 0.012, "127.0.0.1", 54321, 172, ua, BIG};
    cr_log_field f[ACCESS_FIELDS + 1];
    access_fields(f, &a);
    f[ACCESS_FIELDS] = CR_LOG_FIELD_STR("request_id", "trace-1", 7);
    cr_log_kv(CORING_LOG_INFO, f, cr_countof(f), "GET %.*s 200 0.012 ms", 1000, ua);
}

Test(log_json, a_line_logged_on_a_coroutine_takes_little_of_its_stack)
{
    reader r;
    capture_stderr(&r);
    cr_log_set_format(CR_LOG_FORMAT_JSON);
    log_worst_access_line(NULL); /* the logger thread and this thread's buffer made */
    setenv("CORING_STACK_REPORT", "1", 1); /* paint the pool's stacks */
    cr_stack_pool *pool = NULL;
    cr_assert_eq(cr_stack_pool_create(&pool, 0, 1), 0);
    cr_coro *co = NULL;
    cr_assert_eq(cr_coro_create(&co, pool, log_worst_access_line, NULL), 0);
    cr_coro_resume(co);
    cr_coro_destroy(co);
    size_t deepest = cr_stack_pool_deepest(pool);
    cr_stack_pool_destroy(pool);
    char *text = finish(&r);
    cr_expect(strstr(text, "\"request_id\":\"trace-1\""), "%s", text);
    printf("deepest stack use logging an access line: %zu bytes\n", deepest);
    /* About 4 KiB is libc's (vsnprintf, gmtime_r); with the line, the
     * note and the message on the stack it was 10 KiB. AddressSanitizer
     * puts redzones around every stack object: under it only the line is
     * checked, the bound is a real build's. */
#if !defined(__SANITIZE_ADDRESS__)
    cr_expect_lt(deepest, 6144, "logging one line took %zu bytes of a coroutine's stack", deepest);
#endif
    free(text);
}
