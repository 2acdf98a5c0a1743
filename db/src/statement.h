/*
 * Internal to db/: the process-wide list of typed statements (db_register),
 * which every connection prepares when it opens (connect.c).
 *
 * Filled on the main thread before any pool opens, read-only after (but
 * for each statement's atomic batch_refused flag): the first
 * db_thread_init closes it (db_statements_close), and the worker threads,
 * started after registration, read it without a lock.
 */
#ifndef CORING_DB_STATEMENT_H
#define CORING_DB_STATEMENT_H

#include "coring/db/db.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct db_stmt {
    db_statement def;               /* as registered */
    int nparams;                    /* leading types of @def.types */
    unsigned oids[DB_MAX_PARAMS];   /* paramTypes for PQprepare */
    char name[24];                  /* the prepared statement's name: "coring_t<n>" */
    size_t index;                   /* <n>: its place in db_statements() */
    const db_stmt *batch;           /* its batch form (def.batch_sql), registered
                                       after it, or NULL */
    atomic_bool batch_refused;      /* the form does not stand in for it
                                       (db_stmt_refuse_batch) */
};

/* The registered statements, in order, and their count. */
const db_stmt *const *db_statements(size_t *count);

/* Whether the queries of @s may be coalesced: it has a batch form, not
 * refused. Any thread; inline, as the driver asks it for every query it
 * sends. */
static inline bool db_stmt_batches(const db_stmt *s)
{
    return s->batch && !atomic_load_explicit(&s->batch_refused, memory_order_relaxed);
}

/* Stop coalescing the queries of @s, whose batch form was found not to
 * stand in for it (its description, or a result, did not fit): the same
 * on every connection, so once for the process. Any thread. Returns true
 * for the first call on @s (the caller logs why). */
bool db_stmt_refuse_batch(const db_stmt *s);

/* No more registrations: pools are opening. Any thread; idempotent. */
void db_statements_close(void);

/* The first 60 bytes of @s's SQL, and whether there are more: for
 * messages ("%.60s%s"). */
#define DB_SQL_HEAD(s) (s)->def.sql, strlen((s)->def.sql) > 60 ? "..." : ""

#endif
