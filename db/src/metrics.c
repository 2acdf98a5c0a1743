/*
 * The pool's metric families and their labels (docs/metrics.md): see
 * metrics.h.
 */
#include "metrics.h"

#include "coring/db/db.h"
#include "retry.h"

#include <errno.h>

struct db_metrics db_metrics;

static const char *const error_kinds[] = {"timeout", "connection", "query", "other", "unknown"};
static const cr_metric_label error_labels[] = {{"kind", error_kinds, 5}};
/* Query durations, ns: 100 us to 10 s. */
static const uint64_t query_bounds[] = {100000,   250000,   500000,    1000000,   2500000,
                                        5000000,  10000000, 25000000,  50000000,  100000000,
                                        250000000, 500000000, 1000000000, 2500000000, 10000000000};
static const char *const read_targets[] = {[DB_READ_REPLICA] = "replica",
                                           [DB_READ_PRIMARY] = "primary"};
static const char *const resend_reasons[] = {[DB_RESEND_GROUP] = "group",
                                             [DB_RESEND_DEADLOCK] = "deadlock",
                                             [DB_RESEND_BATCH] = "batch",
                                             [DB_RESEND_COMMIT] = "commit",
                                             [DB_RESEND_CANCEL] = "cancel"};
static const cr_metric_label resend_labels[] = {{"reason", resend_reasons, 5}};
static const cr_metric_label read_labels[] = {{"target", read_targets, 2}};

int db_metrics_register(void)
{
    const cr_metric_def defs[] = {
        {.name = "db_queries_total", .help = "Queries asked of the database pool.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_round_trips_total",
         .help = "Pipeline Syncs sent: round trips; queries per round trip = queries / round trips.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_queries_waiting", .help = "Queries queued or in flight, waiting for their result.",
         .type = CR_METRIC_GAUGE},
        {.name = "db_connections_lost_total",
         .help = "Database connections lost (each is then re-opened with backoff).",
         .type = CR_METRIC_COUNTER},
        {.name = "db_query_errors_total", .help = "Queries that failed, by kind.",
         .type = CR_METRIC_COUNTER, .labels = error_labels, .num_labels = 1},
        {.name = "db_query_duration_seconds", .help = "Time from a query asked to its result.",
         .type = CR_METRIC_HISTOGRAM, .bounds = query_bounds,
         .num_bounds = sizeof(query_bounds) / sizeof(query_bounds[0]), .scale = 1e-9},
        {.name = "db_reads_total",
         .help = "Queries of statements that do not write, by the server asked: the replica "
                 "(replica_ok ones while it is up) or the primary (the others, and all "
                 "without DATABASE_READ_URL or while the replica is down).",
         .type = CR_METRIC_COUNTER, .labels = read_labels, .num_labels = 1},
        {.name = "db_replica_up",
         .help = "Worker threads with a DATABASE_READ_URL connection up (reads go there).",
         .type = CR_METRIC_GAUGE},
        {.name = "db_queries_resent_total",
         .help = "Queries sent again after PostgreSQL rolled them back without their own "
                 "fault: another query of their Sync group failed (group), or their group "
                 "was chosen to end a deadlock or a serialization failure (deadlock); "
                 "one by one after the batch they were coalesced into failed (batch); "
                 "writes each alone, after their group failed to commit (commit); or after "
                 "a cancel request meant for another query interrupted them (cancel).",
         .type = CR_METRIC_COUNTER, .labels = resend_labels, .num_labels = 1},
        {.name = "db_batches_total",
         .help = "Queries of a statement's batch form sent, each standing for several "
                 "coalesced queries.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_coalesced_queries_total",
         .help = "Queries sent inside a batch; per batch = coalesced / batches.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_cancel_requests_total",
         .help = "Cancel requests sent to PostgreSQL for a statement, or a commit, that no "
                 "one waited for any more (its query timed out, or its wait was cancelled).",
         .type = CR_METRIC_COUNTER},
    };
    cr_metric *out[] = {&db_metrics.queries,    &db_metrics.round_trips, &db_metrics.waiting,
                        &db_metrics.lost,       &db_metrics.errors,      &db_metrics.duration,
                        &db_metrics.reads,      &db_metrics.replica_up,  &db_metrics.resent,
                        &db_metrics.batches,    &db_metrics.coalesced,   &db_metrics.cancels};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST)
            return err;
    }
    return 0;
}

unsigned db_metrics_error_kind(int err)
{
    switch (err) {
    case -ETIMEDOUT: return 0;
    case -ECONNRESET: case -ENOTCONN: return 1;
    case -EREMOTEIO: return 2;
    case -EINPROGRESS: return 4;
    default: return 3;
    }
}
