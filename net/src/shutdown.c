/*
 * Shutdown and signals: SIGINT/SIGTERM reach the main thread through a
 * pipe; the first one makes net_stopping() true, waits out the drain grace
 * (--drain-grace) and tells every worker to drain by a control message;
 * each worker then stops accepting, gives its idle connections a last
 * chance to send a request (--drain-idle-grace) and then ends them, lets
 * the requests in flight finish until the deadline, and reports itself
 * drained; once all are, they leave their loops together. A second signal
 * exits at once. See coring/net/runtime.h (Lifecycle) and docs/operating.md.
 */
#include "conn.h"
#include "handover.h"
#include "listener.h"
#include "notify.h"
#include "rt.h"
#include "shutdown.h"
#include "task.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct net_drain {
    bool services_cancelled; /* no other task left: the services were told to stop */
    bool drained;            /* no task left; counted in net_rt.drained */
    struct __kernel_timespec deadline_ts;
    struct __kernel_timespec idle_grace_ts;
};

/*
 * The idle grace is over (or there is none): end the waits of idle tasks,
 * except those on a descriptor with input waiting: a request that has
 * arrived is answered. An operation's wait is ended softly
 * (NET_END_DRAIN): if it completes first, the task goes on. Any other wait
 * of an idle task (a park, a message) is cancelled. Idle connections,
 * which have no task, are closed the same way (conn.c): their recv is
 * cancelled unless input is waiting, and its last CQE closes them unless a
 * request came first. From now on a task that goes idle meets the same
 * (io.c, recv.c, net_connection_idle).
 */
static void idle_grace_over(net_loop *loop, void *ctx)
{
    (void)ctx;
    if (!loop->draining || loop->idle_closing)
        return;
    loop->idle_closing = true;
    for (net_task *t = loop->tasks->list; t; t = t->next) {
        if (!t->idle || t->service)
            continue;
        net_waiter *w = &t->waiter;
        if (w->kind == NET_WAIT_IO && net_waiting(w)) {
            /* One ended already (its timeout, an interrupt) ends anyway;
             * the task's next operation meets the drain (io.c). */
            if (w->state == NET_WAIT_ON && !net_fd_has_input(w->fd))
                net_wait_end(w, NET_END_DRAIN);
        } else {
            net_task_cancel(t);
        }
    }
    net_conns_drain(loop, false);
}

/*
 * Shutdown begins: stop accepting (the connections already queued are
 * served) and arm the deadline. A connection idle between requests is left
 * open for the idle grace (--drain-idle-grace): a keep-alive client that
 * sends its next request now, unaware of the drain, gets it answered (with
 * Connection: close, http/) instead of a close under it, which it could
 * not tell from a lost request (RFC 9112 section 9.5); at the grace's end
 * the idle ones are closed (idle_grace_over). A request in flight is
 * served as usual.
 */
static void drain_start(net_loop *loop, void *ctx)
{
    (void)ctx;
    if (loop->draining)
        return;
    loop->draining = true;
    net_listener_stop(loop);
    uint64_t grace = net_rt.cfg.drain_idle_grace_ns;
    if (grace == 0)
        idle_grace_over(loop, NULL);
    else if (grace < net_rt.cfg.shutdown_timeout_ns) /* else the deadline ends them */
        net_ring_timeout(&loop->ring, &loop->drain->idle_grace_ts, grace,
                         NET_CTRL(NET_CTRL_IDLE_GRACE));
    net_ring_timeout(&loop->ring, &loop->drain->deadline_ts, net_rt.cfg.shutdown_timeout_ns,
                     NET_CTRL(NET_CTRL_DEADLINE));
}

/* The drain's deadline: every task but the services meets its deadline
 * through the path a request's own deadline takes (net_task_stop,
 * deadline.c), whatever it waits for (an operation, a park, a message, a
 * wake-up); and every idle connection is closed. */
static void drain_deadline(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_tasks *ts = loop->tasks;
    unsigned left = ts->count - ts->services;
    if (left)
        cr_log_warn("shutdown deadline passed: cancelling %u unfinished task(s)", left);
    loop->idle_closing = true;
    for (net_task *t = ts->list; t; t = t->next)
        if (!t->service)
            net_task_stop(t, NET_STOP_DRAIN);
    net_conns_drain(loop, true);
}

