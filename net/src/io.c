/*
 * Coroutine I/O: each call prepares its SQE, waits for it through the
 * task's waiter (a linked timeout, or the wheel's deadline, when one is
 * asked for) and returns the CQE's result. A connection's own receives go
 * through its multishot recv (recv.c). See coring/net/io.h.
 */
#include "recv.h"
#include "stats.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <unistd.h>

/* Start an operation on @fd (-1: none): the current task, or NULL when it
 * must not run (not on a worker coroutine, or cancelled, or idle once the
 * drain's idle grace is over and @fd has no input waiting: shutdown ends
 * idle waits, but a request that has arrived is served). */
static net_task *begin(unsigned sqes_needed, int fd)
{
    net_task *task = net_task_current();
    if (!task || net_waiter_cancelled(&task->waiter))
        return NULL;
    net_loop *loop = task->waiter.loop;
    if (task->idle && loop->idle_closing && !task->service &&
        !(task->recv && fd >= 0 && fd == task->recv->fd && task->recv->len) &&
        !net_fd_has_input(fd)) {
        net_wait_end(&task->waiter, NET_END_CANCELLED);
        return NULL;
    }
    net_ring_reserve(&loop->ring, sqes_needed);
    return task;
}

#define BEGIN_OR_FAIL(n, fd)                                                                       \
    net_task *task = begin(n, fd);                                                                 \
    if (!task)                                                                                     \
        return net_task_current() ? -ECANCELED : -EPERM;                                           \
    struct io_uring_sqe *sqe = net_ring_sqe(&task->waiter.loop->ring);                             \
    struct __kernel_timespec ts

ssize_t net_recv_provided(int fd, net_rbuf *out, uint64_t timeout_ns)
{
    net_task *cur = net_task_current();
    if (cur && cur->recv && fd >= 0 && fd == cur->recv->fd) {
        ssize_t n = net_recv_multishot(cur, out, NULL, 0, timeout_ns);
        if (n != NET_RECV_SINGLE)
            return n;
    }
    BEGIN_OR_FAIL(2, fd);
    net_buf_ring *bufs = &task->waiter.loop->bufs;
    io_uring_prep_recv(sqe, fd, NULL, bufs->buf_size, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    /* A connection reads after answering, when the next request has
     * rarely arrived yet: arm the poll at once instead of first trying a
     * recv that would fail with EAGAIN (kernel 5.19+, ignored before). */
    sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    sqe->buf_group = bufs->bgid;
    int res = net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
    if (res == -ENOBUFS)
        NET_STAT_ADD(buffers_exhausted, 1);
    uint32_t flags = task->waiter.flags;
    if (flags & IORING_CQE_F_BUFFER) {
        uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
        net_buf_ring_taken(bufs, bid);
        if (res > 0) {
            *out = (net_rbuf){.data = net_buf_ring_buffer(bufs, bid),
                              .len = (size_t)res,
                              .bid = bid,
                              .provided = true};
            return res;
        }
        net_buf_ring_recycle(bufs, bid);
    }
    return res;
}

void net_rbuf_release(net_rbuf *b)
{
    if (b->provided) {
        net_loop *loop = net_loop_current();
        net_buf_ring_recycle(&loop->bufs, b->bid);
        b->provided = false;
    }
    b->data = NULL;
    b->len = 0;
}

ssize_t net_recv(int fd, void *buf, size_t len, uint64_t timeout_ns)
{
    net_task *cur = net_task_current();
    if (cur && net_recv_busy(cur, fd)) {
        /* The multishot recv would race a recv of our own: read from it
         * (or its error, which stands: see net_recv_multishot). */
        ssize_t n = net_recv_multishot(cur, NULL, buf, len, timeout_ns);
        if (n != NET_RECV_SINGLE)
            return n;
    }
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_recv(sqe, fd, buf, len, 0);
    return net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
}

ssize_t net_send_all(int fd, const void *buf, size_t len, uint64_t timeout_ns)
{
    const char *p = buf;
    size_t done = 0;
    while (done < len) {
        BEGIN_OR_FAIL(2, fd);
        io_uring_prep_send(sqe, fd, p + done, len - done, MSG_NOSIGNAL);
        int res = net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
        if (res < 0)
            return res;
        if (res == 0)
            return -EPIPE;
        done += (size_t)res;
    }
    return (ssize_t)len;
}

ssize_t net_send_last(int fd, const void *buf, size_t len)
{
    ssize_t n = send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    return n < 0 ? -errno : n;
}

bool net_cancelled(void)
{
    net_task *task = net_task_current();
    return task && net_waiter_cancelled(&task->waiter);
}

ssize_t net_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, 0);
    return net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
}

int net_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_connect(sqe, fd, addr, addrlen);
    return net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
}

int net_poll(int fd, unsigned events, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_poll_add(sqe, fd, events);
    return net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, fd, timeout_ns, &ts);
}

int net_sleep(uint64_t ns)
{
    BEGIN_OR_FAIL(1, -1);
    ts.tv_sec = (long long)(ns / CR_NS_PER_S);
    ts.tv_nsec = (long long)(ns % CR_NS_PER_S);
    io_uring_prep_timeout(sqe, &ts, 0, 0);
    int res = net_wait_sqe(&task->waiter, NET_WAIT_IO, sqe, -1, 0, NULL);
    return res == -ETIME ? 0 : res;
}

int net_shutdown(int fd, int how)
{
    return shutdown(fd, how) < 0 ? -errno : 0;
}

int net_close(int fd)
{
    net_task *task = net_task_current();
    if (!task)
        return close(fd) < 0 ? -errno : 0;
    net_loop *loop = task->waiter.loop;
    if (task->recv && fd >= 0 && fd == task->recv->fd)
        net_recv_release(loop, task->recv); /* its cancel goes before the close */
    /* Close even when the task was cancelled: never leak the descriptor.
     * Nobody waits for it (net_ring_close). */
    net_ring_reserve(&loop->ring, 1);
    net_ring_close(&loop->ring, fd);
    return 0;
}
