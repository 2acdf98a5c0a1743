/*
 * Internal to db/: the process-wide list of typed statements (db_register),
 * which every connection prepares when it opens (pool.c).
 *
 * Filled on the main thread before any pool opens, read-only after: the
 * first db_thread_init closes it (db_statements_close), and the worker
 * threads, started after registration, read it without a lock.
 */
#ifndef CORING_DB_STATEMENT_H
#define CORING_DB_STATEMENT_H

#include "coring/db/db.h"

#include <stddef.h>

struct db_stmt {
    db_statement def;               /* as registered */
    int nparams;                    /* leading types of @def.types */
    unsigned oids[DB_MAX_PARAMS];   /* paramTypes for PQprepare */
    char name[24];                  /* the prepared statement's name: "coring_t<n>" */
    size_t index;                   /* <n>: its place in db_statements() */
    const db_stmt *batch;           /* its batch form (def.batch_sql), registered
                                       after it, or NULL */
};

/* The registered statements, in order, and their count. */
const db_stmt *const *db_statements(size_t *count);

/* No more registrations: pools are opening. Any thread; idempotent. */
void db_statements_close(void);

#endif
