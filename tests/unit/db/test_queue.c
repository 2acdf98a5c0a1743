/*
 * The bookkeeping of a pipelined connection (db/src/queue.c), fed with the
 * sequences of PQgetResult outcomes that libpq's pipeline mode produces,
 * without a server. Results are stand-in pointers: the queue never reads
 * them.
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

/* Send @n queued queries; a Sync after each writer and one at the end. */
static void send_batch(unsigned n)
{
    bool unsynced = false;
    for (unsigned i = 0; i < n; i++) {
        db_pending *s = db_queue_send_next(&q);
        cr_assert_not_null(s);
        unsynced = true;
        if (s->writes) {
            db_queue_mark_sync(&q);
            unsynced = false;
        }
    }
    if (unsynced)
        db_queue_mark_sync(&q);
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
    cr_expect_null(feed(DB_EVENT_END, NULL), "the last waits for the Sync (commit)");
    cr_expect(db_queue_busy(&q));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[2]);
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
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[2]);
    cr_expect(p[2].aborted);

    /* An aborted query goes back to the queue and is sent again. */
    db_queue_push(&q, &p[1]);
    cr_expect_not(p[1].aborted, "push resets the outcome flags");
    cr_expect_eq(db_queue_send_next(&q), &p[1]);
    cr_expect_eq(p[1].attempts, 2);
}

Test(queue, writers_get_their_own_sync)
{
    p[1].writes = true;
    for (int i = 0; i < 3; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3);
    cr_expect_eq(q.syncs, 2, "one after the writer, one at the end");
    cr_expect(p[1].sync_after);
    cr_expect(p[2].sync_after);

    cr_expect_null(feed(DB_EVENT_RESULT, RES(1)));
    cr_expect_eq(feed(DB_EVENT_END, NULL), &p[0]);
    cr_expect_null(feed(DB_EVENT_RESULT, RES(2)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[1], "the write is done once committed");
    /* A failing query after the writer's Sync does not touch it. */
    cr_expect_null(feed(DB_EVENT_ERROR, RES(3)));
    cr_expect_null(feed(DB_EVENT_END, NULL));
    cr_expect_eq(feed(DB_EVENT_SYNC, NULL), &p[2]);
    cr_expect_not(db_queue_busy(&q));
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
}

Test(queue, take_all_returns_everything_in_order)
{
    for (int i = 0; i < 5; i++)
        db_queue_push(&q, &p[i]);
    send_batch(3);               /* p0..p2 sent, p3 p4 queued */
    feed(DB_EVENT_RESULT, RES(1));
    feed(DB_EVENT_END, NULL);    /* p0 done (not in the queue any more) */
    feed(DB_EVENT_RESULT, RES(2));
    feed(DB_EVENT_END, NULL);    /* p1 done */
    feed(DB_EVENT_RESULT, RES(3));
    feed(DB_EVENT_END, NULL);    /* p2 closing, waiting for its Sync */
    db_pending *list = db_queue_take_all(&q);
    db_pending *want[] = {&p[2], &p[3], &p[4]};
    size_t n = 0;
    for (db_pending *it = list; it; it = it->next, n++)
        cr_expect_eq(it, want[n < 3 ? n : 2], "entry %zu", n);
    cr_expect_eq(n, 3);
    cr_expect_not(db_queue_busy(&q));
    cr_expect_eq(q.queued, 0);
}
