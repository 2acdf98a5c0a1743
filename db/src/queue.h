/*
 * Internal to db/: the bookkeeping of one pipelined connection, kept free
 * of libpq calls and of the runtime so that it can be unit-tested alone.
 *
 * A query (db_pending) is queued by a request, then sent by the driver in
 * a batch, then completed when its results have been read. The server
 * answers in the order queries were sent; after a Sync it sends one more
 * result (PGRES_PIPELINE_SYNC). So the driver feeds each PQgetResult()
 * outcome, in order, to db_queue_feed(), which says which query it belongs
 * to and when that query is complete:
 *
 *   data or error result  -> stored in the head query
 *   PGRES_PIPELINE_ABORTED -> the head query was skipped (an earlier query
 *                            of its Sync group failed): it may be re-sent
 *   NULL                  -> end of the head query's results
 *   PGRES_PIPELINE_SYNC   -> end of a Sync group
 *
 * and, after a group's last query ended, an error result and its end
 * before the Sync's: the implicit transaction failed to commit (a
 * deferred constraint, 40001 under SERIALIZABLE).
 *
 * Statements between two Syncs (a Sync group) run in one implicit
 * transaction, and an error rolls back the whole group (libpq docs,
 * "Pipeline Mode"; protocol docs, "Extended Query"). Writes share a group
 * with whatever else was queued in the same turn, so:
 *
 *   - a writing query, and every query after a write in its group,
 *     completes only when the group's Sync result arrives (it has
 *     committed, or its result may have seen a write that had not);
 *     a read with no write before it in its group completes at its end;
 *   - when a query of a group fails, the group's queries that succeeded
 *     and wait for the Sync were rolled back with it (rolled_back); those
 *     after it were skipped (aborted). Both are for the driver to send
 *     again; the failing one keeps its own error, unless PostgreSQL
 *     chose its group to end a deadlock or a serialization failure
 *     (40P01, 40001: no fault of its own), when it is sent again too;
 *   - when the group fails at its commit, every query waiting for the
 *     Sync was rolled back (commit_failed, rolled_back); the group's
 *     only write, if it had one, is the one at fault (commit_failed,
 *     failed: the error is its own). With several writes, the one at
 *     fault is not known: the driver sends each again alone (retry.h);
 *   - a query sent again rides in the next group with the others; one
 *     sent twice already goes in a Sync group of its own
 *     (db_queue_next_alone), where no other query's error can touch it:
 *     a query is sent at most 3 times.
 *
 * Several Sync groups may be in flight at once: their results come back
 * in the order they were sent, one group after the other.
 *
 * Whether a write may have committed when its outcome never came (the
 * connection broke, its waiter gave up): only once the Sync after it
 * reached the server, which commits there. The queue numbers the queries
 * as they are sent and remembers the last one a Sync followed
 * (db_queue_mark_sync) and, once the driver flushed them, the last one a
 * flushed Sync followed (db_queue_mark_flushed): db_queue_sync_flushed.
 */
#ifndef CORING_DB_QUEUE_H
#define CORING_DB_QUEUE_H

#include "coring/db/db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pg_result;

enum db_pending_state { DB_PENDING_QUEUED = 1, DB_PENDING_SENT, DB_PENDING_DONE };

struct db_stmt;

typedef struct db_pending {
    struct db_pending *next;
    const struct db_stmt *stmt;  /* the statement asked (NULL in unit tests) */
    const char *name;            /* the prepared statement's name */
    const char *sql;             /* or, when set, the SQL sent as an unnamed statement
                                  * with stmt's parameter types (a sampled trace's
                                  * comment, sqlcomment.h); the waiter's memory */
    int nparams;
    const char *const *values;   /* parameters (NULL: SQL NULL); the waiter's memory */
    const int *lengths;          /* their lengths in bytes; the waiter's memory */
    const int *formats;          /* per parameter 0 text / 1 binary; the waiter's memory */
    int result_format;           /* 0 text, 1 binary */
    bool writes;                 /* statement changes data: Sync right after it */
    bool sync_after;             /* a Sync was sent right after this query */
    bool aborted;                /* PGRES_PIPELINE_ABORTED: it did not run */
    bool rolled_back;            /* it ran, but a later query of its group failed */
    bool failed;                 /* its result is an error (or its commit's) */
    bool commit_failed;          /* its group failed to commit, after its result */
    unsigned attempts;           /* times sent */
    bool alone;                  /* to be sent in a Sync group of its own
                                  * (a member of a batch that failed) */
    unsigned weight;             /* DB_ROUTING_FILL: work beyond one query's, in
                                  * DB_FILL_UNIT_BYTES of its statement's results */
    uint64_t seq;                /* its number when last sent (db_queue_send_next;
                                  * a batch's members take the batch's); 0: never */
    int state;                   /* enum db_pending_state */
    int error;                   /* outcome for the waiter: 0 or -errno */
    struct pg_result *result;    /* owned until handed to the waiter */
    void *waiter;                /* the waiting task; NULL once it gave up */
    bool abandoned;              /* it, or one of a batch's members, was in flight
                                  * when its waiter gave up (cancel.h) */
    bool cancel_hit;             /* a cancel request of its connection may have
                                  * interrupted it (retry.h) */
    /* A batch (db_queue_coalesce): the queries it stands for, linked by
     * `next` in queue order, each SENT until the batch completes; and the
     * memory of its parameters, the driver's (NULL otherwise). */
    struct db_pending *members;
    unsigned nmembers;
    void *owned;
    struct db_pending *batch;    /* a member's batch, while it is one */
} db_pending;

