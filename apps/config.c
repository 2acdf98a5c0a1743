/*
 * The `coring` command line: every option as one row of a table
 * (coring/apps/options.h), in --help's order, with its defaults and the
 * fixed parts of --help around the rows. What an option sets is a field of
 * coring_config; coring_main() (startup.c) starts the server from it.
 */
#include "coring/apps/deadline.h"
#include "coring/apps/startup.h"

#include "coring/core/clock.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "coring/core/version.h"
#include "coring/http/accept_encoding.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

coring_config coring_config_default(void)
{
    net_config net = net_config_default();
    net.shutdown_timeout_ns = CORING_SHUTDOWN_TIMEOUT_AUTO; /* startup.c chooses it */
    return (coring_config){
        .net = net,
        .http = http_server_config_default(),
        .rate_limit_exempt = HTTP_RATE_LIMIT_EXEMPT_DEFAULT,
    };
}

/* --recv-buffers: a number that must be a power of 2 (a buffer ring's size). */
static int set_recv_buffers(void *config, const char *value)
{
    coring_config *cfg = config;
    unsigned long long n;
    int err = coring_option_number("--recv-buffers", value, 1, 32768, &n);
    if (err)
        return err;
    if (n & (n - 1)) {
        fprintf(stderr, "coring: %s: must be a power of 2\n",
                coring_option_source("--recv-buffers"));
        return CORING_OPTIONS_REFUSED;
    }
    cfg->net.provided_buffers = (unsigned)n;
    return 0;
}

/* @value read by @parse (cr_log_parse_level or _format) into *@out; else
 * the message that @flag expects @words, and CORING_OPTIONS_REFUSED. */
static int log_setting(const char *flag, const char *value, int (*parse)(const char *),
                       const char *words, int *out)
{
    *out = parse(value);
    if (*out >= 0)
        return 0;
    fprintf(stderr, "coring: %s: expected %s, got '%s'\n", coring_option_source(flag), words,
            value);
    return CORING_OPTIONS_REFUSED;
}

/* --log-level: the process's threshold, set at once. */
static int set_log_level(void *config, const char *value)
{
    (void)config;
    int level;
    int err = log_setting("--log-level", value, cr_log_parse_level,
                          "debug, info, warn, error or off", &level);
    if (!err)
        cr_log_set_level((cr_log_level)level);
    return err;
}

/* --log-format: the process's line format, set at once. */
static int set_log_format(void *config, const char *value)
{
    (void)config;
    int format;
    int err = log_setting("--log-format", value, cr_log_parse_format, "text or json", &format);
    if (!err)
        cr_log_set_format((cr_log_format)format);
    return err;
}

/* --cors-origins: the policy, checked and built now (given twice: the last
 * wins). */
static int set_cors_origins(void *config, const char *value)
{
    coring_config *cfg = config;
    char why[160];
    http_cors_destroy(cfg->cors);
    cfg->cors = NULL;
    cfg->http.cors = NULL;
    int err = http_cors_create(value, &cfg->cors, why, sizeof(why));
    if (err < 0) {
        fprintf(stderr, "coring: %s: %s\n", coring_option_source("--cors-origins"),
                err == -EINVAL ? why : cr_strerror(err));
        return CORING_OPTIONS_REFUSED;
    }
    cfg->http.cors = cfg->cors;
    return 0;
}

/* --trusted-proxies: the list, checked and built now (given twice: the
 * last wins). */
static int set_trusted_proxies(void *config, const char *value)
{
    coring_config *cfg = config;
    char why[160];
    http_trusted_proxies_destroy(cfg->trusted_proxies);
    cfg->trusted_proxies = NULL;
    cfg->http.trusted_proxies = NULL;
    int err = http_trusted_proxies_create(value, &cfg->trusted_proxies, why, sizeof(why));
    if (err < 0) {
        fprintf(stderr, "coring: %s: %s\n", coring_option_source("--trusted-proxies"),
                err == -EINVAL ? why : cr_strerror(err));
        return CORING_OPTIONS_REFUSED;
    }
    cfg->http.trusted_proxies = cfg->trusted_proxies;
    return 0;
}

