/*
 * The one error body, {"error":"..."} (http_error_body): the message is
 * one JSON string, escaped per RFC 8259 section 7, and it appends.
 */
#include "coring/core/buffer.h"
#include "coring/http/server.h"

#include <criterion/criterion.h>
#include <string.h>

static void expect_body(const char *message, size_t len, const char *want)
{
    cr_buf b = {0};
    http_error_body(&b, message, len);
    cr_assert_not(b.failed);
    cr_expect_eq(b.len, strlen(want), "%.*s", (int)b.len, b.data);
    cr_expect(b.len == strlen(want) && memcmp(b.data, want, b.len) == 0, "got %.*s, want %s",
              (int)b.len, b.data, want);
    cr_buf_free(&b);
}

Test(error_body, escapes_the_message)
{
    expect_body("user not found", 14, "{\"error\":\"user not found\"}");
    expect_body("", 0, "{\"error\":\"\"}");
    expect_body("say \"hi\"", 8, "{\"error\":\"say \\\"hi\\\"\"}");
    expect_body("a\\b", 3, "{\"error\":\"a\\\\b\"}");
    expect_body("line\nnext\ttab", 13, "{\"error\":\"line\\nnext\\ttab\"}");
    expect_body("nul\0x", 5, "{\"error\":\"nul\\u0000x\"}");
    expect_body("\x01", 1, "{\"error\":\"\\u0001\"}");
    expect_body("até", strlen("até"), "{\"error\":\"até\"}");
}

Test(error_body, appends_to_what_is_there)
{
    cr_buf b = {0};
    cr_buf_append_str(&b, "[");
    http_error_body(&b, "x", 1);
    cr_buf_append_str(&b, "]");
    cr_expect(b.len == 15 && memcmp(b.data, "[{\"error\":\"x\"}]", 15) == 0, "%.*s", (int)b.len,
              b.data);
    cr_buf_free(&b);
}
