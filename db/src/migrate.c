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

/* Run @sql with parameters as PQexecParams takes them (NULL @types,
 * @lengths, @formats: text, types inferred); true when it succeeded.
 * @what names it in the error. */
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

/* The table of applied migrations, made or brought up to date: an app
 * column (rows from before it get '') in its primary key. Under the
 * migration lock. */
static const char *const table_steps[] = {
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " app text NOT NULL DEFAULT '',"
    " version bigint NOT NULL,"
    " name text NOT NULL,"
    " applied_at timestamptz NOT NULL DEFAULT now(),"
    " PRIMARY KEY (app, version))",
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS app text NOT NULL DEFAULT ''",
    "DO $$ DECLARE pk name; BEGIN"
    " SELECT conname INTO pk FROM pg_constraint WHERE conrelid = 'schema_migrations'::regclass"
    " AND contype = 'p' AND array_length(conkey, 1) = 1;"
    " IF pk IS NOT NULL THEN"
    " EXECUTE format('ALTER TABLE schema_migrations DROP CONSTRAINT %I,"
    " ADD PRIMARY KEY (app, version)', pk);"
    " END IF; END $$",
};

/* Apply migration @m (version @v) of @owner unless recorded. 1 applied,
 * 0 skipped, -errno. */
static int apply(PGconn *pg, const char *owner, const db_migration *m, long long v, char *err,
                 size_t err_len)
{
    char version[24];
    snprintf(version, sizeof(version), "%lld", v);
    const char *params[3] = {owner, version, m->file};
    PGresult *r = NULL;
    /* Its own row, or one from before owners with its number and name. */
    if (!run(pg, "reading schema_migrations",
             "SELECT app FROM schema_migrations WHERE version = $2"
             " AND (app = $1 OR (app = '' AND name = $3))",
             3, params, &r, err, err_len))
        return -EIO;
    bool done = PQntuples(r) > 0, legacy = done && PQgetvalue(r, 0, 0)[0] == '\0';
    PQclear(r);
    if (legacy && !run(pg, "giving a migration to its app",
                       "UPDATE schema_migrations SET app = $1 WHERE app = '' AND version = $2"
                       " AND name = $3",
                       3, params, NULL, err, err_len))
        return -EIO;
    if (done)
        return 0;
    char what[160];
    snprintf(what, sizeof(what), "migration %s/%s", owner, m->file);
    if (!run(pg, what, "BEGIN", 0, NULL, NULL, err, err_len))
        return -EIO;
    /* PQexec: a migration may hold several statements. */
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
    if (!run(pg, what, "INSERT INTO schema_migrations (app, version, name) VALUES ($1, $2, $3)",
             3, params, NULL, err, err_len) ||
        !run(pg, what, "COMMIT", 0, NULL, NULL, err, err_len)) {
        run(pg, "rollback", "ROLLBACK", 0, NULL, NULL, NULL, 0);
        return -EIO;
    }
    cr_log_info("database: applied migration %s/%s", owner, m->file);
    return 1;
}

/* The sets' owners and numbers checked before anything is applied:
 * 0, or -EINVAL with @err saying which. */
static int check_sets(const db_migration_set *sets, size_t num, char *err, size_t err_len)
{
    for (size_t s = 0; s < num; s++) {
        const char *owner = sets[s].owner;
        if (!owner || !*owner) {
            set_err(err, err_len, "migrations without an owner (the app they belong to)");
            return -EINVAL;
        }
        for (size_t t = 0; t < s; t++)
            if (strcmp(sets[t].owner, owner) == 0) {
                set_err(err, err_len, "migrations of %s given twice", owner);
                return -EINVAL;
            }
        long long last = -1;
        for (size_t i = 0; i < sets[s].count; i++) {
            const char *file = sets[s].list[i].file;
            long long v = file ? version_of(file) : -1;
            if (v < 0 || !sets[s].list[i].sql) {
                set_err(err, err_len, "migration %s/%s: the name must start with its number",
                        owner, file ? file : "(none)");
                return -EINVAL;
            }
            if (v <= last) {
                set_err(err, err_len, "migration %s/%s: numbers must increase (after %lld)",
                        owner, file, last);
                return -EINVAL;
            }
            last = v;
        }
    }
    return 0;
}

int db_migrate(const char *conninfo, const db_migration_set *sets, size_t num_sets, int *applied,
               char *err, size_t err_len)
{
    if (applied)
        *applied = 0;
    int ret = check_sets(sets, num_sets, err, err_len);
    if (ret < 0)
        return ret;
    PGconn *pg = connect_blocking(conninfo, err, err_len);
    if (!pg)
        return -ECONNREFUSED;
    failed_read_only = false;
    /* The session lock serialises concurrent starts; it ends with the session. */
    if (!run(pg, "taking the migration lock", "SELECT pg_advisory_lock(" DB_MIGRATION_LOCK ")", 0,
             NULL, NULL, err, err_len)) {
        ret = -EIO;
        goto out;
    }
    for (size_t i = 0; i < sizeof(table_steps) / sizeof(table_steps[0]); i++)
        if (!run(pg, "preparing schema_migrations", table_steps[i], 0, NULL, NULL, err, err_len)) {
            ret = -EIO;
            goto out;
        }
    for (size_t s = 0; s < num_sets; s++)
        for (size_t i = 0; i < sets[s].count; i++) {
            const db_migration *m = &sets[s].list[i];
            int r = apply(pg, sets[s].owner, m, version_of(m->file), err, err_len);
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
