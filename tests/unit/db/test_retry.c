/*
 * The completion and retry policy (db/src/retry.c): what becomes of a
 * query, or of a batch and its members, whose results are complete, for
 * each outcome PostgreSQL's pipeline mode can give. Queries are set up by
 * hand; results are stand-in pointers that the policy never reads.
 */
#include "db/src/retry.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>

#define RES ((struct pg_result *)(uintptr_t)0x1000)
#define WAITER ((void *)(uintptr_t)0x2000)

/* A query sent @attempts times whose waiter still waits. */
static db_pending sent(unsigned attempts)
{
    return (db_pending){.attempts = attempts, .waiter = WAITER};
}

static void expect_error(db_verdict v, int error, const char *what)
{
    cr_expect_not(v.resend, "%s: not sent again", what);
    cr_expect_eq(v.error, error, "%s: error %d, want %d", what, v.error, error);
}

static void expect_resend(db_verdict v, db_resend_reason reason, bool alone, const char *what)
{
    cr_expect(v.resend, "%s: sent again", what);
    cr_expect_eq(v.reason, reason, "%s: reason %d, want %d", what, v.reason, reason);
    cr_expect_eq(v.alone, alone, "%s: alone %d", what, v.alone);
}

Test(retry, retry_states_are_deadlock_and_serialization_failure)
{
    cr_expect(db_retry_state("40P01"));
    cr_expect(db_retry_state("40001"));
    cr_expect_not(db_retry_state("40002"), "integrity constraint violation at commit");
    cr_expect_not(db_retry_state("23505"));
    cr_expect_not(db_retry_state(""));
    cr_expect_not(db_retry_state(NULL));
}

Test(retry, a_lost_connection_is_told_from_a_query_error)
{
    cr_expect(db_connection_lost(NULL, false), "no SQLSTATE: libpq made the error up");
    cr_expect(db_connection_lost("", false));
    cr_expect(db_connection_lost("08006", false), "class 08: connection exception");
    cr_expect(db_connection_lost("57P01", false), "admin shutdown");
    cr_expect(db_connection_lost("57P03", false), "cannot connect now");
    cr_expect(db_connection_lost("23505", true), "the connection is bad");
    cr_expect_not(db_connection_lost("23505", false));
    cr_expect_not(db_connection_lost("57014", false), "query canceled is the query's");
    cr_expect_not(db_connection_lost("40P01", false));
}

Test(retry, a_query_may_be_sent_again_while_waited_for_and_under_three_sends)
{
    db_pending p = sent(2);
    cr_expect(db_may_resend(&p));
    p.attempts = DB_MAX_ATTEMPTS;
    cr_expect_not(db_may_resend(&p));
    p = sent(1);
    p.waiter = NULL;
    cr_expect_not(db_may_resend(&p), "its waiter gave up");
}

Test(retry, a_query_result_stands)
{
    db_pending p = sent(1);
    p.result = RES;
    expect_error(db_verdict_query(&p, NULL, false), 0, "a result");
    p.result = NULL;
    expect_error(db_verdict_query(&p, NULL, false), -EIO, "no result");
}

Test(retry, a_query_undone_by_another_is_sent_again_while_it_may)
{
    db_pending p = sent(1);
    p.aborted = true;
    expect_resend(db_verdict_query(&p, NULL, false), DB_RESEND_GROUP, false, "skipped");
    p = sent(2);
    p.rolled_back = true;
    p.result = RES;
    expect_resend(db_verdict_query(&p, NULL, false), DB_RESEND_GROUP, false, "rolled back");
    p.attempts = DB_MAX_ATTEMPTS;
    expect_error(db_verdict_query(&p, NULL, false), -EIO, "rolled back, no sends left");
    p = sent(1);
    p.aborted = true;
    p.waiter = NULL;
    expect_error(db_verdict_query(&p, NULL, false), -EIO, "skipped, no waiter");
}

