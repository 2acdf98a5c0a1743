/*
 * Blocking database work for start-up and tools, on the main thread before
 * serving: schema migrations and one-off statements (seeding). These calls
 * use libpq's blocking API; never call them from a worker thread.
 *
 * Migrations belong to an owner (an app): each owner's are numbered SQL
 * texts (NNNN_name.sql) applied in the order of their numbers, the owners
 * in the order given. Each runs in a transaction together with its row in
 * the table schema_migrations (app, version, name, applied_at); a session
 * advisory lock keeps two processes starting at once from applying the
 * same one twice. A migration already recorded is never applied again.
 *
 * Before owners (coring 0.1.0 and earlier) the table had no app column and
 * every migration one number of one sequence: such a table gets the
 * column (those rows '' in it), and a row (app '', version, name) counts
 * as the owner's migration of the same version and name, and is given to
 * that owner when it is next applied.
 */
#ifndef CORING_DB_ADMIN_H
#define CORING_DB_ADMIN_H

#include "coring/db/db.h"

#include <stddef.h>

/* One migration: a file's name and its SQL (one or more statements). */
typedef struct db_migration {
    const char *file;   /* "0001_users.sql": its number, then a name */
    const char *sql;    /* its content */
} db_migration;

/* An owner's migrations, in the order they apply (increasing numbers). */
typedef struct db_migration_set {
    const char *owner;         /* "users": their namespace in schema_migrations; not "" */
    const db_migration *list;
    size_t count;
} db_migration_set;

/*
 * db_migrate - apply the migrations of the @num_sets @sets not yet
 * recorded in schema_migrations, on a new connection to @conninfo: the
 * sets in order, each one's migrations in order.
 * @applied: set to how many were applied now (may be NULL).
 * @err, @err_len: a one-line English reason on failure (always terminated).
 * Returns 0, -ECONNREFUSED (cannot connect, target_session_attrs
 * refusing a server included), -EROFS (the server is read-only: a hot
 * standby, SQLSTATE 25006; a failover may make it writable), -EINVAL (an
 * owner missing or given twice, a file without a leading number, numbers
 * of an owner that do not increase) or -EIO (a statement failed; nothing
 * of that migration stays). Blocking; main thread, before serving.
 */
int db_migrate(const char *conninfo, const db_migration_set *sets, size_t num_sets, int *applied,
               char *err, size_t err_len);

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
