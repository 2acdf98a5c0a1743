/*
 * http_serve: wires the HTTP layer onto the per-core runtime. Each worker
 * thread gets its own JSON parser and scratch buffer (no sharing between
 * cores), then the application's per-thread set-up runs.
 */
#include "internal.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/http/client.h"
#include "coring/http/compress.h"

#include <curl/curl.h>

#include <errno.h>
#include <stdlib.h>

http_server_config http_server_config_default(void)
{
    return (http_server_config){
        .limits = http_limits_default(),
        .keepalive_timeout_ns = 60 * CR_NS_PER_S,
        .header_timeout_ns = 10 * CR_NS_PER_S,
        .body_timeout_ns = 10 * CR_NS_PER_S,
        .send_timeout_ns = 30 * CR_NS_PER_S,
        .output_flush_bytes = 64 * 1024,
        .access_log = false,
        .compression_codings = HTTP_CODINGS_ALL,
        .compression_min_bytes = HTTP_COMPRESSION_MIN_BYTES_DEFAULT,
    };
}

static int thread_init(void *user)
{
    http_server *srv = user;
    http_thread *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->json = cr_json_parser_create(srv->cfg.limits.max_body_bytes, 64);
    if (!t->json) {
        free(t);
        return -ENOMEM;
    }
    t->date_second = -1;
    http_tl = t;
    return srv->thread_init ? srv->thread_init(srv->user) : 0;
}

static void thread_fini(void *user)
{
    http_server *srv = user;
    if (srv->thread_fini)
        srv->thread_fini(srv->user);
    http_client_thread_fini();
    http_compress_thread_fini();
    http_thread *t = http_tl;
    if (t) {
        cr_json_parser_destroy(t->json);
        cr_buf_free(&t->scratch);
        cr_buf_free(&t->discard);
        cr_buf_free(&t->compressed);
        http_connection_thread_fini(t);
        free(t);
        http_tl = NULL;
    }
}

static void on_listening(const char *host, uint16_t port, unsigned threads, void *user)
{
    http_server *srv = user;
    if (srv->on_listening)
        srv->on_listening(host, port, threads, srv->user);
}

static int after_bind(void *user)
{
    http_server *srv = user;
    return srv->after_bind ? srv->after_bind(srv->user) : 0;
}

int http_serve(http_server *srv, const net_config *net)
{
    if (http_client_global_init() < 0) {
        cr_log_error("curl_global_init failed");
        return -EIO;
    }
    int err = http_metrics_register(srv->router);
    if (err < 0)
        return err;
    net_hooks hooks = {
        .after_bind = after_bind,
        .thread_init = thread_init,
        .thread_fini = thread_fini,
        .on_connection = http_connection_main,
        .on_idle_close = http_connection_closed,
        .on_listening = on_listening,
        .user = srv,
    };
    int ret = net_run(net, &hooks);
    curl_global_cleanup();
    return ret;
}
