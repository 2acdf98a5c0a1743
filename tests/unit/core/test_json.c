/*
 * Tests for the simdjson wrapper (coring/core/json.h): every getter and its
 * errors, invalid JSON and invalid UTF-8, the depth and size limits, reuse
 * of one parser across documents, and iteration over objects and arrays.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coring/core/error.h"
#include "coring/core/json.h"

static cr_json_parser *parser;

static void setup(void)
{
    parser = cr_json_parser_create(0, 0);
    cr_assert_not_null(parser);
}

static void teardown(void)
{
    cr_json_parser_destroy(parser);
    parser = NULL;
}

TestSuite(json, .init = setup, .fini = teardown);

/* Parse @s (strlen bytes) and expect @want. */
static cr_json_value parse_ok(const char *s)
{
    cr_json_value root;
    cr_json_error err = cr_json_parse(parser, s, strlen(s), &root);
    cr_assert_eq(err, CR_JSON_OK, "parse %s: %s", s, cr_json_error_message(err));
    return root;
}

static cr_json_error parse_err(const char *s, size_t len)
{
    cr_json_value root;
    return cr_json_parse(parser, s, len, &root);
}

static cr_json_value get(cr_json_value obj, const char *key)
{
    cr_json_value v;
    cr_json_error err = cr_json_object_get(obj, key, strlen(key), &v);
    cr_assert_eq(err, CR_JSON_OK, "key %s: %s", key, cr_json_error_message(err));
    return v;
}

static void assert_string(cr_json_value v, const char *want, size_t want_len)
{
    const char *s;
    size_t len;
    cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
    cr_assert_eq(len, want_len);
    cr_assert(memcmp(s, want, len) == 0);
}

Test(json, object_fields)
{
    cr_json_value root = parse_ok("{\"title\":\"buy milk\",\"completed\":false,\"order\":3,"
                                  "\"score\":1.5,\"note\":null,\"tags\":[\"a\",\"b\"],"
                                  "\"owner\":{\"id\":7}}");
    cr_assert_eq(cr_json_type_of(root), CR_JSON_OBJECT);
    cr_assert_eq(cr_json_object_size(root), 7);

    assert_string(get(root, "title"), "buy milk", 8);

    bool b = true;
    cr_assert_eq(cr_json_type_of(get(root, "completed")), CR_JSON_BOOL);
    cr_assert_eq(cr_json_get_bool(get(root, "completed"), &b), CR_JSON_OK);
    cr_assert_eq(b, false);

    int64_t i = 0;
    cr_assert_eq(cr_json_type_of(get(root, "order")), CR_JSON_INT);
    cr_assert_eq(cr_json_get_int64(get(root, "order"), &i), CR_JSON_OK);
    cr_assert_eq(i, 3);

    double d = 0;
    cr_assert_eq(cr_json_type_of(get(root, "score")), CR_JSON_DOUBLE);
    cr_assert_eq(cr_json_get_double(get(root, "score"), &d), CR_JSON_OK);
    cr_assert_eq(d, 1.5);

    cr_assert_eq(cr_json_type_of(get(root, "note")), CR_JSON_NULL);
    cr_assert(cr_json_is_null(get(root, "note")));
    cr_assert_not(cr_json_is_null(get(root, "title")));

    cr_json_value tags = get(root, "tags");
    cr_assert_eq(cr_json_type_of(tags), CR_JSON_ARRAY);
    cr_assert_eq(cr_json_array_size(tags), 2);
    cr_json_value e;
    cr_assert_eq(cr_json_array_at(tags, 1, &e), CR_JSON_OK);
    assert_string(e, "b", 1);

    cr_json_value owner = get(root, "owner");
    cr_assert_eq(cr_json_type_of(owner), CR_JSON_OBJECT);
    cr_assert_eq(cr_json_get_int64(get(owner, "id"), &i), CR_JSON_OK);
    cr_assert_eq(i, 7);
}

