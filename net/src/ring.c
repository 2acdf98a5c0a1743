/*
 * The ring: SQEs, submitting and waiting, cancels, control timeouts and
 * the backlog of reaped completions, on liburing's public API only. The
 * one place that knows which liburing it is built against: the batch wait
 * uses io_uring_submit_and_wait_min_timeout(3) from liburing 2.8 on, and
 * io_uring_submit_and_wait_timeout(3) before. See ring.h.
 */
#include "ring.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/error.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* liburing 2.8 added io_uring_submit_and_wait_min_timeout(3); 2.4 added
 * the version macros (2.3, Debian 12's, has neither). */
#if defined(IO_URING_VERSION_MAJOR) &&                                                             \
    (IO_URING_VERSION_MAJOR > 2 || (IO_URING_VERSION_MAJOR == 2 && IO_URING_VERSION_MINOR >= 8))
#define NET_RING_MIN_WAIT 1
#else
#define NET_RING_MIN_WAIT 0
#endif

int net_ring_init(net_ring *r, unsigned entries, unsigned cq_entries, unsigned flags)
{
    memset(r, 0, sizeof(*r));
    struct io_uring_params p = {0};
    p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    p.cq_entries = cq_entries;
    int ret = io_uring_queue_init_params(entries, &r->ring, &p);
    if (ret < 0)
        return ret;
    r->setup_flags = p.flags;
    return 0;
}

void net_ring_exit(net_ring *r)
{
    io_uring_queue_exit(&r->ring);
    free(r->backlog);
    r->backlog = NULL;
    r->backlog_cap = r->backlog_head = r->backlog_len = 0;
}

bool net_ring_set_batch_wait(net_ring *r, unsigned us)
{
#if NET_RING_MIN_WAIT
    bool can = r->ring.features & IORING_FEAT_MIN_TIMEOUT;
#else
    bool can = r->ring.features & IORING_FEAT_EXT_ARG;
#endif
    r->batch_wait_us = can ? us : 0;
    return can || !us;
}

unsigned net_ring_reap(net_ring *r)
{
    unsigned ready = io_uring_cq_ready(&r->ring);
    if (!ready)
        return 0;
    if (r->backlog_len + ready > r->backlog_cap) {
        size_t cap = r->backlog_cap ? r->backlog_cap : 256;
        while (cap < r->backlog_len + ready)
            cap *= 2;
        net_cqe *b = realloc(r->backlog, cap * sizeof(*b));
        if (!b)
            return 0;
        r->backlog = b;
        r->backlog_cap = cap;
    }
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&r->ring, head, cqe)
    {
        r->backlog[r->backlog_len++] =
            (net_cqe){.data = cqe->user_data, .res = cqe->res, .flags = cqe->flags};
        n++;
    }
    io_uring_cq_advance(&r->ring, n);
    NET_STAT_ADD(cqes_reaped, n);
    return n;
}

/*
 * The SQ is full: submit it, and take the completions it produces out of
 * the CQ into the backlog, which the loop dispatches in order before it
 * looks at the CQ again. Possibly called from a coroutine: a burst that
 * submits thousands of SQEs (a tick cancelling expired connections) then
 * frees CQ space as it goes instead of overflowing the CQ; dispatching here
 * instead would resume other coroutines from inside one. A submit the
 * kernel refuses (-EBUSY, -EAGAIN: completions to flush first) is not
 * retried blindly: flush and reap, then try again.
 */
struct io_uring_sqe *net_ring_sqe(net_ring *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
    while (cr_unlikely(!sqe)) {
        int ret = io_uring_submit(&r->ring);
        NET_STAT_SUBMIT(ret);
        net_ring_reap(r);
        sqe = io_uring_get_sqe(&r->ring);
        if (!sqe && ret <= 0) {
            io_uring_get_events(&r->ring);
            net_ring_reap(r);
        }
    }
    return sqe;
}

