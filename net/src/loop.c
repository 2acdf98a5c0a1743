/*
 * The per-core event loop: one io_uring per worker thread, a multishot
 * accept on the thread's SO_REUSEPORT listener, and a coroutine per
 * connection. Every completion's user_data says what it completes:
 *
 *   0                  nothing waits for it (linked timeouts, cancels)
 *   pointer | TAG_OP   a net_op on a waiting coroutine's stack: resume it
 *   TAG_ACCEPT         the multishot accept: a new connection, or an error
 *   pointer | TAG_MSG  a cross-core message arriving (request or reply)
 *   pointer | TAG_MSG_FAILED  our MSG_RING could not be posted: retry
 *   cmd << 3 | TAG_CTRL       a control event (shutdown, timers)
 *
 * Pointers are 8-byte aligned, which frees the low 3 bits for the tag.
 * See coring/net/runtime.h and coring/net/io.h for the contracts.
 */
#include "loop.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/core/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Process-wide runtime state: written by the main thread before workers
 * start (and ring_fds by each worker before the start barrier), read-only
 * afterwards. */
static struct {
    net_config cfg;
    net_hooks hooks;
    unsigned threads;
    unsigned max_conn_per_thread;
    int *cpus;             /* CPU of each worker */
    int *listen_fds;       /* listener of each worker */
    int *ring_fds;         /* ring fd of each worker, for MSG_RING */
    net_loop **loops;
    pthread_barrier_t started;
    atomic_int init_failed;
    atomic_uint drained;   /* workers with no task left after shutdown began */
    atomic_uint running;
    atomic_bool stopping;  /* the first SIGINT/SIGTERM came (grace or drain) */
} rt;

static _Thread_local net_loop *tl_loop;

/* A message crosses threads through the kernel (IORING_OP_MSG_RING), which
 * ThreadSanitizer cannot see: tell it that posting a message publishes what
 * was written to it and that receiving one acquires that. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define NET_TSAN_RELEASE(p) __tsan_release(p)
#define NET_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define NET_TSAN_RELEASE(p) ((void)(p))
#define NET_TSAN_ACQUIRE(p) ((void)(p))
#endif

static void loop_resume(net_loop *loop, net_task *task);

/* --- SQEs ------------------------------------------------------------- */

/*
 * Move every CQE now in the CQ to the loop's backlog, which loop_run
 * dispatches in order before it looks at the CQ again. Called when the SQ
 * is full, possibly from a coroutine: a burst that submits thousands of
 * SQEs (a tick cancelling expired connections) then frees CQ space as it
 * goes instead of overflowing the CQ. Dispatching here instead would resume
 * other coroutines from inside one. Returns the CQEs moved; when the
 * backlog cannot grow (no memory) they stay in the CQ.
 */
static unsigned reap_to_backlog(net_loop *loop)
{
    unsigned ready = io_uring_cq_ready(&loop->ring);
    if (!ready)
        return 0;
    if (loop->backlog_len + ready > loop->backlog_cap) {
        size_t cap = loop->backlog_cap ? loop->backlog_cap : 256;
        while (cap < loop->backlog_len + ready)
            cap *= 2;
        net_cqe *b = realloc(loop->backlog, cap * sizeof(*b));
        if (!b)
            return 0;
        loop->backlog = b;
        loop->backlog_cap = cap;
    }
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    io_uring_for_each_cqe(&loop->ring, head, cqe) {
        loop->backlog[loop->backlog_len++] =
            (net_cqe){.data = cqe->user_data, .res = cqe->res, .flags = cqe->flags};
        n++;
    }
    io_uring_cq_advance(&loop->ring, n);
    NET_STAT_ADD(cqes_reaped, n);
    return n;
}

struct io_uring_sqe *net_loop_sqe(net_loop *loop)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&loop->ring);
    while (cr_unlikely(!sqe)) {
        /* The SQ is full: submit it, and take the completions it
         * produces out of the CQ. A submit the kernel refuses (-EBUSY,
         * -EAGAIN: completions to flush first) is not retried blindly:
         * flush and reap, then try again. */
        int ret = io_uring_submit(&loop->ring);
        NET_STAT_SUBMIT(ret);
        reap_to_backlog(loop);
        sqe = io_uring_get_sqe(&loop->ring);
        if (!sqe && ret <= 0) {
            io_uring_get_events(&loop->ring);
            reap_to_backlog(loop);
        }
    }
    return sqe;
}

/* A cancel of the operation named @user_data: only a failure (-ENOENT,
 * -EALREADY: it completed first) posts a CQE, which nothing reads. */
