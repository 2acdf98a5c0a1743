/*
 * The `coring` server's start-up (coring/apps/startup.h): from the
 * configuration that the option table filled (config.c), choose the apps,
 * mount them beside the server's own routes (/metrics, /livez, /readyz,
 * /openapi.json, /docs), start them, serve on every core until SIGINT or
 * SIGTERM, and stop them. It takes the apps it may mount as an argument:
 * the binary's list is apps/main.c's.
 */
#include "coring/apps/startup.h"

#include "coring/apps/database.h"
#include "coring/apps/deadline.h"
#include "coring/apps/health.h"
#include "coring/apps/metrics.h"
#include "coring/core/buffer.h"
#include "coring/core/error.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/core/version.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The configuration, and the apps mounted (in --apps' order): file-wide,
 * for the hooks below, and reachable on every early return out of
 * coring_main (the CORS policy it holds is freed at its end). */
static coring_config cfg;
static const app_def **mounted;
static size_t num_mounted;
static uint64_t *deadlines; /* each mounted app's, ns (0: none): --deadline or its own */

/* Mount the apps --apps names (@list), each once; every available app
 * without it. Returns 0, or CORING_OPTIONS_REFUSED after a message (an
 * unknown app, none given), or -ENOMEM. */
static int select_apps(const char *list)
{
    mounted = calloc(cfg.num_available ? cfg.num_available : 1, sizeof(*mounted));
    if (!mounted)
        return -ENOMEM;
    if (!list) {
        for (size_t i = 0; i < cfg.num_available; i++)
            mounted[num_mounted++] = cfg.available[i];
        return 0;
    }
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        const app_def *found = NULL;
        for (size_t i = 0; i < cfg.num_available; i++)
            if (strcmp(cfg.available[i]->name, name) == 0)
                found = cfg.available[i];
        if (!found) {
            fprintf(stderr, "coring: %s: unknown app '%s' (known:", coring_option_source("--apps"),
                    name);
            for (size_t i = 0; i < cfg.num_available; i++)
                fprintf(stderr, " %s", cfg.available[i]->name);
            fprintf(stderr, ")\n");
            return CORING_OPTIONS_REFUSED;
        }
        bool dup = false;
        for (size_t i = 0; i < num_mounted; i++)
            dup = dup || mounted[i] == found;
        if (!dup)
            mounted[num_mounted++] = found;
    }
    if (num_mounted == 0) {
        fprintf(stderr, "coring: %s: no app given\n", coring_option_source("--apps"));
        return CORING_OPTIONS_REFUSED;
    }
    return 0;
}

/* The definition app @app is mounted as with these options: its variant's
 * (todo on PostgreSQL) or its own. */
static const app_def *resolved(const app_def *app)
{
    const app_def *instead = app->variant ? app->variant() : NULL;
    return instead ? instead : app;
}

uint64_t coring_longest_request_ns(const app_def *const *apps, size_t n, const app_options *opts,
                                   char *why, size_t len)
{
    uint64_t longest = 0;
    char one[160];
    if (why && len)
        *why = '\0';
    for (size_t i = 0; i < n; i++) {
        if (!apps[i]->longest_request_ns)
            continue;
        one[0] = '\0';
        uint64_t t = apps[i]->longest_request_ns(opts, one, sizeof(one));
        if (t <= longest)
            continue;
        longest = t;
        if (why && len)
            snprintf(why, len, "%s: %s", apps[i]->name, one);
    }
    return longest;
}

/* The drain deadline against the mounted apps' longest request: chosen
 * when not given (CORING_SHUTDOWN_TIMEOUT_AUTO), else a warning when a
 * request may outlast it (it would be cut at the deadline). */
