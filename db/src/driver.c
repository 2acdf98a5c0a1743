/*
 * Each connection's driver coroutine: see driver.h; what is queued and
 * how it is grouped, queue.h; what a completed query becomes, retry.h.
 *
 * Driver turn: send every queued query, reads and writes alike, under one
 * Sync at the end (one write, one round trip), PQflush, then park on the
 * socket: for POLLIN always (results, or the server closing an idle
 * connection), for POLLOUT while libpq has unsent bytes. A request queued
 * while the driver is parked wakes it (net_unpark), which runs at the
 * loop's next turn, after the other requests of this turn have queued
 * theirs: concurrent requests share a round trip. Up to DB_MAX_SYNCS
 * Sync groups may be in flight on a connection; a query that arrives
 * while that many are out rides in the next group, sent as soon as the
 * oldest group's results are read. A group in which a query fails is
 * rolled back by the server: its other queries are sent again, in the
 * next group, and alone in a group the third time (queue.h, retry.h).
 */
#include "driver.h"

#include "batch.h"
#include "cancel.h"
#include "coalesce.h"
#include "connect.h"
#include "coring/core/clock.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "metrics.h"
#include "pending.h"
#include "ready.h"
#include "retry.h"
#include "statement.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#define DB_MAX_BATCH 1024 /* queries sent per driver turn */

/* --- up and down ----------------------------------------------------------- */

static void conn_up(db_conn *c)
{
    if (c->lost_logged)
        cr_log_info("%s connection %u: connected again", c->set->what, c->index);
    c->lost_logged = false;
    c->up = true;
    c->set->up++;
    db_ready_publish_set(c->set);
}

/* The error of @p, whose connection broke before its outcome came:
 * -EINPROGRESS when it may have committed (retry.h), else -ECONNRESET. */
static int lost(const db_conn *c, const db_pending *p)
{
    return db_outcome_unknown(p, db_queue_sync_flushed(&c->q, p)) ? -EINPROGRESS : -ECONNRESET;
}

/* Drop the connection: every query on it fails with @err (-ECONNRESET or
 * -EINPROGRESS each, by what it may have done, unless -ECANCELED). */
static void conn_down(db_conn *c, int err)
{
    if (c->up) {
        c->up = false;
        c->set->up--;
        db_ready_publish_set(c->set);
    }
    c->idle = c->parked = c->awaiting = false;
    db_cancel_forget(c);
    if (c->pg) {
        if (err != -ECANCELED) {
            db_conn_note_error(c, c->pg, err); /* why it is down, for db_ready() */
            cr_metric_inc(&db_metrics.lost, 0);
        }
        if (err != -ECANCELED && !c->lost_logged) {
            const char *msg = PQerrorMessage(c->pg);
            size_t n = strcspn(msg, "\n");
            if (n)
                cr_log_warn("%s connection %u lost (%.*s): reconnecting", c->set->what,
                            c->index, (int)n, msg);
            else
                cr_log_warn("%s connection %u lost (%s): reconnecting", c->set->what, c->index,
                            cr_strerror(err));
            c->lost_logged = true;
        }
        PQfinish(c->pg);
        c->pg = NULL;
    }
    db_pending *p = db_queue_take_all(&c->q);
    if (c->q.commit_error)
        PQclear(c->q.commit_error);
    c->q.commit_error = NULL;
    while (p) {
        db_pending *next = p->next;
        p->next = NULL;
        if (p->result)
            PQclear(p->result);
        p->result = NULL;
        p->error = err == -ECANCELED ? -ECANCELED : lost(c, p);
        db_pending_done(c->free_list, p);
        p = next;
    }
}

/* --- reading results ------------------------------------------------------- */

static db_event classify(const PGresult *r)
{
    if (!r)
        return DB_EVENT_END;
    switch (PQresultStatus(r)) {
    case PGRES_PIPELINE_SYNC:
        return DB_EVENT_SYNC;
    case PGRES_PIPELINE_ABORTED:
        return DB_EVENT_ABORTED;
    case PGRES_FATAL_ERROR:
    case PGRES_NONFATAL_ERROR:
    case PGRES_BAD_RESPONSE:
        return DB_EVENT_ERROR;
    default:
        return DB_EVENT_RESULT;
    }
}

/* The SQLSTATE of @p's error result, NULL when it has none; of its
 * group's commit error (@commit) when that failed. */