static void submit_cancel(net_loop *loop, uint64_t user_data)
{
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_cancel64(sqe, user_data, 0);
    io_uring_sqe_set_data64(sqe, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

void net_loop_reserve(net_loop *loop, unsigned n)
{
    if (io_uring_sq_space_left(&loop->ring) < n) {
        int ret = io_uring_submit(&loop->ring);
        NET_STAT_SUBMIT(ret);
    }
}

static void submit_ctrl_timeout(net_loop *loop, struct __kernel_timespec *ts, uint64_t ns,
                                unsigned cmd)
{
    ts->tv_sec = (long long)(ns / CR_NS_PER_S);
    ts->tv_nsec = (long long)(ns % CR_NS_PER_S);
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_timeout(sqe, ts, 0, 0);
    io_uring_sqe_set_data64(sqe, NET_CTRL(cmd));
}

/* --- tasks ------------------------------------------------------------ */

struct task_start {
    net_loop *loop;
    void (*fn)(void *arg);
    void *arg;
    int fd;       /* >= 0: a connection for hooks.on_connection */
};

static void task_main(void *p)
{
    struct task_start *s = p;
    net_task task = {.coro = cr_coro_current(), .loop = s->loop, .op_fd = -1};
    void (*fn)(void *) = s->fn;
    void *arg = s->arg;
    int fd = s->fd;
    net_loop *loop = s->loop;

    cr_coro_set_data(task.coro, &task);
    task.next = loop->tasks;
    if (loop->tasks)
        loop->tasks->prev = &task;
    loop->tasks = &task;
    loop->task_count++;
    if (fd >= 0)
        loop->connections++;

    if (fd >= 0)
        rt.hooks.on_connection(fd, rt.hooks.user);
    else
        fn(arg);

    if (fd >= 0)
        loop->connections--;
    if (task.service)
        loop->service_count--;
    loop->task_count--;
    if (task.prev)
        task.prev->next = task.next;
    else
        loop->tasks = task.next;
    if (task.next)
        task.next->prev = task.prev;
}

static int task_start(net_loop *loop, struct task_start *s)
{
    cr_coro *co = cr_coro_create(loop->stacks, task_main, s);
    if (!co)
        return -ENOMEM;
    cr_coro_resume(co);
    if (cr_coro_finished(co))
        cr_coro_destroy(co);
    return 0;
}

static void loop_resume(net_loop *loop, net_task *task)
{
    (void)loop;
    cr_coro *co = task->coro; /* task lives on co's stack: read it first */
    cr_coro_resume(co);
    if (cr_coro_finished(co))
        cr_coro_destroy(co);
}

int net_spawn(void (*fn)(void *arg), void *arg)
{
    net_loop *loop = tl_loop;
    if (!loop)
        return -EINVAL;
    struct task_start s = {.loop = loop, .fn = fn, .arg = arg, .fd = -1};
    return task_start(loop, &s);
}

net_task *net_task_current(void)
{
    cr_coro *co = cr_coro_current();
    return co ? cr_coro_data(co) : NULL;
}

void net_task_cancel(net_task *task)
{
    if (task->cancelled)
        return;
    task->cancelled = true;
    if (task->park && !task->park_sqe) {
        if (!task->unparked)
            net_loop_make_ready(task->loop, task, -ECANCELED);
    } else if (task->op) {
        submit_cancel(task->loop, (uint64_t)(uintptr_t)task->op | NET_TAG_OP);
    }
}

void net_task_interrupt(net_task *task)
{
    if (!task->op || task->interrupted)
        return;
    task->interrupted = true;
    submit_cancel(task->loop, (uint64_t)(uintptr_t)task->op | NET_TAG_OP);
}

void net_task_set_idle(bool idle)
{
    net_task *task = net_task_current();
    if (!task)
        return;
    /* While draining, the idle task's next operation decides: one on a
     * descriptor with input waiting runs (the request is answered), any
     * other returns -ECANCELED (io.c, begin). */
    task->idle = idle;
}

bool net_fd_has_input(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

void net_task_set_service(bool service)
{
    net_task *task = net_task_current();
    if (!task || task->service == service)
        return;
    task->service = service;
    if (service)
        task->loop->service_count++;
    else
        task->loop->service_count--;
}

void net_loop_make_ready(net_loop *loop, net_task *task, int res)
{
    task->unparked = true;
    task->park->res = res;
    task->ready_next = NULL;
    if (loop->ready_tail)
        loop->ready_tail->ready_next = task;
    else
        loop->ready_head = task;
    loop->ready_tail = task;
}

/* Resume the parked tasks woken since the last turn (and those they wake). */
static void run_ready(net_loop *loop)
{
    net_task *t;
    while ((t = loop->ready_head)) {
        loop->ready_head = t->ready_next;
        if (!loop->ready_head)
            loop->ready_tail = NULL;
        loop_resume(loop, t);
    }
}

bool net_unpark(net_task *task)
{
    if (!task || !task->park || task->unparked)
        return false;
    if (!task->park_sqe) {
        net_loop_make_ready(task->loop, task, 0);
        return true;
    }
    task->unparked = true;
    submit_cancel(task->loop, (uint64_t)(uintptr_t)task->park | NET_TAG_OP);
    return true;
}

int net_loop_wait(net_task *task, net_op *op)
{
    task->op = op;
    cr_coro_yield();
    task->op = NULL;
    return op->res;
}

/* --- cross-core messages ------------------------------------------------ */

static void msg_post(net_loop *loop, net_msg *msg, unsigned target)
{
    NET_TSAN_RELEASE(msg);
    NET_STAT_ADD(messages_sent, 1);
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_msg_ring(sqe, rt.ring_fds[target], 0, (uint64_t)(uintptr_t)msg | NET_TAG_MSG, 0);
    /* Only a failure (e.g. -EOVERFLOW: the target's CQ is full) posts a
     * CQE here; it is then retried from the loop. */
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)msg | NET_TAG_MSG_FAILED);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
}

int net_call(unsigned target, net_msg *msg)
{
    net_loop *loop = tl_loop;
    if (!loop || target >= rt.threads)
        return -EINVAL;
    if ((int)target == loop->index) {
        msg->fn(msg);
        return 0;
    }
    msg->waiter = net_task_current();
    msg->origin = loop->index;
    msg->phase = NET_MSG_REQUEST;
    msg->target = (int)target;
    msg->error = 0;
    msg_post(loop, msg, target);
    cr_coro_yield();
    return msg->error;
}

int net_wait_init(net_wait_handle *w)
{
    net_loop *loop = tl_loop;
    net_task *task = net_task_current();
    if (!loop || !task)
        return -EPERM;
    w->msg = (net_msg){.waiter = task, .origin = loop->index, .phase = NET_MSG_REPLY};
    return 0;
}

int net_wait(net_wait_handle *w)
{
    /* The wake-up is a completion on this thread's ring: it cannot be
     * handled before this coroutine yields. */
    cr_coro_yield();
    return w->msg.error;
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
    net_loop *loop = tl_loop;
    if (loop) {
        msg_post(loop, &w->msg, (unsigned)w->msg.origin);
        return 0;
    }
    struct io_uring *r = wake_ring();
    if (!r)
        return -ENOMEM;
    /* Once posted, @w belongs to the woken coroutine (it may be reused at
     * once): read what the post needs first. */
    int ring_fd = rt.ring_fds[w->msg.origin];
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

static void msg_arrived(net_loop *loop, net_msg *msg)
{
    NET_TSAN_ACQUIRE(msg);
    if (msg->phase == NET_MSG_REQUEST) {
        msg->fn(msg);
        msg->phase = NET_MSG_REPLY;
        msg_post(loop, msg, (unsigned)msg->origin);
    } else {
        loop_resume(loop, msg->waiter);
    }
}

static void msg_failed(net_loop *loop, net_msg *msg, int res)
{
    if (res != -EOVERFLOW && res != -EAGAIN && res != -EBUSY) {
        /* Not a full queue on the target: retrying would not help. */
        cr_log_error("MSG_RING to thread %d failed: %s", msg->phase == NET_MSG_REQUEST ? msg->target
                                                                                      : msg->origin,
                     cr_strerror(res));
        msg->error = res;
        if (msg->phase == NET_MSG_REQUEST) {
            /* We are the sender: the caller learns it failed. */
            loop_resume(loop, msg->waiter);
        } else {
            /* A reply (or a wake-up): its waiter is parked on the origin
             * thread, which no MSG_RING reaches. Hand it over there by the
             * origin's inbox, which its tick reads; it resumes with the
             * error instead of waiting forever. */
            net_loop *origin = rt.loops[msg->origin];
            net_msg *head = atomic_load_explicit(&origin->failed_replies, memory_order_relaxed);
            do
                msg->next_retry = head;
            while (!atomic_compare_exchange_weak_explicit(&origin->failed_replies, &head, msg,
                                                          memory_order_release,
                                                          memory_order_relaxed));
        }
        return;
    }
    /* Retry shortly; a full CQ on the target drains as it runs. */
    cr_log_debug("MSG_RING failed (%s), retrying", cr_strerror(res));
    NET_STAT_ADD(messages_retried, 1);
    msg->next_retry = loop->retry;
    loop->retry = msg;
    if (!loop->retry_armed) {
        loop->retry_armed = true;
        submit_ctrl_timeout(loop, &loop->retry_ts, CR_NS_PER_MS, NET_CTRL_RETRY);
    }
}

/* Resume the waiters whose reply another thread could not post (msg_failed),
 * in the order they failed; each sees msg->error. */
static void take_failed_replies(net_loop *loop)
{
    if (!atomic_load_explicit(&loop->failed_replies, memory_order_relaxed))
        return;
    net_msg *m = atomic_exchange_explicit(&loop->failed_replies, NULL, memory_order_acquire);
    net_msg *ordered = NULL;
    while (m) {
        net_msg *next = m->next_retry;
        m->next_retry = ordered;
        ordered = m;
        m = next;
    }
    while (ordered) {
        net_msg *next = ordered->next_retry;
        loop_resume(loop, ordered->waiter);
        ordered = next;
    }
}

static void msg_retry(net_loop *loop)
{
    net_msg *m = loop->retry;
    loop->retry = NULL;
    loop->retry_armed = false;
    while (m) {
        net_msg *next = m->next_retry;
        msg_post(loop, m, m->phase == NET_MSG_REQUEST ? (unsigned)m->target : (unsigned)m->origin);
        m = next;
    }
}

/* --- accept and shutdown ---------------------------------------------- */

static void arm_accept(net_loop *loop)
{
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_multishot_accept(sqe, loop->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(sqe, NET_TAG_ACCEPT);
    loop->accept_armed = true;
}

/* Serve accepted connection @fd, or close it beyond the connection limit. */
static void serve_accepted(net_loop *loop, int fd)
{
    if (loop->connections >= rt.max_conn_per_thread) {
        uint64_t now = cr_clock_now_ns();
        if (!loop->draining && now - loop->last_limit_log > CR_NS_PER_S) {
            cr_log_warn("connection limit reached (%u on this thread): closing new "
                        "connections",
                        rt.max_conn_per_thread);
            loop->last_limit_log = now;
        }
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct task_start s = {.loop = loop, .fd = fd};
    if (task_start(loop, &s) < 0) {
        cr_log_warn("out of memory for a connection coroutine: closing it");
        close(fd);
    }
}

/*
 * Shutdown, once the multishot accept is gone (and with it its reference to
 * the listener): accept what the kernel has already queued, then close the
 * listener. Closing it first would reset connections whose handshake the
 * kernel completed and whose request may be waiting; accepted here, each
 * is served like any other (its request, if it came, is answered with
 * Connection: close). New connections are refused (RST) once it is closed;
 * one whose handshake completes between the last accept4(2) and close(2),
 * microseconds, is reset. See accept4(2), listen(2).
 */
static void close_listener(net_loop *loop)
{
    if (loop->listen_fd < 0)
        return;
    int flags = fcntl(loop->listen_fd, F_GETFL);
    if (flags >= 0)
        fcntl(loop->listen_fd, F_SETFL, flags | O_NONBLOCK);
    unsigned n = 0;
    for (;;) {
        int fd = accept4(loop->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cr_log_warn("accept while draining: %s: resetting the rest of the accept queue",
                            cr_strerror(-errno));
            break;
        }
        serve_accepted(loop, fd);
        n++;
    }
    close(loop->listen_fd);
    loop->listen_fd = -1;
    if (n)
        cr_log_debug("draining: served %u connection(s) left in the accept queue", n);
}

static void accepted(net_loop *loop, int res, uint32_t flags)
{
    if (!(flags & IORING_CQE_F_MORE))
        loop->accept_armed = false;
    if (res >= 0) {
        /* Draining too: the kernel accepted it before the cancel. */
        serve_accepted(loop, res);
    } else if (res != -ECANCELED) {
        uint64_t now = cr_clock_now_ns();
        if (now - loop->last_accept_log > CR_NS_PER_S) {
            cr_log_warn("accept: %s", cr_strerror(res));
            loop->last_accept_log = now;
        }
        /* EMFILE, ENFILE, ENOMEM: back off instead of spinning on accept. */
        if (!(flags & IORING_CQE_F_MORE) && !loop->draining) {
            submit_ctrl_timeout(loop, &loop->accept_ts, 10 * CR_NS_PER_MS, NET_CTRL_ACCEPT);
            return;
        }
    }
    if (!loop->accept_armed) {
        if (loop->draining)
            close_listener(loop);
        else
            arm_accept(loop);
    }
}

/*
 * Shutdown begins: cancel the multishot accept (close_listener runs when
 * its last CQE arrives), and end the waits of idle tasks, except those on a
 * descriptor with input waiting: a request that has arrived is answered.
 * Such a wait is cancelled softly (drain_cancel): if it completes first,
 * the task goes on.
 */
static void start_drain(net_loop *loop)
{
    if (loop->draining)
        return;
    loop->draining = true;
    if (loop->accept_armed)
        submit_cancel(loop, NET_TAG_ACCEPT);
    else
        close_listener(loop); /* backing off after an accept error */
    for (net_task *t = loop->tasks; t; t = t->next) {
        if (!t->idle || t->service || t->cancelled)
            continue;
        if (t->op && !t->park) {
            if (net_fd_has_input(t->op_fd))
                continue;
            t->drain_cancel = true;
            submit_cancel(loop, (uint64_t)(uintptr_t)t->op | NET_TAG_OP);
        } else {
            net_task_cancel(t);
        }
    }
    submit_ctrl_timeout(loop, &loop->drain_ts, rt.cfg.shutdown_timeout_ns, NET_CTRL_DEADLINE);
}

static void drain_deadline(net_loop *loop)
{
    unsigned left = loop->task_count - loop->service_count;
    if (left)
        cr_log_warn("shutdown deadline passed: cancelling %u unfinished task(s)", left);
    for (net_task *t = loop->tasks; t; t = t->next)
        if (!t->service)
            net_task_cancel(t);
}

/*
 * Shutdown, once the other tasks are gone: stop the services, then tell the
 * runtime this worker is drained. A drained worker keeps running its ring
 * until every worker is drained (NET_CTRL_EXIT), since another worker's
 * last requests may still send it messages.
 */
static void drain_progress(net_loop *loop)
{
    if (!loop->services_cancelled && loop->task_count == loop->service_count) {
        loop->services_cancelled = true;
        for (net_task *t = loop->tasks; t; t = t->next)
            net_task_cancel(t);
    }
    if (!loop->drained && loop->task_count == 0) {
        loop->drained = true;
        atomic_fetch_add(&rt.drained, 1);
    }
}

/* Cancel the operations whose coarse deadline has passed, and re-arm. */
static void tick(net_loop *loop)
{
    take_failed_replies(loop);
    NET_STAT_SET(cq_overflows, *loop->ring.cq.koverflow);
    NET_STAT_SET(coroutines, loop->task_count);
    NET_STAT_SET(stacks_cached, cr_stack_pool_cached(loop->stacks));
    uint64_t now = cr_clock_now_ns();
    for (net_task *t = loop->tasks; t; t = t->next) {
        if (t->deadline_ns && now >= t->deadline_ns && t->park && !t->park_sqe) {
            t->deadline_ns = 0;
            if (!t->unparked)
                net_loop_make_ready(loop, t, -ETIMEDOUT);
        } else if (t->deadline_ns && now >= t->deadline_ns && t->op) {
            t->deadline_ns = 0;
            t->timed_out = true;
            submit_cancel(loop, (uint64_t)(uintptr_t)t->op | NET_TAG_OP);
        }
    }
    if (!loop->draining || loop->task_count)
        submit_ctrl_timeout(loop, &loop->tick_ts, NET_TICK_NS, NET_CTRL_TICK);
}

static void ctrl(net_loop *loop, unsigned cmd)
{
    switch (cmd) {
    case NET_CTRL_SHUTDOWN:
        start_drain(loop);
        break;
    case NET_CTRL_DEADLINE:
        drain_deadline(loop);
        break;
    case NET_CTRL_ACCEPT:
        if (!loop->draining && !loop->accept_armed)
            arm_accept(loop);
        break;
    case NET_CTRL_RETRY:
        msg_retry(loop);
        break;
    case NET_CTRL_TICK:
        tick(loop);
        break;
    case NET_CTRL_EXIT:
        loop->exit = true;
        break;
    }
}

/* --- the loop ---------------------------------------------------------- */

static void dispatch(net_loop *loop, uint64_t data, int res, uint32_t flags)
{
    switch (data & NET_TAG_MASK) {
    case NET_TAG_OP: {
        if (!data)
            return;
        net_op *op = (net_op *)(uintptr_t)data;
        op->res = res;
        op->flags = flags;
        loop_resume(loop, op->task);
        return;
    }
    case NET_TAG_ACCEPT:
        accepted(loop, res, flags);
        return;
    case NET_TAG_MSG:
        msg_arrived(loop, (net_msg *)(uintptr_t)(data & ~(uint64_t)NET_TAG_MASK));
        return;
    case NET_TAG_MSG_FAILED:
        msg_failed(loop, (net_msg *)(uintptr_t)(data & ~(uint64_t)NET_TAG_MASK), res);
        return;
    case NET_TAG_CTRL:
        ctrl(loop, (unsigned)(data >> 3));
        return;
    }
}

/* Dispatch the backlog in order (and what it adds to itself meanwhile),
 * resuming the tasks made ready every 64 completions. */
static void dispatch_backlog(net_loop *loop)
{
    size_t since_ready = 0;
    for (;;) {
        if (loop->backlog_head == loop->backlog_len) {
            run_ready(loop); /* may reap more into the backlog */
            if (loop->backlog_head == loop->backlog_len)
                break;
            continue;
        }
        net_cqe c = loop->backlog[loop->backlog_head++];
        dispatch(loop, c.data, c.res, c.flags);
        if (++since_ready == 64) {
            run_ready(loop);
            since_ready = 0;
        }
    }
    loop->backlog_head = loop->backlog_len = 0;
}

static void loop_run(net_loop *loop)
{
    arm_accept(loop);
    loop->now_ns = cr_clock_now_ns();
    submit_ctrl_timeout(loop, &loop->tick_ts, NET_TICK_NS, NET_CTRL_TICK);
    for (;;) {
        run_ready(loop);
        if (loop->draining) {
            drain_progress(loop);
            if (loop->exit)
                break;
        }
        /* The turn's own work may have reaped completions (SQ full):
         * then only submit, and dispatch them without waiting. */
        int ret = loop->backlog_len ? io_uring_submit(&loop->ring)
                                    : io_uring_submit_and_wait(&loop->ring, 1);
        NET_STAT_SUBMIT(ret);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME) {
            cr_log_error("io_uring_submit_and_wait: %s", cr_strerror(ret));
            break;
        }
        loop->now_ns = cr_clock_now_ns();
        /* Everything goes through the backlog, in order: what the SQ-full
         * path reaps during a dispatch lands behind what is there. */
        while (reap_to_backlog(loop) || loop->backlog_len)
            dispatch_backlog(loop);
    }
}

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

/* Set up this worker's ring, trying the newest flags first (kernel 6.1+:
 * DEFER_TASKRUN with SINGLE_ISSUER; 5.19+: COOP_TASKRUN). */
static int ring_init(net_loop *loop)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL,
        0,
    };
    int ret = -EINVAL;
    for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
        struct io_uring_params p = {0};
        p.flags = flag_sets[i] | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
        p.cq_entries = cq_entries_for(rt.cfg.ring_entries, rt.max_conn_per_thread);
        ret = io_uring_queue_init_params(rt.cfg.ring_entries, &loop->ring, &p);
        if (ret == 0) {
            loop->ring_flags = p.flags;
            if (i > 0 && loop->index == 0)
                cr_log_info("io_uring: newest set-up flags unsupported, using fallback %zu", i);
            return 0;
        }
        if (ret != -EINVAL)
            break;
    }
    return ret;
}

