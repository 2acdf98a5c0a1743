/*
 * Connections (see conn.h): an accepted socket in memory of the runtime's,
 * a task for it while it has something to do, none while it is idle.
 *
 * Why: a connection waiting between requests used to hold its coroutine,
 * and with it the stack pages its requests had touched (8.6 KiB per idle
 * keep-alive connection, 20 KiB with the access log, against nginx's 0.5).
 * Now on_connection returns when the connection goes idle
 * (net_connection_idle), the task ends and its stack goes back to the pool;
 * what stays is a net_conn (its recv still armed, its idle deadline in a
 * wheel of its own) and the owner's small state. The recv's CQEs come here
 * (NET_TAG_RECV): to the connection's task while one runs; while idle,
 * data (or a lack of provided buffers) starts a new task for it, and what
 * only ends it (EOF, a reset, the end of a cancel by its deadline or the
 * drain) closes it here, calling net_hooks.on_idle_close for the owner's
 * state.
 */
#include "conn.h"
#include "rt.h"
#include "stats.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <stdlib.h>

struct net_conns {
    net_conn *idle;      /* idle connections, newest first */
    unsigned idle_count;
    net_wheel wheel;     /* their idle deadlines */
    uint64_t last_no_stack_log;
};

static net_conn *conn_of(net_recv_state *r)
{
    return (net_conn *)(void *)((char *)r - offsetof(net_conn, recv));
}

static void conn_free(net_loop *loop, net_conn *c)
{
    net_waits_give(loop, c->recv.slot);
    loop->load.connections--;
    free(c);
}

/* --- a connection's task ------------------------------------------------ */

static void idle_begin(net_loop *loop, net_conn *c);

/* The task of a connection: on_connection, then the connection goes idle
 * (net_connection_idle said yes) or is gone (the owner closed it). */
static void conn_main(void *arg)
{
    net_conn *c = arg;
    net_task *task = net_task_current();
    net_loop *loop = task->waiter.loop;
    c->task = task;
    task->recv = &c->recv;
    net_rt.hooks.on_connection(c->recv.fd, net_rt.hooks.user);
    task->recv = NULL;
    c->task = NULL;
    if (c->keep && c->recv.fd >= 0) {
        c->keep = false;
        idle_begin(loop, c);
        return;
    }
    net_recv_release(loop, &c->recv);
    conn_free(loop, c);
}

int net_connection_start(net_loop *loop, int fd)
{
    net_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    if (net_waits_take(loop, &c->recv.slot) < 0) {
        free(c);
        return -ENOMEM;
    }
    net_slot_hold(loop, c->recv.slot, c, NET_TAG_RECV);
    c->recv.fd = fd;
    loop->load.connections++;
    int err = net_task_start(loop, conn_main, c, false);
    if (err < 0)
        conn_free(loop, c);
    return err;
}

/* --- idle ------------------------------------------------------------------ */

static void idle_begin(net_loop *loop, net_conn *c)
{
    struct net_conns *cs = loop->conns;
    c->prev = NULL;
    c->next = cs->idle;
    if (cs->idle)
        cs->idle->prev = c;
    cs->idle = c;
    cs->idle_count++;
    if (c->idle_timeout_ns)
        net_wheel_add(&cs->wheel, &c->timer, loop->now_ns + c->idle_timeout_ns);
}

/* @c (idle) is idle no more: out of the list and the wheel. */
static void idle_end(net_loop *loop, net_conn *c)
{
    struct net_conns *cs = loop->conns;
    net_wheel_remove(&cs->wheel, &c->timer);
    if (c->prev)
        c->prev->next = c->next;
    else
        cs->idle = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    cs->idle_count--;
}

/* Close @c (not idle, no task) for the runtime: its descriptor (through
 * the ring, as net_close does), its queued buffers, and the owner's state
 * (net_hooks.on_idle_close). */
static void conn_close(net_loop *loop, net_conn *c)
{
    int fd = c->recv.fd;
    net_recv_release(loop, &c->recv);
    net_ring_close(&loop->ring, fd);
    if (net_rt.hooks.on_idle_close)
        net_rt.hooks.on_idle_close(c->state, net_rt.hooks.user);
    conn_free(loop, c);
}

static void idle_close(net_loop *loop, net_conn *c)
{
    idle_end(loop, c);
    conn_close(loop, c);
}

/* Something to serve came to @c, idle: a task for it, now. Without the
 * memory for one (no stack), the connection is closed. */
static void idle_wake(net_loop *loop, net_conn *c)
{
    idle_end(loop, c);
    c->closing = false; /* data won the race with its deadline or the drain */
    if (net_task_start(loop, conn_main, c, false) == 0)
        return; /* @c may be gone already: the task ran until its first wait */
    struct net_conns *cs = loop->conns;
    uint64_t now = cr_clock_now_ns();
    if (now - cs->last_no_stack_log > CR_NS_PER_S) {
        cr_log_warn("out of memory for a connection's coroutine: closing it");
        cs->last_no_stack_log = now;
    }
    conn_close(loop, c);
}

