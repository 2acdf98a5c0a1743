/*
 * The bookkeeping of one pipelined connection: see queue.h.
 */
#include "queue.h"

#include <stddef.h>

/* Link @p at the end of the list (*@head, *@tail). */
static void link_tail(db_pending **head, db_pending **tail, db_pending *p)
{
    p->next = NULL;
    if (*tail)
        (*tail)->next = p;
    else
        *head = p;
    *tail = p;
}

void db_queue_push(db_queue *q, db_pending *p)
{
    p->state = DB_PENDING_QUEUED;
    p->sync_after = p->aborted = p->failed = p->rolled_back = p->commit_failed = false;
    p->cancel_hit = false;
    p->batch = NULL;
    link_tail(&q->queued_head, &q->queued_tail, p);
    q->queued++;
    q->weight += p->weight;
}

bool db_queue_unqueue(db_queue *q, db_pending *p)
{
    db_pending *prev = NULL;
    for (db_pending *it = q->queued_head; it; prev = it, it = it->next) {
        if (it != p)
            continue;
        if (prev)
            prev->next = p->next;
        else
            q->queued_head = p->next;
        if (q->queued_tail == p)
            q->queued_tail = prev;
        q->queued--;
        q->weight -= p->weight;
        p->next = NULL;
        return true;
    }
    return false;
}

db_pending *db_queue_send_next(db_queue *q)
{
    db_pending *p = q->queued_head;
    if (!p)
        return NULL;
    q->queued_head = p->next;
    if (!q->queued_head)
        q->queued_tail = NULL;
    q->queued--;
    p->state = DB_PENDING_SENT;
    p->attempts++;
    p->seq = ++q->sent_seq;
    for (db_pending *m = p->members; m; m = m->next)
        m->seq = p->seq;
    link_tail(&q->sent_head, &q->sent_tail, p);
    q->sent++;
    return p;
}

void db_queue_coalesce(db_queue *q, db_pending *batch, db_pending *const *members, unsigned n)
{
    db_pending *prev = NULL, *it = q->queued_head, *tail = NULL;
    unsigned k = 0;
    batch->members = NULL;
    batch->nmembers = 0;
    batch->weight = 0;
    while (it && k < n) {
        db_pending *next = it->next;
        if (it != members[k]) {
            prev = it;
            it = next;
            continue;
        }
        k++;
        if (prev)
            prev->next = next;
        else
            q->queued_head = next;
        if (q->queued_tail == it)
            q->queued_tail = prev;
        q->queued--;
        q->weight -= it->weight;
        it->state = DB_PENDING_SENT;
        it->attempts = 1;
        it->next = NULL;
        it->batch = batch;
        if (tail)
            tail->next = it;
        else
            batch->members = it;
        tail = it;
        batch->nmembers++;
        batch->weight += it->weight;
        it = next;
    }
    batch->state = DB_PENDING_QUEUED;
    batch->sync_after = batch->aborted = batch->failed = batch->rolled_back = false;
    batch->commit_failed = false;
    batch->next = q->queued_head;
    q->queued_head = batch;
    if (!q->queued_tail)
        q->queued_tail = batch;
    q->queued++;
    q->weight += batch->weight;
    q->coalesced += batch->nmembers ? batch->nmembers - 1 : 0;
}

void db_queue_mark_sync(db_queue *q)
{
    if (q->sent_tail)
        q->sent_tail->sync_after = true;
    q->syncs++;
    q->synced_seq = q->sent_seq;
}

void db_queue_mark_flushed(db_queue *q)
{
    q->flushed_seq = q->synced_seq;
}

bool db_queue_sync_flushed(const db_queue *q, const db_pending *p)
{
    return p->seq && p->seq <= q->flushed_seq;
}

bool db_queue_next_alone(const db_queue *q)
{
    return q->queued_head && (q->queued_head->attempts >= 2 || q->queued_head->alone);
}

db_send_step db_queue_send_step(const db_queue *q, db_send_turn *t)
{
    if (t->end_group && t->unsynced) {
        /* Right after a query that goes alone or ends its group. */
        t->end_group = t->unsynced = false;
        return DB_SEND_SYNC;
    }
    t->end_group = false;
    if (t->sent < t->max_queries && q->queued) {
        bool alone = db_queue_next_alone(q);
        if (alone && t->unsynced) {
            /* Close the group before it: it goes alone. */
            t->unsynced = false;
            return DB_SEND_SYNC;
        }
        if (t->unsynced || q->syncs < t->max_syncs) {
            t->sent++;
            t->unsynced = true;
            t->end_group = alone;
            return DB_SEND_QUERY;
        }
        /* At the limit of groups in flight: the rest waits. */
    }
    if (t->unsynced) {
        t->unsynced = false;
        return DB_SEND_SYNC;
    }
    return DB_SEND_STOP;
}

bool db_queue_busy(const db_queue *q)
{
    return q->sent || q->syncs || q->closing;
}

/* PACK's order: 0 nothing queued or in flight, 1 a Sync group being
 * formed that will go out at the turn's end, 2 the rest. */
static unsigned pack_tier(const db_queue *q, unsigned max_syncs)
{
    if (!q->queued && !db_queue_busy(q))
        return 0;
    return q->queued && q->syncs < max_syncs ? 1 : 2;
}

/* Queries queued or in flight on @q's connection, a batch's members each
 * counted: its backend's backlog. */
static unsigned load(const db_queue *q)
{
    return q->queued + q->sent + q->coalesced;
}

