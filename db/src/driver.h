/*
 * Internal to db/: the driver, one coroutine per connection. Each turn it
 * sends what requests queued (coalesced where a statement has a batch
 * form, grouped under Syncs by db_queue_send_step), flushes, parks on the
 * socket, reads the results in order (db_queue_feed) and completes each
 * query by the retry policy (retry.h): its result to its waiter, sent
 * again, or an error. It takes the connection up and down, and reopens it
 * with backoff after it breaks.
 */
#ifndef CORING_DB_DRIVER_H
#define CORING_DB_DRIVER_H

#include "conn.h"

/*
 * db_driver_start - open @c at start-up, blocking (the loop is not
 * serving yet, so the connections are ready before the first request),
 * then start its driver coroutine (net_spawn), which serves it until it
 * breaks and reopens it, with a backoff from cfg->backoff_min_ns doubling
 * to backoff_max_ns while it cannot connect, until the driver is
 * cancelled at shutdown. A failed first open is left to the driver. Returns 0 or net_spawn's
 * -errno. Worker thread, before it serves (db_thread_init).
 */
int db_driver_start(db_conn *c);

#endif