Test(json, missing_key_and_wrong_container)
{
    cr_json_value root = parse_ok("{\"a\":1,\"ab\":2}");
    cr_json_value v;
    cr_assert_eq(cr_json_object_get(root, "b", 1, &v), CR_JSON_ENOKEY);
    cr_assert(cr_json_is_null(v), "a failed lookup gives a null handle");
    cr_assert_eq(cr_json_object_get(root, "A", 1, &v), CR_JSON_ENOKEY, "keys are case-sensitive");
    cr_assert_eq(cr_json_object_get(root, "", 0, &v), CR_JSON_ENOKEY);
    cr_assert_eq(cr_json_object_get(root, "abc", 2, &v), CR_JSON_OK, "key_len bytes only");
    int64_t i;
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 2);

    cr_json_value one = get(root, "a");
    cr_assert_eq(cr_json_object_get(one, "a", 1, &v), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_object_size(one), -1);
    cr_assert_eq(cr_json_array_size(one), -1);
    cr_assert_eq(cr_json_array_size(root), -1);
    cr_assert_eq(cr_json_array_at(root, 0, &v), CR_JSON_ETYPE);
    const char *k;
    size_t kl;
    cr_assert_eq(cr_json_object_at(one, 0, &k, &kl, &v), CR_JSON_ETYPE);
}

Test(json, duplicate_key_returns_first)
{
    cr_json_value root = parse_ok("{\"k\":1,\"k\":2}");
    int64_t i;
    cr_assert_eq(cr_json_get_int64(get(root, "k"), &i), CR_JSON_OK);
    cr_assert_eq(i, 1);
    cr_assert_eq(cr_json_object_size(root), 2);
}

Test(json, scalar_roots)
{
    int64_t i;
    uint64_t u;
    double d;
    bool b;
    cr_assert_eq(cr_json_get_int64(parse_ok("42"), &i), CR_JSON_OK);
    cr_assert_eq(i, 42);
    cr_assert_eq(cr_json_get_bool(parse_ok(" true "), &b), CR_JSON_OK);
    cr_assert(b);
    cr_assert(cr_json_is_null(parse_ok("null")));
    assert_string(parse_ok("\"x\""), "x", 1);
    cr_assert_eq(cr_json_get_double(parse_ok("-2.5e3"), &d), CR_JSON_OK);
    cr_assert_eq(d, -2500.0);
    cr_assert_eq(cr_json_get_uint64(parse_ok("0"), &u), CR_JSON_OK);
    cr_assert_eq(u, 0);
}

Test(json, integer_limits)
{
    int64_t i;
    uint64_t u;
    double d;
    cr_json_value v = parse_ok("9223372036854775807");
    cr_assert_eq(cr_json_type_of(v), CR_JSON_INT);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, INT64_MAX);

    v = parse_ok("-9223372036854775808");
    cr_assert_eq(cr_json_type_of(v), CR_JSON_INT);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, INT64_MIN);
    cr_assert_eq(cr_json_get_uint64(v, &u), CR_JSON_ERANGE);

    v = parse_ok("18446744073709551615");
    cr_assert_eq(cr_json_type_of(v), CR_JSON_UINT);
    cr_assert_eq(cr_json_get_uint64(v, &u), CR_JSON_OK);
    cr_assert_eq(u, UINT64_MAX);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_ERANGE);
    cr_assert_eq(cr_json_get_double(v, &d), CR_JSON_OK);
    cr_assert_eq(d, 18446744073709551615.0);

    v = parse_ok("9223372036854775808"); /* INT64_MAX + 1 */
    cr_assert_eq(cr_json_type_of(v), CR_JSON_UINT);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_ERANGE);
}

