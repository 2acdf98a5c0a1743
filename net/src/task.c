/*
 * Tasks and parking: a task is a coroutine the loop knows about (one per
 * connection, or spawned with net_spawn), linked into its thread's list so
 * that the drain can find it. Service tasks (net_spawn_service: database
 * drivers, the curl timer and socket watchers, which run libpq, libcurl and
 * OpenSSL) run on larger stacks than connections. Parking
 * (net_park/net_unpark) lets one task wake another on the same thread
 * without a ring round trip. Every wait is the task's waiter's (wait.c).
 * See coring/net/io.h.
 */
#include "task.h"
#include "rt.h"
#include "stats.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdlib.h>

struct task_start {
    net_loop *loop;
    void (*fn)(void *arg);
    void *arg;
    bool service;
    uint32_t slot; /* its waiter's, taken before the coroutine is made */
};

static void task_main(void *p)
{
    struct task_start *s = p;
    net_loop *loop = s->loop;
    net_tasks *ts = loop->tasks;
    void (*fn)(void *) = s->fn;
    void *arg = s->arg;
    net_task task = {.service = s->service};
    net_waiter_init(&task.waiter, loop, cr_coro_current(), s->slot);
    cr_coro_set_data(task.waiter.ready.coro, &task);
    task.next = ts->list;
    if (ts->list)
        ts->list->prev = &task;
    ts->list = &task;
    ts->count++;
    ts->services += task.service;

    fn(arg);

    net_wheel_remove(&ts->deadlines, &task.deadline); /* one left armed dies with it */
    ts->services -= task.service;
    ts->count--;
    if (task.prev)
        task.prev->next = task.next;
    else
        ts->list = task.next;
    if (task.next)
        task.next->prev = task.prev;
    net_waiter_close(&task.waiter);
}

int net_task_start(net_loop *loop, void (*fn)(void *arg), void *arg, bool service)
{
    net_tasks *ts = loop->tasks;
    struct task_start s = {.loop = loop, .fn = fn, .arg = arg, .service = service};
    int err = net_waits_take(loop, &s.slot);
    if (err < 0)
        return err;
    cr_coro *co;
    err = cr_coro_create(&co, service ? ts->service_stacks : ts->stacks, task_main, &s);
    if (err < 0) {
        net_waits_give(loop, s.slot);
        return err;
    }
    net_loop_resume(co);
    return 0;
}

int net_spawn(void (*fn)(void *arg), void *arg)
{
    net_loop *loop = net_tl_loop;
    return loop ? net_task_start(loop, fn, arg, false) : -EINVAL;
}

int net_spawn_service(void (*fn)(void *arg), void *arg)
{
    net_loop *loop = net_tl_loop;
    return loop ? net_task_start(loop, fn, arg, true) : -EINVAL;
}

net_task *net_task_current(void)
{
    cr_coro *co = cr_coro_current();
    return co ? cr_coro_data(co) : NULL;
}

void net_task_cancel(net_task *task)
{
    net_wait_end(&task->waiter, NET_END_CANCELLED);
}

void net_task_interrupt(net_task *task)
{
    /* An operation in flight only; the first end of a wait decides. */
    if (task->waiter.cancel)
        net_wait_end(&task->waiter, NET_END_INTERRUPTED);
}

void net_task_set_idle(bool idle)
{
    net_task *task = net_task_current();
    /* While draining, the idle task's next operation decides: one on a
     * descriptor with input waiting runs (the request is answered), any
     * other returns -ECANCELED (io.c). */
    if (task)
        task->idle = idle;
}

void net_task_set_service(bool service)
{
    net_task *task = net_task_current();
    if (!task || task->service == service)
        return;
    task->service = service;
    net_tasks *ts = task->waiter.loop->tasks;
    if (service)
        ts->services++;
    else
        ts->services--;
}

