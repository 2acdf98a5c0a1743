/*
 * An app: what a service built on coring mounts. Its one definition, an
 * app_def, says everything the start-up (coring_main, coring/apps/startup.h)
 * needs: its name for --apps, its routes (mount), the OpenAPI description
 * of them, whether it needs PostgreSQL and its migrations, its own options,
 * its readiness check for /readyz, and hooks around serving. A service's
 * main() hands coring_main() its apps, its own and any of coring's
 * (declared below), and nothing else names them: --apps, --help,
 * --list-apps, /openapi.json and /readyz read the definitions.
 * docs/handlers.md builds one from an empty folder.
 */
#ifndef CORING_APPS_APPS_H
#define CORING_APPS_APPS_H

#include "coring/apps/options.h"
#include "coring/db/admin.h"
#include "coring/http/router.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The server's settings that an app's check() and start() may read: the
 * database's (the pool every app on it shares) and the worker threads'. An
 * app's own settings are its options' (app_def.options). */
typedef struct app_options {
    unsigned db_pool;                 /* database connections per worker thread; 0: default (2) */
    uint64_t db_timeout_ns;           /* per database query; 0: default (5 s) */
    unsigned db_routing;              /* --db-routing: a db_routing value (0: fill) */
    bool db_coalesce_off;             /* --db-coalesce off: no batch forms */
    bool trace_sql;                   /* --trace-sql on: sampled traces' queries commented */
    uint64_t replica_max_lag_ns;      /* --replica-max-lag: reads to the primary past it; 0: none */
    uint64_t db_start_wait_ns;        /* --db-start-wait: migrations retried that long; 0: once */
    unsigned threads;                 /* --threads: worker (ring) threads; 0: the CPUs of the
                                       * affinity mask */
    bool threads_pinned;              /* --pin on: worker i on the mask's i-th CPU */
} app_options;

/* The text of a JSON value written as C tokens, for an app's OpenAPI
 * fragment without a build step: APP_JSON({"paths": {...}}) is the string
 * literal "{\"paths\": {...}}" (the # operator, C17 6.10.3.2, escapes
 * the quotes and backslashes of the JSON's strings; white space between
 * tokens becomes one space). The JSON must hold no parenthesis outside its
 * strings, and its strings only escapes C also has (\" \\ \n \t
 * \uXXXX; not \/). */
#define APP_JSON(...) #__VA_ARGS__

typedef struct app_def app_def;

