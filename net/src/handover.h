/*
 * Internal to net/: the hand-over of the listeners to a successor process
 * over a UNIX socket (--handover-socket, --take-over; handover.c has the
 * protocol). Every function runs on the main thread. Not a public header.
 */
#ifndef CORING_NET_HANDOVER_H
#define CORING_NET_HANDOVER_H

#include <poll.h>
#include <stdbool.h>

/* Successor (--take-over): connect to the predecessor's hand-over socket
 * and receive its listening sockets: *@fds (malloc'd, the caller frees it
 * and owns the descriptors, close-on-exec) and their count *@n. The
 * connection stays open for net_handover_ready. Returns 0, or -errno
 * (logged): -ENOENT/-ECONNREFUSED when nothing serves the path, -EBUSY
 * when another take-over is under way, -EPROTO for anything but a coring
 * predecessor, -EAGAIN after 5 s without its answer, -ENAMETOOLONG. */
int net_handover_receive(int **fds, unsigned *n);

/* Once the listeners are in net_rt.listen_fds, before the workers start:
 * with --handover-socket keep a copy of each to hand over, and serve the
 * path (mode 0600, a stale socket file replaced), except for a successor,
 * which serves it from net_handover_ready on. Returns 0, or -errno
 * (logged): -EADDRINUSE when another process serves the path. */
int net_handover_open(void);

/* Successor, once it serves: tell the predecessor (which then drains) and
 * serve the path for the next successor. Nothing without --take-over. */
void net_handover_ready(void);

/* The descriptors the main thread's poll watches for the hand-over (at
 * most 2, written to @pfd); their count. */
int net_handover_pollfds(struct pollfd *pfd);

/* Handle @pfd's (@n of them, from net_handover_pollfds) events: send the
 * listeners to a successor that connects, read its READY. Returns true
 * once a successor serves: this process must drain. */
bool net_handover_event(const struct pollfd *pfd, int n);

/* Close the path's socket (unlinking the path unless a successor took it
 * over) and the kept listeners: before the drain, so that a listener's
 * last close is the worker's, which serves its accept queue first. */
void net_handover_close(void);

#endif
