/*
 * Coroutine I/O: each call prepares its SQE (and a linked timeout when one
 * is asked for), yields, and returns the CQE's result. See coring/net/io.h.
 */
#include "loop.h"
#include "stats.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

/* Common path: @sqe was prepared for @op; add a linked timeout if asked,
 * wait, and map a fired timeout to -ETIMEDOUT. */
static int submit_and_wait(net_task *task, net_op *op, struct io_uring_sqe *sqe,
                           uint64_t timeout_ns, struct __kernel_timespec *ts)
{
    io_uring_sqe_set_data64(sqe, net_op_begin(task, op));
    task->op_fd = sqe->fd; /* -1 for a timeout */
    if (timeout_ns >= NET_COARSE_TIMEOUT_NS) {
        net_wheel_add(&task->loop->wheel, &task->timer, task->loop->now_ns + timeout_ns);
    } else if (timeout_ns) {
        sqe->flags |= IOSQE_IO_LINK;
        ts->tv_sec = (long long)(timeout_ns / CR_NS_PER_S);
        ts->tv_nsec = (long long)(timeout_ns % CR_NS_PER_S);
        struct io_uring_sqe *t = net_loop_sqe(task->loop);
        io_uring_prep_link_timeout(t, ts, 0);
        io_uring_sqe_set_data64(t, 0);
    }
    int res = net_loop_wait(task, op);
    net_wheel_remove(&task->loop->wheel, &task->timer);
    switch (op->ended) {
    case NET_TASK_DRAINING:
        /* The drain cancelled this idle wait; a result that won the race
         * (the request had arrived) stands and the task goes on. */
        if (res == -ECANCELED) {
            task->life = NET_TASK_CANCELLED;
            return -ECANCELED;
        }
        break;
    case NET_TASK_INTERRUPTING:
        if (res == -ECANCELED && task->life != NET_TASK_CANCELLED)
            return -EINTR;
        break;
    case NET_TASK_TIMING_OUT:
        /* The tick cancelled it; a result that won the race stands. */
        if (res == -ECANCELED || res == -EINTR)
            res = -ETIMEDOUT;
        break;
    default:
        break;
    }
    if (res == -ECANCELED && timeout_ns && task->life != NET_TASK_CANCELLED)
        return -ETIMEDOUT;
    return res;
}

/* Start an operation on @fd (-1: none): the current task, or NULL when it
 * must not run (not on a worker coroutine, or cancelled, or idle while the
 * loop drains and @fd has no input waiting: shutdown ends idle waits, but
 * a request that has arrived is served). */
static net_task *begin(unsigned sqes_needed, int fd)
{
    net_task *task = net_task_current();
    if (!task || task->life == NET_TASK_CANCELLED)
        return NULL;
    if (task->life == NET_TASK_IDLE && task->loop->draining && !task->service &&
        !net_fd_has_input(fd)) {
        task->life = NET_TASK_CANCELLED;
        return NULL;
    }
    net_loop_reserve(task->loop, sqes_needed);
    return task;
}

#define BEGIN_OR_FAIL(n, fd)                                                                       \
    net_task *task = begin(n, fd);                                                                 \
    if (!task)                                                                                     \
        return net_task_current() ? -ECANCELED : -EPERM;                                          \
    net_op op = {.task = task};                                                                    \
    struct __kernel_timespec ts;                                                                   \
    struct io_uring_sqe *sqe = net_loop_sqe(task->loop)

ssize_t net_recv_provided(int fd, net_rbuf *out, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    net_buf_ring *bufs = &task->loop->bufs;
    io_uring_prep_recv(sqe, fd, NULL, bufs->buf_size, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    /* A connection reads after answering, when the next request has
     * rarely arrived yet: arm the poll at once instead of first trying a
     * recv that would fail with EAGAIN (kernel 5.19+, ignored before). */
    sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    sqe->buf_group = bufs->bgid;
    int res = submit_and_wait(task, &op, sqe, timeout_ns, &ts);
    if (res == -ENOBUFS)
        NET_STAT_ADD(buffers_exhausted, 1);
    if (op.flags & IORING_CQE_F_BUFFER) {
        uint16_t bid = (uint16_t)(op.flags >> IORING_CQE_BUFFER_SHIFT);
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
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_recv(sqe, fd, buf, len, 0);
    return submit_and_wait(task, &op, sqe, timeout_ns, &ts);
}

ssize_t net_send_all(int fd, const void *buf, size_t len, uint64_t timeout_ns)
{
    const char *p = buf;
    size_t done = 0;
    while (done < len) {
        BEGIN_OR_FAIL(2, fd);
        io_uring_prep_send(sqe, fd, p + done, len - done, MSG_NOSIGNAL);
        int res = submit_and_wait(task, &op, sqe, timeout_ns, &ts);
        if (res < 0)
            return res;
        if (res == 0)
            return -EPIPE;
        done += (size_t)res;
    }
    return (ssize_t)len;
}

ssize_t net_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, 0);
    return submit_and_wait(task, &op, sqe, timeout_ns, &ts);
}

