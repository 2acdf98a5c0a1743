/*
 * Router: (method, path) to handler, with `{name}` path parameters. See
 * coring/http/router.h.
 *
 * An app has a handful of routes, so they are kept as a sorted array of path
 * shapes rather than a trie: a lookup splits the path once into segments on
 * the stack and walks the shapes with as many segments, in priority order
 * (literal before parameter, position by position), so the first shape that
 * matches with a handler for the method wins. Before the walk, a path that
 * is byte for byte a shape without parameters (GET /, GET /todos) is
 * looked up by its length and text among those shapes alone: no split, no
 * walk. Nothing is allocated on lookup.
 */
#include "coring/http/router.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Deepest pattern accepted; a path with more segments matches nothing. */
#define ROUTER_MAX_SEGMENTS 32

#define METHOD_COUNT (HTTP_TRACE + 1)

/* Names for the Allow header, in the order it lists them (enum order). */
static const char *const method_names[METHOD_COUNT] = {
    [HTTP_GET] = "GET",         [HTTP_HEAD] = "HEAD",       [HTTP_POST] = "POST",
    [HTTP_PUT] = "PUT",         [HTTP_PATCH] = "PATCH",     [HTTP_DELETE] = "DELETE",
    [HTTP_OPTIONS] = "OPTIONS", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
};

typedef struct route_segment {
    http_str text; /* the literal, or the parameter's name without braces */
    bool param;    /* `{name}`: matches one non-empty path segment */
} route_segment;

/* One method's handler on a shape. */
typedef struct route_handler {
    http_handler_fn fn;
    void *user;
    char *pattern; /* owned copy; names point into it */
    unsigned index; /* 0.. in the order added (http_route_match.route) */
    uint64_t deadline_ns; /* http_router_set_deadline's; 0: none */
    http_str names[HTTP_ROUTER_MAX_PARAMS];
} route_handler;

/* One path shape (the same segments, whatever the parameter names) and its
 * handler per method. */
typedef struct route {
    size_t nsegments;
    route_segment *segments; /* literals point into handlers[first].pattern */
    unsigned methods;        /* bit (1 << method) per method with a handler */
    route_handler *handlers; /* [METHOD_COUNT], out of line to keep this small */
} route;

/* A shape without parameters by its whole text: the exact-match fast
 * path of http_router_match. */
typedef struct static_route {
    size_t len;
    const char *pattern; /* a handler's pattern: the shape's literal text */
    size_t route;        /* index into http_router.routes */
} static_route;

struct http_router {
    route *routes; /* by nsegments, then literal-before-parameter */
    size_t count;
    size_t cap;
    static_route *statics; /* [cap]: the shapes without parameters, any order */
    size_t num_statics;
    size_t max_segments; /* of any route: longer paths are not looked at */
    unsigned all_methods; /* of every route: the Allow of OPTIONS * */
    unsigned num_handlers; /* (method, pattern) pairs added */
};

http_router *http_router_create(void)
{
    return calloc(1, sizeof(http_router));
}

void http_router_destroy(http_router *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->count; i++) {
        for (size_t m = 0; m < METHOD_COUNT; m++)
            free(r->routes[i].handlers[m].pattern);
        free(r->routes[i].handlers);
        free(r->routes[i].segments);
    }
    free(r->routes);
    free(r->statics);
    free(r);
}

void http_router_each(const http_router *r, http_route_visit_fn visit, void *user)
{
    for (size_t i = 0; r && i < r->count; i++)
        for (int m = 0; m < METHOD_COUNT; m++)
            if (r->routes[i].methods & (1u << m))
                visit((http_method)m, r->routes[i].handlers[m].pattern, user);
}

/*
 * Splits @path (which starts with '/') into the segments between slashes:
 * "/" is one empty segment, "/todos/" is "todos" and "". Returns their
 * number, or max + 1 when there are more than @max.
 */
static size_t split_path(http_str path, http_str *segments, size_t max)
{
    const char *p = path.ptr + 1;
    const char *end = path.ptr + path.len;
    size_t n = 0;
    for (;;) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        const char *e = slash ? slash : end;
        if (n == max)
            return max + 1;
        segments[n++] = (http_str){p, (size_t)(e - p)};
        if (!slash)
            return n;
        p = slash + 1;
    }
}