Test(json, number_range_errors)
{
    int64_t i = 99;
    uint64_t u = 99;
    double d;
    cr_assert_eq(cr_json_get_uint64(parse_ok("-1"), &u), CR_JSON_ERANGE);
    cr_assert_eq(u, 99, "untouched on error");
    cr_assert_eq(cr_json_get_int64(parse_ok("1.5"), &i), CR_JSON_ERANGE);
    cr_assert_eq(cr_json_get_uint64(parse_ok("1.5"), &u), CR_JSON_ERANGE);
    cr_assert_eq(cr_json_get_int64(parse_ok("2.0"), &i), CR_JSON_ERANGE, "a double is no integer");
    cr_assert_eq(i, 99);
    /* 2^64 written as a double; as a bare integer simdjson 3.0.1 rejects it. */
    cr_json_value big = parse_ok("18446744073709551616.0");
    cr_assert_eq(cr_json_type_of(big), CR_JSON_DOUBLE);
    cr_assert_eq(cr_json_get_uint64(big, &u), CR_JSON_ERANGE);
    cr_assert_eq(cr_json_get_double(big, &d), CR_JSON_OK);
    cr_assert_eq(d, 18446744073709551616.0);
    cr_assert_eq(parse_err("18446744073709551616", 20), CR_JSON_EINVALID);
    cr_assert_eq(parse_err("-9223372036854775809", 20), CR_JSON_EINVALID);
    cr_assert_eq(parse_err("1e400", 5), CR_JSON_EINVALID);

    cr_assert_eq(cr_json_get_double(parse_ok("-7"), &d), CR_JSON_OK);
    cr_assert_eq(d, -7.0);
}

Test(json, type_errors)
{
    cr_json_value root = parse_ok("[\"s\",1,true,null,{},[]]");
    cr_json_value v[6];
    for (size_t k = 0; k < 6; k++)
        cr_assert_eq(cr_json_array_at(root, k, &v[k]), CR_JSON_OK);
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
    size_t len;
    cr_assert_eq(cr_json_get_bool(v[0], &b), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_int64(v[0], &i), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_uint64(v[0], &u), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_double(v[0], &d), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_string(v[1], &s, &len), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_bool(v[1], &b), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_int64(v[2], &i), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_string(v[3], &s, &len), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_bool(v[3], &b), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_double(v[3], &d), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_int64(v[4], &i), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_string(v[5], &s, &len), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_type_of(v[4]), CR_JSON_OBJECT);
    cr_assert_eq(cr_json_object_size(v[4]), 0);
    cr_assert_eq(cr_json_array_size(v[5]), 0);
}

Test(json, zeroed_handle_is_null)
{
    cr_json_value none = {{0, 0}};
    cr_json_value v;
    bool b;
    double d;
    cr_assert_eq(cr_json_type_of(none), CR_JSON_NULL);
    cr_assert(cr_json_is_null(none));
    cr_assert_eq(cr_json_get_bool(none, &b), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_get_double(none, &d), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_object_get(none, "a", 1, &v), CR_JSON_ETYPE);
    cr_assert_eq(cr_json_array_size(none), -1);
}

