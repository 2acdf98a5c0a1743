/*
 * Cross-core messages: a coroutine on one worker runs a function on another
 * worker's thread (net_call) or is woken from any thread (net_wake), by
 * IORING_OP_MSG_RING into the target's ring, with no lock and no shared
 * queue. A post the kernel refuses (the target's CQ is full) is retried
 * from a 1 ms timer; a reply that cannot be posted at all is handed to
 * its waiter's thread through an atomic inbox read by the tick.
 * See coring/net/io.h.
 */
#include "loop.h"
#include "msg.h"
#include "rt.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

void net_msg_post(net_loop *loop, net_msg *msg, unsigned target)
{
    NET_TSAN_RELEASE(msg);
    NET_STAT_ADD(messages_sent, 1);
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_msg_ring(sqe, net_rt.ring_fds[target], 0, (uint64_t)(uintptr_t)msg | NET_TAG_MSG,
                           0);
    /* Only a failure (e.g. -EOVERFLOW: the target's CQ is full) posts a
     * CQE here; it is then retried from the loop. */
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)msg | NET_TAG_MSG_FAILED);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

int net_call(unsigned target, net_msg *msg)
{
    net_loop *loop = net_tl_loop;
    if (!loop || target >= net_rt.threads)
        return -EINVAL;
    if ((int)target == loop->index) {
        msg->fn(msg);
        return 0;
    }
    net_msg_rt *r = net_msg_rt_of(msg);
    r->waiter = net_task_current();
    r->origin = loop->index;
    r->phase = NET_MSG_REQUEST;
    r->target = (int)target;
    r->error = 0;
    net_msg_post(loop, msg, target);
    cr_coro_yield();
    return r->error;
}

int net_call_all(net_msg *const *msgs, const unsigned *targets, size_t n)
{
    net_loop *loop = net_tl_loop;
    net_task *task = net_task_current();
    if (!loop || !task)
        return -EINVAL;
    size_t remote = 0;
    for (size_t i = 0; i < n; i++) {
        if (targets[i] >= net_rt.threads)
            return -EINVAL;
        remote += (int)targets[i] != loop->index;
    }
    /* The first reply to arrive finds replies_pending at remote - 1, the
     * last at 0: only that one resumes the task (reply_arrived). */
    task->replies_pending = remote ? (unsigned)(remote - 1) : 0;
    for (size_t i = 0; i < n; i++) {
        if ((int)targets[i] == loop->index)
            continue;
        net_msg_rt *r = net_msg_rt_of(msgs[i]);
        r->waiter = task;
        r->origin = loop->index;
        r->phase = NET_MSG_REQUEST;
        r->target = (int)targets[i];
        r->error = 0;
        net_msg_post(loop, msgs[i], targets[i]);
    }
    for (size_t i = 0; i < n; i++)
        if ((int)targets[i] == loop->index) {
            net_msg_rt_of(msgs[i])->error = 0;
            msgs[i]->fn(msgs[i]);
        }
    if (remote)
        cr_coro_yield();
    for (size_t i = 0; i < n; i++) {
        int err = net_msg_rt_of(msgs[i])->error;
        if (err < 0)
            return err;
    }
    return 0;
}

int net_wait_init(net_wait_handle *w)
{
    net_loop *loop = net_tl_loop;
    net_task *task = net_task_current();
    if (!loop || !task)
        return -EPERM;
    w->msg = (net_msg){0};
    *net_msg_rt_of(&w->msg) =
        (net_msg_rt){.waiter = task, .origin = loop->index, .phase = NET_MSG_REPLY};
    return 0;
}

int net_wait(net_wait_handle *w)
{
    /* The wake-up is a completion on this thread's ring: it cannot be
     * handled before this coroutine yields. */
    cr_coro_yield();
    return net_msg_rt_of(&w->msg)->error;
}

/* A ring for threads that are not workers, to post MSG_RING from. */
static _Thread_local struct io_uring *tl_wake_ring;

static void free_wake_ring(void *p)
{
    io_uring_queue_exit(p);
    free(p);
}

static pthread_key_t wake_key;

static void make_wake_key(void)
{
    pthread_key_create(&wake_key, free_wake_ring);
}

static struct io_uring *wake_ring(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (tl_wake_ring)
        return tl_wake_ring;
    pthread_once(&once, make_wake_key);
    struct io_uring *r = malloc(sizeof(*r));
    if (!r || io_uring_queue_init(8, r, 0) < 0) {
        free(r);
        return NULL;
    }
    pthread_setspecific(wake_key, r); /* freed when the thread exits */
    tl_wake_ring = r;
    return r;
}