static const char *sqlstate(const db_pending *p, const char *commit)
{
    if (p->commit_failed)
        return commit;
    return p->result ? PQresultErrorField(p->result, PG_DIAG_SQLSTATE) : NULL;
}

static bool connection_bad(const db_conn *c)
{
    return PQstatus(c->pg) == CONNECTION_BAD;
}

/* Queue @p again, its result dropped, for @reason. */
static void resend(db_conn *c, db_pending *p, db_resend_reason reason)
{
    if (p->result)
        PQclear(p->result);
    p->result = NULL;
    cr_metric_inc(&db_metrics.resent, reason);
    db_queue_push(&c->q, p);
}

/* A batch's results are complete: each member gets its rows (a writing
 * batch's by position, a reading one's by key: batch.h), is sent again
 * or fails, by the batch's verdict (retry.h); then the batch goes. A
 * result that does not fit the registration refuses the batch form for
 * the process (logged once). */
static void complete_batch(db_conn *c, db_pending *b, const char *commit)
{
    if (b->abandoned)
        c->abandoned--;
    const db_stmt *stmt = b->members->stmt;
    const PGresult *r = b->result;
    bool fits = r && db_batch_fits(r, stmt->def.batch_key_column,
                                   stmt->oids[stmt->def.batch_key_param],
                                   b->writes ? (int)b->nmembers : -1);
    if (db_batch_clean(b) && !fits && db_stmt_refuse_batch(stmt))
        /* The registration is wrong (checked when the connection opened,
         * but the schema may have changed since, or a trigger skips
         * rows): no more batches. */
        cr_log_error("%s: the batch form of statement %s (%.60s%s) returned no row set, no "
                     "key column %d of its key parameter's type%s: %s, and its queries are "
                     "sent one by one from now on",
                     c->set->what, stmt->name, DB_SQL_HEAD(stmt), stmt->def.batch_key_column,
                     b->writes ? ", or not one row per member (it writes)" : "",
                     b->writes ? "this batch's queries fail" : "this batch's are sent again");
    db_verdict v = db_verdict_batch(b, sqlstate(b, commit), connection_bad(c), fits);
    if (v.error == -ECONNRESET)
        v.error = lost(c, b);
    int position = 0;
    for (db_pending *m = b->members, *next; m; m = next, position++) {
        next = m->next;
        m->next = NULL;
        db_verdict mv = db_verdict_member(m, v);
        if (mv.resend) {
            resend(c, m, mv.reason);
            m->alone = mv.alone;
            continue;
        }
        m->error = mv.error;
        int k = stmt->def.batch_key_param;
        if (!mv.error && m->waiter &&
            !(m->result = b->writes ? db_batch_row(r, position)
                                    : db_batch_rows(r, stmt->def.batch_key_column,
                                                    m->values[k], m->lengths[k])))
            m->error = -ENOMEM;
        db_pending_done(c->free_list, m);
    }
    b->members = NULL;
    db_pending_free(c->free_list, b);
}

/* A query's results are complete: hand it over, send it again or fail
 * it, by its verdict (retry.h). @commit: the SQLSTATE of its group's
 * commit error, when that failed. */
static void complete(db_conn *c, db_pending *p, const char *commit)
{
    if (p->members) {
        complete_batch(c, p, commit);
        return;
    }
    if (p->abandoned)
        c->abandoned--;
    p->cancel_hit = db_cancel_may_have_hit(c, p);
    db_verdict v = db_verdict_query(p, p->failed || p->commit_failed ? sqlstate(p, commit) : NULL,
                                    connection_bad(c));
    if (v.resend) {
        resend(c, p, v.reason);
        p->alone = v.alone;
        return;
    }
    if (v.error == -ECONNRESET)
        v.error = lost(c, p);
    if (v.error == -EIO && p->result) {
        /* Undone, or skipped: its result must not stand. */
        PQclear(p->result);
        p->result = NULL;
    }
    p->error = v.error;
    db_pending_done(c->free_list, p);
}

/* Complete the queries of list @done (linked by next). @commit: the
 * error of their Sync group's commit, when it failed (ours to free):
 * the group's only write, at fault, gets it as its result (queue.h). */
