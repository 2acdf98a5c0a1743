/*
 * The `coring` command line: every option as one row of a table
 * (coring/apps/options.h), in --help's order, with its defaults and the
 * fixed parts of --help around the rows. What an option sets is a field of
 * coring_config; coring_main() (startup.c) starts the server from it.
 */
#include "coring/apps/startup.h"

#include "coring/core/clock.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "coring/http/accept_encoding.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#ifndef CORING_VERSION
#define CORING_VERSION "0.0.0"
#endif

coring_config coring_config_default(void)
{
    net_config net = net_config_default();
    net.shutdown_timeout_ns = CORING_SHUTDOWN_TIMEOUT_AUTO; /* startup.c chooses it */
    return (coring_config){
        .net = net,
        .http = http_server_config_default(),
        .embed = {.max_wait_us = 1000},
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

/* --compression: on, off, or the codings offered (docs/compression.md). */
static int set_compression(void *config, const char *value)
{
    if (http_codings_parse(value, &((coring_config *)config)->http.compression_codings) == 0)
        return 0;
    fprintf(stderr, "coring: %s: expected on, off or a list of zstd, br, gzip, got '%s'\n",
            coring_option_source("--compression"), value);
    return CORING_OPTIONS_REFUSED;
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

static int help(void *config, const char *value);

static int version(void *config, const char *value)
{
    (void)config;
    (void)value;
    printf("coring %s\n", CORING_VERSION);
    return CORING_OPTIONS_EXIT;
}

/* In db_routing's order (coring/db/db.h). */
static const char *const db_routings[] = {"fill", "spread", "pack"};
static const char *const todo_stores[] = {"memory", "postgres"};
/* In app_embed_placement's order (coring/apps/apps.h). */
static const char *const embed_placements[] = {"auto", "spare", "batch", "idle", "shared"};

#define FIELD(f) .offset = offsetof(coring_config, f), .size = sizeof(((coring_config *)0)->f)

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
    {.name = "seed-users", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(apps.seed_users),
     .min = 1, .max = 100000000, .implicit = "10000",
     .help = "insert N users at start-up (default N: 10000)",
     .default_doc = "off (N: 10000)"},
    {.name = "cep-upstream", .value = "on|off", .kind = CORING_OPTION_ON_OFF,
     FIELD(apps.cep_upstream_off), .inverted = true,
     .help = "ask ViaCEP (VIACEP_URL) on a database miss (default on)",
     .default_doc = "`on`"},
    {.name = "cep-negative-ttl", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.cep_negative_ttl_ns), .min = 1, .max = 30 * 86400, .scale = CR_NS_PER_S,
     .help = "remember unknown CEPs, seconds (default 3600)",
     .default_doc = "3600 s"},
    {.name = "cep-connect-timeout-ms", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.cep_connect_timeout_ns), .min = 1, .max = 600000, .scale = CR_NS_PER_MS,
     .help = "upstream connect timeout (default 2000)",
     .default_doc = "2000"},
    {.name = "cep-timeout-ms", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.cep_total_timeout_ns), .min = 1, .max = 600000, .scale = CR_NS_PER_MS,
     .help = "upstream request timeout (default 5000)",
     .default_doc = "5000"},
    {.name = "cep-max-connections", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.cep_max_connections), .min = 1, .max = 1024,
     .help = "upstream connections per worker thread (default 8);\n"
             "up to 32 per connection wait, more get 503 at once",
     .default_doc = "8"},
    {.name = "todo-max-items", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(apps.todo_max_items), .min = 1, .max = 1ull << 32,
     .help = "todos in the store (default 25000); past it POST /todos\n"
             "answers 507. memory: all threads together, each\n"
             "thread's shard holding N/threads; postgres: the table",
     .default_doc = "25000"},
    {.name = "todo-store", .value = "STORE", .kind = CORING_OPTION_CHOICE, FIELD(todo_postgres),
     .words = todo_stores, .num_words = cr_countof(todo_stores),
     .help = "where todos live: memory (default, the fastest; per\n"
             "process: two processes or hosts hold two lists) or\n"
             "postgres (the table todos on DATABASE_URL, required\n"
             "then: one list for every process on the database;\n"
             "docs/todo.md)",
     .default_doc = "`memory`"},
    {.name = "todo-list-cache", .value = "on|off", .kind = CORING_OPTION_ON_OFF,
     FIELD(apps.todo_list_cache_off), .inverted = true,
     .help = "memory store: each thread keeps the GET /todos body it\n"
             "built until a write on any thread (default on; exact:\n"
             "a GET read after a write's response lists it); off:\n"
             "built per request, as the peers in perf/ (docs/todo.md)",
     .default_doc = "`on`"},
    {.name = "embed-model", .value = "DIR", .kind = CORING_OPTION_STRING, FIELD(embed.model_dir),
     .help = "embedding model folder (config.json, model.safetensors,\n"
             "vocab.txt); without it /embed answers 503",
     .default_doc = "none"},
    {.name = "embed-threads", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(embed.threads),
     .min = 1, .max = 1024,
     .help = "inference threads (default: one per spare CPU when\n"
             "inference runs on them, else the CPUs in the mask)\n"
             "(one text's pass splits across the idle ones)",
     .default_doc = "one per spare CPU when inference runs on spare CPUs (`--embed-placement` auto "
                    "or spare), else the CPUs in the affinity mask"},
    {.name = "embed-placement", .value = "P", .kind = CORING_OPTION_CHOICE, FIELD(embed.placement),
     .words = embed_placements, .num_words = cr_countof(embed_placements),
     .help = "where inference runs: auto (default: spare when the\n"
             "affinity mask has more CPUs than ring threads and\n"
             "they are pinned, else batch), spare (pinned to the CPUs the rings leave),\n"
             "batch (every CPU, SCHED_BATCH + nice 10, below the\n"
             "rings), idle (every CPU, SCHED_IDLE: only when no\n"
             "other thread wants it), shared (every CPU, the\n"
             "rings' priority)",
     .default_doc = "auto"},
    {.name = "embed-max-batch", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(embed.max_batch),
     .min = 1, .max = 1024,
     .help = "texts per forward pass (default 16)",
     .default_doc = "16"},
    {.name = "embed-max-wait-us", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(embed.max_wait_us), .min = 0, .max = 1000000,
     .help = "time a batch may wait to fill, microseconds (default 1000)",
     .default_doc = "1000"},
    {.name = "embed-max-queue", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(embed.max_queue),
     .min = 1, .max = 1u << 20,
     .help = "texts waiting at most before 503 (default 1024)",
     .default_doc = "1024"},
    {.name = "embed-int8", .kind = CORING_OPTION_SWITCH, FIELD(embed.int8),
     .help = "run the linear layers in int8 (dynamic quantisation):\n"
             "~1.5x the throughput with AVX-512 VNNI, vectors within\n"
             "~1e-3 of float32 (docs/embeddings.md); default float32",
     .default_doc = "off"},
    {.name = "check-config", .kind = CORING_OPTION_COMMAND, .set = check_config,
     .help = "check the options and exit: 0 when they are valid,\n"
             "2 with the reason otherwise (binds and starts nothing)",
     .default_doc = "off"},
    {.name = "list-routes", .kind = CORING_OPTION_COMMAND, .set = list_routes,
     .help = "print the routes mounted (METHOD PATTERN a line) and exit",
     .default_doc = ""},
    {.name = "help", .kind = CORING_OPTION_COMMAND, .set = help,
     .help = "show this help and exit",
     .default_doc = ""},
    {.name = "version", .kind = CORING_OPTION_COMMAND, .set = version,
     .help = "show the version and exit",
     .default_doc = ""},
};

