/*
 * The per-core event loop: why this file exists is the one question every
 * other file of net/ leaves open, "who resumes me?". Each worker thread
 * runs net_loop_run(): resume the coroutines made ready, submit and wait
 * (several completions per enter when the loop is busy: the batch wait),
 * move the CQ into an ordered backlog and hand each completion to the
 * handler registered for its tag (ring.h has the encoding): the waits of
 * tasks (wait.c), multishot receives (recv.c), the accept (listener.c),
 * messages (msg.c) and control commands, which have a table of their own
 * (the drain, its deadline, retries; the tick and the exit are the loop's).
 * The loop calls none of those files by name: they register.
 *
 * The tick, every NET_TICK_NS, runs what registered for it (the waits'
 * coarse deadlines, the message inbox, metrics). See coring/net/runtime.h
 * and coring/net/io.h for the contracts.
 */
#include "loop.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>

_Thread_local net_loop *net_tl_loop;

net_loop *net_loop_current(void)
{
    return net_tl_loop;
}

void net_loop_on_cqe(net_loop *loop, unsigned tag, net_cqe_fn fn, void *ctx)
{
    loop->on_cqe[tag & NET_TAG_MASK].fn = fn;
    loop->on_cqe[tag & NET_TAG_MASK].ctx = ctx;
}

void net_loop_on_ctrl(net_loop *loop, unsigned cmd, net_event_fn fn, void *ctx)
{
    if (cmd < NET_CTRL_COUNT) {
        loop->on_ctrl[cmd].fn = fn;
        loop->on_ctrl[cmd].ctx = ctx;
    }
}

void net_loop_on_tick(net_loop *loop, net_event_fn fn, void *ctx)
{
    if (loop->tick_hooks < NET_TICK_HOOKS) {
        loop->on_tick[loop->tick_hooks].fn = fn;
        loop->on_tick[loop->tick_hooks++].ctx = ctx;
    }
}

void net_loop_on_drain_turn(net_loop *loop, net_event_fn fn, void *ctx)
{
    loop->on_drain_turn.fn = fn;
    loop->on_drain_turn.ctx = ctx;
}

void net_loop_on_turn(net_loop *loop, net_turn_fn fn, void *ctx)
{
    loop->on_turn.fn = fn;
    loop->on_turn.ctx = ctx;
}

void net_loop_ready(net_loop *loop, net_ready *r)
{
    r->next = NULL;
    if (loop->ready_tail)
        loop->ready_tail->next = r;
    else
        loop->ready_head = r;
    loop->ready_tail = r;
}

void net_loop_resume(cr_coro *co)
{
    cr_coro_resume(co);
    if (cr_coro_finished(co))
        cr_coro_destroy(co);
}

/* Resume the coroutines made ready (and those they make ready), up to
 * NET_TURN_READY a turn: the rest wait for the next turn. */
static void run_ready(net_loop *loop)
{
    net_ready *r;
    while ((r = loop->ready_head)) {
        if (loop->turn_resumed == NET_TURN_READY) {
            loop->turn_cut = true;
            return;
        }
        loop->turn_resumed++;
        loop->ready_head = r->next;
        if (!loop->ready_head)
            loop->ready_tail = NULL;
        net_loop_resume(r->coro); /* r lives on that coroutine's stack */
    }
}

/* --- the tick and the loop's own controls ------------------------------ */

static void tick(net_loop *loop, void *ctx)
{
    (void)ctx;
    NET_STAT_SET(cq_overflows, net_ring_cq_overflows(&loop->ring));
    for (unsigned i = 0; i < loop->tick_hooks; i++)
        loop->on_tick[i].fn(loop, loop->on_tick[i].ctx);
    net_ring_timeout(&loop->ring, &loop->tick_ts, NET_TICK_NS, NET_CTRL(NET_CTRL_TICK));
}

static void leave(net_loop *loop, void *ctx)
{
    (void)ctx;
    loop->exit = true;
}

void net_loop_init(net_loop *loop, int index)
{
    loop->index = index;
    net_loop_on_ctrl(loop, NET_CTRL_TICK, tick, NULL);
    net_loop_on_ctrl(loop, NET_CTRL_EXIT, leave, NULL);
}

/* --- the batch wait ---------------------------------------------------- */

/* The most CQEs one turn asks the kernel to wait for (32 requests' receive
 * and send). */
#define NET_BATCH_MAX 64

