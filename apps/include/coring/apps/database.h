/*
 * The apps' shared database: one pipelined pool per worker thread (db/),
 * whose prepared statements are those of every mounted app that uses it.
 *
 * An app registers each statement when it mounts (app_db_statement) and
 * keeps its handle; coring_main() then, once, checks DATABASE_URL, applies
 * the migrations of the mounted apps (app_def.migrations, and those added
 * with app_db_migrations) and opens each worker's pool before the apps'
 * own per-thread set-up.
 */
#ifndef CORING_APPS_DATABASE_H
#define CORING_APPS_DATABASE_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/apps/apps.h"
#include "coring/db/admin.h"
#include "coring/db/db.h"

/*
 * app_db_statement - register typed statement @def (db_register: its
 * parameter types in @def->types) for app @app (its name, for messages;
 * static). *@out is the handle to run it with (db_run, DB_RUN).
 * Returns 0 or db_register's error (-EINVAL, -EBUSY, -ENOMEM).
 * Main thread, in an app's mount().
 */
int app_db_statement(const char *app, const db_statement *def, const db_stmt **out);

/*
 * app_db_migrations - apply @set (kept by pointer: static) with the
 * mounted apps' migrations, after those added before it; a set added
 * again is applied once. For what owns tables besides the apps (the
 * Idempotency-Key helper); coring_main() adds each mounted app's
 * app_def.migrations itself. Returns 0, or -ENOSPC past 32 sets. Main
 * thread, before app_db_start (an app's mount()).
 */
int app_db_migrations(const db_migration_set *set);

/* app_db_require - note that app @app (its name, static) needs the
 * database even if it registers no statement (coring_main() does it for
 * every mounted app whose app_def.database is set). Main thread, before
 * app_db_start. */
void app_db_require(const char *app);

/* app_db_used - whether any mounted app needs the database: it
 * registered statements, or app_db_require named it. */
bool app_db_used(void);

/*
 * app_db_check - the database settings' checks that need no network:
 * DATABASE_URL is set (else a message naming the apps that need it), and
 * it and DATABASE_READ_URL, when set, are conninfo strings libpq takes
 * (db_conninfo_check). Returns 0, or -EINVAL after logging why (-ENOMEM).
 * Main thread; app_db_start runs it first, --check-config alone.
 */
int app_db_check(void);

/*
 * app_db_start - read DATABASE_URL (and DATABASE_READ_URL, the optional
 * read replica: docs/operating.md), apply the migrations added (db_migrate,
 * in the order added; tried again every second for up to
 * @opts->db_start_wait_ns while the primary is unreachable or read-only)
 * and prepare the pool settings from @opts. Main thread, after mounting
 * and before serving; blocks. Returns 0, or -EINVAL (no DATABASE_URL) or
 * the migration's error, after logging what went wrong and how to fix it.
 */
int app_db_start(const app_options *opts);

/*
 * app_db_longest_request_ns - app_def.longest_request_ns of an app whose
 * requests run up to two queries one after the other, each bounded by
 * --db-timeout (@opts->db_timeout_ns, 0: db_config's default): a POST
 * with an Idempotency-Key (its insert, then the key's answer after a
 * conflict), a read asked of the replica then of the primary. Writes "2 x
 * --db-timeout 5 s" into @why (@len bytes) when not NULL. Main thread.
 */
uint64_t app_db_longest_request_ns(const app_options *opts, char *why, size_t len);

/* app_db_url - the DATABASE_URL in use (after app_db_start), or NULL. */
const char *app_db_url(void);

/* app_db_ready - an app_def.ready hook for the apps on the database: NULL
 * when every worker thread's pool has a connection up, else why not
 * ("unreachable: ...", written into @buf, @len bytes). Worker thread, in a
 * request's coroutine; never blocks (db_ready). */
const char *app_db_ready(char *buf, size_t len);

/* app_db_read_ready - the /readyz check "database_read" (mounted by
 * app_db_start when DATABASE_READ_URL is set): writes into @buf where this
 * thread's reads go, "replica" or "primary (replica unreachable: ...)",
 * and returns NULL: reads are served either way, so it never makes the
 * server not ready. Worker thread; never blocks (db_reading_replica). */
const char *app_db_read_ready(char *buf, size_t len);

/* The error of a 504 for a write whose outcome is unknown (-EINPROGRESS). */
#define APP_DB_OUTCOME_UNKNOWN                                                                     \
    "outcome unknown: the database did not confirm the write, which may or may not have been "   \
    "done; a retry with the same Idempotency-Key is safe"

/*
 * app_db_respond_error - the apps' one answer to a failed db_run (@err,
 * with result @r) of app @app (for the log line): -EREMOTEIO (the server's
 * error, logged with its SQLSTATE), -ENOMEM and the app's own mistakes
 * (-EINVAL, -ERANGE, -EPERM, -EPROTO: logged) answer 500; -EINPROGRESS (a
 * write sent to the server whose commit was not confirmed: the connection
 * broke, or the query timeout passed) answers 504 with
 * APP_DB_OUTCOME_UNKNOWN, so that a client retries with its
 * Idempotency-Key rather than take the write for failed; every other
 * error (-ENOTCONN, -ECONNRESET, -ETIMEDOUT, -ECANCELED: no connection,
 * lost or timed out before the write could take effect, shutting down)
 * answers 503 {"error":"database unavailable"} with Retry-After: 1. An app
 * that maps some SQLSTATEs to 4xx checks those first. Request handler
 * (coroutine on a worker thread).
 */
void app_db_respond_error(http_ctx *ctx, const char *app, int err, const db_result *r);

/* app_db_thread_init / app_db_thread_fini - open / free this worker's pool
 * (db_thread_init / db_thread_fini); no-ops when no app uses the database. */
int app_db_thread_init(void);
void app_db_thread_fini(void);

#endif
