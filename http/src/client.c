/*
 * Outbound HTTP on the ring: libcurl's multi "socket" interface with its
 * two callbacks turned into coroutines of this thread.
 *
 *   CURLMOPT_SOCKETFUNCTION  curl wants socket s watched for IN/OUT: a
 *                            watcher coroutine loops on net_poll(s) and
 *                            tells curl when it is ready; REMOVE ends it.
 *   CURLMOPT_TIMERFUNCTION   curl wants to be called in N ms: the timer
 *                            coroutine sleeps until then (net_sleep), and is
 *                            interrupted when curl moves the deadline.
 *
 * Neither callback calls back into curl (libcurl forbids it): they only
 * record what curl asked and wake the coroutine concerned. A fetching
 * coroutine adds its easy handle and parks (net_park); whoever sees its
 * transfer done in curl_multi_info_read unparks it (net_unpark: all of it
 * happens on this thread). The watchers and the timer are service tasks
 * (net_spawn_service): curl runs on their stacks, OpenSSL's handshake
 * included. See libcurl-multi(3).
 */
#include "coring/http/client.h"
#include "internal.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/http/trace.h"
#include "coring/net/io.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(((http_fetch_result *)0)->error) >= CURL_ERROR_SIZE,
               "curl writes up to CURL_ERROR_SIZE bytes into CURLOPT_ERRORBUFFER");

#define DEFAULT_CONNECT_TIMEOUT_NS (2 * CR_NS_PER_S)
#define DEFAULT_TOTAL_TIMEOUT_NS (5 * CR_NS_PER_S)
#define DEFAULT_MAX_BODY (64 * 1024)

/* A socket curl asked us to watch, and the coroutine that does. */
typedef struct socket_watch {
    curl_socket_t fd;
    int what;               /* CURL_POLL_IN, _OUT or _INOUT */
    bool removed;           /* curl no longer wants it: the watcher ends */
    net_task *task;         /* the watcher, while it runs */
    struct socket_watch *next;
} socket_watch;

typedef struct client_thread {
    CURLM *multi;
    unsigned fetches;         /* easy handles in the multi (open + waiting in curl) */
    int running;              /* transfers in progress (from curl) */
    net_task *timer;          /* the timer coroutine, while it runs */
    uint64_t deadline_ns;     /* when curl wants CURL_SOCKET_TIMEOUT; 0: never */
    socket_watch *watches;    /* every watch not yet freed */
} client_thread;

static _Thread_local client_thread *tl_client;

#define DEFAULT_MAX_CONNECTIONS 8
#define DEFAULT_WAITING_PER_CONNECTION 32

static http_client_limits limits = {
    .max_connections = DEFAULT_MAX_CONNECTIONS,
    .max_idle = DEFAULT_MAX_CONNECTIONS,
    .max_waiting = DEFAULT_WAITING_PER_CONNECTION * DEFAULT_MAX_CONNECTIONS,
};

void http_client_set_limits(const http_client_limits *l)
{
    http_client_limits v = *l;
    if (!v.max_connections)
        v.max_connections = DEFAULT_MAX_CONNECTIONS;
    if (!v.max_idle || v.max_idle > v.max_connections)
        v.max_idle = v.max_connections;
    if (!v.max_waiting)
        v.max_waiting = DEFAULT_WAITING_PER_CONNECTION * v.max_connections;
    limits = v;
}

http_client_limits http_client_get_limits(void)
{
    return limits;
}

/* One transfer, on the stack of the coroutine that waits for it. */
typedef struct fetch {
    net_task *task;  /* the fetching coroutine, parked until done */
    bool done;       /* curl finished the transfer (code is set) */
    CURLcode code;
    http_fetch_result *out;
    size_t max_body;
    bool too_big;
} fetch;

