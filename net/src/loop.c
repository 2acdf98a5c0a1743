/*
 * The per-core event loop and its completions: why this file exists is the
 * one question every other file of net/ leaves open, "who resumes me?".
 * Each worker thread runs net_loop_run(): submit, wait, move the CQ into an
 * ordered backlog and dispatch each completion by the tag in its
 * user_data:
 *
 *   0                  nothing waits for it (linked timeouts, cancels)
 *   gen << 32 | slot << 3 | TAG_OP
 *                      a task's operation: slot (29 bits) is the task's entry
 *                      in the loop's slot table, gen (32 bits, never 0) the
 *                      generation of that slot's operation; resume the task
 *                      if the slot's operation in flight has that generation
 *   gen << 32 | slot << 3 | TAG_RECV
 *                      a connection's multishot recv (io.c): queued on the
 *                      slot's task if its recv_gen is still gen, else stale
 *                      (its provided buffer, if any, is given back)
 *   TAG_ACCEPT         the multishot accept: a new connection, or an error
 *   pointer | TAG_MSG  a cross-core message arriving (request or reply)
 *   pointer | TAG_MSG_FAILED  our MSG_RING could not be posted: retry
 *   cmd << 3 | TAG_CTRL       a control event (shutdown, timers)
 *
 * Pointers are 8-byte aligned, which frees the low 3 bits for the tag.
 * An operation is never named by its address (a net_op on a coroutine
 * stack): a stack is reused by the next coroutine, so a completion or a
 * cancel that outlived its operation could otherwise hit a new one at the
 * same address. With the generation, a stale completion matches nothing
 * (dispatch drops it) and a stale cancel (IORING_OP_ASYNC_CANCEL by
 * user_data) finds nothing to cancel, whatever the order of submissions.
 * The generation wraps after 2^32 operations of one slot, each waited for
 * before the next: a CQE that old cannot be pending.
 *
 * Also here: taking SQEs when the SQ is full, cancels, control timeouts
 * and the 100 ms tick, which expires the tasks' coarse deadlines from a
 * timer wheel (wheel.c), and the batch wait (net_config.batch_wait_us:
 * several completions per io_uring_enter when the loop is busy). The rest
 * of the runtime is split by concept:
 * task.c (tasks and parking), msg.c (cross-core messages), listener.c
 * (binding and accept), shutdown.c (signals and the drain), setup.c
 * (ring and thread set-up, net_run). See coring/net/runtime.h and
 * coring/net/io.h for the contracts.
 */
#include "loop.h"
#include "rt.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

_Thread_local net_loop *net_tl_loop;

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
void net_submit_cancel(net_loop *loop, uint64_t user_data)
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

void net_submit_ctrl_timeout(net_loop *loop, struct __kernel_timespec *ts, uint64_t ns,
                             unsigned cmd)
{
    ts->tv_sec = (long long)(ns / CR_NS_PER_S);
    ts->tv_nsec = (long long)(ns % CR_NS_PER_S);
    struct io_uring_sqe *sqe = net_loop_sqe(loop);
    io_uring_prep_timeout(sqe, ts, 0, 0);
    io_uring_sqe_set_data64(sqe, NET_CTRL(cmd));
}

/* The coarse deadline of @timer's task passed: wake it if it is parked
 * with no SQE, or cancel its operation (-ETIMEDOUT), unless a cancel of it
 * was asked already (the first decides). */
static void deadline_passed(net_timer *timer, void *arg)
{
    net_loop *loop = arg;
    net_task *t = (net_task *)(void *)((char *)timer - offsetof(net_task, timer));
    if (t->state == NET_TASK_PARKED) {
        net_loop_make_ready(loop, t, -ETIMEDOUT);
    } else if (t->op && (t->state == NET_TASK_WAITING || t->state == NET_TASK_PARKED_SQE)) {
        t->state = NET_TASK_TIMING_OUT;
        net_submit_cancel(loop, t->op_data);
    }
}

/* Cancel the operations whose coarse deadline has passed (the wheel's
 * slots of the ticks since the last one, not every task), and re-arm. */
static void tick(net_loop *loop)
{
    net_msg_take_failed_replies(loop);
    NET_STAT_SET(cq_overflows, *loop->ring.cq.koverflow);
    NET_STAT_SET(coroutines, loop->task_count);
    NET_STAT_SET(stacks_cached, cr_stack_pool_cached(loop->stacks));
    net_wheel_expire(&loop->wheel, cr_clock_now_ns(), deadline_passed, loop);
    if (!loop->draining || loop->task_count)
        net_submit_ctrl_timeout(loop, &loop->tick_ts, NET_TICK_NS, NET_CTRL_TICK);
}

