/*
 * Tasks and parking: a task is a coroutine the loop knows about (one per
 * connection, or spawned with net_spawn), linked into its thread's list so
 * that the drain, the tick and the deadline can find it. Its net_task lives
 * on its own stack. Parking (net_park/net_unpark) and the ready queue let
 * one task wake another on the same thread without a ring round trip.
 * See coring/net/io.h.
 */
#include "loop.h"
#include "rt.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

struct task_start {
    net_loop *loop;
    void (*fn)(void *arg);
    void *arg;
    int fd;       /* >= 0: a connection for hooks.on_connection */
    uint32_t slot;/* the task's slot (net_op_data) */
};

/* A free slot of @loop's table for a new task (net_op_data), or -ENOMEM. */
static int slot_alloc(net_loop *loop, uint32_t *out)
{
    if (loop->free_slot) {
        uint32_t i = loop->free_slot - 1;
        loop->free_slot = loop->slots[i].next_free;
        *out = i;
        return 0;
    }
    if (loop->slots_len == loop->slots_cap) {
        uint32_t cap = loop->slots_cap ? loop->slots_cap * 2 : 256;
        if (cap > 1u << NET_SLOT_BITS)
            return -ENOMEM;
        net_slot *s = realloc(loop->slots, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        loop->slots = s;
        loop->slots_cap = cap;
    }
    /* A new slot's generations start at 1: 0 is never a valid one. */
    loop->slots[loop->slots_len] = (net_slot){.op = NULL, .gen = 0, .recv_gen = 0};
    *out = loop->slots_len++;
    return 0;
}

/* Give @slot back; its generation goes on counting for its next task, so
 * that a completion of this task's operations never matches that one's. */
static void slot_free(net_loop *loop, uint32_t slot)
{
    loop->slots[slot].op = NULL;
    loop->slots[slot].task = NULL;
    loop->slots[slot].recv_gen = 0;
    loop->slots[slot].next_free = loop->free_slot;
    loop->free_slot = slot + 1;
}

uint64_t net_op_begin(net_task *task, net_op *op)
{
    net_slot *s = &task->loop->slots[task->slot];
    if (++s->gen == 0)
        s->gen = 1;
    s->op = op;
    task->op_data = net_op_data(task->slot, s->gen);
    return task->op_data;
}

static void task_main(void *p)
{
    struct task_start *s = p;
    net_task task = {.coro = cr_coro_current(), .loop = s->loop, .slot = s->slot, .op_fd = -1};
    void (*fn)(void *) = s->fn;
    void *arg = s->arg;
    int fd = s->fd;
    net_loop *loop = s->loop;

    task.recv.fd = fd;
    loop->slots[task.slot].task = &task;
    cr_coro_set_data(task.coro, &task);
    task.next = loop->tasks;
    if (loop->tasks)
        loop->tasks->prev = &task;
    loop->tasks = &task;
    loop->task_count++;
    if (fd >= 0)
        loop->connections++;

    if (fd >= 0)
        net_rt.hooks.on_connection(fd, net_rt.hooks.user);
    else
        fn(arg);

    net_recv_release(&task);
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
    slot_free(loop, task.slot);
}

static int task_start(net_loop *loop, struct task_start *s)
{
    int err = slot_alloc(loop, &s->slot);
    if (err < 0)
        return err;
    cr_coro *co;
    err = cr_coro_create(&co, loop->stacks, task_main, s);
    if (err < 0) {
        slot_free(loop, s->slot);
        return err;
    }
    cr_coro_resume(co);
    if (cr_coro_finished(co))
        cr_coro_destroy(co);
    return 0;
}

int net_task_start_connection(net_loop *loop, int fd)
{
    struct task_start s = {.loop = loop, .fd = fd};
    return task_start(loop, &s);
}

void net_loop_resume(net_loop *loop, net_task *task)
{
    (void)loop;
    cr_coro *co = task->coro; /* task lives on co's stack: read it first */
    cr_coro_resume(co);
    if (cr_coro_finished(co))
        cr_coro_destroy(co);
}

int net_spawn(void (*fn)(void *arg), void *arg)
{
    net_loop *loop = net_tl_loop;
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
    if (task->life == NET_TASK_CANCELLED)
        return;
    task->life = NET_TASK_CANCELLED;
    if (task->state == NET_TASK_PARKED) {
        net_loop_make_ready(task->loop, task, -ECANCELED);
    } else if (task->op) {
        net_submit_cancel(task->loop, task->op_data);
    }
}

/* @task runs at the CQE of the cancel just submitted for its operation:
 * until then the loop does not batch-wait (loop.c, batch_wait_nr). */
static void count_woken_wait(net_task *task)
{
    if (!task->woken_wait) {
        task->woken_wait = true;
        task->loop->woken_waits++;
    }
}

void net_task_interrupt(net_task *task)
{
    /* The first cancel of an operation decides: one already cancelled (by
     * the tick, an earlier interrupt, the drain, net_unpark) is left alone. */
    if (!task->op || (task->state != NET_TASK_WAITING && task->state != NET_TASK_PARKED_SQE))
        return;
    task->state = NET_TASK_INTERRUPTING;
    net_submit_cancel(task->loop, task->op_data);
    count_woken_wait(task);
}

void net_task_set_idle(bool idle)
{
    net_task *task = net_task_current();
    if (!task)
        return;
    /* While draining, the idle task's next operation decides: one on a
     * descriptor with input waiting runs (the request is answered), any
     * other returns -ECANCELED (io.c, begin). */
    if (task->life != NET_TASK_CANCELLED)
        task->life = idle ? NET_TASK_IDLE : NET_TASK_BUSY;
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
    task->state = NET_TASK_WOKEN;
    task->park->res = res;
    task->ready_next = NULL;
    if (loop->ready_tail)
        loop->ready_tail->ready_next = task;
    else
        loop->ready_head = task;
    loop->ready_tail = task;
}

/* Resume the parked tasks woken since the last turn (and those they wake). */
void net_run_ready(net_loop *loop)
{
    net_task *t;
    while ((t = loop->ready_head)) {
        loop->ready_head = t->ready_next;
        if (!loop->ready_head)
            loop->ready_tail = NULL;
        net_loop_resume(loop, t);
    }
}

bool net_unpark(net_task *task)
{
    if (!task || !task->park)
        return false;
    if (task->state == NET_TASK_PARKED) {
        net_loop_make_ready(task->loop, task, 0);
        return true;
    }
    if (task->state != NET_TASK_PARKED_SQE)
        return false; /* woken already, or its SQE cancelled by the tick or an interrupt */
    task->state = NET_TASK_WOKEN;
    net_submit_cancel(task->loop, task->op_data); /* the park's SQE */
    count_woken_wait(task);
    return true;
}

int net_loop_wait(net_task *task, net_op *op)
{
    task->op = op;
    task->state = task->park ? NET_TASK_PARKED_SQE : NET_TASK_WAITING;
    cr_coro_yield();
    if (task->woken_wait) {
        task->woken_wait = false;
        task->loop->woken_waits--;
    }
    task->op = NULL;
    op->ended = task->state;
    task->state = NET_TASK_RUNNING;
    return op->res;
}