static void *worker_main(void *p)
{
    net_loop *loop = p;
    char name[16];
    snprintf(name, sizeof(name), "t%d", loop->index);
    cr_log_set_thread_name(name);
    tl_loop = loop;
    snprintf(name, sizeof(name), "%d", loop->index);
    if (cr_metrics_thread_attach(name, true) < 0)
        cr_log_warn("no memory for this thread's metrics: they stay at 0");

    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(rt.cpus[loop->index], &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0)
        cr_log_warn("could not pin to CPU %d", rt.cpus[loop->index]);

    int ret = ring_init(loop);
    if (ret < 0) {
        cr_log_error("io_uring set-up failed: %s", cr_strerror(ret));
    } else {
        rt.ring_fds[loop->index] = loop->ring.ring_fd;
        ret = net_buf_ring_setup(&loop->ring, &loop->bufs, rt.cfg.provided_buffers,
                                 rt.cfg.provided_buffer_size, 0);
        if (ret < 0)
            cr_log_error("provided-buffer ring set-up failed: %s", cr_strerror(ret));
    }
    if (ret == 0) {
        loop->stacks = cr_stack_pool_create(rt.cfg.stack_size, 1024);
        if (!loop->stacks)
            ret = -ENOMEM;
    }
    if (ret == 0 && rt.hooks.thread_init)
        ret = rt.hooks.thread_init(rt.hooks.user);
    if (ret < 0)
        atomic_store(&rt.init_failed, ret);

    pthread_barrier_wait(&rt.started);
    /* Second barrier: the main thread has checked init_failed. */
    pthread_barrier_wait(&rt.started);

    if (atomic_load(&rt.init_failed) == 0)
        loop_run(loop);

    if (loop->listen_fd >= 0)
        close(loop->listen_fd);
    if (loop->stacks && rt.hooks.thread_fini)
        rt.hooks.thread_fini(rt.hooks.user);
    if (loop->stacks)
        cr_stack_pool_destroy(loop->stacks);
    if (rt.ring_fds[loop->index] >= 0) {
        net_buf_ring_free(&loop->ring, &loop->bufs);
        io_uring_queue_exit(&loop->ring);
    }
    free(loop->backlog);
    loop->backlog = NULL;
    atomic_fetch_sub(&rt.running, 1);
    return NULL;
}