static void check_shutdown_timeout(void)
{
    char why[160];
    uint64_t longest = coring_longest_request_ns(mounted, num_mounted, &cfg.apps, why, sizeof(why));
    /* A request with a deadline runs until it at most (a tick late): the
     * drain lets it, whether or not its waits have timeouts of their own. */
    uint64_t cut = 0;
    for (size_t i = 0; i < num_mounted; i++)
        if (deadlines[i] && deadlines[i] + CORING_DEADLINE_SLACK_NS > cut)
            cut = deadlines[i] + CORING_DEADLINE_SLACK_NS;
    if (cut > longest) {
        longest = cut;
        snprintf(why, sizeof(why), "--deadline");
    }
    uint64_t enough = longest ? longest + CORING_SHUTDOWN_MARGIN_NS : 0;
    if (cfg.net.shutdown_timeout_ns == CORING_SHUTDOWN_TIMEOUT_AUTO) {
        cfg.net.shutdown_timeout_ns =
            enough > CORING_SHUTDOWN_TIMEOUT_MIN_NS ? enough : CORING_SHUTDOWN_TIMEOUT_MIN_NS;
        return;
    }
    if (cfg.net.shutdown_timeout_ns < enough)
        cr_log_warn("%s: %.0f s is shorter than a request of the apps mounted may take (%s = "
                    "%.0f s, and %.0f s to spare): a request still running at the drain deadline "
                    "is cut; give it %.0f s or more (docs/operating.md, \"Signals and drain\")",
                    coring_option_source("--shutdown-timeout"),
                    (double)cfg.net.shutdown_timeout_ns / 1e9, why, (double)longest / 1e9,
                    (double)CORING_SHUTDOWN_MARGIN_NS / 1e9, (double)enough / 1e9);
}

/* The checks that concern several options, or an option against the apps.
 * Returns 0, or CORING_OPTIONS_REFUSED after a message, or -ENOMEM. */
static int check_config(void)
{
    int err = select_apps(cfg.mount);
    if (err)
        return err;
    /* An app whose options chose another definition (todo on PostgreSQL). */
    for (size_t i = 0; i < num_mounted; i++)
        mounted[i] = resolved(mounted[i]);
    deadlines = calloc(num_mounted ? num_mounted : 1, sizeof(*deadlines));
    if (!deadlines)
        return -ENOMEM;
    char why[160];
    if (app_deadline_resolve(cfg.deadline, mounted, num_mounted, deadlines, why, sizeof(why)) < 0) {
        fprintf(stderr, "coring: %s: %s\n", coring_option_source("--deadline"), why);
        return CORING_OPTIONS_REFUSED;
    }
    check_shutdown_timeout();
    if (!net_host_valid(cfg.net.host)) {
        fprintf(stderr, "coring: %s: expected a numeric IPv4 or IPv6 address, got '%s'\n",
                coring_option_source("--host"), cfg.net.host);
        return CORING_OPTIONS_REFUSED;
    }
    if (cfg.net.take_over && !cfg.net.handover_socket) {
        fprintf(stderr, "coring: %s: needs --handover-socket PATH (the predecessor's)\n",
                coring_option_source("--take-over"));
        return CORING_OPTIONS_REFUSED;
    }
    /* Last: the one check that allocates (freed by coring_main). */
    if (cfg.rate_burst && !cfg.rate_limit) {
        fprintf(stderr, "coring: %s: needs --rate-limit N\n", coring_option_source("--rate-burst"));
        return CORING_OPTIONS_REFUSED;
    }
    if (cfg.rate_limit) {
        char why[160];
        err = http_rate_limit_create(cfg.rate_limit, cfg.rate_burst, cfg.rate_limit_exempt,
                                     &cfg.rate_limiter, why, sizeof(why));
        if (err == -EINVAL) {
            fprintf(stderr, "coring: %s: %s\n", coring_option_source("--rate-limit-exempt"), why);
            return CORING_OPTIONS_REFUSED;
        }
        if (err < 0)
            return err;
        cfg.http.rate_limit = cfg.rate_limiter;
    }
    return 0;
}

