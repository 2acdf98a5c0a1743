/*
 * Ring and thread set-up: net_run() sizes the runtime (threads from the
 * affinity mask, the connection limit from RLIMIT_NOFILE), binds the
 * listeners, starts one worker thread per CPU, each pinned when
 * net_config.pin is true, with its ring
 * (the newest set-up flags the kernel takes), provided-buffer ring and
 * stack pool, waits for the signal, shuts down and joins them. The
 * process-wide state the other files share (net_rt, rt.h) is defined here.
 * See coring/net/runtime.h.
 */
#include "conn.h"
#include "handover.h"
#include "listener.h"
#include "msg.h"
#include "notify.h"
#include "rt.h"
#include "shutdown.h"
#include "stats.h"
#include "task.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/core/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

/* Process-wide runtime state: written by the main thread before workers
 * start (and ring_fds by each worker before the start barrier), read-only
 * afterwards. */
net_runtime net_rt;

/*
 * CQ entries for a ring whose thread may hold @connections connections:
 * each may have a few CQEs outstanding at once (its recv or send, a linked
 * timeout, a cancel that lost its race, its close), so 3 per connection
 * plus room for the SQ's worth of anything else, at least 4x the SQ, a
 * power of two, at most the kernel's IORING_MAX_CQ_ENTRIES (65536; beyond
 * it the SQ-full path reaps into the backlog). See io_uring_setup(2)
 * IORING_SETUP_CQSIZE.
 */
static unsigned cq_entries_for(unsigned sq_entries, unsigned connections)
{
    uint64_t want = 3 * (uint64_t)connections + sq_entries;
    if (want < 4 * (uint64_t)sq_entries)
        want = 4 * (uint64_t)sq_entries;
    uint64_t n = 1;
    while (n < want && n < 65536)
        n *= 2;
    return (unsigned)n;
}

/* Set up this worker's ring (the newest flags the kernel takes, compat.c)
 * and its batch wait. */
static int ring_init(net_loop *loop)
{
    unsigned fallback;
    int ret = net_compat_ring_init(
        &loop->ring, net_rt.cfg.ring_entries,
        cq_entries_for(net_rt.cfg.ring_entries, net_rt.max_conn_per_thread), &fallback);
    if (ret < 0)
        return ret;
    if (fallback && loop->index == 0)
        cr_log_info("io_uring: newest set-up flags unsupported, using fallback %u", fallback);
    if (!net_ring_set_batch_wait(&loop->ring, net_rt.cfg.batch_wait_us) && loop->index == 0)
        cr_log_info("io_uring: this kernel cannot batch waits: --batch-wait is off");
    return 0;
}

/* The loop's parts, each attached by the file that owns it; the ring and
 * the provided buffers first. Returns 0 or -errno (logged). */
static int worker_setup(net_loop *loop)
{
    int ret = ring_init(loop);
    if (ret < 0) {
        cr_log_error("io_uring set-up failed: %s", cr_strerror(ret));
        return ret;
    }
    net_rt.ring_fds[loop->index] = loop->ring.ring.ring_fd;
    ret = net_buf_ring_setup(&loop->ring.ring, &loop->bufs, net_rt.cfg.provided_buffers,
                             net_rt.cfg.provided_buffer_size, 0);
    if (ret < 0) {
        cr_log_error("provided-buffer ring set-up failed: %s", cr_strerror(ret));
        return ret;
    }
    if ((ret = net_waits_attach(loop)) < 0 || (ret = net_msgs_attach(loop)) < 0 ||
        (ret = net_tasks_attach(loop, net_rt.cfg.stack_size, net_rt.cfg.service_stack_size)) < 0 ||
        (ret = net_drain_attach(loop)) < 0 || (ret = net_conns_attach(loop)) < 0)
        return ret;
    net_watchdog_attach(loop);
    int fd = net_rt.listen_fds[loop->index];
    if ((ret = net_listener_attach(loop, fd)) < 0)
        return ret;
    net_rt.listen_fds[loop->index] = -1;
    return 0;
}

