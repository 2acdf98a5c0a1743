/*
 * The per-thread connection pool: see coring/db/db.h for the contract.
 * Each worker thread opens its connections (db_thread_init), one driver
 * coroutine each (driver.h), to the primary and, with DATABASE_READ_URL,
 * to a replica. db_run encodes a query's parameters, routes it (route.h:
 * which server, which connection), queues it on that connection, wakes
 * the driver if it sleeps, and parks until the driver hands it its result
 * or its time runs out. db_ready and db_reading_replica answer from the
 * connections' state (ready.h for the other threads').
 */
#include "coring/db/db.h"

#include "cancel.h"
#include "codec.h"
#include "conn.h"
#include "coring/core/clock.h"
#include "coring/core/coro.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"
#include "driver.h"
#include "hosts.h"
#include "lag.h"
#include "metrics.h"
#include "pending.h"
#include "ready.h"
#include "resolve.h"
#include "retry.h"
#include "route.h"
#include "sqlcomment.h"
#include "statement.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct db_pool {
    const db_config *cfg;
    db_conn *conns;     /* the primary's, then the replica's */
    db_set sets[2];     /* [0] the primary (DATABASE_URL), [1] the replica */
    unsigned nsets;     /* 2 with cfg->read_conninfo */
    db_pending *free_list;
    /* Per registered statement (db_stmt.index), the size of its recent
     * results' values in bytes (a moving average over about 8):
     * the weight DB_ROUTING_FILL gives its next query. NULL when it could
     * not be allocated (every query then weighs as a lookup). */
    uint32_t *result_bytes;
    size_t nstatements;
} db_pool;

#define PRIMARY(pool) (&(pool)->sets[0])

static _Thread_local db_pool *tl_pool;

static int probe(bool replica, const db_stmt *stmt, db_result *out, uint64_t timeout_ns);

db_config db_config_default(void)
{
    return (db_config){
        .connections = 2,
        .query_timeout_ns = 5 * CR_NS_PER_S,
        .connect_timeout_ns = 5 * CR_NS_PER_S,
        .backoff_min_ns = 50 * CR_NS_PER_MS,
        .backoff_max_ns = 2 * CR_NS_PER_S,
        .coalesce = true,
    };
}

/* --- opening and closing ----------------------------------------------------- */

int db_thread_init(const db_config *cfg)
{
    if (!cfg || !cfg->conninfo || !cfg->connections || net_thread_index() < 0)
        return -EINVAL;
    db_statements_close();
    db_pool *pool = calloc(1, sizeof(*pool));
    if (!pool)
        return -ENOMEM;
    pool->cfg = cfg;
    db_statements(&pool->nstatements);
    pool->result_bytes = calloc(pool->nstatements ? pool->nstatements : 1, sizeof(uint32_t));
    pool->nsets = cfg->read_conninfo && *cfg->read_conninfo ? 2 : 1;
    pool->conns = calloc((size_t)cfg->connections * pool->nsets, sizeof(db_conn));
    if (!pool->conns) {
        free(pool->result_bytes);
        free(pool);
        return -ENOMEM;
    }
    for (unsigned k = 0; k < pool->nsets; k++) {
        db_set *set = &pool->sets[k];
        set->replica = k == 1;
        set->conninfo = k ? cfg->read_conninfo : cfg->conninfo;
        set->what = k ? "database replica" : "database";
        set->conns = pool->conns + (size_t)k * cfg->connections;
        if (db_hosts_plan(&set->hosts, set->conninfo) < 0) {
            db_hosts_free(&pool->sets[0].hosts);
            free(pool->conns);
            free(pool->result_bytes);
            free(pool);
            return -ENOMEM;
        }
    }
    tl_pool = pool;
    db_ready_publish(true, 0);
    for (unsigned k = 0; k < pool->nsets; k++) {
        db_set *set = &pool->sets[k];
        db_ready_publish_set(set);
        for (unsigned i = 0; i < cfg->connections; i++) {
            db_conn *c = &set->conns[i];
            c->cfg = cfg;
            c->free_list = &pool->free_list;
            c->set = set;
            c->index = (unsigned)net_thread_index() * cfg->connections + i;
            if (set->hosts.targets &&
                !(c->resolving = calloc(set->hosts.ntargets, sizeof(*c->resolving))))
                return -ENOMEM;
            int err = db_driver_start(c);
            if (err < 0) {
                cr_log_error("database: cannot start a connection driver: %s", cr_strerror(err));
                return err;
            }
        }
    }
    return db_lag_thread_start(cfg, probe);
}

void db_thread_fini(void)
{
    db_pool *pool = tl_pool;
    if (!pool)
        return;
    for (unsigned i = 0; i < pool->cfg->connections * pool->nsets; i++) {
        db_conn *c = &pool->conns[i];
        if (c->driver)
            continue; /* still running (the loop failed): leave it be */
        if (c->pg)
            PQfinish(c->pg);
        for (size_t k = 0; c->resolving && k < c->set->hosts.ntargets; k++)
            db_resolve_release(c->resolving[k]);
        free(c->resolving);
    }
    while (pool->free_list) {
        db_pending *p = pool->free_list;
        pool->free_list = p->next;
        free(p);
    }
    for (unsigned k = 0; k < pool->nsets; k++)
        db_hosts_free(&pool->sets[k].hosts);
    free(pool->conns);
    free(pool->result_bytes);
    db_ready_publish(false, 0);
    free(pool);
    tl_pool = NULL;
}

