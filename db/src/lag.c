/*
 * The read replica's replication lag (coring/db/db.h, "Replication lag"):
 * each worker thread asks, once a second, the primary for its WAL
 * position and the replica for the position it has replayed and how long
 * ago its last replayed commit was made, on its own connections. The
 * figures go to /metrics, per thread, and decide where the thread's
 * replica_ok reads go: past --replica-max-lag, to the primary.
 *
 * Seconds: 0 when the replica has replayed all the WAL the primary wrote
 * (by the two positions: a standby started again behind an idle primary
 * does not lag) or all it received, else
 * the age of the last transaction it replayed (pg_last_xact_replay_timestamp),
 * as postgres_exporter's pg_replication_lag and PostgreSQL's docs
 * ("Hot Standby", monitoring) measure it. An overestimate right after an
 * idle spell (the last replayed commit is old while the next one is being
 * applied) and growing while no stream arrives (no WAL received: nothing
 * compares equal), which is the safe side for a bound. Bytes: the primary's
 * current WAL position less the replica's replay position, measured a
 * moment apart (never below 0).
 */
#include "lag.h"

#include "coring/core/clock.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "coring/core/metrics.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define DB_LAG_INTERVAL_NS CR_NS_PER_S
#define DB_LAG_TIMEOUT_NS CR_NS_PER_S

static const db_statement primary_def = {
    .sql = "SELECT pg_current_wal_lsn()::text",
};
/* Replica's: in recovery (false: the primary answered), replayed position,
 * lag in ms. */
static const db_statement replica_def = {
    .sql = "SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn()::text, ''), "
           "coalesce((CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
           "ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000 END)::int8, "
           "0)",
    .replica_ok = true,
};
static const db_stmt *primary_stmt, *replica_stmt;

static struct {
    cr_metric seconds; /* db_replica_lag_seconds{thread}, stored in ms */
    cr_metric bytes;   /* db_replica_lag_bytes{thread} */
    cr_metric too_far; /* db_replica_lag_exceeded: threads reading the primary for it */
} lag_metrics;

/* This thread's last measure, ms: -1 when unknown. */
static _Thread_local int64_t tl_lag_ms = -1;
static _Thread_local bool tl_too_far;
static _Thread_local uint64_t tl_max_lag_ns;
static _Thread_local db_lag_probe_fn tl_probe; /* the pool's (db_lag_thread_start) */

int db_lag_register(void)
{
    if (primary_stmt)
        return 0;
    const cr_metric_def defs[] = {
        {.name = "db_replica_lag_seconds",
         .help = "The read replica's replay lag as this worker thread last measured it: 0 when "
                 "it has replayed all the primary wrote or all it received, else the age of "
                 "its last replayed transaction; -1 when unknown (no replica connection, or the probe failed).",
         .type = CR_METRIC_GAUGE, .per_thread = true, .scale = 1e-3},
        {.name = "db_replica_lag_bytes",
         .help = "WAL bytes the primary has written that the read replica has not replayed, as "
                 "this worker thread last measured it; -1 when unknown.",
         .type = CR_METRIC_GAUGE, .per_thread = true},
        {.name = "db_replica_lag_exceeded",
         .help = "Worker threads whose reads go to the primary because the replica lags past "
                 "--replica-max-lag.",
         .type = CR_METRIC_GAUGE},
    };
    cr_metric *out[] = {&lag_metrics.seconds, &lag_metrics.bytes, &lag_metrics.too_far};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST)
            return err;
    }
    int err = db_register(&primary_def, &primary_stmt);
    if (err == 0)
        err = db_register(&replica_def, &replica_stmt);
    return err;
}

int db_lsn_parse(const char *s, size_t len, uint64_t *out)
{
    uint64_t part[2] = {0, 0};
    size_t k = 0, digits = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '/' && k == 0 && digits) {
            k = 1;
            digits = 0;
            continue;
        }
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0 || ++digits > 8)
            return -EINVAL;
        part[k] = part[k] * 16 + (uint64_t)v;
    }
    if (k != 1 || !digits)
        return -EINVAL;
    *out = part[0] << 32 | part[1];
    return 0;
}

