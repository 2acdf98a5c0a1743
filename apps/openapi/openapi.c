/*
 * GET /openapi.json and GET /docs: the OpenAPI document of the routes this
 * server has mounted, and a Swagger UI page that renders it.
 *
 * The document is written once, as data, in apps/openapi/openapi.json;
 * embed.py cuts it into pieces at build time (openapi_data.h). The first
 * request for it puts together the pieces whose (method, pattern) the
 * router holds, so that a server started with --apps hello describes only
 * hello's routes and never a route it would answer 404. The page's files
 * (Swagger UI's, from npm, and ours) are embedded the same way: nothing is
 * read from disk or from the internet when the page is viewed.
 */
#include "openapi_data.h"

#include "coring/apps/apps.h"
#include "coring/core/buffer.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/http/server.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DOCS_NOT_BUILT                                                                             \
    "the docs page was not built: npm was missing at build time; install it "                      \
    "(.ci/install-deps test) and rebuild"

static const http_router *router; /* set by app_openapi_mount, complete by the first request */
static pthread_once_t built = PTHREAD_ONCE_INIT;
static cr_buf document; /* the filtered document; failed set when out of memory */

/* One (method, pattern) pair the router holds, for the filter. */
typedef struct mounted_route {
    const char *method;
    const char *pattern;
} mounted_route;

typedef struct route_list {
    size_t count;
    size_t cap;
    mounted_route *items;
    bool failed;
} route_list;

static const char *method_name(http_method m)
{
    static const char *const names[] = {
        [HTTP_GET] = "GET",         [HTTP_HEAD] = "HEAD",       [HTTP_POST] = "POST",
        [HTTP_PUT] = "PUT",         [HTTP_PATCH] = "PATCH",     [HTTP_DELETE] = "DELETE",
        [HTTP_OPTIONS] = "OPTIONS", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
    };
    return (unsigned)m < sizeof(names) / sizeof(names[0]) && names[m] ? names[m] : "";
}

static void collect_route(http_method method, const char *pattern, void *user)
{
    route_list *l = user;
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        mounted_route *items = realloc(l->items, cap * sizeof(*items));
        if (!items) {
            l->failed = true;
            return;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = (mounted_route){method_name(method), pattern};
}

static bool is_mounted(const route_list *l, const char *method, const char *pattern)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->items[i].method, method) == 0 && strcmp(l->items[i].pattern, pattern) == 0)
            return true;
    return false;
}

/* Puts the document together once (pthread_once: the first request of any
 * thread; the others wait for it). */
static void build_document(void)
{
    route_list routes = {0};
    http_router_each(router, collect_route, &routes);
    bool *op_in = calloc(openapi_num_operations ? openapi_num_operations : 1, sizeof(bool));
    bool *tag_in = calloc(openapi_num_tags ? openapi_num_tags : 1, sizeof(bool));
    cr_buf *b = &document;
    if (routes.failed || !op_in || !tag_in) {
        b->failed = true;
        goto out;
    }
    for (unsigned p = 0; p < openapi_num_paths; p++)
        for (unsigned k = 0; k < openapi_paths[p].count; k++) {
            const openapi_operation *op = &openapi_operations[openapi_paths[p].first + k];
            if (!is_mounted(&routes, op->method, openapi_paths[p].pattern))
                continue;
            op_in[openapi_paths[p].first + k] = true;
            for (unsigned t = 0; t < openapi_num_tags; t++)
                if (strcmp(openapi_tags[t].name, op->tag) == 0)
                    tag_in[t] = true;
        }

    cr_buf_append_str(b, "{");
    cr_buf_append_str(b, openapi_head);
    cr_buf_append_str(b, ",\"tags\":[");
    bool first = true;
    for (unsigned t = 0; t < openapi_num_tags; t++) {
        if (!tag_in[t])
            continue;
        if (!first)
            cr_buf_append_str(b, ",");
        cr_buf_append_str(b, openapi_tags[t].json);
        first = false;
    }
    cr_buf_append_str(b, "],\"paths\":{");
    first = true;
    for (unsigned p = 0; p < openapi_num_paths; p++) {
        const openapi_path *path = &openapi_paths[p];
        bool any = false;
        for (unsigned k = 0; k < path->count; k++)
            any = any || op_in[path->first + k];
        if (!any)
            continue;
        if (!first)
            cr_buf_append_str(b, ",");
        first = false;
        cr_json_escape_string(b, path->pattern, strlen(path->pattern));
        cr_buf_append_str(b, ":{");
        cr_buf_append_str(b, path->members);
        bool first_member = path->members[0] == '\0';
        for (unsigned k = 0; k < path->count; k++) {
            if (!op_in[path->first + k])
                continue;
            if (!first_member)
                cr_buf_append_str(b, ",");
            first_member = false;
            cr_buf_append_str(b, openapi_operations[path->first + k].json);
        }
        cr_buf_append_str(b, "}");
    }
    cr_buf_append_str(b, "}}");
out:
    if (b->failed)
        cr_log_error("openapi: out of memory putting the document together");
    free(op_in);
    free(tag_in);
    free(routes.items);
}

static void get_openapi(http_ctx *ctx, void *user)
{
    (void)user;
    pthread_once(&built, build_document);
    if (document.failed) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    http_respond(ctx, 200, "application/json", document.data, document.len);
}

/* Answers the docs file called @name (@len bytes), or 404/503. */
static void serve_docs_file(http_ctx *ctx, const char *name, size_t len)
{
    if (!openapi_docs_built) {
        http_respond_error(ctx, 503, DOCS_NOT_BUILT);
        return;
    }
    for (unsigned i = 0; i < openapi_num_docs_files; i++) {
        const openapi_docs_file *f = &openapi_docs_files[i];
        if (strlen(f->name) == len && memcmp(f->name, name, len) == 0) {
            http_add_header(ctx, "Cache-Control", "no-cache");
            http_respond(ctx, 200, f->content_type, f->data, f->len);
            return;
        }
    }
    http_respond_error(ctx, 404, "no such docs file");
}

static void get_docs(http_ctx *ctx, void *user)
{
    (void)user;
    serve_docs_file(ctx, "index.html", 10);
}

static void get_docs_file(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *file = http_route_param(ctx->params, "file");
    /* index.html is the page at /docs, not a file of it. */
    if (!file || (file->len == 10 && memcmp(file->ptr, "index.html", 10) == 0)) {
        http_respond_error(ctx, 404, "no such docs file");
        return;
    }
    serve_docs_file(ctx, file->ptr, file->len);
}

int app_openapi_mount(http_router *r)
{
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/openapi.json", get_openapi, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/docs", get_docs, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/docs/{file}", get_docs_file, NULL)) < 0)
        return err;
    router = r;
    return 0;
}