struct app_def {
    const char *name;       /* as given to --apps: letters, digits, '_' */
    const char *summary;    /* one line for --help and --list-apps */
    /* The OpenAPI 3.1 description of the app's routes, a JSON object with
     * "paths" (each operation's first tag naming the app), and optionally
     * "tags" and "components" (schemas, responses, parameters...; the
     * server's own, such as #/components/responses/BadRequest and
     * #/components/schemas/Error, may be referred to). /openapi.json is the
     * mounted apps' fragments put together, each operation kept while the
     * router holds its method and pattern (docs/openapi.md). Checked at
     * start-up: invalid JSON, or a component another app defines
     * otherwise, stops it. NULL: the app's routes are not described (a
     * warning names each). Static. */
    const char *openapi;
    /* Needs PostgreSQL (DATABASE_URL): coring refuses to start without
     * it when the app is mounted, and apps/run starts a local cluster. */
    bool database;
    /* The app's schema: its migrations, applied in order at start-up
     * (before start()) under its name in schema_migrations
     * (coring/db/admin.h; owner NULL: the app's name). NULL: none. */
    const db_migration_set *migrations;
    /* The app's own options: @num_options rows (coring/apps/options.h)
     * whose offsets are into @config, its settings struct. Given whether
     * or not the app is mounted; --help lists them under the app, and
     * each has its CORING_ variable. A flag must not be another's. */
    const coring_option *options;
    size_t num_options;
    void *config;
    /* After the options are read: the definition to mount in this one's
     * place (the todo app's PostgreSQL store on --todo-store postgres),
     * of the same name, or NULL for this one. Optional. Main thread. */
    const app_def *(*variant)(void);
    /* --help's lines on the environment variables the app reads, printed
     * as they are under "Environment:" (two spaces, the name in a
     * 25-column field, the text; '\n' after each line). NULL: none. */
    const char *environment;
    /* Add the app's routes (main thread, before serving). 0 or -errno. */
    int (*mount)(http_router *router);
    /* Main thread, after mounting, before the migrations and start():
     * check the settings the app reads that need no network (its options,
     * its environment variables, files it will load), as --check-config
     * does too, which runs no further. @opts: the server's settings. 0, or
     * -errno after logging why. Optional. */
    int (*check)(const app_options *opts);
    /* Main thread, after check and the migrations, before serving: prepare
     * what the app needs (a model, a seed). @opts: the server's settings.
     * May block. 0, or -errno after logging why. Optional. */
    int (*start)(const app_options *opts);
    /* The longest one of the app's requests may take under @opts (and the
     * app's own options, read by then), ns: the waits its handler makes
     * one after the other, each bounded by its timeout, which the drain
     * deadline must outlast (coring_longest_request_ns). When @why is not
     * NULL, the sum as text into it (@len bytes: "2 x --db-timeout 5 s").
     * Main thread, once the options are read. Optional: no request waits on anything
     * with a timeout (0). */
    uint64_t (*longest_request_ns)(const app_options *opts, char *why, size_t len);
    /* The deadline of each of the app's requests, ns from the start of its
     * handling (once read whole; what starts its duration in the metrics)
     * (0: none): past it the handler is cancelled with everything it waits
     * on (the database query, the upstream transfer, the inference job)
     * and the request answered 504 {"error":"deadline exceeded"}
     * (docs/deadlines.md). Below the timeouts of what the app waits on,
     * so that it fires first. --deadline overrides it. */
    uint64_t deadline_ns;
    /* Descriptors each worker thread keeps open for the app besides client
     * connections (its upstream connections), after start(): counted out
     * of --max-connections' default. Optional: none. */
    unsigned (*reserved_fds)(void);
    /* On each worker thread before it serves / after it stopped. */
    int (*thread_init)(void);
    void (*thread_fini)(void);
    /* After serving stopped (main thread): release what mount() made. */
    void (*stop)(void);
    /* Readiness, for GET /readyz (apps/ops/health.c): NULL when the app
     * can serve now, else a short reason, written into @buf (@len bytes)
     * or a static string. On a worker thread, in a request's coroutine:
     * must not block, nor take a lock that another core takes. Optional:
     * without it the app is ready while it is mounted. A hook that
     * returns NULL may leave a note in @buf (a check that is ok but says
     * more than "ok", e.g. "not configured"); @buf starts empty. */
    const char *(*ready)(char *buf, size_t len);
    /* What ready() checks, its key in /readyz's "checks" ("database"):
     * apps that check the same thing give the same key and it is checked
     * once. NULL: the app's name. */
    const char *ready_check;
};

/* coring's own apps, for a service's list beside its own
 * (coring/apps/stock.h has them all, in the coring binary's order). */

/* hello: GET / , /plaintext, /json (the TechEmpower shapes). */
extern const app_def app_hello;

/* todo: an in-memory todo API sharded by id across the worker threads;
 * on PostgreSQL with --todo-store postgres (its variant). */
extern const app_def app_todo;

/* cep: Brazilian postal-code lookup, cache-aside in PostgreSQL in front of
 * the ViaCEP API (VIACEP_URL). */
extern const app_def app_cep;

/* users: a users API on PostgreSQL (DATABASE_URL), pipelined on the ring. */
extern const app_def app_users;

/* embed: sentence embeddings (BERT, e.g. all-MiniLM-L6-v2) on an
 * inference pool; POST /embed and POST /v1/embeddings. */
extern const app_def app_embed;

/*
 * app_openapi_mount - add GET /openapi.json, GET /docs (Swagger UI on it)
 * and GET /docs/{file} (the page's files, embedded at build time; 503 when
 * the build had no npm) to @r, and put the document together: the
 * server's own description and the app_def.openapi fragments of the
 * @count @apps mounted, each operation kept while @r holds its method and
 * pattern. @r must hold every route by then: mount it last. A route that
 * no fragment describes, and an operation of a fragment that no route
 * serves, are left out with a warning each. Main thread, before serving.
 * Returns 0, -EINVAL after logging why (a fragment that is not JSON, an
 * operation or a component described twice otherwise), -ENOMEM, or
 * http_router_add's -errno. See docs/openapi.md.
 */
int app_openapi_mount(http_router *r, const app_def *const *apps, size_t count);

/* app_openapi_document - the document app_openapi_mount put together (its
 * @len bytes, valid until the next app_openapi_mount): what GET
 * /openapi.json answers, and coring --openapi prints. Any thread. */
const char *app_openapi_document(size_t *len);

#endif
