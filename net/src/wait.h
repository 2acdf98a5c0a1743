/*
 * Internal to net/: the one wait state machine. Every suspension of a task
 * goes through it: an operation (an SQE), the next CQE of a connection's
 * multishot recv, net_park, net_call and net_call_all, net_wait (a wake-up
 * from another thread). Each can have a deadline and be ended early
 * (unparked, interrupted, drained, cancelled); the first end asked of a
 * wait decides its outcome. One waiter per task, embedded in it.
 *
 *   NONE --begin--> ON --(what it waits for happened)---------------> NONE
 *                    |                                                 (resumed at once)
 *                    +--end(why), an SQE in flight--> ENDING --(its CQE)--> NONE
 *                    +--end(why), messages out that ran--> ENDING --(their replies)--> NONE
 *                    +--end(why), nothing in flight--> READY --(next turn)--> NONE
 *
 * why: WOKEN (net_unpark), INTERRUPTED (net_task_interrupt), DEADLINE
 * (the wheel's tick, or a linked timeout), DRAIN (the shutdown, on an idle
 * task: softly, a result that won the race stands), CANCELLED
 * (net_task_cancel, the drain's deadline): CANCELLED stays after the wait,
 * and every later wait of the task is refused. The waiter also names its
 * waits in user_data (ring.h): a slot of the loop's table, its for life,
 * and a generation bumped at each wait.
 */
#ifndef CORING_NET_WAIT_H
#define CORING_NET_WAIT_H

#include "loop.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum net_wait_kind {
    NET_WAIT_IO,      /* an SQE: an operation, or a multishot recv's next CQE */
    NET_WAIT_PARK,    /* net_park: a wake-up from this thread, maybe with a poll or
                         timeout SQE */
    NET_WAIT_MESSAGE, /* replies to messages, or a wake-up from another thread (msg.c) */
} net_wait_kind;

typedef enum net_wait_state {
    NET_WAIT_NONE = 0, /* not waiting: running, or being resumed */
    NET_WAIT_ON,       /* waiting, nothing asked of the wait */
    NET_WAIT_ENDING,   /* ended early (end says why); what it waited on is still out
                          (an SQE being cancelled, a message being run elsewhere) and
                          its completion resumes the task */
    NET_WAIT_READY,    /* ended early with nothing out: on the loop's ready list */
} net_wait_state;

typedef enum net_end {
    NET_END_NONE = 0,    /* not ended early */
    NET_END_WOKEN,       /* net_unpark: 0 */
    NET_END_INTERRUPTED, /* net_task_interrupt: -EINTR */
    NET_END_DEADLINE,    /* the deadline passed: -ETIMEDOUT */
    NET_END_DRAIN,       /* the drain, an idle wait: -ECANCELED (then cancelled for
                            good) unless a result won the race */
    NET_END_CANCELLED,   /* net_task_cancel, the drain's deadline: -ECANCELED, and
                            every later wait of the task is refused */
} net_end;

typedef struct net_waiter net_waiter;

/* How a wait with nothing to cancel (messages) ends early: true when
 * nothing is out any more (the wait is over now), false when something
 * still is (the wait ends when it comes back). */
typedef bool (*net_abandon_fn)(net_waiter *w);

struct net_waiter {
    net_ready ready; /* its coroutine, and its link in the loop's ready list */
    net_loop *loop;
    net_wait_kind kind;
    net_wait_state state;
    net_end end;            /* why the wait ends early; CANCELLED stays */
    net_end ended;          /* why the last wait ended (read after net_wait_suspend) */
    uint64_t name;          /* this wait's user_data (ring.h); its SQE's, if it has one */
    uint64_t cancel;        /* the SQE to cancel to end the wait early, or 0: none */
    int fd;                 /* that SQE's descriptor, or -1 (the drain polls it) */
    int res;                /* the result it resumes with */
    uint32_t flags;         /* the CQE's flags */
    unsigned pending;       /* MESSAGE: replies still awaited */
    net_abandon_fn abandon; /* MESSAGE: how to end it early (msg.c) */
    void *abandon_ctx;
    net_timer timer; /* its deadline, in the loop's wheel */
    uint32_t slot;   /* its entry in the loop's table: names its waits */
};

/* The loop's table of waiters, and its handlers: the completions tagged
 * NET_TAG_OP, and on each tick the deadlines that passed. 0 or -ENOMEM. */
int net_waits_attach(net_loop *loop);
void net_waits_detach(net_loop *loop);