/* --compression: on, off, or the codings offered (docs/compression.md). */
static int set_compression(void *config, const char *value)
{
    if (http_codings_parse(value, &((coring_config *)config)->http.compression_codings) == 0)
        return 0;
    fprintf(stderr, "coring: %s: expected on, off or a list of zstd, br, gzip, got '%s'\n",
            coring_option_source("--compression"), value);
    return CORING_OPTIONS_REFUSED;
}

/* --rate-limit: off, or requests a second (0 is off too). */
static int set_rate_limit(void *config, const char *value)
{
    coring_config *cfg = config;
    if (strcmp(value, "off") == 0) {
        cfg->rate_limit = 0;
        return 0;
    }
    unsigned long long n;
    int err = coring_option_number("--rate-limit", value, 0, HTTP_RATE_LIMIT_MAX, &n);
    if (!err)
        cfg->rate_limit = (unsigned)n;
    return err;
}

/* --deadline: its syntax now; the app names once the apps are chosen
 * (startup.c, app_deadline_resolve). */
static int set_deadline(void *config, const char *value)
{
    char why[160];
    if (app_deadline_syntax(value, why, sizeof(why)) < 0) {
        fprintf(stderr, "coring: %s: %s\n", coring_option_source("--deadline"), why);
        return CORING_OPTIONS_REFUSED;
    }
    ((coring_config *)config)->deadline = value;
    return 0;
}

static int check_config(void *config, const char *value)
{
    (void)value;
    ((coring_config *)config)->check_only = true;
    return 0;
}

static int list_routes(void *config, const char *value)
{
    (void)value;
    ((coring_config *)config)->list_routes = true;
    return 0;
}

static int print_openapi(void *config, const char *value)
{
    (void)value;
    ((coring_config *)config)->print_openapi = true;
    return 0;
}

/* --list-apps[=FORMAT]: text or json. */
static int list_apps(void *config, const char *value)
{
    if (strcmp(value, "text") != 0 && strcmp(value, "json") != 0) {
        fprintf(stderr, "coring: --list-apps: expected text or json, got '%s'\n", value);
        return CORING_OPTIONS_REFUSED;
    }
    ((coring_config *)config)->list_apps = value;
    return 0;
}

static int help(void *config, const char *value);

static int version(void *config, const char *value)
{
    (void)config;
    (void)value;
    printf("coring %s\n", coring_version());
    return CORING_OPTIONS_EXIT;
}

/* In db_routing's order (coring/db/db.h). */
static const char *const db_routings[] = {"fill", "spread", "pack"};

#define FIELD(f) CORING_OPTION_FIELD(coring_config, f)

