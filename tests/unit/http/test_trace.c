/*
 * W3C Trace Context (http/src/trace.c): traceparent parsed as Level 1
 * says (version 00 exactly, a later version read as 00, ff refused, ids
 * lowercase hex and not all zero), tracestate kept within the spec's
 * limits, new ids never zero, and a request's context begun from its
 * fields or started afresh.
 */
#include "coring/http/trace.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define PARENT "00f067aa0ba902b7"
#define VALID "00-" TRACE "-" PARENT "-01"

static int parse(const char *s, http_traceparent *p)
{
    return http_traceparent_parse(s, strlen(s), p);
}

/* @s parses, with TRACE and PARENT, @version and @flags. */
static void expect_parsed(const char *s, unsigned version, unsigned flags)
{
    http_traceparent p;
    cr_assert_eq(parse(s, &p), 0, "%s", s);
    cr_expect_eq(p.version, version, "%s", s);
    cr_expect_str_eq(p.trace_id, TRACE);
    cr_expect_str_eq(p.parent_id, PARENT);
    cr_expect_eq(p.flags, flags, "%s", s);
}

Test(traceparent, a_valid_one_gives_its_fields)
{
    expect_parsed(VALID, 0, 1);
    expect_parsed("00-" TRACE "-" PARENT "-00", 0, 0);
}

Test(traceparent, each_invalid_form_is_refused)
{
    static const char *const bad[] = {
        "",
        "00-" TRACE "-" PARENT "-0",                   /* short */
        "00-" TRACE "-" PARENT "-01-",                 /* version 00, longer */
        "00-" TRACE "-" PARENT "-010",
        "00-" TRACE "0-" PARENT "-01",                 /* a field too long */
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" PARENT "-01", /* uppercase */
        "00-" TRACE "-00F067AA0BA902B7-01",
        "00-" TRACE "-" PARENT "-0A",
        "0A-" TRACE "-" PARENT "-01",
        "00-00000000000000000000000000000000-" PARENT "-01", /* all-zero ids */
        "00-" TRACE "-0000000000000000-01",
        "ff-" TRACE "-" PARENT "-01",                  /* version ff */
        "00_" TRACE "-" PARENT "-01",                  /* separators */
        "00-" TRACE "_" PARENT "-01",
        "00-" TRACE "-" PARENT "_01",
        "0g-" TRACE "-" PARENT "-01",                  /* not hex */
        "00-4bf92f3577b34da6a3ce929d0e0e473g-" PARENT "-01",
        "00-" TRACE "-" PARENT "-0x",
        " 00-" TRACE "-" PARENT "-01",
        "cc-" TRACE "-" PARENT "-01x",                 /* future: more without '-' */
        "cc-" TRACE "-" PARENT,                        /* future: shorter than 00 */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        http_traceparent p;
        cr_expect_eq(parse(bad[i], &p), -EINVAL, "%s", bad[i]);
    }
}

Test(traceparent, a_future_version_is_read_as_version_00)
{
    /* Section 3.2.4.1: the fields of 00, then more after a '-'. */
    expect_parsed("cc-" TRACE "-" PARENT "-01-what-the-future-holds", 0xcc, 1);
    expect_parsed("01-" TRACE "-" PARENT "-00", 1, 0);
}

static bool state_valid(const char *s)
{
    return http_tracestate_valid(s, strlen(s));
}

Test(tracestate, members_within_the_grammar_are_kept)
{
    cr_expect(state_valid("rojo=00f067aa0ba902b7"));
    cr_expect(state_valid("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"));
    cr_expect(state_valid("congo=t61rcWkgMzE , \trojo=00f067aa0ba902b7"));
    cr_expect(state_valid("fw529a3039@dt=a b,,x*/_-9=1")); /* tenant@system, empty member */
    cr_expect(state_valid(""));
}

Test(tracestate, members_outside_the_grammar_are_refused)
{
    cr_expect_not(state_valid("Rojo=1"));        /* uppercase key */
    cr_expect_not(state_valid("9rojo=1"));       /* simple key starts with a digit */
    cr_expect_not(state_valid("rojo"));          /* no '=' */
    cr_expect_not(state_valid("rojo="));         /* empty value */
    cr_expect_not(state_valid("rojo=a\x01b"));   /* a control byte */
    cr_expect_not(state_valid("rojo=a=b"));      /* '=' in a value */
    cr_expect_not(state_valid("rojo=\x7f"));
    cr_expect_not(state_valid("a@=1"));          /* empty system id */
    cr_expect_not(state_valid("a@Sys=1"));
    cr_expect_not(state_valid("a@abcdefghijklmno=1")); /* system id over 14 */
    cr_expect_not(state_valid("rojo=1,rojo=2"));  /* duplicate key */
}