void net_ring_reserve(net_ring *r, unsigned n)
{
    if (io_uring_sq_space_left(&r->ring) < n) {
        int ret = io_uring_submit(&r->ring);
        NET_STAT_SUBMIT(ret);
    }
}

void net_ring_cancel(net_ring *r, uint64_t user_data)
{
    struct io_uring_sqe *sqe = net_ring_sqe(r);
    io_uring_prep_cancel64(sqe, user_data, 0);
    io_uring_sqe_set_data64(sqe, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void net_ring_timeout(net_ring *r, struct __kernel_timespec *ts, uint64_t ns, uint64_t user_data)
{
    ts->tv_sec = (long long)(ns / CR_NS_PER_S);
    ts->tv_nsec = (long long)(ns % CR_NS_PER_S);
    struct io_uring_sqe *sqe = net_ring_sqe(r);
    io_uring_prep_timeout(sqe, ts, 0, 0);
    io_uring_sqe_set_data64(sqe, user_data);
}

void net_ring_msg(net_ring *r, int ring_fd, uint64_t data, uint32_t res, uint64_t failed)
{
    struct io_uring_sqe *sqe = net_ring_sqe(r);
    io_uring_prep_msg_ring(sqe, ring_fd, res, data, 0);
    io_uring_sqe_set_data64(sqe, failed);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void net_ring_close(net_ring *r, int fd)
{
    struct io_uring_sqe *sqe = net_ring_sqe(r);
    io_uring_prep_close(sqe, fd);
    io_uring_sqe_set_data64(sqe, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

int net_ring_submit(net_ring *r)
{
    int ret = io_uring_submit(&r->ring);
    NET_STAT_SUBMIT(ret);
    return ret;
}

int net_ring_submit_and_peek(net_ring *r)
{
    int ret = io_uring_submit_and_get_events(&r->ring);
    NET_STAT_SUBMIT(ret);
    return ret;
}

/*
 * Submit and wait, in one io_uring_enter(2), for @wait_nr completions for
 * at most batch_wait_us, then for one. liburing 2.8+: the kernel's min-wait
 * (io_uring_submit_and_wait_min_timeout(3); with DEFER_TASKRUN the kernel
 * sleeps until @wait_nr completions are posted, and once min_wait has
 * passed returns as soon as one is there). The overall timeout, 1 s, only
 * keeps an empty ring from returning at min_wait; the tick's timeout SQE
 * ends the wait well before it. Older liburing (2.3): a timed wait for
 * @wait_nr (io_uring_submit_and_wait_timeout(3)), and when it ran out with
 * nothing completed, a plain wait for one: the same outcome in one more
 * enter when nothing came within batch_wait_us.
 */
static int batch_wait(net_ring *r, unsigned wait_nr)
{
    struct io_uring_cqe *cqe = NULL;
#if NET_RING_MIN_WAIT
    struct __kernel_timespec ts = {.tv_sec = 1};
    return io_uring_submit_and_wait_min_timeout(&r->ring, &cqe, wait_nr, &ts, r->batch_wait_us,
                                                NULL);
#else
    struct __kernel_timespec ts = {.tv_nsec = (long long)r->batch_wait_us * 1000};
    int ret = io_uring_submit_and_wait_timeout(&r->ring, &cqe, wait_nr, &ts, NULL);
    if (ret == -ETIME)
        ret = 0; /* nothing to submit, and nothing completed in time */
    if (ret < 0 || io_uring_cq_ready(&r->ring))
        return ret;
    int again = io_uring_submit_and_wait(&r->ring, 1);
    return again < 0 ? again : ret + again;
#endif
}

int net_ring_submit_and_wait(net_ring *r, unsigned wait_nr)
{
    int ret = wait_nr > 1 && r->batch_wait_us ? batch_wait(r, wait_nr)
                                              : io_uring_submit_and_wait(&r->ring, 1);
    NET_STAT_SUBMIT(ret);
    return ret;
}
