/*
 * Internal to net/: notifications to the service manager (sd_notify(3):
 * READY, STOPPING, STATUS, WATCHDOG) and the per-worker heartbeat behind
 * WATCHDOG=1. Each is a no-op when $NOTIFY_SOCKET is unset. Not a public
 * header.
 */
#ifndef CORING_NET_NOTIFY_H
#define CORING_NET_NOTIFY_H

#include "loop.h"

#include <stdint.h>

/* READY=1 and a STATUS= line naming @host, @port, @threads. Main thread,
 * once every worker serves. */
void net_notify_ready(const char *host, uint16_t port, unsigned threads);

/* STOPPING=1 and STATUS=draining: @why. Main thread, as the drain begins. */
void net_notify_stopping(const char *why);

/* STATUS=@status. Main thread. */
void net_notify_status(const char *status);

/* Read WATCHDOG_USEC (sd_watchdog_enabled(3)) and make the workers'
 * heartbeats. Main thread, net_rt.threads set, before the workers start.
 * 0 or -ENOMEM. */
int net_watchdog_setup(void);

/* On worker @loop: stamp its heartbeat at every tick when the watchdog is
 * on, and arm the CORING_TEST_STALL_RING test hook when it names @loop. */
void net_watchdog_attach(net_loop *loop);

/* Main thread, from its poll loops (at least every 200 ms): WATCHDOG=1
 * when half the interval has passed since the last and every worker's
 * heartbeat is fresh. */
void net_watchdog_kick(void);

/* Free the heartbeats, once the workers are joined. */
void net_watchdog_free(void);

#endif
