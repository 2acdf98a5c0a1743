/*
 * The apps' shared database pool and migrations. See
 * coring/apps/database.h.
 */
#include "coring/apps/database.h"

#include "coring/apps/health.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/db/admin.h"
#include "coring/http/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *users_of_db[8];
static size_t num_users_of_db;
static size_t statement_count; /* registered by the apps */
static db_config config;
static db_migration_set migrations[32]; /* to apply, in order */
static size_t num_migrations;

/* Note @app among the apps on the database, once. */
static void note_user(const char *app)
{
    for (size_t i = 0; i < num_users_of_db; i++)
        if (strcmp(users_of_db[i], app) == 0)
            return;
    if (num_users_of_db < sizeof(users_of_db) / sizeof(users_of_db[0]))
        users_of_db[num_users_of_db++] = app;
}

int app_db_statement(const char *app, const db_statement *def, const db_stmt **out)
{
    int err = db_register(def, out);
    if (err < 0)
        return err;
    statement_count++;
    note_user(app);
    return 0;
}

int app_db_migrations(const db_migration_set *set)
{
    for (size_t i = 0; i < num_migrations; i++)
        if (migrations[i].list == set->list)
            return 0;
    if (num_migrations == sizeof(migrations) / sizeof(migrations[0]))
        return -ENOSPC;
    migrations[num_migrations++] = *set;
    return 0;
}

void app_db_require(const char *app)
{
    note_user(app);
}

bool app_db_used(void)
{
    return statement_count > 0 || num_users_of_db > 0;
}

int app_db_check(void)
{
    const char *url = getenv("DATABASE_URL");
    if (!url || !*url) {
        char names[64] = "";
        for (size_t i = 0; i < num_users_of_db; i++) {
            strncat(names, i ? "," : "", sizeof(names) - strlen(names) - 1);
            strncat(names, users_of_db[i], sizeof(names) - strlen(names) - 1);
        }
        cr_log_error("DATABASE_URL is not set, and the %s app%s need%s PostgreSQL. Set it to a "
                     "libpq URI (postgresql://user@host:5432/db), or start coring with apps/run, "
                     "which starts a local PostgreSQL, or leave %s out with --apps",
                     names, num_users_of_db > 1 ? "s" : "", num_users_of_db > 1 ? "" : "s",
                     num_users_of_db > 1 ? "them" : "it");
        return -EINVAL;
    }
    static const char *const vars[] = {"DATABASE_URL", "DATABASE_READ_URL"};
    for (size_t i = 0; i < 2; i++) {
        const char *value = getenv(vars[i]);
        char why[256];
        int err = value && *value ? db_conninfo_check(value, why, sizeof(why)) : 0;
        if (err < 0) {
            cr_log_error("%s: libpq does not take it: %s", vars[i], why);
            return err;
        }
    }
    return 0;
}

/* The migrations on @url, tried again every second for up to @wait_ns
 * while the primary cannot be reached or is read-only (a failover, the
 * whole cluster rebooting): what a start waits for before it gives up.
 * The wait counts from the first refusal, so a first try that is slow to
 * fail (a connect timeout, a loaded machine) does not use it up. */
static int migrate(const char *url, uint64_t wait_ns)
{
    uint64_t deadline = 0;
    for (;;) {
        char err[512];
        int applied = 0;
        int ret = db_migrate(url, migrations, num_migrations, &applied, err, sizeof(err));
        uint64_t now = cr_clock_now_ns();
        if (ret == 0)
            return 0;
        bool first = deadline == 0;
        if (first)
            deadline = now + wait_ns;
        if ((ret != -ECONNREFUSED && ret != -EROFS) || now >= deadline) {
            cr_log_error("database migrations failed: %s", err);
            return ret;
        }
        if (first)
            cr_log_warn("database not %s yet (%s): trying again every second for up to %.0f s "
                        "(--db-start-wait)", ret == -EROFS ? "writable" : "reachable", err,
                        (double)wait_ns / 1e9);
        uint64_t pause = deadline - now < CR_NS_PER_S ? deadline - now : CR_NS_PER_S;
        struct timespec ts = {.tv_sec = (time_t)(pause / CR_NS_PER_S),
                              .tv_nsec = (long)(pause % CR_NS_PER_S)};
        nanosleep(&ts, NULL);
    }
}

int app_db_start(const app_options *opts)
{
    if (db_metrics_register() < 0)
        cr_log_warn("database metrics could not be registered: they stay out of /metrics");
    int check_err = app_db_check();
    if (check_err < 0)
        return check_err;
    const char *url = getenv("DATABASE_URL");
    config = db_config_default();
    config.conninfo = url;
    if (opts->db_pool)
        config.connections = opts->db_pool;
    if (opts->db_timeout_ns)
        config.query_timeout_ns = opts->db_timeout_ns;
    config.routing = (db_routing)opts->db_routing;
    config.coalesce = !opts->db_coalesce_off;
    config.trace_sql = opts->trace_sql;
    const char *read_url = getenv("DATABASE_READ_URL");
    if (read_url && *read_url) {
        config.read_conninfo = read_url;
        config.replica_max_lag_ns = opts->replica_max_lag_ns;
        int err = app_health_add_check("database_read", app_db_read_ready);
        if (err < 0 || (err = db_lag_register()) < 0)
            return err;
        cr_log_info("database: the apps' reads from DATABASE_READ_URL while it is up");
    }

    return migrate(url, opts->db_start_wait_ns);
}

const char *app_db_url(void)
{
    return config.conninfo;
}

uint64_t app_db_longest_request_ns(const app_options *opts, char *why, size_t len)
{
    uint64_t db = opts->db_timeout_ns ? opts->db_timeout_ns : db_config_default().query_timeout_ns;
    if (why && len)
        snprintf(why, len, "2 x --db-timeout %.0f s", (double)db / 1e9);
    return 2 * db;
}

const char *app_db_ready(char *buf, size_t len)
{
    return db_ready(buf, len) ? NULL : buf;
}

const char *app_db_read_ready(char *buf, size_t len)
{
    char why[224];
    if (db_reading_replica(why, sizeof(why)))
        snprintf(buf, len, "replica");
    else
        snprintf(buf, len, "primary (%s)", why);
    return NULL; /* reads are served either way: never not ready */
}

int app_db_thread_init(void)
{
    return app_db_used() ? db_thread_init(&config) : 0;
}

void app_db_thread_fini(void)
{
    if (app_db_used())
        db_thread_fini();
}

void app_db_respond_error(http_ctx *ctx, const char *app, int err, const db_result *r)
{
    if (err == -EREMOTEIO) {
        cr_log_error("%s: database error %s: %s", app, db_result_sqlstate(r), db_result_message(r));
        http_respond_error(ctx, 500, "database error");
        return;
    }
    if (err == -ENOMEM) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    if (err == -EINVAL || err == -ERANGE || err == -EPERM || err == -EPROTO) {
        /* The app's own mistake (a parameter, the calling context). */
        cr_log_error("%s: query not run: %s", app, cr_strerror(err));
        http_respond_error(ctx, 500, "database error");
        return;
    }
    if (err == -EINPROGRESS) {
        /* A write that reached the server, whose commit was not confirmed:
         * never "unavailable", which would say that nothing was done. */
        cr_log_warn("%s: a write's outcome is unknown: answering 504", app);
        http_respond_error(ctx, 504, APP_DB_OUTCOME_UNKNOWN);
        return;
    }
    http_add_header(ctx, "Retry-After", "1");
    http_respond_error(ctx, 503, "database unavailable");
}
