/*
 * hello: fixed answers, the shapes of TechEmpower's plaintext and JSON
 * tests. The JSON body of /json is serialised per request, as that test
 * requires; GET / answers a constant.
 */
#include "coring/apps/apps.h"
#include "coring/core/json_writer.h"
#include "coring/http/server.h"

static void get_root(http_ctx *ctx, void *user)
{
    (void)user;
    static const char body[] = "{\"message\":\"hello world\"}";
    http_respond(ctx, 200, "application/json", body, sizeof(body) - 1);
}

static void get_plaintext(http_ctx *ctx, void *user)
{
    (void)user;
    static const char body[] = "Hello, World!";
    http_respond(ctx, 200, "text/plain", body, sizeof(body) - 1);
}

static void get_json(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, 200, "application/json"));
    cr_json_object_begin(&w);
    cr_json_key(&w, "message", 7);
    cr_json_cstring(&w, "Hello, World!");
    cr_json_object_end(&w);
    http_response_end(ctx);
}

static int mount(http_router *r)
{
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/", get_root, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/plaintext", get_plaintext, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/json", get_json, NULL)) < 0)
        return err;
    return 0;
}

/* apps/hello/openapi.json, built in (apps/CMakeLists.txt). */
extern const char hello_openapi[];

const app_def app_hello = {
    .name = "hello",
    .summary = "GET / , /plaintext and /json: fixed answers",
    .openapi = hello_openapi,
    .mount = mount,
};