Test(retry, a_failed_query_keeps_its_error_unless_asked_to_retry)
{
    db_pending p = sent(1);
    p.result = RES;
    p.failed = true;
    expect_error(db_verdict_query(&p, "23505", false), -EREMOTEIO, "unique violation");
    expect_error(db_verdict_query(&p, "08006", false), -ECONNRESET, "connection failure");
    expect_error(db_verdict_query(&p, NULL, false), -ECONNRESET, "made up by libpq");
    expect_error(db_verdict_query(&p, "23505", true), -ECONNRESET, "connection bad");
    expect_resend(db_verdict_query(&p, "40P01", false), DB_RESEND_DEADLOCK, false, "deadlock");
    expect_resend(db_verdict_query(&p, "40001", false), DB_RESEND_DEADLOCK, false,
                  "serialization failure");
    expect_error(db_verdict_query(&p, "40P01", true), -ECONNRESET, "deadlock, connection bad");
    p.attempts = DB_MAX_ATTEMPTS;
    expect_error(db_verdict_query(&p, "40P01", false), -EREMOTEIO, "deadlock, no sends left");
}

Test(retry, a_failed_commit_sends_the_groups_writes_again_each_alone)
{
    /* Rolled back by its group's failed commit (@sqlstate the commit's). */
    db_pending w = sent(1);
    w.writes = w.rolled_back = w.commit_failed = true;
    w.result = RES;
    expect_resend(db_verdict_query(&w, "23514", false), DB_RESEND_COMMIT, true,
                  "a write of several: which one is at fault is not known");
    expect_resend(db_verdict_query(&w, "40001", false), DB_RESEND_DEADLOCK, false,
                  "a serialization failure at commit keeps its retry policy");
    db_pending r = sent(1);
    r.rolled_back = r.commit_failed = true;
    r.result = RES;
    expect_resend(db_verdict_query(&r, "23514", false), DB_RESEND_COMMIT, false,
                  "a read after them: with the others");
    w.waiter = NULL;
    expect_error(db_verdict_query(&w, "23514", false), -EIO, "rolled back, no waiter");
    /* The group's only write: the commit's error is its own. */
    db_pending f = sent(1);
    f.writes = f.failed = f.commit_failed = true;
    f.result = RES;
    expect_error(db_verdict_query(&f, "23514", false), -EREMOTEIO, "a deferred constraint");
    expect_resend(db_verdict_query(&f, "40001", false), DB_RESEND_DEADLOCK, false,
                  "a serialization failure at its commit");
    f.attempts = DB_MAX_ATTEMPTS;
    expect_error(db_verdict_query(&f, "40001", false), -EREMOTEIO, "no sends left");
    /* A batch among several writes of a group whose commit failed: each
     * member alone; as the group's only write, the error is its own. */
    db_pending b = sent(1);
    b.waiter = NULL; /* the driver's */
    b.writes = b.rolled_back = b.commit_failed = true;
    b.result = RES;
    expect_resend(db_verdict_batch(&b, "23505", false, true), DB_RESEND_COMMIT, true,
                  "a batch rolled back by a failed commit");
    b.rolled_back = false;
    b.failed = true;
    expect_resend(db_verdict_batch(&b, "23505", false, false), DB_RESEND_BATCH, true,
                  "a batch that failed its own commit");
}

Test(retry, a_write_whose_sync_reached_the_server_has_an_unknown_outcome)
{
    db_pending w = sent(1);
    w.writes = true;
    cr_expect(db_outcome_unknown(&w, true), "sent, its Sync flushed, no outcome: may have committed");
    cr_expect_not(db_outcome_unknown(&w, false), "its Sync never reached the server: it cannot have");
    w.aborted = true;
    cr_expect_not(db_outcome_unknown(&w, true), "skipped: it did not run");
    w.aborted = false;
    w.rolled_back = true;
    cr_expect_not(db_outcome_unknown(&w, true), "rolled back with its group");
    db_pending r = sent(1);
    cr_expect_not(db_outcome_unknown(&r, true), "a read changes nothing");
}