/* --- start-up ------------------------------------------------------------ */

unsigned net_affinity_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? (unsigned)n : 1;
}

static int parse_host(const char *host, uint16_t port, struct sockaddr_storage *ss,
                      socklen_t *len)
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
    return host && parse_host(host, 0, &ss, &len) == 0;
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
static int bind_listeners(uint16_t *port_out)
{
    struct sockaddr_storage ss;
    socklen_t len;
    uint16_t port = rt.cfg.port;
    if (parse_host(rt.cfg.host, port, &ss, &len) < 0) {
        cr_log_error("--host %s: not a numeric IPv4 or IPv6 address", rt.cfg.host);
        return -EINVAL;
    }
    if (port != 0) {
        int err = probe_port(&ss, len);
        if (err < 0) {
            cr_log_error("cannot listen on %s port %u: %s", rt.cfg.host, port, cr_strerror(err));
            return err;
        }
    }
    for (unsigned i = 0; i < rt.threads; i++) {
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
        if (ss.ss_family == AF_INET)
            ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        else
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, rt.cfg.backlog) < 0) {
            int err = -errno;
            close(fd);
            cr_log_error("cannot listen on %s port %u: %s", rt.cfg.host, port, cr_strerror(err));
            return err;
        }
        if (port == 0) {
            struct sockaddr_storage bound;
            socklen_t blen = sizeof(bound);
            getsockname(fd, (struct sockaddr *)&bound, &blen);
            port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                                    : ((struct sockaddr_in6 *)&bound)->sin6_port);
        }
        rt.listen_fds[i] = fd;
    }
    *port_out = port;
    return 0;
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
    for (unsigned i = 0; i < rt.threads; i++)
        rt.cpus[i] = allowed[i % (unsigned)n];
}

