/*
 * The bookkeeping of a pipelined connection (db/src/queue.c), fed with the
 * sequences of PQgetResult outcomes that libpq's pipeline mode produces,
 * without a server, the queries grouped under Syncs by the driver's own
 * rules (db_queue_send_step). Results are stand-in pointers: the queue
 * never reads them.
 */
#include "db/src/queue.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#define RES(n) ((struct pg_result *)(uintptr_t)(0x1000 * (n)))

static db_pending p[8];
static db_queue q;

static void setup(void)
{
    memset(p, 0, sizeof(p));
    q = (db_queue){0};
}

TestSuite(queue, .init = setup);

/* The steps of one driver turn, as db_queue_send_step (the driver's own
 * grouping) gives them, done as the driver does them: 'Q' a query sent
 * (db_queue_send_next), 'S' a Sync (db_queue_mark_sync). @end_after: the
 * ordinal (1-based) of a query after which the caller ends the group, as
 * the driver does for a writing batch that left a key out; 0 for none.
 * The turn's steps are written to @steps (room for 32) for a test to read. */
static char steps[33];

static void turn(unsigned max_queries, unsigned max_syncs, unsigned end_after)
{
    db_send_turn t = {.max_queries = max_queries, .max_syncs = max_syncs};
    unsigned n = 0, queries = 0;
    for (;;) {
        db_send_step step = db_queue_send_step(&q, &t);
        if (step == DB_SEND_STOP)
            break;
        cr_assert_lt(n, 32u, "a turn that does not end");
        if (step == DB_SEND_SYNC) {
            db_queue_mark_sync(&q);
            steps[n++] = 'S';
            continue;
        }
        cr_assert_eq(step, DB_SEND_QUERY);
        cr_assert_not_null(db_queue_send_next(&q), "a query step with none waiting");
        steps[n++] = 'Q';
        if (++queries == end_after)
            t.end_group = true;
    }
    steps[n] = '\0';
}

/* Send up to @n queued queries in one turn, DB_MAX_SYNCS groups in flight
 * at most. */
static void send_batch(unsigned n)
{
    turn(n, DB_MAX_SYNCS, 0);
}

/* The entries of list @got, linked by next, are @want[0..@n). */
static void expect_list(db_pending *got, db_pending *const *want, size_t n)
{
    size_t i = 0;
    for (db_pending *it = got; it; it = it->next, i++)
        cr_expect(i < n && it == want[i], "entry %zu is p[%td]", i, it - p);
    cr_expect_eq(i, n, "%zu entries, %zu wanted", i, n);
}

static db_pending *feed(db_event ev, struct pg_result *res)
{
    db_pending *done;
    cr_assert(db_queue_feed(&q, ev, res, &done), "event %d refused", ev);
    return done;
}

Test(queue, fifo_and_unqueue)
{
    for (int i = 0; i < 4; i++)
        db_queue_push(&q, &p[i]);
    cr_expect_eq(q.queued, 4);
    cr_expect(db_queue_unqueue(&q, &p[0]));
    cr_expect(db_queue_unqueue(&q, &p[3]));
    cr_expect_not(db_queue_unqueue(&q, &p[3]), "removed twice");
    cr_expect_eq(db_queue_send_next(&q), &p[1]);
    cr_expect_not(db_queue_unqueue(&q, &p[1]), "a sent query is not queued");
    cr_expect_eq(db_queue_send_next(&q), &p[2]);
    cr_expect_null(db_queue_send_next(&q));
    cr_expect_eq(q.queued, 0);
    cr_expect_eq(q.sent, 2);
    cr_expect_eq(p[1].state, DB_PENDING_SENT);
    cr_expect_eq(p[1].attempts, 1);
    /* The tail is right after removing the last one: a push still links. */
    db_queue_push(&q, &p[4]);
    cr_expect_eq(q.queued_head, &p[4]);
    cr_expect_eq(q.queued_tail, &p[4]);
}

