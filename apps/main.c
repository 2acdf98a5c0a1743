/*
 * coring: the server binary. Parses the command line, mounts the chosen
 * apps on one router and serves them on every core until SIGINT/SIGTERM.
 */
#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/apps/env_config.h"
#include "coring/apps/health.h"
#include "coring/apps/metrics.h"
#include "coring/core/clock.h"
#include "coring/core/coro.h"
#include "coring/core/log.h"
#include "coring/http/client.h"
#include "coring/http/cors.h"
#include "coring/http/server.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef CORING_VERSION
#define CORING_VERSION "0.0.0"
#endif

static const app_def *const all_apps[] = {&app_hello, &app_todo, &app_users, &app_cep, &app_embed};
#define NUM_APPS (sizeof(all_apps) / sizeof(all_apps[0]))

static const app_def *mounted[NUM_APPS];
static size_t num_mounted;

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: coring [options]\n"
            "\n"
            "A HTTP/1.1 server with one io_uring per CPU core.\n"
            "\n"
            "Options (each can also be set by the environment variable under it, named\n"
            "--foo-bar -> CORING_FOO_BAR; the flag wins; empty is unset; switches take\n"
            "1/true/yes/on or 0/false/no/off; see docs/configuration.md):\n"
            "  --host ADDR              numeric IPv4/IPv6 address to listen on (default 0.0.0.0)\n"
            "  --port N                 TCP port (default 8080; 0 picks a free one)\n"
            "  --threads N              worker threads (default: CPUs in the affinity mask)\n"
            "  --pin on|off             pin each worker thread to its own CPU (default off:\n"
            "                           the scheduler may move a thread off a core another\n"
            "                           process keeps busy; docs/configuration.md)\n"
            "  --batch-wait USEC        when busy, wait up to USEC microseconds for several\n"
            "                           completions per io_uring_enter (0-10000; default 200;\n"
            "                           0: off; Linux 6.12+; docs/runtime.md)\n"
            "  --apps LIST              comma-separated apps to mount (default: all)\n"
            "  --stack-size KIB         coroutine stack size (default 64)\n"
            "  --recv-buffers N         provided receive buffers per thread, a power of 2 (default 512)\n"
            "  --recv-buffer-size KIB   size of each provided receive buffer (default 16)\n"
            "  --keepalive-timeout S    idle keep-alive timeout, seconds (default 60)\n"
            "  --header-timeout S       time to receive request headers, seconds (default 10)\n"
            "  --body-timeout S         time to receive a request body, seconds (default 10)\n"
            "  --shutdown-timeout S     drain deadline on SIGINT/SIGTERM, seconds (default 10)\n"
            "  --drain-grace S          on SIGINT/SIGTERM, /readyz 503 but keep accepting for S seconds\n"
            "                           (fractions allowed) before the drain (default 0)\n"
            "  --max-header-bytes N     request line + headers limit (default 16384)\n"
            "  --max-headers N          header count limit (default 100)\n"
            "  --max-body-bytes N       request body limit (default 1048576)\n"
            "  --allow-bare-lf          take a bare LF as a line end in the header section\n"
            "                           (default: 400); unsafe behind a proxy (smuggling)\n"
            "  --max-connections N      open connections limit (default: from RLIMIT_NOFILE)\n"
            "  --user NAME              when started as root: switch to this user once the\n"
            "                           port is bound, before serving\n"
            "  --log-level LEVEL        debug, info, warn, error or off (default info)\n"
            "  --access-log             log one line per request\n"
            "  --log-format FORMAT      text or json (one JSON object a line; default text)\n"
            "  --cors-origins LIST      comma-separated origins (scheme://host[:port], exact\n"
            "                           match) whose pages may call the API from a browser;\n"
            "                           '*' for any origin, without credentials (default: off;\n"
            "                           docs/cors.md)\n"
            "  --db-pool N              database connections per worker thread (default 2)\n"
            "  --db-timeout S           per-query database timeout, seconds (default 5)\n"
            "  --db-routing fill|spread|pack  which connection a query takes: fill\n"
            "                           (default), the first until it has 16 lookups' worth of\n"
            "                           work out, fewer backends awake; spread, the least\n"
            "                           loaded; pack, fewer and larger round trips\n"
            "                           (docs/database.md)\n"
            "  --db-coalesce on|off     send a statement's concurrent queries as one query\n"
            "                           of its batch form (users: inserts) (default on;\n"
            "                           docs/database.md)\n"
            "  --seed-users[=N]         insert N users at start-up (default N: 10000)\n"
            "  --cep-upstream on|off    ask ViaCEP (VIACEP_URL) on a database miss (default on)\n"
            "  --cep-negative-ttl S     remember unknown CEPs, seconds (default 3600)\n"
            "  --cep-connect-timeout-ms N  upstream connect timeout (default 2000)\n"
            "  --cep-timeout-ms N       upstream request timeout (default 5000)\n"
            "  --cep-max-connections N  upstream connections per worker thread (default 8);\n"
            "                           up to 32 per connection wait, more get 503 at once\n"
            "  --todo-max-items N       todos in the store (default 25000); past it POST /todos\n"
            "                           answers 507. memory: all threads together, each\n"
            "                           thread's shard holding N/threads; postgres: the table\n"
            "  --todo-store STORE       where todos live: memory (default, the fastest; per\n"
            "                           process: two processes or hosts hold two lists) or\n"
            "                           postgres (the table todos on DATABASE_URL, required\n"
            "                           then: one list for every process on the database;\n"
            "                           docs/todo.md)\n"
            "  --todo-list-cache on|off  memory store: each thread keeps the GET /todos body it\n"
            "                           built until a write on any thread (default on; exact:\n"
            "                           a GET read after a write's response lists it); off:\n"
            "                           built per request, as the peers in perf/ (docs/todo.md)\n"
            "  --embed-model DIR        embedding model folder (config.json, model.safetensors,\n"
            "                           vocab.txt); without it /embed answers 503\n"
            "  --embed-threads N        inference threads (default: one per spare CPU when\n"
            "                           inference runs on them, else the CPUs in the mask)\n"
            "                           (one text's pass splits across the idle ones)\n"
            "  --embed-placement P      where inference runs: auto (default: spare when the\n"
            "                           affinity mask has more CPUs than ring threads and\n"
            "                           they are pinned, else batch), spare (pinned to the CPUs the rings leave),\n"
            "                           batch (every CPU, SCHED_BATCH + nice 10, below the\n"
            "                           rings), idle (every CPU, SCHED_IDLE: only when no\n"
            "                           other thread wants it), shared (every CPU, the\n"
            "                           rings' priority)\n"
            "  --embed-max-batch N      texts per forward pass (default 16)\n"
            "  --embed-max-wait-us N    time a batch may wait to fill, microseconds (default 1000)\n"
            "  --embed-max-queue N      texts waiting at most before 503 (default 1024)\n"
            "  --embed-int8             run the linear layers in int8 (dynamic quantisation):\n"
            "                           ~1.5x the throughput with AVX-512 VNNI, vectors within\n"
            "                           ~1e-3 of float32 (docs/embeddings.md); default float32\n"
            "  --check-config           check the options and exit: 0 when they are valid,\n"
            "                           2 with the reason otherwise (binds and starts nothing)\n"
            "  --list-routes            print the routes mounted (METHOD PATTERN a line) and exit\n"
            "  --help                   show this help and exit\n"
            "  --version                show the version and exit\n"
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
    for (size_t i = 0; i < NUM_APPS; i++)
        fprintf(f, "  %-8s %s\n", all_apps[i]->name, all_apps[i]->summary);
    fprintf(f, "\nAlways mounted:\n"
               "  GET /metrics             Prometheus text format 0.0.4 (docs/metrics.md)\n"
               "  GET /openapi.json        the OpenAPI 3.1 document of the routes mounted\n"
               "  GET /docs                Swagger UI on it (503 when built without npm)\n"
               "  GET /livez               200 while the process serves\n"
               "  GET /readyz              200 when every mounted app can serve, else 503 naming what\n"
               "                           is not (the database, the model, a drain begun)\n");
}

