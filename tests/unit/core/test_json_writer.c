/*
 * Tests for the streaming JSON writer (coring/core/json_writer.h): every
 * escape of RFC 8259 section 7, UTF-8 pass-through and U+FFFD replacement,
 * comma placement, numbers, misuse, and a round trip through cr_json_parse.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coring/core/json.h"
#include "coring/core/json_writer.h"

static cr_buf out;
static cr_json_writer w;

static void setup(void)
{
    out = CR_BUF_INIT;
    cr_json_writer_init(&w, &out);
}

static void teardown(void)
{
    cr_buf_free(&out);
}

TestSuite(json_writer, .init = setup, .fini = teardown);

/* The output so far equals @want (@want_len bytes). */
static void expect_bytes(const char *want, size_t want_len)
{
    cr_assert_not(out.failed);
    cr_assert_eq(out.len, want_len, "got %zu bytes '%.*s', want '%.*s'", out.len, (int)out.len,
                 out.data, (int)want_len, want);
    cr_assert(memcmp(out.data, want, want_len) == 0, "got '%.*s', want '%.*s'", (int)out.len,
              out.data, (int)want_len, want);
}

static void expect(const char *want)
{
    expect_bytes(want, strlen(want));
}

/* cr_json_escape_string of @len bytes at @s gives @want. */
static void expect_escaped(const char *s, size_t len, const char *want)
{
    cr_buf_reset(&out);
    cr_json_escape_string(&out, s, len);
    expect(want);
}

Test(json_writer, each_control_character)
{
    static const char *const want[0x20] = {
        "\"\\u0000\"", "\"\\u0001\"", "\"\\u0002\"", "\"\\u0003\"", "\"\\u0004\"", "\"\\u0005\"",
        "\"\\u0006\"", "\"\\u0007\"", "\"\\b\"",     "\"\\t\"",     "\"\\n\"",     "\"\\u000b\"",
        "\"\\f\"",     "\"\\r\"",     "\"\\u000e\"", "\"\\u000f\"", "\"\\u0010\"", "\"\\u0011\"",
        "\"\\u0012\"", "\"\\u0013\"", "\"\\u0014\"", "\"\\u0015\"", "\"\\u0016\"", "\"\\u0017\"",
        "\"\\u0018\"", "\"\\u0019\"", "\"\\u001a\"", "\"\\u001b\"", "\"\\u001c\"", "\"\\u001d\"",
        "\"\\u001e\"", "\"\\u001f\"",
    };
    for (int c = 0; c < 0x20; c++) {
        char s = (char)c;
        expect_escaped(&s, 1, want[c]);
    }
}

Test(json_writer, quote_backslash_and_pass_through)
{
    expect_escaped("\"", 1, "\"\\\"\"");
    expect_escaped("\\", 1, "\"\\\\\"");
    expect_escaped("/", 1, "\"/\"");
    expect_escaped("\x7f", 1, "\"\x7f\"");
    expect_escaped("", 0, "\"\"");
    expect_escaped("a\"b\\c\nd", 7, "\"a\\\"b\\\\c\\nd\"");
    /* Escapes at every position around the 8-byte fast path. */
    expect_escaped("abcdefg\"", 8, "\"abcdefg\\\"\"");
    expect_escaped("abcdefgh\"", 9, "\"abcdefgh\\\"\"");
    expect_escaped("\"abcdefghijklmnop", 17, "\"\\\"abcdefghijklmnop\"");
    expect_escaped("abcdefghijklmnop\n", 17, "\"abcdefghijklmnop\\n\"");
    expect_escaped("0123456789abcdef0123456789", 26, "\"0123456789abcdef0123456789\"");
    expect_escaped("a\0b", 3, "\"a\\u0000b\"");
}

