/*
 * A connection's multishot recv (see recv.h): its queue of CQEs, arming
 * and stopping it, and a task's receive from it. A recv is named in
 * user_data by its connection's slot (NET_TAG_RECV, conn.c): a CQE that
 * comes after the connection closed, or after the recv was re-armed,
 * names an older generation and only gives its buffer back. While the
 * task waits for the next CQE, its wait is on the recv itself, so the
 * tick, net_task_interrupt, net_task_cancel and the drain cancel the recv;
 * data on its way wins the race and is served.
 */
#include "recv.h"
#include "rt.h"
#include "stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Give back the provided buffer a CQE with @flags carries, if any. */
static void give_back(net_loop *loop, uint32_t flags, bool taken)
{
    if (!(flags & IORING_CQE_F_BUFFER))
        return;
    uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
    if (!taken)
        net_buf_ring_taken(&loop->bufs, bid);
    net_buf_ring_recycle(&loop->bufs, bid);
}

void net_recv_give_back(net_loop *loop, uint32_t flags)
{
    give_back(loop, flags, false);
}

void net_recv_arm_multishot(net_loop *loop, net_recv_state *r, bool poll_first)
{
    r->name = net_slot_rename(loop, r->slot, NET_TAG_RECV);
    struct io_uring_sqe *sqe = net_ring_sqe(&loop->ring);
    io_uring_prep_recv_multishot(sqe, r->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = loop->bufs.bgid;
    /* Armed after an answer, when the next request has rarely arrived:
     * arm the poll at once instead of first trying a recv (EAGAIN). Not
     * for the drain's check: the recv tried at once takes what is there
     * before the cancel that follows it. */
    if (poll_first)
        sqe->ioprio |= IORING_RECVSEND_POLL_FIRST;
    io_uring_sqe_set_data64(sqe, r->name);
    r->arm = NET_RECV_ARMED;
}

void net_recv_stop(net_loop *loop, net_recv_state *r)
{
    if (r->arm == NET_RECV_ARMED) {
        r->arm = NET_RECV_STOPPING;
        net_ring_cancel(&loop->ring, r->name);
    }
}

net_recv_event net_recv_cqe(net_loop *loop, net_recv_state *r, int res, uint32_t flags)
{
    bool more = flags & IORING_CQE_F_MORE;
    if (!more)
        r->arm = NET_RECV_OFF;
    if (r->error) {
        /* A CQE of this recv could not be queued (its buffer, a hole in
         * the byte stream, was given back): what comes after it must never
         * reach the parser. Drop it; the error stands. */
        give_back(loop, flags, false);
        return NET_RECV_DROPPED;
    }
    if (!more && res == -ECANCELED)
        return NET_RECV_ENDED; /* our own cancel: not data */
    loop->recv_support = net_compat_recv_seen(loop->recv_support, res, flags);
    if (!more && res == -EINVAL && loop->recv_support == NET_MULTISHOT_NO)
        return NET_RECV_NONE; /* the kernel has none (before 6.0) */
    if (flags & IORING_CQE_F_BUFFER)
        net_buf_ring_taken(&loop->bufs, (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT));
    if (recv_push(r, (net_cqe){.res = res, .flags = flags}) < 0) {
        give_back(loop, flags, true);
        r->error = -ENOMEM;
        net_recv_stop(loop, r);
    } else if (r->len >= NET_RECV_PAUSE) {
        net_recv_stop(loop, r);
    }
    return NET_RECV_QUEUED;
}

void net_recv_release(net_loop *loop, net_recv_state *r)
{
    net_recv_stop(loop, r);
    r->arm = NET_RECV_OFF;
    r->name = 0; /* what still comes is stale */
    while (r->len) {
        give_back(loop, r->q[r->head].flags, true);
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
    net_recv_state *r = task->recv;
    net_waiter *w = &task->waiter;
    net_wait_begin(w, NET_WAIT_IO, timeout_ns ? w->loop->now_ns + timeout_ns : 0);
    net_wait_on_sqe(w, r->name, r->fd);
    if (drain_cancel)
        net_wait_end(w, NET_END_DRAIN);
    int res = net_wait_suspend(w);
    if (res == 1 || res == NET_RECV_SINGLE)
        return res;
    if (net_waiter_cancelled(w))
        return -ECANCELED;
    switch (w->ended) {
    case NET_END_DRAIN:
        w->end = NET_END_CANCELLED;
        return -ECANCELED;
    case NET_END_DEADLINE:
        return -ETIMEDOUT;
    case NET_END_INTERRUPTED:
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
        give_back(loop, c->flags, true);
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

ssize_t net_recv_multishot(net_task *task, net_rbuf *out, char *buf, size_t len,
                           uint64_t timeout_ns)
{
    net_recv_state *r = task->recv;
    net_loop *loop = task->waiter.loop;
    uint64_t deadline = timeout_ns ? loop->now_ns + timeout_ns : 0;
    for (;;) {
        if (net_waiter_cancelled(&task->waiter))
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
        if (loop->recv_support == NET_MULTISHOT_NO && r->arm == NET_RECV_OFF)
            return NET_RECV_SINGLE;
        bool drain_cancel = false;
        if (task->idle && loop->idle_closing && !task->service && !net_fd_has_input(r->fd)) {
            /* Shutdown ends idle waits; a request already received (its
             * CQE on its way) is served: an armed recv is cancelled
             * softly. */
            if (r->arm == NET_RECV_OFF) {
                net_wait_end(&task->waiter, NET_END_CANCELLED);
                return -ECANCELED;
            }
            drain_cancel = true;
        }
        if (r->arm == NET_RECV_OFF) {
            net_ring_reserve(&loop->ring, 1);
            net_recv_arm_multishot(loop, r, !drain_cancel);
        }
        uint64_t left = 0;
        if (deadline)
            left = deadline > loop->now_ns ? deadline - loop->now_ns : 1;
        int res = recv_wait(task, left, drain_cancel);
        if (res < 0 || res == NET_RECV_SINGLE)
            return res;
    }
}

bool net_recv_busy(const net_task *task, int fd)
{
    const net_recv_state *r = task->recv;
    return r && fd >= 0 && fd == r->fd && (r->arm != NET_RECV_OFF || r->len || r->error);
}