const coring_option coring_config_options[] = {
    {.name = "host", .value = "ADDR", .kind = CORING_OPTION_STRING, FIELD(net.host),
     .help = "numeric IPv4/IPv6 address to listen on (default 0.0.0.0)",
     .default_doc = "`0.0.0.0`"},
    {.name = "port", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(net.port), .min = 0,
     .max = 65535,
     .help = "TCP port (default 8080; 0 picks a free one)",
     .default_doc = "`8080`"},
    {.name = "threads", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(net.threads), .min = 1,
     .max = 1024,
     .help = "worker threads (default: CPUs in the affinity mask)",
     .default_doc = "CPUs in the affinity mask"},
    {.name = "pin", .value = "on|off", .kind = CORING_OPTION_ON_OFF, FIELD(net.pin),
     .help = "pin each worker thread to its own CPU (default off:\n"
             "the scheduler may move a thread off a core another\n"
             "process keeps busy; docs/configuration.md)",
     .default_doc = "`off`"},
    {.name = "batch-wait", .value = "USEC", .kind = CORING_OPTION_NUMBER, FIELD(net.batch_wait_us),
     .min = 0, .max = NET_BATCH_WAIT_US_MAX,
     .help = "when busy, wait up to USEC microseconds for several\n"
             "completions per io_uring_enter (0-10000; default 200;\n"
             "0: off; Linux 6.12+; docs/runtime.md)",
     .default_doc = "`200`"},
    {.name = "apps", .value = "LIST", .kind = CORING_OPTION_STRING, FIELD(mount),
     .help = "comma-separated apps to mount (default: all)",
     .default_doc = "all"},
    {.name = "stack-size", .value = "KIB", .kind = CORING_OPTION_NUMBER, FIELD(net.stack_size),
     .min = 16, .max = 65536, .scale = 1024,
     .help = "coroutine stack size (default 64)",
     .default_doc = "64 KiB"},
    {.name = "recv-buffers", .value = "N", .kind = CORING_OPTION_CUSTOM, .set = set_recv_buffers,
     .help = "provided receive buffers per thread, a power of 2 (default 512)",
     .default_doc = "512"},
    {.name = "recv-buffer-size", .value = "KIB", .kind = CORING_OPTION_NUMBER,
     FIELD(net.provided_buffer_size), .min = 1, .max = 1024, .scale = 1024,
     .help = "size of each provided receive buffer (default 16)",
     .default_doc = "16 KiB"},
    {.name = "service-stack-size", .value = "KIB", .kind = CORING_OPTION_NUMBER,
     FIELD(net.service_stack_size), .min = 64, .max = 65536, .scale = 1024,
     .help = "stack of service tasks: database drivers, the upstream\n"
             "client's timer; they call libpq, libcurl, OpenSSL (default 256)",
     .default_doc = "256 KiB"},
    {.name = "keepalive-timeout", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(http.keepalive_timeout_ns), .min = 1, .max = 86400, .scale = CR_NS_PER_S,
     .help = "idle keep-alive timeout, seconds (default 60)",
     .default_doc = "60 s"},
    {.name = "header-timeout", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(http.header_timeout_ns), .min = 1, .max = 3600, .scale = CR_NS_PER_S,
     .help = "time to receive request headers, seconds (default 10)",
     .default_doc = "10 s"},
    {.name = "body-timeout", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(http.body_timeout_ns), .min = 1, .max = 3600, .scale = CR_NS_PER_S,
     .help = "time to receive a request body, seconds (default 10)",
     .default_doc = "10 s"},
    {.name = "shutdown-timeout", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(net.shutdown_timeout_ns), .min = 0, .max = 3600, .scale = CR_NS_PER_S,
     .help = "drain deadline on SIGINT/SIGTERM, seconds (default 10,\n"
             "or the longest a request of the apps mounted may take\n"
             "plus 1 when that is more: users 11, cep 16)",
     .default_doc = "10 s, or the longest request of the apps mounted + 1 s"},
    {.name = "deadline", .value = "DURATION|LIST", .kind = CORING_OPTION_CUSTOM,
     .set = set_deadline,
     .help = "deadline of a request once read: 2s, 500ms, off\n"
             "for every app, or per app (users=2s,cep=5s); past it\n"
             "the answer is 504 and its waits are cancelled\n"
             "(default: users, todo 3 s; cep 4 s; embed 5 s; hello off)",
     .default_doc = "each app's: users, todo 3 s; cep 4 s; embed 5 s; hello off"},
    {.name = "drain-grace", .value = "S", .kind = CORING_OPTION_SECONDS, FIELD(net.drain_grace_ns),
     .max = 3600,
     .help = "on SIGINT/SIGTERM, /readyz 503 but keep accepting for S seconds\n"
             "(fractions allowed) before the drain (default 0)",
     .default_doc = "0 s"},
    {.name = "drain-idle-grace", .value = "MS", .kind = CORING_OPTION_NUMBER,
     FIELD(net.drain_idle_grace_ns), .min = 0, .max = 3600000, .scale = CR_NS_PER_MS,
     .help = "in the drain, leave a connection idle between requests open\n"
             "MS milliseconds for its next request, answered with\n"
             "Connection: close, before closing it (default 1000)",
     .default_doc = "1000 ms"},
    {.name = "handover-socket", .value = "PATH", .kind = CORING_OPTION_STRING,
     FIELD(net.handover_socket),
     .help = "serve this UNIX socket so that a successor started with\n"
             "--take-over receives the listeners (docs/operating.md)",
     .default_doc = "none"},
    {.name = "take-over", .kind = CORING_OPTION_SWITCH, FIELD(net.take_over),
     .help = "take the listeners of the coring serving --handover-socket;\n"
             "it drains once this one serves",
     .default_doc = "off"},
    {.name = "max-header-bytes", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(http.limits.max_header_bytes), .min = 256, .max = 1 << 20,
     .help = "request line + headers limit (default 16384)",
     .default_doc = "16384"},
    {.name = "max-headers", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(http.limits.max_headers), .min = 1, .max = 256,
     .help = "header count limit (default 100)",
     .default_doc = "100"},
    {.name = "max-body-bytes", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(http.limits.max_body_bytes), .min = 0, .max = 1ull << 30,
     .help = "request body limit (default 1048576)",
     .default_doc = "1 MiB"},
    {.name = "allow-bare-lf", .kind = CORING_OPTION_SWITCH, FIELD(http.limits.allow_bare_lf),
     .help = "take a bare LF as a line end in the header section\n"
             "(default: 400); unsafe behind a proxy (smuggling)",
     .default_doc = "off"},
    {.name = "max-connections", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(net.max_connections), .min = 1, .max = UINT_MAX,
     .help = "open connections limit (default: from RLIMIT_NOFILE)",
     .default_doc = "from `RLIMIT_NOFILE`"},
    {.name = "user", .value = "NAME", .kind = CORING_OPTION_STRING, FIELD(user),
     .help = "when started as root: switch to this user once the\n"
             "port is bound, before serving",
     .default_doc = "none"},
    {.name = "log-level", .value = "LEVEL", .kind = CORING_OPTION_CUSTOM, .set = set_log_level,
     .help = "debug, info, warn, error or off (default info)",
     .default_doc = "`info`"},
    {.name = "access-log", .kind = CORING_OPTION_SWITCH, FIELD(http.access_log),
     .help = "log one line per request",
     .default_doc = "off"},
    {.name = "log-format", .value = "FORMAT", .kind = CORING_OPTION_CUSTOM, .set = set_log_format,
     .help = "text or json (one JSON object a line; default text)",
     .default_doc = "`text`"},
    {.name = "cors-origins", .value = "LIST", .kind = CORING_OPTION_CUSTOM, .set = set_cors_origins,
     .help = "comma-separated origins (scheme://host[:port], exact\n"
             "match) whose pages may call the API from a browser;\n"
             "'*' for any origin, without credentials (default: off;\n"
             "docs/cors.md)",
     .default_doc = "off"},
    {.name = "trusted-proxies", .value = "LIST", .kind = CORING_OPTION_CUSTOM,
     .set = set_trusted_proxies,
     .help = "comma-separated addresses or networks (ADDR/PREFIX) of\n"
             "the proxies in front: from those peers the client is\n"
             "read from X-Forwarded-For, its rightmost hop that is\n"
             "not one of them (default: none; docs/logs.md)",
     .default_doc = "none"},
    {.name = "compression", .value = "on|off|LIST", .kind = CORING_OPTION_CUSTOM,
     .set = set_compression,
     .help = "compress JSON and text responses in the coding the\n"
             "client prefers: on (zstd, br, gzip; default), off, or\n"
             "a comma-separated list of them (docs/compression.md)",
     .default_doc = "`on`"},
    {.name = "compression-min-bytes", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(http.compression_min_bytes), .min = 1, .max = 1ull << 30,
     .help = "compress bodies of N bytes and more (default 1024)",
     .default_doc = "1024"},
    {.name = "rate-limit", .value = "N|off", .kind = CORING_OPTION_CUSTOM, .set = set_rate_limit,
     .help = "requests a second per client address (behind\n"
             "--trusted-proxies: per X-Forwarded-For client),\n"
             "shared by every thread; over it: 429\n"
             "(default: off; docs/rate-limits.md)",
     .default_doc = "off"},
    {.name = "rate-burst", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(rate_burst), .min = 1,
     .max = HTTP_RATE_LIMIT_MAX,
     .help = "with --rate-limit: requests a client may send at once\n"
             "(default: the rate)",
     .default_doc = "the rate"},
    {.name = "rate-limit-exempt", .value = "LIST", .kind = CORING_OPTION_STRING,
     FIELD(rate_limit_exempt),
     .help = "comma-separated paths (exact) never rate limited\n"
             "(default /livez,/readyz,/metrics)",
     .default_doc = "`/livez,/readyz,/metrics`"},
    {.name = "trace-context", .value = "on|off", .kind = CORING_OPTION_ON_OFF,
     FIELD(http.trace_context_off), .inverted = true,
     .help = "W3C trace context: take a valid traceparent or start a\n"
             "trace, log trace_id and span_id, answer traceresponse,\n"
             "pass it to ViaCEP and (sampled) PostgreSQL (default on;\n"
             "docs/tracing.md)",
     .default_doc = "`on`"},
    {.name = "db-pool", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(apps.db_pool), .min = 1,
     .max = 64,
     .help = "database connections per worker thread (default 2)",
     .default_doc = "2"},
    {.name = "db-timeout", .value = "S", .kind = CORING_OPTION_NUMBER, FIELD(apps.db_timeout_ns),
     .min = 1, .max = 3600, .scale = CR_NS_PER_S,
     .help = "per-query database timeout, seconds (default 5)",
     .default_doc = "5 s"},
    {.name = "db-routing", .value = "fill|spread|pack", .kind = CORING_OPTION_CHOICE,
     FIELD(apps.db_routing), .words = db_routings, .num_words = cr_countof(db_routings),
     .help = "which connection a query takes: fill\n"
             "(default), the first until it has 16 lookups' worth of\n"
             "work out, fewer backends awake; spread, the least\n"
             "loaded; pack, fewer and larger round trips\n"
             "(docs/database.md)",
     .default_doc = "`fill`"},
    {.name = "db-coalesce", .value = "on|off", .kind = CORING_OPTION_ON_OFF,
     FIELD(apps.db_coalesce_off), .inverted = true,
     .help = "send a statement's concurrent queries as one query\n"
             "of its batch form (users: inserts) (default on;\n"
             "docs/database.md)",
     .default_doc = "`on`"},
    {.name = "trace-sql", .value = "on|off", .kind = CORING_OPTION_ON_OFF, FIELD(apps.trace_sql),
     .help = "with --trace-context: a sampled trace's queries carry\n"
             "a sqlcommenter traceparent comment, sent unprepared\n"
             "(default off; docs/tracing.md)",
     .default_doc = "`off`"},
    {.name = "db-start-wait", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.db_start_wait_ns), .min = 0, .max = 86400, .scale = CR_NS_PER_S,
     .help = "at start-up, try the migrations again every second for up\n"
             "to S seconds while the primary is unreachable or read-only\n"
             "(a failover, a cluster rebooting) (default 0: once)",
     .default_doc = "0 s (one try)"},
    {.name = "replica-max-lag", .value = "S", .kind = CORING_OPTION_SECONDS,
     FIELD(apps.replica_max_lag_ns), .max = 3600,
     .help = "with DATABASE_READ_URL: while the replica lags more than\n"
             "S seconds (fractions allowed; measured each second), its\n"
             "reads go to the primary (default 0: no bound;\n"
             "docs/operating.md)",
     .default_doc = "0 s (no bound)"},
    {.name = "check-config", .kind = CORING_OPTION_COMMAND, .set = check_config,
     .help = "run every start-up check that needs no network (the\n"
             "options, DATABASE_URL set and well-formed, VIACEP_URL,\n"
             "--user, the embed model) and exit: 0 when they pass, 2\n"
             "with the reason (binds, connects and serves nothing)",
     .default_doc = "off"},
    {.name = "list-routes", .kind = CORING_OPTION_COMMAND, .set = list_routes,
     .help = "print the routes mounted (METHOD PATTERN a line) and exit",
     .default_doc = ""},
    {.name = "list-apps", .value = "FORMAT", .kind = CORING_OPTION_COMMAND, .implicit = "text",
     .set = list_apps,
     .help = "print the apps this binary has and exit, one a line:\n"
             "NAME, mounted or -, database (needs PostgreSQL with\n"
             "these options) or -, summary; =json: a JSON object",
     .default_doc = ""},
    {.name = "openapi", .kind = CORING_OPTION_COMMAND, .set = print_openapi,
     .help = "print the OpenAPI document of the apps mounted (what\n"
             "GET /openapi.json answers) and exit",
     .default_doc = ""},
    {.name = "help", .kind = CORING_OPTION_COMMAND, .set = help,
     .help = "show this help and exit",
     .default_doc = ""},
    {.name = "version", .kind = CORING_OPTION_COMMAND, .set = version,
     .help = "show the version and exit",
     .default_doc = ""},
};