static int apps_thread_init(void *user)
{
    (void)user;
    int db_err = app_db_thread_init();
    if (db_err < 0) {
        cr_log_error("database pool set-up failed: %s", cr_strerror(db_err));
        return db_err;
    }
    for (size_t i = 0; i < num_mounted; i++)
        if (mounted[i]->thread_init) {
            int err = mounted[i]->thread_init();
            if (err < 0) {
                cr_log_error("app %s: per-thread set-up failed: %s", mounted[i]->name,
                             cr_strerror(err));
                return err;
            }
        }
    return 0;
}

static void apps_thread_fini(void *user)
{
    (void)user;
    for (size_t i = num_mounted; i-- > 0;)
        if (mounted[i]->thread_fini)
            mounted[i]->thread_fini();
    app_db_thread_fini();
}

/* Drop root for --user once the listeners are bound (so that ports below
 * 1024 work) and before any worker thread or ring exists (so that every
 * thread runs unprivileged): supplementary groups, then the group, then the
 * user, and a check that root cannot be regained. */
/* --user's account into *@pw: 0 when it exists and this process may
 * become it (root, or already that user: then *@pw is NULL, nothing to
 * do); else -errno after logging why. */
static int find_user(struct passwd **pw)
{
    const char *run_as = cfg.user;
    *pw = NULL;
    if (!run_as)
        return 0;
    errno = 0;
    struct passwd *found = getpwnam(run_as);
    if (!found) {
        cr_log_error("--user %s: no such user", run_as);
        return errno ? -errno : -ENOENT;
    }
    if (geteuid() != 0) {
        if (found->pw_uid == geteuid())
            return 0; /* already that user */
        cr_log_error("--user %s: only root can switch users", run_as);
        return -EPERM;
    }
    *pw = found;
    return 0;
}

static int drop_privileges(void *user)
{
    (void)user;
    const char *run_as = cfg.user;
    struct passwd *pw;
    int found = find_user(&pw);
    if (found < 0 || !pw)
        return found;
    if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 ||
        setuid(pw->pw_uid) < 0) {
        int err = -errno;
        cr_log_error("--user %s: cannot switch: %s", run_as, cr_strerror(err));
        return err;
    }
    if (pw->pw_uid != 0 && setuid(0) == 0) {
        cr_log_error("--user %s: root could be regained: refusing to run", run_as);
        return -EPERM;
    }
    cr_log_info("running as user %s (uid %u, gid %u)", pw->pw_name, (unsigned)pw->pw_uid,
                (unsigned)pw->pw_gid);
    return 0;
}

static void on_listening(const char *host, uint16_t port, unsigned threads, void *user)
{
    (void)user;
    char names[128] = "";
    for (size_t i = 0; i < num_mounted; i++) {
        if (i)
            strncat(names, ",", sizeof(names) - strlen(names) - 1);
        strncat(names, mounted[i]->name, sizeof(names) - strlen(names) - 1);
    }
    bool v6 = strchr(host, ':') != NULL;
    cr_log_info("coring %s listening on http://%s%s%s:%u threads=%u apps=%s", coring_version(),
                v6 ? "[" : "", host, v6 ? "]" : "", port, threads, names);
}

/* Descriptors the apps hold besides client connections, over all worker
 * threads: each thread's database pool and what each app says it keeps
 * (app_def.reserved_fds: the cep app's upstream connections).
 * --max-connections is computed without them. */
static unsigned outbound_fds(const net_config *net, const app_options *opts)
{
    unsigned threads = net->threads ? net->threads : net_affinity_cpus();
    unsigned per_thread = 0;
    const char *read_url = getenv("DATABASE_READ_URL");
    if (app_db_used())
        per_thread += (opts->db_pool ? opts->db_pool : 2) * (read_url && *read_url ? 2 : 1);
    for (size_t i = 0; i < num_mounted; i++)
        if (mounted[i]->reserved_fds)
            per_thread += mounted[i]->reserved_fds();
    return threads * per_thread;
}

