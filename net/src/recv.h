/*
 * Internal to net/: a connection's multishot recv. One IORING_OP_RECV with
 * IORING_RECV_MULTISHOT and IOSQE_BUFFER_SELECT armed on the connection's
 * descriptor posts a CQE (a provided buffer) each time data arrives. Its
 * CQEs are queued in order, whether or not a task waits for them, and
 * handed out by net_recv_provided / net_recv (io.c) to the connection's
 * task. The state lives in the connection (conn.h), which outlives its
 * tasks: the recv stays armed while the connection is idle with no task
 * at all. See docs/runtime.md, "Receive".
 */
#ifndef CORING_NET_RECV_H
#define CORING_NET_RECV_H

#include "task.h"

#include <stdint.h>
#include <sys/types.h>

#define NET_RECV_INLINE 4 /* queued CQEs held without malloc */
#define NET_RECV_PAUSE 4  /* queued CQEs at which the recv is cancelled until they are read */

/* Where the multishot recv's SQE is. */
typedef enum net_recv_arm {
    NET_RECV_OFF = 0,  /* none armed (its last CQE, without IORING_CQE_F_MORE, came) */
    NET_RECV_ARMED,    /* armed */
    NET_RECV_STOPPING, /* cancelled by us (NET_RECV_PAUSE CQEs unread, an error, the
                          connection's idle deadline or the drain): its last CQE is on
                          its way */
} net_recv_arm;

/* A connection's multishot recv; lives in its connection (conn.h). */
typedef struct net_recv_state {
    int fd;            /* the connection's descriptor, or -1 once closed */
    net_recv_arm arm;
    uint32_t slot;     /* the connection's slot in the loop's table (wait.h): names
                          its recv */
    uint64_t name;     /* its user_data (NET_TAG_RECV) */
    net_cqe *q;        /* queued CQEs: inline, or malloc'd once more arrive */
    uint32_t cap, head, len;
    uint32_t off;      /* bytes of the head CQE already handed out (net_recv) */
    int error;         /* -ENOMEM: a CQE could not be queued; later CQEs are dropped,
                          and it is returned (every time) once the CQEs queued before
                          it are read */
    net_cqe inline_q[NET_RECV_INLINE];
} net_recv_state;

/* Not an errno: the kernel has no multishot recv, use one recv per call. */
#define NET_RECV_SINGLE (-4096)

/* What a CQE of the recv did to its queue (net_recv_cqe). */
typedef enum net_recv_event {
    NET_RECV_QUEUED,  /* queued for the next receive: data, EOF, or an error */
    NET_RECV_ENDED,   /* our own cancel ended the recv (-ECANCELED): arm it again
                         to go on */
    NET_RECV_NONE,    /* the kernel has no multishot recv (before 6.0) */
    NET_RECV_DROPPED, /* dropped: an earlier CQE could not be queued, and nothing
                         after that hole may be read */
} net_recv_event;

/* net_recv_cqe - take a CQE (@res, @flags) of @r's armed recv: queue it,
 * pause the recv when NET_RECV_PAUSE are unread. Loop context. */
net_recv_event net_recv_cqe(net_loop *loop, net_recv_state *r, int res, uint32_t flags);

/* net_recv_give_back - the provided buffer a CQE with @flags carries, if
 * any, back to the ring (a CQE nobody queues: stale). */
void net_recv_give_back(net_loop *loop, uint32_t flags);

/* net_recv_arm_multishot - arm @r's multishot recv (it is off). @poll_first: arm the
 * poll at once instead of trying a recv first (IORING_RECVSEND_POLL_FIRST:
 * after an answer, when the next request has rarely arrived). */
void net_recv_arm_multishot(net_loop *loop, net_recv_state *r, bool poll_first);

/* net_recv_stop - cancel @r's armed recv (its last CQE is still to come);
 * nothing when it is not armed. */
void net_recv_stop(net_loop *loop, net_recv_state *r);

/*
 * net_recv_multishot - a receive on @task's connection descriptor through
 * its multishot recv (armed here when it is not): the head CQE as a
 * provided buffer into @out, or (@out NULL) copied into @buf (at most @len
 * bytes). Returns bytes, 0 at EOF, -errno, or NET_RECV_SINGLE (use one
 * recv per call: the kernel lacks multishot recv). @task's connection
 * task only.
 */
ssize_t net_recv_multishot(net_task *task, net_rbuf *out, char *buf, size_t len,
                           uint64_t timeout_ns);

/* Is @fd @task's connection, with CQEs queued, an error, or its recv armed
 * (a single-shot recv would race it)? */
bool net_recv_busy(const net_task *task, int fd);

/* net_recv_release - the connection is closing or gone: cancel its armed
 * recv, give back the buffers of its queued CQEs; what still comes is
 * stale. */
void net_recv_release(net_loop *loop, net_recv_state *r);

#endif
