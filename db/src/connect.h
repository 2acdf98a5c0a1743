/*
 * Internal to db/: connect and prepare. Opening a connection must not
 * block the worker thread (a DNS outage or a silent address would stall
 * every request of its core), so the name is resolved off the ring
 * (resolve.h, hosts.h) and libpq's connection is polled through the ring;
 * then the connection enters non-blocking pipeline mode and prepares the
 * registered statements (statement.h), checking each batch form against
 * its statement (batch.h) before any query rides in it.
 */
#ifndef CORING_DB_CONNECT_H
#define CORING_DB_CONNECT_H

#include "conn.h"

#include <stdbool.h>

/*
 * db_conn_open - open @c (down, c->pg NULL) within the connect timeout.
 * A conninfo that names hosts to resolve is tried host by host, in its
 * order, as libpq would: each name resolved off the ring, each of its
 * addresses given to libpq as `hostaddr=` beside `host=`
 * (PQconnectStartParams), so that libpq itself never calls getaddrinfo.
 * As libpq's connect_timeout, the connect timeout applies to each host's
 * lookup and to each address separately: a lookup that hangs, or an
 * address that drops packets, does not keep the hosts after it from being
 * tried. Any other conninfo (socket paths, numeric addresses, an explicit
 * hostaddr) goes to PQconnectStart as it is. The connection then has
 * TCP_NODELAY (a batch is written at once), is non-blocking, in pipeline
 * mode, with its session's statement_timeout and lock_timeout set to nine
 * tenths of the time its queries' waiters wait (the query timeout, half
 * of it on a replica: the server ends a slow statement just before its
 * waiter would give up) and every statement the set serves prepared.
 *
 * @blocking: wait with poll(2) (start-up, before the loop runs) rather
 * than through the ring (from the driver's coroutine). Returns 0 with
 * c->pg set, or -errno with c->error saying why: -ECONNREFUSED,
 * -ETIMEDOUT, -EHOSTUNREACH, -ENOMEM, -EIO (pipeline mode, a prepare or a
 * batch form refused), -ECANCELED (the driver was cancelled). Logs a
 * failure unless c->lost_logged. Source: libpq docs, "Database Connection
 * Control Functions" (PQconnectStartParams, PQconnectPoll), "Pipeline
 * Mode".
 */
int db_conn_open(db_conn *c, bool blocking);

/* db_conn_note_error - note why @pg (NULL: no connection) failed in
 * c->error: the first line of libpq's message, else @err's (-errno). */
void db_conn_note_error(db_conn *c, struct pg_conn *pg, int err);

#endif
