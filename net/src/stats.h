/*
 * Internal to net/: the runtime's per-thread metrics (coring/core/metrics.h),
 * one handle per family, registered by net_run before the workers start
 * (net_stats_register). Each site that counts is one NET_STAT_* line, so
 * that the sites move with the code they sit in. Not a public header.
 */
#ifndef CORING_NET_STATS_H
#define CORING_NET_STATS_H

#include "coring/core/metrics.h"

typedef struct net_stats {
    cr_metric sqes_submitted;   /* SQEs io_uring_submit* handed to the kernel */
    cr_metric submits;          /* io_uring_submit* calls (each an io_uring_enter) */
    cr_metric cqes_reaped;      /* CQEs taken from the CQ */
    cr_metric cq_overflows;     /* the kernel's CQ overflow count (set by the tick) */
    cr_metric buffers_exhausted;/* recvs that found no provided buffer (-ENOBUFS) */
    cr_metric messages_sent;    /* MSG_RING posts: requests, replies, wake-ups */
    cr_metric messages_retried; /* MSG_RING posts retried (the target's CQ was full) */
    cr_metric messages_stale;   /* deliveries of a message no longer in use, dropped (msg.c) */
    cr_metric coroutines;       /* live tasks (set by the tick) */
    cr_metric stacks_cached;    /* free stacks in the pool (set by the tick) */
    cr_metric connections_idle; /* connections idle with no task (set by the tick) */
    cr_metric turns_cut;        /* loop turns that left work for the next (loop.c) */
} net_stats;

extern net_stats net_stat;

/* Register the families (main thread, before the workers). 0 or -errno. */
int net_stats_register(void);

#define NET_STAT_ADD(field, n) cr_metric_add(&net_stat.field, 0, (uint64_t)(n))
#define NET_STAT_SET(field, v) cr_metric_set(&net_stat.field, 0, (uint64_t)(v))
/* After an io_uring_submit* that returned @ret. */
#define NET_STAT_SUBMIT(ret)                                                                       \
    do {                                                                                           \
        NET_STAT_ADD(submits, 1);                                                                  \
        if ((ret) > 0)                                                                             \
            NET_STAT_ADD(sqes_submitted, (ret));                                                   \
    } while (0)

#endif
