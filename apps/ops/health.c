/*
 * GET /livez and GET /readyz: see coring/apps/health.h and docs/health.md.
 *
 * /readyz asks, on the worker thread that got the request, the runtime
 * whether a shutdown has begun (net_stopping, net_draining) and each mounted app's
 * readiness hook; the hooks read state their owners publish (the database
 * pools' live connection counts), so a check takes no lock and never
 * waits: a balancer may poll it as often as it likes.
 */
#include "coring/apps/health.h"

#include "coring/core/arena.h"
#include "coring/core/coro.h"
#include "coring/core/json_writer.h"
#include "coring/http/server.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const app_def *const *apps;
static size_t num_apps;

/* Checks added by app_health_add_check. */
#define MAX_EXTRA_CHECKS 4
static struct {
    const char *name;
    const char *(*ready)(char *buf, size_t len);
} extra[MAX_EXTRA_CHECKS];
static size_t num_extra;

int app_health_add_check(const char *name, const char *(*ready)(char *buf, size_t len))
{
    if (num_extra == MAX_EXTRA_CHECKS)
        return -ENOSPC;
    extra[num_extra].name = name;
    extra[num_extra++].ready = ready;
    return 0;
}

static const char *check_name(const app_def *app)
{
    return app->ready_check ? app->ready_check : app->name;
}

/* Whether an app before @i has the same check (it is reported once). */
static bool checked_before(size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (apps[k]->ready && strcmp(check_name(apps[k]), check_name(apps[i])) == 0)
            return true;
    return false;
}

static void no_store(http_ctx *ctx)
{
    /* A cached answer would say nothing of now (RFC 9111 section 5.2.2.5). */
    http_add_header(ctx, "Cache-Control", "no-store");
}

static void get_livez(http_ctx *ctx, void *user)
{
    (void)user;
    static const char body[] = "{\"status\":\"alive\"}";
    no_store(ctx);
    http_respond(ctx, 200, "application/json", body, sizeof(body) - 1);
}

/* One line of /readyz's "checks". */
typedef struct readiness_check {
    const char *name;
    const char *why;  /* NULL: ok */
    char reason[256]; /* where a hook may write why */
} readiness_check;

static void get_readyz(http_ctx *ctx, void *user)
{
    (void)user;
    /* The results go to the coroutine's arena (reset after each request
     * batch), not the stack: a check's reason may be a few hundred bytes. */
    readiness_check *checks = cr_arena_alloc(cr_coro_arena(cr_coro_current()),
                                             (num_apps + 1 + num_extra) * sizeof(*checks));
    if (!checks) {
        http_respond_error(ctx, 503, "out of memory");
        return;
    }
    size_t n = 0;
    checks[n].name = "server";
    checks[n].reason[0] = '\0';
    /* net_stopping() turns true at the signal, on every thread at once;
     * net_draining() on this worker once the grace (--drain-grace) is over. */
    checks[n++].why = net_draining()   ? "draining: shutdown began, new connections are refused"
                      : net_stopping() ? "draining: shutdown began, still accepting for the drain grace"
                                       : NULL;
    for (size_t i = 0; i < num_apps; i++) {
        if (!apps[i]->ready || checked_before(i))
            continue;
        checks[n].name = check_name(apps[i]);
        checks[n].reason[0] = '\0';
        checks[n].why = apps[i]->ready(checks[n].reason, sizeof(checks[n].reason));
        n++;
    }
    for (size_t i = 0; i < num_extra; i++) {
        checks[n].name = extra[i].name;
        checks[n].reason[0] = '\0';
        checks[n].why = extra[i].ready(checks[n].reason, sizeof(checks[n].reason));
        n++;
    }
    const readiness_check *failed = NULL;
    for (size_t i = 0; i < n && !failed; i++)
        if (checks[i].why)
            failed = &checks[i];

    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    cr_json_object_begin(&w);
    cr_json_key(&w, "status", 6);
    cr_json_cstring(&w, failed ? "not ready" : "ready");
    if (failed) {
        /* Like every other error body: {"error": ...}, the first failure. */
        char msg[320];
        snprintf(msg, sizeof(msg), "%s: %s", failed->name, failed->why);
        cr_json_key(&w, "error", 5);
        cr_json_cstring(&w, msg);
    }
    cr_json_key(&w, "checks", 6);
    cr_json_object_begin(&w);
    for (size_t i = 0; i < n; i++) {
        cr_json_key(&w, checks[i].name, strlen(checks[i].name));
        cr_json_cstring(&w, checks[i].why             ? checks[i].why
                            : checks[i].reason[0] ? checks[i].reason
                                                  : "ok");
    }
    cr_json_object_end(&w);
    cr_json_object_end(&w);
    no_store(ctx);
    http_respond_json(ctx, failed ? 503 : 200, b);
}

int app_health_mount(http_router *router, const app_def *const *list, size_t count)
{
    apps = list;
    num_apps = count;
    int err;
    if ((err = http_router_add(router, HTTP_GET, "/livez", get_livez, NULL)) < 0 ||
        (err = http_router_add(router, HTTP_GET, "/readyz", get_readyz, NULL)) < 0)
        return err;
    return 0;
}
