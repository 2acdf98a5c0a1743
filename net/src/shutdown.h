/*
 * Internal to net/: shutdown and signals. The main thread's side (signals,
 * the drain grace, telling the workers to drain and to leave) and each
 * worker's drain (its part of the loop). Not a public header.
 */
#ifndef CORING_NET_SHUTDOWN_H
#define CORING_NET_SHUTDOWN_H

#include "loop.h"

#include <signal.h>

/* Attach the drain to worker @loop: its control commands (NET_CTRL_SHUTDOWN,
 * NET_CTRL_DEADLINE) and its turn. 0 or -ENOMEM. */
int net_drain_attach(net_loop *loop);
void net_drain_detach(net_loop *loop);

/* Install the SIGINT/SIGTERM handlers (and ignore SIGPIPE, SIGHUP), then
 * block both in the calling thread, the old mask in *@old_mask (the
 * workers it starts inherit the block). Returns 0 or -errno. */
int net_signals_install(sigset_t *old_mask);

/* On the main thread: wait for SIGINT/SIGTERM (and the drain grace), or a
 * worker that stopped on its own. Returns 0, or -EIO for the latter. */
int net_signals_wait(void);

/* Drain every worker and let them leave their loops (exits on a second
 * signal or a drain stuck 5 s past its deadline). Main thread. */
void net_shut_down(void);

/* The default SIGINT/SIGTERM actions back, the signal pipe closed. */
void net_signals_restore(void);

#endif
