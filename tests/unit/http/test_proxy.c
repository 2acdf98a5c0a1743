/*
 * Tests of the client behind trusted proxies (http/src/proxy.c): which
 * --trusted-proxies lists http_trusted_proxies_create takes, the networks
 * they match, and the client http_client_address reads from a request's
 * X-Forwarded-For fields, as a table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "coring/http/proxy.h"

static http_trusted_proxies *make(const char *list)
{
    char why[160] = "";
    http_trusted_proxies *tp = NULL;
    int err = http_trusted_proxies_create(list, &tp, why, sizeof(why));
    cr_assert_eq(err, 0, "'%s' refused: %d %s", list, err, why);
    return tp;
}

static bool has(const http_trusted_proxies *tp, const char *addr)
{
    return http_trusted_proxies_contain(tp, addr, strlen(addr));
}

Test(proxy, lists_refused)
{
    static const char *const bad[][2] = {
        {"", "empty"},          {"10.0.0.0/8,", "empty"},    {"10.0.0.0/33", "prefix"},
        {"::/129", "prefix"},   {"10.0.0.0/", "prefix"},     {"10.0.0.0/x", "prefix"},
        {"10.0.0.1/8", "past"}, {"host.example", "address"}, {"10.0.0.256", "address"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[160] = "";
        http_trusted_proxies *tp = (http_trusted_proxies *)1;
        cr_expect_eq(http_trusted_proxies_create(bad[i][0], &tp, why, sizeof(why)), -EINVAL, "'%s'",
                     bad[i][0]);
        cr_expect(tp == NULL, "'%s': *out set on failure", bad[i][0]);
        cr_expect(strstr(why, bad[i][1]), "'%s': '%s' lacks '%s'", bad[i][0], why, bad[i][1]);
    }
}

Test(proxy, networks_match)
{
    http_trusted_proxies *tp = make(" 10.0.0.0/8 ,192.168.1.7, fd00::/8,2001:db8::1 ,172.16.0.0/12");
    cr_expect(has(tp, "10.213.42.10"));
    cr_expect(has(tp, "::ffff:10.1.2.3"), "an IPv4-mapped peer");
    cr_expect(has(tp, "192.168.1.7"));
    cr_expect(!has(tp, "192.168.1.8"));
    cr_expect(has(tp, "172.31.255.255"));
    cr_expect(!has(tp, "172.32.0.0"));
    cr_expect(has(tp, "fdab::1"));
    cr_expect(has(tp, "[2001:db8::1]"));
    cr_expect(!has(tp, "2001:db8::2"));
    cr_expect(!has(tp, "11.0.0.1"));
    cr_expect(!has(tp, "not an address"));
    cr_expect(!has(NULL, "10.0.0.1"));
    http_trusted_proxies_destroy(tp);
    tp = make("0.0.0.0/0");
    cr_expect(has(tp, "8.8.8.8"));
    cr_expect(!has(tp, "2001:db8::1"), "IPv4's /0 is not every IPv6 address");
    http_trusted_proxies_destroy(tp);
}

/* The client of a request from @peer whose X-Forwarded-For fields are
 * @xff (NULL-terminated), under @tp. */
static const char *client(const http_trusted_proxies *tp, const char *peer, const char *const *xff)
{
    static char out[HTTP_CLIENT_ADDRESS_SIZE];
    http_header headers[8];
    size_t n = 0;
    headers[n++] = (http_header){{"Host", 4}, {"x", 1}};
    for (; xff && *xff; xff++) {
        headers[n++] = (http_header){{"x-forwarded-for", 15}, {*xff, strlen(*xff)}};
        headers[n++] = (http_header){{"Accept", 6}, {"*/*", 3}};
    }
    http_request req = {.headers = headers, .num_headers = n};
    size_t len = http_client_address(tp, peer, &req, out);
    cr_assert_eq(len, strlen(out));
    return out;
}

#define XFF(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(proxy, client_address)
{
    http_trusted_proxies *lb = make("10.213.42.10");
    http_trusted_proxies *two = make("10.213.42.10, 203.0.113.0/24");
    const struct {
        int list; /* 0: none, 1: lb, 2: two */
        const char *peer;
        const char *const *xff;
        const char *want;
    } cases[] = {
        {0, "10.213.42.10", XFF("6.6.6.6"), "10.213.42.10"},          /* none trusted */
        {1, "127.0.0.1", XFF("6.6.6.6"), "127.0.0.1"},                /* a spoof */
        {1, "10.213.42.10", NULL, "10.213.42.10"},                    /* no header */
        {1, "10.213.42.10", XFF("127.0.0.1"), "127.0.0.1"},           /* HAProxy's */
        {1, "10.213.42.10", XFF("6.6.6.6, 127.0.0.1"), "127.0.0.1"},  /* rightmost */
        {1, "10.213.42.10", XFF("6.6.6.6", "127.0.0.1"), "127.0.0.1"},
        {1, "10.213.42.10", XFF("6.6.6.6,127.0.0.1 , "), "127.0.0.1"}, /* empty element */
        {1, "10.213.42.10", XFF("10.213.42.10, 1.2.3.4, 10.213.42.10"), "1.2.3.4"},
        {1, "10.213.42.10", XFF("unknown"), "10.213.42.10"},
        {1, "10.213.42.10", XFF("1.2.3.4:5678"), "1.2.3.4"},
        {1, "10.213.42.10", XFF("[2001:DB8::1]:443"), "2001:db8::1"},
        {1, "10.213.42.10", XFF("[2001:db8::1]"), "2001:db8::1"},
        {1, "10.213.42.10", XFF("2001:db8::1"), "2001:db8::1"},
        {1, "10.213.42.10", XFF("::ffff:1.2.3.4"), "1.2.3.4"},
        {1, "10.213.42.10", XFF("1.2.3.4 , _hidden"), "10.213.42.10"},
        {2, "10.213.42.10", XFF("6.6.6.6, 203.0.113.7"), "6.6.6.6"},
        {2, "10.213.42.10", XFF("203.0.113.5, 203.0.113.7"), "203.0.113.5"}, /* all trusted */
        {2, "10.213.42.10", XFF("junk, 203.0.113.7"), "203.0.113.7"},        /* last trusted hop */
        {2, "", XFF("6.6.6.6"), ""},                                          /* peer unknown */
    };
    const http_trusted_proxies *lists[] = {NULL, lb, two};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = client(lists[cases[i].list], cases[i].peer, cases[i].xff);
        cr_expect_str_eq(got, cases[i].want, "case %zu (peer %s, first field %s)", i, cases[i].peer,
                         cases[i].xff ? cases[i].xff[0] : "none");
    }
    http_trusted_proxies_destroy(lb);
    http_trusted_proxies_destroy(two);
}
