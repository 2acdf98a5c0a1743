/*
 * The client of a request behind trusted reverse proxies: the
 * --trusted-proxies list, and X-Forwarded-For read from the right. See
 * coring/http/proxy.h for the rule and why it is read that way.
 *
 * Addresses are compared as 16 bytes of IPv6, an IPv4 one as its
 * IPv4-mapped form (::ffff:a.b.c.d), so that one list and one comparison
 * serve both families and a dual-stack listener's peers.
 */
#include "internal.h"

#include "coring/http/proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* One trusted network: its first 16 bytes as IPv6 and its prefix, bits. */
typedef struct proxy_net {
    uint8_t addr[16];
    unsigned prefix;
} proxy_net;

struct http_trusted_proxies {
    size_t count;
    proxy_net nets[];
};

/* The first 12 bytes of an IPv4-mapped IPv6 address (RFC 4291 section 2.5.5.2). */
static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* Parse the address in the @len bytes at @s (no brackets, no port) into
 * @out as IPv6 (IPv4 mapped); *@v4 says which it was. */
static bool parse_address(const char *s, size_t len, uint8_t out[16], bool *v4)
{
    char text[HTTP_CLIENT_ADDRESS_SIZE];
    if (len == 0 || len >= sizeof(text))
        return false;
    memcpy(text, s, len);
    text[len] = '\0';
    struct in_addr a4;
    if (inet_pton(AF_INET, text, &a4) == 1) {
        memcpy(out, v4_mapped, 12);
        memcpy(out + 12, &a4, 4);
        *v4 = true;
        return true;
    }
    *v4 = false;
    return inet_pton(AF_INET6, text, out) == 1;
}

