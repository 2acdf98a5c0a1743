/*
 * Internal to net/: the listeners. One SO_REUSEPORT listener per worker,
 * bound by the main thread before the workers start; on each worker a
 * bounded accept (at most NET_TURN_ACCEPTS connections between two loop
 * turns), the connection limit, and the accept queue served (not reset)
 * when the drain closes the listener. Not a public header.
 */
#ifndef CORING_NET_LISTENER_H
#define CORING_NET_LISTENER_H

#include "loop.h"

#include <stdint.h>

#include <sys/socket.h>

/* The socket address of numeric IPv4/IPv6 @host (inet_pton(3)) and @port
 * in *@ss, its length in *@len. 0, or -EINVAL for anything else. */
int net_host_address(const char *host, uint16_t port, struct sockaddr_storage *ss, socklen_t *len);

/* Fill net_rt.listen_fds: the listeners a predecessor hands over
 * (--take-over) or systemd passes (activation.c), else one SO_REUSEPORT
 * listener per worker, bound here; the port in *@port_out. Main thread,
 * before the workers. Returns 0 or -errno (logged). */
int net_bind_listeners(uint16_t *port_out);

/* Attach worker @loop's listener @fd (owned from now on); registers the
 * accept's handlers and its turn, which arms the accepts. 0 or -ENOMEM
 * (@fd is then still the caller's). */
int net_listener_attach(net_loop *loop, int fd);

/* The drain begins: stop accepting. The connections the kernel already
 * queued are accepted and served (NET_TURN_ACCEPTS a turn), then the
 * listener is closed. */
void net_listener_stop(net_loop *loop);

/* Close the listener if still open, and free the part. */
void net_listener_detach(net_loop *loop);

/* net_listener_open - the listener is not closed yet: while draining, its
 * queue is still to accept (the drain waits for that too). */
bool net_listener_open(const net_loop *loop);

#endif
