/*
 * Coroutine I/O: each call prepares its SQE (and a linked timeout when one
 * is asked for), yields, and returns the CQE's result. See coring/net/io.h.
 */
#include "loop.h"
#include "rt.h"
#include "stats.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
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
        !(fd >= 0 && fd == task->recv.fd && task->recv.len) && !net_fd_has_input(fd)) {
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

/* --- the connection's multishot recv --------------------------------- */

/*
 * A connection task (one started for an accepted descriptor) receives
 * through one multishot recv armed on its descriptor (IORING_RECV_MULTISHOT
 * with IOSQE_BUFFER_SELECT, kernel 6.0+): the kernel posts a CQE with a
 * provided buffer each time data arrives, with no SQE and no poll arming
 * per request. Its CQEs are queued on the task in order (dispatch), read
 * by net_recv_provided (as provided buffers) or net_recv (copied), and the
 * recv is armed again when a CQE comes without IORING_CQE_F_MORE (EOF, an
 * error, -ENOBUFS, a cancel), at the next receive once the queue is read.
 * While the task waits for it, the task's op_data names the recv, so the
 * tick (timeouts), net_task_interrupt, net_task_cancel and the drain
 * cancel the recv itself, and its last CQE (-ECANCELED) ends the wait;
 * data that won the race is queued and handed out first. Its timeouts go
 * through the wheel whatever their length (a linked timeout cannot be
 * attached to a recv already armed): they fire up to one tick late.
 * NET_RECV_PAUSE CQEs queued unread cancel the recv until they are read,
 * so that a busy connection holds few provided buffers. Closing the
 * connection cancels it; a CQE that comes after (its task gone or its
 * recv re-armed: the slot's recv_gen differs) gives its buffer back.
 */

#define NET_RECV_SINGLE (-4096) /* not an errno: use the single-shot path */

static void recv_pop(net_recv_state *r)
{
    r->head = (r->head + 1) % r->cap;
    r->len--;
    r->off = 0;
}

static int recv_push(net_recv_state *r, net_cqe c)
{
    if (!r->q) {
        r->q = r->inline_q;
        r->cap = NET_RECV_INLINE;
    }
    if (r->len == r->cap) {
        uint32_t cap = r->cap * 2;
        net_cqe *q = malloc(cap * sizeof(*q));
        if (!q)
            return -ENOMEM;
        for (uint32_t i = 0; i < r->len; i++)
            q[i] = r->q[(r->head + i) % r->cap];
        if (r->q != r->inline_q)
            free(r->q);
        r->q = q;
        r->cap = cap;
        r->head = 0;
    }
    r->q[(r->head + r->len) % r->cap] = c;
    r->len++;
    return 0;
}

static void recv_arm(net_task *task, bool poll_first)
{
    net_recv_state *r = &task->recv;
    net_loop *loop = task->loop;
    net_slot *s = &loop->slots[task->slot];
    if (++s->gen == 0)
        s->gen = 1;
    s->recv_gen = s->gen;
    r->data = (uint64_t)s->gen << NET_GEN_SHIFT | (uint64_t)task->slot << NET_SLOT_SHIFT |
              NET_TAG_RECV;
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_recv_multishot(sqe, r->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = loop->bufs.bgid;
    /* Armed after an answer, when the next request has rarely arrived:
     * arm the poll at once instead of first trying a recv (EAGAIN). Not
     * for the drain's check: the recv tried at once takes what is there
     * before the cancel that follows it. */
    if (poll_first)
        sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, r->data);
    r->armed = true;
    r->paused = false;
}

/* Resume @t if it waits for its recv, with @res (1: a CQE was queued). */
static void recv_wake(net_loop *loop, net_task *t, net_slot *s, int res)
{
    net_recv_state *r = &t->recv;
    if (!r->wait || s->op != r->wait)
        return;
    net_op *op = r->wait;
    s->op = NULL;
    op->res = res;
    op->flags = 0;
    net_loop_resume(loop, t);
}

void net_recv_dispatch(net_loop *loop, uint64_t data, int res, uint32_t flags)
{
    uint32_t slot = (uint32_t)(data >> NET_SLOT_SHIFT) & ((1u << NET_SLOT_BITS) - 1);
    uint32_t gen = (uint32_t)(data >> NET_GEN_SHIFT);
    net_slot *s = slot < loop->slots_len ? &loop->slots[slot] : NULL;
    bool more = flags & IORING_CQE_F_MORE;
    if (!s || !s->task || s->recv_gen != gen) {
        /* Stale: its connection closed, or the recv was re-armed. */
        if (flags & IORING_CQE_F_BUFFER) {
            uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
            net_buf_ring_taken(&loop->bufs, bid);
            net_buf_ring_recycle(&loop->bufs, bid);
        }
        return;
    }
    net_task *t = s->task;
    net_recv_state *r = &t->recv;
    if (!more) {
        r->armed = false;
        s->recv_gen = 0;
    }
    if (r->error) {
        /* A CQE of this recv could not be queued (its buffer, a hole in
         * the byte stream, was given back): what comes after it must never
         * reach the parser. Drop it; the error stands (recv_multishot). */
        if (flags & IORING_CQE_F_BUFFER) {
            uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
            net_buf_ring_taken(&loop->bufs, bid);
            net_buf_ring_recycle(&loop->bufs, bid);
        }
        return;
    }
    if (!more && res == -ECANCELED) {
        recv_wake(loop, t, s, -ECANCELED); /* our own cancel: not data */
        return;
    }
    if (!more && res == -EINVAL && !loop->recv_multishot_seen) {
        /* The kernel has no multishot recv (before 6.0): single shots. */
        loop->recv_single = true;
        recv_wake(loop, t, s, NET_RECV_SINGLE);
        return;
    }
    if (flags & IORING_CQE_F_BUFFER) {
        loop->recv_multishot_seen = true;
        net_buf_ring_taken(&loop->bufs, (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT));
    }
    if (recv_push(r, (net_cqe){.data = data, .res = res, .flags = flags}) < 0) {
        if (flags & IORING_CQE_F_BUFFER)
            net_buf_ring_recycle(&loop->bufs, (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT));
        r->error = -ENOMEM;
        if (r->armed)
            net_submit_cancel(loop, r->data);
    } else if (r->armed && !r->paused && r->len >= NET_RECV_PAUSE) {
        r->paused = true;
        net_submit_cancel(loop, r->data);
    }
    recv_wake(loop, t, s, 1);
}

void net_recv_release(net_task *task)
{
    net_recv_state *r = &task->recv;
    if (r->armed) {
        net_submit_cancel(task->loop, r->data);
        r->armed = false;
    }
    task->loop->slots[task->slot].recv_gen = 0; /* what still comes is stale */
    while (r->len) {
        net_cqe *c = &r->q[r->head];
        if (c->flags & IORING_CQE_F_BUFFER)
            net_buf_ring_recycle(&task->loop->bufs,
                                 (uint16_t)(c->flags >> IORING_CQE_BUFFER_SHIFT));
        recv_pop(r);
    }
    if (r->q && r->q != r->inline_q)
        free(r->q);
    r->q = NULL;
    r->cap = r->head = 0;
    r->fd = -1;
}

/* Wait for the next CQE of the armed recv, for at most @timeout_ns (0:
 * none). @drain_cancel: the task is idle and the loop drains; cancel the
 * recv now, softly (data already on its way wins). Returns 1 (a CQE is
 * queued), 0 (our pause cancel ended the recv: arm again),
 * NET_RECV_SINGLE, -ETIMEDOUT, -EINTR or -ECANCELED. */
static int recv_wait(net_task *task, uint64_t timeout_ns, bool drain_cancel)
{
    net_recv_state *r = &task->recv;
    net_loop *loop = task->loop;
    net_op op = {.task = task};
    net_op_begin(task, &op);
    task->op_data = r->data; /* cancels name the recv itself */
    task->op_fd = r->fd;
    r->wait = &op;
    if (timeout_ns)
        net_wheel_add(&loop->wheel, &task->timer, loop->now_ns + timeout_ns);
    if (drain_cancel)
        net_submit_cancel(loop, r->data);
    int res = net_loop_wait(task, &op);
    r->wait = NULL;
    net_wheel_remove(&loop->wheel, &task->timer);
    if (res == 1 || res == NET_RECV_SINGLE)
        return res;
    if (task->life == NET_TASK_CANCELLED)
        return -ECANCELED;
    if (drain_cancel || op.ended == NET_TASK_DRAINING) {
        task->life = NET_TASK_CANCELLED;
        return -ECANCELED;
    }
    switch (op.ended) {
    case NET_TASK_TIMING_OUT:
        return -ETIMEDOUT;
    case NET_TASK_INTERRUPTING:
        return -EINTR;
    default:
        return 0;
    }
}

/* Hand out the head CQE: as a provided buffer into @out, or (@out NULL)
 * copied into @buf (at most @len bytes; the rest stays queued). */
static ssize_t recv_take(net_loop *loop, net_recv_state *r, net_rbuf *out, char *buf, size_t len)
{
    net_cqe *c = &r->q[r->head];
    if (c->res <= 0) {
        int res = c->res;
        if (c->flags & IORING_CQE_F_BUFFER)
            net_buf_ring_recycle(&loop->bufs, (uint16_t)(c->flags >> IORING_CQE_BUFFER_SHIFT));
        recv_pop(r);
        if (res == -ENOBUFS)
            NET_STAT_ADD(buffers_exhausted, 1);
        return res;
    }
    uint16_t bid = (uint16_t)(c->flags >> IORING_CQE_BUFFER_SHIFT);
    char *data = net_buf_ring_buffer(&loop->bufs, bid) + r->off;
    size_t n = (size_t)c->res - r->off;
    if (out) {
        *out = (net_rbuf){.data = data, .len = n, .bid = bid, .provided = true};
        recv_pop(r);
        return (ssize_t)n;
    }
    if (n > len)
        n = len;
    memcpy(buf, data, n);
    r->off += (uint32_t)n;
    if (r->off == (uint32_t)c->res) {
        net_buf_ring_recycle(&loop->bufs, bid);
        recv_pop(r);
    }
    return (ssize_t)n;
}

/* A receive on the connection's own descriptor, through its multishot
 * recv (armed here when it is not). */
static ssize_t recv_multishot(net_task *task, net_rbuf *out, char *buf, size_t len,
                              uint64_t timeout_ns)
{
    net_recv_state *r = &task->recv;
    net_loop *loop = task->loop;
    uint64_t deadline = timeout_ns ? loop->now_ns + timeout_ns : 0;
    for (;;) {
        if (task->life == NET_TASK_CANCELLED)
            return -ECANCELED;
        if (r->len)
            return recv_take(loop, r, out, buf, len);
        /* Only what was queued before the error (dispatch drops the rest)
         * is handed out, then the error, for good: a later receive (this
         * recv re-armed, or a single shot) would return bytes after the
         * hole. */
        if (r->error)
            return r->error;
        /* Not while this connection's multishot recv is armed: a single
         * shot would race it. Its CQEs are read until its last one. */
        if (loop->recv_single && !r->armed)
            return NET_RECV_SINGLE;
        bool drain_cancel = false;
        if (task->life == NET_TASK_IDLE && loop->draining && !task->service &&
            !net_fd_has_input(r->fd)) {
            /* Shutdown ends idle waits; a request already received (its
             * CQE on its way) is served: an armed recv is cancelled
             * softly. */
            if (!r->armed) {
                task->life = NET_TASK_CANCELLED;
                return -ECANCELED;
            }
            drain_cancel = true;
        }
        if (!r->armed) {
            net_loop_reserve(loop, 1);
            recv_arm(task, !drain_cancel);
        }
        uint64_t left = 0;
        if (deadline)
            left = deadline > loop->now_ns ? deadline - loop->now_ns : 1;
        int res = recv_wait(task, left, drain_cancel);
        if (res < 0 || res == NET_RECV_SINGLE)
            return res;
    }
}

ssize_t net_recv_provided(int fd, net_rbuf *out, uint64_t timeout_ns)
{
    net_task *cur = net_task_current();
    if (cur && fd >= 0 && fd == cur->recv.fd) {
        ssize_t n = recv_multishot(cur, out, NULL, 0, timeout_ns);
        if (n != NET_RECV_SINGLE)
            return n;
    }
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
    net_task *cur = net_task_current();
    if (cur && fd >= 0 && fd == cur->recv.fd &&
        (cur->recv.armed || cur->recv.len || cur->recv.error)) {
        /* The multishot recv would race a recv of our own: read from it
         * (or its error, which stands: see recv_multishot). */
        ssize_t n = recv_multishot(cur, NULL, buf, len, timeout_ns);
        if (n != NET_RECV_SINGLE)
            return n;
    }
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

int net_shutdown(int fd, int how)
{
    return shutdown(fd, how) < 0 ? -errno : 0;
}

int net_close(int fd)
{
    net_task *task = net_task_current();
    if (!task)
        return close(fd) < 0 ? -errno : 0;
    if (fd >= 0 && fd == task->recv.fd)
        net_recv_release(task); /* its cancel goes before the close */
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
        /* A busy task waiting on a socket of its own (the database
         * driver with queries out) holds requests that wait for this
         * completion: while it waits, the loop turns do not batch-wait
         * for client completions (loop.c, batch_wait_nr). An idle one
         * (nothing asked) holds nobody. */
        bool outside = task->life == NET_TASK_BUSY;
        task->loop->outside_waits += outside;
        res = submit_and_wait(task, &op, sqe, timeout_ns, &ts);
        task->loop->outside_waits -= outside;
    }
    task->park = NULL;
    if (task->life == NET_TASK_CANCELLED)
        return -ECANCELED;
    if (op.ended == NET_TASK_WOKEN && (res == -ECANCELED || res == -ETIMEDOUT))
        return 0;
    return res;
}