int http_client_global_init(void)
{
    return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

/* Drive curl for @fd (or CURL_SOCKET_TIMEOUT) and wake finished fetches. */
static void socket_action(client_thread *ct, curl_socket_t fd, int flags)
{
    curl_multi_socket_action(ct->multi, fd, flags, &ct->running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(ct->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        fetch *f = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&f);
        f->code = m->data.result;
        f->done = true;
        curl_multi_remove_handle(ct->multi, m->easy_handle);
        net_unpark(f->task);
    }
}

static void watch_main(void *arg)
{
    socket_watch *w = arg;
    client_thread *ct = tl_client;
    w->task = net_task_current(); /* a service: fetches in flight at shutdown need it */
    while (!w->removed) {
        unsigned events = (w->what & CURL_POLL_IN ? POLLIN : 0) |
                          (w->what & CURL_POLL_OUT ? POLLOUT : 0);
        int r = net_poll(w->fd, events, 0);
        if (w->removed || r == -ECANCELED)
            break;
        if (r == -EINTR)
            continue; /* curl changed what to watch */
        int flags = 0;
        if (r < 0 || (r & (POLLERR | POLLHUP | POLLNVAL)))
            flags |= CURL_CSELECT_ERR;
        if (r > 0 && (r & POLLIN))
            flags |= CURL_CSELECT_IN;
        if (r > 0 && (r & POLLOUT))
            flags |= CURL_CSELECT_OUT;
        socket_action(ct, w->fd, flags);
    }
    w->task = NULL; /* freed when removed, or at thread exit */
}

static void timer_main(void *arg)
{
    client_thread *ct = arg;
    ct->timer = net_task_current(); /* a service: fetches in flight at shutdown need it */
    for (;;) {
        uint64_t now = cr_clock_now_ns();
        uint64_t wait = ct->deadline_ns == 0     ? 3600 * CR_NS_PER_S
                        : ct->deadline_ns > now ? ct->deadline_ns - now
                                                : 0;
        int r = net_sleep(wait);
        if (r == -ECANCELED)
            break;
        if (r == -EINTR)
            continue; /* the deadline moved */
        if (ct->deadline_ns && cr_clock_now_ns() >= ct->deadline_ns) {
            ct->deadline_ns = 0;
            socket_action(ct, CURL_SOCKET_TIMEOUT, 0);
        }
    }
    ct->timer = NULL;
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *user, void *socketp)
{
    (void)easy;
    client_thread *ct = user;
    socket_watch *w = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (w) {
            w->removed = true;
            curl_multi_assign(ct->multi, fd, NULL);
            if (w->task)
                net_task_interrupt(w->task);
        }
        return 0;
    }
    if (w) {
        if (w->what != what) {
            w->what = what;
            if (w->task)
                net_task_interrupt(w->task);
        }
        return 0;
    }
    w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    w->fd = fd;
    w->what = what;
    w->next = ct->watches;
    ct->watches = w;
    curl_multi_assign(ct->multi, fd, w);
    if (net_spawn_service(watch_main, w) < 0) {
        w->removed = true;
        return -1;
    }
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *user)
{
    (void)multi;
    client_thread *ct = user;
    ct->deadline_ns = timeout_ms < 0 ? 0 : cr_clock_now_ns() + (uint64_t)timeout_ms * CR_NS_PER_MS;
    if (ct->timer)
        net_task_interrupt(ct->timer);
    /* The timer coroutine is (re)started by http_fetch, never from here:
     * it could run curl before this callback returns. */
    return 0;
}

/* Free the watches whose watcher has ended. */
static void reap_watches(client_thread *ct)
{
    for (socket_watch **p = &ct->watches; *p;) {
        socket_watch *w = *p;
        if (w->removed && !w->task) {
            *p = w->next;
            free(w);
        } else {
            p = &w->next;
        }
    }
}

static client_thread *client_thread_get(void)
{
    if (tl_client)
        return tl_client;
    client_thread *ct = calloc(1, sizeof(*ct));
    if (!ct)
        return NULL;
    ct->multi = curl_multi_init();
    if (!ct->multi) {
        free(ct);
        return NULL;
    }
    curl_multi_setopt(ct->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(ct->multi, CURLMOPT_SOCKETDATA, ct);
    curl_multi_setopt(ct->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(ct->multi, CURLMOPT_TIMERDATA, ct);
    /* Bounded connections: to one upstream, in all, and idle in the cache.
     * Transfers past the cap wait inside curl for a connection. */
    curl_multi_setopt(ct->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)limits.max_connections);
    curl_multi_setopt(ct->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)limits.max_connections);
    curl_multi_setopt(ct->multi, CURLMOPT_MAXCONNECTS, (long)limits.max_idle);
    tl_client = ct;
    return ct;
}

static size_t on_body(char *data, size_t size, size_t n, void *user)
{
    fetch *f = user;
    size_t len = size * n;
    if (f->out->body.len + len > f->max_body) {
        f->too_big = true;
        return 0; /* curl aborts the transfer with CURLE_WRITE_ERROR */
    }
    return cr_buf_append(&f->out->body, data, len) == 0 ? len : 0;
}