const size_t coring_config_num_options = cr_countof(coring_config_options);

/* --help: the options, each with its variable, between fixed parts. */
static int help(void *config, const char *value)
{
    (void)value;
    const coring_config *cfg = config;
    FILE *f = stdout;
    fprintf(f, "Usage: coring [options]\n"
               "\n"
               "A HTTP/1.1 server with one io_uring per CPU core.\n"
               "\n"
               "Options (each can also be set by the environment variable under it, named\n"
               "--foo-bar -> CORING_FOO_BAR; the flag wins; empty is unset; switches take\n"
               "1/true/yes/on or 0/false/no/off; see docs/configuration.md):\n");
    coring_options_help(f, coring_config_options, coring_config_num_options);
    fprintf(f,
            "\n"
            "Environment:\n"
            "  DATABASE_URL             libpq URI or conninfo of PostgreSQL (users, cep, and todo\n"
            "                           with --todo-store postgres; required when one is mounted)\n"
            "  DATABASE_READ_URL        optional libpq URI or conninfo of a read replica: reads of\n"
            "                           users and CEPs go there while it is up, else to\n"
            "                           DATABASE_URL (docs/operating.md)\n"
            "  VIACEP_URL               the cep app's upstream (default https://viacep.com.br/ws)\n"
            "  OPENBLAS_CORETYPE        read by OpenBLAS: forces its kernels for the embed app\n"
            "                           (Haswell, SkylakeX, ...; used where coring's AVX-512\n"
            "                           kernels do not run); unset, it picks them for the CPU\n"
            "  CORING_EMBED_KERNELS     auto (default: AVX-512 where the CPU has it) or portable:\n"
            "                           the embed app's element-wise kernels and int8 product\n"
            "                           in portable C whatever the CPU (docs/embeddings.md)\n"
            "\n"
            "Apps:\n");
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
    return coring_options_parse(coring_config_options, coring_config_num_options, cfg, argc, argv);
}
