/*
 * Older kernels: the ring's set-up flags, newest first. See compat.h; the
 * other pre-6.0 path (one recv per call where multishot recv is missing)
 * is decided by net_compat_recv_seen and taken in recv.c.
 */
#include "compat.h"

#include <errno.h>

int net_compat_ring_init(net_ring *ring, unsigned entries, unsigned cq_entries, unsigned *fallback)
{
    static const unsigned flag_sets[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL,
        IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL,
        0,
    };
    int ret = -EINVAL;
    for (unsigned i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
        ret = net_ring_init(ring, entries, cq_entries, flag_sets[i]);
        if (ret == 0) {
            *fallback = i;
            return 0;
        }
        if (ret != -EINVAL)
            break;
    }
    return ret;
}
