/*
 * Outbound HTTP: libcurl's multi interface driven by the worker thread's
 * io_uring, so a coroutine that fetches a URL yields like any other I/O
 * and the thread keeps serving.
 *
 * Each worker thread has one curl multi handle (connections to an upstream
 * are kept alive and reused). curl's socket callback becomes a coroutine
 * per socket waiting in net_poll (a poll SQE); its timer callback a
 * coroutine waiting in net_sleep (a timeout SQE). TLS comes from curl.
 * See libcurl-multi(3), curl_multi_socket_action(3), CURLMOPT_SOCKETFUNCTION(3)
 * and CURLMOPT_TIMERFUNCTION(3).
 */
#ifndef CORING_HTTP_CLIENT_H
#define CORING_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "coring/core/buffer.h"

typedef struct http_fetch_options {
    uint64_t connect_timeout_ns; /* TCP (and TLS) connect; 0: 2 s */
    uint64_t total_timeout_ns;   /* whole transfer; 0: 5 s */
    size_t max_body_bytes;       /* larger responses fail with -EMSGSIZE; 0: 64 KiB */
} http_fetch_options;

typedef struct http_fetch_result {
    long status;        /* the response's status code; 0 if none arrived */
    cr_buf body;        /* the response body; owned by the caller: cr_buf_free */
    char error[256];    /* curl's message when the fetch failed (CURL_ERROR_SIZE), else "" */
} http_fetch_result;

/*
 * Outbound connection limits, per worker thread (each thread has its own
 * curl multi handle and connections). Without them 800 concurrent misses
 * against a slow upstream held 800 connections to it, kept 601 idle
 * afterwards, and ran the process out of descriptors.
 */
typedef struct http_client_limits {
    unsigned max_connections; /* open connections per thread, to one host and in all
                               * (CURLMOPT_MAX_HOST_CONNECTIONS, _MAX_TOTAL_CONNECTIONS);
                               * fetches beyond it wait in curl for a free one; 0: 8 */
    unsigned max_idle;        /* idle connections kept for reuse (CURLMOPT_MAXCONNECTS),
                               * at most max_connections; 0: max_connections */
    unsigned max_waiting;     /* fetches waiting for a connection per thread; one more
                               * fails at once with -EBUSY; 0: 32 x max_connections */
} http_client_limits;

/*
 * http_client_set_limits - set the limits every worker thread's client uses
 * (copied). Call from the main thread before the workers start; threads
 * whose client exists already keep theirs. Returns nothing.
 * Source: CURLMOPT_MAX_HOST_CONNECTIONS(3), CURLMOPT_MAX_TOTAL_CONNECTIONS(3),
 * CURLMOPT_MAXCONNECTS(3).
 */
void http_client_set_limits(const http_client_limits *limits);

/*
 * http_client_get_limits - the limits in force, defaults filled in (what
 * http_client_set_limits made of its argument). Any thread.
 */
http_client_limits http_client_get_limits(void);

/*
 * http_client_global_init - curl_global_init(3). Call once from the main
 * thread before worker threads start (http_serve does). Returns 0 or -EIO.
 */
int http_client_global_init(void);

/*
 * http_fetch - GET @url and wait for the whole response.
 * @url: absolute http:// or https:// URL (copied by curl).
 * @opt: timeouts and size limit, or NULL for the defaults.
 * @out: filled; out->body must be freed by the caller whatever the result.
 * Returns 0 when a response arrived (any status: check out->status),
 * -ETIMEDOUT (connect or total timeout; the total includes the time spent
 * waiting for a free connection), -ECONNREFUSED, -EMSGSIZE (body over the
 * limit), -EBUSY (max_connections busy and max_waiting fetches already
 * waiting: answered at once), -ENOMEM, -EPERM (not on a worker coroutine),
 * -ECANCELED (the calling task was cancelled: net_task_cancel, the drain's
 * deadline), or -EIO (any other curl error; out->error says which).
 * Call from a coroutine on a worker thread.
 */
int http_fetch(const char *url, const http_fetch_options *opt, http_fetch_result *out);

/*
 * http_client_thread_fini - release this worker thread's curl multi handle
 * and its connections. Called by the HTTP layer at thread exit.
 */
void http_client_thread_fini(void);

#endif