/* Checks one pattern segment and says whether it is a `{name}` parameter. */
static int parse_segment(http_str s, route_segment *out)
{
    bool param = s.len >= 2 && s.ptr[0] == '{' && s.ptr[s.len - 1] == '}';
    http_str text = param ? (http_str){s.ptr + 1, s.len - 2} : s;
    if (param && text.len == 0)
        return -EINVAL;
    for (size_t i = 0; i < text.len; i++) {
        unsigned char c = (unsigned char)text.ptr[i];
        /* A path from the parser holds visible ASCII only; '?' starts the
         * query and braces only delimit a whole parameter segment. */
        if (c <= 0x20 || c >= 0x7f || c == '?' || c == '{' || c == '}')
            return -EINVAL;
    }
    *out = (route_segment){text, param};
    return 0;
}

/* Order of shapes with as many segments: literal before parameter at the
 * first position where they differ. <0, 0 (same kinds) or >0. */
static int compare_kinds(const route_segment *a, const route_segment *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i].param != b[i].param)
            return a[i].param ? 1 : -1;
    return 0;
}

static bool same_shape(const route *rt, const route_segment *segs, size_t n)
{
    if (rt->nsegments != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        const route_segment *a = &rt->segments[i];
        if (a->param != segs[i].param)
            return false;
        if (!a->param && (a->text.len != segs[i].text.len ||
                          memcmp(a->text.ptr, segs[i].text.ptr, a->text.len) != 0))
            return false;
    }
    return true;
}

/* A new, empty route for the shape @segs (n >= 1 of them) at its place in
 * the order, or NULL. */
static route *insert_route(http_router *r, const route_segment *segs, size_t n)
{
    if (r->count == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        route *routes = realloc(r->routes, cap * sizeof(route));
        if (!routes)
            return NULL;
        r->routes = routes;
        static_route *statics = realloc(r->statics, cap * sizeof(static_route));
        if (!statics)
            return NULL;
        r->statics = statics;
        r->cap = cap;
    }
    route_segment *copy = calloc(n ? n : 1, sizeof(route_segment));
    route_handler *handlers = calloc(METHOD_COUNT, sizeof(route_handler));
    if (!copy || !handlers) {
        free(copy);
        free(handlers);
        return NULL;
    }
    memcpy(copy, segs, n * sizeof(route_segment));

    size_t at = 0;
    while (at < r->count &&
           (r->routes[at].nsegments < n ||
            (r->routes[at].nsegments == n && compare_kinds(r->routes[at].segments, segs, n) <= 0)))
        at++;
    memmove(&r->routes[at + 1], &r->routes[at], (r->count - at) * sizeof(route));
    r->count++;
    r->routes[at] = (route){.nsegments = n, .segments = copy, .handlers = handlers};
    if (n > r->max_segments)
        r->max_segments = n;
    return &r->routes[at];
}

/* @r's statics from its routes (their indices move as routes are
 * inserted): each shape whose segments are all literals. */
static void index_statics(http_router *r)
{
    r->num_statics = 0;
    for (size_t i = 0; i < r->count; i++) {
        const route *rt = &r->routes[i];
        bool literal = true;
        for (size_t k = 0; k < rt->nsegments && literal; k++)
            literal = !rt->segments[k].param;
        if (!literal)
            continue;
        const char *pattern = rt->handlers[__builtin_ctz(rt->methods)].pattern;
        r->statics[r->num_statics++] = (static_route){strlen(pattern), pattern, i};
    }
}