/* --- readiness --------------------------------------------------------------- */

bool db_available(void)
{
    return tl_pool && PRIMARY(tl_pool)->up > 0;
}

/* The first connection error of @set's connections, or a stock phrase. */
static const char *set_error(const db_set *set, unsigned connections)
{
    for (unsigned i = 0; i < connections; i++)
        if (set->conns[i].error[0])
            return set->conns[i].error;
    return "no connection up";
}

bool db_reading_replica(char *why, size_t len)
{
    db_pool *pool = tl_pool;
    if (len)
        *why = '\0';
    if (!pool || pool->nsets < 2) {
        snprintf(why, len, "no DATABASE_READ_URL");
        return false;
    }
    if (pool->sets[1].up > 0 && !db_lag_too_far())
        return true;
    if (pool->sets[1].up > 0)
        db_lag_describe(why, len);
    else
        snprintf(why, len, "replica unreachable: %s",
                 set_error(&pool->sets[1], pool->cfg->connections));
    return false;
}

bool db_ready(char *why, size_t len)
{
    db_pool *pool = tl_pool;
    if (len)
        *why = '\0';
    if (!pool) {
        snprintf(why, len, "no database pool on this thread");
        return false;
    }
    if (PRIMARY(pool)->up == 0) {
        /* This thread's own connections say why. */
        snprintf(why, len, "unreachable: %s", set_error(PRIMARY(pool), pool->cfg->connections));
        return false;
    }
    unsigned threads = net_thread_count(), down = db_ready_threads_down(threads);
    if (down) {
        snprintf(why, len, "unreachable from %u of %u worker threads (reconnecting)", down,
                 threads);
        return false;
    }
    return true;
}

/* --- running a query --------------------------------------------------------- */

/* The weight DB_ROUTING_FILL gives a query of @stmt: its recent results'
 * size in DB_FILL_UNIT_BYTES (0: a lookup's). */
static unsigned result_weight(const db_pool *pool, const db_stmt *stmt)
{
    if (!pool->result_bytes || stmt->index >= pool->nstatements)
        return 0;
    return pool->result_bytes[stmt->index] / DB_FILL_UNIT_BYTES;
}

/* Fold a result of @stmt into its moving average (weight 1/8): the bytes
 * of its values (PQgetlength), not of the PGresult, whose first block
 * (~3 KB) a one-row lookup fills no more than a 50-row list; a result
 * counts at most 1 MiB. */
static void learn_result_size(db_pool *pool, const db_stmt *stmt, const db_result *res)
{
    if (!pool->result_bytes || stmt->index >= pool->nstatements || !res->pg)
        return;
    size_t size = 0;
    int rows = PQntuples(res->pg), cols = PQnfields(res->pg);
    for (int r = 0; r < rows && size < (1u << 20); r++)
        for (int f = 0; f < cols; f++)
            size += (size_t)PQgetlength(res->pg, r, f);
    uint32_t now = size > (1u << 20) ? 1u << 20 : (uint32_t)size;
    uint32_t *avg = &pool->result_bytes[stmt->index];
    *avg = *avg - *avg / 8 + now / 8;
}

/* db_run on @set's connections, once its parameters are encoded; the
 * result within @timeout_ns or -ETIMEDOUT. */
static int query(db_pool *pool, db_set *set, net_task *self, const db_pending *ask,
                 db_result *out, uint64_t timeout_ns)
{
    db_conn *c = db_route_connection(set, pool->cfg->connections, pool->cfg->routing);
    if (!c)
        return -ENOTCONN;
    db_pending *p = db_pending_alloc(&pool->free_list);
    if (!p)
        return -ENOMEM;
    cr_metric_inc(&db_metrics.waiting, 0);
    p->stmt = ask->stmt;
    p->name = ask->name;
    p->sql = ask->sql;
    p->nparams = ask->nparams;
    p->values = ask->values;
    p->lengths = ask->lengths;
    p->formats = ask->formats;
    p->result_format = ask->result_format;
    p->writes = ask->writes;
    p->weight = ask->weight;
    p->waiter = self;
    db_queue_push(&c->q, p);
    if (c->idle || c->parked) {
        /* Idle, or waiting for results with room for another Sync group:
         * it sends this (and what else this turn queues) at the next turn. */
        c->idle = c->parked = false;
        net_unpark(c->driver);
    }
    int res = net_park(-1, 0, timeout_ns);
    cr_metric_add(&db_metrics.waiting, 0, (uint64_t)-1);
    if (p->state != DB_PENDING_DONE) {
        /* Timed out or cancelled: unhook from the connection. A query
         * still queued is dropped; one in flight is left to the driver,
         * which cancels it on the server if it still runs there and frees
         * it when its result arrives. A write whose Sync went out may have
         * committed, whether its wait timed out or was cancelled (the drain
         * deadline, a request's deadline): its outcome is unknown. */
        int err = res == -ECANCELED ? -ECANCELED : -ETIMEDOUT;
        if (p->state == DB_PENDING_QUEUED && db_queue_unqueue(&c->q, p)) {
            db_pending_free(&pool->free_list, p);
            return err;
        }
        if (db_outcome_unknown(p, db_queue_sync_flushed(&c->q, p)))
            err = -EINPROGRESS;
        db_abandon(c, p); /* cancelled on the server if it still runs */
        return err;
    }
    int err = p->error;
    out->pg = p->result;
    p->result = NULL;
    db_pending_free(&pool->free_list, p);
    return err;
}

