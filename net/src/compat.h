/*
 * Internal to net/: what coring does on kernels older than the ones it is
 * built for, gathered in one place. Linux 6.1 gives every feature the
 * runtime uses; before it, the ring's set-up flags fall back (6.0:
 * DEFER_TASKRUN missing; 5.19: COOP_TASKRUN, else none), and before 6.0 a
 * connection's multishot recv fails at once (-EINVAL) and the thread
 * receives with one recv per call instead. Nothing else branches on the
 * kernel's version.
 */
#ifndef CORING_NET_COMPAT_H
#define CORING_NET_COMPAT_H

#include "ring.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * net_compat_ring_init - set up @ring with the newest set-up flags the
 * kernel takes: SINGLE_ISSUER | DEFER_TASKRUN | SUBMIT_ALL (6.1+), else
 * COOP_TASKRUN | SUBMIT_ALL (5.19+), else none; @entries and @cq_entries
 * as net_ring_init. *@fallback: 0 for the newest set, else which fallback
 * was taken. Returns 0 or the -errno of the last try. The calling thread.
 */
int net_compat_ring_init(net_ring *ring, unsigned entries, unsigned cq_entries, unsigned *fallback);

/* Whether a thread's kernel has multishot recv (Linux 6.0). */
typedef enum net_recv_support {
    NET_MULTISHOT_UNKNOWN = 0, /* no multishot recv has completed on this ring yet */
    NET_MULTISHOT_YES,         /* one delivered data: it works */
    NET_MULTISHOT_NO,          /* the first one failed -EINVAL: one recv per call */
} net_recv_support;

/*
 * net_compat_recv_seen - what a multishot recv's CQE (@res, @flags) tells
 * of the kernel, given what was known (@now). A recv that ends with
 * -EINVAL before any multishot recv delivered data means the kernel has
 * none (before 6.0): NET_MULTISHOT_NO; data in a provided buffer means it
 * works. Pure.
 */
static inline net_recv_support net_compat_recv_seen(net_recv_support now, int res, uint32_t flags)
{
    if (now != NET_MULTISHOT_UNKNOWN)
        return now;
    if (!(flags & IORING_CQE_F_MORE) && res == -EINVAL)
        return NET_MULTISHOT_NO;
    if (flags & IORING_CQE_F_BUFFER)
        return NET_MULTISHOT_YES;
    return NET_MULTISHOT_UNKNOWN;
}

#endif