Test(json, string_escapes)
{
    cr_json_value root =
        parse_ok("[\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\", \"\\u00e9\\u20ac\\ud83d\\ude00\","
                 " \"x\\u0000y\", \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"\"]");
    cr_json_value v;
    cr_assert_eq(cr_json_array_at(root, 0, &v), CR_JSON_OK);
    assert_string(v, "a\"b\\c/d\b\f\n\r\t", 12);
    cr_assert_eq(cr_json_array_at(root, 1, &v), CR_JSON_OK);
    assert_string(v, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    cr_assert_eq(cr_json_array_at(root, 2, &v), CR_JSON_OK);
    assert_string(v, "x\0y", 3);
    cr_assert_eq(cr_json_array_at(root, 3, &v), CR_JSON_OK);
    assert_string(v, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9);
    cr_assert_eq(cr_json_array_at(root, 4, &v), CR_JSON_OK);
    assert_string(v, "", 0);
}

Test(json, key_with_nul_and_escape)
{
    static const char doc[] = "{\"a\\u0000b\":1,\"\\u00e9\":2}";
    cr_json_value root = parse_ok(doc);
    cr_json_value v;
    int64_t i;
    cr_assert_eq(cr_json_object_get(root, "a\0b", 3, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 1);
    cr_assert_eq(cr_json_object_get(root, "a", 1, &v), CR_JSON_ENOKEY);
    cr_assert_eq(cr_json_object_get(root, "\xc3\xa9", 2, &v), CR_JSON_OK);
}

Test(json, invalid_json)
{
    static const char *const bad[] = {
        "[1,2,]",                                                 /* trailing comma */
        "{\"a\":1,}",                                             /* trailing comma in an object */
        "{a:1}",                                                  /* unquoted key */
        "{'a':1}",                                                /* single quotes */
        "'a'",         "{\"a\":1",                                /* truncated */
        "[1,2",        "\"abc",    "tru",   "nul",       "[1] x", /* garbage after the root */
        "[1] [2]",     "{} 1",     "01",    "1.",        "-",       ".5",
        "+1",          "NaN",      "[1 2]", "{\"a\" 1}", "\"\\x\"", /* bad escape */
        "\"\\ud800\"",                                              /* lone surrogate escape */
        "\"a\tb\"", /* unescaped control character */
        "/* c */ 1",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        cr_expect_eq(parse_err(bad[k], strlen(bad[k])), CR_JSON_EINVALID, "%s", bad[k]);
    cr_expect_eq(parse_err("", 0), CR_JSON_EINVALID, "empty input");
    cr_expect_eq(parse_err(NULL, 0), CR_JSON_EINVALID, "no input");
    cr_expect_eq(parse_err("   \n\t ", 6), CR_JSON_EINVALID, "only whitespace");
    cr_expect_eq(parse_err("1\0", 2), CR_JSON_EINVALID, "a NUL after the root");

    cr_json_value root;
    cr_assert_neq(cr_json_parse(parser, "[", 1, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_type_of(root), CR_JSON_NULL, "a failed parse gives a null root");
}

Test(json, length_is_respected)
{
    /* Only len bytes count, whatever follows them in memory. */
    cr_json_value root;
    cr_assert_eq(cr_json_parse(parser, "[1,2]garbage", 5, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_array_size(root), 2);
    cr_assert_eq(cr_json_parse(parser, "[1,2]", 4, &root), CR_JSON_EINVALID);
}

Test(json, invalid_utf8)
{
    static const char *const bad[] = {
        "\"\xc0\xaf\"",         /* overlong '/' */
        "\"\xe0\x80\xaf\"",     /* overlong, 3 bytes */
        "\"\xf0\x80\x80\xaf\"", /* overlong, 4 bytes */
        "\"\x80\"",             /* lone continuation byte */
        "\"a\xbf z\"",
        "\"\xed\xa0\x80\"",     /* surrogate U+D800 encoded in UTF-8 */
        "\"\xed\xbf\xbf\"",     /* U+DFFF */
        "\"\xf0\x9f\x98\"",     /* truncated 4-byte sequence */
        "\"\xe2\x82\"",         /* truncated 3-byte sequence */
        "\"\xf4\x90\x80\x80\"", /* above U+10FFFF */
        "\"\xff\"",
        "{\"\xc3\":1}", /* in a key */
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        cr_expect_eq(parse_err(bad[k], strlen(bad[k])), CR_JSON_EUTF8, "case %zu", k);
    /* Boundaries that are valid. */
    parse_ok("\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80"
             "\xf4\x8f\xbf\xbf\"");
}

/* A document of @n nested arrays, closed or not. */
static char *nested(size_t n, bool closed)
{
    char *s = malloc(2 * n + 1);
    cr_assert_not_null(s);
    memset(s, '[', n);
    size_t len = n;
    if (closed) {
        memset(s + n, ']', n);
        len += n;
    }
    s[len] = '\0';
    return s;
}

/* @n arrays (or objects, each value under the key "a") nested around
 * @inner, e.g. wrap(2, false, "1") is [[1]]. */
static char *wrap(size_t n, bool objects, const char *inner)
{
    char *s = malloc(6 * n + strlen(inner) + 1);
    cr_assert_not_null(s);
    size_t len = 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(s + len, objects ? "{\"a\":" : "[", objects ? 5 : 1);
        len += objects ? 5 : 1;
    }
    memcpy(s + len, inner, strlen(inner));
    len += strlen(inner);
    memset(s + len, objects ? '}' : ']', n);
    s[len + n] = '\0';
    return s;
}

/* Issue 39: 64 deep is 64 arrays or objects inside each other around any
 * value (the limit counted the value too: 64 objects around 1 were
 * refused as 65 deep). An empty [] or {} is a value like 1. */
Test(json, depth_64_is_64_arrays_or_objects_around_a_value)
{
    static const char *inner[] = {"1", "\"s\"", "[]", "{}", "null"};
    for (int objects = 0; objects <= 1; objects++) {
        for (size_t i = 0; i < cr_countof(inner); i++) {
            char *s = wrap(64, objects, inner[i]);
            cr_expect_eq(parse_err(s, strlen(s)), CR_JSON_OK, "64 %s around %s",
                         objects ? "objects" : "arrays", inner[i]);
            free(s);
            s = wrap(65, objects, inner[i]);
            cr_expect_eq(parse_err(s, strlen(s)), CR_JSON_EDEPTH, "65 %s around %s",
                         objects ? "objects" : "arrays", inner[i]);
            free(s);
        }
    }
}

Test(json, depth_limit)
{
    /* Default depth 64: 64 arrays inside each other, [[1]] is 2 deep. */
    char *s = nested(64, true);
    cr_assert_eq(parse_err(s, strlen(s)), CR_JSON_OK);
    free(s);
    s = nested(66, true);
    cr_assert_eq(parse_err(s, strlen(s)), CR_JSON_EDEPTH);
    free(s);

    s = nested(100000, true);
    cr_assert_eq(parse_err(s, strlen(s)), CR_JSON_EDEPTH);
    /* Opened 100,000 deep, only the outermost closed. */
    s[100000] = ']';
    cr_assert_eq(parse_err(s, 100001), CR_JSON_EDEPTH);
    free(s);
    /* Never closed: simdjson checks the root's closing bracket first. */
    s = nested(100000, false);
    cr_assert_eq(parse_err(s, strlen(s)), CR_JSON_EINVALID);
    free(s);

    /* Objects nest the same way. */
    size_t n = 100000;
    char *o = malloc(6 * n + 2);
    cr_assert_not_null(o);
    size_t len = 0;
    for (size_t k = 0; k < n; k++) {
        memcpy(o + len, "{\"a\":", 5);
        len += 5;
    }
    o[len++] = '1';
    memset(o + len, '}', n);
    len += n;
    cr_assert_eq(parse_err(o, len), CR_JSON_EDEPTH);
    free(o);

    /* The parser still works after all that. */
    parse_ok("[[1]]");
}

Test(json, custom_depth)
{
    cr_json_parser *p = cr_json_parser_create(0, 2);
    cr_assert_not_null(p);
    cr_json_value root;
    cr_assert_eq(cr_json_parse(p, "[[1]]", 5, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_parse(p, "[[[]]]", 6, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_parse(p, "[[[1]]]", 7, &root), CR_JSON_EDEPTH);
    cr_assert_eq(cr_json_parse(p, "{\"a\":{\"b\":1}}", 13, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_parse(p, "{\"a\":{\"b\":[1]}}", 15, &root), CR_JSON_EDEPTH);
    cr_json_parser_destroy(p);
}

Test(json, size_limit)
{
    cr_json_parser *p = cr_json_parser_create(100, 0);
    cr_assert_not_null(p);
    char doc[200];
    memset(doc, ' ', sizeof(doc));
    doc[0] = '1';
    cr_json_value root;
    cr_assert_eq(cr_json_parse(p, doc, 100, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_parse(p, doc, 101, &root), CR_JSON_ETOOBIG);
    cr_assert_eq(cr_json_parse(p, doc, sizeof(doc), &root), CR_JSON_ETOOBIG);
    cr_assert_eq(cr_json_parse(p, "[2]", 3, &root), CR_JSON_OK);
    cr_json_parser_destroy(p);

    /* A limit below simdjson's minimal capacity. */
    p = cr_json_parser_create(4, 0);
    cr_assert_not_null(p);
    cr_assert_eq(cr_json_parse(p, "[1]", 3, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_parse(p, "[1,2]", 5, &root), CR_JSON_ETOOBIG);
    cr_json_parser_destroy(p);

    /* Default 1 MiB, and growth up to it. */
    size_t big = 1024 * 1024;
    char *s = malloc(big + 1);
    cr_assert_not_null(s);
    memset(s, ' ', big + 1);
    s[0] = '[';
    s[big - 1] = ']';
    cr_assert_eq(parse_err(s, big), CR_JSON_OK);
    cr_assert_eq(parse_err(s, big + 1), CR_JSON_ETOOBIG);
    free(s);
}

Test(json, reuse_parser)
{
    char doc[64];
    for (int k = 0; k < 1000; k++) {
        int n = snprintf(doc, sizeof(doc), "{\"k\":%d,\"s\":\"v%d\",\"a\":[%d,%d]}", k, k, k, -k);
        cr_json_value root;
        cr_assert_eq(cr_json_parse(parser, doc, (size_t)n, &root), CR_JSON_OK);
        int64_t i;
        cr_assert_eq(cr_json_get_int64(get(root, "k"), &i), CR_JSON_OK);
        cr_assert_eq(i, k);
        const char *s;
        size_t len;
        cr_assert_eq(cr_json_get_string(get(root, "s"), &s, &len), CR_JSON_OK);
        char want[16];
        int wn = snprintf(want, sizeof(want), "v%d", k);
        cr_assert_eq(len, (size_t)wn);
        cr_assert(memcmp(s, want, len) == 0);
        cr_json_value e;
        cr_assert_eq(cr_json_array_at(get(root, "a"), 1, &e), CR_JSON_OK);
        cr_assert_eq(cr_json_get_int64(e, &i), CR_JSON_OK);
        cr_assert_eq(i, -k);
        if (k % 100 == 0)
            cr_assert_eq(parse_err("[1,", 3), CR_JSON_EINVALID, "errors in between");
    }
    /* A bigger document, then a small one again, on the same parser. */
    size_t n = 50000;
    char *big = malloc(n * 2 + 2);
    cr_assert_not_null(big);
    big[0] = '[';
    for (size_t k = 0; k < n; k++) {
        big[1 + 2 * k] = '1';
        big[2 + 2 * k] = ',';
    }
    big[2 * n] = ']';
    cr_json_value root;
    cr_assert_eq(cr_json_parse(parser, big, 2 * n + 1, &root), CR_JSON_OK);
    cr_assert_eq(cr_json_array_size(root), (long)n);
    free(big);
    root = parse_ok("{\"x\":true}");
    bool b;
    cr_assert_eq(cr_json_get_bool(get(root, "x"), &b), CR_JSON_OK);
    cr_assert(b);
}

Test(json, parsers_are_independent)
{
    cr_json_parser *other = cr_json_parser_create(0, 0);
    cr_assert_not_null(other);
    cr_json_value a = parse_ok("[10,11]");
    cr_json_value b;
    cr_assert_eq(cr_json_parse(other, "[20,21,22]", 10, &b), CR_JSON_OK);
    cr_json_value v;
    int64_t i;
    cr_assert_eq(cr_json_array_at(a, 1, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 11);
    cr_assert_eq(cr_json_array_at(b, 2, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 22);
    cr_json_parser_destroy(other);
}

Test(json, object_iteration)
{
    cr_json_value root = parse_ok("{\"a\":1,\"b\":{\"x\":[1,2,{\"y\":3}]},\"c\":\"s\",\"d\":[],"
                                  "\"e\":2.5,\"f\":-3}");
    static const char *const keys[] = {"a", "b", "c", "d", "e", "f"};
    static const cr_json_type types[] = {CR_JSON_INT,   CR_JSON_OBJECT, CR_JSON_STRING,
                                         CR_JSON_ARRAY, CR_JSON_DOUBLE, CR_JSON_INT};
    long n = cr_json_object_size(root);
    cr_assert_eq(n, 6);
    for (long k = 0; k < n; k++) {
        const char *key;
        size_t key_len;
        cr_json_value v;
        cr_assert_eq(cr_json_object_at(root, (size_t)k, &key, &key_len, &v), CR_JSON_OK);
        cr_assert_eq(key_len, 1);
        cr_assert_eq(key[0], keys[k][0]);
        cr_assert_eq(cr_json_type_of(v), types[k], "member %ld", k);
    }
    /* Any order works, not only sequential. */
    const char *key;
    size_t key_len;
    cr_json_value v;
    cr_assert_eq(cr_json_object_at(root, 4, &key, &key_len, &v), CR_JSON_OK);
    cr_assert_eq(key[0], 'e');
    cr_assert_eq(cr_json_object_at(root, 1, &key, &key_len, &v), CR_JSON_OK);
    cr_assert_eq(key[0], 'b');
    cr_assert_eq(cr_json_object_at(root, 1, &key, &key_len, &v), CR_JSON_OK);
    cr_assert_eq(key[0], 'b');
    cr_assert_eq(cr_json_object_at(root, 6, &key, &key_len, &v), CR_JSON_ERANGE);
    cr_assert_eq(cr_json_object_at(root, (size_t)-1, &key, &key_len, &v), CR_JSON_ERANGE);
    cr_json_value empty = parse_ok("{}");
    cr_assert_eq(cr_json_object_at(empty, 0, &key, &key_len, &v), CR_JSON_ERANGE);
}

Test(json, array_iteration)
{
    cr_json_value root = parse_ok("[0,[1,[2]],{\"k\":[3]},\"s\",4.5,null,true,6]");
    long n = cr_json_array_size(root);
    cr_assert_eq(n, 8);
    static const cr_json_type types[] = {CR_JSON_INT,    CR_JSON_ARRAY,  CR_JSON_OBJECT,
                                         CR_JSON_STRING, CR_JSON_DOUBLE, CR_JSON_NULL,
                                         CR_JSON_BOOL,   CR_JSON_INT};
    for (long k = 0; k < n; k++) {
        cr_json_value v;
        cr_assert_eq(cr_json_array_at(root, (size_t)k, &v), CR_JSON_OK);
        cr_assert_eq(cr_json_type_of(v), types[k], "element %ld", k);
    }
    cr_json_value v;
    int64_t i;
    cr_assert_eq(cr_json_array_at(root, 7, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 6);
    cr_assert_eq(cr_json_array_at(root, 0, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_int64(v, &i), CR_JSON_OK);
    cr_assert_eq(i, 0);
    cr_assert_eq(cr_json_array_at(root, 8, &v), CR_JSON_ERANGE);
    cr_assert(cr_json_is_null(v));
    cr_assert_eq(cr_json_array_at(parse_ok("[]"), 0, &v), CR_JSON_ERANGE);
}

/* Nested loops over a large array of objects stay linear: each level keeps
 * its own cursor. A quadratic walk would take minutes here. */
Test(json, nested_iteration_is_linear, .timeout = 20)
{
    size_t n = 100000;
    size_t cap = n * 32 + 2;
    char *doc = malloc(cap);
    cr_assert_not_null(doc);
    size_t len = 0;
    doc[len++] = '[';
    for (size_t k = 0; k < n; k++)
        len += (size_t)snprintf(doc + len, cap - len - 1, "%s{\"a\":%zu,\"b\":[%zu]}", k ? "," : "",
                                k, k);
    doc[len++] = ']';
    cr_json_parser *p = cr_json_parser_create(4 * 1024 * 1024, 0);
    cr_assert_not_null(p);
    cr_json_value root;
    cr_assert_eq(cr_json_parse(p, doc, len, &root), CR_JSON_OK);
    free(doc);
    cr_assert_eq(cr_json_array_size(root), (long)n);
    for (size_t k = 0; k < n; k++) {
        cr_json_value obj;
        cr_assert_eq(cr_json_array_at(root, k, &obj), CR_JSON_OK);
        long members = cr_json_object_size(obj);
        cr_assert_eq(members, 2);
        for (long m = 0; m < members; m++) {
            const char *key;
            size_t key_len;
            cr_json_value v;
            cr_assert_eq(cr_json_object_at(obj, (size_t)m, &key, &key_len, &v), CR_JSON_OK);
            if (m == 1) {
                cr_json_value e;
                uint64_t u;
                cr_assert_eq(cr_json_array_at(v, 0, &e), CR_JSON_OK);
                cr_assert_eq(cr_json_get_uint64(e, &u), CR_JSON_OK);
                cr_assert_eq(u, k);
            }
        }
    }
    cr_json_parser_destroy(p);
}

Test(json, error_messages)
{
    for (int e = CR_JSON_OK; e <= CR_JSON_ERANGE; e++) {
        const char *m = cr_json_error_message((cr_json_error)e);
        cr_assert_not_null(m);
        cr_assert_gt(strlen(m), 0);
    }
    cr_assert_not_null(cr_json_error_message((cr_json_error)1000));
}

/* Found by tests/fuzz/fuzz_json: a parser that has never parsed anything has
 * no input buffer yet, and empty input used to write its padding through a
 * NULL pointer. */
Test(json, empty_input_on_a_fresh_parser)
{
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_assert_not_null(p);
    cr_json_value root;
    cr_expect_eq(cr_json_parse(p, "", 0, &root), CR_JSON_EINVALID);
    cr_expect(cr_json_is_null(root));
    cr_expect_eq(cr_json_parse(p, "[1]", 3, &root), CR_JSON_OK);
    cr_json_parser_destroy(p);
}

/* cr_json_parser_detail: simdjson's reason for the last failure, which
 * says more than "invalid JSON"; NULL after a success or our own refusal. */
Test(json, parser_detail_names_simdjsons_error)
{
    cr_json_value root;
    cr_expect_null(cr_json_parser_detail(parser), "no parse yet");
    cr_assert_eq(cr_json_parse(parser, "{", 1, &root), CR_JSON_EINVALID);
    const char *d = cr_json_parser_detail(parser);
    cr_assert_not_null(d);
    cr_expect(strstr(d, "improper structure") != NULL, "{: %s", d);
    cr_assert_eq(cr_json_parse(parser, "\"abc", 4, &root), CR_JSON_EINVALID);
    d = cr_json_parser_detail(parser);
    cr_expect(d && strstr(d, "never closed") != NULL, "\"abc: %s", d ? d : "(null)");
    cr_assert_eq(cr_json_parse(parser, "tru", 3, &root), CR_JSON_EINVALID);
    d = cr_json_parser_detail(parser);
    cr_expect(d && strstr(d, "atom") != NULL, "tru: %s", d ? d : "(null)");
    cr_assert_eq(cr_json_parse(parser, "{}", 2, &root), CR_JSON_OK);
    cr_expect_null(cr_json_parser_detail(parser), "after a success");

    cr_json_parser *small = cr_json_parser_create(8, 0);
    cr_assert_not_null(small);
    cr_assert_eq(cr_json_parse(small, "{", 1, &root), CR_JSON_EINVALID);
    cr_assert_eq(cr_json_parse(small, "[1,2,3,4,5]", 11, &root), CR_JSON_ETOOBIG);
    cr_expect_null(cr_json_parser_detail(small), "too big: refused before simdjson ran");
    cr_json_parser_destroy(small);
}
