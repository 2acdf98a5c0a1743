/*
 * Internal to net/: cross-core messages and wake-ups. Each message in
 * flight travels in an envelope of the runtime's (never the caller's
 * memory), which goes to the target and always comes back to the thread
 * that sent it, where it is recycled: so a waiter that gave up (its
 * deadline, a cancel) leaves nothing behind that points into its stack.
 * Not a public header.
 */
#ifndef CORING_NET_MSG_H
#define CORING_NET_MSG_H

#include "loop.h"
#include "coring/net/io.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Where an envelope's message is; the target and the waiter race for it. */
enum {
    NET_ENVELOPE_OUT = 0,   /* posted; its fn has not run */
    NET_ENVELOPE_TAKEN,     /* the target runs (or ran) its fn: its reply will come */
    NET_ENVELOPE_ABANDONED, /* its waiter gave up first: its fn never runs, and it only
                               comes back to be recycled */
    NET_ENVELOPE_FREE,      /* recycled: on its origin's free list, nobody's */
};

enum { NET_MSG_REQUEST = 1, NET_MSG_REPLY = 2 };

/*
 * An envelope belongs to its origin thread and serves one message or
 * wake-up at a time: each use is a generation of it, which every MSG_RING
 * that carries it names (the CQE's res), so that a delivery of an earlier
 * use, or a second one of this use, is recognised and dropped instead of
 * ending the wait of whoever holds the envelope now.
 */
typedef struct net_envelope {
    net_msg *msg;                 /* the caller's message (fn runs on the target), or NULL: a
                                     wake-up (net_wait_handle) */
    uint64_t waiter;              /* the name of the wait that awaits it (wait.h), or 0 */
    atomic_int state;             /* NET_ENVELOPE_* */
    uint32_t gen;                 /* this use of it: bumped each time it is taken */
    int origin;                   /* the thread it belongs to, and comes back to */
    int target;                   /* the thread it goes to */
    int phase;                    /* NET_MSG_REQUEST (going) or NET_MSG_REPLY (coming back) */
    int error;                    /* it could not be posted (-errno) */
    bool back;                    /* on the origin: it came back (read by its waiter) */
    bool let_go;                  /* abandoned, and its waiter has moved on: recycled as soon
                                     as it is back (until then only its waiter recycles it) */
    struct net_envelope *next;    /* in the free list, the retry queue, an inbox */
    struct net_envelope *sibling; /* the next envelope of one net_call_all */
    struct net_envelope *all;     /* the next of its origin's envelopes (msg.c) */
} net_envelope;

/* Attach the messages part to @loop and register its handlers (messages,
 * failed posts, retries, the inbox on the tick). 0 or -ENOMEM. */
int net_msgs_attach(net_loop *loop);
/* Free the messages part of @loop and every envelope it ever made, wherever
 * it is (recycled, out, abandoned, in an inbox or a retry queue, its own or
 * another loop's). Once no thread can reach any loop's envelopes: net_run,
 * after every worker has left and no net_wake is under way. */
void net_msgs_detach(net_loop *loop);

/* A message crosses threads through the kernel (IORING_OP_MSG_RING), which
 * ThreadSanitizer cannot see: tell it that posting a message publishes what
 * was written to it and that receiving one acquires that. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define NET_TSAN_RELEASE(p) __tsan_release(p)
#define NET_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define NET_TSAN_RELEASE(p) ((void)(p))
#define NET_TSAN_ACQUIRE(p) ((void)(p))
#endif

#endif
