/*
 * The listener and accept: one SO_REUSEPORT listener per worker, bound by
 * the main thread before the workers start (so a port in use fails the
 * start, and the kernel spreads connections over the workers), single-shot
 * accepts on each worker's ring, the per-thread connection limit, and the
 * accept queue served (not reset) when the drain closes the listener.
 *
 * At most NET_TURN_ACCEPTS connections are accepted and started between
 * two loop turns (nginx's multi_accept off takes one an event loop
 * iteration): a burst of 10,000 accepted and started in one turn held
 * every established connection's request for the whole of it (issue 39:
 * GET / over 50 ms, up to 250).
 * See coring/net/runtime.h.
 */
#include "activation.h"
#include "conn.h"
#include "listener.h"
#include "rt.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* --- binding ----------------------------------------------------------- */

int net_host_address(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(port);
        *len = sizeof(*in4);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        *len = sizeof(*in6);
        return 0;
    }
    return -EINVAL;
}

bool net_host_valid(const char *host)
{
    struct sockaddr_storage ss;
    socklen_t len;
    return host && net_host_address(host, 0, &ss, &len) == 0;
}

/*
 * Is @ss (with an explicit port) free of other listeners? SO_REUSEPORT lets
 * any socket of the same user join a port that is already listened on, and
 * the kernel then spreads connections over both: a second coring started
 * on the same port by mistake would bind without error. A probe bound
 * without SO_REUSEPORT (but with SO_REUSEADDR, so that connections in
 * TIME_WAIT do not count) fails with EADDRINUSE when any socket listens
 * there, reuseport or not; it is closed before the workers' listeners bind.
 * Another program binding in between is not caught (a few microseconds).
 * Returns 0, or -errno from socket(2)/bind(2). See socket(7) SO_REUSEPORT.
 */
static int probe_port(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int ret = bind(fd, (const struct sockaddr *)ss, len) < 0 ? -errno : 0;
    close(fd);
    return ret;
}

/* Bind one SO_REUSEPORT listener per worker. With port 0 the first bind
 * picks the port (the kernel picks one nobody holds, reuseport or not) and
 * the others reuse it; an explicit port is probed first (probe_port). */
int net_bind_listeners(uint16_t *port_out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint16_t port = net_rt.cfg.port;
    if (net_host_address(net_rt.cfg.host, port, &ss, &len) < 0) {
        cr_log_error("--host %s: not a numeric IPv4 or IPv6 address", net_rt.cfg.host);
        return -EINVAL;
    }
    /* Listeners handed over by a predecessor or passed by systemd. */
    int inherited = net_listeners_inherit(&ss, port_out);
    if (inherited != 0)
        return inherited < 0 ? inherited : 0;
    if (port != 0) {
        int err = probe_port(&ss, len);
        if (err < 0) {
            cr_log_error("cannot listen on %s port %u: %s", net_rt.cfg.host, port,
                         cr_strerror(err));
            return err;
        }
    }
    for (unsigned i = 0; i < net_rt.threads; i++) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        /* Once here: accepted sockets inherit it (no setsockopt per accept). */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (ss.ss_family == AF_INET)
            ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        else
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, net_rt.cfg.backlog) < 0) {
            int err = -errno;
            close(fd);
            cr_log_error("cannot listen on %s port %u: %s", net_rt.cfg.host, port,
                         cr_strerror(err));
            return err;
        }
        if (port == 0) {
            struct sockaddr_storage bound;
            socklen_t blen = sizeof(bound);
            getsockname(fd, (struct sockaddr *)&bound, &blen);
            port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                    : ((struct sockaddr_in6 *)&bound)->sin6_port);
        }
        net_rt.listen_fds[i] = fd;
    }
    net_rt.listeners = net_rt.threads;
    *port_out = port;
    return 0;
}

/* --- accept ------------------------------------------------------------ */

struct net_listener {
    int fd;                             /* the worker's listener, or -1 once closed */
    unsigned armed;                     /* accepts in flight */
    bool backing_off;                   /* after an accept error: none armed for 10 ms */
    unsigned drain_turns;               /* turns since the drain began */
    unsigned accepted;                  /* connections accepted since the last turn */
    struct __kernel_timespec accept_ts; /* that back-off */
    uint64_t last_accept_log, last_limit_log;
};

static void accept_arm(net_loop *loop)
{
    struct io_uring_sqe *sqe = net_ring_sqe(&loop->ring);
    io_uring_prep_accept(sqe, loop->listener->fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, NET_TAG_ACCEPT);
    loop->listener->armed++;
}

/* Start a connection for accepted socket @fd, or close it beyond the
 * connection limit. */
static void serve_accepted(net_loop *loop, int fd)
{
    struct net_listener *l = loop->listener;
    if (loop->load.connections >= net_rt.max_conn_per_thread) {
        uint64_t now = cr_clock_now_ns();
        if (!loop->draining && now - l->last_limit_log > CR_NS_PER_S) {
            cr_log_warn("connection limit reached (%u on this thread): closing new "
                        "connections",
                        net_rt.max_conn_per_thread);
            l->last_limit_log = now;
        }
        close(fd);
        return;
    }
    /* TCP_NODELAY comes from the listener (net_bind_listeners). */
    if (net_connection_start(loop, fd) < 0) {
        cr_log_warn("out of memory for a connection: closing it");
        close(fd);
    }
}

