/*
 * The per-core runtime: N worker threads, one per CPU (pinned to it with
 * net_config.pin), each owning one io_uring, one SO_REUSEPORT listener
 * with a few accepts a loop turn, a pool of coroutine stacks and a
 * provided-buffer ring. Every accepted connection
 * runs in a coroutine of its own on the thread that accepted it while it
 * has something to do; between requests it may hold none
 * (net_connection_idle).
 *
 * Lifecycle: net_run() starts the workers and blocks the calling (main)
 * thread until SIGINT or SIGTERM. Then net_stopping() turns true at once
 * (readiness probes say "not ready"), and for drain_grace_ns (default 0)
 * the listeners go on accepting and serving as usual, so that a load
 * balancer's health check sees the probe fail before new connections are
 * refused. After the grace it drains: each listener's accept
 * queue is accepted, then the listener closes (new connections are
 * refused); connections waiting idle between requests stay open for
 * drain_idle_grace_ns (default 1 s): a request that arrives on one is
 * served (the HTTP layer answers it with Connection: close), and those
 * still idle at the grace's end are closed, unless a request has already
 * arrived on them (it is served); in-flight requests run to completion,
 * and after shutdown_timeout_ns whatever is left is cancelled (a task's
 * last words: net_send_last). net_run() then joins the workers and
 * returns.
 *
 * Listeners that outlive the process: a listening socket systemd passes
 * (LISTEN_FDS, sd_listen_fds(3)) that serves host/port is used instead of
 * binding, shared by every worker; with take_over, the listeners of the
 * coring serving handover_socket are received, and that process drains
 * (as on SIGTERM, without the grace) once this one serves. With
 * $NOTIFY_SOCKET set the service manager gets READY=1 once every worker
 * serves, STOPPING=1 when the drain begins, and, with WATCHDOG_USEC,
 * WATCHDOG=1 while every worker's loop turns (sd_notify(3)).
 *
 * Nothing here knows HTTP: the connection handler is a hook.
 */
#ifndef CORING_NET_RUNTIME_H
#define CORING_NET_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct net_loop net_loop;

/* net_config.service_stack_size's default, bytes: the deepest use measured
 * in libpq and libcurl with OpenSSL times four (docs/runtime.md, Stacks). */
#define NET_SERVICE_STACK_SIZE_DEFAULT (256u * 1024u)

/* net_config.batch_wait_us's default and largest value, microseconds. */
#define NET_BATCH_WAIT_US_DEFAULT 200
#define NET_BATCH_WAIT_US_MAX 10000

typedef struct net_config {
    unsigned threads;             /* 0: one per CPU in the affinity mask */
    const char *host;             /* numeric IPv4 or IPv6 address to bind */
    uint16_t port;                /* 0: the kernel picks one (shared by all threads) */
    int backlog;                  /* listen(2) backlog */
    size_t stack_size;            /* coroutine stack of connections and net_spawn, bytes */
    size_t service_stack_size;    /* coroutine stack of net_spawn_service (libpq, libcurl,
                                   * OpenSSL), bytes */
    unsigned ring_entries;        /* SQ entries per ring (the CQ: 3 per connection a
                                     thread may hold + this, at least 4x, at most 65536) */
    unsigned provided_buffers;    /* buffers in each thread's provided-buffer ring (power of 2) */
    unsigned provided_buffer_size;/* bytes per provided buffer */
    unsigned max_connections;     /* per process; 0: from RLIMIT_NOFILE, less the
                                   * runtime's reserve and reserved_fds */
    unsigned reserved_fds;        /* descriptors the apps hold besides connections
                                   * (database pools, upstream connections), all
                                   * threads together; only for max_connections 0 */
    uint64_t shutdown_timeout_ns; /* drain deadline, counted from the drain's start
                                   * (after the grace) */
    uint64_t drain_grace_ns;      /* after the first SIGINT/SIGTERM: how long to go on
                                   * accepting and serving as usual, with
                                   * net_stopping() true, before the drain; 0: none */
    uint64_t drain_idle_grace_ns; /* in the drain: how long a connection idle between
                                   * requests is left open for its next request, from
                                   * the drain's start; then it is closed; 0: closed
                                   * at once. Capped by shutdown_timeout_ns */
    bool pin;                     /* true: worker thread i is pinned to the i-th CPU of the
                                   * process's affinity mask (pthread_setaffinity_np(3));
                                   * false: every worker may run on any CPU of the mask and
                                   * the kernel's scheduler moves them (a thread whose core
                                   * is busy with another process can leave it) */
    unsigned batch_wait_us;       /* busy loop turns wait up to this many microseconds for
                                   * several completions per io_uring_enter (ring.c); 0: off,
                                   * one at a time */
    const char *handover_socket;  /* a UNIX socket path this process serves so that a
                                   * successor started with take_over receives its
                                   * listeners (handover.c, docs/operating.md); NULL:
                                   * none */
    bool take_over;               /* true: take the listeners from the coring serving
                                   * handover_socket instead of binding, and tell it
                                   * to drain once this process serves */
} net_config;

