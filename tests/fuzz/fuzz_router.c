/*
 * libFuzzer target: the router (http_router_add, http_router_match).
 *
 * The input is lines: all but the last are patterns to add (the first byte
 * of each picks the method), the last is a path to look up with the method
 * its first byte picks. The app routes are always there too. Checks: a match
 * reports a handler, parameters that lie inside the path and are non-empty;
 * 405 comes with an Allow value; nothing crashes or leaks on bad patterns.
 */
#include "coring/http/router.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void handler(http_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
}

static const struct {
    http_method method;
    const char *pattern;
} app_routes[] = {
    {HTTP_GET, "/"},           {HTTP_GET, "/json"},         {HTTP_GET, "/plaintext"},
    {HTTP_GET, "/health"},     {HTTP_GET, "/todos"},        {HTTP_POST, "/todos"},
    {HTTP_GET, "/todos/{id}"}, {HTTP_PATCH, "/todos/{id}"}, {HTTP_DELETE, "/todos/{id}"},
};

static http_method pick_method(uint8_t b)
{
    return (http_method)(b % (HTTP_TRACE + 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    http_router *r = http_router_create();
    if (!r)
        abort();
    for (size_t i = 0; i < sizeof(app_routes) / sizeof(app_routes[0]); i++)
        if (http_router_add(r, app_routes[i].method, app_routes[i].pattern, handler, NULL) != 0)
            abort();

    const uint8_t *p = data, *end = data + size;
    int added = 0;
    for (;;) {
        const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || added >= 32)
            break;
        if (nl - p >= 1) {
            char *pattern = strndup((const char *)p + 1, (size_t)(nl - p - 1));
            (void)http_router_add(r, pick_method(p[0]), pattern, handler, (void *)&added);
            free(pattern);
            added++;
        }
        p = nl + 1;
    }

    /* The path as the parser would hand it: it starts with '/'. */
    http_method method = p < end ? pick_method(*p++) : HTTP_GET;
    size_t len = (size_t)(end - p) + 1;
    char *path = malloc(len);
    path[0] = '/';
    memcpy(path + 1, p, len - 1);
    http_route_match m;
    http_route_status st = http_router_match(r, method, (http_str){path, len}, &m);
    if (st != m.status)
        abort();
    if (st == HTTP_ROUTE_FOUND) {
        if (!m.handler || m.params.count > HTTP_ROUTER_MAX_PARAMS)
            abort();
        for (size_t i = 0; i < m.params.count; i++) {
            http_str v = m.params.values[i];
            if (v.len == 0 || v.ptr < path || v.ptr + v.len > path + len)
                abort();
            if (memchr(v.ptr, '/', v.len))
                abort();
            char name[64];
            size_t nl = m.params.names[i].len < 63 ? m.params.names[i].len : 63;
            memcpy(name, m.params.names[i].ptr, nl);
            name[nl] = 0;
            (void)http_route_param(&m.params, name);
        }
    } else if (st == HTTP_ROUTE_METHOD_NOT_ALLOWED) {
        if (m.allow[0] == 0 || strnlen(m.allow, sizeof(m.allow)) == sizeof(m.allow))
            abort();
    } else if (st != HTTP_ROUTE_NOT_FOUND) {
        abort();
    }
    free(path);
    http_router_destroy(r);
    return 0;
}