static void ctrl(net_loop *loop, unsigned cmd)
{
    switch (cmd) {
    case NET_CTRL_SHUTDOWN:
        net_drain_start(loop);
        break;
    case NET_CTRL_DEADLINE:
        net_drain_deadline(loop);
        break;
    case NET_CTRL_ACCEPT:
        if (!loop->draining && !loop->accept_armed)
            net_accept_arm(loop);
        break;
    case NET_CTRL_RETRY:
        net_msg_retry(loop);
        break;
    case NET_CTRL_TICK:
        tick(loop);
        break;
    case NET_CTRL_EXIT:
        loop->exit = true;
        break;
    }
}

/* --- the batch wait ---------------------------------------------------- */

/* The most CQEs one turn asks the kernel to wait for (32 requests' receive
 * and send). */
#define NET_BATCH_MAX 64

/*
 * Submit what the SQ holds and wait, in one io_uring_enter(2), for @wait_nr
 * completions for at most @min_wait_us microseconds, then for one: the
 * kernel's min-wait (io_uring_enter(2), IORING_ENTER_EXT_ARG with
 * struct io_uring_getevents_arg's min_wait_usec, Linux 6.12,
 * IORING_FEAT_MIN_TIMEOUT; the call liburing 2.3 lacks is
 * io_uring_submit_and_wait_min_timeout(3)). With DEFER_TASKRUN the kernel
 * sleeps until @wait_nr completions are posted (or their task work is
 * queued), and once min_wait has passed returns as soon as one is there.
 * The overall timeout, 1 s, only keeps an empty ring from returning at
 * min_wait (without one the kernel ends the wait there); the tick's
 * timeout SQE ends the wait well before it.
 * The SQ tail is published here as liburing's io_uring_submit does (the
 * ring is not SQPOLL and its fd is not registered: liburing would do the
 * same store). Loop thread only. Returns the SQEs submitted (>= 0) or a
 * negative errno: -ETIME (nothing completed within 1 s), -EINTR, -EBUSY
 * and -EAGAIN as io_uring_enter(2) says, which the caller treats as a turn
 * with nothing new.
 */
static int enter_min_wait(net_loop *loop, unsigned wait_nr, unsigned min_wait_us)
{
    struct io_uring_sq *sq = &loop->ring.sq;
    unsigned tail = sq->sqe_tail;
    if (sq->sqe_head != tail) {
        sq->sqe_head = tail;
        io_uring_smp_store_release(sq->ktail, tail);
    }
    unsigned to_submit = tail - *sq->khead;
    struct __kernel_timespec ts = {.tv_sec = 1};
    struct io_uring_getevents_arg arg = {
        .pad = min_wait_us, /* min_wait_usec in newer headers */
        .ts = (uint64_t)(uintptr_t)&ts,
    };
    long ret = syscall(__NR_io_uring_enter, loop->ring.ring_fd, to_submit, wait_nr,
                       IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg, sizeof(arg));
    return ret < 0 ? -errno : (int)ret;
}

/*
 * How many completions this turn waits for. One (today's wait, no added
 * latency) unless the server is busy: then a few, which min-wait bounds in
 * time. "Busy" is measured, not guessed: batch_recvs is the number of
 * receive completions (data from a client: a request, or a piece of one)
 * the last waiting turn dispatched. Receives, not all CQEs: a lone
 * request/response client (c=1) brings at most one receive a turn, whatever
 * else completes beside it (its send), so it always gets the wait for one
 * and pays nothing; counting every CQE, its receive plus its send made 2
 * and kept it waiting min-wait each time. So does one active client among
 * idle keep-alive connections. With two or more receives in the last turn,
 * the wait counts what this turn's enter will complete: the sends of the
 * responses those receives produced (one CQE each, at once on loopback),
 * plus twice as many new receives, so that a batch grows towards what the
 * load gives within min-wait. Asking for only twice the receives in all,
 * the sends took half of it and batches never grew (c=1000: 9 requests a
 * turn). New receives are capped at half the connections, so a turn never
 * waits for every client to speak (at c=8 that lock-step cost 23 % of
 * req/s), and the whole at NET_BATCH_MAX. The figure is the last turn's,
 * not an average: when the load stops, the next turn (which reaps the
 * tick, or one request) drops back to the plain wait, so a client arriving
 * after a burst pays min-wait once at most. The drain keeps the plain wait,
 * and so does a turn while a busy task waits on a socket of its own
 * (outside_waits: the database driver with queries out): the completion
 * it waits for (PostgreSQL's answer) releases the requests behind it, and
 * min-wait would hold it back up to batch_wait_us on every round trip
 * (at c=10 on GET /users/{id}, where round trips are the whole cost).
 * Likewise while a task woken early waits for the cancel of its operation
 * (woken_waits: net_unpark, as when the idle database driver, parked on
 * its socket, is woken by a new query; net_task_interrupt, as when curl
 * changes what a socket watcher waits for): it runs only at that cancel's
 * CQE, and a min-wait enter would hold it, and every request behind it,
 * for up to batch_wait_us.
 */