static unsigned max_connections(void)
{
    if (rt.cfg.max_connections)
        return rt.cfg.max_connections;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* Keep some descriptors for listeners, rings, databases, logs. */
        rlim_t reserve = 32 + 4 * (rlim_t)rt.threads + rt.cfg.reserved_fds;
        return rl.rlim_cur > reserve * 2 ? (unsigned)(rl.rlim_cur - reserve) : (unsigned)rl.rlim_cur / 2;
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
        .ring_entries = 1024,
        .provided_buffers = 512,
        .provided_buffer_size = 16 * 1024,
        .max_connections = 0,
        .shutdown_timeout_ns = 10 * CR_NS_PER_S,
        .drain_grace_ns = 0,
    };
}

int net_thread_index(void)
{
    return tl_loop ? tl_loop->index : -1;
}

unsigned net_thread_count(void)
{
    return rt.threads;
}

bool net_draining(void)
{
    return tl_loop && tl_loop->draining;
}

bool net_stopping(void)
{
    return atomic_load_explicit(&rt.stopping, memory_order_relaxed);
}

static void raise_nofile_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int signal_pipe[2] = {-1, -1};

static void on_stop_signal(int sig)
{
    int saved = errno;
    unsigned char c = (unsigned char)sig;
    ssize_t n = write(signal_pipe[1], &c, 1);
    (void)n;
    errno = saved;
}