int net_wake(net_wait_handle *w)
{
    net_loop *loop = net_tl_loop;
    if (loop) {
        net_msg_post(loop, &w->msg, (unsigned)net_msg_rt_of(&w->msg)->origin);
        return 0;
    }
    struct io_uring *r = wake_ring();
    if (!r)
        return -ENOMEM;
    /* Once posted, @w belongs to the woken coroutine (it may be reused at
     * once): read what the post needs first. */
    int ring_fd = net_rt.ring_fds[net_msg_rt_of(&w->msg)->origin];
    uint64_t data = (uint64_t)(uintptr_t)&w->msg | NET_TAG_MSG;
    NET_TSAN_RELEASE(&w->msg);
    for (int tries = 0;; tries++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(r);
        io_uring_prep_msg_ring(sqe, ring_fd, 0, data, 0);
        io_uring_submit(r);
        struct io_uring_cqe *cqe;
        int ret = io_uring_wait_cqe(r, &cqe);
        if (ret < 0)
            return ret;
        ret = cqe->res;
        io_uring_cqe_seen(r, cqe);
        if (ret >= 0)
            return 0;
        if (ret != -EOVERFLOW || tries >= 1000)
            return ret;
        usleep(100); /* the worker's CQ is full: it drains as it runs */
    }
}

/* A reply (or a failure standing for one) for @waiter is in: resume it,
 * unless it waits in net_call_all for more. */
static void reply_arrived(net_loop *loop, net_task *waiter)
{
    if (waiter->replies_pending) {
        waiter->replies_pending--;
        return;
    }
    net_loop_resume(loop, waiter);
}

void net_msg_arrived(net_loop *loop, net_msg *msg)
{
    NET_TSAN_ACQUIRE(msg);
    net_msg_rt *r = net_msg_rt_of(msg);
    if (r->phase == NET_MSG_REQUEST) {
        msg->fn(msg);
        r->phase = NET_MSG_REPLY;
        net_msg_post(loop, msg, (unsigned)r->origin);
    } else {
        reply_arrived(loop, r->waiter);
    }
}

void net_msg_failed(net_loop *loop, net_msg *msg, int res)
{
    net_msg_rt *r = net_msg_rt_of(msg);
    if (res != -EOVERFLOW && res != -EAGAIN && res != -EBUSY) {
        /* Not a full queue on the target: retrying would not help. */
        cr_log_error("MSG_RING to thread %d failed: %s",
                     r->phase == NET_MSG_REQUEST ? r->target : r->origin, cr_strerror(res));
        r->error = res;
        if (r->phase == NET_MSG_REQUEST) {
            /* We are the sender: the caller learns it failed. */
            reply_arrived(loop, r->waiter);
        } else {
            /* A reply (or a wake-up): its waiter is parked on the origin
             * thread, which no MSG_RING reaches. Hand it over there by the
             * origin's inbox, which its tick reads; it resumes with the
             * error instead of waiting forever. */
            net_loop *origin = net_rt.loops[r->origin];
            net_msg *head = atomic_load_explicit(&origin->failed_replies, memory_order_relaxed);
            do
                r->next_retry = head;
            while (!atomic_compare_exchange_weak_explicit(&origin->failed_replies, &head, msg,
                                                          memory_order_release,
                                                          memory_order_relaxed));
        }
        return;
    }
    /* Retry shortly; a full CQ on the target drains as it runs. */
    cr_log_debug("MSG_RING failed (%s), retrying", cr_strerror(res));
    NET_STAT_ADD(messages_retried, 1);
    r->next_retry = loop->retry;
    loop->retry = msg;
    if (!loop->retry_armed) {
        loop->retry_armed = true;
        net_submit_ctrl_timeout(loop, &loop->retry_ts, CR_NS_PER_MS, NET_CTRL_RETRY);
    }
}

/* Resume the waiters whose reply another thread could not post (msg_failed),
 * in the order they failed; each sees its error. */
void net_msg_take_failed_replies(net_loop *loop)
{
    if (!atomic_load_explicit(&loop->failed_replies, memory_order_relaxed))
        return;
    net_msg *m = atomic_exchange_explicit(&loop->failed_replies, NULL, memory_order_acquire);
    net_msg *ordered = NULL;
    while (m) {
        net_msg *next = net_msg_rt_of(m)->next_retry;
        net_msg_rt_of(m)->next_retry = ordered;
        ordered = m;
        m = next;
    }
    while (ordered) {
        net_msg *next = net_msg_rt_of(ordered)->next_retry;
        reply_arrived(loop, net_msg_rt_of(ordered)->waiter);
        ordered = next;
    }
}

void net_msg_retry(net_loop *loop)
{
    net_msg *m = loop->retry;
    loop->retry = NULL;
    loop->retry_armed = false;
    while (m) {
        net_msg_rt *r = net_msg_rt_of(m);
        net_msg *next = r->next_retry;
        net_msg_post(loop, m,
                     r->phase == NET_MSG_REQUEST ? (unsigned)r->target : (unsigned)r->origin);
        m = next;
    }
}
