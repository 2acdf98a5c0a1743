/*
 * Internal to net/: the per-thread loop, its tasks and operations, shared
 * by every file of net/src/ (rt.h has the process-wide state and the
 * functions those files call across each other). Not a public header.
 */
#ifndef CORING_NET_LOOP_H
#define CORING_NET_LOOP_H

#include "coring/core/coro.h"
#include "buf_ring.h"
#include "wheel.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <liburing.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum {
    NET_TAG_OP = 0,
    NET_TAG_ACCEPT = 1,
    NET_TAG_MSG = 2,
    NET_TAG_MSG_FAILED = 3,
    NET_TAG_CTRL = 4,
    NET_TAG_RECV = 5, /* a connection's multishot recv: gen << 32 | slot << 3 | TAG_RECV */
    NET_TAG_MASK = 7,
};

enum {
    NET_CTRL_SHUTDOWN = 1,
    NET_CTRL_DEADLINE,
    NET_CTRL_ACCEPT,
    NET_CTRL_RETRY,
    NET_CTRL_TICK,
    NET_CTRL_EXIT,
};

/*
 * Timeouts of at least NET_COARSE_TIMEOUT_NS (keep-alive, header and body
 * reads, sends) are not linked timeout SQEs, which would arm and cancel a
 * kernel timer around every recv: the task arms its timer in the loop's
 * wheel (wheel.h, O(1)) and the loop's tick, every NET_TICK_NS, cancels
 * the operations whose deadline passed. Such a timeout fires up to one
 * tick late. Shorter ones are linked timeouts.
 */
#define NET_COARSE_TIMEOUT_NS (1000ull * 1000 * 1000)
#define NET_TICK_NS (100ull * 1000 * 1000)
/* io_uring_setup(2) IORING_FEAT_MIN_TIMEOUT (Linux 6.12), which liburing 2.3's
 * header lacks: io_uring_enter(2) takes min_wait_usec in its EXT_ARG. */
#define NET_FEAT_MIN_TIMEOUT (1U << 15)
#define NET_CTRL(cmd) (((uint64_t)(cmd) << 3) | NET_TAG_CTRL)

enum { NET_MSG_REQUEST = 1, NET_MSG_REPLY = 2 };

/* A completion taken out of the CQ, waiting in the loop's backlog. */
typedef struct net_cqe {
    uint64_t data;
    int32_t res;
    uint32_t flags;
} net_cqe;

/*
 * What a task is waiting for, and what has been asked of that wait. One
 * value instead of the five booleans it replaces (timed_out, interrupted,
 * drain_cancel, park_sqe, unparked): of their 32 combinations only these
 * occur, and the first cancel of an operation decides its outcome (a
 * second one is not submitted). Transitions:
 *
 *   RUNNING --(SQE op)--> WAITING --(tick)--> TIMING_OUT   -> RUNNING, -ETIMEDOUT
 *                                 --(net_task_interrupt)--> INTERRUPTING -> RUNNING, -EINTR
 *                                 --(drain, no input)-->    DRAINING -> RUNNING (cancelled
 *                                                           if it ended -ECANCELED)
 *   RUNNING --(net_park, no SQE)--> PARKED --(unpark, tick, cancel)--> WOKEN
 *   RUNNING --(net_park on a poll or timeout SQE)--> PARKED_SQE --(unpark)--> WOKEN
 *                                 (tick, interrupt: as from WAITING)
 *   WOKEN --(resumed)--> RUNNING
 *
 * A parked task has task->park set; an SQE in flight, task->op.
 */
typedef enum net_task_state {
    NET_TASK_RUNNING = 0, /* not waiting: running, or about to be resumed */
    NET_TASK_WAITING,     /* an operation (SQE) in flight, nothing asked of it */
    NET_TASK_TIMING_OUT,  /* ... cancelled by the tick at its coarse deadline */
    NET_TASK_INTERRUPTING,/* ... cancelled by net_task_interrupt */
    NET_TASK_DRAINING,    /* ... the idle wait cancelled softly by the drain: if it
                             ends -ECANCELED the task is cancelled, if it won the
                             race (a request arrived) the task goes on */
    NET_TASK_PARKED,      /* in net_park with no SQE: only the loop can wake it */
    NET_TASK_PARKED_SQE,  /* in net_park on a poll or timeout SQE */
    NET_TASK_WOKEN,       /* parked, and woken: on the ready list, or its SQE's
                             cancel submitted by net_unpark */
} net_task_state;