bool net_fd_has_input(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* --- parking ------------------------------------------------------------ */

int net_park(int fd, unsigned events, uint64_t timeout_ns)
{
    net_task *task = net_task_current();
    if (!task)
        return -EPERM;
    net_waiter *w = &task->waiter;
    net_loop *loop = w->loop;
    if (net_waiter_cancelled(w))
        return -ECANCELED;
    if (task->idle && loop->idle_closing && !task->service) {
        net_wait_end(w, NET_END_CANCELLED); /* shutdown ends idle waits */
        return -ECANCELED;
    }
    int res;
    if (fd < 0 && (timeout_ns == 0 || timeout_ns >= NET_COARSE_TIMEOUT_NS)) {
        /* Nothing for the kernel to do: net_unpark, the tick or a cancel
         * puts the task on the loop's ready list. */
        net_wait_begin(w, NET_WAIT_PARK, timeout_ns ? loop->now_ns + timeout_ns : 0);
        res = net_wait_suspend(w);
    } else {
        net_ring_reserve(&loop->ring, 2);
        struct __kernel_timespec ts;
        struct io_uring_sqe *sqe = net_ring_sqe(&loop->ring);
        if (fd < 0) {
            ts.tv_sec = (long long)(timeout_ns / CR_NS_PER_S);
            ts.tv_nsec = (long long)(timeout_ns % CR_NS_PER_S);
            io_uring_prep_timeout(sqe, &ts, 0, 0);
            res = net_wait_sqe(w, NET_WAIT_PARK, sqe, -1, 0, NULL);
            if (res == -ETIME)
                res = -ETIMEDOUT;
        } else {
            io_uring_prep_poll_add(sqe, fd, events);
            /* A busy task waiting on a socket of its own (the database
             * driver with queries out) holds requests that wait for this
             * completion: while it waits, the loop turns do not batch-wait
             * for client completions (loop.c, batch_wait_nr). An idle one
             * (nothing asked) holds nobody. */
            bool outside = !task->idle;
            loop->load.outside_waits += outside;
            struct __kernel_timespec lts;
            res = net_wait_sqe(w, NET_WAIT_PARK, sqe, fd, timeout_ns, &lts);
            loop->load.outside_waits -= outside;
        }
    }
    if (net_waiter_cancelled(w))
        return -ECANCELED;
    if (w->ended == NET_END_WOKEN && (res == -ECANCELED || res == -ETIMEDOUT))
        return 0;
    return res;
}

bool net_unpark(net_task *task)
{
    if (!task || task->waiter.kind != NET_WAIT_PARK)
        return false;
    return net_wait_end(&task->waiter, NET_END_WOKEN);
}

/* --- the part ------------------------------------------------------------ */

/*
 * Memory back after a burst. Every NET_STACK_TRIM_TICKS ticks (500 ms) the
 * connection stacks that stayed unused since the last trim are unmapped,
 * beyond NET_STACKS_KEPT (cr_stack_pool_trim): a burst's stacks go back to
 * the system within a second of it; a working set taken in each interval
 * stays. When some went, a burst is over, and the heap memory its
 * connections freed goes back too: malloc_trim(3) gives the system the
 * whole free pages inside malloc's heaps, which the heap's top trim alone
 * does not (the requests' buffers are freed between longer-lived small
 * blocks). It takes each malloc arena's lock in turn, briefly: once per
 * burst at most every 500 ms.
 */
#define NET_STACK_TRIM_TICKS 5
#define NET_STACKS_KEPT 16

static void sample(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_tasks *ts = loop->tasks;
    if (++ts->ticks % NET_STACK_TRIM_TICKS == 0 && cr_stack_pool_trim(ts->stacks, NET_STACKS_KEPT))
        malloc_trim(0);
    NET_STAT_SET(coroutines, ts->count);
    NET_STAT_SET(stacks_cached, cr_stack_pool_cached(ts->stacks));
}

int net_tasks_attach(net_loop *loop, size_t stack_size, size_t service_stack_size)
{
    net_tasks *ts = calloc(1, sizeof(*ts));
    if (!ts)
        return -ENOMEM;
    loop->tasks = ts;
    int err = cr_stack_pool_create(&ts->stacks, stack_size, 1024);
    if (err == 0)
        err = cr_stack_pool_create(&ts->service_stacks, service_stack_size, 16);
    if (err < 0)
        return err;
    net_loop_on_tick(loop, sample, NULL);
    net_deadlines_attach(loop);
    return 0;
}

void net_tasks_detach(net_loop *loop)
{
    net_tasks *ts = loop->tasks;
    if (!ts)
        return;
    if (ts->stacks)
        cr_stack_pool_destroy(ts->stacks);
    if (ts->service_stacks)
        cr_stack_pool_destroy(ts->service_stacks);
    free(ts);
    loop->tasks = NULL;
}
