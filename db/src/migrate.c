/*
 * Start-up database work with libpq's blocking API: schema migrations and
 * one-off statements. See coring/db/admin.h.
 */
#include "coring/db/admin.h"

#include "codec.h"
#include "coring/core/error.h"
#include "coring/core/log.h"

#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Any constant shared by every coring process: the advisory lock's key. */
#define DB_MIGRATION_LOCK "7236178512"

static void set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    err[strcspn(err, "\n")] = '\0';
}

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    cr_log_debug("database: %s", message);
}

static PGconn *connect_blocking(const char *conninfo, char *err, size_t err_len)
{
    PGconn *pg = PQconnectdb(conninfo);
    if (!pg) {
        set_err(err, err_len, "out of memory");
        return NULL;
    }
    if (PQstatus(pg) != CONNECTION_OK) {
        set_err(err, err_len, "cannot connect: %s", PQerrorMessage(pg));
        PQfinish(pg);
        return NULL;
    }
    PQsetNoticeProcessor(pg, quiet_notice, NULL);
    return pg;
}

/* Run @sql with parameters as PQexecParams takes them (NULL @types,
 * @lengths, @formats: text, types inferred); true when it succeeded.
 * @what names it in the error. */
/* Whether the last statement that failed here failed because the
 * session is read-only (SQLSTATE 25006: a hot standby, or
 * default_transaction_read_only). Main thread only, as this file is. */
static bool failed_read_only;

/* Note @r's failure for db_migrate's return. */
static void note_failure(const PGresult *r)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    failed_read_only = state && strcmp(state, "25006") == 0;
}

static bool run_params(PGconn *pg, const char *what, const char *sql, int nparams,
                       const Oid *types, const char *const *values, const int *lengths,
                       const int *formats, PGresult **keep, char *err, size_t err_len)
{
    PGresult *r = PQexecParams(pg, sql, nparams, types, values, lengths, formats, 0);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) {
        note_failure(r);
        set_err(err, err_len, "%s: %s", what, r ? PQresultErrorMessage(r) : PQerrorMessage(pg));
    }
    if (keep && ok)
        *keep = r;
    else
        PQclear(r);
    return ok;
}

/* run_params with text parameters. */
static bool run(PGconn *pg, const char *what, const char *sql, int nparams,
                const char *const *values, PGresult **keep, char *err, size_t err_len)
{
    return run_params(pg, what, sql, nparams, NULL, values, NULL, NULL, keep, err, err_len);
}

int db_conninfo_check(const char *conninfo, char *err, size_t err_len)
{
    char *why = NULL;
    PQconninfoOption *opts = PQconninfoParse(conninfo, &why);
    if (opts) {
        PQconninfoFree(opts);
        return 0;
    }
    if (!why) {
        set_err(err, err_len, "out of memory");
        return -ENOMEM;
    }
    set_err(err, err_len, "%s", why);
    PQfreemem(why);
    return -EINVAL;
}

int db_exec(const char *conninfo, const char *sql, const db_param *params, size_t count,
            long long *affected, char *err, size_t err_len)
{
    if (count > DB_MAX_PARAMS || (count && !params)) {
        set_err(err, err_len, "statement: more than %d parameters", DB_MAX_PARAMS);
        return -EINVAL;
    }
    /* Each parameter is sent as its own C type says (binary format),
     * like db_run's; SQL NULL leaves the type to the server. */
    char bytes[DB_MAX_PARAMS][8];
    const char *values[DB_MAX_PARAMS];
    int lengths[DB_MAX_PARAMS], formats[DB_MAX_PARAMS];
    Oid types[DB_MAX_PARAMS];
    for (size_t i = 0; i < count; i++) {
        types[i] = params[i].null ? 0 : (Oid)params[i].type;
        formats[i] = 1;
        int e = db_encode_param(&params[i], params[i].type, bytes[i], &values[i], &lengths[i]);
        if (e < 0) {
            set_err(err, err_len, "statement: parameter $%zu: %s", i + 1, cr_strerror(e));
            return e;
        }
    }
    PGconn *pg = connect_blocking(conninfo, err, err_len);
    if (!pg)
        return -ECONNREFUSED;
    PGresult *r = NULL;
    int ret = run_params(pg, "statement", sql, (int)count, types, values, lengths, formats, &r, err,
                         err_len)
                  ? 0
                  : -EIO;
    if (r && affected)
        *affected = atoll(PQcmdTuples(r));
    PQclear(r);
    PQfinish(pg);
    return ret;
}

