/*
 * Internal to net/: connections. A connection is an accepted socket and
 * its multishot recv (recv.h), in memory of the runtime's that outlives its
 * tasks: net_hooks.on_connection runs in a task for it, and may leave it
 * idle between requests (net_connection_idle), holding no coroutine and no
 * stack. Its recv stays armed; the first CQE that brings something to
 * serve starts a new task for it, and one that only ends it (EOF, a reset,
 * its idle deadline, the drain) closes it here, with no task at all. See
 * docs/runtime.md, "A connection's life". Not a public header.
 */
#ifndef CORING_NET_CONN_H
#define CORING_NET_CONN_H

#include "recv.h"
#include "wheel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One connection. What an idle one costs is this, its slot in the loop's
 * table (wait.h) and the owner's state (docs/runtime.md). */
typedef struct net_conn {
    net_recv_state recv;          /* its descriptor and multishot recv */
    net_task *task;               /* the task running on_connection for it, or NULL
                                     while idle */
    void *state;                  /* the owner's, from net_connection_idle */
    uint64_t idle_timeout_ns;     /* from net_connection_idle: its next idle deadline */
    net_timer timer;              /* while idle: that deadline, in the connections' wheel */
    struct net_conn *prev, *next; /* while idle: in the thread's list of idle ones */
    bool keep;                    /* net_connection_idle said yes: when on_connection
                                     returns, the connection goes idle */
    bool closing;                 /* idle, its recv cancelled by its deadline or the
                                     drain: its last CQE closes it, unless data came
                                     first (then it is served) */
} net_conn;

/* Attach the connections part to @loop: the NET_TAG_RECV completions and
 * the idle deadlines on the tick. 0 or -ENOMEM. */
int net_conns_attach(net_loop *loop);
/* Free it (no connection is left). */
void net_conns_detach(net_loop *loop);

/* net_connection_start - a connection for accepted socket @fd: a task runs
 * net_hooks.on_connection for it at once. 0 or -ENOMEM (the caller closes
 * @fd). Loop thread. */
int net_connection_start(net_loop *loop, int fd);

/* net_conns_drain - the drain ends @loop's idle connections: their recv is
 * cancelled, and its last CQE closes them, unless a request comes first
 * (it is served, with the connection then closing). @all false: those
 * with input waiting (poll(2)) are left to be served; true (the drain's
 * deadline): every one. */
void net_conns_drain(net_loop *loop, bool all);

/* net_conns_idle - @loop's idle connections now. */
unsigned net_conns_idle(const net_loop *loop);

#endif
