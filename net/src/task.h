/*
 * Internal to net/: tasks. A task is a coroutine the loop knows about (one
 * per connection, or spawned with net_spawn), linked into its thread's list
 * so that the drain can find it; its net_task lives on its own stack. Its
 * waits are its waiter's (wait.h); what its owner declares of it (idle,
 * service) is here. Not a public header.
 */
#ifndef CORING_NET_TASK_H
#define CORING_NET_TASK_H

#include "wait.h"
#include "coring/net/io.h"

#include <stdbool.h>
#include <stddef.h>

struct net_recv_state;

struct net_task {
    net_waiter waiter;           /* its waits: the one state machine (wait.h) */
    bool idle;                   /* declared by its owner: waiting between requests, so
                                    the drain may end its wait (net_task_set_idle) */
    bool service;                /* a role: serves other tasks (a database driver, the
                                    curl timer), so the drain ends it only once no other
                                    task is left (net_task_set_service) */
    net_timer deadline;          /* its deadline (net_deadline_set), in the tasks' wheel */
    unsigned char stop_cause;    /* a net_stop_cause: why it was cancelled (deadline.c) */
    struct net_recv_state *recv; /* a connection task's: its connection's multishot recv
                                    (conn.c), or NULL */
    net_task *prev, *next;       /* in the thread's list */
};

/* The thread's tasks: the loop's part owned by task.c. */
typedef struct net_tasks {
    net_task *list; /* every live task */
    unsigned count;
    unsigned services;             /* tasks marked as services, among count */
    cr_stack_pool *stacks;         /* connection tasks' and net_spawn's stacks */
    cr_stack_pool *service_stacks; /* net_spawn_service's: larger (net_config) */
    unsigned ticks;                /* ticks seen: every few, the stacks are trimmed */
    net_wheel deadlines;           /* the tasks' deadlines (deadline.c) */
} net_tasks;

/* Attach the tasks part to @loop: its stack pools (@stack_size and
 * @service_stack_size bytes) and its metrics on the tick. 0 or -ENOMEM. */
int net_tasks_attach(net_loop *loop, size_t stack_size, size_t service_stack_size);
/* Destroy the stack pools (every task has ended). */
void net_tasks_detach(net_loop *loop);

/* net_task_start - start @fn(@arg) in a new task of @loop; it runs until
 * its first wait before this returns. @service: on a service stack, and
 * marked as a service. 0 or -ENOMEM. Loop thread. */
int net_task_start(net_loop *loop, void (*fn)(void *arg), void *arg, bool service);

/* Arm the tasks' deadlines on @loop's tick (deadline.c). */
void net_deadlines_attach(net_loop *loop);

/* net_task_stop - cancel @task for @cause (NET_STOP_DEADLINE, NET_STOP_DRAIN):
 * the one path by which a request's deadline and the drain's end a task
 * (deadline.c). Loop thread. */
void net_task_stop(net_task *task, net_stop_cause cause);

/* The task whose waiter is @w. */
static inline net_task *net_task_of(net_waiter *w)
{
    return (net_task *)(void *)((char *)w - offsetof(net_task, waiter));
}

/* Has @fd input waiting (or end of file, or an error) right now? poll(2)
 * with no timeout; false for fd < 0. Any thread. */
bool net_fd_has_input(int fd);

#endif