int http_router_add(http_router *r, http_method method, const char *pattern,
                    http_handler_fn handler, void *user)
{
    if (!r || !pattern || !handler || method == HTTP_METHOD_OTHER ||
        (unsigned)method >= METHOD_COUNT || pattern[0] != '/')
        return -EINVAL;
    char *copy = strdup(pattern);
    if (!copy)
        return -ENOMEM;

    http_str parts[ROUTER_MAX_SEGMENTS];
    route_segment segs[ROUTER_MAX_SEGMENTS];
    route_handler h = {.fn = handler, .user = user, .pattern = copy};
    size_t nparams = 0;
    int err = -EINVAL;
    size_t n = split_path((http_str){copy, strlen(copy)}, parts, ROUTER_MAX_SEGMENTS);
    if (n > ROUTER_MAX_SEGMENTS)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        /* Only the last segment may be empty: "/" and "/todos/", not "/a//b". */
        if (parts[i].len == 0 && i + 1 < n)
            goto fail;
        if (parse_segment(parts[i], &segs[i]) < 0)
            goto fail;
        if (!segs[i].param)
            continue;
        if (nparams == HTTP_ROUTER_MAX_PARAMS)
            goto fail;
        for (size_t k = 0; k < nparams; k++)
            if (h.names[k].len == segs[i].text.len &&
                memcmp(h.names[k].ptr, segs[i].text.ptr, segs[i].text.len) == 0)
                goto fail; /* the same name twice */
        h.names[nparams++] = segs[i].text;
    }

    route *rt = NULL;
    for (size_t i = 0; i < r->count && !rt; i++)
        if (same_shape(&r->routes[i], segs, n))
            rt = &r->routes[i];
    if (rt && (rt->methods & (1u << method))) {
        err = -EEXIST;
        goto fail;
    }
    if (!rt && !(rt = insert_route(r, segs, n))) {
        err = -ENOMEM;
        goto fail;
    }
    h.index = r->num_handlers++;
    rt->handlers[method] = h;
    rt->methods |= 1u << method;
    r->all_methods |= 1u << method;
    index_statics(r);
    return 0;
fail:
    free(copy);
    return err;
}

static bool route_matches(const route *rt, const http_str *segs)
{
    for (size_t i = 0; i < rt->nsegments; i++) {
        const route_segment *s = &rt->segments[i];
        if (s->param ? segs[i].len == 0
                     : (s->text.len != segs[i].len ||
                        memcmp(s->text.ptr, segs[i].ptr, segs[i].len) != 0))
            return false;
    }
    return true;
}

/* The Allow value for @methods (RFC 9110 section 10.2.1), HEAD included
 * whenever GET is (RFC 9110 section 9.3.2): see router.h. */
void http_router_format_allow(unsigned methods, char *out, size_t size)
{
    if (methods & (1u << HTTP_GET))
        methods |= 1u << HTTP_HEAD;
    size_t len = 0;
    out[0] = '\0';
    for (int m = HTTP_GET; m < METHOD_COUNT; m++) {
        if (!(methods & (1u << m)))
            continue;
        size_t n = strlen(method_names[m]);
        if (len + (len ? 2 : 0) + n + 1 > size)
            break;
        if (len) {
            memcpy(out + len, ", ", 2);
            len += 2;
        }
        memcpy(out + len, method_names[m], n + 1);
        len += n;
    }
}

/* The handler of @rt for @method, if it has one (HEAD answered by GET's
 * when it has none of its own: RFC 9110 section 9.3.2), into @m with the
 * parameters among @segs (@rt's segments, as many): FOUND; else
 * NOT_FOUND. */
static http_route_status take_handler(const route *rt, http_method method, const http_str *segs,
                                      http_route_match *m)
{
    int slot = method;
    if (method == HTTP_HEAD && !(rt->methods & (1u << HTTP_HEAD)))
        slot = HTTP_GET;
    if (method == HTTP_METHOD_OTHER || (unsigned)method >= METHOD_COUNT ||
        !(rt->methods & (1u << slot)))
        return HTTP_ROUTE_NOT_FOUND;
    const route_handler *h = &rt->handlers[slot];
    m->status = HTTP_ROUTE_FOUND;
    m->route = h->index;
    m->handler = h->fn;
    m->user = h->user;
    m->deadline_ns = h->deadline_ns;
    for (size_t k = 0; k < rt->nsegments; k++) {
        if (rt->segments[k].param) {
            m->params.names[m->params.count] = h->names[m->params.count];
            m->params.values[m->params.count] = segs[k];
            m->params.count++;
        }
    }
    return HTTP_ROUTE_FOUND;
}

