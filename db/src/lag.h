/*
 * Internal to db/: the read replica's replication lag, measured by each
 * worker thread on its own connections, and the routing decision it
 * feeds: past db_config.replica_max_lag_ns a thread sends its replica_ok
 * reads to the primary until the replica is back within the bound (see
 * "Replication lag" in coring/db/db.h). Per thread, like the pool: no
 * state shared between cores but the metrics' blocks.
 */
#ifndef CORING_DB_LAG_H
#define CORING_DB_LAG_H

#include "coring/db/db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How the probe runs a query (the pool's, given by db_thread_init, so
 * that this file calls into the pool without naming it): @stmt (no
 * parameters) on this thread's replica connections (@replica) or primary
 * ones, with no fallback to the other server and no query metrics, within
 * @timeout_ns. The returns of db_run. Worker coroutine. */
typedef int (*db_lag_probe_fn)(bool replica, const db_stmt *stmt, db_result *out,
                               uint64_t timeout_ns);

/* db_lag_thread_start - start this worker thread's probe (a service
 * coroutine that asks both servers every DB_LAG_INTERVAL_NS through
 * @probe), when db_lag_register ran and @cfg has a read_conninfo; nothing
 * otherwise. Worker thread, from db_thread_init once its drivers run. 0
 * or -errno. */
int db_lag_thread_start(const db_config *cfg, db_lag_probe_fn probe);

/* db_lag_too_far - whether this thread's replica lags past
 * cfg->replica_max_lag_ns at its last measure (false while unmeasured or
 * without a bound). Worker thread; never blocks. */
bool db_lag_too_far(void);

/* db_lag_describe - "replica lags S s, past the bound of B s" into @buf
 * (@len bytes), for db_reading_replica's reason. Worker thread. */
void db_lag_describe(char *buf, size_t len);

/* db_lag_exceeds - whether a measured lag of @lag_ms (-1: unknown) is
 * past the bound @max_ns (0: none): an unknown lag never is. Pure. */
bool db_lag_exceeds(int64_t lag_ms, uint64_t max_ns);

/* db_lag_ms - the replica's lag, ms, from the age of its last replayed
 * transaction (@replay_age_ms: 0 when it replayed all it received, -1
 * unknown) and the WAL bytes the primary wrote that it has not replayed
 * (@lag_bytes, -1 unknown): 0 when it replayed everything the primary
 * wrote, whatever that transaction's age (an idle primary writes none: a
 * standby just started again would read as lagging by the time since the
 * last write), else the age. Pure. */
int64_t db_lag_ms(int64_t replay_age_ms, int64_t lag_bytes);

/* db_lsn_parse - the WAL position in PostgreSQL's text form of pg_lsn
 * ("16/B374D848": two hex numbers, the high and low 32 bits) at the @len
 * bytes at @s, into *@out. Returns 0 or -EINVAL. Pure. */
int db_lsn_parse(const char *s, size_t len, uint64_t *out);

#endif