static void complete_group(db_conn *c, PGresult *commit, db_pending *done)
{
    char state[8] = "";
    if (commit) {
        const char *s = PQresultErrorField(commit, PG_DIAG_SQLSTATE);
        snprintf(state, sizeof(state), "%s", s ? s : "");
    }
    while (done) {
        db_pending *next = done->next;
        done->next = NULL;
        if (commit && done->commit_failed && done->failed) {
            if (done->result)
                PQclear(done->result);
            done->result = commit;
            commit = NULL;
        }
        complete(c, done, state);
        done = next;
    }
    if (commit)
        PQclear(commit);
}

/* Read every result that is available. 0, or -EPROTO when they do not
 * match what was sent. */
static int read_results(db_conn *c)
{
    unsigned bound = 4 * (c->q.sent + c->q.syncs) + 8; /* never spin on a broken connection */
    while (db_queue_busy(&c->q) && bound-- && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        db_event ev = classify(r);
        db_pending *done;
        bool ok = db_queue_feed(&c->q, ev, r, &done);
        if (r && (!ok || (ev != DB_EVENT_RESULT && ev != DB_EVENT_ERROR)))
            PQclear(r);
        if (!ok) {
            /* A connection that broke makes libpq invent results: no news. */
            if (PQstatus(c->pg) != CONNECTION_BAD)
                cr_log_error("%s connection %u: unexpected %s result: dropping it",
                             c->set->what, c->index,
                             r ? PQresStatus(PQresultStatus(r)) : "end-of-query");
            return -EPROTO;
        }
        c->progress_at = cr_clock_now_ns();
        complete_group(c, ev == DB_EVENT_SYNC ? db_queue_take_commit_error(&c->q) : NULL, done);
    }
    return 0;
}

/* --- sending --------------------------------------------------------------- */

/* Send a Sync: PQsendPipelineSync (libpq 17) leaves the flush to the
 * driver's PQflush; PQpipelineSync (libpq 14-16) tries one itself. */
static int send_sync(db_conn *c)
{
#ifdef LIBPQ_HAS_SEND_PIPELINE_SYNC
    if (!PQsendPipelineSync(c->pg))
        return -EIO;
#else
    if (!PQpipelineSync(c->pg))
        return -EIO;
#endif
    cr_metric_inc(&db_metrics.round_trips, 0);
    db_queue_mark_sync(&c->q);
    return 0;
}

/* Send what is queued, grouped under Syncs by db_queue_send_step (queue.h);
 * the queries of a statement with a batch form coalesced first, a writing
 * batch that left a query out for its key ending its group (coalesce.h).
 * 0 or -EIO. */
static int send_queued(db_conn *c)
{
    if (c->q.queued && !db_queue_busy(&c->q))
        c->progress_at = cr_clock_now_ns();
    db_send_turn turn = {.max_queries = DB_MAX_BATCH, .max_syncs = DB_MAX_SYNCS};
    for (;;) {
        switch (db_queue_send_step(&c->q, &turn)) {
        case DB_SEND_STOP:
            return 0;
        case DB_SEND_SYNC:
            if (send_sync(c) < 0)
                return -EIO;
            break;
        case DB_SEND_QUERY: {
            if (c->cfg->coalesce && db_coalesce(&c->q, c->free_list))
                turn.end_group = true;
            db_pending *p = db_queue_send_next(&c->q);
            if (p->sql ? !PQsendQueryParams(c->pg, p->sql, p->nparams, p->stmt->oids, p->values,
                                            p->lengths, p->formats, p->result_format)
                       : !PQsendQueryPrepared(c->pg, p->name, p->nparams, p->values, p->lengths,
                                              p->formats, p->result_format))
                return -EIO;
            break;
        }
        }
    }
}

/* --- the serve loop -------------------------------------------------------- */

/* How long a connection whose results are awaited may stay silent before
 * it is dropped: the query timeout, by when the server's own timeouts
 * (statement_timeout, lock_timeout: connect.h) have ended a slow
 * statement and its waiter has given up, which sends a cancel request
 * (cancel.h); then half as long again for that request to take effect. */
static uint64_t stall_ns(const db_config *cfg)
{
    return cfg->query_timeout_ns + cfg->query_timeout_ns / 2;
}

/* Serve queries on an open connection until it breaks (-errno) or the
 * driver is cancelled (-ECANCELED). */
