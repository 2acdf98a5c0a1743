/*
 * Health endpoints for load balancers and orchestrators, mounted whatever
 * --apps says (docs/health.md):
 *
 *   GET /livez   200 {"status":"alive"} while the process serves.
 *   GET /readyz  200 {"status":"ready","checks":{...}} when every mounted
 *                app can serve; 503 {"status":"not ready","error":"...",
 *                "checks":{...}} naming what cannot, and 503 from the
 *                moment a drain (SIGINT/SIGTERM) begins.
 *
 * "checks" has "server" (ok, or draining) and one entry per distinct
 * app_def.ready_check of the mounted apps ("database", "embed"): "ok" or
 * the hook's reason.
 */
#ifndef CORING_APPS_HEALTH_H
#define CORING_APPS_HEALTH_H

#include "coring/apps/apps.h"

/*
 * app_health_mount - add GET /livez and GET /readyz to @router. /readyz
 * asks the readiness hook (app_def.ready) of each of the @count apps in
 * @apps, which must stay valid (not copied) while serving. Main thread,
 * before serving. Returns 0, or -EEXIST / -ENOMEM from http_router_add.
 */
int app_health_mount(http_router *router, const app_def *const *apps, size_t count);

/*
 * app_health_add_check - add a check named @name to /readyz's "checks",
 * beside the apps' (reported after them). @ready: a hook like
 * app_def.ready (NULL when ready, else why; it may write a reason into its
 * buffer and still return NULL, to say something while ready), called on
 * the worker thread that got the request; it must never block. @name is
 * static. Main thread, before serving. Returns 0 or -ENOSPC past 4 checks.
 */
int app_health_add_check(const char *name, const char *(*ready)(char *buf, size_t len));

#endif