/* --help: the usage with each option's environment variable beside it. */
static void help(const struct option *options, const char *const *env_skip)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) {
        usage(stdout);
        return;
    }
    usage(f);
    fclose(f);
    env_config_help(stdout, text, options, env_skip);
    free(text);
}

/* Parse a whole decimal number in [min, max]; exits with a message if not. */
static unsigned long long number(const char *flag, const char *s, unsigned long long min,
                                 unsigned long long max)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v < min || v > max) {
        fprintf(stderr, "coring: %s: expected a number from %llu to %llu, got '%s'\n",
                env_config_name(flag), min, max, s);
        if (strncmp(s, "tcp://", 6) == 0)
            fprintf(stderr, "coring: that looks like a Kubernetes service link (a Service named "
                            "coring): set enableServiceLinks: false in the pod spec\n");
        exit(2);
    }
    return v;
}

/* Parse a decimal number of seconds in [0, max], fractions allowed
 * ("1.5"), into nanoseconds; exits with a message if not. */
static uint64_t seconds_ns(const char *flag, const char *s, unsigned max)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= max) ||
        s[strspn(s, "0123456789.")] != '\0') {
        fprintf(stderr, "coring: %s: expected seconds from 0 to %u (e.g. 1.5), got '%s'\n",
                env_config_name(flag), max, s);
        exit(2);
    }
    return (uint64_t)(v * 1e9 + 0.5);
}