/* End @c, idle: cancel its recv; its last CQE closes it (idle_input). */
static void idle_stop(net_loop *loop, net_conn *c)
{
    c->closing = true;
    if (c->recv.arm == NET_RECV_OFF)
        idle_close(loop, c); /* nothing armed to wait for */
    else
        net_recv_stop(loop, &c->recv); /* STOPPING: its last CQE is on its way */
}

/* A CQE of @c's recv while it is idle (@ev: what it did to the queue). */
static void idle_input(net_loop *loop, net_conn *c, net_recv_event ev)
{
    net_recv_state *r = &c->recv;
    switch (ev) {
    case NET_RECV_DROPPED:
        return; /* only after an error, which a task reads first */
    case NET_RECV_ENDED:
        if (c->closing)
            idle_close(loop, c);
        else
            net_recv_arm_multishot(loop, r, true); /* a pause's cancel, ended after the task */
        return;
    case NET_RECV_QUEUED: {
        /* EOF or an error with nothing before it: nothing to serve. Not
         * -ENOBUFS: data came, for memory of the task's own. */
        int res = r->q[r->head].res;
        if (r->len == 1 && res <= 0 && res != -ENOBUFS) {
            idle_close(loop, c);
            return;
        }
        break;
    }
    case NET_RECV_NONE:
        break; /* the task receives one recv at a time */
    }
    idle_wake(loop, c);
}

/* A CQE of a connection's multishot recv (NET_TAG_RECV): to its task, or
 * to the idle connection; a stale one gives its buffer back. */
static void recv_completed(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags)
{
    (void)ctx;
    loop->load.turn_recvs++;
    net_conn *c = net_slot_owner(loop, data);
    if (!c || c->recv.name != data) {
        net_recv_give_back(loop, flags); /* closed, or the recv was re-armed */
        return;
    }
    net_recv_event ev = net_recv_cqe(loop, &c->recv, res, flags);
    if (!c->task) {
        idle_input(loop, c, ev);
        return;
    }
    net_waiter *w = &c->task->waiter;
    if (ev == NET_RECV_DROPPED || !net_waiting(w) || w->cancel != c->recv.name)
        return; /* queued for its next receive */
    net_wait_complete(w, ev == NET_RECV_QUEUED ? 1 : ev == NET_RECV_ENDED ? -ECANCELED
                                                                           : NET_RECV_SINGLE,
                      0);
}

static void deadline_passed(net_timer *t, void *arg)
{
    net_conn *c = (net_conn *)(void *)((char *)t - offsetof(net_conn, timer));
    idle_stop(arg, c);
}

static void expire_deadlines(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_wheel_expire(&loop->conns->wheel, cr_clock_now_ns(), deadline_passed, loop);
    NET_STAT_SET(connections_idle, loop->conns->idle_count);
}

void net_conns_drain(net_loop *loop, bool all)
{
    net_conn *next;
    for (net_conn *c = loop->conns->idle; c; c = next) {
        next = c->next;
        if (c->closing || (!all && net_fd_has_input(c->recv.fd)))
            continue; /* a request has arrived: its CQE starts a task, which serves it */
        idle_stop(loop, c);
    }
}

unsigned net_conns_idle(const net_loop *loop)
{
    return loop->conns ? loop->conns->idle_count : 0;
}

int net_conns_attach(net_loop *loop)
{
    struct net_conns *cs = calloc(1, sizeof(*cs));
    if (!cs)
        return -ENOMEM;
    loop->conns = cs;
    net_wheel_init(&cs->wheel, NET_TICK_NS, loop->now_ns);
    net_loop_on_cqe(loop, NET_TAG_RECV, recv_completed, NULL);
    net_loop_on_tick(loop, expire_deadlines, NULL);
    return 0;
}

void net_conns_detach(net_loop *loop)
{
    free(loop->conns);
    loop->conns = NULL;
}

/* --- the owner's side (coring/net/io.h) --------------------------------- */

int net_connection_idle(void *state, uint64_t timeout_ns)
{
    net_task *task = net_task_current();
    if (!task || !task->recv)
        return -EPERM;
    net_conn *c = conn_of(task->recv);
    net_recv_state *r = &c->recv;
    net_loop *loop = task->waiter.loop;
    if (r->fd < 0)
        return -EBADF;
    if (net_waiter_cancelled(&task->waiter))
        return -ECANCELED;
    /* Input queued: read it. Once the drain's idle grace is over, and on a
     * kernel without multishot recv (nothing stays armed to wake the
     * connection), the task goes on receiving as before. During the grace
     * the connection may go idle: the grace's end closes it. */
    if (r->len || r->error || loop->idle_closing || loop->recv_support == NET_MULTISHOT_NO)
        return -EAGAIN;
    if (r->arm == NET_RECV_OFF) {
        net_ring_reserve(&loop->ring, 1);
        net_recv_arm_multishot(loop, r, true);
    }
    c->state = state;
    c->idle_timeout_ns = timeout_ns;
    c->keep = true;
    return 0;
}

void *net_connection_state(void)
{
    net_task *task = net_task_current();
    return task && task->recv ? conn_of(task->recv)->state : NULL;
}