bool db_lag_exceeds(int64_t lag_ms, uint64_t max_ns)
{
    return max_ns && lag_ms >= 0 && (uint64_t)lag_ms * CR_NS_PER_MS > max_ns;
}

int64_t db_lag_ms(int64_t replay_age_ms, int64_t lag_bytes)
{
    if (lag_bytes == 0)
        return 0;
    return replay_age_ms < 0 ? -1 : replay_age_ms;
}

/* Publish this thread's measure (lag_ms, lag_bytes; -1 unknown) and decide. */
static void publish(int64_t lag_ms, int64_t lag_bytes)
{
    bool was = tl_too_far;
    tl_lag_ms = lag_ms;
    tl_too_far = db_lag_exceeds(lag_ms, tl_max_lag_ns);
    cr_metric_set(&lag_metrics.seconds, 0, (uint64_t)(lag_ms < 0 ? -1000 : lag_ms));
    cr_metric_set(&lag_metrics.bytes, 0, (uint64_t)lag_bytes);
    cr_metric_set(&lag_metrics.too_far, 0, tl_too_far);
    if (tl_too_far != was)
        cr_log_info("database replica: lags %.3f s, %s --replica-max-lag %.3f s: reads go to the %s",
                    (double)lag_ms / 1e3, tl_too_far ? "past" : "back within",
                    (double)tl_max_lag_ns / 1e9, tl_too_far ? "primary" : "replica");
}

/* One measure: the primary's position, then the replica's. */
static int measure(void)
{
    db_result r;
    uint64_t primary_lsn = 0;
    bool have_primary = false;
    const char *s;
    size_t len;
    int err = tl_probe(false, primary_stmt, &r, DB_LAG_TIMEOUT_NS);
    if (err == 0 && db_result_string(&r, 0, 0, &s, &len) == 0 &&
        db_lsn_parse(s, len, &primary_lsn) == 0)
        have_primary = true;
    db_result_clear(&r);
    if (err == -ECANCELED)
        return err;
    err = tl_probe(true, replica_stmt, &r, DB_LAG_TIMEOUT_NS);
    bool recovering = false;
    int64_t lag_ms = -1, lag_bytes = -1;
    uint64_t replayed;
    if (err == 0 && db_result_bool(&r, 0, 0, &recovering) == 0 && recovering &&
        db_result_int64(&r, 0, 2, &lag_ms) == 0) {
        if (have_primary && db_result_string(&r, 0, 1, &s, &len) == 0 &&
            db_lsn_parse(s, len, &replayed) == 0)
            lag_bytes = primary_lsn > replayed ? (int64_t)(primary_lsn - replayed) : 0;
        if (lag_ms < 0)
            lag_ms = 0; /* a replay timestamp ahead of the replica's clock */
        lag_ms = db_lag_ms(lag_ms, lag_bytes);
    } else {
        lag_ms = -1;
    }
    db_result_clear(&r);
    if (err == -ECANCELED)
        return err;
    publish(lag_ms, lag_bytes);
    return 0;
}

static void probe_main(void *arg)
{
    (void)arg;
    publish(-1, -1);
    /* Until shutdown cancels it (a wait ended early otherwise, -EINTR,
     * only shortens one interval). */
    for (;;) {
        if (net_sleep(DB_LAG_INTERVAL_NS) == -ECANCELED || measure() == -ECANCELED)
            break;
    }
}

int db_lag_thread_start(const db_config *cfg, db_lag_probe_fn probe)
{
    if (!replica_stmt || !cfg->read_conninfo || !*cfg->read_conninfo)
        return 0;
    tl_probe = probe;
    tl_max_lag_ns = cfg->replica_max_lag_ns;
    tl_too_far = false;
    return net_spawn_service(probe_main, NULL);
}

bool db_lag_too_far(void)
{
    return tl_too_far;
}

void db_lag_describe(char *buf, size_t len)
{
    snprintf(buf, len, "replica lags %.3f s, past --replica-max-lag %.3f s",
             (double)tl_lag_ms / 1e3, (double)tl_max_lag_ns / 1e9);
}