Test(queue, one_sync_for_a_batch_of_reads_completes_at_the_sync)
{
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3);
    cr_expect_eq(q.syncs, 1);
    cr_expect(p[2].sync_after);
    cr_expect_not(p[0].sync_after);

    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[0], "first query done at its end");
    cr_expect_eq(p[0].result, RES(1));
    cr_expect_null(feed(DB_EVENT_RESULT, RES(2)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[1]);
    cr_expect_null(feed(DB_EVENT_RESULT, RES(3)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[2], "a read with no write before: at its end");
    cr_expect(db_queue_busy(&q), "its Sync is still to come");
    db_pending *d;
    cr_expect_not(db_queue_feed(&q, DB_EVENT_RESULT, RES(4), &d), "only the Sync may follow");
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));
    cr_expect_not(db_queue_busy(&q));
}

Test(queue, an_error_aborts_the_rest_of_its_sync_group)
{
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3);
    cr_expect_null(feed(DB_EVENT_ERROR, RES(1)));
    db_pending *d = feed(DB_EVENT_END, NULL);
    cr_expect_eq(d, &p[0]);
    cr_expect(p[0].failed);
    cr_expect_not(p[0].aborted);
    cr_expect_null(feed(DB_EVENT_ABORTED, NULL));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[1]);
    cr_expect(p[1].aborted);
    cr_expect_null(p[1].result);
    cr_expect_null(feed(DB_EVENT_ABORTED, NULL));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[2]);
    cr_expect(p[2].aborted);
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));

    /* An aborted query goes back to the queue and is sent again. */
    db_queue_push(&q, &p[1]);
    cr_expect_not(p[1].aborted, "push resets the outcome flags");
    cr_expect_not(db_queue_next_alone(&q), "sent once: shares the next group");
    cr_expect_eq(db_queue_send_next(&q), &p[1]);
    cr_expect_eq(p[1].attempts, 2);
}

Test(queue, writes_share_a_sync_and_complete_at_it)
{
    p[1].writes = p[2].writes = true;
    for (int i = 0; i < 4; i++)
        db_queue_push(&q, &p[i]);
    send_batch(4);
    cr_expect_eq(q.syncs, 1, "one Sync for reads and writes alike");
    cr_expect(p[3].sync_after);

    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[0], "a read before any write: at its end");
    cr_expect_null(feed(DB_EVENT_RESULT, RES(2)));
    cr_expect_null(feed(DB_EVENT_END, NULL), "a write waits for its commit");
    cr_expect_null(feed(DB_EVENT_RESULT, RES(3)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_RESULT, RES(4)));
    cr_expect_null(feed(DB_EVENT_END, NULL), "a read after a write may have seen it: waits");
    cr_expect_eq(q.closing, 3);
    db_pending *want[] = {&p[1], &p[2], &p[3]};
    expect_list(feed(DB_EVENT_SYNC, NULL), want, 3);
    for (int i = 1; i < 4; i++)
        cr_expect_not(p[i].rolled_back || p[i].aborted || p[i].failed, "p[%d] committed", i);
    cr_expect_not(db_queue_busy(&q));
}