/* --list-routes: one "METHOD PATTERN" line per route (tests/integration/test_openapi.py). */
static void print_route(http_method method, const char *pattern, void *user)
{
    (void)user;
    static const char *const names[] = {
        [HTTP_GET] = "GET",         [HTTP_HEAD] = "HEAD",       [HTTP_POST] = "POST",
        [HTTP_PUT] = "PUT",         [HTTP_PATCH] = "PATCH",     [HTTP_DELETE] = "DELETE",
        [HTTP_OPTIONS] = "OPTIONS", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
    };
    printf("%s %s\n", (unsigned)method < sizeof(names) / sizeof(names[0]) && names[method]
                           ? names[method] : "OTHER", pattern);
}

/* The server's own routes and the mounted apps' on a new router, in the
 * order the start-up always used. NULL after logging why. */
static http_router *mount_routes(void)
{
    http_router *router = http_router_create();
    if (!router) {
        fprintf(stderr, "coring: out of memory\n");
        return NULL;
    }
    /* GET /metrics whatever --apps says (docs/metrics.md). */
    if (app_metrics_mount(router, coring_version()) < 0) {
        cr_log_error("cannot mount /metrics");
        return NULL;
    }
    for (size_t i = 0; i < num_mounted; i++) {
        const app_def *app = mounted[i];
        if (app->database)
            app_db_require(app->name);
        if (app->migrations) {
            db_migration_set set = *app->migrations;
            set.owner = set.owner ? set.owner : app->name;
            int err = app_db_migrations(&set);
            if (err < 0) {
                cr_log_error("app %s: cannot add its migrations: %s", app->name, cr_strerror(err));
                return NULL;
            }
        }
        unsigned first = http_router_route_count(router);
        int err = mounted[i]->mount(router);
        if (err < 0) {
            cr_log_error("app %s: cannot mount its routes: %s", mounted[i]->name, cr_strerror(err));
            return NULL;
        }
        http_router_set_deadline(router, first, http_router_route_count(router), deadlines[i]);
    }
    int health_err = app_health_mount(router, mounted, num_mounted);
    if (health_err < 0) {
        cr_log_error("cannot mount /livez and /readyz: %s", cr_strerror(health_err));
        return NULL;
    }
    int openapi_err = app_openapi_mount(router, mounted, num_mounted);
    if (openapi_err < 0) {
        cr_log_error("cannot mount /openapi.json and /docs: %s", cr_strerror(openapi_err));
        return NULL;
    }
    return router;
}

/* Every start-up check that needs no network, after the options' own
 * (check_config) and the mounting: the database's settings when an app
 * uses it (DATABASE_URL set, it and DATABASE_READ_URL conninfo strings
 * libpq takes), each mounted app's own (its check hook: the cep app's
 * VIACEP_URL, the embed app's model), --user. A start runs them before
 * anything connects; --check-config runs them and stops. 0, or -errno
 * after logging why. */
static int check_start(void)
{
    int err = app_db_used() ? app_db_check() : 0;
    for (size_t i = 0; i < num_mounted && !err; i++)
        if (mounted[i]->check)
            err = mounted[i]->check(&cfg.apps);
    struct passwd *pw;
    return err ? err : find_user(&pw);
}

/* Start the mounted apps and serve until SIGINT/SIGTERM, then stop them.
 * Returns the exit status. */
static int serve(http_router *router)
{
    if (app_db_used() && app_db_start(&cfg.apps) < 0)
        return 1; /* it logged why */
    for (size_t i = 0; i < num_mounted; i++)
        if (mounted[i]->start && mounted[i]->start(&cfg.apps) < 0)
            return 1; /* the app logged why */

    cfg.net.reserved_fds = outbound_fds(&cfg.net, &cfg.apps);
    http_server srv = {
        .cfg = cfg.http,
        .router = router,
        .thread_init = apps_thread_init,
        .thread_fini = apps_thread_fini,
        .on_listening = on_listening,
        .after_bind = drop_privileges,
    };
    int ret = http_serve(&srv, &cfg.net);
    for (size_t i = num_mounted; i-- > 0;)
        if (mounted[i]->stop)
            mounted[i]->stop();
    return ret == 0 ? 0 : 1;
}