http_route_status http_router_match(const http_router *r, http_method method, http_str path,
                                    http_route_match *m)
{
    m->status = HTTP_ROUTE_NOT_FOUND;
    m->handler = NULL;
    m->user = NULL;
    m->params.count = 0;
    m->allow[0] = '\0';
    m->methods = 0;
    if (!r || path.len == 0 || path.ptr[0] != '/')
        return m->status;

    /* A path that is a shape without parameters, byte for byte: that
     * shape comes first among those it matches (literal before parameter
     * at every position), so when it has the method's handler, the walk
     * below would find the same. Otherwise the walk decides (another
     * shape's handler, or 405 with every matching shape's methods). */
    for (size_t i = 0; i < r->num_statics; i++) {
        const static_route *s = &r->statics[i];
        if (s->len == path.len && memcmp(s->pattern, path.ptr, path.len) == 0) {
            if (take_handler(&r->routes[s->route], method, NULL, m) == HTTP_ROUTE_FOUND)
                return m->status;
            break;
        }
    }

    http_str segs[ROUTER_MAX_SEGMENTS];
    size_t n = split_path(path, segs, r->max_segments);
    if (n > r->max_segments)
        return m->status;

    unsigned allowed = 0;
    for (size_t i = 0; i < r->count; i++) {
        const route *rt = &r->routes[i];
        if (rt->nsegments != n)
            continue;
        if (!route_matches(rt, segs))
            continue;
        if (take_handler(rt, method, segs, m) == HTTP_ROUTE_FOUND)
            return m->status;
        allowed |= rt->methods;
    }
    if (allowed) {
        m->status = HTTP_ROUTE_METHOD_NOT_ALLOWED;
        m->methods = allowed & (1u << HTTP_GET) ? allowed | (1u << HTTP_HEAD) : allowed;
        http_router_format_allow(allowed, m->allow, sizeof(m->allow));
    }
    return m->status;
}

unsigned http_router_methods(const http_router *r, http_str path)
{
    unsigned methods;
    if (!r)
        return 0;
    if (path.len == 1 && path.ptr[0] == '*') {
        methods = r->all_methods;
    } else {
        /* No route has the unknown method: every matching shape is only
         * gathered into the mask. */
        http_route_match m;
        http_router_match(r, HTTP_METHOD_OTHER, path, &m);
        methods = m.methods;
    }
    return methods & (1u << HTTP_GET) ? methods | (1u << HTTP_HEAD) : methods;
}

const http_str *http_route_param(const http_route_params *p, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < p->count; i++)
        if (p->names[i].len == n && memcmp(p->names[i].ptr, name, n) == 0)
            return &p->values[i];
    return NULL;
}

int http_route_param_int64(const http_route_params *p, const char *name, int64_t min, int64_t max,
                           int64_t *out)
{
    const http_str *v = http_route_param(p, name);
    if (!v)
        return -ENOENT;
    size_t i = v->len && v->ptr[0] == '-';
    if (i == v->len)
        return -EINVAL;
    /* Accumulate the magnitude as unsigned; past 2^63 it is out of range
     * whatever the sign (digits still to come are checked). */
    uint64_t magnitude = 0;
    bool over = false;
    for (; i < v->len; i++) {
        unsigned char c = (unsigned char)v->ptr[i];
        if (c < '0' || c > '9')
            return -EINVAL;
        if (magnitude > (UINT64_MAX - (c - '0')) / 10)
            over = true;
        else
            magnitude = magnitude * 10 + (c - '0');
    }
    bool negative = v->ptr[0] == '-';
    if (over || magnitude > (uint64_t)INT64_MAX + negative)
        return -ERANGE;
    int64_t value = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    if (value < min || value > max)
        return -ERANGE;
    *out = value;
    return 0;
}

unsigned http_router_route_count(const http_router *r)
{
    return r ? r->num_handlers : 0;
}

const char *http_router_route_pattern(const http_router *r, unsigned index)
{
    for (size_t i = 0; r && i < r->count; i++)
        for (size_t m = 0; m < METHOD_COUNT; m++)
            if ((r->routes[i].methods & (1u << m)) && r->routes[i].handlers[m].index == index)
                return r->routes[i].handlers[m].pattern;
    return NULL;
}

int http_router_set_deadline(http_router *r, unsigned first, unsigned end, uint64_t deadline_ns)
{
    if (end < first || end > r->num_handlers)
        return -EINVAL;
    for (size_t i = 0; i < r->count; i++)
        for (size_t m = 0; m < METHOD_COUNT; m++) {
            route_handler *h = &r->routes[i].handlers[m];
            if ((r->routes[i].methods & (1u << m)) && h->index >= first && h->index < end)
                h->deadline_ns = deadline_ns;
        }
    return 0;
}