Test(queue, a_failed_write_rolls_back_the_others_of_its_sync)
{
    for (int i = 0; i < 4; i++) {
        p[i].writes = true;
        db_queue_push(&q, &p[i]);
    }
    send_batch(4);
    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_ERROR, RES(2))); /* say, a unique violation */
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_ABORTED, NULL));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_ABORTED, NULL));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    db_pending *want[] = {&p[0], &p[1], &p[2], &p[3]};
    expect_list(feed(DB_EVENT_SYNC, NULL), want, 4);
    cr_expect(p[0].rolled_back, "ran, then rolled back with its group");
    cr_expect_eq(p[0].result, RES(1));
    cr_expect(p[1].failed);
    cr_expect_not(p[1].rolled_back, "the failing one keeps its own error");
    cr_expect(p[2].aborted && p[3].aborted);
    cr_expect_not(p[2].rolled_back);

    /* Sent again together with a new one; p2 fails again. */
    p[0].result = NULL;
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[2]);
    db_queue_push(&q, &p[4]); /* a new one, queued meanwhile */
    send_batch(3);
    cr_expect_eq(q.syncs, 1, "a first retry shares the next group");
    cr_expect_null(feed(DB_EVENT_RESULT, RES(5)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_ERROR, RES(6)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_null(feed(DB_EVENT_ABORTED, NULL));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    db_pending *want2[] = {&p[0], &p[2], &p[4]};
    expect_list(feed(DB_EVENT_SYNC, NULL), want2, 3);
    cr_expect(p[0].rolled_back && p[2].failed && p[4].aborted);

    /* Sent a third time, p0 goes alone; p4 (sent once) shares. */
    p[0].result = NULL;
    db_queue_push(&q, &p[4]);
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[5]);
    send_batch(3);
    cr_expect_eq(q.syncs, 3, "p4 | p0 | p5");
    cr_expect(p[4].sync_after && p[0].sync_after && p[5].sync_after);
    cr_expect_eq(p[0].attempts, 3);
    cr_expect_null(feed(DB_EVENT_RESULT, RES(7)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[4], "a read: at its end");
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));
    cr_expect_null(feed(DB_EVENT_RESULT, RES(8)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[0]);
    cr_expect_not(p[0].rolled_back);
    cr_expect_null(feed(DB_EVENT_ERROR, RES(9)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[5], "a failed read, alone in its group");
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));
    cr_expect_not(db_queue_busy(&q));
}

Test(queue, a_retry_after_new_queries_gets_a_sync_before_it)
{
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    p[1].attempts = 2; /* sent twice before */
    db_queue_push(&q, &p[2]);
    send_batch(3);
    cr_expect(p[0].sync_after, "the group before the retry is closed");
    cr_expect(p[1].sync_after);
    cr_expect(p[2].sync_after);
    cr_expect_eq(q.syncs, 3);
}

Test(queue, several_sync_groups_in_flight)
{
    p[0].writes = p[3].writes = true;
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    send_batch(2); /* group 1: write, read */
    db_queue_push(&q, &p[2]);
    send_batch(1); /* group 2: read */
    db_queue_push(&q, &p[3]);
    send_batch(1); /* group 3: write */
    cr_expect_eq(q.syncs, 3);
    cr_expect(db_queue_busy(&q));

    feed(DB_EVENT_RESULT, RES(1));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    feed(DB_EVENT_RESULT, RES(2));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    db_pending *want1[] = {&p[0], &p[1]};
    expect_list(feed(DB_EVENT_SYNC, NULL), want1, 2);
    feed(DB_EVENT_ERROR, RES(3));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[2], "group 2 is read-only: at its end");
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));
    feed(DB_EVENT_RESULT, RES(4));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[3]);
    cr_expect_not(p[3].rolled_back, "group 2's error is not group 3's");
    cr_expect_not(db_queue_busy(&q));
}

/* libpq's outcomes for an error raised when the implicit transaction
 * commits at the Sync (a deferred constraint, 40001 under SERIALIZABLE):
 * after the group's last result and its end, an error result, its end,
 * then the Sync's result (seen with PostgreSQL 15 and a deferred
 * constraint trigger). */
static db_pending *fail_commit(struct pg_result *error)
{
    cr_expect_null(feed(DB_EVENT_ERROR, error), "the commit's error completes no query");
    cr_expect_null(feed(DB_EVENT_END, NULL));
    return feed(DB_EVENT_SYNC, NULL);
}