/* The index of @s among the @n names of @names; exits with a message
 * naming them all (as "a, b or c") if it is none of them. */
static unsigned choice(const char *flag, const char *s, const char *const *names, unsigned n)
{
    for (unsigned k = 0; k < n; k++)
        if (strcmp(s, names[k]) == 0)
            return k;
    fprintf(stderr, "coring: %s: expected ", env_config_name(flag));
    for (unsigned k = 0; k < n; k++)
        fprintf(stderr, "%s%s", names[k], k + 2 < n ? ", " : k + 2 == n ? " or " : "");
    fprintf(stderr, ", got '%s'\n", s);
    exit(2);
}

/* choice() between "on" and "off": true for "on". */
static bool on_off(const char *flag, const char *s)
{
    static const char *const names[] = {"on", "off"};
    return choice(flag, s, names, 2) == 0;
}

/* Say what is wrong with the option getopt_long refused in @arg (as it
 * stands in argv): unknown, missing its value, or given one it takes none. */
static void bad_option(const struct option *options, const char *arg)
{
    const char *name = arg[0] == '-' && arg[1] == '-' ? arg + 2 : NULL;
    size_t len = name ? strcspn(name, "=") : 0;
    const struct option *o = NULL;
    for (const struct option *p = options; name && p->name; p++)
        if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
            o = p;
    if (!o)
        fprintf(stderr, "coring: unknown option '%s'\n", arg);
    else if (o->has_arg == required_argument)
        fprintf(stderr, "coring: option '--%s' needs a value\n", o->name);
    else
        fprintf(stderr, "coring: option '--%s' takes no value\n", o->name);
    fprintf(stderr, "Try 'coring --help'.\n");
}

static void select_apps(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        const app_def *found = NULL;
        for (size_t i = 0; i < NUM_APPS; i++)
            if (strcmp(all_apps[i]->name, name) == 0)
                found = all_apps[i];
        if (!found) {
            fprintf(stderr, "coring: %s: unknown app '%s' (known:", env_config_name("--apps"), name);
            for (size_t i = 0; i < NUM_APPS; i++)
                fprintf(stderr, " %s", all_apps[i]->name);
            fprintf(stderr, ")\n");
            exit(2);
        }
        bool dup = false;
        for (size_t i = 0; i < num_mounted; i++)
            dup = dup || mounted[i] == found;
        if (!dup)
            mounted[num_mounted++] = found;
    }
    if (num_mounted == 0) {
        fprintf(stderr, "coring: %s: no app given\n", env_config_name("--apps"));
        exit(2);
    }
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

/* --user: the account to run as, looked up before start-up. */
static const char *run_as;

/* The --cors-origins policy: freed at the end of main, and a global so
 * that it stays reachable on every early return out of main. */
static http_cors *cors;

/* Drop root for @run_as once the listeners are bound (so that ports below
 * 1024 work) and before any worker thread or ring exists (so that every
 * thread runs unprivileged): supplementary groups, then the group, then the
 * user, and a check that root cannot be regained. */
static int drop_privileges(void *user)
{
    (void)user;
    if (!run_as)
        return 0;
    errno = 0;
    struct passwd *pw = getpwnam(run_as);
    if (!pw) {
        cr_log_error("--user %s: no such user", run_as);
        return errno ? -errno : -ENOENT;
    }
    if (geteuid() != 0) {
        if (pw->pw_uid == geteuid())
            return 0; /* already that user */
        cr_log_error("--user %s: only root can switch users", run_as);
        return -EPERM;
    }
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
    cr_log_info("coring %s listening on http://%s%s%s:%u threads=%u apps=%s", CORING_VERSION,
                v6 ? "[" : "", host, v6 ? "]" : "", port, threads, names);
}

