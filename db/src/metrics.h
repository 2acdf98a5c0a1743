/*
 * Internal to db/: the pool's metrics (docs/metrics.md), registered once
 * for the process and written by each worker thread into its own block
 * (coring/core/metrics.h): the pool counts queries and their outcomes,
 * the driver round trips, resends, batches and lost connections.
 */
#ifndef CORING_DB_METRICS_H
#define CORING_DB_METRICS_H

#include "coring/core/metrics.h"

/* The families, registered by db_metrics_register (coring/db/db.h). */
extern struct db_metrics {
    cr_metric queries;     /* db_queries_total */
    cr_metric round_trips; /* db_round_trips_total: Syncs sent */
    cr_metric waiting;     /* db_queries_waiting */
    cr_metric lost;        /* db_connections_lost_total */
    cr_metric errors;      /* db_query_errors_total{kind}: db_metrics_error_kind */
    cr_metric duration;    /* db_query_duration_seconds, observed in ns */
    cr_metric reads;       /* db_reads_total{target}: DB_READ_REPLICA, DB_READ_PRIMARY */
    cr_metric replica_up;  /* db_replica_up */
    cr_metric resent;      /* db_queries_resent_total{reason}: db_resend_reason (retry.h) */
    cr_metric batches;     /* db_batches_total */
    cr_metric coalesced;   /* db_coalesced_queries_total */
    cr_metric cancels;     /* db_cancel_requests_total */
} db_metrics;

/* The series of db_reads_total. */
enum { DB_READ_REPLICA, DB_READ_PRIMARY };

/* The series of db_query_errors_total for db_run's error @err (0 or
 * -errno): timeout, connection (-ECONNRESET, -ENOTCONN), query
 * (-EREMOTEIO: the server refused it), other, unknown (-EINPROGRESS: a
 * write that may have committed). */
unsigned db_metrics_error_kind(int err);

#endif