typedef struct db_queue {
    db_pending *queued_head, *queued_tail; /* not sent yet, in order */
    db_pending *sent_head, *sent_tail;     /* sent, results not all read */
    db_pending *closing_head, *closing_tail; /* results read, waiting for their Sync result */
    unsigned queued, sent, closing;
    unsigned coalesced;                    /* queued or sent batches' members, less
                                              one per batch */
    unsigned weight;                       /* of the queued and sent queries */
    unsigned syncs;                        /* Syncs sent whose result is not read */
    uint64_t sent_seq;                     /* the last query sent's seq */
    uint64_t synced_seq;                   /* the last query a Sync followed */
    uint64_t flushed_seq;                  /* ... a Sync written out to the server */
    /* The Sync group whose results are being read: */
    bool await_sync;                       /* its last query ended: its Sync comes next */
    bool group_wrote;                      /* a writing query of it has been read */
    bool group_failed;                     /* a query of it failed, or its commit */
    bool commit_ended;                     /* the end of its commit's error was read */
    /* The error result of that group's commit, then, once its Sync
     * result came, of the group it completed, until the driver takes it
     * (db_queue_take_commit_error). Owned by the queue meanwhile. */
    struct pg_result *commit_error;
} db_queue;

typedef enum db_event {
    DB_EVENT_RESULT,   /* a result with data or a command status */
    DB_EVENT_ERROR,    /* PGRES_FATAL_ERROR and friends */
    DB_EVENT_ABORTED,  /* PGRES_PIPELINE_ABORTED */
    DB_EVENT_END,      /* PQgetResult returned NULL */
    DB_EVENT_SYNC,     /* PGRES_PIPELINE_SYNC */
} db_event;

/* Append @p to the queries waiting to be sent (state QUEUED). */
void db_queue_push(db_queue *q, db_pending *p);

/* Remove @p from the waiting queries. False when it is not there (sent). */
bool db_queue_unqueue(db_queue *q, db_pending *p);

/* Move the first waiting query to the sent list (state SENT, attempts+1)
 * and return it; NULL when none waits. */
db_pending *db_queue_send_next(db_queue *q);

/* A Sync was sent after the last sent query. */
void db_queue_mark_sync(db_queue *q);

/* Everything sent so far was written out to the server (PQflush returned
 * 0): the Syncs among it reached the socket. */
void db_queue_mark_flushed(db_queue *q);

/* Whether a Sync after @p (sent, or a batch's member) was flushed: the
 * server may have run and committed it, so a write whose outcome never
 * came may have taken effect. */
bool db_queue_sync_flushed(const db_queue *q, const db_pending *p);

/* Whether the next query to send was sent twice before (aborted or rolled
 * back each time), or is marked `alone`: the driver gives it a Sync group
 * of its own, a Sync before it when queries since the last Sync precede
 * it and one right after it. */
bool db_queue_next_alone(const db_queue *q);

/* Sync groups in flight per connection at most (docs/database.md): past
 * it, queued queries wait for the oldest group's results. */
#define DB_MAX_SYNCS 4u

/* What the driver does next while it sends a turn's queries
 * (db_queue_send_step). */
typedef enum db_send_step {
    DB_SEND_STOP,  /* nothing more to send this turn */
    DB_SEND_QUERY, /* send the next waiting query (db_queue_send_next) */
    DB_SEND_SYNC,  /* send a Sync (db_queue_mark_sync) */
} db_send_step;

/* One driver turn's sending, as db_queue_send_step keeps it. Start it
 * with the two limits set and the rest zero. */
typedef struct db_send_turn {
    unsigned max_queries; /* queries sent per turn at most */
    unsigned max_syncs;   /* Sync groups in flight past which none is begun */
    unsigned sent;        /* queries sent so far this turn */
    bool unsynced;        /* some of them since the last Sync */
    bool end_group;       /* the query sent last ends its Sync group: a Sync
                           * next. Set for a query that goes alone; the
                           * driver sets it for a writing batch that left a
                           * query out for its key (coalesce.h) */
} db_send_turn;