Test(queue, an_error_at_commit_fails_the_group_and_rolls_its_writes_back)
{
    p[1].writes = p[2].writes = true;
    for (int i = 0; i < 4; i++)
        db_queue_push(&q, &p[i]);
    send_batch(4); /* a read, two writes, a read after them: one Sync */
    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[0], "a read before any write: at its end");
    for (int i = 1; i < 4; i++) {
        cr_expect_null(feed(DB_EVENT_RESULT, RES(i + 1)));
        cr_expect_null(feed(DB_EVENT_END, NULL));
    }
    db_pending *want[] = {&p[1], &p[2], &p[3]};
    expect_list(fail_commit(RES(9)), want, 3);
    for (int i = 1; i < 4; i++) {
        cr_expect(p[i].commit_failed, "p[%d]: its group's commit failed", i);
        cr_expect(p[i].rolled_back, "p[%d] ran, then was rolled back", i);
        cr_expect_not(p[i].failed, "p[%d]: two writes, the error is no single one's", i);
    }
    cr_expect_not(p[0].commit_failed, "delivered before the commit");
    cr_expect_eq(db_queue_take_commit_error(&q), RES(9), "the error is the caller's");
    cr_expect_null(db_queue_take_commit_error(&q), "once");
    cr_expect_not(db_queue_busy(&q));
}

Test(queue, an_error_at_commit_is_the_groups_only_write_s)
{
    p[0].writes = true;
    for (int i = 0; i < 2; i++)
        db_queue_push(&q, &p[i]);
    send_batch(2);
    feed(DB_EVENT_RESULT, RES(1));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    feed(DB_EVENT_RESULT, RES(2));
    cr_expect_null(feed(DB_EVENT_END, NULL), "after a write");
    db_pending *want[] = {&p[0], &p[1]};
    expect_list(fail_commit(RES(9)), want, 2);
    cr_expect(p[0].failed && p[0].commit_failed, "the one write failed at its commit");
    cr_expect_not(p[0].rolled_back);
    cr_expect(p[1].rolled_back && p[1].commit_failed, "the read after it was rolled back");
    cr_expect_not(p[1].failed);
    cr_expect_eq(db_queue_take_commit_error(&q), RES(9));
}

Test(queue, the_groups_after_a_failed_commit_go_on)
{
    p[0].writes = true;
    db_queue_push(&q, &p[0]);
    send_batch(1);
    db_queue_push(&q, &p[1]);
    send_batch(1); /* a second group in flight behind the first */
    feed(DB_EVENT_RESULT, RES(1));
    feed(DB_EVENT_END, NULL);
    db_pending *d;
    cr_expect(db_queue_feed(&q, DB_EVENT_ERROR, RES(9), &d));
    cr_expect_not(db_queue_feed(&q, DB_EVENT_ERROR, RES(8), &d), "one error per commit");
    cr_expect_not(db_queue_feed(&q, DB_EVENT_RESULT, RES(7), &d), "only its end and Sync follow");
    cr_expect(db_queue_feed(&q, DB_EVENT_END, NULL, &d));
    cr_expect_not(db_queue_feed(&q, DB_EVENT_END, NULL, &d), "one end");
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[0]);
    cr_expect_eq(db_queue_take_commit_error(&q), RES(9));
    feed(DB_EVENT_RESULT, RES(2));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[1], "the next group as usual");
    cr_expect_not(p[1].commit_failed || p[1].rolled_back);
    cr_expect_null(feed(DB_EVENT_SYNC, NULL));
    cr_expect_null(db_queue_take_commit_error(&q), "its commit did not fail");
}

