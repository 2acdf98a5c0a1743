/*
 * Tests of the OpenAPI document's assembly (apps/openapi/openapi.c): the
 * server's description and the mounted apps' fragments (app_def.openapi)
 * put together, each operation kept while the router holds its route,
 * components merged by name; and what is refused at start-up (a fragment
 * that is not JSON, one operation or one component described twice
 * otherwise). The fragments are written with APP_JSON, as an app outside
 * the tree writes its own.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "coring/apps/apps.h"
#include "coring/core/json.h"
#include "coring/core/version.h"
#include "coring/http/router.h"

static void handler(http_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
}

static const char notes_fragment[] = APP_JSON({
    "tags": [{"name": "notes", "description": "Notes, with \"quotes\" and a \\ backslash"}],
    "paths": {
        "/notes": {
            "post": {"tags": ["notes"], "operationId": "createNote",
                     "responses": {"201": {"description": "made",
                                           "content": {"application/json": {"schema": {
                                               "$ref": "#/components/schemas/Note"}}}}}},
            "get": {"tags": ["notes"], "operationId": "listNotes",
                    "responses": {"200": {"description": "all of them"}}}
        },
        "/notes/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": true,
                            "schema": {"type": "integer", "minimum": 1}}],
            "get": {"tags": ["notes"], "operationId": "getNote",
                    "responses": {"404": {"$ref": "#/components/responses/NotFound"}}}
        }
    },
    "components": {"schemas": {"Note": {"type": "object", "properties": {
        "id": {"type": "integer"}, "body": {"type": "string", "maxLength": 1000}}}}}
});

static const char tags_fragment[] = APP_JSON({
    "paths": {"/tags": {"get": {"tags": ["notes"], "operationId": "listTags",
                                "responses": {"200": {"description": "ok"}}}}},
    "components": {"schemas": {"Note": {"type": "object", "properties": {
        "id": {"type": "integer"}, "body": {"type": "string", "maxLength": 1000}}}}}
});

static const app_def notes = {.name = "notes", .openapi = notes_fragment};
static const app_def tags = {.name = "tags", .openapi = tags_fragment};

/* A router with the server's routes app_openapi_mount adds, and @n of
 * "METHOD /pattern" routes. */
static http_router *router_with(const char *const *routes, size_t n)
{
    http_router *r = http_router_create();
    cr_assert(r);
    for (size_t i = 0; i < n; i++) {
        http_method m = strncmp(routes[i], "POST ", 5) == 0 ? HTTP_POST : HTTP_GET;
        cr_assert_eq(http_router_add(r, m, strchr(routes[i], ' ') + 1, handler, NULL), 0);
    }
    return r;
}

/* The document app_openapi_mount made, parsed, in @p. */
static cr_json_value parsed(cr_json_parser *p)
{
    size_t len;
    const char *doc = app_openapi_document(&len);
    cr_json_value root;
    cr_assert_eq(cr_json_parse(p, doc, len, &root), CR_JSON_OK, "%.*s", (int)len, doc);
    return root;
}

static bool has(cr_json_value obj, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    cr_json_value v = obj;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save))
        if (cr_json_object_get(v, k, strlen(k), &v) != CR_JSON_OK)
            return false;
    return true;
}

/* The operations the router holds are kept, with their path items'
 * parameters; the one it does not hold is left out; the app's tag, its
 * component and the server's come along; info.version is the library's. */