/*
 * db_queue_send_step - the Sync grouping of one driver turn: what to do
 * next, given the waiting queries of @q and the turn so far (@t, updated
 * as if the step were done). The rules:
 *
 *   - every waiting query goes in one Sync group, one Sync at the end:
 *     one write, one round trip, reads and writes alike;
 *   - a query that db_queue_next_alone names gets a group of its own: a
 *     Sync before it when queries of this turn precede it unsynced, and
 *     one right after it; so does a query after which the driver sets
 *     @t->end_group;
 *   - no group is begun while @t->max_syncs groups are in flight (a group
 *     already begun is finished); its queries wait for the next turn;
 *   - at most @t->max_queries queries a turn.
 *
 * The caller does the step: DB_SEND_QUERY, db_queue_send_next and its
 * send; DB_SEND_SYNC, the Sync and db_queue_mark_sync; DB_SEND_STOP ends
 * the turn. Pure: no libpq, no runtime (tests/unit/db/test_queue.c runs
 * it). Source: libpq docs, "Pipeline Mode" (a Sync ends an implicit
 * transaction).
 */
db_send_step db_queue_send_step(const db_queue *q, db_send_turn *t);

/*
 * db_queue_coalesce - take waiting queries @members[0..@n) (in queue
 * order, @members[0] the first waiting query) off the waiting list as
 * @batch's members (linked by `next` in that order, each SENT, attempts
 * 1), and queue @batch (weight their sum) at the head: it is sent next.
 * Until @batch's results are read, its members count in the connection's
 * load (db_queue_prefer) as the queries they are.
 */
void db_queue_coalesce(db_queue *q, db_pending *batch, db_pending *const *members, unsigned n);

/* Whether results are still expected (queries or Syncs in flight). */
bool db_queue_busy(const db_queue *q);

/*
 * db_queue_prefer - whether a new query should go to the connection of
 * queue @k rather than to that of @best (both up), under @routing
 * (db_routing in coring/db/db.h); @max_syncs is the driver's limit of Sync
 * groups in flight, past which a queued query waits rather than going out
 * at the turn's end. Ties keep @best, so the first of equals wins.
 */
bool db_queue_prefer(const db_queue *k, const db_queue *best, db_routing routing,
                     unsigned max_syncs);

/* DB_ROUTING_FILL's depth: a connection with this much work queued or in
 * flight is full, and the next query goes to another one. A query counts
 * 1 plus its weight: 1 for a lookup by key (~50 bytes of values), so that
 * a thread's usual concurrency at a few clients (10 on one thread) stays
 * on one backend; 10 for the users app's 50-row list (~2.5 KB), so that
 * with two of them out the next wakes the second backend
 * (docs/database.md). */
#define DB_FILL_DEPTH 16u
/* The bytes of result values one unit of weight stands for. */
#define DB_FILL_UNIT_BYTES 256u

/*
 * db_queue_feed - account for one PQgetResult() outcome @ev (@res its
 * result, stored in the head query for RESULT and ERROR). Returns false when
 * @ev does not fit what was sent (the connection must be dropped); then
 * @res was not stored. *@done is set to the queries whose results are
 * complete (taken off the queue), a list linked by `next` in the order
 * sent (several at a Sync), or NULL. A query of the list with `aborted`
 * or `rolled_back` set did not take effect: send it again or fail it.
 */
bool db_queue_feed(db_queue *q, db_event ev, struct pg_result *res, db_pending **done);

/*
 * db_queue_take_commit_error - right after db_queue_feed completed a Sync
 * group (DB_EVENT_SYNC): the error result of that group's commit, when it
 * failed to commit (its queries in *done are commit_failed), for the
 * caller to give to the one at fault or free; else NULL. Once per group.
 */
struct pg_result *db_queue_take_commit_error(db_queue *q);

/*
 * db_queue_cancel_target - what a cancel request would interrupt now, when
 * that is work no one waits for any more: the oldest query whose results
 * are not all read (the statement the server runs, or runs next) if it is
 * abandoned; or, once its Sync group's last query ended, the group's
 * commit, if a query waiting for it is. Returns that query's seq (the
 * group's last, for a commit) to name it, or 0 for nothing to cancel.
 * Pure (cancel.h acts on it).
 */
uint64_t db_queue_cancel_target(const db_queue *q);

/* Take every query off @q (waiting, sent and closing) as a list linked by
 * `next`, in order, and reset @q; a commit error it holds is left in
 * q->commit_error for the caller to free, and its numbering goes on
 * (db_queue_sync_flushed still answers for the queries taken). */
db_pending *db_queue_take_all(db_queue *q);

#endif
