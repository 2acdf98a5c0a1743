/*
 * Which server and which connection a query takes: see route.h.
 */
#include "route.h"

#include <errno.h>
#include <string.h>

bool db_route_to_replica(const db_statement *def, unsigned replica_up)
{
    return def->replica_ok && !def->writes && replica_up > 0;
}

db_conn *db_route_connection(db_set *set, unsigned n, db_routing routing)
{
    db_conn *c = NULL;
    for (unsigned i = 0; i < n; i++) {
        db_conn *k = &set->conns[i];
        if (k->up && (!c || db_queue_prefer(&k->q, &c->q, routing, DB_MAX_SYNCS)))
            c = k;
    }
    return c;
}

bool db_route_to_primary_after(int err, const char *sqlstate)
{
    return err == -ECONNRESET || err == -ENOTCONN || err == -ETIMEDOUT ||
           (err == -EREMOTEIO && sqlstate && strcmp(sqlstate, "40001") == 0);
}
