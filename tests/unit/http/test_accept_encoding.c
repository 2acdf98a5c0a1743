/*
 * Accept-Encoding negotiation (http/src/accept_encoding.c), table-tested:
 * RFC 9110 section 12.5.3's q-values, identity, "*", q=0, the qvalue
 * grammar of section 12.4.2, and the choices coring makes where the RFC
 * leaves one (identity when nothing is acceptable, the server's order on
 * ties). Also --compression's list (http_codings_parse).
 */
#include "coring/http/accept_encoding.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#define ALL HTTP_CODINGS_ALL
#define ZSTD HTTP_CODING_ZSTD
#define BR HTTP_CODING_BR
#define GZIP HTTP_CODING_GZIP
#define IDENTITY HTTP_CODING_IDENTITY
#define BIT(c) HTTP_CODING_BIT(c)

typedef struct {
    const char *value; /* one field line; NULL: no Accept-Encoding */
    unsigned offered;
    http_coding want;
} choice_case;

static const choice_case cases[] = {
    /* absent, empty: identity */
    {NULL, ALL, IDENTITY},
    {"", ALL, IDENTITY},
    {"identity", ALL, IDENTITY},
    /* one coding, any case, x-gzip */
    {"gzip", ALL, GZIP},
    {"GZip", ALL, GZIP},
    {"x-gzip", ALL, GZIP},
    {"br", ALL, BR},
    {"zstd", ALL, ZSTD},
    /* equal q: the server's order zstd, br, gzip */
    {"gzip, deflate, br", ALL, BR},
    {"gzip, deflate, br, zstd", ALL, ZSTD},
    {"gzip, deflate, br, zstd", BIT(GZIP), GZIP},
    {"gzip, br", BIT(ZSTD), IDENTITY},
    /* q-values decide */
    {"zstd;q=0.5, gzip;q=0.8", ALL, GZIP},
    {"zstd;q=0.5, gzip ; Q=0.8", ALL, GZIP},
    {"br;q=1.0, gzip;q=0.999", ALL, BR},
    {"br;q=0.001", ALL, BR},                  /* identity unrated: the fall-back */
    {"br;q=0.5, identity", ALL, IDENTITY},    /* identity rated higher */
    {"br;q=0.5, *;q=0.6", BIT(BR), IDENTITY}, /* ... through "*" */
    {"br;q=0.001, identity;q=0", ALL, BR},
    {"gzip;q=0.5, identity;q=0.5", ALL, GZIP}, /* a tie goes to the coding */
    /* q=0 excludes */
    {"gzip;q=0", ALL, IDENTITY},
    {"gzip;q=0, br", ALL, BR},
    {"gzip;q=0.000", ALL, IDENTITY},
    /* "*" */
    {"*", ALL, ZSTD},
    {"*", BIT(GZIP), GZIP},
    {"*;q=0.5, zstd;q=0", ALL, BR},
    {"gzip;q=0.2, *;q=0.5", ALL, ZSTD},
    {"*;q=0", ALL, IDENTITY},
    {"zstd, *;q=0", ALL, ZSTD},
    /* identity forbidden, nothing acceptable: identity all the same
     * (RFC 9110 section 12.5.3: "ought to respond ... without any
     * content coding"; docs/compression.md) */
    {"identity;q=0", ALL, IDENTITY},
    {"identity;q=0, *;q=0", ALL, IDENTITY},
    {"compress, identity;q=0", ALL, IDENTITY},
    /* unknown codings skipped; the first mention counts */
    {"compress, deflate, gzip", ALL, GZIP},
    {"gzip;q=0, gzip", ALL, IDENTITY},
    /* empty list elements */
    {",, gzip ,,", ALL, GZIP},
    /* compression off: nothing offered */
    {"gzip, br, zstd", 0, IDENTITY},
    /* does not parse: the whole field ignored, identity */
    {"gzip;q=2", ALL, IDENTITY},
    {"gzip;q=1.5", ALL, IDENTITY},
    {"gzip;q=1.001", ALL, IDENTITY},
    {"gzip;q=0.0001", ALL, IDENTITY},
    {"gzip;q=", ALL, IDENTITY},
    {"gzip;level=1", ALL, IDENTITY},
    {"gzip br", ALL, IDENTITY},
    {"gzip;", ALL, IDENTITY},
    {"g(zip", ALL, IDENTITY},
    {"zstd, gzip;q=.5", ALL, IDENTITY},
};

static http_coding choose(const char *value, unsigned offered)
{
    http_accept_encoding ae;
    http_accept_encoding_init(&ae);
    if (value)
        http_accept_encoding_parse(&ae, value, strlen(value));
    return http_accept_encoding_choose(&ae, offered);
}

Test(accept_encoding, table)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const choice_case *c = &cases[i];
        http_coding got = choose(c->value, c->offered);
        cr_expect_eq(got, c->want, "'%s' offered 0x%x: got %s, want %s",
                     c->value ? c->value : "(absent)", c->offered, http_coding_name(got),
                     http_coding_name(c->want));
    }
}

Test(accept_encoding, parse_result)
{
    http_accept_encoding ae;
    http_accept_encoding_init(&ae);
    cr_expect_eq(http_accept_encoding_parse(&ae, "gzip;q=0.5", 10), 0);
    cr_expect_eq(ae.q[GZIP], 500);
    cr_expect_eq(ae.q[BR], -1);
    cr_expect_eq(http_accept_encoding_parse(&ae, "br;q=7", 6), -EINVAL);
    cr_expect(ae.invalid);
}

Test(accept_encoding, several_field_lines)
{
    /* A list field split over lines (RFC 9110 section 5.3): one list. */
    http_accept_encoding ae;
    http_accept_encoding_init(&ae);
    http_accept_encoding_parse(&ae, "gzip;q=0.4", 10);
    http_accept_encoding_parse(&ae, "br;q=0.6", 8);
    cr_expect_eq(http_accept_encoding_choose(&ae, ALL), BR);
    /* A bad line spoils the field. */
    http_accept_encoding_parse(&ae, "zstd;q=x", 8);
    cr_expect_eq(http_accept_encoding_choose(&ae, ALL), IDENTITY);
}

Test(accept_encoding, names)
{
    cr_expect_str_eq(http_coding_name(IDENTITY), "identity");
    cr_expect_str_eq(http_coding_name(ZSTD), "zstd");
    cr_expect_str_eq(http_coding_name(BR), "br");
    cr_expect_str_eq(http_coding_name(GZIP), "gzip");
    cr_expect_null(http_coding_name(HTTP_CODING_COUNT));
}

Test(codings_parse, values)
{
    unsigned m = 12345;
    cr_expect_eq(http_codings_parse("on", &m), 0);
    cr_expect_eq(m, ALL);
    cr_expect_eq(http_codings_parse("off", &m), 0);
    cr_expect_eq(m, 0);
    cr_expect_eq(http_codings_parse("gzip", &m), 0);
    cr_expect_eq(m, BIT(GZIP));
    cr_expect_eq(http_codings_parse("zstd, br", &m), 0);
    cr_expect_eq(m, BIT(ZSTD) | BIT(BR));
    m = 7;
    cr_expect_eq(http_codings_parse("", &m), -EINVAL);
    cr_expect_eq(http_codings_parse("gzip,", &m), -EINVAL);
    cr_expect_eq(http_codings_parse("deflate", &m), -EINVAL);
    cr_expect_eq(http_codings_parse("identity", &m), -EINVAL);
    cr_expect_eq(http_codings_parse("gzip;br", &m), -EINVAL);
    cr_expect_eq(m, 7, "unchanged on error");
}
