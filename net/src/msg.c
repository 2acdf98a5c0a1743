/*
 * Cross-core messages: a coroutine on one worker runs a function on another
 * worker's thread (net_call, net_call_all) or is woken from any thread
 * (net_wait, net_wake), by IORING_OP_MSG_RING into the target's ring, with
 * no lock and no shared queue. Each message travels in an envelope (msg.h)
 * that always comes back to its origin; the caller's message is touched
 * only while its caller waits, so a call that ends at its deadline or by a
 * cancel before the target took its message returns at once, and one whose
 * message is running elsewhere waits for it (a message's fn never blocks).
 *
 * A post the kernel refuses because the target's CQ is full is retried
 * from a 1 ms timer; a reply or wake-up that surely was not posted (a
 * worker's that cannot be, or, from a thread that is not a worker, at
 * once) goes to its origin's inbox, an atomic list the origin's tick
 * reads. Never one that may have been posted: it would arrive twice. See
 * coring/net/io.h.
 */
#include "msg.h"
#include "rt.h"
#include "stats.h"
#include "task.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

struct net_msgs {
    net_envelope *all;   /* every envelope of this thread's, linked by ->all: freed by
                            net_msgs_detach, wherever they are (free, out, abandoned,
                            in an inbox or a retry queue) */
    net_envelope *free;  /* recycled envelopes */
    net_envelope *retry; /* to re-post at the retry timer */
    bool retry_armed;
    struct __kernel_timespec retry_ts;
    _Atomic(net_envelope *) inbox; /* pushed by other threads: replies and wake-ups for
                                      waiters here that could not be posted */
    bool stale_logged;             /* a stale delivery was logged on this thread */
};

static net_envelope *envelope_take(struct net_msgs *m)
{
    net_envelope *e = m->free;
    if (e)
        m->free = e->next;
    else if (!(e = malloc(sizeof(*e))))
        return NULL;
    else {
        e->gen = 0;
        e->all = m->all;
        m->all = e;
    }
    return e;
}

static void envelope_recycle(struct net_msgs *m, net_envelope *e)
{
    atomic_store_explicit(&e->state, NET_ENVELOPE_FREE, memory_order_relaxed);
    e->next = m->free;
    m->free = e;
}

static void envelope_fill(net_envelope *e, net_msg *msg, int origin, int target, int phase)
{
    e->msg = msg;
    e->waiter = 0;
    atomic_store_explicit(&e->state, NET_ENVELOPE_OUT, memory_order_relaxed);
    e->gen++; /* a new use: deliveries of the last one no longer match */
    e->origin = origin;
    e->target = target;
    e->phase = phase;
    e->error = 0;
    e->back = false;
    e->let_go = false;
    e->next = e->sibling = NULL;
}

static void post(net_loop *loop, net_envelope *e, int to)
{
    /* Read before the release: once released, the origin may reuse @e. */
    uint32_t gen = e->gen;
    NET_TSAN_RELEASE(e);
    NET_STAT_ADD(messages_sent, 1);
    net_ring_msg(&loop->ring, net_rt.ring_fds[to], net_ptr_name(e, NET_TAG_MSG), gen,
                 net_ptr_name(e, NET_TAG_MSG_FAILED));
}

/* Hand @e (a reply or wake-up that could not be posted) to its origin's
 * inbox, which the origin's tick reads. Any thread. */
static void inbox_push(net_envelope *e)
{
    struct net_msgs *m = net_rt.loops[e->origin]->msgs;
    net_envelope *head = atomic_load_explicit(&m->inbox, memory_order_relaxed);
    do
        e->next = head;
    while (!atomic_compare_exchange_weak_explicit(&m->inbox, &head, e, memory_order_release,
                                                  memory_order_relaxed));
}

/* A delivery of @e that is not its current use's (an earlier use's, or a
 * second one of this use): dropped, so that it never ends the wait of
 * whoever holds @e now; counted, and logged once per thread. */