Test(queue, a_sync_counts_as_reaching_the_server_once_flushed)
{
    p[0].writes = true;
    db_queue_push(&q, &p[0]);
    cr_expect_not(db_queue_sync_flushed(&q, &p[0]), "never sent");
    send_batch(1);
    cr_expect_not(db_queue_sync_flushed(&q, &p[0]), "its Sync still in libpq's buffer");
    db_queue_mark_flushed(&q);
    cr_expect(db_queue_sync_flushed(&q, &p[0]), "written out");
    db_queue_push(&q, &p[1]);
    send_batch(1);
    cr_expect_not(db_queue_sync_flushed(&q, &p[1]), "a later group, not flushed yet");
    cr_expect(db_queue_sync_flushed(&q, &p[0]));
    /* A query sent with no Sync after it yet does not count, flushed or not. */
    db_queue_push(&q, &p[2]);
    cr_expect_eq(db_queue_send_next(&q), &p[2]);
    db_queue_mark_flushed(&q);
    cr_expect(db_queue_sync_flushed(&q, &p[1]));
    cr_expect_not(db_queue_sync_flushed(&q, &p[2]), "no Sync after it");
    db_queue_mark_sync(&q);
    cr_expect_not(db_queue_sync_flushed(&q, &p[2]), "its Sync not written out");
    db_queue_mark_flushed(&q);
    cr_expect(db_queue_sync_flushed(&q, &p[2]));
    /* Taken off a connection that broke: still answered for; a query sent
     * on the next connection is not taken for one of them. */
    db_queue_push(&q, &p[3]);
    send_batch(1);
    cr_expect_not_null(db_queue_take_all(&q));
    cr_expect(db_queue_sync_flushed(&q, &p[2]));
    cr_expect_not(db_queue_sync_flushed(&q, &p[3]));
    db_queue_push(&q, &p[4]);
    send_batch(1);
    cr_expect_not(db_queue_sync_flushed(&q, &p[4]));
}

Test(queue, a_batchs_members_reach_the_server_with_it)
{
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    db_pending *members[] = {&p[0], &p[1]};
    db_queue_coalesce(&q, &p[7], members, 2);
    send_batch(2); /* the batch, then p[2]: one group */
    cr_expect_not(db_queue_sync_flushed(&q, &p[0]));
    db_queue_mark_flushed(&q);
    cr_expect(db_queue_sync_flushed(&q, &p[0]) && db_queue_sync_flushed(&q, &p[1]));
    cr_expect(db_queue_sync_flushed(&q, &p[7]) && db_queue_sync_flushed(&q, &p[2]));
}

Test(queue, a_cancel_targets_what_runs_when_no_one_waits_for_it)
{
    p[1].writes = true;
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3); /* a read, a write, a read: one group */
    db_queue_push(&q, &p[3]);
    send_batch(1); /* a second group behind it */
    cr_expect_eq(db_queue_cancel_target(&q), 0, "every waiter waits");
    p[3].abandoned = true;
    cr_expect_eq(db_queue_cancel_target(&q), 0, "it does not run yet: another statement does");
    p[0].abandoned = true;
    cr_expect_eq(db_queue_cancel_target(&q), p[0].seq, "the statement running is abandoned");
    feed(DB_EVENT_RESULT, RES(1));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[0]);
    cr_expect_eq(db_queue_cancel_target(&q), 0, "the next one runs, and is waited for");
    feed(DB_EVENT_RESULT, RES(2));
    feed(DB_EVENT_END, NULL);
    p[1].abandoned = true; /* the write, waiting for its commit */
    cr_expect_eq(db_queue_cancel_target(&q), 0, "a statement of the group still runs");
    feed(DB_EVENT_RESULT, RES(3));
    feed(DB_EVENT_END, NULL);
    cr_expect_eq(db_queue_cancel_target(&q), p[2].seq,
                 "the group commits for an abandoned write: its commit, named by its last");
    cr_expect_not_null(feed(DB_EVENT_SYNC, NULL));
    cr_expect_eq(db_queue_cancel_target(&q), p[3].seq, "the next group's abandoned statement");
}

Test(queue, unexpected_results_are_refused)
{
    db_pending *done;
    cr_expect_not(db_queue_feed(&q, DB_EVENT_RESULT, RES(1), &done), "nothing was sent");
    cr_expect_not(db_queue_feed(&q, DB_EVENT_SYNC, NULL, &done), "no Sync was sent");

    db_queue_push(&q, &p[0]);
    send_batch(1);
    cr_expect(db_queue_feed(&q, DB_EVENT_RESULT, RES(1), &done));
    cr_expect_not(db_queue_feed(&q, DB_EVENT_RESULT, RES(2), &done), "two results, one statement");
    cr_expect_eq(p[0].result, RES(1), "the first result stays");
    cr_expect(db_queue_feed(&q, DB_EVENT_END, NULL, &done));
    cr_expect_not(db_queue_feed(&q, DB_EVENT_RESULT, RES(3), &done), "a result before the Sync");
    cr_expect(db_queue_feed(&q, DB_EVENT_SYNC, NULL, &done));
    cr_expect_not(db_queue_feed(&q, DB_EVENT_SYNC, NULL, &done), "one Sync sent, two came");
}

