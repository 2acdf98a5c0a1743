/*
 * Internal to db/: a thread's connection to one PostgreSQL server, and
 * the set of its connections to that server (DATABASE_URL's, or
 * DATABASE_READ_URL's). Data only: connect.c opens a connection, driver.c
 * serves it and takes it up and down, route.c picks one for a query,
 * pool.c owns them all. Worker thread that owns the pool only.
 */
#ifndef CORING_DB_CONN_H
#define CORING_DB_CONN_H

#include "coring/db/db.h"
#include "coring/net/io.h"
#include "hosts.h"
#include "queue.h"
#include "resolve.h"

#include <stdbool.h>
#include <stdint.h>

struct pg_conn;
struct db_offload;
typedef struct db_set db_set;

typedef struct db_conn {
    const db_config *cfg;   /* the pool's */
    db_pending **free_list; /* the pool's free queries (pending.h) */
    db_set *set;            /* the primary's or the replica's */
    unsigned index;         /* for messages: thread index x connections + i */
    struct pg_conn *pg;     /* NULL while down */
    bool up;                /* open, statements prepared: takes queries */
    bool idle;              /* driver parked with nothing in flight: wake it */
    bool parked;            /* driver parked waiting for results: wake it to send more */
    bool awaiting;          /* driver parked on the socket for results: a waiter
                               that gives up wakes it (cancel.h) */
    uint64_t progress_at;   /* last result read, or the first query sent after idling */
    bool lost_logged;       /* the current outage was logged */
    net_task *driver;
    db_queue q;
    /* Cancelling (cancel.h): units in flight whose waiters gave up, the
     * target of the last cancel request, whether one is under way, and
     * the last query sent when one ended (those before it may have been
     * hit). */
    unsigned abandoned;
    uint64_t cancel_target;
    bool cancelling;
    uint64_t cancel_upto;
    struct db_offload *cancel_request; /* the one under way (offload.h) */
    db_resolve **resolving; /* per target: its name being resolved, kept across attempts */
    char error[512];        /* why the last attempt failed */
    /* The addresses of the last name resolved. */
    char addrs[DB_RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN];
} db_conn;

struct db_set {
    const char *conninfo;
    bool replica;     /* the read set: prepares only replica_ok statements */
    const char *what; /* "database" or "database replica", for messages */
    db_conn *conns;   /* cfg->connections of them, in the pool's array */
    unsigned up;      /* of them that take queries */
    db_hosts hosts;   /* the conninfo's hosts to resolve (hosts.h) */
};

#endif
