/*
 * Internal to db/: the completion and retry policy. When a query's results
 * are complete (db_queue_feed), the driver asks here what becomes of it:
 * its result stands, it is sent again, or its waiter gets an error. Kept
 * free of libpq and of the runtime, like queue.h, so that every decision
 * is unit-tested alone (tests/unit/db/test_retry.c): the driver reads the
 * SQLSTATE and the connection's state out of libpq and passes them in.
 *
 * A Sync group is one implicit transaction (libpq docs, "Pipeline Mode"):
 * when one of its queries fails, the others are undone (rolled_back) or
 * skipped (aborted) through no fault of their own, and are sent again; so
 * is a query whose group PostgreSQL rolled back to end a deadlock or a
 * serialization failure (PostgreSQL docs, 13.5 "Serialization Failure
 * Handling"). A group that fails at its commit (a deferred constraint)
 * has its writes sent again each alone, so that the one at fault fails
 * in a transaction of its own and gets the error. A query is sent
 * DB_MAX_ATTEMPTS times at most, the last alone in its group (queue.h,
 * db_queue_next_alone).
 */
#ifndef CORING_DB_RETRY_H
#define CORING_DB_RETRY_H

#include "queue.h"

#include <stdbool.h>

#define DB_MAX_ATTEMPTS 3 /* sends of a query rolled back without its own fault */

/* Why a query is sent again: the series of db_queries_resent_total. */
typedef enum db_resend_reason {
    DB_RESEND_GROUP,    /* another query of its Sync group failed */
    DB_RESEND_DEADLOCK, /* its group was rolled back for 40P01 or 40001 */
    DB_RESEND_BATCH,    /* the batch it rode in failed, or did not fit */
    DB_RESEND_COMMIT,   /* its group failed to commit (a deferred constraint) */
    DB_RESEND_CANCEL,   /* a cancel request meant for another query hit it */
} db_resend_reason;

/* What becomes of a query whose results are complete. */
typedef struct db_verdict {
    bool resend; /* queue it again (its result dropped), for @reason */
    bool alone;  /* ... in a Sync group of its own (a member of a
                  * batch that failed: the one at fault is among them) */
    db_resend_reason reason;
    /* Not resent: 0, its result stands; or its waiter's error: -ECONNRESET
     * (the connection broke under it), -EREMOTEIO (the server refused it:
     * its error result stands), -ETIMEDOUT (the server cancelled it for
     * its statement_timeout or lock_timeout: its error result stands),
     * -EPROTO (a writing batch's result did not fit), -EIO (it did not
     * take effect and has no sends left, or no result came: any result it
     * holds is dropped). */
    int error;
} db_verdict;

/* Whether @sqlstate (NULL or "" when the error has none) asks the client
 * to run the transaction again: 40P01 (deadlock) or 40001 (serialization
 * failure). PostgreSQL docs, 13.5 and Appendix A. */
bool db_retry_state(const char *sqlstate);

/* Whether @sqlstate says the server cancelled the statement for taking
 * too long: 57014 (query_canceled: statement_timeout, or a cancel
 * request) or 55P03 (lock_not_available: lock_timeout). PostgreSQL docs,
 * Appendix A and 20.11 "Client Connection Defaults". */
bool db_timeout_state(const char *sqlstate);

/* Whether an error result says the database went away rather than the
 * query was at fault: no SQLSTATE (an error libpq made up: the connection
 * closed), class 08 (connection exception), 57P0x (shutdown, terminated
 * backend), or @connection_bad (PQstatus said CONNECTION_BAD). */
bool db_connection_lost(const char *sqlstate, bool connection_bad);

/* Whether @p may be sent again: its waiter still waits and it has been
 * sent fewer than DB_MAX_ATTEMPTS times. */
bool db_may_resend(const db_pending *p);

/*
 * db_outcome_unknown - whether @p, whose Sync group's result never came
 * (its connection broke, or its waiter gave up), may have committed: it
 * writes, a Sync after it reached the server (@sync_flushed:
 * db_queue_sync_flushed), which commits there, and nothing read says it
 * did not take effect (it was not skipped, nor rolled back). Its waiter
 * then gets -EINPROGRESS (the apps answer 504: a retry with the same
 * Idempotency-Key is safe), not -ECONNRESET or -ETIMEDOUT (503: it
 * certainly did not take effect).
 */
bool db_outcome_unknown(const db_pending *p, bool sync_flushed);

/*
 * db_verdict_query - the verdict on single query @p (not a batch), whose
 * results are complete: @sqlstate is its error result's SQLSTATE, or its
 * group's commit error's when p->commit_failed (read only then or when
 * p->failed), @connection_bad whether the connection is bad.
 * Skipped or rolled back for another query's error: sent again
 * (DB_RESEND_GROUP), else -EIO. Rolled back by its group's failed
 * commit: sent again, alone if it writes (DB_RESEND_COMMIT), or with the
 * rest for a retry state (DB_RESEND_DEADLOCK); else -EIO. Failed (its
 * own error, or its commit's as the group's only write): -ECONNRESET for
 * a connection error; sent again for a retry state (DB_RESEND_DEADLOCK);
 * for a timeout state, sent again when a cancel request meant for another
 * query may have hit it (p->cancel_hit: DB_RESEND_CANCEL), else
 * -ETIMEDOUT; else -EREMOTEIO. No result: -EIO. Otherwise 0.
 */
db_verdict db_verdict_query(const db_pending *p, const char *sqlstate, bool connection_bad);

/* Whether batch @b's result arrived and neither failed nor was undone: it
 * is then delivered if it fits the registration (batch.h, db_batch_fits). */
bool db_batch_clean(const db_pending *b);

/*
 * db_verdict_batch - the verdict on batch @b (its members'), whose results
 * are complete; @fits: its result fits the registration (db_batch_fits).
 * Clean and fitting: 0, each member gets its rows. Clean but not fitting:
 * -EPROTO for a writing batch (it committed: sending it again would write
 * twice), sent again for a reading one (DB_RESEND_BATCH). Failed for a
 * connection error: -ECONNRESET. No result, nothing undone: -EIO.
 * Skipped or rolled back for another query's error: sent again together
 * (DB_RESEND_GROUP); rolled back by its group's failed commit, as a
 * query (db_verdict_query). Failed itself (its own error, or its
 * commit's as the group's only write): each member sent again alone
 * (DB_RESEND_DEADLOCK for a retry state, else DB_RESEND_BATCH).
 */
db_verdict db_verdict_batch(const db_pending *b, const char *sqlstate, bool connection_bad,
                            bool fits);

/* The verdict on member @m of a batch whose verdict is @batch: the
 * batch's, but -EIO for a member that may not be sent again. */
db_verdict db_verdict_member(const db_pending *m, db_verdict batch);

#endif
