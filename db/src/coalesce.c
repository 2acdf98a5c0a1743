/*
 * Picking the waiting queries that ride in one query of their statement's
 * batch form, and building it: see coalesce.h.
 */
#include "coalesce.h"

#include "codec.h"
#include "metrics.h"
#include "pending.h"
#include "statement.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* The parameters of a batch, in memory of the driver's (db_pending.owned). */
typedef struct batch_params {
    const char *values[DB_MAX_PARAMS];
    int lengths[DB_MAX_PARAMS];
    int formats[DB_MAX_PARAMS];
    char data[];
} batch_params;

/* Parameter @i of queries @taken[0..@n) into @values and @lengths. */
static void gather(db_pending *const *taken, unsigned n, int i, const char **values,
                   int *lengths)
{
    for (unsigned k = 0; k < n; k++) {
        values[k] = taken[k]->values[i];
        lengths[k] = taken[k]->lengths[i];
    }
}

/* Whether waiting query @p may ride in a batch of @stmt: it asks @stmt,
 * was never sent, has a key (not SQL NULL), and carries no trace comment
 * of its own (sqlcomment.h). */
static bool eligible(const db_stmt *stmt, const db_pending *p)
{
    return p->stmt == stmt && !p->attempts && p->values[stmt->def.batch_key_param] && !p->sql;
}

/* Whether one of @taken[0..@n) has @p's key parameter @k: a batch gives
 * each row to one query, so its keys are distinct. */
static bool key_taken_by(const db_pending *p, int k, db_pending *const *taken, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (taken[i]->lengths[k] == p->lengths[k] &&
            memcmp(taken[i]->values[k], p->values[k], (size_t)p->lengths[k]) == 0)
            return true;
    return false;
}

unsigned db_coalesce_pick(const db_queue *q, db_pending **taken, bool *ends_group)
{
    db_pending *first = q->queued_head;
    if (!first || !first->stmt || !db_stmt_batches(first->stmt))
        return 0;
    const db_stmt *stmt = first->stmt;
    unsigned n = 0;
    bool key_taken = false;
    for (db_pending *p = first; p; p = p->next) {
        if (!eligible(stmt, p))
            continue;
        if (n < DB_COALESCE_MAX && !key_taken_by(p, stmt->def.batch_key_param, taken, n)) {
            taken[n++] = p;
            continue;
        }
        /* Its key is taken, or the batch is full and its key not looked
         * at: it must not share the batch's transaction. */
        key_taken = true;
        if (n == DB_COALESCE_MAX)
            break;
    }
    if (n < 2 || taken[0] != first)
        return 0;
    *ends_group = key_taken && stmt->def.writes;
    return n;
}

bool db_coalesce(db_queue *q, db_pending **free_list)
{
    db_pending *taken[DB_COALESCE_MAX];
    bool ends_group;
    unsigned n = db_coalesce_pick(q, taken, &ends_group);
    if (!n)
        return false;
    const db_stmt *stmt = taken[0]->stmt;
    const char *values[DB_COALESCE_MAX];
    int lengths[DB_COALESCE_MAX];
    size_t sizes[DB_MAX_PARAMS], total = 0;
    for (int i = 0; i < stmt->nparams; i++) {
        gather(taken, n, i, values, lengths);
        sizes[i] = db_encode_array(stmt->oids[i], n, values, lengths, NULL);
        if (sizes[i] > INT_MAX)
            return false;
        total += sizes[i];
    }
    db_pending *b = db_pending_alloc(free_list);
    batch_params *bp = b ? malloc(sizeof(*bp) + total) : NULL;
    if (!bp) {
        if (b)
            db_pending_free(free_list, b);
        return false;
    }
    char *at = bp->data;
    for (int i = 0; i < stmt->nparams; i++) {
        gather(taken, n, i, values, lengths);
        db_encode_array(stmt->oids[i], n, values, lengths, at);
        bp->values[i] = at;
        bp->lengths[i] = (int)sizes[i];
        bp->formats[i] = 1;
        at += sizes[i];
    }
    b->stmt = stmt->batch;
    b->name = stmt->batch->name;
    b->nparams = stmt->nparams;
    b->values = bp->values;
    b->lengths = bp->lengths;
    b->formats = bp->formats;
    b->result_format = 1;
    b->writes = stmt->def.writes;
    b->owned = bp;
    db_queue_coalesce(q, b, taken, n);
    cr_metric_inc(&db_metrics.batches, 0);
    cr_metric_add(&db_metrics.coalesced, 0, n);
    return ends_group;
}