Test(queue, take_all_returns_everything_in_order)
{
    p[1].writes = true;
    for (int i = 0; i < 5; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3);               /* p0..p2 sent, p3 p4 queued */
    feed(DB_EVENT_RESULT, RES(1));
    feed(DB_EVENT_END, NULL);    /* p0 done (not in the queue any more) */
    feed(DB_EVENT_RESULT, RES(2));
    feed(DB_EVENT_END, NULL);    /* p1 (a write) closing, waiting for its Sync */
    db_queue_push(&q, &p[5]);
    send_batch(1);               /* p3 sent in a second group; p4 p5 queued */
    db_pending *list = db_queue_take_all(&q);
    db_pending *want[] = {&p[1], &p[2], &p[3], &p[4], &p[5]};
    expect_list(list, want, 5);
    cr_expect_not(db_queue_busy(&q));
    cr_expect_eq(q.queued, 0);
}

/* db_queue_prefer on queue states set by hand: the counts are all it reads. */
static db_queue state(unsigned queued, unsigned sent, unsigned syncs)
{
    return (db_queue){.queued = queued, .sent = sent, .syncs = syncs};
}

Test(queue, spread_prefers_the_fewest_queries_out)
{
    db_queue a = state(0, 3, 1), b = state(1, 1, 1), idle = state(0, 0, 0);
    cr_assert(db_queue_prefer(&b, &a, DB_ROUTING_SPREAD, 4));
    cr_assert_not(db_queue_prefer(&a, &b, DB_ROUTING_SPREAD, 4));
    cr_assert(db_queue_prefer(&idle, &b, DB_ROUTING_SPREAD, 4));
    /* A tie keeps the first. */
    db_queue b2 = b;
    cr_assert_not(db_queue_prefer(&b2, &b, DB_ROUTING_SPREAD, 4));
}

Test(queue, pack_prefers_an_idle_connection_then_the_group_being_formed)
{
    db_queue idle = state(0, 0, 0), forming = state(5, 8, 2), busy = state(0, 1, 1);
    cr_assert(db_queue_prefer(&idle, &forming, DB_ROUTING_PACK, 4));
    cr_assert(db_queue_prefer(&idle, &busy, DB_ROUTING_PACK, 4));
    /* More queries out, but its group goes out at this turn's end. */
    cr_assert(db_queue_prefer(&forming, &busy, DB_ROUTING_PACK, 4));
    cr_assert_not(db_queue_prefer(&busy, &forming, DB_ROUTING_PACK, 4));
    /* A connection at its limit of groups holds its queued ones back: it
     * is not forming a group that goes out, and ranks by load. */
    db_queue full = state(5, 8, 4);
    cr_assert(db_queue_prefer(&busy, &full, DB_ROUTING_PACK, 4));
    /* A connection reading the results of a group (closing), nothing
     * queued, is not idle. */
    db_queue closing = (db_queue){.closing = 2, .syncs = 1};
    cr_assert(db_queue_prefer(&idle, &closing, DB_ROUTING_PACK, 4));
    cr_assert(db_queue_prefer(&forming, &closing, DB_ROUTING_PACK, 4));
}

