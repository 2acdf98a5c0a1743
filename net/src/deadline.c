/*
 * Deadlines of tasks (coring/net/io.h, docs/deadlines.md): a request that
 * waits on the database, an upstream or the inference pool past its
 * route's deadline is cancelled, so that everything it waits on is
 * cancelled too (each waiter's cancel path: PQcancel, the curl transfer
 * removed, the job dropped) and it is answered at once.
 *
 * Why a wheel of their own on the loop's tick: a deadline per request must
 * cost the request no syscall and no SQE (a linked timeout per request
 * would be both); arming and disarming are O(1) list operations
 * (wheel.h), and the tick (NET_TICK_NS) that ends the waits' coarse
 * timeouts ends these too. The drain's deadline (shutdown.c) stops every
 * task in flight through net_task_stop, the same path.
 */
#include "rt.h"
#include "task.h"

#include "coring/core/clock.h"

#include <errno.h>

static void deadline_passed(net_timer *timer, void *arg)
{
    (void)arg;
    net_task *t = (net_task *)(void *)((char *)timer - offsetof(net_task, deadline));
    net_task_stop(t, NET_STOP_DEADLINE);
}

static void expire(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_tasks *ts = loop->tasks;
    if (ts->deadlines.count)
        net_wheel_expire(&ts->deadlines, cr_clock_now_ns(), deadline_passed, NULL);
}

void net_deadlines_attach(net_loop *loop)
{
    net_wheel_init(&loop->tasks->deadlines, NET_TICK_NS, loop->now_ns);
    net_loop_on_tick(loop, expire, NULL);
}

void net_task_stop(net_task *task, net_stop_cause cause)
{
    net_wheel_remove(&task->waiter.loop->tasks->deadlines, &task->deadline);
    /* The drain's cause overrides a deadline's; nothing overrides the drain's. */
    if (task->stop_cause != NET_STOP_DRAIN)
        task->stop_cause = (unsigned char)cause;
    net_task_cancel(task);
}

int net_deadline_set(uint64_t deadline_ns)
{
    net_task *task = net_task_current();
    if (!task)
        return -EPERM;
    net_wheel *w = &task->waiter.loop->tasks->deadlines;
    net_wheel_remove(w, &task->deadline);
    /* Half a tick early: the tick then ends it within half a tick of
     * @deadline_ns either side, rather than up to a whole tick late. */
    uint64_t at = deadline_ns > NET_TICK_NS / 2 ? deadline_ns - NET_TICK_NS / 2 : 1;
    net_wheel_add(w, &task->deadline, at);
    return 0;
}

net_stop_cause net_deadline_clear(void)
{
    net_task *task = net_task_current();
    if (!task)
        return NET_STOP_NONE;
    net_wheel_remove(&task->waiter.loop->tasks->deadlines, &task->deadline);
    net_stop_cause cause = net_stop_cause_get();
    if (cause == NET_STOP_DEADLINE && task->waiter.state == NET_WAIT_NONE) {
        /* Its own deadline only: the task goes on (its next request). */
        task->waiter.end = NET_END_NONE;
        task->stop_cause = NET_STOP_NONE;
    }
    return cause;
}

net_stop_cause net_stop_cause_get(void)
{
    net_task *task = net_task_current();
    if (!task || !net_waiter_cancelled(&task->waiter))
        return NET_STOP_NONE;
    return task->stop_cause ? (net_stop_cause)task->stop_cause : NET_STOP_OTHER;
}