static unsigned batch_wait_nr(const net_loop *loop)
{
    if (!loop->min_wait || loop->draining || loop->outside_waits || loop->woken_waits ||
        loop->batch_recvs < 2 || loop->connections < 2)
        return 1;
    unsigned more = 2 * loop->batch_recvs;
    if (more > loop->connections / 2)
        more = loop->connections / 2;
    unsigned n = loop->batch_recvs + more;
    return n < NET_BATCH_MAX ? n : NET_BATCH_MAX;
}

/* --- the loop ---------------------------------------------------------- */

static void dispatch(net_loop *loop, uint64_t data, int res, uint32_t flags)
{
    switch (data & NET_TAG_MASK) {
    case NET_TAG_OP: {
        if (!data)
            return;
        uint32_t slot = (uint32_t)(data >> NET_SLOT_SHIFT) & ((1u << NET_SLOT_BITS) - 1);
        net_slot *s = slot < loop->slots_len ? &loop->slots[slot] : NULL;
        if (cr_unlikely(!s || !s->op || s->gen != (uint32_t)(data >> NET_GEN_SHIFT))) {
            /* Stale: the operation it names is over (a reused slot has a
             * newer generation). Nothing is resumed. */
            return;
        }
        net_op *op = s->op;
        s->op = NULL;
        op->res = res;
        op->flags = flags;
        net_loop_resume(loop, op->task);
        return;
    }
    case NET_TAG_RECV:
        loop->turn_recvs++;
        net_recv_dispatch(loop, data, res, flags);
        return;
    case NET_TAG_ACCEPT:
        net_accepted(loop, res, flags);
        return;
    case NET_TAG_MSG:
        net_msg_arrived(loop, (net_msg *)(uintptr_t)(data & ~(uint64_t)NET_TAG_MASK));
        return;
    case NET_TAG_MSG_FAILED:
        net_msg_failed(loop, (net_msg *)(uintptr_t)(data & ~(uint64_t)NET_TAG_MASK), res);
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
            net_run_ready(loop); /* may reap more into the backlog */
            if (loop->backlog_head == loop->backlog_len)
                break;
            continue;
        }
        net_cqe c = loop->backlog[loop->backlog_head++];
        dispatch(loop, c.data, c.res, c.flags);
        if (++since_ready == 64) {
            net_run_ready(loop);
            since_ready = 0;
        }
    }
    loop->backlog_head = loop->backlog_len = 0;
}

void net_loop_run(net_loop *loop)
{
    net_accept_arm(loop);
    loop->now_ns = cr_clock_now_ns();
    net_submit_ctrl_timeout(loop, &loop->tick_ts, NET_TICK_NS, NET_CTRL_TICK);
    for (;;) {
        net_run_ready(loop);
        if (loop->draining) {
            net_drain_progress(loop);
            if (loop->exit)
                break;
        }
        /* The turn's own work may have reaped completions (SQ full):
         * then only submit, and dispatch them without waiting. */
        bool waited = !loop->backlog_len;
        unsigned wait_nr = waited ? batch_wait_nr(loop) : 0;
        int ret = !waited       ? io_uring_submit(&loop->ring)
                  : wait_nr > 1 ? enter_min_wait(loop, wait_nr, net_rt.cfg.batch_wait_us)
                                : io_uring_submit_and_wait(&loop->ring, 1);
        NET_STAT_SUBMIT(ret);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME) {
            cr_log_error("io_uring_enter (submit and wait): %s", cr_strerror(ret));
            break;
        }
        loop->now_ns = cr_clock_now_ns();
        /* Everything goes through the backlog, in order: what the SQ-full
         * path reaps during a dispatch lands behind what is there. */
        while (reap_to_backlog(loop) || loop->backlog_len)
            dispatch_backlog(loop);
        if (waited) {
            loop->batch_recvs = loop->turn_recvs;
            loop->turn_recvs = 0;
        }
    }
}

net_loop *net_loop_current(void)
{
    return net_tl_loop;
}