/* The version number at the start of "0001_users.sql", or -1. */
static long long version_of(const char *file)
{
    if (!isdigit((unsigned char)file[0]))
        return -1;
    return strtoll(file, NULL, 10);
}

/* Apply migration @m (version @v) unless recorded. 1 applied, 0 skipped, -errno. */
static int apply(PGconn *pg, const db_migration *m, long long v, char *err, size_t err_len)
{
    char version[24];
    snprintf(version, sizeof(version), "%lld", v);
    const char *params[2] = {version, m->file};
    PGresult *r = NULL;
    if (!run(pg, "reading schema_migrations", "SELECT 1 FROM schema_migrations WHERE version = $1",
             1, params, &r, err, err_len))
        return -EIO;
    bool done = PQntuples(r) > 0;
    PQclear(r);
    if (done)
        return 0;
    char what[128];
    snprintf(what, sizeof(what), "migration %s", m->file);
    if (!run(pg, what, "BEGIN", 0, NULL, NULL, err, err_len))
        return -EIO;
    /* PQexec: a migration file may hold several statements. */
    r = PQexec(pg, m->sql);
    ExecStatusType st = PQresultStatus(r);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        note_failure(r);
        set_err(err, err_len, "%s: %s", what, r ? PQresultErrorMessage(r) : PQerrorMessage(pg));
        PQclear(r);
        run(pg, "rollback", "ROLLBACK", 0, NULL, NULL, NULL, 0);
        return -EIO;
    }
    PQclear(r);
    if (!run(pg, what, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", 2, params,
             NULL, err, err_len) ||
        !run(pg, what, "COMMIT", 0, NULL, NULL, err, err_len)) {
        run(pg, "rollback", "ROLLBACK", 0, NULL, NULL, NULL, 0);
        return -EIO;
    }
    cr_log_info("database: applied migration %s", m->file);
    return 1;
}

int db_migrate(const char *conninfo, int *applied, char *err, size_t err_len)
{
    size_t count;
    const db_migration *list = db_migrations(&count);
    if (applied)
        *applied = 0;
    for (size_t i = 0; i < count; i++)
        if (version_of(list[i].file) < 0) {
            set_err(err, err_len, "migration %s: the name must start with its number",
                    list[i].file);
            return -EINVAL;
        }
    PGconn *pg = connect_blocking(conninfo, err, err_len);
    if (!pg)
        return -ECONNREFUSED;
    int ret = 0;
    failed_read_only = false;
    /* The session lock serialises concurrent starts; it ends with the session. */
    if (!run(pg, "taking the migration lock", "SELECT pg_advisory_lock(" DB_MIGRATION_LOCK ")", 0,
             NULL, NULL, err, err_len) ||
        !run(pg, "creating schema_migrations",
             "CREATE TABLE IF NOT EXISTS schema_migrations ("
             " version bigint PRIMARY KEY,"
             " name text NOT NULL,"
             " applied_at timestamptz NOT NULL DEFAULT now())",
             0, NULL, NULL, err, err_len)) {
        ret = -EIO;
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        int r = apply(pg, &list[i], version_of(list[i].file), err, err_len);
        if (r < 0) {
            ret = r;
            goto out;
        }
        if (applied)
            *applied += r;
    }
out:
    PQfinish(pg);
    return ret == -EIO && failed_read_only ? -EROFS : ret;
}
