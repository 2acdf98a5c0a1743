/*
 * Internal to db/: routing, the choices db_run makes for a query before it
 * queues it (docs/database.md, "Which connection a query takes"): which
 * server (the replica for replica_ok reads while it is up, else the
 * primary), which connection of that server (--db-routing, ranked by
 * db_queue_prefer), and whether a query the replica failed is asked
 * again of the primary. Pure: reads the connections' state only, no
 * libpq, no runtime (tests/unit/db/test_route.c).
 */
#ifndef CORING_DB_ROUTE_H
#define CORING_DB_ROUTE_H

#include "conn.h"

#include <stdbool.h>

/* db_route_to_replica - whether a query of @def goes to the replica: it
 * is replica_ok and does not write, and @replica_up (the replica's
 * connections up; 0 without DATABASE_READ_URL) is not 0. */
bool db_route_to_replica(const db_statement *def, unsigned replica_up);

/* db_route_connection - the connection of @set's @n that a new query
 * takes under @routing: of those up, the one db_queue_prefer ranks first
 * (with DB_MAX_SYNCS), the first of equals; NULL when none is up. */
db_conn *db_route_connection(db_set *set, unsigned n, db_routing routing);

/* db_route_to_primary_after - whether a query that the replica answered
 * with @err is asked again of the primary: the replica's connection broke
 * under it or none is up (-ECONNRESET, -ENOTCONN), it stayed silent or
 * stalled (-ETIMEDOUT: a hot standby holding a query while it replays a
 * lock), or it cancelled the query for a conflict with recovery
 * (-EREMOTEIO with @sqlstate 40001; PostgreSQL docs, "Hot Standby",
 * "Handling Query Conflicts"). @sqlstate: the error result's, or NULL. */
bool db_route_to_primary_after(int err, const char *sqlstate);

#endif
