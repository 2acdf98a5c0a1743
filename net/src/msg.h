/*
 * Internal to net/: the runtime's part of a net_msg. The public header
 * (coring/net/io.h) gives it only as net_msg_private, an opaque block of
 * the same size, so that callers can embed a net_msg by value while its
 * fields stay here; net_msg_rt() is a cast, free on the message path.
 */
#ifndef CORING_NET_MSG_H
#define CORING_NET_MSG_H

#include "coring/net/io.h"

#include <stddef.h>

/* may_alias: the block is declared as net_msg_private and read as this. */
typedef struct __attribute__((may_alias)) net_msg_rt {
    net_task *waiter;    /* the coroutine waiting for the reply */
    net_msg *next_retry; /* queue of messages whose MSG_RING must be re-posted */
    int origin;          /* the sender's thread index */
    int target;          /* the receiver's thread index */
    int phase;           /* request or reply */
    int error;           /* the message could not be posted (-errno) */
} net_msg_rt;

_Static_assert(sizeof(net_msg_rt) == sizeof(net_msg_private),
               "net_msg_private (coring/net/io.h) must match net_msg_rt");
_Static_assert(_Alignof(net_msg_rt) <= _Alignof(net_msg_private),
               "net_msg_private (coring/net/io.h) must be aligned for net_msg_rt");

static inline net_msg_rt *net_msg_rt_of(net_msg *m)
{
    return (net_msg_rt *)(void *)&m->priv;
}

#endif
