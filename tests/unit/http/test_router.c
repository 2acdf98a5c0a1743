/*
 * Tests of the router (http/src/router.c): literal and `{param}` routes,
 * their priority, 404 against 405 with the exact Allow value, HEAD served by
 * GET, and the patterns http_router_add refuses.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coring/http/router.h"

/* Handlers are only compared, never called; @user tells them apart. */
static void handler_a(http_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
}

static void handler_b(http_ctx *ctx, void *user)
{
    (void)ctx;
    (void)user;
}

static int tags[16];
#define TAG(n) (&tags[n])

static http_str S(const char *s)
{
    return (http_str){s, strlen(s)};
}

static bool str_is(http_str s, const char *want)
{
    return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static http_router *r;

static void add(http_method m, const char *pattern, int tag)
{
    cr_assert_eq(http_router_add(r, m, pattern, handler_a, TAG(tag)), 0, "adding %s", pattern);
}

static void setup(void)
{
    r = http_router_create();
    cr_assert(r != NULL);
    add(HTTP_GET, "/", 0);
    add(HTTP_GET, "/todos", 1);
    add(HTTP_POST, "/todos", 2);
    add(HTTP_GET, "/todos/{id}", 3);
    add(HTTP_PUT, "/todos/{id}", 4);
    add(HTTP_DELETE, "/todos/{id}", 5);
    add(HTTP_GET, "/todos/new", 6);
    add(HTTP_GET, "/users/{user}/posts/{post}", 7);
    add(HTTP_GET, "/users/{user}/posts/latest", 8);
    add(HTTP_GET, "/todos/", 9);
    add(HTTP_POST, "/only-post", 10);
    add(HTTP_HEAD, "/head", 11);
    add(HTTP_GET, "/head", 12);
}

static void teardown(void)
{
    http_router_destroy(r);
}

TestSuite(router, .init = setup, .fini = teardown);

static void *found(http_method method, const char *path, http_route_match *m)
{
    http_route_status st = http_router_match(r, method, S(path), m);
    cr_expect_eq(st, HTTP_ROUTE_FOUND, "%s: status %d", path, st);
    cr_expect_eq(m->status, st);
    return m->user;
}

static void not_found(http_method method, const char *path)
{
    http_route_match m;
    cr_expect_eq(http_router_match(r, method, S(path), &m), HTTP_ROUTE_NOT_FOUND, "%s", path);
    cr_expect_null(m.handler);
}

static void not_allowed(http_method method, const char *path, const char *allow)
{
    http_route_match m;
    cr_expect_eq(http_router_match(r, method, S(path), &m), HTTP_ROUTE_METHOD_NOT_ALLOWED, "%s",
                 path);
    cr_expect_str_eq(m.allow, allow, "%s: Allow '%s'", path, m.allow);
}

Test(router, literal_routes)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_GET, "/", &m), TAG(0));
    cr_expect_eq(m.handler, handler_a);
    cr_expect_eq(m.params.count, 0);
    cr_expect_eq(found(HTTP_GET, "/todos", &m), TAG(1));
    cr_expect_eq(found(HTTP_POST, "/todos", &m), TAG(2));
    cr_expect_eq(found(HTTP_POST, "/only-post", &m), TAG(10));
}

Test(router, params)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_GET, "/todos/42", &m), TAG(3));
    cr_assert_eq(m.params.count, 1);
    cr_expect(str_is(m.params.names[0], "id"));
    cr_expect(str_is(m.params.values[0], "42"));
    const http_str *id = http_route_param(&m.params, "id");
    cr_assert(id != NULL);
    cr_expect(str_is(*id, "42"));
    cr_expect_null(http_route_param(&m.params, "ID"));
    cr_expect_eq(found(HTTP_PUT, "/todos/abc%20d", &m), TAG(4));
    cr_expect(str_is(*http_route_param(&m.params, "id"), "abc%20d"));
    cr_expect_eq(found(HTTP_DELETE, "/todos/7", &m), TAG(5));
}

Test(router, several_params)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_GET, "/users/ann/posts/9", &m), TAG(7));
    cr_assert_eq(m.params.count, 2);
    cr_expect(str_is(*http_route_param(&m.params, "user"), "ann"));
    cr_expect(str_is(*http_route_param(&m.params, "post"), "9"));
    cr_expect(str_is(m.params.names[1], "post"));
}

Test(router, literal_beats_param)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_GET, "/todos/new", &m), TAG(6));
    cr_expect_eq(m.params.count, 0);
    cr_expect_eq(found(HTTP_GET, "/users/ann/posts/latest", &m), TAG(8));
    cr_expect_eq(m.params.count, 1);
    /* The literal route has no DELETE: the parameter route serves it. */
    cr_expect_eq(found(HTTP_DELETE, "/todos/new", &m), TAG(5));
    cr_expect(str_is(*http_route_param(&m.params, "id"), "new"));
}