Test(openapi, fragments_put_together)
{
    static const char *const routes[] = {"POST /notes", "GET /notes/{id}", "GET /livez",
                                         "GET /readyz", "GET /metrics"};
    http_router *r = router_with(routes, 5);
    const app_def *apps[] = {&notes};
    cr_assert_eq(app_openapi_mount(r, apps, 1), 0);
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_json_value doc = parsed(p);

    cr_expect(has(doc, "paths./notes.post"));
    cr_expect(!has(doc, "paths./notes.get"), "GET /notes is described but not routed");
    cr_expect(has(doc, "paths./notes/{id}.get"));
    cr_expect(has(doc, "paths./notes/{id}.parameters"), "the path item's parameters");
    cr_expect(has(doc, "paths./docs/{file}.get"), "the server's own routes");
    cr_expect(has(doc, "components.schemas.Note"));
    cr_expect(has(doc, "components.responses.NotFound"), "the server's components");

    cr_json_value v, tag;
    const char *s;
    size_t len;
    cr_assert_eq(cr_json_object_get(doc, "tags", 4, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_array_at(v, 0, &tag), CR_JSON_OK);
    cr_assert_eq(cr_json_object_get(tag, "description", 11, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
    cr_expect_eq(len, strlen("Notes, with \"quotes\" and a \\ backslash"));
    cr_expect(memcmp(s, "Notes, with \"quotes\" and a \\ backslash", len) == 0,
              "APP_JSON keeps a string's escapes: %.*s", (int)len, s);

    cr_assert_eq(cr_json_object_get(doc, "info", 4, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_object_get(v, "version", 7, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_get_string(v, &s, &len), CR_JSON_OK);
    cr_expect(len == strlen(CORING_VERSION_STRING) && memcmp(s, CORING_VERSION_STRING, len) == 0);
    cr_json_parser_destroy(p);
    http_router_destroy(r);
}

/* Two apps may define one component alike; not otherwise. */
Test(openapi, components_by_name)
{
    static const char *const routes[] = {"POST /notes", "GET /tags"};
    http_router *r = router_with(routes, 2);
    const app_def *alike[] = {&notes, &tags};
    cr_expect_eq(app_openapi_mount(r, alike, 2), 0);
    http_router_destroy(r);

    static const char other[] = APP_JSON({"components": {"schemas": {"Note": {"type": "string"}}}});
    const app_def clash = {.name = "clash", .openapi = other};
    r = router_with(routes, 2);
    const app_def *apps[] = {&notes, &clash};
    cr_expect_eq(app_openapi_mount(r, apps, 2), -EINVAL);
    http_router_destroy(r);
}

/* Refused: a fragment that is not JSON, one that is not an object, an
 * operation that two apps describe. */
Test(openapi, refused)
{
    static const char *const routes[] = {"POST /notes"};
    const app_def broken = {.name = "broken", .openapi = "{\"paths\": {"};
    const app_def array = {.name = "array", .openapi = "[]"};
    const app_def again = {.name = "again", .openapi = notes_fragment};
    const app_def *cases[][2] = {{&broken, NULL}, {&array, NULL}, {&notes, &again}};
    for (size_t i = 0; i < 3; i++) {
        http_router *r = router_with(routes, 1);
        cr_expect_eq(app_openapi_mount(r, cases[i], cases[i][1] ? 2 : 1), -EINVAL, "case %zu", i);
        http_router_destroy(r);
    }
}

/* The merge adds the server-wide answers to every operation: traceparent
 * and tracestate after the operation's own parameters, traceresponse among
 * each response's headers (a shared response's in its component), 429 but
 * on the paths exempt from the rate limit by default, and never over what
 * the operation says itself. */
Test(openapi, server_wide_answers)
{
    static const char own[] = APP_JSON({
        "paths": {"/own": {"get": {
            "tags": ["notes"], "operationId": "own",
            "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
            "responses": {
                "200": {"description": "ok", "headers": {"ETag": {"schema": {"type": "string"}}}},
                "429": {"description": "its own"}}}}}
    });
    const app_def mine = {.name = "mine", .openapi = own};
    static const char *const routes[] = {"POST /notes", "GET /notes/{id}", "GET /own",
                                         "GET /livez"};
    http_router *r = router_with(routes, 4);
    const app_def *apps[] = {&notes, &mine};
    cr_assert_eq(app_openapi_mount(r, apps, 2), 0);
    cr_json_parser *p = cr_json_parser_create(0, 0);
    cr_json_value doc = parsed(p);

    cr_expect(has(doc, "paths./notes.post.responses.429.$ref"));
    cr_expect(has(doc, "paths./notes.post.responses.201.headers.traceresponse.$ref"));
    cr_expect(has(doc, "paths./notes.post.responses.201.content"), "the response's own members");
    cr_expect(!has(doc, "paths./notes/{id}.get.responses.404.headers"),
              "a reference has no members but its own");
    cr_expect(has(doc, "components.responses.NotFound.headers.traceresponse"));
    cr_expect(has(doc, "components.responses.TooManyRequests.headers.Retry-After"));
    cr_expect(!has(doc, "paths./livez.get.responses.429"), "/livez is exempt");
    cr_expect(has(doc, "paths./livez.get.responses.200.headers.traceresponse"));
    cr_expect(has(doc, "paths./own.get.responses.200.headers.ETag"), "its own header kept");
    cr_expect(has(doc, "paths./own.get.responses.200.headers.traceresponse"));
    cr_expect(has(doc, "paths./own.get.responses.429.description"), "its own 429 kept");
    cr_expect(!has(doc, "paths./own.get.responses.429.$ref"));

    const char *expected[] = {NULL, "#/components/parameters/Traceparent",
                              "#/components/parameters/Tracestate"};
    cr_json_value v, e;
    cr_assert_eq(cr_json_object_get(doc, "paths", 5, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_object_get(v, "/own", 4, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_object_get(v, "get", 3, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_object_get(v, "parameters", 10, &v), CR_JSON_OK);
    cr_assert_eq(cr_json_array_size(v), 3);
    cr_assert_eq(cr_json_array_at(v, 0, &e), CR_JSON_OK);
    cr_expect(has(e, "name"), "the operation's own parameter first");
    for (size_t i = 1; i < 3; i++) {
        const char *s;
        size_t len;
        cr_assert_eq(cr_json_array_at(v, i, &e), CR_JSON_OK);
        cr_assert_eq(cr_json_object_get(e, "$ref", 4, &e), CR_JSON_OK);
        cr_assert_eq(cr_json_get_string(e, &s, &len), CR_JSON_OK);
        cr_expect(len == strlen(expected[i]) && memcmp(s, expected[i], len) == 0, "%.*s",
                  (int)len, s);
    }
    cr_json_parser_destroy(p);
    http_router_destroy(r);
}