int net_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_connect(sqe, fd, addr, addrlen);
    return submit_and_wait(task, &op, sqe, timeout_ns, &ts);
}

int net_poll(int fd, unsigned events, uint64_t timeout_ns)
{
    BEGIN_OR_FAIL(2, fd);
    io_uring_prep_poll_add(sqe, fd, events);
    return submit_and_wait(task, &op, sqe, timeout_ns, &ts);
}

int net_sleep(uint64_t ns)
{
    BEGIN_OR_FAIL(1, -1);
    ts.tv_sec = (long long)(ns / CR_NS_PER_S);
    ts.tv_nsec = (long long)(ns % CR_NS_PER_S);
    io_uring_prep_timeout(sqe, &ts, 0, 0);
    int res = submit_and_wait(task, &op, sqe, 0, NULL);
    return res == -ETIME ? 0 : res;
}

int net_close(int fd)
{
    net_task *task = net_task_current();
    if (!task)
        return close(fd) < 0 ? -errno : 0;
    /* Close even when the task was cancelled: never leak the descriptor.
     * Nobody waits for it: a close that succeeds posts no CQE
     * (IOSQE_CQE_SKIP_SUCCESS), a failing one's CQE (user_data 0) is
     * dropped; the descriptor is gone either way (close(2)). */
    net_loop_reserve(task->loop, 1);
    struct io_uring_sqe *sqe = net_loop_sqe(task->loop);
    io_uring_prep_close(sqe, fd);
    io_uring_sqe_set_data64(sqe, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    return 0;
}

int net_park(int fd, unsigned events, uint64_t timeout_ns)
{
    net_task *task = net_task_current();
    if (!task)
        return -EPERM;
    if (task->life == NET_TASK_CANCELLED)
        return -ECANCELED;
    if (task->life == NET_TASK_IDLE && task->loop->draining && !task->service) {
        task->life = NET_TASK_CANCELLED; /* shutdown ends idle waits */
        return -ECANCELED;
    }
    net_op op = {.task = task};
    task->park = &op;
    if (fd < 0 && (timeout_ns == 0 || timeout_ns >= NET_COARSE_TIMEOUT_NS)) {
        /* Nothing for the kernel to do: net_unpark, the tick or a cancel
         * puts the task on the loop's ready list (WOKEN). */
        task->state = NET_TASK_PARKED;
        if (timeout_ns)
            net_wheel_add(&task->loop->wheel, &task->timer, task->loop->now_ns + timeout_ns);
        cr_coro_yield();
        task->state = NET_TASK_RUNNING;
        net_wheel_remove(&task->loop->wheel, &task->timer);
        task->park = NULL;
        return op.res;
    }
    net_loop_reserve(task->loop, 2);
    struct __kernel_timespec ts;
    struct io_uring_sqe *sqe = net_loop_sqe(task->loop);
    int res;
    if (fd < 0) {
        ts.tv_sec = (long long)(timeout_ns / CR_NS_PER_S);
        ts.tv_nsec = (long long)(timeout_ns % CR_NS_PER_S);
        io_uring_prep_timeout(sqe, &ts, 0, 0);
        res = submit_and_wait(task, &op, sqe, 0, NULL);
        if (res == -ETIME)
            res = -ETIMEDOUT;
    } else {
        io_uring_prep_poll_add(sqe, fd, events);
        res = submit_and_wait(task, &op, sqe, timeout_ns, &ts);
    }
    task->park = NULL;
    if (task->life == NET_TASK_CANCELLED)
        return -ECANCELED;
    if (op.ended == NET_TASK_WOKEN && (res == -ECANCELED || res == -ETIMEDOUT))
        return 0;
    return res;
}