/* The lag probe's query (lag.h, db_lag_probe_fn): @stmt on this thread's
 * replica (@replica) or primary connections only, no metrics. */
static int probe(bool replica, const db_stmt *stmt, db_result *out, uint64_t timeout_ns)
{
    out->pg = NULL;
    db_pool *pool = tl_pool;
    net_task *self = net_task_current();
    if (!pool || !self || (replica && pool->nsets < 2))
        return -EPERM;
    db_pending ask = {.stmt = stmt, .name = stmt->name, .result_format = 1};
    return query(pool, replica ? &pool->sets[1] : PRIMARY(pool), self, &ask, out, timeout_ns);
}

/* @stmt's SQL with @trace's comment, in the calling coroutine's arena (it
 * lives as long as the request); NULL without memory (sent untraced). */
static const char *traced_sql(const db_stmt *stmt, const cr_trace_context *trace)
{
    size_t len = strlen(stmt->def.sql);
    char *sql = cr_arena_alloc(cr_coro_arena(cr_coro_current()), db_sqlcomment_size(len));
    return sql ? db_sqlcomment_write(sql, stmt->def.sql, len, trace) : NULL;
}

int db_run(const db_stmt *stmt, const db_param *params, size_t count, db_result *out)
{
    out->pg = NULL;
    db_pool *pool = tl_pool;
    net_task *self = net_task_current();
    if (!pool || !self)
        return -EPERM;
    if (!stmt || count != (size_t)stmt->nparams || (count && !params))
        return -EINVAL;
    /* The encoded values live in this frame, which outlives the query's
     * sends: a query is (re-)sent only while its waiter waits here. */
    char bytes[DB_MAX_PARAMS][8];
    const char *values[DB_MAX_PARAMS];
    int lengths[DB_MAX_PARAMS], formats[DB_MAX_PARAMS];
    for (size_t i = 0; i < count; i++) {
        int err = db_encode_param(&params[i], stmt->def.types[i], bytes[i], &values[i],
                                  &lengths[i]);
        if (err < 0)
            return err;
        formats[i] = 1;
    }
    db_pending ask = {.stmt = stmt, .name = stmt->name, .nparams = (int)count, .values = values,
                      .lengths = lengths, .formats = formats, .result_format = 1,
                      .writes = stmt->def.writes, .weight = result_weight(pool, stmt)};
    /* With db_config.trace_sql, a sampled trace (coring/core/log.h) names
     * itself in a comment on the query (sqlcomment.h); else this test. */
    const cr_trace_context *trace = pool->cfg->trace_sql ? cr_log_trace() : NULL;
    if (trace && (trace->flags & CR_TRACE_SAMPLED))
        ask.sql = traced_sql(stmt, trace);
    uint64_t start = cr_clock_now_ns();
    cr_metric_inc(&db_metrics.queries, 0);
    /* Routing (route.h): a replica_ok read goes to the replica while one
     * of its connections is up, else to the primary at once. The replica
     * gets half of the query's time; a query it fails for the server's
     * sake, not the query's, is asked again, once, of the primary, with
     * the other half. Everything else goes to the primary, with all of it. */
    db_set *set = PRIMARY(pool);
    if (db_route_to_replica(&stmt->def, pool->nsets > 1 && !db_lag_too_far() ? pool->sets[1].up : 0))
        set = &pool->sets[1];
    uint64_t budget = pool->cfg->query_timeout_ns;
    int err = query(pool, set, self, &ask, out, set->replica ? budget / 2 : budget);
    if (set->replica && db_route_to_primary_after(err, db_result_sqlstate(out))) {
        db_result_clear(out);
        set = PRIMARY(pool);
        err = query(pool, set, self, &ask, out, budget - budget / 2);
    }
    if (err == 0 && pool->cfg->routing == DB_ROUTING_FILL)
        learn_result_size(pool, stmt, out); /* only fill reads the weights */
    if (!stmt->def.writes)
        cr_metric_inc(&db_metrics.reads, set->replica ? DB_READ_REPLICA : DB_READ_PRIMARY);
    cr_metric_observe(&db_metrics.duration, 0, cr_clock_now_ns() - start);
    if (err < 0)
        cr_metric_inc(&db_metrics.errors, db_metrics_error_kind(err));
    return err;
}
