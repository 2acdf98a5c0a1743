/*
 * The apps' shared database pool and migrations. See
 * coring/apps/database.h.
 */
#include "coring/apps/database.h"

#include "coring/apps/health.h"

#include "coring/core/log.h"
#include "coring/db/admin.h"
#include "coring/http/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *users_of_db[8];
static size_t num_users_of_db;
static size_t statement_count; /* registered by the apps */
static db_config config;

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

bool app_db_used(void)
{
    return statement_count > 0;
}

int app_db_start(const app_options *opts)
{
    if (db_metrics_register() < 0)
        cr_log_warn("database metrics could not be registered: they stay out of /metrics");
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
    config = db_config_default();
    config.conninfo = url;
    if (opts->db_pool)
        config.connections = opts->db_pool;
    if (opts->db_timeout_ns)
        config.query_timeout_ns = opts->db_timeout_ns;
    config.routing = (db_routing)opts->db_routing;
    config.coalesce = !opts->db_coalesce_off;
    const char *read_url = getenv("DATABASE_READ_URL");
    if (read_url && *read_url) {
        config.read_conninfo = read_url;
        int err = app_health_add_check("database_read", app_db_read_ready);
        if (err < 0)
            return err;
        cr_log_info("database: reads of users and CEPs from DATABASE_READ_URL while it is up");
    }

    char err[512];
    int applied = 0;
    int ret = db_migrate(url, &applied, err, sizeof(err));
    if (ret < 0) {
        cr_log_error("database migrations failed: %s", err);
        return ret;
    }
    return 0;
}

const char *app_db_url(void)
{
    return config.conninfo;
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