/* net_waits_take - reserve a slot of @loop's table in *@slot, for a
 * waiter or a connection about to be made. 0 or -ENOMEM. net_waits_give
 * gives one back (its generations go on counting for its next holder). */
int net_waits_take(net_loop *loop, uint32_t *slot);
void net_waits_give(net_loop *loop, uint32_t slot);

/* net_slot_hold - @owner (8-byte aligned) holds @slot (taken), and the
 * names it takes are tagged @tag: NET_TAG_OP for a waiter, NET_TAG_RECV
 * for a connection (conn.c). */
void net_slot_hold(net_loop *loop, uint32_t slot, void *owner, unsigned tag);

/* net_slot_rename - a new name for @slot's holder, tagged @tag: the next
 * generation of the slot. */
uint64_t net_slot_rename(net_loop *loop, uint32_t slot, unsigned tag);

/* net_slot_owner - what holds the slot that @name names, when it takes
 * names of @name's tag; else NULL (a free slot, or one held by the other
 * kind since). It may have moved on to newer names since: compare. */
void *net_slot_owner(net_loop *loop, uint64_t name);

/* net_waiter_init - @w, for coroutine @co of @loop, holds @slot (taken).
 * net_waiter_close gives the slot back. */
void net_waiter_init(net_waiter *w, net_loop *loop, cr_coro *co, uint32_t slot);
void net_waiter_close(net_waiter *w);

/* net_waiter_of - the waiter holding the slot that @name (a NET_TAG_OP
 * name) names, or NULL; it may have moved on to newer names since. */
static inline net_waiter *net_waiter_of(net_loop *loop, uint64_t name)
{
    return (net_waiter *)net_slot_owner(loop, name);
}

/*
 * net_wait_begin - @w starts waiting (NONE -> ON) for @kind, until
 * @deadline_ns (monotonic ns; 0: none; checked by the tick, up to one tick
 * late). Returns the wait's name (net_waiter_rename(NET_TAG_OP)), the
 * user_data for its SQE. Callers refuse to begin on a cancelled waiter.
 */
uint64_t net_wait_begin(net_waiter *w, net_wait_kind kind, uint64_t deadline_ns);

/* net_wait_on_sqe - the wait is on the SQE named @cancel (its own name, or
 * a multishot recv's) on descriptor @fd (-1: none): ending it early
 * cancels that SQE. */
static inline void net_wait_on_sqe(net_waiter *w, uint64_t cancel, int fd)
{
    w->cancel = cancel;
    w->fd = fd;
}

/* net_wait_suspend - yield until the wait is over; returns its result
 * (w->ended says how it ended). The coroutine of @w only. */
int net_wait_suspend(net_waiter *w);

/* net_wait_complete - what @w waits for happened (an ON or ENDING wait),
 * with @res and the CQE's @flags: resume it now. Loop context only (a
 * completion's handler); @w may be gone when this returns. */
void net_wait_complete(net_waiter *w, int res, uint32_t flags);

/* net_wait_end - end @w's wait early for @why. The first end asked of a
 * wait decides; CANCELLED also marks the waiter cancelled for good, waiting
 * or not. Returns true when this call ended (or cancelled) it. Same thread,
 * from a coroutine or the loop. */
bool net_wait_end(net_waiter *w, net_end why);

/* net_wait_result - an operation's result @res as its wait's end makes it:
 * -ECANCELED by an interrupt is -EINTR, by the deadline -ETIMEDOUT; by the
 * drain it cancels the waiter for good. A result that won the race stands. */
int net_wait_result(net_waiter *w, int res);

/*
 * net_wait_sqe - wait (@kind) for the operation prepared in @sqe, on @fd
 * (-1: none), for at most @timeout_ns (0: none; from NET_COARSE_TIMEOUT_NS
 * on the wheel's deadline, below it a linked timeout SQE, for which the
 * caller reserved a second SQE and gives @ts, alive until this returns).
 * Names the SQE, suspends, and returns its result as net_wait_result makes
 * it; a linked timeout that fired is -ETIMEDOUT.
 */
int net_wait_sqe(net_waiter *w, net_wait_kind kind, struct io_uring_sqe *sqe, int fd,
                 uint64_t timeout_ns, struct __kernel_timespec *ts);

/* net_waiting - @w waits (ON or ENDING). */
static inline bool net_waiting(const net_waiter *w)
{
    return w->state == NET_WAIT_ON || w->state == NET_WAIT_ENDING;
}

/* net_waiter_cancelled - @w's task was cancelled: no wait may begin. */
static inline bool net_waiter_cancelled(const net_waiter *w)
{
    return w->end == NET_END_CANCELLED;
}

#endif