static void drop_stale(net_loop *loop, net_envelope *e)
{
    NET_STAT_ADD(messages_stale, 1);
    if (!loop->msgs->stale_logged) {
        loop->msgs->stale_logged = true;
        cr_log_warn("dropped a stale cross-core message (envelope %p): delivered twice, or after "
                    "its use ended (logged once per thread; coring_messages_stale_total counts "
                    "them)",
                    (void *)e);
    }
}

/* The waiter of @e, which it abandoned, is done with it: recycle it now
 * if it is back, else when it comes back (came_back). Only the waiter
 * recycles an envelope it abandoned before letting go, so that it never
 * reads one that another owner holds. */
static void envelope_let_go(struct net_msgs *m, net_envelope *e)
{
    if (e->back)
        envelope_recycle(m, e);
    else
        e->let_go = true;
}

/* @e is back on its origin (@loop), as a reply or wake-up: dropped if it
 * is not in use as one, or already back; else marked back, and recycled
 * if its waiter abandoned it and let go, left to that waiter if it has
 * not resumed yet, or its waiter resumed once nothing else is out. */
static void came_back(net_loop *loop, net_envelope *e)
{
    int state = atomic_load_explicit(&e->state, memory_order_relaxed);
    if (state == NET_ENVELOPE_FREE || e->back || e->phase != NET_MSG_REPLY) {
        drop_stale(loop, e);
        return;
    }
    e->back = true;
    if (state == NET_ENVELOPE_ABANDONED) {
        if (e->let_go)
            envelope_recycle(loop->msgs, e);
        return;
    }
    net_waiter *w = e->waiter ? net_waiter_of(loop, e->waiter) : NULL;
    if (w && w->name == e->waiter && net_waiting(w) && w->kind == NET_WAIT_MESSAGE && w->pending &&
        --w->pending == 0)
        net_wait_complete(w, 0, 0);
}

/* --- calls ------------------------------------------------------------- */

/* End a call's wait early: every envelope its target has not taken yet is
 * abandoned (its fn will never run); the others must come back first. */
static bool abandon_call(net_waiter *w)
{
    for (net_envelope *e = w->abandon_ctx; e; e = e->sibling) {
        int out = NET_ENVELOPE_OUT;
        if (!e->back &&
            atomic_compare_exchange_strong_explicit(&e->state, &out, NET_ENVELOPE_ABANDONED,
                                                    memory_order_relaxed, memory_order_relaxed))
            w->pending--;
    }
    return w->pending == 0;
}

/* Post @msgs[i] to @targets[i] (the caller's own thread: run at once, after
 * the others are posted), then wait for every reply, until @timeout_ns. */
static int call(net_msg *const *msgs, const unsigned *targets, size_t n, uint64_t timeout_ns)
{
    net_loop *loop = net_tl_loop;
    net_task *task = net_task_current();
    if (!loop || !task)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (targets[i] >= net_rt.threads)
            return -EINVAL;
    net_waiter *w = &task->waiter;
    if (net_waiter_cancelled(w))
        return -ECANCELED;
    struct net_msgs *m = loop->msgs;
    net_envelope *out = NULL, **tail = &out;
    unsigned remote = 0;
    for (size_t i = 0; i < n; i++) {
        if ((int)targets[i] == loop->index)
            continue;
        net_envelope *e = envelope_take(m);
        if (!e) {
            while (out) {
                net_envelope *next = out->sibling;
                envelope_recycle(m, out);
                out = next;
            }
            return -ENOMEM;
        }
        envelope_fill(e, msgs[i], loop->index, (int)targets[i], NET_MSG_REQUEST);
        *tail = e;
        tail = &e->sibling;
        remote++;
    }
    if (remote) {
        uint64_t name =
            net_wait_begin(w, NET_WAIT_MESSAGE, timeout_ns ? loop->now_ns + timeout_ns : 0);
        w->pending = remote;
        w->abandon = abandon_call;
        w->abandon_ctx = out;
        for (net_envelope *e = out; e; e = e->sibling) {
            e->waiter = name;
            post(loop, e, e->target);
        }
    }
    for (size_t i = 0; i < n; i++)
        if ((int)targets[i] == loop->index)
            msgs[i]->fn(msgs[i]);
    if (!remote)
        return 0;
    net_wait_suspend(w);
    int err = 0;
    bool abandoned = false;
    for (net_envelope *e = out, *next; e; e = next) {
        next = e->sibling;
        if (atomic_load_explicit(&e->state, memory_order_relaxed) == NET_ENVELOPE_ABANDONED) {
            abandoned = true; /* its fn never runs */
            envelope_let_go(m, e);
            continue;
        }
        if (e->error < 0 && !err)
            err = e->error;
        envelope_recycle(m, e);
    }
    if (abandoned)
        return w->ended == NET_END_DEADLINE ? -ETIMEDOUT : -ECANCELED;
    return err;
}

