/*
 * GET /metrics: every registered metric in the Prometheus text exposition
 * format 0.0.4, mounted by the coring binary whatever --apps says. See
 * docs/metrics.md for the metrics and their meaning.
 */
#ifndef CORING_APPS_METRICS_H
#define CORING_APPS_METRICS_H

#include "coring/http/router.h"

/*
 * app_metrics_mount - add GET /metrics to @router, and the collectors of the
 * process_* families and of coring_build_info{version=@version,...} 1
 * (@version: a string that outlives the server). Main thread, before
 * serving. Returns 0, or -errno from http_router_add or the registry.
 */
int app_metrics_mount(http_router *router, const char *version);

#endif
