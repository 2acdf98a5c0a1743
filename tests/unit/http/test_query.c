/*
 * Query parameters by name (coring/http/query.h): tables of queries and
 * what http_query_param and http_query_int64 make of them.
 */
#include "coring/http/query.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

static http_request with_query(const char *q)
{
    http_request req = {0};
    req.query = (http_str){q, q ? strlen(q) : 0};
    return req;
}

typedef struct param_case {
    const char *query;
    const char *name;
    int ret;
    const char *value; /* when ret is 0 */
    size_t len;        /* decoded length (0: strlen(value)) */
} param_case;

static const param_case param_cases[] = {
    {NULL, "a", -ENOENT, NULL, 0},
    {"", "a", -ENOENT, NULL, 0},
    {"a=1", "a", 0, "1", 0},
    {"a=1&b=2", "b", 0, "2", 0},
    {"b=2&a=1", "a", 0, "1", 0},
    {"ab=1", "a", -ENOENT, NULL, 0},
    {"a=1", "ab", -ENOENT, NULL, 0},
    {"A=1", "a", -ENOENT, NULL, 0},          /* names are case-sensitive */
    {"a=", "a", 0, "", 0},                   /* empty value */
    {"a", "a", 0, "", 0},                    /* no '=': the empty value */
    {"a&b=2", "b", 0, "2", 0},
    {"&&a=1&&", "a", 0, "1", 0},             /* empty pairs skipped */
    {"a=1=2", "a", 0, "1=2", 0},             /* split at the first '=' */
    {"=1", "", 0, "1", 0},
    {"a=x%20y", "a", 0, "x y", 0},
    {"a=x+y", "a", 0, "x y", 0},             /* '+' is a space */
    {"a=x%2By", "a", 0, "x+y", 0},           /* a literal plus */
    {"a=%e2%82%AC", "a", 0, "\xe2\x82\xac", 0}, /* either case */
    {"a=%26%3D", "a", 0, "&=", 0},           /* escaped separators are data */
    {"a=x%00y", "a", 0, "x\0y", 3},          /* NUL is data; the length says so */
    {"%61=1", "a", 0, "1", 0},               /* names are decoded too */
    {"my+name=1", "my name", 0, "1", 0},
    {"a=%", "a", -EINVAL, NULL, 0},
    {"a=%4", "a", -EINVAL, NULL, 0},
    {"a=%zz", "a", -EINVAL, NULL, 0},
    {"a=%4g", "a", -EINVAL, NULL, 0},
    {"a=1%", "a", -EINVAL, NULL, 0},
    {"a%zz=1", "a", -ENOENT, NULL, 0},       /* a malformed name matches nothing */
    {"b=%zz&a=1", "a", 0, "1", 0},           /* other pairs are not our business */
    {"a=1&a=2", "a", -EEXIST, NULL, 0},
    {"a=1&a=1", "a", -EEXIST, NULL, 0},
    {"a&a", "a", -EEXIST, NULL, 0},
    {"a=1&%61=2", "a", -EEXIST, NULL, 0},
};

Test(query, param_table)
{
    for (size_t i = 0; i < sizeof(param_cases) / sizeof(param_cases[0]); i++) {
        const param_case *c = &param_cases[i];
        http_request req = with_query(c->query);
        char buf[32];
        size_t len = 999;
        int ret = http_query_param(&req, c->name, buf, sizeof(buf), &len);
        cr_expect_eq(ret, c->ret, "%s [%s]: %d, want %d", c->query, c->name, ret, c->ret);
        if (ret != 0 || c->ret != 0) {
            cr_expect_str_empty(buf, "%s: buffer left \"%s\" on an error", c->query, buf);
            continue;
        }
        size_t want = c->len ? c->len : strlen(c->value);
        cr_expect_eq(len, want, "%s: length %zu, want %zu", c->query, len, want);
        cr_expect(memcmp(buf, c->value, want) == 0 && buf[want] == '\0', "%s: \"%s\"", c->query,
                  buf);
    }
}