static void *net_worker_main(void *p)
{
    net_loop *loop = p;
    char name[16];
    snprintf(name, sizeof(name), "t%d", loop->index);
    cr_log_set_thread_name(name);
    /* The kernel's name too (/proc/PID/task/TID/comm, top -H, perf/syscalls):
     * "ring-N", at most 15 bytes. */
    char comm[16];
    snprintf(comm, sizeof(comm), "ring-%d", loop->index);
    pthread_setname_np(pthread_self(), comm);
    net_tl_loop = loop;
    /* Before thread_init, which may start tasks that arm deadlines. */
    loop->now_ns = cr_clock_now_ns();
    snprintf(name, sizeof(name), "%d", loop->index);
    if (cr_metrics_thread_attach(name, true) < 0)
        cr_log_warn("no memory for this thread's metrics: they stay at 0");

    if (net_rt.cfg.pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(net_rt.cpus[loop->index], &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
            cr_log_warn("could not pin to CPU %d", net_rt.cpus[loop->index]);
    }

    int ret = worker_setup(loop);
    bool set_up = ret == 0;
    if (set_up && net_rt.hooks.thread_init)
        ret = net_rt.hooks.thread_init(net_rt.hooks.user);
    if (ret < 0)
        atomic_store(&net_rt.init_failed, ret);

    pthread_barrier_wait(&net_rt.started);
    /* Second barrier: the main thread has checked init_failed. */
    pthread_barrier_wait(&net_rt.started);

    if (atomic_load(&net_rt.init_failed) == 0)
        net_loop_run(loop);

    net_listener_detach(loop);
    if (set_up && net_rt.hooks.thread_fini)
        net_rt.hooks.thread_fini(net_rt.hooks.user);
    net_tasks_detach(loop);
    net_conns_detach(loop);
    net_drain_detach(loop);
    net_waits_detach(loop);
    if (net_rt.ring_fds[loop->index] >= 0) {
        /* Other threads post to this ring (net_wake, the broadcast) while
         * they read its fd: from now on none does (-ESHUTDOWN), and those
         * that read it have posted before it closes, so that nothing is
         * sent to the number of a closed ring, which the next open(2)
         * reuses. Both sides seq_cst: each sees the other's write. */
        atomic_store(&net_rt.ring_fds[loop->index], -1);
        while (atomic_load(&net_rt.foreign_wakes))
            sched_yield();
        net_buf_ring_free(&loop->ring.ring, &loop->bufs);
        net_ring_exit(&loop->ring);
    }
    /* The messages part stays: other workers may still reach its inbox
     * (a reply that could not be posted); net_run frees it once none can. */
    atomic_fetch_sub(&net_rt.running, 1);
    return NULL;
}

unsigned net_affinity_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? (unsigned)n : 1;
}

static void pick_cpus(void)
{
    cpu_set_t set;
    int allowed[CPU_SETSIZE];
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                allowed[n++] = c;
    if (n == 0)
        allowed[n++] = 0;
    for (unsigned i = 0; i < net_rt.threads; i++)
        net_rt.cpus[i] = allowed[i % (unsigned)n];
}

static unsigned max_connections(void)
{
    if (net_rt.cfg.max_connections)
        return net_rt.cfg.max_connections;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* Keep some descriptors for listeners, rings, databases, logs. */
        rlim_t reserve = 32 + 4 * (rlim_t)net_rt.threads + net_rt.cfg.reserved_fds;
        return rl.rlim_cur > reserve * 2 ? (unsigned)(rl.rlim_cur - reserve)
                                         : (unsigned)rl.rlim_cur / 2;
    }
    return 1u << 20;
}

net_config net_config_default(void)
{
    return (net_config){
        .threads = 0,
        .host = "0.0.0.0",
        .port = 8080,
        .backlog = 4096,
        .stack_size = 64 * 1024,
        .service_stack_size = NET_SERVICE_STACK_SIZE_DEFAULT,
        .ring_entries = 1024,
        .provided_buffers = 512,
        .provided_buffer_size = 16 * 1024,
        .max_connections = 0,
        .shutdown_timeout_ns = 10 * CR_NS_PER_S,
        .drain_grace_ns = 0,
        .drain_idle_grace_ns = CR_NS_PER_S,
        .pin = false,
        .batch_wait_us = NET_BATCH_WAIT_US_DEFAULT,
    };
}

int net_thread_index(void)
{
    return net_tl_loop ? net_tl_loop->index : -1;
}

unsigned net_thread_count(void)
{
    return net_rt.threads;
}