static int map_error(const fetch *f)
{
    switch (f->code) {
    case CURLE_OK:
        return 0;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_COULDNT_CONNECT:
        return -ECONNREFUSED;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED; /* http_fetch's own: its task was cancelled */
    case CURLE_WRITE_ERROR:
        return f->too_big ? -EMSGSIZE : f->out->body.failed ? -ENOMEM : -EIO;
    default:
        return -EIO;
    }
}

static long ms(uint64_t ns, uint64_t fallback_ns)
{
    return (long)((ns ? ns : fallback_ns) / CR_NS_PER_MS);
}

/* The calling request's trace context (coring/http/trace.h) as header
 * fields for its upstream call: traceparent with the same trace id and
 * flags and a new span id (the call's), tracestate as received. NULL
 * without memory (the call goes without). */
static struct curl_slist *trace_fields(const cr_trace_context *t)
{
    char span[17], line[sizeof("tracestate: ") + HTTP_TRACESTATE_MAX];
    http_trace_new_span_id(span);
    memcpy(line, "traceparent: ", 13);
    http_trace_format(line + 13, t->trace_id, span, t->flags);
    struct curl_slist *fields = curl_slist_append(NULL, line);
    if (fields && t->state && t->state_len <= HTTP_TRACESTATE_MAX) {
        snprintf(line, sizeof(line), "tracestate: %.*s", (int)t->state_len, t->state);
        struct curl_slist *more = curl_slist_append(fields, line);
        if (!more)
            curl_slist_free_all(fields);
        fields = more;
    }
    return fields;
}

int http_fetch(const char *url, const http_fetch_options *opt, http_fetch_result *out)
{
    memset(out, 0, sizeof(*out));
    static const http_fetch_options defaults = {0};
    if (!opt)
        opt = &defaults;
    fetch f = {.task = net_task_current(),
               .out = out,
               .max_body = opt->max_body_bytes ? opt->max_body_bytes : DEFAULT_MAX_BODY};
    if (!f.task)
        return -EPERM;
    client_thread *ct = client_thread_get();
    if (ct && ct->fetches >= limits.max_connections + limits.max_waiting) {
        snprintf(out->error, sizeof(out->error),
                 "%u fetches in progress on this thread (%u connections, %u waiting): refused",
                 ct->fetches, limits.max_connections, limits.max_waiting);
        return -EBUSY;
    }
    CURL *e = ct ? curl_easy_init() : NULL;
    if (!e)
        return -ENOMEM;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms(opt->connect_timeout_ns, DEFAULT_CONNECT_TIMEOUT_NS));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms(opt->total_timeout_ns, DEFAULT_TOTAL_TIMEOUT_NS));
    curl_easy_setopt(e, CURLOPT_USERAGENT, "coring");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)&f);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, out->error);
    const cr_trace_context *trace = cr_log_trace();
    struct curl_slist *trace_headers = trace ? trace_fields(trace) : NULL;
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, trace_headers);
    if (curl_multi_add_handle(ct->multi, e) != CURLM_OK) {
        curl_easy_cleanup(e);
        curl_slist_free_all(trace_headers);
        return -ENOMEM;
    }
    if (!ct->timer && net_spawn_service(timer_main, ct) < 0) {
        curl_multi_remove_handle(ct->multi, e);
        curl_easy_cleanup(e);
        curl_slist_free_all(trace_headers);
        return -ENOMEM;
    }
    ct->fetches++;
    http_metrics_client_transfer(true);
    while (!f.done) {
        if (net_park(-1, 0, 0) == -ECANCELED) {
            /* The task is cancelled (its request's deadline, the drain's):
             * the transfer goes, and curl calls nothing of this fetch
             * after this. */
            curl_multi_remove_handle(ct->multi, e);
            f.code = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
    }
    ct->fetches--;
    http_metrics_client_transfer(false);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
    curl_easy_cleanup(e);
    curl_slist_free_all(trace_headers);
    reap_watches(ct);
    int err = map_error(&f);
    if (err == 0)
        out->error[0] = '\0';
    else if (!out->error[0])
        snprintf(out->error, sizeof(out->error), "%s", curl_easy_strerror(f.code));
    return err;
}

void http_client_thread_fini(void)
{
    client_thread *ct = tl_client;
    if (!ct)
        return;
    curl_multi_cleanup(ct->multi);
    while (ct->watches) {
        socket_watch *w = ct->watches;
        ct->watches = w->next;
        free(w);
    }
    free(ct);
    tl_client = NULL;
}