Test(router, literal_beats_param_whatever_the_order)
{
    http_router *q = http_router_create();
    http_route_match m;
    cr_assert_eq(http_router_add(q, HTTP_GET, "/a/{x}/c", handler_a, TAG(1)), 0);
    cr_assert_eq(http_router_add(q, HTTP_GET, "/a/b/{y}", handler_a, TAG(2)), 0);
    cr_assert_eq(http_router_add(q, HTTP_GET, "/{z}/b/c", handler_a, TAG(3)), 0);
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/a/b/c"), &m), HTTP_ROUTE_FOUND);
    cr_expect_eq(m.user, TAG(2));
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/a/z/c"), &m), HTTP_ROUTE_FOUND);
    cr_expect_eq(m.user, TAG(1));
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/q/b/c"), &m), HTTP_ROUTE_FOUND);
    cr_expect_eq(m.user, TAG(3));
    http_router_destroy(q);
}

Test(router, not_found_and_not_allowed)
{
    not_found(HTTP_GET, "/nope");
    not_found(HTTP_GET, "/todos/1/2");
    not_found(HTTP_GET, "");
    not_found(HTTP_GET, "todos");
    not_found(HTTP_GET, "*");
    not_found(HTTP_GET, "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/1/2/3/4/5/6/7/8/9");
    not_allowed(HTTP_DELETE, "/todos", "GET, HEAD, POST");
    not_allowed(HTTP_POST, "/todos/42", "GET, HEAD, PUT, DELETE");
    not_allowed(HTTP_GET, "/only-post", "POST");
    not_allowed(HTTP_HEAD, "/only-post", "POST");
    not_allowed(HTTP_OPTIONS, "/", "GET, HEAD");
    not_allowed(HTTP_METHOD_OTHER, "/todos", "GET, HEAD, POST");
    /* Both /todos/new and /todos/{id} match: Allow is their union. */
    not_allowed(HTTP_POST, "/todos/new", "GET, HEAD, PUT, DELETE");
}

Test(router, head_served_by_get)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_HEAD, "/todos", &m), TAG(1));
    cr_expect_eq(found(HTTP_HEAD, "/todos/5", &m), TAG(3));
    cr_expect(str_is(*http_route_param(&m.params, "id"), "5"));
    /* A HEAD route of its own wins. */
    cr_expect_eq(found(HTTP_HEAD, "/head", &m), TAG(11));
    cr_expect_eq(found(HTTP_GET, "/head", &m), TAG(12));
}

Test(router, trailing_slash_and_empty_segments)
{
    http_route_match m;
    cr_expect_eq(found(HTTP_GET, "/todos/", &m), TAG(9));
    cr_expect_eq(found(HTTP_GET, "/todos", &m), TAG(1));
    not_found(HTTP_GET, "/todos//");
    not_found(HTTP_GET, "//todos");
    not_found(HTTP_GET, "/users//posts/1");
    not_found(HTTP_GET, "/only-post/");

    http_router *q = http_router_create();
    cr_assert_eq(http_router_add(q, HTTP_GET, "/t/{id}", handler_b, TAG(1)), 0);
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/t/"), &m), HTTP_ROUTE_NOT_FOUND);
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/t//"), &m), HTTP_ROUTE_NOT_FOUND);
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/t/x"), &m), HTTP_ROUTE_FOUND);
    cr_expect_eq(m.handler, handler_b);
    http_router_destroy(q);
}

Test(router, path_not_nul_terminated)
{
    http_route_match m;
    static const char buf[] = "/todos/42?x=1";
    cr_expect_eq(http_router_match(r, HTTP_GET, (http_str){buf, 9}, &m), HTTP_ROUTE_FOUND);
    cr_expect(str_is(m.params.values[0], "42"));
}