/* @len bytes at @s trimmed of spaces and tabs (RFC 9110 section 5.6.3's OWS). */
static void trim(const char **s, size_t *len)
{
    while (*len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
    while (*len && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'))
        (*len)--;
}

/* An X-Forwarded-For entry's address: "[v6]" or "[v6]:port" lose their
 * brackets and port, "a.b.c.d:port" its port; a bare IPv6 address (more
 * than one ':') is taken whole. Narrows @s/@len to it. */
static void strip_port(const char **s, size_t *len)
{
    const char *p = *s;
    size_t n = *len;
    if (n && p[0] == '[') {
        const char *close = memchr(p, ']', n);
        if (close && (close + 1 == p + n || close[1] == ':')) {
            *s = p + 1;
            *len = (size_t)(close - p - 1);
        }
        return;
    }
    const char *colon = memchr(p, ':', n);
    if (colon && !memchr(colon + 1, ':', (size_t)(p + n - colon - 1)))
        *len = (size_t)(colon - p);
}

int http_trusted_proxies_create(const char *list, http_trusted_proxies **out, char *error,
                                size_t error_size)
{
    *out = NULL;
    if (!list)
        return http_setting_refused(error, error_size, "no proxy given");
    size_t entries = 1;
    for (const char *p = list; *p; p++)
        entries += *p == ',';
    if (entries > HTTP_TRUSTED_PROXIES_MAX)
        return http_setting_refused(error, error_size, "more than %d entries",
                                    HTTP_TRUSTED_PROXIES_MAX);
    http_trusted_proxies *tp = calloc(1, sizeof(*tp) + entries * sizeof(proxy_net));
    if (!tp)
        return -ENOMEM;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *e = p;
        trim(&e, &len);
        if (len == 0) {
            free(tp);
            return http_setting_refused(error, error_size,
                                        "an empty entry (expected ADDRESS or ADDRESS/PREFIX)");
        }
        const char *slash = memchr(e, '/', len);
        size_t addr_len = slash ? (size_t)(slash - e) : len;
        proxy_net *net = &tp->nets[tp->count];
        bool v4;
        if (!parse_address(e, addr_len, net->addr, &v4)) {
            free(tp);
            return http_setting_refused(error, error_size, "'%.*s' is not an IPv4 or IPv6 address",
                                        (int)len, e);
        }
        unsigned max = v4 ? 32 : 128, prefix = max;
        if (slash) {
            const char *d = slash + 1, *end = e + len;
            prefix = 0;
            if (d == end || end - d > 3) {
                prefix = max + 1;
            } else {
                for (; d < end; d++)
                    prefix = *d >= '0' && *d <= '9' ? prefix * 10 + (unsigned)(*d - '0') : max + 1;
            }
            if (prefix > max) {
                free(tp);
                return http_setting_refused(error, error_size, "'%.*s': the prefix must be 0 to %u",
                                            (int)len, e, max);
            }
        }
        net->prefix = prefix + (v4 ? 96 : 0);
        for (unsigned bit = net->prefix; bit < 128; bit++)
            if (net->addr[bit / 8] & (0x80u >> (bit % 8))) {
                free(tp);
                return http_setting_refused(
                    error, error_size,
                    "'%.*s' has bits set past its prefix (the network is written with "
                    "them zero)",
                    (int)len, e);
            }
        tp->count++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *out = tp;
    return 0;
}

void http_trusted_proxies_destroy(http_trusted_proxies *tp)
{
    free(tp);
}

/* Whether the 16 bytes at @a are in one of @tp's networks. */
static bool contains(const http_trusted_proxies *tp, const uint8_t a[16])
{
    for (size_t i = 0; i < tp->count; i++) {
        const proxy_net *n = &tp->nets[i];
        unsigned whole = n->prefix / 8, rest = n->prefix % 8;
        if (memcmp(a, n->addr, whole) != 0)
            continue;
        if (rest && ((a[whole] ^ n->addr[whole]) & (0xffu << (8 - rest)) & 0xffu))
            continue;
        return true;
    }
    return false;
}

bool http_trusted_proxies_contain(const http_trusted_proxies *tp, const char *addr, size_t len)
{
    uint8_t a[16];
    bool v4;
    if (!tp)
        return false;
    trim(&addr, &len);
    if (len >= 2 && addr[0] == '[' && addr[len - 1] == ']') {
        addr++;
        len -= 2;
    }
    return parse_address(addr, len, a, &v4) && contains(tp, a);
}

/* Write the address @a (from parse_address) into @out as text: an
 * IPv4-mapped one as IPv4, whichever way it was written. */
static size_t write_address(const uint8_t a[16], char *out)
{
    bool v4 = memcmp(a, v4_mapped, 12) == 0;
    if (!inet_ntop(v4 ? AF_INET : AF_INET6, v4 ? (const void *)(a + 12) : (const void *)a, out,
                   HTTP_CLIENT_ADDRESS_SIZE))
        out[0] = '\0';
    return strlen(out);
}

/* @peer copied into @out. */
static size_t copy_peer(const char *peer, char *out)
{
    size_t n = strnlen(peer, HTTP_CLIENT_ADDRESS_SIZE - 1);
    memcpy(out, peer, n);
    out[n] = '\0';
    return n;
}

/* The client of @req per its X-Forwarded-For fields, read from the
 * right past @tp's networks (its peer, a trusted proxy), into @out; false
 * when the peer itself is the client (no entry, or the rightmost one not
 * an address). */
static bool forwarded_client(const http_trusted_proxies *tp, const http_request *req,
                             uint8_t out[16])
{
    bool have_hop = false; /* @out holds the last trusted hop so far */
    for (size_t h = req->num_headers; h-- > 0;) {
        const http_header *f = &req->headers[h];
        if (!http_str_equal_ci(f->name, "X-Forwarded-For"))
            continue;
        const char *start = f->value.ptr;
        size_t end = f->value.len;
        /* Entries right to left: each ends at @end, starts after a comma. */
        for (;;) {
            size_t begin = end;
            while (begin > 0 && start[begin - 1] != ',')
                begin--;
            const char *e = start + begin;
            size_t len = end - begin;
            trim(&e, &len);
            strip_port(&e, &len);
            uint8_t a[16];
            bool v4;
            if (len > 0) { /* empty list elements are skipped (RFC 9110 section 5.6.1) */
                if (!parse_address(e, len, a, &v4))
                    return have_hop;
                memcpy(out, a, 16);
                if (!contains(tp, a))
                    return true;
                have_hop = true;
            }
            if (begin == 0)
                break;
            end = begin - 1;
        }
    }
    return have_hop;
}

size_t http_client_address(const http_trusted_proxies *tp, const char *peer,
                           const http_request *req, char *out)
{
    uint8_t a[16];
    if (!tp || !http_trusted_proxies_contain(tp, peer, strlen(peer)) ||
        !forwarded_client(tp, req, a))
        return copy_peer(peer, out);
    return write_address(a, out);
}

/* The connection's peer (getpeername once per connection), into @peer. */
static void resolve_peer(http_peer *peer)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    peer->known = true;
    peer->addr[0] = '\0';
    memset(peer->bytes, 0, sizeof(peer->bytes));
    if (getpeername(peer->fd, (struct sockaddr *)&ss, &sl) < 0)
        return;
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, peer->addr, sizeof(peer->addr));
        memcpy(peer->bytes, v4_mapped, 12);
        memcpy(peer->bytes + 12, &a->sin_addr, 4);
        peer->port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr))
            inet_ntop(AF_INET, &a->sin6_addr.s6_addr[12], peer->addr, sizeof(peer->addr));
        else
            inet_ntop(AF_INET6, &a->sin6_addr, peer->addr, sizeof(peer->addr));
        memcpy(peer->bytes, &a->sin6_addr, 16);
        peer->port = ntohs(a->sin6_port);
    }
}

const http_peer *http_peer_get(http_peer *peer)
{
    if (!peer->known)
        resolve_peer(peer);
    return peer;
}

const char *http_request_client(http_ctx *ctx)
{
    struct http_ctx_internal *in = ctx->internal;
    if (!in->client_known) {
        const http_peer *peer = http_peer_get(in->peer);
        http_client_address(in->proxies, peer->addr, ctx->req, in->client);
        in->client_known = true;
    }
    return in->client;
}

void http_request_client_bytes(http_ctx *ctx, uint8_t out[16])
{
    struct http_ctx_internal *in = ctx->internal;
    const http_peer *peer = http_peer_get(in->peer);
    /* An unknown peer ("") is trusted by no list, as in
     * http_client_address. */
    if (!in->proxies || !peer->addr[0] || !contains(in->proxies, peer->bytes) ||
        !forwarded_client(in->proxies, ctx->req, out))
        memcpy(out, peer->bytes, 16);
}