Test(query, value_too_long_for_the_buffer)
{
    http_request req = with_query("a=12345&b=%41%42");
    char buf[5]; /* the 5 bytes but not the NUL */
    size_t len = 0;
    cr_expect_eq(http_query_param(&req, "a", buf, sizeof(buf), &len), -ENOSPC);
    cr_expect_eq(len, 5, "the length needed: %zu", len);
    cr_expect_str_empty(buf);
    char exact[6];
    cr_expect_eq(http_query_param(&req, "a", exact, sizeof(exact), NULL), 0);
    cr_expect_str_eq(exact, "12345");
    char fits[6];
    cr_expect_eq(http_query_param(&req, "b", fits, 3, &len), 0);
    cr_expect_str_eq(fits, "AB");
    cr_expect_eq(len, 2);
    cr_expect_eq(http_query_param(&req, "a", NULL, 0, &len), -ENOSPC);
    cr_expect_eq(len, 5);
}

typedef struct int_case {
    const char *query;
    int64_t min, max;
    int ret;
    int64_t value;
} int_case;

static const int_case int_cases[] = {
    {"n=0", 0, 100, 0, 0},
    {"n=42", 0, 100, 0, 42},
    {"n=100", 0, 100, 0, 100},
    {"n=101", 0, 100, -ERANGE, 0},
    {"n=-1", 0, 100, -ERANGE, 0},
    {"n=-5", -10, 10, 0, -5},
    {"n=007", 0, 100, 0, 7},
    {"n=%34%32", 0, 100, 0, 42},
    {"n=9223372036854775807", 0, INT64_MAX, 0, INT64_MAX},
    {"n=9223372036854775808", 0, INT64_MAX, -ERANGE, 0},
    {"n=-9223372036854775808", INT64_MIN, 0, 0, INT64_MIN},
    {"n=-9223372036854775809", INT64_MIN, 0, -ERANGE, 0},
    {"n=99999999999999999999999", 0, INT64_MAX, -ERANGE, 0},
    {"n=00000000000000000000001", 0, 10, 0, 1},
    {"n=", 0, 100, -EINVAL, 0},
    {"n", 0, 100, -EINVAL, 0},
    {"n=-", -10, 10, -EINVAL, 0},
    {"n=abc", 0, 100, -EINVAL, 0},
    {"n=1a", 0, 100, -EINVAL, 0},
    {"n=+1", 0, 100, -EINVAL, 0},   /* '+' is a space */
    {"n=%2B1", 0, 100, -EINVAL, 0}, /* and a decoded plus is not a sign */
    {"n=1%20", 0, 100, -EINVAL, 0},
    {"n=--1", -10, 10, -EINVAL, 0},
    {"n=1-", -10, 10, -EINVAL, 0},
    {"n=0x10", 0, 100, -EINVAL, 0},
    {"n=1.5", 0, 100, -EINVAL, 0},
    {"n=%3", 0, 100, -EINVAL, 0},
    {"n=1%00", 0, 100, -EINVAL, 0},
    {"m=1", 0, 100, -ENOENT, 0},
    {"n=1&n=2", 0, 100, -EEXIST, 0},
    {"n=x&n=2", 0, 100, -EEXIST, 0},
};

Test(query, int64_table)
{
    for (size_t i = 0; i < sizeof(int_cases) / sizeof(int_cases[0]); i++) {
        const int_case *c = &int_cases[i];
        http_request req = with_query(c->query);
        int64_t out = 12345;
        int ret = http_query_int64(&req, "n", c->min, c->max, &out);
        cr_expect_eq(ret, c->ret, "%s in [%lld, %lld]: %d, want %d", c->query, (long long)c->min,
                     (long long)c->max, ret, c->ret);
        if (c->ret == 0)
            cr_expect_eq(out, c->value, "%s: %lld", c->query, (long long)out);
        else
            cr_expect_eq(out, 12345, "%s: *out changed on an error", c->query);
    }
}