Test(queue, fill_keeps_the_first_connection_until_it_is_deep)
{
    const unsigned d = DB_FILL_DEPTH;
    db_queue first = state(2, d - 3, 1), idle = state(0, 0, 0);
    /* Below the depth the first keeps it, even beside an idle one. */
    cr_assert_not(db_queue_prefer(&idle, &first, DB_ROUTING_FILL, 4));
    /* At the depth it is full: a connection below it takes the query. */
    db_queue deep = state(3, d - 3, 4), second = state(0, d - 1, 2);
    cr_assert(db_queue_prefer(&second, &deep, DB_ROUTING_FILL, 4));
    cr_assert(db_queue_prefer(&idle, &deep, DB_ROUTING_FILL, 4));
    /* A full one never displaces one below the depth. */
    cr_assert_not(db_queue_prefer(&deep, &second, DB_ROUTING_FILL, 4));
    /* All full: the least loaded, ties to the first. */
    db_queue deeper = state(10, d, 4), deep2 = deep;
    cr_assert(db_queue_prefer(&deep, &deeper, DB_ROUTING_FILL, 4));
    cr_assert_not(db_queue_prefer(&deeper, &deep, DB_ROUTING_FILL, 4));
    cr_assert_not(db_queue_prefer(&deep2, &deep, DB_ROUTING_FILL, 4));
}

Test(queue, fill_counts_a_heavy_query_as_its_weight)
{
    /* Two reads of ~7 KB each (weight 7) and a lookup: 17 units, full. */
    p[0].weight = p[1].weight = 7;
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    cr_assert_eq(q.weight, 14);
    db_queue idle = state(0, 0, 0);
    cr_assert(db_queue_prefer(&idle, &q, DB_ROUTING_FILL, 4));
    /* Spread still counts queries, not weight. */
    db_queue two = state(0, 2, 1);
    cr_assert(db_queue_prefer(&two, &q, DB_ROUTING_SPREAD, 4));
    /* The weight leaves with the query: sent stays counted, ended not. */
    send_batch(3);
    cr_assert_eq(q.weight, 14);
    feed(DB_EVENT_RESULT, RES(1));
    feed(DB_EVENT_END, NULL);
    cr_assert_eq(q.weight, 7);
    /* 1 + 7 + 1 = 9 < 16: the first keeps the next query again. */
    cr_assert_not(db_queue_prefer(&idle, &q, DB_ROUTING_FILL, 4));
    p[3].weight = 5;
    db_queue_push(&q, &p[3]);
    cr_assert(db_queue_unqueue(&q, &p[3]));
    cr_assert_eq(q.weight, 7);
}

Test(queue, coalesce_takes_the_members_given_and_puts_the_batch_first)
{
    db_pending batch = {0};
    p[0].weight = 1;
    p[2].weight = 2;
    p[1].weight = 4;
    for (int i = 0; i < 5; i++)
        db_queue_push(&q, &p[i]);
    db_pending *const members[] = {&p[0], &p[2], &p[4]};
    db_queue_coalesce(&q, &batch, members, 3);
    cr_expect_eq(batch.nmembers, 3u);
    expect_list(batch.members, members, 3);
    cr_expect_eq(p[0].state, DB_PENDING_SENT);
    cr_expect_eq(p[2].attempts, 1u);
    cr_expect_eq(batch.weight, 3u);
    cr_expect_eq(q.queued, 3u, "the batch, p[1], p[3]");
    cr_expect_eq(q.weight, 7u);
    db_pending *order[] = {&batch, &p[1], &p[3]};
    expect_list(q.queued_head, order, 3);
    cr_expect_eq(q.queued_tail, &p[3], "p[4], the old tail, was taken");
    cr_expect_eq(db_queue_send_next(&q), &batch, "the batch goes first");
}

Test(queue, coalesce_of_the_whole_queue_keeps_the_tail)
{
    db_pending batch = {0};
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    db_pending *const members[] = {&p[0], &p[1]};
    db_queue_coalesce(&q, &batch, members, 2);
    cr_expect_eq(q.queued, 1u);
    cr_expect_eq(q.queued_head, &batch);
    cr_expect_eq(q.queued_tail, &batch);
    db_queue_push(&q, &p[2]);
    db_pending *order[] = {&batch, &p[2]};
    expect_list(q.queued_head, order, 2);
}