/* Where a task is in its life, as its owner declares it (idle) or the
 * runtime decides (cancelled, which is for good). */
typedef enum net_task_life {
    NET_TASK_BUSY = 0,  /* serving: shutdown lets it finish */
    NET_TASK_IDLE,      /* between requests: shutdown may cancel it */
    NET_TASK_CANCELLED, /* every operation returns -ECANCELED from now on */
} net_task_life;

/* One operation a coroutine waits for; lives on the coroutine's stack. */
typedef struct net_op {
    net_task *task;
    int res;
    uint32_t flags;
    net_task_state ended; /* the task's state when the wait ended (net_loop_wait) */
} net_op;

/*
 * A connection task's multishot recv (io.c): one IORING_OP_RECV with
 * IORING_RECV_MULTISHOT and IOSQE_BUFFER_SELECT armed on the connection's
 * descriptor, posting a CQE (a provided buffer) each time data arrives.
 * Its CQEs are queued here in order, whether or not the task waits for
 * them, and handed out by net_recv_provided / net_recv. Lives in the task.
 */
#define NET_RECV_INLINE 8 /* queued CQEs held without malloc */
#define NET_RECV_PAUSE 4  /* queued CQEs at which the recv is cancelled until they are read */
typedef struct net_recv_state {
    int fd;              /* the connection's descriptor, or -1 (not a connection task, or closed) */
    bool armed;          /* its SQE is live (no CQE without IORING_CQE_F_MORE seen yet) */
    bool paused;         /* cancelled by us because NET_RECV_PAUSE CQEs wait unread */
    uint64_t data;       /* its user_data (NET_TAG_RECV) */
    net_op *wait;        /* the task's op while it waits for the next CQE, or NULL */
    net_cqe *q;          /* queued CQEs: inline, or malloc'd once more arrive */
    uint32_t cap, head, len;
    uint32_t off;        /* bytes of the head CQE already handed out (net_recv) */
    int error;           /* -ENOMEM: a CQE could not be queued; later CQEs are dropped, and it is
                            returned (every time) once the CQEs queued before it are read */
    net_cqe inline_q[NET_RECV_INLINE];
} net_recv_state;

struct net_task {
    cr_coro *coro;
    net_loop *loop;
    net_op *op;          /* in flight, or NULL */
    net_task_state state;
    net_task_life life;
    bool woken_wait;     /* counted in loop->woken_waits until it is resumed */
    bool service;        /* a role, not a state: serves other tasks (a database
                            driver, the curl timer), so shutdown ends it only once
                            no other task is left */
    uint32_t slot;       /* its entry in loop->slots, for the life of the task */
    uint64_t op_data;    /* user_data of the operation in flight (net_op_data) */
    int op_fd;           /* descriptor of the operation in flight, or -1 */
    net_timer timer;     /* coarse deadline of the operation in flight, in loop->wheel */
    net_op *park;        /* in net_park(): its op, or NULL */
    net_task *ready_next;/* in loop->ready */
    unsigned replies_pending; /* in net_call_all: replies still awaited past the
                                 one that resumes it (0 otherwise) */
    net_task *prev, *next;
    net_recv_state recv; /* the connection's multishot recv (io.c) */
};

/*
 * A task's operations are named in user_data by a slot of its loop's table
 * and a generation, never by a stack address: the slot is the task's for
 * its life (then reused by another task), and its generation is bumped at
 * each operation submitted. A completion or a cancel naming an older
 * generation (a stale one: the operation it meant is gone, its stack maybe
 * reused) matches nothing. See loop.c's header for the whole encoding.
 */
typedef struct net_slot {
    net_op *op;          /* the operation in flight, or NULL */
    net_task *task;      /* the task holding the slot, or NULL while free */
    uint32_t gen;        /* of the latest operation; never 0 */
    uint32_t recv_gen;   /* of the task's armed multishot recv; 0: none */
    uint32_t next_free;  /* in the loop's free list, while unused: index + 1, 0 ends it */
} net_slot;

#define NET_SLOT_SHIFT 3
#define NET_SLOT_BITS 29 /* slots per thread: 2^29, far above any connection limit */
#define NET_GEN_SHIFT 32

