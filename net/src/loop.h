/*
 * Internal to net/: the per-thread loop. Its struct holds the ring, the
 * timer wheel, the provided buffers, the ready list, the tables of handlers
 * the other files register, and, as opaque pointers, the parts those files
 * own (the waiter table, the tasks, the messages, the listener, the drain),
 * as redis's aeEventLoop holds its backend's state. Not a public header.
 */
#ifndef CORING_NET_LOOP_H
#define CORING_NET_LOOP_H

#include "coring/core/coro.h"
#include "buf_ring.h"
#include "compat.h"
#include "ring.h"
#include "wheel.h"
#include "coring/net/runtime.h"

#include <stdbool.h>
#include <stdint.h>

/* Control commands (NET_CTRL(cmd) in user_data). */
enum {
    NET_CTRL_SHUTDOWN = 1, /* the drain begins (shutdown.c) */
    NET_CTRL_DEADLINE,     /* the drain's deadline (shutdown.c) */
    NET_CTRL_IDLE_GRACE,   /* the drain closes idle connections (shutdown.c) */
    NET_CTRL_ACCEPT,       /* re-arm the accept after a back-off (listener.c) */
    NET_CTRL_RETRY,        /* re-post messages whose MSG_RING failed (msg.c) */
    NET_CTRL_TICK,         /* the loop's tick (loop.c) */
    NET_CTRL_EXIT,         /* every worker drained: leave the loop (loop.c) */
    NET_CTRL_COUNT,
};

/*
 * Timeouts of at least NET_COARSE_TIMEOUT_NS (keep-alive, header and body
 * reads, sends) are not linked timeout SQEs, which would arm and cancel a
 * kernel timer around every recv: the wait arms its deadline in the loop's
 * wheel (wheel.h, O(1)) and the loop's tick, every NET_TICK_NS, ends the
 * waits whose deadline passed. Such a timeout fires up to one tick late.
 * Shorter ones are linked timeouts.
 */
#define NET_COARSE_TIMEOUT_NS (1000ull * 1000 * 1000)
#define NET_TICK_NS (100ull * 1000 * 1000)

typedef struct net_loop net_loop;

/* A completion of a tag's (ring.h), for the handler that registered it. */
typedef void (*net_cqe_fn)(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags);
/* A control command, a tick, a turn. */
typedef void (*net_event_fn)(net_loop *loop, void *ctx);

/* A coroutine to resume at the loop's next turn (net_loop_ready). */
typedef struct net_ready {
    struct net_ready *next;
    cr_coro *coro;
} net_ready;

/* What the batch wait reads to decide how many completions a turn waits
 * for (loop.c, batch_wait_nr); kept by the files that know. */
typedef struct net_load {
    unsigned connections;   /* connection tasks alive (recv.c) */
    unsigned turn_recvs;    /* multishot recv CQEs dispatched since the last wait (recv.c) */
    unsigned batch_recvs;   /* ... in the last turn that waited: how busy the loop is */
    unsigned outside_waits; /* busy tasks parked on a socket of their own (net_park: the
                             * database's): they hold requests behind them (task.c) */
    unsigned ending_waits;  /* waits ended early whose SQE's cancel is on its way: their
                             * task runs at that cancel's CQE (wait.c) */
} net_load;

#define NET_TICK_HOOKS 8

/*
 * The most work one loop turn does, so that a burst (10,000 connections
 * arriving at once) is spread over many turns and every turn enters the
 * kernel: the sends queued go out, and the completions of established
 * connections come in, within a bounded slice. A turn resumes at most
 * NET_TURN_READY coroutines made ready and dispatches at most
 * NET_TURN_CQES completions; at most NET_TURN_ACCEPTS connections are
 * accepted between two turns (listener.c). Work left over makes the next
 * turn enter without waiting (net_ring_submit_and_peek); a turn that
 * reached a bound counts in coring_loop_turns_cut_total. The values are
 * perf/burst.py's: with 8 accepts a turn the probe's worst latency went to
 * hundreds of ms (the accept queue overflows, handshakes are retried);
 * 16 to 64 accepts and 128 to 256 completions were within that machine's
 * noise of each other (docs/runtime.md, "Fair turns").
 */