/* SPREAD weighs a connection by its queries: a batch of 3 in flight
 * counts 3 until its result is read, not 1. */
Test(queue, a_batch_counts_its_members_in_the_load)
{
    db_pending batch = {0};
    db_queue other = {0};
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    db_pending *const members[] = {&p[0], &p[1], &p[2]};
    db_queue_coalesce(&q, &batch, members, 3);
    db_queue_push(&other, &p[3]);
    db_queue_push(&other, &p[4]);
    cr_expect(db_queue_prefer(&other, &q, DB_ROUTING_SPREAD, 4), "2 queries against 3");
    send_batch(1);
    cr_expect(db_queue_prefer(&other, &q, DB_ROUTING_SPREAD, 4), "in flight: still 3");
    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &batch, "a read, no write: done at its end");
    cr_expect_eq(q.coalesced, 0u);
    cr_expect_not(db_queue_prefer(&other, &q, DB_ROUTING_SPREAD, 4), "done: 0 against 2");
}

/* A member of a failed batch goes in a Sync group of its own, although it
 * was sent only once. */
Test(queue, a_query_marked_alone_gets_its_own_group)
{
    db_queue_push(&q, &p[0]);
    p[0].alone = true;
    cr_expect(db_queue_next_alone(&q));
}

/* The Sync grouping itself (db_queue_send_step), step by step. */

Test(queue, one_turn_is_one_group_under_one_sync)
{
    for (int i = 0; i < 4; i++)
        db_queue_push(&q, &p[i]);
    turn(1024, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "QQQQS");
    cr_expect_eq(q.syncs, 1);
    turn(1024, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "", "nothing waits: no empty group");
}

Test(queue, a_query_alone_gets_a_sync_before_and_after_it)
{
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    p[1].attempts = 2;
    db_queue_push(&q, &p[2]);
    db_queue_push(&q, &p[3]);
    turn(1024, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "QSQSQQS", "p0 | p1 alone | p2 p3");
    /* Alone at the head: no Sync before it, none was begun. */
    setup();
    p[0].alone = true;
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    turn(1024, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "QSQS");
}

Test(queue, the_caller_may_end_a_group_after_a_query)
{
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    turn(1024, DB_MAX_SYNCS, 1); /* a writing batch that left a key out */
    cr_expect_str_eq(steps, "QSQQS");
    cr_expect(p[0].sync_after);
    cr_expect_not(p[1].sync_after);
}

Test(queue, no_group_is_begun_at_the_limit_of_groups_in_flight)
{
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    q.syncs = 2; /* two groups out, their results not read */
    turn(1024, 2, 0);
    cr_expect_str_eq(steps, "", "the queries wait for the oldest group's results");
    cr_expect_eq(q.queued, 3);
    q.syncs = 1;
    turn(1024, 2, 0);
    cr_expect_str_eq(steps, "QQQS", "one group more: all of them in it");
    cr_expect_eq(q.syncs, 2);
}

Test(queue, a_query_alone_waits_at_the_limit_of_groups)
{
    /* A query alone closes the group before it; the limit then stops the
     * turn before a group of its own is begun for it. */
    db_queue_push(&q, &p[0]);
    db_queue_push(&q, &p[1]);
    p[1].attempts = 2;
    q.syncs = 1;
    turn(1024, 2, 0);
    cr_expect_str_eq(steps, "QS");
    cr_expect_eq(q.queued, 1, "p1 waits for a free group");
    cr_expect_eq(q.queued_head, &p[1]);
}

Test(queue, a_turn_sends_at_most_its_number_of_queries)
{
    for (int i = 0; i < 5; i++)
        db_queue_push(&q, &p[i]);
    turn(3, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "QQQS", "the rest goes in the next turn");
    cr_expect_eq(q.queued, 2);
    turn(3, DB_MAX_SYNCS, 0);
    cr_expect_str_eq(steps, "QQS");
}