/*
 * How many completions this turn waits for. One (no added latency) unless
 * the server is busy: then a few, which the batch wait bounds in time
 * (net_ring_submit_and_wait). "Busy" is measured, not guessed: batch_recvs
 * is the number of receive completions (data from a client: a request, or a
 * piece of one) the last waiting turn dispatched. Receives, not all CQEs: a
 * lone request/response client (c=1) brings at most one receive a turn,
 * whatever else completes beside it (its send), so it always gets the wait
 * for one and pays nothing; counting every CQE, its receive plus its send
 * made 2 and kept it waiting the batch wait each time. So does one active
 * client among idle keep-alive connections. With two or more receives in
 * the last turn, the wait counts what this turn's enter will complete: the
 * sends of the responses those receives produced (one CQE each, at once on
 * loopback), plus twice as many new receives, so that a batch grows towards
 * what the load gives within the batch wait. New receives are capped at
 * half the connections, so a turn never waits for every client to speak (at
 * c=8 that lock-step cost 23 % of req/s), and the whole at NET_BATCH_MAX.
 * The figure is the last turn's, not an average: when the load stops, the
 * next turn drops back to the plain wait, so a client arriving after a
 * burst pays the batch wait once at most. The drain keeps the plain wait,
 * and so does a turn while a busy task waits on a socket of its own
 * (outside_waits: the database driver with queries out), whose completion
 * (PostgreSQL's answer) releases the requests behind it; and while a wait
 * ended early waits for its cancel's CQE (ending_waits: the idle database
 * driver woken by a new query, a socket watcher whose events changed),
 * which it, and every request behind it, runs at. docs/runtime.md has the
 * measurements behind each rule.
 */
static unsigned batch_wait_nr(const net_loop *loop)
{
    const net_load *l = &loop->load;
    if (!loop->ring.batch_wait_us || loop->draining || l->outside_waits || l->ending_waits ||
        l->batch_recvs < 2 || l->connections < 2)
        return 1;
    unsigned more = 2 * l->batch_recvs;
    if (more > l->connections / 2)
        more = l->connections / 2;
    unsigned n = l->batch_recvs + more;
    return n < NET_BATCH_MAX ? n : NET_BATCH_MAX;
}

/* --- the loop ---------------------------------------------------------- */

static void dispatch(net_loop *loop, const net_cqe *c)
{
    unsigned tag = (unsigned)(c->data & NET_TAG_MASK);
    if (tag == NET_TAG_CTRL) {
        unsigned cmd = (unsigned)(c->data >> 3);
        if (cmd < NET_CTRL_COUNT && loop->on_ctrl[cmd].fn)
            loop->on_ctrl[cmd].fn(loop, loop->on_ctrl[cmd].ctx);
        return;
    }
    if (!c->data)
        return; /* nothing waits for it */
    if (loop->on_cqe[tag].fn)
        loop->on_cqe[tag].fn(loop, loop->on_cqe[tag].ctx, c->data, c->res, c->flags);
}

/* Dispatch the backlog in order (and what it adds to itself meanwhile),
 * resuming the coroutines made ready every 64 completions, up to
 * NET_TURN_CQES completions: the rest wait for the next turn. */
static void dispatch_backlog(net_loop *loop)
{
    unsigned since_ready = 0, dispatched = 0;
    net_cqe c;
    for (;;) {
        if (dispatched == NET_TURN_CQES) {
            if (!net_ring_backlog_empty(&loop->ring) || io_uring_cq_ready(&loop->ring.ring))
                loop->turn_cut = true;
            return;
        }
        if (!net_ring_next(&loop->ring, &c)) {
            run_ready(loop); /* may reap more into the backlog */
            net_ring_reap(&loop->ring);
            if (!net_ring_next(&loop->ring, &c))
                break;
        }
        dispatch(loop, &c);
        dispatched++;
        if (++since_ready == 64) {
            run_ready(loop);
            since_ready = 0;
        }
    }
}

void net_loop_run(net_loop *loop)
{
    loop->now_ns = cr_clock_now_ns();
    net_ring_timeout(&loop->ring, &loop->tick_ts, NET_TICK_NS, NET_CTRL(NET_CTRL_TICK));
    for (;;) {
        loop->turn_resumed = 0;
        run_ready(loop);
        bool more = loop->on_turn.fn && loop->on_turn.fn(loop, loop->on_turn.ctx);
        if (loop->draining && loop->on_drain_turn.fn) {
            loop->on_drain_turn.fn(loop, loop->on_drain_turn.ctx);
            if (loop->exit)
                break;
        }
        /* Work left by the last turn (its budget ran out), or completions
         * the turn's own work reaped (SQ full): submit, take in what is
         * ready, and go on without waiting. */
        bool waited = !more && !loop->ready_head && net_ring_backlog_empty(&loop->ring);
        int ret = waited ? net_ring_submit_and_wait(&loop->ring, batch_wait_nr(loop))
                         : net_ring_submit_and_peek(&loop->ring);
        if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY && ret != -ETIME) {
            cr_log_error("io_uring_enter (submit and wait): %s", cr_strerror(ret));
            break;
        }
        loop->now_ns = cr_clock_now_ns();
        /* Everything goes through the backlog, in order: what the SQ-full
         * path reaps during a dispatch lands behind what is there. */
        net_ring_reap(&loop->ring);
        dispatch_backlog(loop);
        if (more || loop->turn_cut) {
            NET_STAT_ADD(turns_cut, 1);
            loop->turn_cut = false;
        }
        if (waited) {
            loop->load.batch_recvs = loop->load.turn_recvs;
            loop->load.turn_recvs = 0;
        }
    }
}