static void raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int net_run(const net_config *cfg, const net_hooks *hooks)
{
    net_rt.cfg = *cfg;
    net_rt.hooks = *hooks;
    int stats_err = net_stats_register();
    if (stats_err < 0)
        return stats_err;
    atomic_store(&net_rt.init_failed, 0);
    atomic_store(&net_rt.drained, 0);
    atomic_store(&net_rt.stopping, false);
    atomic_store(&net_rt.wakes_closed, false);
    net_rt.threads = cfg->threads ? cfg->threads : net_affinity_cpus();
    raise_nofile_limit();
    net_rt.max_conn_per_thread = max_connections() / net_rt.threads;
    if (net_rt.max_conn_per_thread == 0)
        net_rt.max_conn_per_thread = 1;

    sigset_t old_mask;
    int sig_err = net_signals_install(&old_mask);
    if (sig_err < 0)
        return sig_err;

    net_rt.cpus = calloc(net_rt.threads, sizeof(int));
    net_rt.listen_fds = calloc(net_rt.threads, sizeof(int));
    net_rt.ring_fds = calloc(net_rt.threads, sizeof(atomic_int));
    net_rt.loops = calloc(net_rt.threads, sizeof(net_loop *));
    pthread_t *tids = calloc(net_rt.threads, sizeof(pthread_t));
    if (!net_rt.cpus || !net_rt.listen_fds || !net_rt.ring_fds || !net_rt.loops || !tids)
        return -ENOMEM;
    for (unsigned i = 0; i < net_rt.threads; i++)
        net_rt.listen_fds[i] = net_rt.ring_fds[i] = -1;
    pick_cpus();

    uint16_t port = 0;
    int ret = net_bind_listeners(&port);
    if (ret < 0 || (ret = net_handover_open()) < 0 || (ret = net_watchdog_setup()) < 0)
        goto out_close;
    if (net_rt.hooks.after_bind && (ret = net_rt.hooks.after_bind(net_rt.hooks.user)) < 0)
        goto out_close;

    pthread_barrier_init(&net_rt.started, NULL, net_rt.threads + 1);
    atomic_store(&net_rt.running, net_rt.threads);
    unsigned started = 0;
    for (; started < net_rt.threads; started++) {
        net_loop *loop = calloc(1, sizeof(*loop));
        if (!loop) {
            ret = -ENOMEM;
            break;
        }
        net_loop_init(loop, (int)started);
        net_rt.loops[started] = loop;
        if (pthread_create(&tids[started], NULL, net_worker_main, loop) != 0) {
            free(loop);
            net_rt.loops[started] = NULL;
            ret = -EAGAIN;
            break;
        }
    }
    if (started < net_rt.threads) {
        /* The barrier counts every thread: release the started ones. */
        atomic_store(&net_rt.init_failed, ret);
        cr_log_error("cannot start worker threads: %s", cr_strerror(ret));
        exit(1);
    }
    pthread_barrier_wait(&net_rt.started);
    ret = atomic_load(&net_rt.init_failed);
    pthread_barrier_wait(&net_rt.started);
    if (ret < 0) {
        for (unsigned i = 0; i < net_rt.threads; i++)
            pthread_join(tids[i], NULL);
        goto out_free;
    }

    if (net_rt.hooks.on_listening)
        net_rt.hooks.on_listening(net_rt.cfg.host, port, net_rt.threads, net_rt.hooks.user);
    net_handover_ready(); /* --take-over: the predecessor drains now */
    net_notify_ready(net_rt.cfg.host, port, net_rt.threads);

    /* Wait for SIGINT/SIGTERM; notice workers that died on their own. */
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    ret = net_signals_wait();
    net_shut_down();
    for (unsigned i = 0; i < net_rt.threads; i++)
        pthread_join(tids[i], NULL);
    if (ret == 0)
        cr_log_info("stopped");

out_free:
    /* Other threads (an inference pool) may still be in net_wake, reaching
     * a loop's inbox: from now on it refuses, and those under way finish
     * before the loops go. */
    atomic_store(&net_rt.wakes_closed, true);
    while (atomic_load(&net_rt.foreign_wakes))
        sched_yield();
    for (unsigned i = 0; i < net_rt.threads; i++) {
        if (net_rt.loops[i])
            net_msgs_detach(net_rt.loops[i]);
        free(net_rt.loops[i]);
    }
out_close:
    net_handover_close();
    net_watchdog_free();
    for (unsigned i = 0; i < net_rt.threads; i++)
        if (net_rt.listen_fds[i] >= 0)
            close(net_rt.listen_fds[i]);
    free(tids);
    net_signals_restore();
    free(net_rt.cpus);
    free(net_rt.listen_fds);
    free(net_rt.ring_fds);
    free(net_rt.loops);
    return ret;
}