Test(router, bad_patterns)
{
    cr_expect_eq(http_router_add(r, HTTP_GET, "/todos", handler_b, NULL), -EEXIST);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/todos/{other}", handler_b, NULL), -EEXIST);
    cr_expect_eq(
        http_router_add(r, HTTP_GET, "/1/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}", handler_b, NULL),
        -EINVAL);
    cr_expect_eq(
        http_router_add(r, HTTP_GET, "/1/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", handler_b, NULL), 0);
    cr_expect_eq(http_router_add(r, HTTP_GET, "todos", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a/{}", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a/{x", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a/x{y}", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a/{x}/{x}", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a//b", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a?b", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/a b", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_METHOD_OTHER, "/x", handler_b, NULL), -EINVAL);
    cr_expect_eq(http_router_add(r, HTTP_GET, "/x", NULL, NULL), -EINVAL);
    /* A failed add changes nothing. */
    not_found(HTTP_GET, "/a/b");
}

/* http_router_each: every (method, pattern) once, in lookup order. */
static void list_route(http_method method, const char *pattern, void *user)
{
    static const char *const names[] = {[HTTP_GET] = "GET",     [HTTP_HEAD] = "HEAD",
                                        [HTTP_POST] = "POST",   [HTTP_PUT] = "PUT",
                                        [HTTP_PATCH] = "PATCH", [HTTP_DELETE] = "DELETE"};
    char *out = user;
    size_t len = strlen(out);
    snprintf(out + len, 1024 - len, "%s %s\n", names[method], pattern);
}

Test(router, each_lists_every_route)
{
    char out[1024] = "";
    http_router_each(r, list_route, out);
    cr_expect_str_eq(out, "GET /\n"
                          "GET /todos\n"
                          "POST /todos\n"
                          "POST /only-post\n"
                          "GET /head\n"
                          "HEAD /head\n"
                          "GET /todos/new\n"
                          "GET /todos/\n"
                          "GET /todos/{id}\n"
                          "PUT /todos/{id}\n"
                          "DELETE /todos/{id}\n"
                          "GET /users/{user}/posts/latest\n"
                          "GET /users/{user}/posts/{post}\n");
    out[0] = '\0';
    http_router_each(NULL, list_route, out);
    cr_expect_str_eq(out, "");
}

Test(router, eight_params)
{
    http_route_match m;
    cr_assert_eq(
        http_router_add(r, HTTP_GET, "/p/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}", handler_b, TAG(13)), 0);
    cr_expect_eq(found(HTTP_GET, "/p/1/2/3/4/5/6/7/8", &m), TAG(13));
    cr_assert_eq(m.params.count, HTTP_ROUTER_MAX_PARAMS);
    cr_expect(str_is(*http_route_param(&m.params, "h"), "8"));
    cr_expect(str_is(*http_route_param(&m.params, "a"), "1"));
}

Test(router, empty_router)
{
    http_router *q = http_router_create();
    http_route_match m;
    cr_expect_eq(http_router_match(q, HTTP_GET, S("/"), &m), HTTP_ROUTE_NOT_FOUND);
    http_router_destroy(q);
    http_router_destroy(NULL);
}

#define B(m) HTTP_METHOD_BIT(HTTP_##m)

Test(router, methods_of_a_path)
{
    cr_expect_eq(http_router_methods(r, S("/")), B(GET) | B(HEAD));
    cr_expect_eq(http_router_methods(r, S("/todos")), B(GET) | B(HEAD) | B(POST));
    cr_expect_eq(http_router_methods(r, S("/todos/7")), B(GET) | B(HEAD) | B(PUT) | B(DELETE));
    /* /todos/new and /todos/{id}: their union, as in a 405's Allow. */
    cr_expect_eq(http_router_methods(r, S("/todos/new")), B(GET) | B(HEAD) | B(PUT) | B(DELETE));
    cr_expect_eq(http_router_methods(r, S("/only-post")), B(POST));
    cr_expect_eq(http_router_methods(r, S("/head")), B(GET) | B(HEAD));
    cr_expect_eq(http_router_methods(r, S("/nope")), 0u);
    cr_expect_eq(http_router_methods(r, S("/todos/1/2")), 0u);
    cr_expect_eq(http_router_methods(r, S("")), 0u);
    /* OPTIONS *: every method of any route. */
    cr_expect_eq(http_router_methods(r, S("*")), B(GET) | B(HEAD) | B(POST) | B(PUT) | B(DELETE));
    cr_expect_eq(http_router_methods(NULL, S("/")), 0u);

    http_route_match m;
    cr_expect_eq(http_router_match(r, HTTP_PATCH, S("/todos/7"), &m), HTTP_ROUTE_METHOD_NOT_ALLOWED);
    cr_expect_eq(m.methods, B(GET) | B(HEAD) | B(PUT) | B(DELETE));
}

Test(router, format_allow)
{
    char out[96];
    http_router_format_allow(B(POST) | B(GET) | B(OPTIONS), out, sizeof(out));
    cr_expect_str_eq(out, "GET, HEAD, POST, OPTIONS");
    http_router_format_allow(0, out, sizeof(out));
    cr_expect_str_eq(out, "");
    http_router_format_allow(~0u, out, sizeof(out));
    cr_expect_str_eq(out, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, CONNECT, TRACE");
    http_router_format_allow(B(GET) | B(DELETE), out, 10);
    cr_expect_str_eq(out, "GET, HEAD");
}

/* Each (method, pattern) gets an index in the order added, and the match
 * names it: metrics label a request with its route's pattern, never the
 * raw path. */
Test(router, match_names_the_route_index_and_pattern)
{
    cr_expect_eq(http_router_route_count(r), 13);
    http_route_match m;
    found(HTTP_GET, "/todos/42", &m);
    cr_expect_eq(m.route, 3);
    cr_expect_str_eq(http_router_route_pattern(r, m.route), "/todos/{id}");
    found(HTTP_DELETE, "/todos/7", &m);
    cr_expect_eq(m.route, 5);
    found(HTTP_GET, "/users/1/posts/latest", &m);
    cr_expect_str_eq(http_router_route_pattern(r, m.route), "/users/{user}/posts/latest");
    found(HTTP_HEAD, "/todos", &m); /* HEAD served by GET: the GET route */
    cr_expect_eq(m.route, 1);
    found(HTTP_HEAD, "/head", &m);
    cr_expect_eq(m.route, 11);
    cr_expect_str_eq(http_router_route_pattern(r, 0), "/");
    cr_expect_null(http_router_route_pattern(r, 13));
}
