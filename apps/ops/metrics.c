/*
 * GET /metrics: the registry's text (core/src/metrics.c), the process_*
 * families, and coring_build_info. The scrape reads every thread's block
 * with relaxed loads on the worker that serves it, and reads /proc/self
 * (a few small files): no message to the other cores, no lock they take.
 */
#include "coring/apps/metrics.h"

#include "coring/core/metrics.h"
#include "coring/http/server.h"

#include <string.h>

/* Text exposition format 0.0.4 (Prometheus, exposition_formats.md). */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

static void write_build_info(cr_buf *out, void *user)
{
    const char *version = user;
    cr_buf_append_str(out, "# HELP coring_build_info A metric with a constant '1' value labelled "
                           "by the version of coring and its compiler.\n"
                           "# TYPE coring_build_info gauge\ncoring_build_info{version=\"");
    cr_metrics_escape_label(out, version, strlen(version));
    cr_buf_append_str(out, "\",compiler=\"");
#if defined(__clang__)
    const char *compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
    const char *compiler = "gcc " __VERSION__;
#else
    const char *compiler = "unknown";
#endif
    cr_metrics_escape_label(out, compiler, strlen(compiler));
    cr_buf_append_str(out, "\"} 1\n");
}

static void handle_metrics(http_ctx *ctx, void *user)
{
    (void)user;
    cr_buf *b = http_scratch();
    if (cr_metrics_write(b) < 0) {
        http_respond_error(ctx, 500, "out of memory writing the metrics");
        return;
    }
    http_respond(ctx, 200, METRICS_CONTENT_TYPE, b->data, b->len);
}

int app_metrics_mount(http_router *router, const char *version)
{
    int err = http_router_add(router, HTTP_GET, "/metrics", handle_metrics, NULL);
    if (err < 0)
        return err;
    if ((err = cr_metrics_add_collector(cr_metrics_write_process, NULL)) < 0)
        return err;
    return cr_metrics_add_collector(write_build_info, (void *)version);
}