/* --list-apps: every app this binary has, in its order: whether --apps
 * mounts it and whether it needs PostgreSQL with these options (apps/run
 * reads it). Returns the exit status. */
static int list_apps(bool json)
{
    if (!json) {
        for (size_t i = 0; i < cfg.num_available; i++) {
            const app_def *app = resolved(cfg.available[i]);
            bool in = false;
            for (size_t k = 0; k < num_mounted; k++)
                in = in || mounted[k] == app;
            printf("%-12s %-7s %-8s %s\n", app->name, in ? "mounted" : "-",
                   app->database ? "database" : "-", app->summary ? app->summary : "");
        }
        return 0;
    }
    cr_buf out = {0};
    cr_json_writer w;
    cr_json_writer_init(&w, &out);
    cr_json_object_begin(&w);
    cr_json_key(&w, "apps", 4);
    cr_json_array_begin(&w);
    for (size_t i = 0; i < cfg.num_available; i++) {
        const app_def *app = resolved(cfg.available[i]);
        bool in = false;
        for (size_t k = 0; k < num_mounted; k++)
            in = in || mounted[k] == app;
        cr_json_object_begin(&w);
        cr_json_key(&w, "name", 4);
        cr_json_cstring(&w, app->name);
        cr_json_key(&w, "summary", 7);
        cr_json_cstring(&w, app->summary ? app->summary : "");
        cr_json_key(&w, "mounted", 7);
        cr_json_bool(&w, in);
        cr_json_key(&w, "database", 8);
        cr_json_bool(&w, app->database);
        cr_json_key(&w, "options", 7);
        cr_json_array_begin(&w);
        for (size_t k = 0; k < cfg.available[i]->num_options; k++)
            cr_json_cstring(&w, cfg.available[i]->options[k].name);
        cr_json_array_end(&w);
        cr_json_object_end(&w);
    }
    cr_json_array_end(&w);
    cr_json_object_end(&w);
    cr_buf_append_str(&out, "\n");
    int status = 0;
    if (out.failed) {
        fprintf(stderr, "coring: out of memory\n");
        status = 1;
    } else {
        fwrite(out.data, 1, out.len, stdout);
    }
    cr_buf_free(&out);
    return status;
}

/* Exit status of an option step's result. */
static int status_of(int err)
{
    return err == CORING_OPTIONS_EXIT ? 0 : err == CORING_OPTIONS_REFUSED ? 2 : 1;
}

int coring_main(int argc, char **argv, const app_def *const *apps, size_t num_apps)
{
    cfg = coring_config_default();
    cfg.available = apps;
    cfg.num_available = num_apps;
    int err = coring_config_parse(&cfg, argc, argv);
    if (!err)
        err = check_config();
    if (err)
        return status_of(err);
    if (cfg.list_apps)
        return list_apps(strcmp(cfg.list_apps, "json") == 0);

    cfg.apps.threads = cfg.net.threads;
    cfg.apps.threads_pinned = cfg.net.pin;
    http_router *router = mount_routes();
    if (!router)
        return cfg.check_only ? 2 : 1;
    int ret = 0;
    if (cfg.list_routes) {
        http_router_each(router, print_route, NULL);
    } else if (cfg.check_only) {
        /* A configuration that a start would refuse before the network: 2. */
        ret = check_start() < 0 ? 2 : 0;
        if (ret == 0)
            printf("coring: configuration OK\n");
    } else if (cfg.print_openapi) {
        size_t len;
        const char *doc = app_openapi_document(&len);
        fwrite(doc, 1, len, stdout);
        putchar('\n');
    } else {
        ret = check_start() < 0 ? 1 : serve(router);
    }
    http_router_destroy(router);
    free(deadlines);
    http_cors_destroy(cfg.cors);
    http_trusted_proxies_destroy(cfg.trusted_proxies);
    http_rate_limit_destroy(cfg.rate_limiter);
    return ret;
}
