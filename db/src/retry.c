/*
 * The completion and retry policy: see retry.h.
 */
#include "retry.h"

#include <errno.h>
#include <string.h>

static db_verdict outcome(int error)
{
    return (db_verdict){.error = error};
}

static db_verdict again(db_resend_reason reason, bool alone)
{
    return (db_verdict){.resend = true, .reason = reason, .alone = alone};
}

bool db_retry_state(const char *sqlstate)
{
    return sqlstate && (strcmp(sqlstate, "40P01") == 0 || strcmp(sqlstate, "40001") == 0);
}

bool db_timeout_state(const char *sqlstate)
{
    return sqlstate && (strcmp(sqlstate, "57014") == 0 || strcmp(sqlstate, "55P03") == 0);
}

bool db_connection_lost(const char *sqlstate, bool connection_bad)
{
    return !sqlstate || !*sqlstate || strncmp(sqlstate, "08", 2) == 0 ||
           strncmp(sqlstate, "57P", 3) == 0 || connection_bad;
}

bool db_may_resend(const db_pending *p)
{
    return p->waiter && p->attempts < DB_MAX_ATTEMPTS;
}

bool db_outcome_unknown(const db_pending *p, bool sync_flushed)
{
    return p->writes && sync_flushed && !p->aborted && !p->rolled_back;
}

/* How @p is sent again, which did not take effect through no fault of
 * its own: skipped or rolled back for another query's error, or rolled
 * back by its group's failed commit (@sqlstate, the commit's). Whether it
 * may be is the caller's to ask (a batch's members each). */
static db_verdict undone(const db_pending *p, const char *sqlstate)
{
    if (!p->commit_failed)
        return again(DB_RESEND_GROUP, false);
    if (db_retry_state(sqlstate))
        return again(DB_RESEND_DEADLOCK, false);
    /* Which write is at fault is not known: each goes alone, where the
     * one at fault fails its own commit. */
    return again(DB_RESEND_COMMIT, p->writes);
}

db_verdict db_verdict_query(const db_pending *p, const char *sqlstate, bool connection_bad)
{
    if ((p->aborted && !p->result) || p->rolled_back)
        return db_may_resend(p) ? undone(p, sqlstate) : outcome(-EIO);
    if (!p->result)
        return outcome(-EIO);
    if (!p->failed)
        return outcome(0);
    if (db_connection_lost(sqlstate, connection_bad))
        return outcome(-ECONNRESET);
    if (db_retry_state(sqlstate) && db_may_resend(p))
        /* Its whole group was rolled back; the third send goes alone. */
        return again(DB_RESEND_DEADLOCK, false);
    if (db_timeout_state(sqlstate))
        /* Too slow: it alone fails, unless the cancel was another's. */
        return p->cancel_hit && db_may_resend(p) ? again(DB_RESEND_CANCEL, false)
                                                 : outcome(-ETIMEDOUT);
    return outcome(-EREMOTEIO);
}

bool db_batch_clean(const db_pending *b)
{
    return b->result && !b->failed && !b->aborted && !b->rolled_back;
}

db_verdict db_verdict_batch(const db_pending *b, const char *sqlstate, bool connection_bad,
                            bool fits)
{
    if (db_batch_clean(b))
        return fits ? outcome(0) : b->writes ? outcome(-EPROTO) : again(DB_RESEND_BATCH, false);
    if (b->failed && db_connection_lost(sqlstate, connection_bad))
        return outcome(-ECONNRESET);
    if (b->aborted || b->rolled_back)
        /* It did nothing wrong: its members share the next group, as
         * single queries do (or go alone after a failed commit). */
        return undone(b, sqlstate);
    if (!b->result)
        return outcome(-EIO);
    /* It failed itself: the one at fault is among its members, each goes
     * alone so that it cannot roll the others back a second time. */
    return again(db_retry_state(sqlstate) ? DB_RESEND_DEADLOCK : DB_RESEND_BATCH, true);
}

db_verdict db_verdict_member(const db_pending *m, db_verdict batch)
{
    if (batch.resend && !db_may_resend(m))
        return outcome(-EIO);
    return batch;
}