const size_t coring_config_num_options = cr_countof(coring_config_options);

/* Rows up to the first command: the settings (commands come last). */
static size_t num_settings(void)
{
    size_t n = 0;
    while (n < coring_config_num_options && coring_config_options[n].kind != CORING_OPTION_COMMAND)
        n++;
    return n;
}

/* --help: the server's settings, the apps' own, the commands, each with
 * its variable, between fixed parts. */
static int help(void *config, const char *value)
{
    (void)value;
    const coring_config *cfg = config;
    FILE *f = stdout;
    size_t settings = num_settings();
    fprintf(f, "Usage: coring [options]\n"
               "\n"
               "A HTTP/1.1 server with one io_uring per CPU core.\n"
               "\n"
               "Options (each can also be set by the environment variable under it, named\n"
               "--foo-bar -> CORING_FOO_BAR; the flag wins; empty is unset; switches take\n"
               "1/true/yes/on or 0/false/no/off; see docs/configuration.md):\n");
    coring_options_help(f, coring_config_options, settings);
    for (size_t i = 0; i < cfg->num_available; i++) {
        const app_def *app = cfg->available[i];
        if (!app->num_options)
            continue;
        fprintf(f, "\nOptions of the %s app (taken whether it is mounted or not):\n", app->name);
        coring_options_help(f, app->options, app->num_options);
    }
    fprintf(f, "\nCommands:\n");
    coring_options_help(f, coring_config_options + settings, coring_config_num_options - settings);
    fprintf(f, "\n"
               "Environment:\n"
               "  DATABASE_URL             libpq URI or conninfo of PostgreSQL, required when an\n"
               "                           app on it is mounted (");
    const char *sep = "";
    for (size_t i = 0; i < cfg->num_available; i++)
        if (cfg->available[i]->database) {
            fprintf(f, "%s%s", sep, cfg->available[i]->name);
            sep = ", ";
        }
    fprintf(f, "%s--list-apps says which)\n"
               "  DATABASE_READ_URL        optional libpq URI or conninfo of a read replica: the\n"
               "                           apps' reads go there while it is up, else to\n"
               "                           DATABASE_URL (docs/operating.md)\n",
            *sep ? "; " : "");
    for (size_t i = 0; i < cfg->num_available; i++)
        if (cfg->available[i]->environment)
            fputs(cfg->available[i]->environment, f);
    fprintf(f, "\nApps:\n");
    for (size_t i = 0; i < cfg->num_available; i++)
        fprintf(f, "  %-8s %s\n", cfg->available[i]->name, cfg->available[i]->summary);
    fprintf(f, "\nAlways mounted:\n"
               "  GET /metrics             Prometheus text format 0.0.4 (docs/metrics.md)\n"
               "  GET /openapi.json        the OpenAPI 3.1 document of the routes mounted\n"
               "  GET /docs                Swagger UI on it (503 when built without npm)\n"
               "  GET /livez               200 while the process serves\n"
               "  GET /readyz              200 when every mounted app can serve, else 503 naming what\n"
               "                           is not (the database, the model, a drain begun)\n");
    return CORING_OPTIONS_EXIT;
}

int coring_config_parse(coring_config *cfg, int argc, char **argv)
{
    /* The server's rows, then each app's, with its own settings. */
    coring_option_table *tables = calloc(cfg->num_available + 1, sizeof(*tables));
    if (!tables)
        return -ENOMEM;
    size_t n = 0;
    tables[n++] = (coring_option_table){
        .rows = coring_config_options, .count = coring_config_num_options, .config = cfg};
    for (size_t i = 0; i < cfg->num_available; i++) {
        const app_def *app = cfg->available[i];
        if (app->num_options)
            tables[n++] = (coring_option_table){
                .title = app->name, .rows = app->options, .count = app->num_options,
                .config = app->config};
    }
    int err = coring_options_parse_tables(tables, n, argc, argv);
    free(tables);
    return err;
}