/* That backlog as work: each query 1 plus its weight. */
static unsigned work(const db_queue *q)
{
    return load(q) + q->weight;
}

bool db_queue_prefer(const db_queue *k, const db_queue *best, db_routing routing,
                     unsigned max_syncs)
{
    if (routing == DB_ROUTING_FILL) {
        /* The first connection below the depth, so that the backends
         * after it sleep until it is deep; past that, the least loaded. */
        bool kb = work(k) < DB_FILL_DEPTH, bb = work(best) < DB_FILL_DEPTH;
        if (kb || bb)
            return kb && !bb;
    }
    if (routing == DB_ROUTING_PACK) {
        unsigned tk = pack_tier(k, max_syncs), tb = pack_tier(best, max_syncs);
        if (tk != tb)
            return tk < tb;
    }
    return load(k) < load(best);
}

static db_pending *pop_sent(db_queue *q)
{
    db_pending *p = q->sent_head;
    q->sent_head = p->next;
    if (!q->sent_head)
        q->sent_tail = NULL;
    q->sent--;
    q->weight -= p->weight;
    q->coalesced -= p->nmembers ? p->nmembers - 1 : 0;
    p->next = NULL;
    return p;
}

/* The queries of @list (linked by next), which waited for their Sync
 * group's result: when a query of the group failed (@failed), those that
 * succeeded were rolled back with it; when its commit failed (@commit),
 * all were, and the group's only write, if it had one, failed. */
static void mark_group(db_pending *list, bool failed, bool commit)
{
    unsigned writes = 0;
    for (db_pending *it = list; it && commit; it = it->next)
        writes += it->writes;
    for (db_pending *it = list; it; it = it->next) {
        it->commit_failed = commit;
        if (commit && writes == 1 && it->writes)
            it->failed = true; /* the one at fault: the error is its own */
        else if (failed && !it->failed && !it->aborted)
            it->rolled_back = true;
    }
}

bool db_queue_feed(db_queue *q, db_event ev, struct pg_result *res, db_pending **done)
{
    *done = NULL;
    if (q->await_sync) {
        /* The group's last query ended; only its Sync's result may follow,
         * or an error at its commit and that error's end first. */
        if (ev == DB_EVENT_ERROR && !q->commit_error) {
            q->commit_error = res;
            q->group_failed = true;
            return true;
        }
        if (ev == DB_EVENT_END && q->commit_error && !q->commit_ended) {
            q->commit_ended = true;
            return true;
        }
        if (ev != DB_EVENT_SYNC)
            return false;
        db_pending *list = q->closing_head;
        mark_group(list, q->group_failed, q->commit_error != NULL);
        *done = list;
        q->closing_head = q->closing_tail = NULL;
        q->closing = 0;
        q->syncs--;
        q->await_sync = q->group_wrote = q->group_failed = q->commit_ended = false;
        return true;
    }
    if (ev == DB_EVENT_SYNC) {
        /* Every Sync follows a query marked sync_after, so its result
         * comes once that query ended; only a Sync sent with no query
         * before it (an empty group) comes otherwise. */
        if (!q->syncs || q->closing)
            return false;
        q->syncs--;
        return true;
    }
    db_pending *p = q->sent_head;
    if (!p)
        return false;
    switch (ev) {
    case DB_EVENT_RESULT:
    case DB_EVENT_ERROR:
        if (p->result)
            return false; /* one statement, one result */
        p->result = res;
        p->failed = ev == DB_EVENT_ERROR;
        return true;
    case DB_EVENT_ABORTED:
        p->aborted = true;
        return true;
    case DB_EVENT_END:
        pop_sent(q);
        q->group_wrote = q->group_wrote || p->writes;
        q->group_failed = q->group_failed || p->failed;
        if (q->group_wrote) {
            link_tail(&q->closing_head, &q->closing_tail, p);
            q->closing++;
        } else {
            *done = p;
        }
        if (p->sync_after)
            q->await_sync = true; /* with nothing closing, the Sync completes none */
        return true;
    case DB_EVENT_SYNC:
        break;
    }
    return false;
}

static void append_list(db_pending **head, db_pending **tail, db_pending *list)
{
    while (list) {
        db_pending *next = list->next;
        link_tail(head, tail, list);
        list = next;
    }
}

uint64_t db_queue_cancel_target(const db_queue *q)
{
    if (q->await_sync) {
        for (const db_pending *it = q->closing_head; it; it = it->next)
            if (it->abandoned)
                return q->closing_tail->seq;
        return 0;
    }
    const db_pending *p = q->sent_head;
    return p && p->abandoned ? p->seq : 0;
}

struct pg_result *db_queue_take_commit_error(db_queue *q)
{
    if (q->await_sync)
        return NULL; /* the group's Sync result has not come yet */
    struct pg_result *res = q->commit_error;
    q->commit_error = NULL;
    return res;
}

db_pending *db_queue_take_all(db_queue *q)
{
    db_pending *head = NULL, *tail = NULL;
    append_list(&head, &tail, q->closing_head);
    append_list(&head, &tail, q->sent_head);
    append_list(&head, &tail, q->queued_head);
    /* The numbering goes on: what was flushed of the queries taken can
     * still be asked (db_queue_sync_flushed), and a query sent later
     * never passes for one of theirs. */
    *q = (db_queue){.commit_error = q->commit_error, .sent_seq = q->sent_seq,
                    .synced_seq = q->synced_seq, .flushed_seq = q->flushed_seq};
    return head;
}