/*
 * Every turn while draining, once the other tasks are gone (and with them
 * every connection: an idle one may still be woken by a request that came,
 * and the listener's queue may still be accepted):
 * stop the services, then tell the runtime this worker is drained. A
 * drained worker keeps running its ring until every worker is drained
 * (NET_CTRL_EXIT), since another worker's last requests may still send it
 * messages.
 */
static void drain_progress(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_tasks *ts = loop->tasks;
    struct net_drain *d = loop->drain;
    if (ts->count != ts->services || loop->load.connections || net_listener_open(loop))
        return;
    if (!d->services_cancelled) {
        d->services_cancelled = true;
        for (net_task *t = ts->list; t; t = t->next)
            net_task_cancel(t);
    }
    if (!d->drained && ts->count == 0) {
        d->drained = true;
        atomic_fetch_add(&net_rt.drained, 1);
    }
}

int net_drain_attach(net_loop *loop)
{
    loop->drain = calloc(1, sizeof(*loop->drain));
    if (!loop->drain)
        return -ENOMEM;
    net_loop_on_ctrl(loop, NET_CTRL_SHUTDOWN, drain_start, NULL);
    net_loop_on_ctrl(loop, NET_CTRL_DEADLINE, drain_deadline, NULL);
    net_loop_on_ctrl(loop, NET_CTRL_IDLE_GRACE, idle_grace_over, NULL);
    net_loop_on_drain_turn(loop, drain_progress, NULL);
    return 0;
}

void net_drain_detach(net_loop *loop)
{
    free(loop->drain);
    loop->drain = NULL;
}

bool net_draining(void)
{
    return net_tl_loop && net_tl_loop->draining;
}

bool net_stopping(void)
{
    return atomic_load_explicit(&net_rt.stopping, memory_order_relaxed);
}

static int signal_pipe[2] = {-1, -1};

/* The handler: one byte, the signal number, into the pipe the main
 * thread polls (async-signal-safe: write(2) only; errno kept). */
static void on_stop_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t n = write(signal_pipe[1], &c, 1);
    (void)n;
    errno = saved;
}

/* Post control command @cmd to every worker whose loop has not left,
 * through a small ring of the main thread's; counted in foreign_wakes, so
 * that no worker closes its ring while its fd is read here (setup.c). */
static void broadcast(unsigned cmd)
{
    struct io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) < 0) {
        cr_log_error("cannot create the control ring: exiting at once");
        cr_log_flush();
        _exit(1);
    }
    for (unsigned i = 0; i < net_rt.threads; i++) {
        atomic_fetch_add(&net_rt.foreign_wakes, 1);
        int fd = net_rt.ring_fds[i];
        for (int tries = 0; fd >= 0 && tries < 1000; tries++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_msg_ring(sqe, fd, 0, NET_CTRL(cmd), 0);
            io_uring_sqe_set_data64(sqe, i);
            io_uring_submit(&ring);
            struct io_uring_cqe *cqe;
            if (io_uring_wait_cqe(&ring, &cqe) < 0)
                break;
            int res = cqe->res;
            io_uring_cqe_seen(&ring, cqe);
            if (res != -EOVERFLOW && res != -EAGAIN)
                break;
            usleep(1000); /* the worker's CQ is full: it drains as it runs */
        }
        atomic_fetch_sub(&net_rt.foreign_wakes, 1);
    }
    io_uring_queue_exit(&ring);
}

/*
 * The drain grace, on the main thread: net_stopping() is already true (so
 * /readyz answers 503) while the listeners go on accepting and serving, for
 * drain_grace_ns, long enough for a load balancer's health check to notice
 * and send new connections elsewhere. A second signal ends the process at
 * once with status 1, as during the drain.
 */