Test(json_writer, every_byte_position_in_a_long_string)
{
    /* Each special byte at each offset of a 40-byte string of 'x'. */
    static const struct {
        char c;
        const char *escaped;
    } special[] = {
        {'"', "\\\""}, {'\\', "\\\\"}, {'\n', "\\n"}, {'\x01', "\\u0001"}, {'\x1f', "\\u001f"}};
    for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) {
        for (size_t at = 0; at < 40; at++) {
            char s[40];
            memset(s, 'x', sizeof(s));
            s[at] = special[k].c;
            char want[64];
            int n = snprintf(want, sizeof(want), "\"%.*s%s%.*s\"", (int)at, s, special[k].escaped,
                             (int)(39 - at), s + at + 1);
            cr_assert_lt((size_t)n, sizeof(want));
            expect_escaped(s, sizeof(s), want);
        }
    }
}

Test(json_writer, utf8_passes_through)
{
    static const char *const ok[] = {
        "\xc2\x80",         /* U+0080 */
        "\xdf\xbf",         /* U+07FF */
        "\xe0\xa0\x80",     /* U+0800 */
        "\xe2\x82\xac",     /* euro sign */
        "\xed\x9f\xbf",     /* U+D7FF */
        "\xee\x80\x80",     /* U+E000 */
        "\xef\xbf\xbd",     /* U+FFFD */
        "\xef\xbf\xbf",     /* U+FFFF */
        "\xf0\x90\x80\x80", /* U+10000 */
        "\xf0\x9f\x98\x80", /* emoji */
        "\xf4\x8f\xbf\xbf", /* U+10FFFF */
        "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e plain ascii tail",
    };
    for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++) {
        char want[128];
        snprintf(want, sizeof(want), "\"%s\"", ok[k]);
        expect_escaped(ok[k], strlen(ok[k]), want);
    }
}

#define FFFD "\xef\xbf\xbd"

