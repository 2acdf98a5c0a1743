/*
 * Internal to net/: connection tasks and their multishot recv. A
 * connection task (one started for an accepted socket) receives through
 * one IORING_OP_RECV with IORING_RECV_MULTISHOT and IOSQE_BUFFER_SELECT
 * armed on its descriptor, posting a CQE (a provided buffer) each time
 * data arrives. Its CQEs are queued on the task in order, whether or not
 * the task waits for them, and handed out by net_recv_provided / net_recv
 * (io.c). See docs/runtime.md, "Receive".
 */
#ifndef CORING_NET_RECV_H
#define CORING_NET_RECV_H

#include "task.h"

#include <stdint.h>
#include <sys/types.h>

#define NET_RECV_INLINE 8 /* queued CQEs held without malloc */
#define NET_RECV_PAUSE 4  /* queued CQEs at which the recv is cancelled until they are read */

/* Where the multishot recv's SQE is. */
typedef enum net_recv_arm {
    NET_RECV_OFF = 0,  /* none armed (its last CQE, without IORING_CQE_F_MORE, came) */
    NET_RECV_ARMED,    /* armed */
    NET_RECV_STOPPING, /* cancelled by us (NET_RECV_PAUSE CQEs unread, or an error):
                          its last CQE is on its way */
} net_recv_arm;

/* A connection's multishot recv; lives on the connection task's stack. */
typedef struct net_recv_state {
    int fd; /* the connection's descriptor, or -1 once closed */
    net_recv_arm arm;
    uint64_t name; /* its user_data (NET_TAG_RECV, a name of the task's waiter) */
    net_cqe *q;    /* queued CQEs: inline, or malloc'd once more arrive */
    uint32_t cap, head, len;
    uint32_t off; /* bytes of the head CQE already handed out (net_recv) */
    int error;    /* -ENOMEM: a CQE could not be queued; later CQEs are dropped, and
                     it is returned (every time) once the CQEs queued before it are
                     read */
    net_cqe inline_q[NET_RECV_INLINE];
} net_recv_state;

/* Not an errno: the kernel has no multishot recv, use one recv per call. */
#define NET_RECV_SINGLE (-4096)

/* Register the NET_TAG_RECV handler on @loop. */
void net_recv_attach(net_loop *loop);

/* net_connection_start - start a connection task for accepted socket @fd
 * (net_hooks.on_connection runs in it). 0 or -ENOMEM (the caller closes
 * @fd). Loop thread. */
int net_connection_start(net_loop *loop, int fd);

/*
 * net_recv_multishot - a receive on @task's connection descriptor through
 * its multishot recv (armed here when it is not): the head CQE as a
 * provided buffer into @out, or (@out NULL) copied into @buf (at most @len
 * bytes). Returns bytes, 0 at EOF, -errno, or NET_RECV_SINGLE (use one
 * recv per call: the kernel lacks multishot recv).
 */
ssize_t net_recv_multishot(net_task *task, net_rbuf *out, char *buf, size_t len,
                           uint64_t timeout_ns);

/* Is @fd @task's connection, with CQEs queued, an error, or its recv armed
 * (a single-shot recv would race it)? */
bool net_recv_busy(const net_task *task, int fd);

/* net_recv_release - the connection is closing or its task ending: cancel
 * its armed recv, give back the buffers of its queued CQEs. */
void net_recv_release(net_task *task);

#endif
