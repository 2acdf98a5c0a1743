/*
 * Blocking database work for start-up and tools, on the main thread before
 * serving: schema migrations and one-off statements (seeding). These calls
 * use libpq's blocking API; never call them from a worker thread.
 *
 * Migrations are the numbered SQL files of db/migrations (NNNN_name.sql),
 * built into the binary, applied in order of their number. Each runs in a
 * transaction together with its row in the table schema_migrations
 * (version, name, applied_at); a session advisory lock keeps two processes
 * starting at once from applying the same one twice. A migration already
 * recorded is never applied again.
 */
#ifndef CORING_DB_ADMIN_H
#define CORING_DB_ADMIN_H

#include "coring/db/db.h"

#include <stddef.h>

/* One migration built into the binary. */
typedef struct db_migration {
    const char *file;   /* "0001_users.sql" */
    const char *sql;    /* its content */
} db_migration;

/* db_migrations - the built-in migrations, sorted by file name; their
 * count in *@count. Static data. */
const db_migration *db_migrations(size_t *count);

/*
 * db_migrate - apply the built-in migrations not yet recorded in
 * schema_migrations, on a new connection to @conninfo.
 * @applied: set to how many were applied now (may be NULL).
 * @err, @err_len: a one-line English reason on failure (always terminated).
 * Returns 0, -ECONNREFUSED (cannot connect, target_session_attrs
 * refusing a server included), -EROFS (the server is read-only: a hot
 * standby, SQLSTATE 25006; a failover may make it writable), -EINVAL (a
 * file without a leading number) or -EIO (a statement failed; nothing of
 * that migration stays). Blocking; main thread, before serving.
 */
int db_migrate(const char *conninfo, int *applied, char *err, size_t err_len);

/*
 * db_conninfo_check - whether libpq takes @conninfo (a URI or key=value
 * string, as DATABASE_URL) as it is written: PQconninfoParse, which
 * checks the syntax and the option names and connects to nothing.
 * Returns 0, or -EINVAL with libpq's reason in @err (as for db_migrate),
 * or -ENOMEM. Any thread; never blocks.
 */
int db_conninfo_check(const char *conninfo, char *err, size_t err_len);

/*
 * db_exec - run @sql once with the @count parameters @params (C values as
 * for db_run, each sent in binary format as its own type: db_param_int64
 * is a bigint) on a new connection to @conninfo (blocking; PQexecParams).
 * *@affected gets the row count of the command (PQcmdTuples) when not
 * NULL.
 * Returns 0, -ECONNREFUSED, -EIO, or -EINVAL / -ERANGE for a parameter
 * db_run would refuse (more than DB_MAX_PARAMS, text over INT_MAX bytes),
 * with @err as for db_migrate. Main thread, before serving.
 */
int db_exec(const char *conninfo, const char *sql, const db_param *params, size_t count,
            long long *affected, char *err, size_t err_len);

#endif