/* user_data for the operation of generation @gen on slot @slot. Never 0
 * (gen is never 0), which stays "nothing waits for it". */
static inline uint64_t net_op_data(uint32_t slot, uint32_t gen)
{
    return (uint64_t)gen << NET_GEN_SHIFT | (uint64_t)slot << NET_SLOT_SHIFT | NET_TAG_OP;
}

struct net_loop {
    struct io_uring ring;
    unsigned ring_flags;
    bool min_wait;       /* batch waits on: cfg.batch_wait_us and the kernel has min-wait */
    unsigned turn_recvs; /* multishot recv CQEs dispatched since the last wait (loop.c) */
    unsigned batch_recvs;/* ... in the last turn that waited: how busy the loop is */
    unsigned outside_waits; /* busy tasks parked on a socket of their own (net_park: the
                             * database's): no batch wait while one is out (loop.c) */
    unsigned woken_waits;   /* tasks woken early (net_unpark, net_task_interrupt) whose
                             * operation is being cancelled: they run at that cancel's
                             * CQE, so no batch wait (loop.c) */
    int index;
    int listen_fd;
    net_buf_ring bufs;
    cr_stack_pool *stacks;
    net_task *tasks;     /* every live task of this thread */
    unsigned task_count;
    unsigned service_count;  /* tasks marked as services, among task_count */
    bool services_cancelled; /* draining, and no other task left: services told to stop */
    bool drained;            /* draining and no task left; counted in the runtime */
    bool exit;               /* every worker drained: leave the loop */
    unsigned connections;
    bool draining;
    bool accept_armed;
    bool recv_single;          /* the kernel lacks multishot recv: single shots (io.c) */
    bool recv_multishot_seen;  /* a multishot recv has delivered data on this ring */
    bool retry_armed;
    net_msg *retry;      /* messages to re-post */
    _Atomic(net_msg *) failed_replies; /* pushed by other threads whose reply to a waiter
                                          here failed; taken by the tick */
    net_task *ready_head, *ready_tail; /* parked tasks to resume at the next turn */
    uint64_t last_accept_log, last_limit_log;
    uint64_t now_ns;     /* monotonic time, updated after each wait */
    net_cqe *backlog;    /* completions reaped from the CQ, to dispatch in order */
    size_t backlog_head, backlog_len, backlog_cap;
    struct __kernel_timespec accept_ts, drain_ts, retry_ts, tick_ts;
    net_wheel wheel;     /* the tasks' coarse deadlines (task->timer) */
    net_slot *slots;     /* one per live task (net_op_data) */
    uint32_t slots_len, slots_cap, free_slot; /* free_slot: index + 1, 0: none free */
};

/* Name @op, about to be submitted by @task, in user_data: a new generation
 * of the task's slot. Returns the user_data (also in task->op_data). */
uint64_t net_op_begin(net_task *task, net_op *op);

/* An SQE from @loop's ring. When the SQ is full it submits first and moves
 * the CQ's completions to the loop's backlog (never dispatched from here):
 * callable from a coroutine or from the loop. */
struct io_uring_sqe *net_loop_sqe(net_loop *loop);

/* Make sure @n SQEs can be taken without a submit in between (links). */
void net_loop_reserve(net_loop *loop, unsigned n);

/* Yield until @op completes; returns op->res, the task's state at the end
 * in op->ended (the task is RUNNING again). */
int net_loop_wait(net_task *task, net_op *op);

/* Resume @task (parked with no SQE) at the loop's next turn with @res. */
void net_loop_make_ready(net_loop *loop, net_task *task, int res);

/* A CQE of a multishot recv (TAG_RECV): queue it on its task, resume the
 * task if it waits for it; a stale one (its task gone or re-armed) gives
 * its buffer back. Loop context (io.c). */
void net_recv_dispatch(net_loop *loop, uint64_t data, int res, uint32_t flags);

/* The task is ending: cancel its armed recv, give back the buffers of
 * its queued CQEs (io.c). */
void net_recv_release(net_task *task);

/* Has @fd input waiting (or end of file, or an error) right now? poll(2)
 * with no timeout; false for fd < 0. Any thread. */
bool net_fd_has_input(int fd);

/* The calling thread's loop, or NULL off the worker threads. */
net_loop *net_loop_current(void);

#endif