/*
 * Shutdown, once no accept is in flight (and with them their references to
 * the listener): accept what the kernel has already queued, then close the
 * listener. Closing it first would reset connections whose handshake the
 * kernel completed and whose request may be waiting; accepted here, each
 * is served like any other (its request, if it came, is answered with
 * Connection: close). NET_TURN_ACCEPTS a turn, as ever; returns true when
 * there may be more. New connections are refused (RST) once it is closed;
 * one whose handshake completes between the last accept4(2) and close(2),
 * microseconds, is reset. See accept4(2), listen(2).
 */
static bool accept_queue(net_loop *loop)
{
    struct net_listener *l = loop->listener;
    int flags = fcntl(l->fd, F_GETFL);
    if (flags >= 0 && !(flags & O_NONBLOCK))
        fcntl(l->fd, F_SETFL, flags | O_NONBLOCK);
    for (unsigned n = 0; n < NET_TURN_ACCEPTS; n++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cr_log_warn("accept while draining: %s: resetting the rest of the accept queue",
                            cr_strerror(-errno));
            close(l->fd);
            l->fd = -1;
            return false;
        }
        serve_accepted(loop, fd);
    }
    return true;
}

/*
 * Each loop turn: NET_TURN_ACCEPTS single-shot accepts stay armed, those
 * that completed since the last turn armed again, so that the kernel
 * accepts at most that many connections between two turns. A multishot
 * accept, one CQE per connection with no SQE at all, accepted the whole
 * queue at each wake-up inside one io_uring_enter (579 connections in
 * 13.7 ms in a burst here), however long that took. Draining, once the
 * cancelled accepts are back: the queue, then the close (accept_queue).
 * Returns whether the drain left some of the queue for the next turn.
 */
static bool accept_turn(net_loop *loop, void *ctx)
{
    (void)ctx;
    struct net_listener *l = loop->listener;
    if (l->fd < 0)
        return false;
    if (loop->draining) {
        /* Accepts left after the first turn (a kernel before 5.19 has no
         * IORING_ASYNC_CANCEL_ALL): one cancel a turn. Several at once
         * found the same accept here. */
        if (l->armed && ++l->drain_turns > 1)
            net_ring_cancel(&loop->ring, NET_TAG_ACCEPT);
        return l->armed == 0 && accept_queue(loop);
    }
    if (l->accepted >= NET_TURN_ACCEPTS)
        loop->turn_cut = true; /* the bound was reached: more may be queued */
    l->accepted = 0;
    while (!l->backing_off && l->armed < NET_TURN_ACCEPTS)
        accept_arm(loop);
    return false;
}

bool net_listener_open(const net_loop *loop)
{
    return loop->listener && loop->listener->fd >= 0;
}

void net_listener_stop(net_loop *loop)
{
    /* Every accept at once (IORING_ASYNC_CANCEL_ALL, Linux 5.19); their
     * CQEs come back, then the turn accepts the queue and closes the
     * listener. A failure's CQE (user_data 0) is dropped. */
    if (loop->listener->armed) {
        struct io_uring_sqe *sqe = net_ring_sqe(&loop->ring);
        io_uring_prep_cancel64(sqe, NET_TAG_ACCEPT, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(sqe, 0);
    }
}

static void accepted(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags)
{
    (void)ctx, (void)data, (void)flags;
    struct net_listener *l = loop->listener;
    l->armed--;
    if (res >= 0) {
        l->accepted++;
        serve_accepted(loop, res); /* draining too: accepted before the cancel */
        return;
    }
    if (res == -ECANCELED)
        return;
    uint64_t now = cr_clock_now_ns();
    if (now - l->last_accept_log > CR_NS_PER_S) {
        cr_log_warn("accept: %s", cr_strerror(res));
        l->last_accept_log = now;
    }
    /* EMFILE, ENFILE, ENOMEM: back off instead of spinning on accept. */
    if (!loop->draining && !l->backing_off) {
        l->backing_off = true;
        net_ring_timeout(&loop->ring, &l->accept_ts, 10 * CR_NS_PER_MS, NET_CTRL(NET_CTRL_ACCEPT));
    }
}

/* The back-off after an accept error is over: the next turn arms again. */
static void accept_again(net_loop *loop, void *ctx)
{
    (void)ctx;
    loop->listener->backing_off = false;
}

int net_listener_attach(net_loop *loop, int fd)
{
    loop->listener = calloc(1, sizeof(*loop->listener));
    if (!loop->listener)
        return -ENOMEM;
    loop->listener->fd = fd;
    net_loop_on_cqe(loop, NET_TAG_ACCEPT, accepted, NULL);
    net_loop_on_ctrl(loop, NET_CTRL_ACCEPT, accept_again, NULL);
    net_loop_on_turn(loop, accept_turn, NULL);
    return 0;
}

void net_listener_detach(net_loop *loop)
{
    if (!loop->listener)
        return;
    if (loop->listener->fd >= 0)
        close(loop->listener->fd);
    free(loop->listener);
    loop->listener = NULL;
}
