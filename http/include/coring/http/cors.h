/*
 * CORS: which other origins a browser lets read coring's answers (the Fetch
 * standard's CORS protocol, https://fetch.spec.whatwg.org/#http-cors-protocol).
 *
 * A server with http_server_config.cors set answers CORS preflights
 * (OPTIONS with Origin and Access-Control-Request-Method) itself, before
 * routing, and adds Access-Control-Allow-Origin to the responses of
 * requests from an allowed origin; every app gets it without code of its
 * own. Without it (NULL, the default) no CORS header is ever sent. See
 * docs/cors.md for what comes back when.
 */
#ifndef CORING_HTTP_CORS_H
#define CORING_HTTP_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/http/parser.h"

typedef struct http_cors http_cors;

/* Seconds a browser may cache a preflight's answer (Access-Control-Max-Age).
 * Chromium caps it at 7200, Firefox at 86400. */
#define HTTP_CORS_MAX_AGE_S 600

/* Request headers a preflight may be granted (Access-Control-Allow-Headers),
 * as sent back. Any other header a page asks for is not granted.
 * Idempotency-Key: a page's POST /users or /todos retried safely
 * (docs/users.md). */
#define HTTP_CORS_ALLOWED_HEADERS                                                                  \
    "Accept, Accept-Language, Content-Language, Content-Type, Authorization, X-Request-Id, "        \
    "Idempotency-Key"

/*
 * http_cors_create - the CORS policy for the comma-separated origins in
 * @origins (--cors-origins). Each is an origin as a browser serialises it
 * in the Origin header, scheme "://" host [":" port] (RFC 6454 section 6.1):
 * no path, no trailing '/', no user info, and no port where it is the
 * scheme's default (80 for http, 443 for https), which a browser leaves
 * out. Scheme and host are lower-cased; spaces around an entry are ignored.
 * "*" alone means any origin (answered Access-Control-Allow-Origin: *,
 * which browsers honour only for requests without credentials). "null"
 * (the origin of sandboxed and file: pages) is refused: any page can
 * claim it.
 * On success *@out is set (free with http_cors_destroy) and 0 returned.
 * Errors: -EINVAL with a message naming the entry written to @error
 * (@error_size bytes, NUL-terminated; may be NULL); -ENOMEM.
 * Main thread, at start-up; the policy is read-only after.
 */
int http_cors_create(const char *origins, http_cors **out, char *error, size_t error_size);

/* http_cors_destroy - free @cors (NULL is fine), once no server uses it. */
void http_cors_destroy(http_cors *cors);

/*
 * http_cors_origin_allowed - whether an Origin field value @origin may read
 * responses: byte for byte one of the configured origins (browsers send
 * scheme and host in lower case), or anything under "*". Any thread.
 */
bool http_cors_origin_allowed(const http_cors *cors, http_str origin);

#endif
