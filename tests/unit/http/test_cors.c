/*
 * Tests of the CORS policy (http/src/cors.c): which --cors-origins lists
 * http_cors_create takes, with the reason it gives for those it refuses,
 * and the exact matching of an Origin value against them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coring/http/cors.h"

static http_str S(const char *s)
{
    return (http_str){s, strlen(s)};
}

static http_cors *make(const char *list)
{
    char why[160] = "";
    http_cors *c = NULL;
    int err = http_cors_create(list, &c, why, sizeof(why));
    cr_assert_eq(err, 0, "'%s' refused: %d %s", list, err, why);
    cr_assert(c != NULL);
    return c;
}

static void refused(const char *list, const char *word)
{
    char why[160] = "";
    http_cors *c = (http_cors *)1;
    cr_expect_eq(http_cors_create(list, &c, why, sizeof(why)), -EINVAL, "'%s' taken", list);
    cr_expect(c == NULL, "'%s': *out set on failure", list);
    cr_expect(strstr(why, word) != NULL, "'%s': reason '%s' lacks '%s'", list, why, word);
}

Test(cors, exact_match)
{
    http_cors *c = make(" https://app.example , http://127.0.0.1:5173,https://APP.example:8443");
    cr_expect(http_cors_origin_allowed(c, S("https://app.example")));
    cr_expect(http_cors_origin_allowed(c, S("http://127.0.0.1:5173")));
    /* Scheme and host lower-cased at start-up, as a browser sends them. */
    cr_expect(http_cors_origin_allowed(c, S("https://app.example:8443")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://APP.example:8443")));
    cr_expect_not(http_cors_origin_allowed(c, S("http://app.example")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://app.example:443")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://app.example/")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://app.example.evil")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://evil.app.example")));
    cr_expect_not(http_cors_origin_allowed(c, S("https://app.exampl")));
    cr_expect_not(http_cors_origin_allowed(c, S("http://127.0.0.1:5174")));
    cr_expect_not(http_cors_origin_allowed(c, S("null")));
    cr_expect_not(http_cors_origin_allowed(c, S("")));
    cr_expect_not(http_cors_origin_allowed(NULL, S("https://app.example")));
    http_cors_destroy(c);
}

Test(cors, any_origin)
{
    http_cors *c = make("*");
    cr_expect(http_cors_origin_allowed(c, S("https://whatever.example")));
    cr_expect(http_cors_origin_allowed(c, S("null")));
    http_cors_destroy(c);
    c = make("https://a.example,https://a.example"); /* twice is once */
    cr_expect(http_cors_origin_allowed(c, S("https://a.example")));
    http_cors_destroy(c);
    c = make("http://[::1]:3000");
    cr_expect(http_cors_origin_allowed(c, S("http://[::1]:3000")));
    http_cors_destroy(c);
}

Test(cors, refused_lists)
{
    refused("", "empty");
    refused("https://a.example,", "empty");
    refused(",https://a.example", "empty");
    refused("null", "null");
    refused("*,https://a.example", "alone");
    refused("https://a.example,*", "alone");
    refused("a.example", "scheme://host");
    refused("://a.example", "scheme://host");
    refused("1http://a.example", "scheme://host");
    refused("ht_tp://a.example", "scheme");
    refused("https://", "no host");
    refused("https://a.example/", "path");
    refused("https://a.example/app", "path");
    refused("https://u@a.example", "user info");
    refused("https://a.example:", "port");
    refused("https://a.example:0", "port");
    refused("https://a.example:080", "port");
    refused("https://a.example:65536", "port");
    refused("https://a.example:99999999999999999999", "port");
    refused("https://a.example:443", "default port");
    refused("http://a.example:80", "default port");
    refused("https://a.example?x", "after the host");
    refused("https://[::1", "IPv6");
    refused("https://[]", "IPv6");
    refused("https://a example", "after the host");
    char big[400];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "https://", 8);
    big[sizeof(big) - 1] = '\0';
    refused(big, "longer");
    char many[80 * 24] = "";
    for (int i = 0; i < 80; i++)
        sprintf(many + strlen(many), "%shttp://h%d.example", i ? "," : "", i);
    refused(many, "more than");
    http_cors *c = NULL;
    cr_expect_eq(http_cors_create(NULL, &c, NULL, 0), -EINVAL);
    http_cors_destroy(NULL);
}
