/*
 * Responses (http/src/response.c): a response built in place
 * (http_response_begin ... _end) is byte for byte the one http_respond
 * writes for the same body, whatever the width of its Content-Length; HEAD,
 * 204 and cancel; one answer per request. This file is built twice:
 * against the library (a release build: a second answer is logged and
 * dropped) and, as unit_http_test_response_debug, with response.c compiled
 * in without NDEBUG (a debug build: a second answer aborts).
 */
#include "coring/core/buffer.h"
#include "coring/core/json_writer.h"
#include "coring/http/server.h"
#include "http/src/internal.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static http_thread thread;
static cr_buf out;
static struct http_ctx_internal in;
static http_ctx ctx;

static void setup(void)
{
    http_tl = &thread;
    out = CR_BUF_INIT;
    in = (struct http_ctx_internal){.out = &out, .request_id = "abc", .request_id_len = 3};
    ctx = (http_ctx){.internal = &in};
}

static void teardown(void)
{
    cr_buf_free(&out);
    cr_buf_free(&thread.discard);
}

/* A new request on the same connection (the output buffer kept). */
static void next_request(void)
{
    in = (struct http_ctx_internal){.out = &out, .request_id = "abc", .request_id_len = 3};
}

/* @b's bytes with the Date field's value blanked (the second may turn). */
static char *without_date(const char *p, size_t len)
{
    char *s = malloc(len + 1);
    cr_assert(s);
    memcpy(s, p, len);
    s[len] = '\0';
    for (char *d = strstr(s, "\r\nDate: "); d; d = strstr(d + 1, "\r\nDate: "))
        memset(d + 8, 'x', 29);
    return s;
}

static void expect_same_as_respond(int status, size_t body_len)
{
    char *body = malloc(body_len + 1);
    cr_assert(body);
    for (size_t i = 0; i < body_len; i++)
        body[i] = (char)('a' + i % 26);

    http_respond(&ctx, status, "text/plain", body, body_len);
    size_t first = out.len;
    next_request();
    cr_buf *b = http_response_begin(&ctx, status, "text/plain");
    cr_assert_eq(b, &out);
    for (size_t i = 0; i < body_len; i += 7) /* in pieces, as a writer does */
        cr_buf_append(b, body + i, body_len - i < 7 ? body_len - i : 7);
    http_response_end(&ctx);
    cr_assert_not(out.failed);
    cr_assert(in.responded);
    cr_assert_eq(in.status, status);

    char *want = without_date(out.data, first);
    char *got = without_date(out.data + first, out.len - first);
    cr_expect_str_eq(got, want, "status %d, %zu bytes of body", status, body_len);
    free(want);
    free(got);
    free(body);
}

Test(response, built_in_place_equals_respond, .init = setup, .fini = teardown)
{
    /* 0, 1, 2, 3 (the reserved width), 4, 6 and 7 digits of Content-Length */
    static const size_t lengths[] = {0, 1, 25, 99, 100, 999, 1000, 12345, 250000, 1234567};
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        cr_buf_reset(&out);
        next_request();
        expect_same_as_respond(200, lengths[i]);
        cr_buf_reset(&out);
        next_request();
        expect_same_as_respond(404, lengths[i]);
    }
}

Test(response, the_exact_bytes, .init = setup, .fini = teardown)
{
    in.request_id = NULL;
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(&ctx, 200, "application/json"));
    cr_json_object_begin(&w);
    cr_json_key(&w, "message", 7);
    cr_json_cstring(&w, "Hello, World!");
    cr_json_object_end(&w);
    http_response_end(&ctx);
    char *got = without_date(out.data, out.len);
    cr_expect_str_eq(got, "HTTP/1.1 200 OK\r\nServer: coring\r\nDate: "
                          "xxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\nContent-Type: application/json\r\n"
                          "Content-Length: 27\r\n\r\n{\"message\":\"Hello, World!\"}");
    free(got);
}

Test(response, follows_the_responses_before_it, .init = setup, .fini = teardown)
{
    cr_buf_append_str(&out, "previous response");
    cr_buf *b = http_response_begin(&ctx, 201, "text/plain");
    cr_buf_append_str(b, "0123456789");
    http_response_end(&ctx);
    cr_assert(out.len > 17 && memcmp(out.data, "previous response", 17) == 0);
    cr_assert(memcmp(out.data + 17, "HTTP/1.1 201 Created\r\n", 22) == 0);
    cr_assert(memmem(out.data, out.len, "Content-Length: 10\r\n\r\n0123456789", 32) != NULL);
    cr_assert(memcmp(out.data + out.len - 10, "0123456789", 10) == 0);
}

