/*
 * The `coring` server's start-up as library calls: its configuration (one
 * struct, filled from the defaults, the CORING_ variables and the command
 * line by the rows of coring_config_options), and coring_main(), which
 * mounts the apps it is given and serves them. apps/main.c is the binary:
 * its own list of apps and one call.
 */
#ifndef CORING_APPS_STARTUP_H
#define CORING_APPS_STARTUP_H

#include "coring/apps/apps.h"
#include "coring/apps/options.h"
#include "coring/core/clock.h"
#include "coring/http/cors.h"
#include "coring/http/proxy.h"
#include "coring/http/rate_limit.h"
#include "coring/http/server.h"
#include "coring/net/runtime.h"

#include <stdbool.h>
#include <stddef.h>

/* Everything the command line sets. */
typedef struct coring_config {
    net_config net;            /* the runtime: threads, port, stacks, timeouts */
    http_server_config http;   /* the HTTP layer: limits, timeouts, logs, CORS */
    app_options apps;          /* what the apps' start() may read (the database's) */
    const char *mount;         /* --apps: comma-separated names; NULL: every app */
    const char *user;          /* --user: the account to run as once bound; NULL: none */
    http_cors *cors;           /* --cors-origins' policy (owned: http_cors_destroy) */
    http_trusted_proxies *trusted_proxies; /* --trusted-proxies (owned:
                                              http_trusted_proxies_destroy) */
    unsigned rate_limit;       /* --rate-limit: requests a second per client; 0: off */
    unsigned rate_burst;       /* --rate-burst: requests at once; 0: the rate */
    const char *rate_limit_exempt; /* --rate-limit-exempt: comma-separated paths */
    http_rate_limit *rate_limiter; /* built from the three once they are read (owned:
                                      http_rate_limit_destroy); NULL: off */
    bool check_only;           /* --check-config */
    bool list_routes;          /* --list-routes */
    const char *list_apps;     /* --list-apps: "text" or "json"; NULL: not asked */
    bool print_openapi;        /* --openapi */
    const char *deadline;      /* --deadline (coring/apps/deadline.h); NULL: the apps' own */
    const app_def *const *available; /* the apps --apps may name, for it and --help; their
                                      * options are read with the server's */
    size_t num_available;
} coring_config;

/* coring_config_default - the defaults of every setting (no app list).
 * Its net.shutdown_timeout_ns is CORING_SHUTDOWN_TIMEOUT_AUTO: chosen
 * from the apps mounted (coring_shutdown_timeout) unless given. */
coring_config coring_config_default(void);

/* The drain deadline not given: the start-up chooses it. */
#define CORING_SHUTDOWN_TIMEOUT_AUTO UINT64_MAX
/* The drain deadline when no mounted app's request may take longer. */
#define CORING_SHUTDOWN_TIMEOUT_MIN_NS (10 * CR_NS_PER_S)
/* Time allowed on top of a request's waits (each timeout fires up to a
 * loop tick late, and the handler runs between them). */
#define CORING_SHUTDOWN_MARGIN_NS (1 * CR_NS_PER_S)
/* How late a request's deadline may end it: the loop's tick (100 ms) and
 * the handler's answer after it. */
#define CORING_DEADLINE_SLACK_NS (200 * CR_NS_PER_MS)

/*
 * coring_longest_request_ns - the longest a request of the @n apps
 * @mounted may take under @opts: the waits a handler makes one after the
 * other, each bounded by its timeout (a database query: --db-timeout; an
 * upstream call: --cep-timeout-ms, its connect included). users and todo
 * on PostgreSQL: two queries (a POST with an Idempotency-Key: its insert,
 * then the key's answer after a conflict; GET /users/{id}: the replica
 * and the primary within one --db-timeout, then the primary again); cep:
 * a lookup, the upstream call, a write. embed's wait for inference has no
 * timeout and is not counted; hello and todo in memory do not wait. When
 * @why is not NULL, writes into it (@len bytes) the sum it took ("cep: 2 x
 * --db-timeout 5 s + --cep-timeout-ms 5000"), "" for 0. Any thread.
 */
uint64_t coring_longest_request_ns(const app_def *const *mounted, size_t n,
                                   const app_options *opts, char *why, size_t len);

/* The option rows of `coring`, in --help's order (docs/configuration.md
 * lists them in the same order). */
extern const coring_option coring_config_options[];
extern const size_t coring_config_num_options;

/*
 * coring_config_parse - coring_options_parse_tables() with coring's rows
 * into @cfg and each of @cfg's available apps' rows into its own settings
 * (app_def.options, .config). Returns 0 to go on, CORING_OPTIONS_EXIT
 * (--help or --version printed), CORING_OPTIONS_REFUSED after a message,
 * -EEXIST after a message (an app's option named as another), or
 * -ENOMEM. Main thread, once.
 */
int coring_config_parse(coring_config *cfg, int argc, char **argv);

/*
 * coring_main - the `coring` command: read the configuration (environment
 * and @argc/@argv), mount the apps chosen by --apps among the @num_apps of
 * @apps (every one by default; kept by pointer, they must outlive the
 * call) with the server's own routes, start them and serve until SIGINT or
 * SIGTERM, then stop them. Returns the process's exit status: 0 after a
 * clean shutdown, --help, --version, --check-config, --list-routes,
 * --list-apps or --openapi; 2
 * for a refused option (with a message); 1 when start-up failed (logged).
 * Main thread, once per process.
 */
int coring_main(int argc, char **argv, const app_def *const *apps, size_t num_apps);

#endif