Test(retry, a_statement_the_server_timed_out_fails_alone)
{
    cr_expect(db_timeout_state("57014"), "statement_timeout, or a cancel request");
    cr_expect(db_timeout_state("55P03"), "lock_timeout");
    cr_expect_not(db_timeout_state("40P01"));
    cr_expect_not(db_timeout_state(NULL));
    db_pending p = sent(1);
    p.result = RES;
    p.failed = true;
    expect_error(db_verdict_query(&p, "55P03", false), -ETIMEDOUT, "its lock wait timed out");
    expect_error(db_verdict_query(&p, "57014", false), -ETIMEDOUT, "its statement timed out");
    p.cancel_hit = true;
    expect_resend(db_verdict_query(&p, "57014", false), DB_RESEND_CANCEL, false,
                  "a cancel request meant for another query hit it");
    p.waiter = NULL;
    expect_error(db_verdict_query(&p, "57014", false), -ETIMEDOUT,
                 "the query the request was meant for: no one waits for it");
}

/* A batch sent once, standing for its members (not read by the verdict). */
static db_pending batch(bool writes)
{
    db_pending b = sent(1);
    b.writes = writes;
    return b;
}

Test(retry, a_batch_that_fits_is_delivered_and_one_that_does_not_is_refused)
{
    db_pending b = batch(true);
    b.result = RES;
    expect_error(db_verdict_batch(&b, NULL, false, true), 0, "fits");
    cr_expect(db_batch_clean(&b));
    expect_error(db_verdict_batch(&b, NULL, false, false), -EPROTO,
                 "a writing batch committed: not sent twice");
    b.writes = false;
    expect_resend(db_verdict_batch(&b, NULL, false, false), DB_RESEND_BATCH, false,
                  "a reading batch: its queries again, one by one");
}

Test(retry, a_batch_undone_by_another_query_is_sent_again_together)
{
    db_pending b = batch(true);
    b.aborted = true;
    cr_expect_not(db_batch_clean(&b));
    expect_resend(db_verdict_batch(&b, NULL, false, false), DB_RESEND_GROUP, false, "skipped");
    b = batch(true);
    b.result = RES;
    b.rolled_back = true;
    cr_expect_not(db_batch_clean(&b));
    expect_resend(db_verdict_batch(&b, NULL, false, true), DB_RESEND_GROUP, false,
                  "rolled back, though its result fits");
}

Test(retry, a_failed_batch_sends_each_member_alone)
{
    db_pending b = batch(true);
    b.result = RES;
    b.failed = true;
    cr_expect_not(db_batch_clean(&b));
    expect_resend(db_verdict_batch(&b, "23505", false, false), DB_RESEND_BATCH, true,
                  "one member's duplicate");
    expect_resend(db_verdict_batch(&b, "40P01", false, false), DB_RESEND_DEADLOCK, true,
                  "deadlock");
    expect_error(db_verdict_batch(&b, "57P01", false, false), -ECONNRESET, "shutdown");
    expect_error(db_verdict_batch(&b, "23505", true, false), -ECONNRESET, "connection bad");
    b = batch(true);
    expect_error(db_verdict_batch(&b, NULL, false, false), -EIO, "no result");
}

Test(retry, a_member_follows_its_batch_while_it_may_be_sent_again)
{
    db_pending b = batch(true);
    b.result = RES;
    b.failed = true;
    db_verdict v = db_verdict_batch(&b, "23505", false, false);
    db_pending m = sent(1);
    expect_resend(db_verdict_member(&m, v), DB_RESEND_BATCH, true, "a member");
    m.waiter = NULL;
    expect_error(db_verdict_member(&m, v), -EIO, "a member whose waiter gave up");
    m = sent(DB_MAX_ATTEMPTS);
    expect_error(db_verdict_member(&m, v), -EIO, "a member with no sends left");
    /* Verdicts that send nothing again reach every member as they are. */
    b.failed = false;
    v = db_verdict_batch(&b, NULL, false, true);
    expect_error(db_verdict_member(&m, v), 0, "rows for a member");
    v = db_verdict_batch(&b, NULL, false, false);
    expect_error(db_verdict_member(&m, v), -EPROTO, "a writing batch that did not fit");
}