Test(response, head_measures_the_body_and_drops_it, .init = setup, .fini = teardown)
{
    in.head = true;
    cr_buf *b = http_response_begin(&ctx, 200, "text/plain");
    for (int i = 0; i < 1000; i++)
        cr_buf_append(b, "x", 1);
    http_response_end(&ctx);
    cr_assert(out.len > 26);
    cr_expect(memcmp(out.data + out.len - 26, "\r\nContent-Length: 1000\r\n\r\n", 26) == 0, "%.*s",
              (int)out.len, out.data);
}

Test(response, no_content_has_no_length_and_no_body, .init = setup, .fini = teardown)
{
    cr_buf *b = http_response_begin(&ctx, 204, "text/plain");
    cr_buf_append_str(b, "dropped");
    http_response_end(&ctx);
    cr_expect_null(memmem(out.data, out.len, "Content-", 8));
    cr_expect_null(memmem(out.data, out.len, "dropped", 7));
    cr_expect(memcmp(out.data + out.len - 4, "\r\n\r\n", 4) == 0);
}

Test(response, cancel_takes_it_back, .init = setup, .fini = teardown)
{
    cr_buf_append_str(&out, "before");
    cr_buf *b = http_response_begin(&ctx, 200, "text/plain");
    cr_buf_append_str(b, "half a body");
    http_response_cancel(&ctx);
    cr_expect_eq(out.len, 6);
    cr_expect_not(in.responded);
    http_respond_error(&ctx, 500, "database error");
    cr_expect(memmem(out.data, out.len, "{\"error\":\"database error\"}", 26) != NULL);
    cr_expect_eq(in.status, 500);
}

Test(response, unfinished_is_dropped_for_the_500, .init = setup, .fini = teardown)
{
    cr_buf *b = http_response_begin(&ctx, 200, "text/plain");
    cr_buf_append_str(b, "never ended");
    http_response_drop_unfinished(&in);
    cr_expect_eq(out.len, 0);
    cr_expect_not(in.responded);
}

#ifdef NDEBUG
/* A release build: the second answer is dropped, the first stays. */
static void expect_second_dropped(void (*second)(void))
{
    http_respond(&ctx, 200, "text/plain", "first", 5);
    size_t len = out.len;
    second();
    cr_expect_eq(out.len, len);
    cr_expect_eq(in.status, 200);
    cr_expect(memcmp(out.data + len - 5, "first", 5) == 0);
}
#define SECOND_ANSWER_TEST(name) Test(one_answer, name, .init = setup, .fini = teardown)
#define EXPECT_SECOND(fn) expect_second_dropped(fn)
#else
/* A debug build: the second answer aborts. */
#define SECOND_ANSWER_TEST(name)                                                                   \
    Test(one_answer, name, .init = setup, .fini = teardown, .signal = SIGABRT)
#define EXPECT_SECOND(fn)                                                                          \
    do {                                                                                           \
        http_respond(&ctx, 200, "text/plain", "first", 5);                                         \
        fn();                                                                                      \
        cr_assert_fail("a second answer did not abort");                                           \
    } while (0)
#endif

static void respond_again(void)
{
    http_respond(&ctx, 500, "text/plain", "second", 6);
}

static void error_again(void)
{
    http_respond_error(&ctx, 404, "not found");
}

static void begin_again(void)
{
    /* Release: a buffer that is not the connection's, so a handler that
     * writes on (no NULL check) changes nothing on the wire. */
    cr_buf *b = http_response_begin(&ctx, 200, "text/plain");
    cr_assert_not_null(b);
    cr_expect_neq(b, &out);
    cr_buf_append(b, "second", 6);
    http_response_end(&ctx);
}

static void end_without_begin(void)
{
    http_response_end(&ctx);
}

SECOND_ANSWER_TEST(respond_after_respond)
{
    EXPECT_SECOND(respond_again);
}

SECOND_ANSWER_TEST(error_after_respond)
{
    EXPECT_SECOND(error_again);
}

SECOND_ANSWER_TEST(begin_after_respond)
{
    EXPECT_SECOND(begin_again);
}

SECOND_ANSWER_TEST(end_without_begin)
{
    EXPECT_SECOND(end_without_begin);
}

#ifdef NDEBUG
Test(one_answer, respond_while_building_is_dropped, .init = setup, .fini = teardown)
{
    cr_buf *b = http_response_begin(&ctx, 200, "text/plain");
    cr_buf_append_str(b, "body");
    http_respond_error(&ctx, 500, "second");
    http_response_end(&ctx);
    cr_expect_null(memmem(out.data, out.len, "second", 6));
    cr_expect(memcmp(out.data + out.len - 27, "\r\nContent-Length: 4\r\n\r\nbody", 27) == 0);
}
#else
Test(one_answer, respond_while_building_aborts, .init = setup, .fini = teardown, .signal = SIGABRT)
{
    http_response_begin(&ctx, 200, "text/plain");
    http_respond_error(&ctx, 500, "second");
    cr_assert_fail("a second answer did not abort");
}
#endif