typedef struct net_hooks {
    /* On each worker thread, after its ring exists and before it accepts.
     * Returns 0, or a negative errno to abort start-up. */
    int (*thread_init)(void *user);
    /* On each worker thread after it stopped serving. */
    void (*thread_fini)(void *user);
    /* Runs in a new coroutine for each accepted connection. Owns @fd and
     * must close it (net_close) before returning, unless it leaves the
     * connection idle first (net_connection_idle, coring/net/io.h): then
     * the connection holds no coroutine until input comes, and this runs
     * again in a new coroutine for it, with the same @fd. */
    void (*on_connection)(int fd, void *user);
    /* The runtime closed an idle connection on its own (net_connection_idle:
     * the peer closed or reset it, its idle timeout passed, the drain, no
     * memory for a coroutine): @state is what net_connection_idle was
     * given; free it. On the worker thread, outside any coroutine: must
     * not block nor yield. May be NULL when no connection goes idle. */
    void (*on_idle_close)(void *state, void *user);
    /* Once the listeners are bound, on the main thread, with the bound port
     * and the thread count (the start-up log line goes here). */
    void (*on_listening)(const char *host, uint16_t port, unsigned threads, void *user);
    /* Once the listeners are bound, on the main thread, before any worker
     * thread (and so any ring) exists: the place to drop privileges
     * (setgid/setuid), which then apply to every thread. Returns 0, or a
     * negative errno to abort start-up. May be NULL. */
    int (*after_bind)(void *user);
    void *user;
} net_hooks;

/* net_config_default - the defaults: threads 0, host 0.0.0.0, port 8080,
 * backlog 4096, 64 KiB stacks (services: NET_SERVICE_STACK_SIZE_DEFAULT),
 * 1024 SQ entries, 512 provided buffers of
 * 16 KiB, max_connections 0, shutdown timeout 10 s, pin false,
 * batch_wait_us NET_BATCH_WAIT_US_DEFAULT. */
net_config net_config_default(void);

/* net_host_valid - whether @host is what net_config.host takes: a numeric
 * IPv4 or IPv6 address (inet_pton(3)). Any thread; for checking options
 * before net_run, which refuses anything else with -EINVAL. */
bool net_host_valid(const char *host);

/*
 * net_run - serve until SIGINT/SIGTERM, then (after drain_grace_ns)
 * drain and return.
 * Call once, from the main thread. It installs handlers for SIGINT and
 * SIGTERM (the first starts the shutdown, whichever thread receives it; a
 * second, during the grace or the drain, exits the process at once with
 * status 1; worker threads block them), ignores SIGPIPE and SIGHUP, and
 * restores the default SIGINT/SIGTERM actions before returning.
 * Returns 0 after a clean shutdown (or a hand-over to a successor and the
 * drain), or a negative errno if start-up failed (-EADDRINUSE, also for a
 * handover_socket another process serves; -EACCES, -EINVAL for a bad host,
 * -ENOMEM, -ENOSYS when io_uring is unavailable; with take_over -ENOENT or
 * -ECONNREFUSED when nothing serves handover_socket, -EBUSY, -EPROTO,
 * -EADDRNOTAVAIL when the predecessor serves another port); the failure is
 * logged.
 */
int net_run(const net_config *cfg, const net_hooks *hooks);

/* net_thread_index - 0..net_thread_count()-1 on a worker thread; -1 elsewhere. */
int net_thread_index(void);

/* net_thread_count - the number of worker threads (valid once net_run started). */
unsigned net_thread_count(void);

/* net_draining - true on a worker once shutdown has begun: finish the
 * current request, then close the connection. */
bool net_draining(void);

/*
 * net_stopping - true from the first SIGINT/SIGTERM on, for the rest of the
 * process's life: during the drain grace (drain_grace_ns, when the server
 * still accepts and serves as usual) and during the drain. For readiness
 * probes (/readyz answers 503 from then on). Any thread, lock-free (a
 * relaxed atomic load); false before net_run and while it serves.
 */
bool net_stopping(void);

/* net_affinity_cpus - how many CPUs sched_getaffinity(2) allows this
 * process (taskset, cpusets). At least 1. */
unsigned net_affinity_cpus(void);

#endif