/* Post control command @cmd to every worker, through a small ring of the
 * main thread's. */
static void broadcast(unsigned cmd)
{
    struct io_uring ring;
    if (io_uring_queue_init(8, &ring, 0) < 0) {
        cr_log_error("cannot create the control ring: exiting at once");
        cr_log_flush();
        _exit(1);
    }
    for (unsigned i = 0; i < rt.threads; i++) {
        for (int tries = 0; tries < 1000; tries++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_msg_ring(sqe, rt.ring_fds[i], 0, NET_CTRL(cmd), 0);
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
    uint64_t end = cr_clock_now_ns() + rt.cfg.drain_grace_ns;
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
        if (atomic_load(&rt.running) < rt.threads)
            break; /* a worker died: the caller's loop notices and drains */
    }
    cr_log_info("drain grace over: draining (deadline %.1f s)",
                (double)rt.cfg.shutdown_timeout_ns / 1e9);
}

/*
 * Shutdown from the main thread: tell the workers to drain, wait until every
 * live worker has no task left, then let them all leave their loops at once
 * (a drained worker may still be sent messages by the others until then).
 * A second signal, or workers still busy 5 s past the drain deadline, end
 * the process at once with status 1.
 */
static void shut_down(void)
{
    broadcast(NET_CTRL_SHUTDOWN);
    uint64_t give_up = cr_clock_now_ns() + rt.cfg.shutdown_timeout_ns + 5 * CR_NS_PER_S;
    while (atomic_load(&rt.drained) + (rt.threads - atomic_load(&rt.running)) < rt.threads) {
        struct pollfd pfd = {.fd = signal_pipe[0], .events = POLLIN};
        unsigned char sig = 0;
        if (poll(&pfd, 1, 20) > 0 && read(signal_pipe[0], &sig, 1) == 1) {
            cr_log_warn("second %s while draining: exiting now", sig == SIGINT ? "SIGINT" : "SIGTERM");
            cr_log_flush();
            _exit(1);
        }
        if (cr_clock_now_ns() > give_up) {
            cr_log_error("workers still busy 5 s after the shutdown deadline: exiting now");
            cr_log_flush();
            _exit(1);
        }
    }
    broadcast(NET_CTRL_EXIT);
}

int net_run(const net_config *cfg, const net_hooks *hooks)
{
    rt.cfg = *cfg;
    rt.hooks = *hooks;
    int stats_err = net_stats_register();
    if (stats_err < 0)
        return stats_err;
    atomic_store(&rt.init_failed, 0);
    atomic_store(&rt.drained, 0);
    atomic_store(&rt.stopping, false);
    rt.threads = cfg->threads ? cfg->threads : net_affinity_cpus();
    raise_nofile_limit();
    rt.max_conn_per_thread = max_connections() / rt.threads;
    if (rt.max_conn_per_thread == 0)
        rt.max_conn_per_thread = 1;

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
    sigset_t sigs, old_mask;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old_mask);

    rt.cpus = calloc(rt.threads, sizeof(int));
    rt.listen_fds = calloc(rt.threads, sizeof(int));
    rt.ring_fds = calloc(rt.threads, sizeof(int));
    rt.loops = calloc(rt.threads, sizeof(net_loop *));
    pthread_t *tids = calloc(rt.threads, sizeof(pthread_t));
    if (!rt.cpus || !rt.listen_fds || !rt.ring_fds || !rt.loops || !tids)
        return -ENOMEM;
    for (unsigned i = 0; i < rt.threads; i++)
        rt.listen_fds[i] = rt.ring_fds[i] = -1;
    pick_cpus();

    uint16_t port = 0;
    int ret = bind_listeners(&port);
    if (ret < 0)
        goto out_close;
    if (rt.hooks.after_bind && (ret = rt.hooks.after_bind(rt.hooks.user)) < 0)
        goto out_close;

    pthread_barrier_init(&rt.started, NULL, rt.threads + 1);
    atomic_store(&rt.running, rt.threads);
    unsigned started = 0;
    for (; started < rt.threads; started++) {
        net_loop *loop = calloc(1, sizeof(*loop));
        if (!loop) {
            ret = -ENOMEM;
            break;
        }
        loop->index = (int)started;
        loop->listen_fd = rt.listen_fds[started];
        rt.listen_fds[started] = -1;
        rt.loops[started] = loop;
        if (pthread_create(&tids[started], NULL, worker_main, loop) != 0) {
            free(loop);
            rt.loops[started] = NULL;
            ret = -EAGAIN;
            break;
        }
    }
    if (started < rt.threads) {
        /* The barrier counts every thread: release the started ones. */
        atomic_store(&rt.init_failed, ret);
        cr_log_error("cannot start worker threads: %s", cr_strerror(ret));
        exit(1);
    }
    pthread_barrier_wait(&rt.started);
    ret = atomic_load(&rt.init_failed);
    pthread_barrier_wait(&rt.started);
    if (ret < 0) {
        for (unsigned i = 0; i < rt.threads; i++)
            pthread_join(tids[i], NULL);
        goto out_free;
    }

    if (rt.hooks.on_listening)
        rt.hooks.on_listening(rt.cfg.host, port, rt.threads, rt.hooks.user);

    /* Wait for SIGINT/SIGTERM; notice workers that died on their own. */
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    for (;;) {
        struct pollfd pfd = {.fd = signal_pipe[0], .events = POLLIN};
        unsigned char sig = 0;
        if (poll(&pfd, 1, 200) > 0 && read(signal_pipe[0], &sig, 1) == 1 &&
            (sig == SIGINT || sig == SIGTERM)) {
            atomic_store(&rt.stopping, true);
            const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
            if (rt.cfg.drain_grace_ns == 0) {
                cr_log_info("received %s: draining (deadline %.1f s)", name,
                            (double)rt.cfg.shutdown_timeout_ns / 1e9);
            } else {
                cr_log_info("received %s: not ready; accepting for the drain grace of %.1f s, "
                            "then draining (deadline %.1f s)",
                            name, (double)rt.cfg.drain_grace_ns / 1e9,
                            (double)rt.cfg.shutdown_timeout_ns / 1e9);
                drain_grace();
            }
            break;
        }
        if (atomic_load(&rt.running) < rt.threads) {
            cr_log_error("a worker thread stopped unexpectedly: shutting down");
            ret = -EIO;
            break;
        }
    }
    shut_down();
    for (unsigned i = 0; i < rt.threads; i++)
        pthread_join(tids[i], NULL);
    if (ret == 0)
        cr_log_info("stopped");

out_free:
    for (unsigned i = 0; i < rt.threads; i++)
        free(rt.loops[i]);
out_close:
    for (unsigned i = 0; i < rt.threads; i++)
        if (rt.listen_fds[i] >= 0)
            close(rt.listen_fds[i]);
    free(tids);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    close(signal_pipe[0]);
    close(signal_pipe[1]);
    signal_pipe[0] = signal_pipe[1] = -1;
    free(rt.cpus);
    free(rt.listen_fds);
    free(rt.ring_fds);
    free(rt.loops);
    return ret;
}

net_loop *net_loop_current(void)
{
    return tl_loop;
}
