/*
 * Internal to db/: cancelling on the server what no one waits for. A
 * query's waiter gives up when its time runs out (db_config's
 * query_timeout_ns) or its wait is cancelled (net_task_cancel: shutdown's
 * drain deadline, a request's own deadline); its statement may still run
 * on the server, holding a lock, or wait in a commit. The driver then
 * sends a cancel request for it (PQcancel, libpq docs "Canceling Queries
 * in Progress"), on a helper thread (offload.h), since PQcancel connects
 * and blocks; its end comes back to the driver's thread through the ring,
 * with no lock. The server ends that statement with 57014, which fails
 * its Sync group: the other queries of the group are sent again as for
 * any failed query (retry.h), and the connection stays up.
 *
 * A cancel request interrupts whatever the backend runs when it lands
 * (there is no naming a statement): it is sent only when what runs now
 * is the abandoned query (db_queue_cancel_target), and a query that a
 * request may have hit, meant for another, is sent again (cancel_hit,
 * DB_RESEND_CANCEL). One request per connection at a time. Worker thread
 * that owns the connection only.
 */
#ifndef CORING_DB_CANCEL_H
#define CORING_DB_CANCEL_H

#include "conn.h"

/*
 * db_abandon - the waiter of @p, a query of @c's in flight (sent, or a
 * member of a batch sent or queued), gives up: its result will be freed
 * when it comes, and it is cancelled on the server if it still runs when
 * the driver looks (woken for it). The waiter's own coroutine.
 */
void db_abandon(db_conn *c, db_pending *p);

/*
 * db_cancel_check - on @c's driver, before it parks while queries are
 * abandoned (c->abandoned): when what the server runs now is abandoned
 * and no cancel request is under way, send one (db_cancel_requests_total),
 * once per target. A request that cannot be sent (no memory, no thread)
 * is logged; the driver's stall rule drops the connection if the server
 * stays silent.
 */
void db_cancel_check(db_conn *c);

/* db_cancel_may_have_hit - whether a cancel request of @c's may have
 * interrupted @p: one is under way, or @p was sent before the last one
 * ended. */
bool db_cancel_may_have_hit(const db_conn *c, const db_pending *p);

/* db_cancel_forget - @c went down: its abandoned queries are gone. */
void db_cancel_forget(db_conn *c);

#endif
