/*
 * Routing (db/src/route.c): which server a query goes to, which
 * connection of it takes the query, and when a query the replica failed
 * is asked of the primary. Connections are set up by hand: routing reads
 * whether each is up and its queue's counts, nothing else.
 */
#include "db/src/route.h"

#include <criterion/criterion.h>
#include <errno.h>

Test(route, replica_ok_reads_go_to_the_replica_while_it_is_up)
{
    db_statement read = {.sql = "SELECT 1", .replica_ok = true};
    cr_expect(db_route_to_replica(&read, 1));
    cr_expect_not(db_route_to_replica(&read, 0), "none up, or no replica: the primary");
    db_statement plain = {.sql = "SELECT 1"};
    cr_expect_not(db_route_to_replica(&plain, 2), "not replica_ok: reads its own writes");
    db_statement write = {.sql = "INSERT", .replica_ok = true, .writes = true};
    cr_expect_not(db_route_to_replica(&write, 2), "a hot standby refuses writes");
}

Test(route, the_replica_hands_a_query_to_the_primary_when_it_fails_as_a_server)
{
    cr_expect(db_route_to_primary_after(-ECONNRESET, ""));
    cr_expect(db_route_to_primary_after(-ENOTCONN, ""));
    cr_expect(db_route_to_primary_after(-ETIMEDOUT, ""), "a standby holding it during replay");
    cr_expect(db_route_to_primary_after(-EREMOTEIO, "40001"), "cancelled for recovery");
    cr_expect_not(db_route_to_primary_after(-EREMOTEIO, "22P02"), "the query's own error");
    cr_expect_not(db_route_to_primary_after(-EREMOTEIO, NULL));
    cr_expect_not(db_route_to_primary_after(0, ""));
    cr_expect_not(db_route_to_primary_after(-ECANCELED, ""), "the request went away");
    cr_expect_not(db_route_to_primary_after(-EIO, ""));
}

static db_conn conns[3];
static db_set set = {.conns = conns};

static void setup(void)
{
    for (int i = 0; i < 3; i++)
        conns[i] = (db_conn){.up = true};
}

TestSuite(route_connection, .init = setup);

Test(route_connection, none_up_is_none)
{
    for (int i = 0; i < 3; i++)
        conns[i].up = false;
    cr_expect_null(db_route_connection(&set, 3, DB_ROUTING_SPREAD));
    cr_expect_null(db_route_connection(&set, 0, DB_ROUTING_FILL));
}

Test(route_connection, a_connection_down_never_takes_a_query)
{
    conns[0].up = false; /* idle, but down */
    conns[1].q.sent = 5;
    conns[2].q.sent = 7;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_SPREAD), &conns[1]);
    conns[1].up = false;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_SPREAD), &conns[2]);
}

Test(route_connection, spread_takes_the_least_loaded_the_first_of_equals)
{
    conns[0].q.sent = 2;
    conns[1].q.queued = 1;
    conns[2].q.queued = 1;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_SPREAD), &conns[1]);
    cr_expect_eq(db_route_connection(&set, 1, DB_ROUTING_SPREAD), &conns[0],
                 "only the first @n are the set's");
}

Test(route_connection, fill_keeps_the_first_until_it_is_deep)
{
    conns[0].q.sent = DB_FILL_DEPTH - 1;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_FILL), &conns[0]);
    conns[0].q.sent = DB_FILL_DEPTH;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_FILL), &conns[1]);
}

Test(route_connection, pack_takes_an_idle_connection_first)
{
    conns[0].q = (db_queue){.sent = 1, .syncs = 1};
    conns[1].q = (db_queue){.queued = 4, .sent = 4, .syncs = 1};
    conns[2].q = (db_queue){0};
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_PACK), &conns[2]);
    conns[2].q.closing = 1;
    conns[2].q.syncs = 1;
    cr_expect_eq(db_route_connection(&set, 3, DB_ROUTING_PACK), &conns[1],
                 "else the group being formed this turn");
}
