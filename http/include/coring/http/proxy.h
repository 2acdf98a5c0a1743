/*
 * The client of a request behind reverse proxies: the address a request
 * came from is its connection's peer, unless that peer is a proxy the
 * operator trusts (--trusted-proxies), in which case it is read from
 * X-Forwarded-For, the de facto header HAProxy (option forwardfor), nginx
 * and the cloud balancers append the address they received a request from
 * to (MDN, "X-Forwarded-For"; RFC 7239 section 5.2 is its standard form,
 * Forwarded: for=, which these proxies do not send by default).
 *
 * X-Forwarded-For is a list any client can start: only the entries that
 * trusted proxies appended can be believed. The list is read from the
 * right: each entry a trusted proxy appended names the hop before it; the
 * first (rightmost) entry that is not a trusted proxy is the client, as
 * nginx's realip module does with real_ip_recursive on. A peer that is not
 * trusted is the client whatever the header says: a client cannot choose
 * its own address by sending one.
 *
 * The access line logs this address as `client` (docs/logs.md); rate
 * limiting per client (issue 43) keys on it.
 */
#ifndef CORING_HTTP_PROXY_H
#define CORING_HTTP_PROXY_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/http/parser.h"
#include "coring/http/server.h"

/* Room for an address as text (INET6_ADDRSTRLEN) and its NUL. */
#define HTTP_CLIENT_ADDRESS_SIZE 46

/* Entries accepted in a --trusted-proxies list. */
#define HTTP_TRUSTED_PROXIES_MAX 64

typedef struct http_trusted_proxies http_trusted_proxies;

/*
 * http_trusted_proxies_create - the proxies of the comma-separated list
 * @list (--trusted-proxies): each an IPv4 or IPv6 address, or a network
 * as ADDRESS/PREFIX (CIDR notation, RFC 4632 section 3.1; RFC 4291 section
 * 2.3): "127.0.0.1, 10.0.0.0/8, fd00::/8". Spaces around an entry are
 * ignored; an IPv4 entry also matches its IPv4-mapped IPv6 form
 * (::ffff:a.b.c.d, RFC 4291 section 2.5.5.2), as a dual-stack listener
 * sees IPv4 peers. Host bits set below the prefix are refused (a typo in
 * the prefix, more likely than meant).
 * On success *@out is set (free with http_trusted_proxies_destroy) and 0
 * returned. Errors: -EINVAL with a message naming the entry in @error
 * (@error_size bytes, NUL-terminated; may be NULL), for an empty list or
 * entry, an address inet_pton(3) does not take, a prefix out of range, or
 * more than HTTP_TRUSTED_PROXIES_MAX entries; -ENOMEM. *@out is NULL on
 * failure. Main thread, at start-up; read-only after, by every thread.
 */
int http_trusted_proxies_create(const char *list, http_trusted_proxies **out, char *error,
                                size_t error_size);

/* http_trusted_proxies_destroy - free @tp (NULL is fine), once no server uses it. */
void http_trusted_proxies_destroy(http_trusted_proxies *tp);

/*
 * http_trusted_proxies_contain - whether the address in the @len bytes at
 * @addr (IPv4 or IPv6 text; an IPv6 one may be in brackets) is one of
 * @tp's. False for NULL @tp or text that is not an address. Any thread.
 */
bool http_trusted_proxies_contain(const http_trusted_proxies *tp, const char *addr, size_t len);

/*
 * http_client_address - the client of @req, received from @peer (the
 * connection's peer address as text, "" when unknown), as the top of this
 * file says: @peer itself unless it is one of @tp's (NULL: none trusted);
 * else the rightmost X-Forwarded-For entry (every field of that name, in
 * order, read as one list: RFC 9110 section 5.3) that is not a trusted
 * proxy; the leftmost entry when every one is trusted; the last trusted
 * hop read (the peer, or the entry right of it) when an entry is not an
 * address (a port after it, "1.2.3.4:80" or "[2001:db8::1]:80", is
 * allowed and dropped; "unknown" and obfuscated names are not addresses).
 * Writes it into @out (HTTP_CLIENT_ADDRESS_SIZE bytes, NUL-terminated; an
 * entry as inet_ntop(3) writes it, IPv4-mapped IPv6 as IPv4) and returns
 * its length. Pure: any thread; allocates nothing.
 */
size_t http_client_address(const http_trusted_proxies *tp, const char *peer,
                           const http_request *req, char *out);

/*
 * http_request_client - the client address of @ctx's request, as
 * http_client_address finds it with the server's trusted proxies
 * (http_server_config.trusted_proxies): what the access line logs as
 * `client`. NUL-terminated, valid until the request is answered; "" when
 * the connection's peer cannot be known (getpeername(2) failed: the
 * client already gone). The first call of a connection asks the kernel
 * for its peer (one getpeername), the first of a request reads its
 * X-Forwarded-For; later calls return what they found. Handler context
 * (the request's coroutine).
 */
const char *http_request_client(http_ctx *ctx);

#endif