Test(tracestate, limits_of_members_and_length)
{
    char s[2048];
    size_t n = 0;
    for (int i = 0; i < 32; i++)
        n += (size_t)snprintf(s + n, sizeof(s) - n, "%sk%d=v", i ? "," : "", i);
    cr_expect(http_tracestate_valid(s, n), "32 members: %s", s);
    n += (size_t)snprintf(s + n, sizeof(s) - n, ",k32=v");
    cr_expect_not(http_tracestate_valid(s, n), "33 members");

    /* Length: 512 bytes pass, 513 do not. A key of 256, a value of 256. */
    memset(s, 'a', sizeof(s));
    s[256] = '=';
    cr_expect(http_tracestate_valid(s, 256 + 1 + 255)); /* 512 bytes */
    cr_expect_not(http_tracestate_valid(s, 256 + 1 + 256)); /* 513 */
    s[257] = '=';
    cr_expect_not(http_tracestate_valid(s, 257 + 1 + 10)); /* key of 257 */
    memset(s, 'a', sizeof(s));
    s[1] = '=';
    cr_expect(http_tracestate_valid(s, 2 + 256));   /* value of 256 */
    cr_expect_not(http_tracestate_valid(s, 2 + 257)); /* value of 257 */
}

Test(trace_ids, new_ids_are_hex_and_differ)
{
    char a[33], b[33], s1[17], s2[17];
    http_trace_new_trace_id(a);
    http_trace_new_trace_id(b);
    http_trace_new_span_id(s1);
    http_trace_new_span_id(s2);
    cr_expect_eq(strlen(a), 32);
    cr_expect_eq(strlen(s1), 16);
    cr_expect_str_neq(a, b);
    cr_expect_str_neq(s1, s2);
    char tp[HTTP_TRACEPARENT_LEN + 1];
    cr_assert_eq(http_trace_format(tp, a, s1, 1), HTTP_TRACEPARENT_LEN);
    http_traceparent p;
    cr_expect_eq(http_traceparent_parse(tp, strlen(tp), &p), 0, "%s", tp);
    cr_expect_str_eq(p.trace_id, a);
    cr_expect_str_eq(p.parent_id, s1);
}

/* The trace context of a request with the @n header fields @h, into @t. */
static void begin(http_trace *t, http_header *h, size_t n)
{
    http_request req = {.headers = h, .num_headers = n};
    http_trace_begin(t, &req);
}

#define FIELD(n, v) {.name = {n, sizeof(n) - 1}, .value = {v, sizeof(v) - 1}}

Test(trace_begin, a_valid_traceparent_continues_its_trace_with_a_new_span)
{
    http_header h[] = {FIELD("Traceparent", VALID), FIELD("tracestate", "rojo=1"),
                       FIELD("TraceState", "congo=2")};
    http_trace t;
    begin(&t, h, 3);
    cr_expect_not(t.invalid);
    cr_expect_str_eq(t.ctx.trace_id, TRACE);
    cr_expect_str_neq(t.ctx.span_id, PARENT);
    cr_expect_eq(t.ctx.flags, 1);
    cr_assert_not_null(t.ctx.state);
    cr_expect_eq(t.ctx.state_len, 14);
    cr_expect(memcmp(t.ctx.state, "rojo=1,congo=2", 14) == 0);
    cr_expect_eq(strncmp(t.response, "00-" TRACE "-", 36), 0, "%s", t.response);
    cr_expect_str_eq(t.response + 36 + 16, "-01");
    cr_expect_eq(memcmp(t.response + 36, t.ctx.span_id, 16), 0);
}

Test(trace_begin, an_invalid_or_absent_traceparent_starts_a_trace_without_its_state)
{
    http_header bad[] = {FIELD("traceparent", "00-" TRACE "-0000000000000000-01"),
                         FIELD("tracestate", "rojo=1")};
    http_trace t;
    begin(&t, bad, 2);
    cr_expect(t.invalid);
    cr_expect_str_neq(t.ctx.trace_id, TRACE);
    cr_expect_eq(strlen(t.ctx.trace_id), 32);
    cr_expect_eq(t.ctx.flags, 0);
    cr_expect_null(t.ctx.state);

    http_header two[] = {FIELD("traceparent", VALID), FIELD("traceparent", VALID)};
    begin(&t, two, 2);
    cr_expect(t.invalid, "two traceparent fields");
    cr_expect_str_neq(t.ctx.trace_id, TRACE);

    begin(&t, NULL, 0);
    cr_expect_not(t.invalid);
    cr_expect_eq(strlen(t.ctx.trace_id), 32);
    cr_expect_eq(strlen(t.ctx.span_id), 16);
}

Test(trace_begin, unsampled_flags_and_unknown_bits)
{
    http_header h[] = {FIELD("traceparent", "00-" TRACE "-" PARENT "-fe")};
    http_trace t;
    begin(&t, h, 1);
    cr_expect_eq(t.ctx.flags, 0, "only the sampled bit is kept");
}
