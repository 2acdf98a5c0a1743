/*
 * Internal to db/: coalescing (coring/db/db.h, "Coalescing";
 * docs/database.md). When the queries waiting on a connection ask a
 * statement that has a batch form, the driver sends them as one query of
 * that form, whose parameters are arrays of theirs: PostgreSQL starts,
 * checks and commits one statement instead of many. This file picks the
 * queries and builds the batch; batch.h hands the batch's rows back to
 * each of them; the driver (driver.c) decides, with retry.h, what a
 * failed batch's queries become. Worker thread that owns the pool only.
 */
#ifndef CORING_DB_COALESCE_H
#define CORING_DB_COALESCE_H

#include "queue.h"

#include <stdbool.h>

/*
 * db_coalesce_pick - the queries of @q that would ride in one batch, into
 * @taken (room for DB_COALESCE_MAX), in queue order: when the first
 * waiting query's statement has a batch form not refused
 * (db_stmt_batches), the waiting queries of that statement never sent,
 * with a key (not SQL NULL), each key once, up to DB_COALESCE_MAX. Returns
 * their count, or 0 when fewer than 2 or the first waiting query is not
 * among them. *@ends_group says whether the batch must end its Sync group
 * (set when the count is not 0): a writing statement's query left out,
 * for its key or because the batch was full, would otherwise run in the
 * batch's transaction and, a duplicate, roll the whole batch back. Pure:
 * reads @q only.
 */
unsigned db_coalesce_pick(const db_queue *q, db_pending **taken, bool *ends_group);

/*
 * db_coalesce - replace the queries db_coalesce_pick chooses with one
 * query of the batch form, queued first (db_queue_coalesce), its array
 * parameters (binary format, codec.h) in memory it owns; counts
 * db_batches_total and db_coalesced_queries_total. The batch's query
 * comes from @free_list (pending.h). Without memory, or with an array
 * over INT_MAX bytes, nothing changes and the queries go one by one.
 * Returns whether the batch must end its Sync group (db_coalesce_pick);
 * false when no batch was made.
 */
bool db_coalesce(db_queue *q, db_pending **free_list);

#endif
