/*
 * Router: maps (method, path) to a handler, with path parameters.
 *
 * Patterns are absolute paths whose segments are literals or `{name}`
 * parameters, which match one non-empty segment: `/todos/{id}`. Literal
 * segments win over parameters at the same position. Routes are added at
 * start-up (not thread-safe); lookups are read-only and any thread may make
 * them concurrently.
 *
 * A lookup answers: the handler and parameters; or "no route for that path"
 * (404); or "path known, method not" (405) with the Allow header value.
 * HEAD is served by the GET route when no HEAD route is registered.
 */
#ifndef CORING_HTTP_ROUTER_H
#define CORING_HTTP_ROUTER_H

#include <stddef.h>

#include "coring/http/parser.h"

#define HTTP_ROUTER_MAX_PARAMS 8

typedef struct http_router http_router;

/* The request context a handler receives; defined in coring/http/server.h. */
typedef struct http_ctx http_ctx;

/* A request handler. @user is the pointer given to http_router_add. */
typedef void (*http_handler_fn)(http_ctx *ctx, void *user);

typedef struct http_route_params {
    size_t count;
    http_str names[HTTP_ROUTER_MAX_PARAMS];   /* point into the pattern */
    http_str values[HTTP_ROUTER_MAX_PARAMS];  /* point into the request path */
} http_route_params;

typedef enum http_route_status {
    HTTP_ROUTE_FOUND = 0,
    HTTP_ROUTE_NOT_FOUND = 404,
    HTTP_ROUTE_METHOD_NOT_ALLOWED = 405,
} http_route_status;

typedef struct http_route_match {
    http_route_status status;
    unsigned route;             /* when FOUND: the route's index (http_router_route_pattern) */
    http_handler_fn handler;    /* as registered, when FOUND */
    void *user;                 /* as registered, when FOUND */
    uint64_t deadline_ns;       /* the route's deadline (http_router_set_deadline), 0: none */
    http_route_params params;
    char allow[96];             /* "GET, HEAD, POST" when METHOD_NOT_ALLOWED */
    unsigned methods;           /* the path's, HTTP_METHOD_BIT()s, when METHOD_NOT_ALLOWED */
} http_route_match;

/* The bit of @m in a method mask (http_router_methods, http_route_match). */
#define HTTP_METHOD_BIT(m) (1u << (m))

/* http_router_create - an empty router. NULL with errno ENOMEM. */
http_router *http_router_create(void);
void http_router_destroy(http_router *r);

/*
 * http_router_add - route @method requests for @pattern to @handler.
 * @pattern: copied; must start with '/'. @handler, @user: stored as given.
 * Returns 0, -EINVAL (bad pattern, or over HTTP_ROUTER_MAX_PARAMS
 * parameters), -EEXIST (same method and pattern twice) or -ENOMEM.
 */
int http_router_add(http_router *r, http_method method, const char *pattern, http_handler_fn handler,
                    void *user);

/*
 * http_router_match - look up @method and @path (origin-form path, without
 * the query). Fills @m. Returns m->status.
 */
http_route_status http_router_match(const http_router *r, http_method method, http_str path,
                                    http_route_match *m);

/*
 * http_router_methods - the methods @path has routes for, as a mask of
 * HTTP_METHOD_BIT()s, HEAD included whenever GET is (RFC 9110 section
 * 9.3.2); for the path "*" (OPTIONS *, RFC 9110 section 9.3.7) every method
 * of any route. 0 when no route matches @path (a 404). Read-only: any
 * thread, concurrently.
 */
unsigned http_router_methods(const http_router *r, http_str path);

/*
 * http_router_format_allow - write the methods of @methods (a mask of
 * HTTP_METHOD_BIT()s) as an Allow value (RFC 9110 section 10.2.1) into @out
 * (@size bytes, NUL-terminated; 96 bytes hold every method): "GET, HEAD,
 * POST", in enum order, HEAD added whenever GET is. Methods that do not fit
 * are left out. Any thread.
 */
void http_router_format_allow(unsigned methods, char *out, size_t size);

/*
 * http_router_route_count - how many (method, pattern) routes @r holds: their
 * indexes, in http_route_match.route, run from 0 in the order they were
 * added. For per-route state sized at start-up (metrics). Any thread.
 */
unsigned http_router_route_count(const http_router *r);

/*
 * http_router_set_deadline - the deadline of routes @first to @end - 1 (their
 * indexes, http_router_route_count before and after an app added its
 * routes): @deadline_ns ns from the start of a request's handling (the
 * reading that starts its duration in the metrics; 0: none), after
 * which its handler is cancelled and the request answered 504 (see
 * docs/deadlines.md). Returns 0, or -EINVAL when @end is past the last
 * route or below @first. Main thread, before serving.
 */
int http_router_set_deadline(http_router *r, unsigned first, unsigned end, uint64_t deadline_ns);

/*
 * http_router_route_pattern - the pattern route @index was added with
 * ("/todos/{id}", owned by @r), or NULL past the last. A linear search:
 * for start-up, not for each request. Any thread.
 */
const char *http_router_route_pattern(const http_router *r, unsigned index);

/* http_route_param - the value of parameter @name in @p, or NULL. */
const http_str *http_route_param(const http_route_params *p, const char *name);

/*
 * http_route_param_int64 - path parameter @name of @p ("/things/{id}") as
 * a decimal integer in [@min, @max], into *@out (untouched on any error):
 * an optional '-' and one or more decimal digits, nothing else (the value
 * is not percent-decoded: "%31" is no number); leading zeros are allowed.
 * The id every app reads: answer -EINVAL and -ERANGE with 400 (or 404
 * where any integer names a resource that may exist).
 * Returns 0, or -ENOENT (the route has no such parameter), -EINVAL (not a
 * decimal integer) or -ERANGE (outside [@min, @max], including beyond
 * int64_t). Request handler (any thread: it only reads @p).
 */
int http_route_param_int64(const http_route_params *p, const char *name, int64_t min, int64_t max,
                           int64_t *out);

/* Called by http_router_each once per (method, pattern) route. */
typedef void (*http_route_visit_fn)(http_method method, const char *pattern, void *user);

/*
 * http_router_each - call @visit for every route of @r with its method (as
 * added: HEAD only when added itself) and its pattern (owned by @r, as given
 * to http_router_add), in lookup order: by number of segments, literals
 * before parameters, methods in http_method order. For start-up and tools
 * (--list-routes, the OpenAPI document's filter), not for each request.
 * Any thread, once the routes are added.
 */
void http_router_each(const http_router *r, http_route_visit_fn visit, void *user);

#endif
