/*
 * Internal to db/: a query's memory and its hand-over. A db_pending
 * (queue.h) is taken from the thread pool's free list when a request asks
 * (pool.c) or the driver coalesces (coalesce.c), and goes back there when
 * its waiter has its outcome or gave up; its result is libpq's until then.
 * Worker thread that owns the pool only.
 */
#ifndef CORING_DB_PENDING_H
#define CORING_DB_PENDING_H

#include "queue.h"

/* A zeroed query from @free_list (the pool's), or a new one; NULL
 * without memory. */
db_pending *db_pending_alloc(db_pending **free_list);

/* Put @p on @free_list, its result (PQclear) and its owned memory freed. */
void db_pending_free(db_pending **free_list, db_pending *p);

/* Hand @p's outcome (p->error, p->result) to its waiter, woken with
 * net_unpark, or free it when the waiter gave up. A batch hands its error
 * (-EIO when it has none) to each of its members, then is freed. */
void db_pending_done(db_pending **free_list, db_pending *p);

#endif