static int conn_serve(db_conn *c)
{
    const db_config *cfg = c->cfg;
    for (;;) {
        if (send_queued(c) < 0)
            return -EIO;
        int f = PQflush(c->pg);
        if (f < 0)
            return -EIO;
        if (f == 0)
            db_queue_mark_flushed(&c->q); /* the Syncs sent reached the server */
        bool busy = db_queue_busy(&c->q);
        if (busy && c->q.queued && c->q.syncs < DB_MAX_SYNCS)
            continue; /* batch limit reached: keep sending */
        /* Sending can read: when the socket's send buffer is full libpq
         * reads the input into its own buffer (pqSendSome), and the socket
         * is then no longer readable. Parse what libpq holds first. */
        if (busy && !PQisBusy(c->pg)) {
            int err = read_results(c);
            if (err < 0)
                return err;
            continue;
        }
        /* A query whose waiter gave up may still run on the server:
         * cancel it there (cancel.h). */
        if (c->abandoned)
            db_cancel_check(c);
        /* No result for the stall time while some are awaited, however
         * often new queries woke the driver: the server did not end a slow
         * statement itself (statement_timeout, lock_timeout), nor when
         * asked (a cancel request): the connection is stalled. */
        uint64_t now = cr_clock_now_ns(), wait = 0;
        bool late = false;
        if (busy && cfg->query_timeout_ns) { /* 0: no timeout, wait for the socket */
            uint64_t deadline = c->progress_at + stall_ns(cfg);
            late = deadline <= now;
            /* Past it: one last look at the socket, not woken by queries. */
            wait = late ? CR_NS_PER_MS : deadline - now;
        }
        c->idle = !busy;
        c->parked = busy && !late && c->q.syncs < DB_MAX_SYNCS;
        c->awaiting = busy;
        net_task_set_idle(c->idle);
        int ev = net_park(PQsocket(c->pg), POLLIN | (f ? POLLOUT : 0), wait);
        c->idle = c->parked = c->awaiting = false;
        net_task_set_idle(false);
        if (ev == 0)
            continue; /* woken: a query was queued, or a waiter gave up */
        if (ev == -ECANCELED)
            return -ECANCELED;
        if (ev == -ETIMEDOUT) {
            if (!c->lost_logged)
                cr_log_warn("%s connection %u: no answer for %.1f s, a cancel request "
                            "included (queued %u, sent %u, syncs %u, closing %u, libpq busy %d)",
                            c->set->what, c->index, (double)stall_ns(cfg) / 1e9, c->q.queued,
                            c->q.sent, c->q.syncs, c->q.closing, PQisBusy(c->pg));
            return -ETIMEDOUT;
        }
        if (ev < 0)
            return ev;
        if (ev & (POLLIN | POLLERR | POLLHUP)) {
            bool alive = PQconsumeInput(c->pg) == 1;
            int err = read_results(c); /* even when it broke: results read before stand */
            if (err < 0)
                return err;
            if (!alive || PQstatus(c->pg) == CONNECTION_BAD)
                return -ECONNRESET;
        }
    }
}

static void driver_main(void *arg)
{
    db_conn *c = arg;
    const db_config *cfg = c->cfg;
    /* Requests still in flight at shutdown need their connection: the
     * driver ends only after them. */
    net_task_set_service(true);
    c->driver = net_task_current();
    uint64_t backoff = 0;
    for (;;) {
        if (!c->pg) {
            net_task_set_idle(true);
            if (backoff && net_park(-1, 0, backoff) == -ECANCELED)
                break;
            int err = db_conn_open(c, false);
            if (err == -ECANCELED)
                break;
            if (err < 0) {
                c->lost_logged = true; /* log the outage once, and its end */
                backoff = backoff ? backoff * 2 : cfg->backoff_min_ns;
                if (backoff > cfg->backoff_max_ns)
                    backoff = cfg->backoff_max_ns;
                continue;
            }
            conn_up(c);
        }
        uint64_t since = cr_clock_now_ns();
        int err = conn_serve(c);
        conn_down(c, err);
        if (err == -ECANCELED)
            break;
        /* Reconnect at once after a long healthy run; keep backing off
         * when connections keep breaking right after they open. */
        if (cr_clock_now_ns() - since > cfg->backoff_max_ns)
            backoff = 0;
        else
            backoff = backoff ? backoff : cfg->backoff_min_ns;
    }
    conn_down(c, -ECANCELED);
    c->driver = NULL;
}

int db_driver_start(db_conn *c)
{
    /* Start-up may block: have the connections ready before serving. */
    if (db_conn_open(c, true) == 0)
        conn_up(c);
    else
        c->lost_logged = true;
    return net_spawn_service(driver_main, c);
}