static void drain_grace(void)
{
    uint64_t end = cr_clock_now_ns() + net_rt.cfg.drain_grace_ns;
    for (uint64_t now = cr_clock_now_ns(); now < end; now = cr_clock_now_ns()) {
        uint64_t left_ms = (end - now + 999999) / 1000000;
        struct pollfd pfd = {.fd = signal_pipe[0], .events = POLLIN};
        unsigned char sig = 0;
        if (poll(&pfd, 1, left_ms < 200 ? (int)left_ms : 200) > 0 &&
            read(signal_pipe[0], &sig, 1) == 1) {
            cr_log_warn("second %s during the drain grace: exiting now",
                        sig == SIGINT ? "SIGINT" : "SIGTERM");
            cr_log_flush();
            _exit(1);
        }
        if (atomic_load(&net_rt.running) < net_rt.threads)
            break; /* a worker died: the caller's loop notices and drains */
        net_watchdog_kick();
    }
    cr_log_info("drain grace over: draining (deadline %.1f s)",
                (double)net_rt.cfg.shutdown_timeout_ns / 1e9);
}

/*
 * Shutdown from the main thread: tell the workers to drain, wait until every
 * live worker has no task left, then let them all leave their loops at once
 * (a drained worker may still be sent messages by the others until then).
 * A second signal, or workers still busy 5 s past the drain deadline, end
 * the process at once with status 1.
 */
void net_shut_down(void)
{
    net_handover_close();
    broadcast(NET_CTRL_SHUTDOWN);
    uint64_t give_up = cr_clock_now_ns() + net_rt.cfg.shutdown_timeout_ns + 5 * CR_NS_PER_S;
    while (atomic_load(&net_rt.drained) + (net_rt.threads - atomic_load(&net_rt.running)) <
           net_rt.threads) {
        struct pollfd pfd = {.fd = signal_pipe[0], .events = POLLIN};
        unsigned char sig = 0;
        if (poll(&pfd, 1, 20) > 0 && read(signal_pipe[0], &sig, 1) == 1) {
            cr_log_warn("second %s while draining: exiting now",
                        sig == SIGINT ? "SIGINT" : "SIGTERM");
            cr_log_flush();
            _exit(1);
        }
        if (cr_clock_now_ns() > give_up) {
            cr_log_error("workers still busy 5 s after the shutdown deadline: exiting now");
            cr_log_flush();
            _exit(1);
        }
        net_watchdog_kick();
    }
    broadcast(NET_CTRL_EXIT);
}

int net_signals_install(sigset_t *old_mask)
{
    /* SIGINT/SIGTERM: a handler that writes to a pipe, not sigwait, since
     * libraries may have started threads of their own before main (OpenBLAS
     * does, from a constructor) where the signals are not blocked; the
     * handler runs whichever thread the kernel picks. Workers block them. */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
        return -errno;
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, old_mask);
    return 0;
}

int net_signals_wait(void)
{
    for (;;) {
        struct pollfd pfd[3] = {{.fd = signal_pipe[0], .events = POLLIN}};
        int n = 1 + net_handover_pollfds(pfd + 1);
        unsigned char sig = 0;
        if (poll(pfd, (nfds_t)n, 200) > 0) {
            if (net_handover_event(pfd + 1, n - 1)) {
                /* The successor accepts on the same sockets: no grace. */
                atomic_store(&net_rt.stopping, true);
                net_notify_stopping("handed over to a successor");
                cr_log_info("hand-over: the successor serves: draining (deadline %.1f s)",
                            (double)net_rt.cfg.shutdown_timeout_ns / 1e9);
                return 0;
            }
            if (pfd[0].revents && read(signal_pipe[0], &sig, 1) == 1 &&
                (sig == SIGINT || sig == SIGTERM)) {
                atomic_store(&net_rt.stopping, true);
                const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
                net_notify_stopping(name);
                if (net_rt.cfg.drain_grace_ns == 0) {
                    cr_log_info("received %s: draining (deadline %.1f s)", name,
                                (double)net_rt.cfg.shutdown_timeout_ns / 1e9);
                } else {
                    cr_log_info("received %s: not ready; accepting for the drain grace of %.1f "
                                "s, then draining (deadline %.1f s)",
                                name, (double)net_rt.cfg.drain_grace_ns / 1e9,
                                (double)net_rt.cfg.shutdown_timeout_ns / 1e9);
                    drain_grace();
                }
                return 0;
            }
        }
        if (atomic_load(&net_rt.running) < net_rt.threads) {
            cr_log_error("a worker thread stopped unexpectedly: shutting down");
            return -EIO;
        }
        net_watchdog_kick();
    }
}

void net_signals_restore(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
}