Test(json_writer, invalid_utf8_becomes_replacement_character)
{
    static const struct {
        const char *in;
        const char *want;
    } cases[] = {
        {"\x80", "\"" FFFD "\""}, /* lone continuation byte */
        {"a\xbfz", "\"a" FFFD "z\""},
        {"\xc0\xaf", "\"" FFFD FFFD "\""},                   /* overlong '/' */
        {"\xc1\xbf", "\"" FFFD FFFD "\""},                   /* overlong, C1 lead */
        {"\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\""},          /* overlong, 3 bytes */
        {"\xe0\x9f\xbf", "\"" FFFD FFFD FFFD "\""},          /* overlong U+07FF */
        {"\xf0\x80\x80\xaf", "\"" FFFD FFFD FFFD FFFD "\""}, /* overlong, 4 bytes */
        {"\xf0\x8f\xbf\xbf", "\"" FFFD FFFD FFFD FFFD "\""}, /* overlong U+FFFF */
        {"\xed\xa0\x80", "\"" FFFD FFFD FFFD "\""},          /* surrogate U+D800 */
        {"\xed\xbf\xbf", "\"" FFFD FFFD FFFD "\""},          /* surrogate U+DFFF */
        {"\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""}, /* U+110000 */
        {"\xf5\x80\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""}, /* lead byte F5 */
        {"\xff", "\"" FFFD "\""},
        {"\xfe", "\"" FFFD "\""},
        {"\xc3", "\"" FFFD "\""},                     /* truncated 2-byte */
        {"\xe2\x82", "\"" FFFD FFFD "\""},            /* truncated 3-byte */
        {"\xf0\x9f\x98", "\"" FFFD FFFD FFFD "\""},   /* truncated 4-byte */
        {"\xf0\x9f\x98x", "\"" FFFD FFFD FFFD "x\""}, /* cut short mid-string */
        {"\xc3x", "\"" FFFD "x\""},
        {"\xc3\xa9\x80\xc3\xa9", "\"\xc3\xa9" FFFD "\xc3\xa9\""}, /* valid around invalid */
        {"\xe2\x82\"", "\"" FFFD FFFD "\\\"\""},                  /* then an escape */
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
        expect_escaped(cases[k].in, strlen(cases[k].in), cases[k].want);
}

Test(json_writer, truncated_by_length)
{
    /* The bytes after @len are a valid continuation: they must not count. */
    expect_escaped("\xf0\x9f\x98\x80", 3, "\"" FFFD FFFD FFFD "\"");
    expect_escaped("\xe2\x82\xac", 2, "\"" FFFD FFFD "\"");
    expect_escaped("\xc3\xa9", 1, "\"" FFFD "\"");
    expect_escaped("abcdefg\xf0\x9f\x98\x80", 10, "\"abcdefg" FFFD FFFD FFFD "\"");
}

Test(json_writer, every_byte_value_yields_valid_json)
{
    /* Each single byte, and each pair, round-trips through the parser. */
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_not_null(p);
    for (int a = 0; a < 256; a++) {
        for (int b = 0; b < 256; b++) {
            char s[2] = {(char)a, (char)b};
            cr_buf_reset(&out);
            cr_json_escape_string(&out, s, 2);
            cr_json_value v;
            cr_assert_eq(cr_json_parse(p, out.data, out.len, &v), CR_JSON_OK, "bytes %02x %02x", a,
                         b);
        }
    }
    cr_json_parser_destroy(p);
}

Test(json_writer, empty_containers)
{
    cr_json_object_begin(&w);
    cr_json_object_end(&w);
    expect("{}");
    cr_buf_reset(&out);
    cr_json_writer_init(&w, &out);
    cr_json_array_begin(&w);
    cr_json_array_end(&w);
    expect("[]");
}

Test(json_writer, nesting_and_commas)
{
    cr_json_object_begin(&w);
    cr_json_key(&w, "a", 1);
    cr_json_int64(&w, 1);
    cr_json_key(&w, "b", 1);
    cr_json_array_begin(&w);
    cr_json_int64(&w, 1);
    cr_json_array_begin(&w);
    cr_json_array_end(&w);
    cr_json_object_begin(&w);
    cr_json_object_end(&w);
    cr_json_object_begin(&w);
    cr_json_key(&w, "c", 1);
    cr_json_null(&w);
    cr_json_key(&w, "d", 1);
    cr_json_array_begin(&w);
    cr_json_bool(&w, true);
    cr_json_bool(&w, false);
    cr_json_array_end(&w);
    cr_json_object_end(&w);
    cr_json_string(&w, "s", 1);
    cr_json_array_end(&w);
    cr_json_key(&w, "e", 1);
    cr_json_object_begin(&w);
    cr_json_object_end(&w);
    cr_json_key(&w, "k\"", 2);
    cr_json_cstring(&w, "v");
    cr_json_object_end(&w);
    expect("{\"a\":1,\"b\":[1,[],{},{\"c\":null,\"d\":[true,false]},\"s\"],\"e\":{},"
           "\"k\\\"\":\"v\"}");
    cr_assert_eq(w.depth, 0);
}

Test(json_writer, cstring_null)
{
    cr_json_array_begin(&w);
    cr_json_cstring(&w, NULL);
    cr_json_cstring(&w, "");
    cr_json_array_end(&w);
    expect("[null,\"\"]");
}

Test(json_writer, integers)
{
    cr_json_array_begin(&w);
    cr_json_uint64(&w, 0);
    cr_json_int64(&w, 0);
    cr_json_uint64(&w, UINT64_MAX);
    cr_json_int64(&w, INT64_MAX);
    cr_json_int64(&w, INT64_MIN);
    cr_json_int64(&w, -1);
    cr_json_uint64(&w, 10);
    cr_json_array_end(&w);
    expect("[0,0,18446744073709551615,9223372036854775807,-9223372036854775808,-1,10]");
}

Test(json_writer, doubles)
{
    cr_json_array_begin(&w);
    cr_json_double(&w, 0.0);
    cr_json_double(&w, 1.5);
    cr_json_double(&w, -0.25);
    cr_json_double(&w, 0.1);
    cr_json_double(&w, 1e300);
    cr_json_double(&w, -1.5e-300);
    cr_json_double(&w, 123456789.0);
    cr_json_double(&w, 3.14159265358979);
    cr_json_double(&w, NAN);
    cr_json_double(&w, INFINITY);
    cr_json_double(&w, -INFINITY);
    cr_json_double(&w, 2.0);
    cr_json_array_end(&w);
    expect("[0,1.5,-0.25,0.1,1e+300,-1.5e-300,123456789,3.14159265,null,null,null,2]");

    /* Every one of them is JSON the parser reads back. */
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_not_null(p);
    cr_json_value root, v;
    cr_assert_eq(cr_json_parse(p, out.data, out.len, &root), CR_JSON_OK);
    double d;
    cr_assert_eq(cr_json_array_at(root, 4, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_double(v, &d), CR_JSON_OK);
    cr_assert_eq(d, 1e300);
    cr_json_parser_destroy(p);
}

Test(json_writer, float32_round_trips)
{
    static const float values[] = {0.1f,  1.0f / 3.0f, 3.4028235e38f, 1.17549435e-38f,
                                   -2.5f, 16777217.0f};
    for (size_t k = 0; k < sizeof(values) / sizeof(values[0]); k++) {
        cr_buf_reset(&out);
        cr_json_writer_init(&w, &out);
        cr_json_double(&w, values[k]);
        char tmp[64];
        memcpy(tmp, out.data, out.len);
        tmp[out.len] = '\0';
        cr_assert_eq(strtof(tmp, NULL), values[k], "%s", tmp);
    }
}

Test(json_writer, depth_overflow_sets_failed)
{
    for (int k = 0; k < CR_JSON_WRITER_MAX_DEPTH; k++)
        cr_json_array_begin(&w);
    cr_assert_not(out.failed);
    cr_assert_eq(w.depth, CR_JSON_WRITER_MAX_DEPTH);
    cr_json_array_begin(&w);
    cr_assert(out.failed);
    cr_assert_eq(w.depth, CR_JSON_WRITER_MAX_DEPTH);
    for (int k = 0; k < CR_JSON_WRITER_MAX_DEPTH + 5; k++)
        cr_json_array_end(&w); /* stays in bounds */
    cr_assert_eq(w.depth, 0);
}

Test(json_writer, max_depth_is_usable)
{
    for (int k = 0; k < CR_JSON_WRITER_MAX_DEPTH; k++) {
        cr_json_object_begin(&w);
        cr_json_key(&w, "k", 1);
    }
    cr_json_int64(&w, 1);
    for (int k = 0; k < CR_JSON_WRITER_MAX_DEPTH; k++)
        cr_json_object_end(&w);
    cr_assert_not(out.failed);
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_not_null(p);
    cr_json_value root;
    cr_assert_eq(cr_json_parse(p, out.data, out.len, &root), CR_JSON_OK);
    cr_json_parser_destroy(p);
}

Test(json_writer, misuse_sets_failed)
{
    cr_json_array_end(&w);
    cr_assert(out.failed, "an end without a begin");

    cr_buf_reset(&out);
    cr_json_writer_init(&w, &out);
    cr_json_object_begin(&w);
    cr_json_key(&w, "a", 1);
    cr_json_object_end(&w);
    cr_assert(out.failed, "a key without a value");

    cr_buf_reset(&out);
    cr_json_writer_init(&w, &out);
    cr_json_object_begin(&w);
    cr_json_key(&w, "a", 1);
    cr_json_key(&w, "b", 1);
    cr_assert(out.failed, "two keys in a row");
}

Test(json_writer, appends_to_existing_buffer)
{
    cr_buf_append_str(&out, "data: ");
    cr_json_writer_init(&w, &out);
    cr_json_array_begin(&w);
    cr_json_int64(&w, 1);
    cr_json_array_end(&w);
    expect("data: [1]");
}

Test(json_writer, long_string)
{
    size_t n = 100000;
    char *s = malloc(n);
    cr_assert_not_null(s);
    for (size_t k = 0; k < n; k++)
        s[k] = (char)('a' + k % 26);
    s[n / 2] = '\n';
    cr_json_string(&w, s, n);
    cr_assert_not(out.failed);
    cr_assert_eq(out.len, n + 3);
    cr_assert(memcmp(out.data + 1, s, n / 2) == 0);
    cr_assert(memcmp(out.data + 1 + n / 2, "\\n", 2) == 0);
    free(s);
}

Test(json_writer, round_trip)
{
    static const char title[] = "buy \"milk\"\n\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 \x01/\\";
    static const char bad[] = "ok\xc0\xafok";
    cr_json_object_begin(&w);
    cr_json_key(&w, "title", 5);
    cr_json_string(&w, title, sizeof(title) - 1);
    cr_json_key(&w, "completed", 9);
    cr_json_bool(&w, false);
    cr_json_key(&w, "id", 2);
    cr_json_uint64(&w, UINT64_MAX);
    cr_json_key(&w, "min", 3);
    cr_json_int64(&w, INT64_MIN);
    cr_json_key(&w, "score", 5);
    cr_json_double(&w, 0.5);
    cr_json_key(&w, "nan", 3);
    cr_json_double(&w, NAN);
    cr_json_key(&w, "bad", 3);
    cr_json_string(&w, bad, sizeof(bad) - 1);
    cr_json_key(&w, "nul\0key", 7);
    cr_json_array_begin(&w);
    cr_json_int64(&w, -1);
    cr_json_object_begin(&w);
    cr_json_object_end(&w);
    cr_json_array_end(&w);
    cr_json_object_end(&w);
    cr_assert_not(out.failed);

    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_not_null(p);
    cr_json_value root, v;
    cr_assert_eq(cr_json_parse(p, out.data, out.len, &root), CR_JSON_OK, "%.*s", (int)out.len,
                 out.data);
    cr_assert_eq(cr_json_object_size(root), 8);

    const char *s;
    size_t len;
    cr_assert_eq(cr_json_object_get(root, "title", 5, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
    cr_assert_eq(len, sizeof(title) - 1);
    cr_assert(memcmp(s, title, len) == 0);

    bool b = true;
    cr_assert_eq(cr_json_object_get(root, "completed", 9, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_bool(v, &b), CR_JSON_OK);
    cr_assert_not(b);

    uint64_t u;
    cr_assert_eq(cr_json_object_get(root, "id", 2, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_uint64(v, &u), CR_JSON_OK);
    cr_assert_eq(u, UINT64_MAX);

    int64_t i;
    cr_assert_eq(cr_json_object_get(root, "min", 3, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, INT64_MIN);

    double d;
    cr_assert_eq(cr_json_object_get(root, "score", 5, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_double(v, &d), CR_JSON_OK);
    cr_assert_eq(d, 0.5);

    cr_assert_eq(cr_json_object_get(root, "nan", 3, &v), CR_JSON_OK);
    cr_assert(cr_json_is_null(v));

    cr_assert_eq(cr_json_object_get(root, "bad", 3, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
    cr_assert_eq(len, 10);
    cr_assert(memcmp(s, "ok" FFFD FFFD "ok", 10) == 0);

    cr_assert_eq(cr_json_object_get(root, "nul\0key", 7, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_array_size(v), 2);
    cr_json_value e;
    cr_assert_eq(cr_json_array_at(v, 0, &e), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(e, &i), CR_JSON_OK);
    cr_assert_eq(i, -1);
    cr_json_parser_destroy(p);
}