#define NET_TURN_CQES 128
#define NET_TURN_READY 128
#define NET_TURN_ACCEPTS 32

/* Work a file does once per turn, before the kernel is entered (the
 * listener's accepted connections); returns true when some is left for the
 * next turn. */
typedef bool (*net_turn_fn)(net_loop *loop, void *ctx);

struct net_loop {
    net_ring ring;
    net_wheel wheel;               /* the waits' coarse deadlines (wait.c) */
    net_buf_ring bufs;             /* provided buffers (recv.c, io.c) */
    int index;                     /* the worker's index */
    uint64_t now_ns;               /* monotonic time, read after each wait */
    bool draining;                 /* shutdown has begun on this thread (shutdown.c) */
    bool idle_closing;             /* draining, and the idle grace is over: idle waits
                                    * end (shutdown.c) */
    bool exit;                     /* every worker drained: leave the loop */
    net_recv_support recv_support; /* multishot recv on this kernel (compat.h) */
    net_load load;
    net_ready *ready_head, *ready_tail;
    unsigned turn_resumed; /* coroutines resumed from the ready list this turn */
    bool turn_cut;         /* this turn left work for the next (NET_TURN_*) */
    struct {
        net_cqe_fn fn;
        void *ctx;
    } on_cqe[NET_TAG_COUNT]; /* by tag; NET_TAG_CTRL is the loop's own */
    struct {
        net_event_fn fn;
        void *ctx;
    } on_ctrl[NET_CTRL_COUNT], on_tick[NET_TICK_HOOKS], on_drain_turn;
    struct {
        net_turn_fn fn;
        void *ctx;
    } on_turn;
    unsigned tick_hooks;
    struct __kernel_timespec tick_ts;
    /* The parts the files above own (opaque here): */
    struct net_waits *waits;       /* wait.c: the table naming waits */
    struct net_tasks *tasks;       /* task.c: the thread's tasks, its stack pools */
    struct net_conns *conns;       /* conn.c: idle connections and their deadlines */
    struct net_msgs *msgs;         /* msg.c: envelopes, retries, the inbox */
    struct net_listener *listener; /* listener.c */
    struct net_drain *drain;       /* shutdown.c */
};

/* net_loop_init - an empty loop for worker @index (its ring set up apart):
 * the tick and exit controls are its own. */
void net_loop_init(net_loop *loop, int index);

/* Register @fn(@ctx) for the completions tagged @tag (ring.h). */
void net_loop_on_cqe(net_loop *loop, unsigned tag, net_cqe_fn fn, void *ctx);
/* Register @fn(@ctx) for control command @cmd. */
void net_loop_on_ctrl(net_loop *loop, unsigned cmd, net_event_fn fn, void *ctx);
/* Add @fn(@ctx) to what every tick (NET_TICK_NS) does, in the order added
 * (at most NET_TICK_HOOKS). */
void net_loop_on_tick(net_loop *loop, net_event_fn fn, void *ctx);
/* Register @fn(@ctx) to run at every turn while the loop drains. */
void net_loop_on_drain_turn(net_loop *loop, net_event_fn fn, void *ctx);
/* Register @fn(@ctx) to run at every turn (one: the listener's). */
void net_loop_on_turn(net_loop *loop, net_turn_fn fn, void *ctx);

/* net_loop_ready - resume @r's coroutine at the loop's next turn, after the
 * current completions. */
void net_loop_ready(net_loop *loop, net_ready *r);

/* net_loop_resume - resume @co now, from the loop (or a loop callback);
 * destroys it if it finished. */
void net_loop_resume(cr_coro *co);

/* net_loop_run - run the loop until every worker is drained
 * (NET_CTRL_EXIT) or the ring fails. */
void net_loop_run(net_loop *loop);

/* The worker thread's loop (NULL elsewhere). */
extern _Thread_local net_loop *net_tl_loop;

/* net_loop_current - the calling thread's loop, or NULL off the workers. */
net_loop *net_loop_current(void);

#endif