/* Descriptors the apps hold besides client connections, over all worker
 * threads: each thread's database pool and its upstream connections (plus
 * 2 for curl's resolver). --max-connections is computed without them. */
static unsigned outbound_fds(const net_config *net, const app_options *opts)
{
    unsigned threads = net->threads ? net->threads : net_affinity_cpus();
    unsigned per_thread = 0;
    if (app_db_used())
        per_thread += (opts->db_pool ? opts->db_pool : 2) *
                      (getenv("DATABASE_READ_URL") && *getenv("DATABASE_READ_URL") ? 2 : 1);
    for (size_t i = 0; i < num_mounted; i++)
        if (mounted[i] == &app_cep && !opts->cep_upstream_off)
            per_thread += http_client_get_limits().max_connections + 2;
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

int main(int argc, char **argv)
{
    net_config net = net_config_default();
    http_server_config http = http_server_config_default();
    const char *apps = NULL;
    app_options app_opts = {0};
    app_embed_options embed = {.max_wait_us = 1000};

    enum {
        OPT_HOST = 256, OPT_PORT, OPT_THREADS, OPT_APPS, OPT_STACK, OPT_KEEPALIVE, OPT_HEADER,
        OPT_BODY, OPT_SHUTDOWN, OPT_MAX_HEADER_BYTES, OPT_MAX_HEADERS, OPT_MAX_BODY,
        OPT_MAX_CONN, OPT_RECV_BUFFERS, OPT_RECV_BUFFER_SIZE, OPT_LOG_LEVEL, OPT_ACCESS_LOG,
        OPT_HELP, OPT_VERSION, OPT_DB_POOL, OPT_DB_TIMEOUT, OPT_DB_ROUTING, OPT_DB_COALESCE, OPT_SEED_USERS, OPT_CEP_UPSTREAM,
        OPT_CEP_NEGATIVE_TTL, OPT_CEP_CONNECT_TIMEOUT, OPT_CEP_TIMEOUT, OPT_CEP_MAX_CONN, OPT_EMBED_MODEL,
        OPT_EMBED_THREADS, OPT_EMBED_MAX_BATCH, OPT_EMBED_MAX_WAIT, OPT_EMBED_MAX_QUEUE,
        OPT_EMBED_INT8, OPT_EMBED_PLACEMENT,
        OPT_LIST_ROUTES,
        OPT_USER, OPT_CHECK_CONFIG, OPT_ALLOW_BARE_LF, OPT_TODO_MAX_ITEMS,
        OPT_CORS_ORIGINS,
        OPT_TODO_STORE,
        OPT_TODO_LIST_CACHE,
        OPT_LOG_FORMAT,
        OPT_DRAIN_GRACE,
        OPT_PIN,
        OPT_BATCH_WAIT,
    };
    static const struct option options[] = {
        {"host", required_argument, NULL, OPT_HOST},
        {"port", required_argument, NULL, OPT_PORT},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"apps", required_argument, NULL, OPT_APPS},
        {"stack-size", required_argument, NULL, OPT_STACK},
        {"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE},
        {"header-timeout", required_argument, NULL, OPT_HEADER},
        {"body-timeout", required_argument, NULL, OPT_BODY},
        {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN},
        {"drain-grace", required_argument, NULL, OPT_DRAIN_GRACE},
        {"pin", required_argument, NULL, OPT_PIN},
        {"batch-wait", required_argument, NULL, OPT_BATCH_WAIT},
        {"max-header-bytes", required_argument, NULL, OPT_MAX_HEADER_BYTES},
        {"max-headers", required_argument, NULL, OPT_MAX_HEADERS},
        {"max-body-bytes", required_argument, NULL, OPT_MAX_BODY},
        {"allow-bare-lf", no_argument, NULL, OPT_ALLOW_BARE_LF},
        {"max-connections", required_argument, NULL, OPT_MAX_CONN},
        {"recv-buffers", required_argument, NULL, OPT_RECV_BUFFERS},
        {"recv-buffer-size", required_argument, NULL, OPT_RECV_BUFFER_SIZE},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"access-log", no_argument, NULL, OPT_ACCESS_LOG},
        {"cors-origins", required_argument, NULL, OPT_CORS_ORIGINS},
        {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
        {"db-pool", required_argument, NULL, OPT_DB_POOL},
        {"db-routing", required_argument, NULL, OPT_DB_ROUTING},
        {"db-coalesce", required_argument, NULL, OPT_DB_COALESCE},
        {"db-timeout", required_argument, NULL, OPT_DB_TIMEOUT},
        {"seed-users", optional_argument, NULL, OPT_SEED_USERS},
        {"cep-upstream", required_argument, NULL, OPT_CEP_UPSTREAM},
        {"cep-negative-ttl", required_argument, NULL, OPT_CEP_NEGATIVE_TTL},
        {"cep-connect-timeout-ms", required_argument, NULL, OPT_CEP_CONNECT_TIMEOUT},
        {"cep-timeout-ms", required_argument, NULL, OPT_CEP_TIMEOUT},
        {"cep-max-connections", required_argument, NULL, OPT_CEP_MAX_CONN},
        {"embed-model", required_argument, NULL, OPT_EMBED_MODEL},
        {"embed-threads", required_argument, NULL, OPT_EMBED_THREADS},
        {"embed-max-batch", required_argument, NULL, OPT_EMBED_MAX_BATCH},
        {"embed-max-wait-us", required_argument, NULL, OPT_EMBED_MAX_WAIT},
        {"embed-max-queue", required_argument, NULL, OPT_EMBED_MAX_QUEUE},
        {"embed-int8", no_argument, NULL, OPT_EMBED_INT8},
        {"embed-placement", required_argument, NULL, OPT_EMBED_PLACEMENT},
        {"user", required_argument, NULL, OPT_USER},
        {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
        {"list-routes", no_argument, NULL, OPT_LIST_ROUTES},
        {"todo-max-items", required_argument, NULL, OPT_TODO_MAX_ITEMS},
        {"todo-store", required_argument, NULL, OPT_TODO_STORE},
        {"todo-list-cache", required_argument, NULL, OPT_TODO_LIST_CACHE},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {0},
    };
    /* Not settings but commands: no variable for them. */
    static const char *const env_skip[] = {"help", "version", "check-config", "list-routes", NULL};
    int env_err = env_config_apply(&argc, &argv, options, env_skip);
    if (env_err < 0)
        return env_err == -EINVAL ? 2 : 1;
    bool check_only = false;
    bool list_routes = false;
    bool todo_postgres = false;
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case OPT_HOST: net.host = optarg; break;
        case OPT_PORT: net.port = (uint16_t)number("--port", optarg, 0, 65535); break;
        case OPT_THREADS: net.threads = (unsigned)number("--threads", optarg, 1, 1024); break;
        case OPT_APPS: apps = optarg; break;
        case OPT_STACK: net.stack_size = number("--stack-size", optarg, 16, 65536) * 1024; break;
        case OPT_KEEPALIVE:
            http.keepalive_timeout_ns = number("--keepalive-timeout", optarg, 1, 86400) * CR_NS_PER_S;
            break;
        case OPT_HEADER:
            http.header_timeout_ns = number("--header-timeout", optarg, 1, 3600) * CR_NS_PER_S;
            break;
        case OPT_BODY:
            http.body_timeout_ns = number("--body-timeout", optarg, 1, 3600) * CR_NS_PER_S;
            break;
        case OPT_SHUTDOWN:
            net.shutdown_timeout_ns = number("--shutdown-timeout", optarg, 0, 3600) * CR_NS_PER_S;
            break;
        case OPT_DRAIN_GRACE: net.drain_grace_ns = seconds_ns("--drain-grace", optarg, 3600); break;
        case OPT_PIN: net.pin = on_off("--pin", optarg); break;
        case OPT_BATCH_WAIT:
            net.batch_wait_us = (unsigned)number("--batch-wait", optarg, 0, NET_BATCH_WAIT_US_MAX);
            break;
        case OPT_MAX_HEADER_BYTES:
            http.limits.max_header_bytes = number("--max-header-bytes", optarg, 256, 1 << 20);
            break;
        case OPT_MAX_HEADERS:
            http.limits.max_headers = number("--max-headers", optarg, 1, 256);
            break;
        case OPT_MAX_BODY:
            http.limits.max_body_bytes = number("--max-body-bytes", optarg, 0, 1ull << 30);
            break;
        case OPT_ALLOW_BARE_LF: http.limits.allow_bare_lf = true; break;
        case OPT_MAX_CONN:
            net.max_connections = (unsigned)number("--max-connections", optarg, 1, UINT_MAX);
            break;
        case OPT_RECV_BUFFERS:
            net.provided_buffers = (unsigned)number("--recv-buffers", optarg, 1, 32768);
            if (net.provided_buffers & (net.provided_buffers - 1)) {
                fprintf(stderr, "coring: %s: must be a power of 2\n",
                        env_config_name("--recv-buffers"));
                return 2;
            }
            break;
        case OPT_RECV_BUFFER_SIZE:
            net.provided_buffer_size =
                (unsigned)number("--recv-buffer-size", optarg, 1, 1024) * 1024;
            break;
        case OPT_LOG_LEVEL: {
            int level = cr_log_parse_level(optarg);
            if (level < 0) {
                fprintf(stderr, "coring: %s: expected debug, info, warn, error or off, got '%s'\n",
                        env_config_name("--log-level"), optarg);
                return 2;
            }
            cr_log_set_level((cr_log_level)level);
            break;
        }
        case OPT_ACCESS_LOG: http.access_log = true; break;
        case OPT_CORS_ORIGINS: {
            char why[160];
            http_cors_destroy(cors); /* given twice: the last wins */
            int err = http_cors_create(optarg, &cors, why, sizeof(why));
            if (err < 0) {
                fprintf(stderr, "coring: %s: %s\n", env_config_name("--cors-origins"),
                        err == -EINVAL ? why : cr_strerror(err));
                return 2;
            }
            http.cors = cors;
            break;
        }
        case OPT_LOG_FORMAT: {
            int format = cr_log_parse_format(optarg);
            if (format < 0) {
                fprintf(stderr, "coring: %s: expected text or json, got '%s'\n",
                        env_config_name("--log-format"), optarg);
                return 2;
            }
            cr_log_set_format((cr_log_format)format);
            break;
        }
        case OPT_DB_POOL: app_opts.db_pool = (unsigned)number("--db-pool", optarg, 1, 64); break;
        case OPT_DB_ROUTING: {
            /* In db_routing's order (coring/db/db.h). */
            static const char *const names[] = {"fill", "spread", "pack"};
            app_opts.db_routing = (unsigned)choice("--db-routing", optarg, names, 3);
            break;
        }
        case OPT_DB_TIMEOUT:
            app_opts.db_timeout_ns = number("--db-timeout", optarg, 1, 3600) * CR_NS_PER_S;
            break;
        case OPT_SEED_USERS: {
            /* --seed-users, --seed-users=N or --seed-users N */
            const char *n = optarg;
            if (!n && optind < argc && argv[optind][0] >= '0' && argv[optind][0] <= '9')
                n = argv[optind++];
            app_opts.seed_users = n ? number("--seed-users", n, 1, 100000000) : 10000;
            break;
        }
        case OPT_EMBED_MODEL: embed.model_dir = optarg; break;
        case OPT_EMBED_THREADS:
            embed.threads = (unsigned)number("--embed-threads", optarg, 1, 1024);
            break;
        case OPT_EMBED_MAX_BATCH:
            embed.max_batch = (unsigned)number("--embed-max-batch", optarg, 1, 1024);
            break;
        case OPT_EMBED_MAX_WAIT:
            embed.max_wait_us = (unsigned)number("--embed-max-wait-us", optarg, 0, 1000000);
            break;
        case OPT_EMBED_MAX_QUEUE:
            embed.max_queue = (unsigned)number("--embed-max-queue", optarg, 1, 1u << 20);
            break;
        case OPT_EMBED_INT8: embed.int8 = true; break;
        case OPT_EMBED_PLACEMENT: {
            static const char *const names[] = {"auto", "spare", "batch", "idle", "shared"};
            embed.placement = (app_embed_placement)choice("--embed-placement", optarg, names, 5);
            break;
        }
        case OPT_DB_COALESCE:
            app_opts.db_coalesce_off = !on_off("--db-coalesce", optarg);
            break;
        case OPT_CEP_UPSTREAM:
            app_opts.cep_upstream_off = !on_off("--cep-upstream", optarg);
            break;
        case OPT_CEP_NEGATIVE_TTL:
            app_opts.cep_negative_ttl_ns = number("--cep-negative-ttl", optarg, 1, 30 * 86400) * CR_NS_PER_S;
            break;
        case OPT_CEP_CONNECT_TIMEOUT:
            app_opts.cep_connect_timeout_ns =
                number("--cep-connect-timeout-ms", optarg, 1, 600000) * CR_NS_PER_MS;
            break;
        case OPT_CEP_TIMEOUT:
            app_opts.cep_total_timeout_ns = number("--cep-timeout-ms", optarg, 1, 600000) * CR_NS_PER_MS;
            break;
        case OPT_CEP_MAX_CONN:
            app_opts.cep_max_connections = (unsigned)number("--cep-max-connections", optarg, 1, 1024);
            break;
        case OPT_USER: run_as = optarg; break;
        case OPT_CHECK_CONFIG: check_only = true; break;
        case OPT_LIST_ROUTES: list_routes = true; break;
        case OPT_TODO_MAX_ITEMS:
            app_opts.todo_max_items = number("--todo-max-items", optarg, 1, 1ull << 32);
            break;
        case OPT_TODO_STORE: {
            static const char *const names[] = {"memory", "postgres"};
            todo_postgres = choice("--todo-store", optarg, names, 2) == 1;
            break;
        }
        case OPT_TODO_LIST_CACHE:
            app_opts.todo_list_cache_off = !on_off("--todo-list-cache", optarg);
            break;
        case OPT_HELP: help(options, env_skip); return 0;
        case OPT_VERSION: printf("coring %s\n", CORING_VERSION); return 0;
        default:
            bad_option(options, argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "coring: unexpected argument '%s'\nTry 'coring --help'.\n", argv[optind]);
        return 2;
    }

    if (apps) {
        select_apps(apps);
    } else {
        for (size_t i = 0; i < NUM_APPS; i++)
            mounted[num_mounted++] = all_apps[i];
    }
    for (size_t i = 0; i < num_mounted && todo_postgres; i++)
        if (mounted[i] == &app_todo)
            mounted[i] = &app_todo_postgres;
    if (!net_host_valid(net.host)) {
        fprintf(stderr, "coring: %s: expected a numeric IPv4 or IPv6 address, got '%s'\n",
                env_config_name("--host"), net.host);
        return 2;
    }
    if (check_only) {
        printf("coring: configuration OK\n");
        return 0;
    }

    embed.ring_threads = net.threads;
    embed.rings_pinned = net.pin;
    app_embed_configure(&embed);
    http_router *router = http_router_create();
    if (!router) {
        fprintf(stderr, "coring: out of memory\n");
        return 1;
    }
    /* GET /metrics whatever --apps says (docs/metrics.md). */
    if (app_metrics_mount(router, CORING_VERSION) < 0) {
        cr_log_error("cannot mount /metrics");
        return 1;
    }
    for (size_t i = 0; i < num_mounted; i++) {
        int err = mounted[i]->mount(router);
        if (err < 0) {
            cr_log_error("app %s: cannot mount its routes: %s", mounted[i]->name, cr_strerror(err));
            return 1;
        }
    }
    int health_err = app_health_mount(router, mounted, num_mounted);
    if (health_err < 0) {
        cr_log_error("cannot mount /livez and /readyz: %s", cr_strerror(health_err));
        return 1;
    }
    int openapi_err = app_openapi_mount(router);
    if (openapi_err < 0) {
        cr_log_error("cannot mount /openapi.json and /docs: %s", cr_strerror(openapi_err));
        return 1;
    }
    if (list_routes) {
        http_router_each(router, print_route, NULL);
        return 0;
    }
    if (app_db_used() && app_db_start(&app_opts) < 0)
        return 1; /* it logged why */
    for (size_t i = 0; i < num_mounted; i++)
        if (mounted[i]->start && mounted[i]->start(&app_opts) < 0)
            return 1; /* the app logged why */

    net.reserved_fds = outbound_fds(&net, &app_opts);
    http_server srv = {
        .cfg = http,
        .router = router,
        .thread_init = apps_thread_init,
        .thread_fini = apps_thread_fini,
        .on_listening = on_listening,
        .after_bind = drop_privileges,
    };
    int ret = http_serve(&srv, &net);
    for (size_t i = num_mounted; i-- > 0;)
        if (mounted[i]->stop)
            mounted[i]->stop();
    http_router_destroy(router);
    http_cors_destroy(cors);
    return ret == 0 ? 0 : 1;
}