/* The caller's own thread: run @msg at once (the todo app's local shard,
 * on every request it serves). */
static bool call_here(unsigned target, net_msg *msg)
{
    net_loop *loop = net_tl_loop;
    if (!loop || (int)target != loop->index)
        return false;
    msg->fn(msg);
    return true;
}

int net_call(unsigned target, net_msg *msg)
{
    return call_here(target, msg) ? 0 : call(&msg, &target, 1, 0);
}

int net_call_timeout(unsigned target, net_msg *msg, uint64_t timeout_ns)
{
    return call_here(target, msg) ? 0 : call(&msg, &target, 1, timeout_ns);
}

int net_call_all(net_msg *const *msgs, const unsigned *targets, size_t n)
{
    return call(msgs, targets, n, 0);
}

/* --- wake-ups ------------------------------------------------------------ */

static net_envelope *envelope_of(net_wait_handle *h)
{
    return (net_envelope *)(void *)h;
}

int net_wait_init(net_wait_handle **out)
{
    net_loop *loop = net_tl_loop;
    if (!loop || !net_task_current())
        return -EPERM;
    net_envelope *e = envelope_take(loop->msgs);
    if (!e)
        return -ENOMEM;
    envelope_fill(e, NULL, loop->index, loop->index, NET_MSG_REPLY);
    *out = (net_wait_handle *)(void *)e;
    return 0;
}

/* End a wake-up's wait early: the wake-up, when it comes, is dropped. */
static bool abandon_wake(net_waiter *w)
{
    net_envelope *e = w->abandon_ctx;
    atomic_store_explicit(&e->state, NET_ENVELOPE_ABANDONED, memory_order_relaxed);
    w->pending = 0;
    return true;
}

int net_wait(net_wait_handle *h, uint64_t timeout_ns)
{
    net_envelope *e = envelope_of(h);
    net_task *task = net_task_current();
    if (!task || !e)
        return -EPERM;
    net_waiter *w = &task->waiter;
    net_loop *loop = w->loop;
    if (!e->back) {
        /* The wake-up is a completion on this thread's ring: it cannot
         * be handled before this coroutine yields. */
        if (net_waiter_cancelled(w)) {
            atomic_store_explicit(&e->state, NET_ENVELOPE_ABANDONED, memory_order_relaxed);
            envelope_let_go(loop->msgs, e);
            return -ECANCELED;
        }
        e->waiter = net_wait_begin(w, NET_WAIT_MESSAGE, timeout_ns ? loop->now_ns + timeout_ns : 0);
        w->pending = 1;
        w->abandon = abandon_wake;
        w->abandon_ctx = e;
        net_wait_suspend(w);
        if (atomic_load_explicit(&e->state, memory_order_relaxed) == NET_ENVELOPE_ABANDONED) {
            /* Ended first (it may have come back since: the first end
             * decides). */
            envelope_let_go(loop->msgs, e);
            return w->ended == NET_END_DEADLINE ? -ETIMEDOUT : -ECANCELED;
        }
    }
    int err = e->error;
    envelope_recycle(loop->msgs, e);
    return err;
}

void net_wait_release(net_wait_handle *h)
{
    net_loop *loop = net_tl_loop;
    if (loop && h)
        envelope_recycle(loop->msgs, envelope_of(h));
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

/* Close this thread's wake ring, whose state is unknown (an SQE that may
 * still be submitted, a CQE that may still come): the next post makes a
 * new one. */
static void drop_wake_ring(void)
{
    pthread_setspecific(wake_key, NULL);
    free_wake_ring(tl_wake_ring);
    tl_wake_ring = NULL;
}

/* The user_data of the wake ring's own MSG_RING, told apart from anything
 * else that lands in its CQ. */
#define NET_WAKE_RING_POST UINT64_C(1)

/*
 * From a thread that is not a worker, counted in foreign_wakes: post @e to
 * its origin's ring through this thread's wake ring, and wait for the
 * kernel's answer. Returns 0 (posted), -ESHUTDOWN (the origin's loop has
 * left: nobody waits there), -EINPROGRESS (submitted, but the wait for its
 * answer failed: it may have been posted), or another -errno: not posted
 * (-ENOMEM: no wake ring; the submit's error; the kernel's, -EOVERFLOW:
 * the origin's CQ is full).
 *
 * The wait goes through io_uring_wait_cqe_nr (liburing's
 * __io_uring_get_cqe, whichever liburing), which tests/unit/net/
 * test_msg_faults.c wraps to inject the failures handled here.
 */
static int post_foreign(net_envelope *e)
{
    /* Stays open while foreign_wakes counts this post (setup.c). */
    int fd = net_rt.ring_fds[e->origin];
    if (fd < 0)
        return -ESHUTDOWN;
    struct io_uring *r = wake_ring();
    if (!r)
        return -ENOMEM;
    struct io_uring_sqe *sqe = io_uring_get_sqe(r); /* one post at a time: never NULL */
    io_uring_prep_msg_ring(sqe, fd, e->gen, net_ptr_name(e, NET_TAG_MSG), 0);
    io_uring_sqe_set_data64(sqe, NET_WAKE_RING_POST);
    NET_TSAN_RELEASE(e);
    int ret = io_uring_submit(r);
    if (ret != 1) {
        /* Not submitted. The SQE may still sit in the SQ, where a later
         * submit would send it after all: a new ring for the next post. */
        drop_wake_ring();
        return ret < 0 ? ret : -EAGAIN;
    }
    struct io_uring_cqe *cqe;
    for (;;) {
        /* A signal (SIGSTOP/SIGCONT, ptrace, a cgroup freeze: this thread
         * is not ours and may not block them) ends the wait, not the post. */
        while ((ret = io_uring_wait_cqe_nr(r, &cqe, 1)) == -EINTR)
            ;
        if (ret < 0) {
            cr_log_error("wake-up MSG_RING submitted, but waiting for its result failed (%s): "
                         "it may or may not arrive",
                         cr_strerror(ret));
            drop_wake_ring();
            return -EINPROGRESS;
        }
        uint64_t data = cqe->user_data;
        int res = cqe->res;
        io_uring_cqe_seen(r, cqe);
        if (data == NET_WAKE_RING_POST)
            return res < 0 ? res : 0;
    }
}

int net_wake(net_wait_handle *h)
{
    net_envelope *e = envelope_of(h);
    if (!e)
        return -EINVAL;
    net_loop *loop = net_tl_loop;
    if (loop) {
        post(loop, e, e->origin);
        return 0;
    }
    /* Not a worker: the runtime must still be there (net_run waits for
     * the wakes under way before it frees the loops), and so must the
     * origin's ring (its worker waits for them before it closes it). */
    atomic_fetch_add(&net_rt.foreign_wakes, 1);
    if (atomic_load(&net_rt.wakes_closed)) {
        atomic_fetch_sub(&net_rt.foreign_wakes, 1);
        return -ESHUTDOWN;
    }
    int ret = post_foreign(e);
    if (ret < 0 && ret != -EINPROGRESS && ret != -ESHUTDOWN) {
        /* Surely not posted (the wake ring, its submit, or the kernel
         * refused it): the origin's tick takes it from its inbox. Never
         * after a post that may have arrived: the envelope would then be
         * delivered twice. */
        cr_log_debug("wake-up MSG_RING failed (%s): through the inbox", cr_strerror(ret));
        NET_TSAN_RELEASE(e);
        inbox_push(e);
        ret = 0;
    }
    atomic_fetch_sub(&net_rt.foreign_wakes, 1);
    return ret;
}

/* --- the loop's handlers ----------------------------------------------- */

static void arrived(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags)
{
    (void)ctx, (void)flags;
    net_envelope *e = net_name_ptr(data);
    NET_TSAN_ACQUIRE(e);
    if ((uint32_t)res != e->gen) {
        drop_stale(loop, e);
        return;
    }
    if (e->phase != NET_MSG_REQUEST) {
        came_back(loop, e);
        return;
    }
    int out = NET_ENVELOPE_OUT;
    if (atomic_compare_exchange_strong_explicit(&e->state, &out, NET_ENVELOPE_TAKEN,
                                                memory_order_acq_rel, memory_order_acquire))
        e->msg->fn(e->msg);
    e->phase = NET_MSG_REPLY;
    post(loop, e, e->origin);
}

static void post_failed(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags)
{
    (void)ctx, (void)flags;
    net_envelope *e = net_name_ptr(data);
    if (res == -EOVERFLOW || res == -EAGAIN || res == -EBUSY) {
        /* A full CQ on the target: it drains as it runs. Retry shortly. */
        cr_log_debug("MSG_RING failed (%s), retrying", cr_strerror(res));
        NET_STAT_ADD(messages_retried, 1);
        struct net_msgs *m = loop->msgs;
        e->next = m->retry;
        m->retry = e;
        if (!m->retry_armed) {
            m->retry_armed = true;
            net_ring_timeout(&loop->ring, &m->retry_ts, CR_NS_PER_MS, NET_CTRL(NET_CTRL_RETRY));
        }
        return;
    }
    /* Retrying would not help: its waiter learns the error. */
    cr_log_error("MSG_RING to thread %d failed: %s",
                 e->phase == NET_MSG_REQUEST ? e->target : e->origin, cr_strerror(res));
    e->error = res;
    if (e->phase == NET_MSG_REQUEST) {
        e->phase = NET_MSG_REPLY; /* back with its error: its fn never ran */
        came_back(loop, e);       /* we are its origin */
    } else {
        inbox_push(e); /* its waiter is on the origin, which no MSG_RING reaches */
    }
}

static void retry(net_loop *loop, void *ctx)
{
    (void)ctx;
    struct net_msgs *m = loop->msgs;
    net_envelope *e = m->retry;
    m->retry = NULL;
    m->retry_armed = false;
    while (e) {
        net_envelope *next = e->next;
        post(loop, e, e->phase == NET_MSG_REQUEST ? e->target : e->origin);
        e = next;
    }
}

/* The tick: what other threads could not post here, in the order pushed. */
static void take_inbox(net_loop *loop, void *ctx)
{
    (void)ctx;
    struct net_msgs *m = loop->msgs;
    if (!atomic_load_explicit(&m->inbox, memory_order_relaxed))
        return;
    net_envelope *e = atomic_exchange_explicit(&m->inbox, NULL, memory_order_acquire);
    net_envelope *ordered = NULL;
    while (e) {
        net_envelope *next = e->next;
        e->next = ordered;
        ordered = e;
        e = next;
    }
    while (ordered) {
        net_envelope *next = ordered->next;
        NET_TSAN_ACQUIRE(ordered);
        came_back(loop, ordered);
        ordered = next;
    }
}

int net_msgs_attach(net_loop *loop)
{
    loop->msgs = calloc(1, sizeof(*loop->msgs));
    if (!loop->msgs)
        return -ENOMEM;
    net_loop_on_cqe(loop, NET_TAG_MSG, arrived, NULL);
    net_loop_on_cqe(loop, NET_TAG_MSG_FAILED, post_failed, NULL);
    net_loop_on_ctrl(loop, NET_CTRL_RETRY, retry, NULL);
    net_loop_on_tick(loop, take_inbox, NULL);
    return 0;
}

void net_msgs_detach(net_loop *loop)
{
    struct net_msgs *m = loop->msgs;
    if (!m)
        return;
    while (m->all) {
        net_envelope *next = m->all->all;
        free(m->all);
        m->all = next;
    }
    free(m);
    loop->msgs = NULL;
}
