/*
 * The apps that the `coring` binary can mount. Each app adds its routes to
 * the router at start-up and may keep per-thread state (its shard).
 */
#ifndef CORING_APPS_APPS_H
#define CORING_APPS_APPS_H

#include "coring/db/admin.h"
#include "coring/http/router.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Settings from the command line that apps may use. */
typedef struct app_options {
    unsigned db_pool;                 /* database connections per worker thread; 0: default (2) */
    uint64_t db_timeout_ns;           /* per database query; 0: default (5 s) */
    unsigned db_routing;              /* --db-routing: a db_routing value (0: fill) */
    bool db_coalesce_off;             /* --db-coalesce off: no batch forms */
    unsigned long long seed_users;    /* users to insert at start-up; 0: none */
    bool cep_upstream_off;            /* CEP: serve from the database only */
    uint64_t cep_negative_ttl_ns;     /* CEP: how long an unknown CEP is remembered; 0: 1 h */
    uint64_t cep_connect_timeout_ns;  /* CEP: upstream connect timeout; 0: 2 s */
    uint64_t cep_total_timeout_ns;    /* CEP: upstream request timeout; 0: 5 s */
    unsigned cep_max_connections;     /* CEP: upstream connections per worker thread; 0: 8 */
    unsigned long long todo_max_items; /* todos in the whole store; 0: APP_TODO_DEFAULT_MAX_ITEMS */
    bool todo_list_cache_off;         /* todo (memory): build GET /todos per request */
} app_options;

/* Todos the in-memory store holds by default, all threads together. At
 * the worst (1,000-byte titles that JSON escapes six-fold) a todo costs
 * 1.5 KB stored and 19.5 KB at the peak of a GET /todos listing
 * (perf/todo_rss.py): 25,000 of them stay under 0.5 GB, inside 1 GB. */
#define APP_TODO_DEFAULT_MAX_ITEMS 25000ull

typedef struct app_def {
    const char *name;       /* as given to --apps */
    const char *summary;    /* one line for --help */
    /* Needs PostgreSQL (DATABASE_URL): coring refuses to start without
     * it when the app is mounted, and apps/run starts a local cluster. */
    bool database;
    /* The app's schema: its migrations, applied in order at start-up
     * (before start()) under its name in schema_migrations
     * (coring/db/admin.h; owner NULL: the app's name). NULL: none. */
    const db_migration_set *migrations;
    /* Add the app's routes (main thread, before serving). 0 or -errno. */
    int (*mount)(http_router *router);
    /* Main thread, after mounting and before serving: check settings and
     * prepare what the app needs (migrations). May block. 0, or -errno
     * after logging why. Optional. */
    int (*start)(const app_options *opts);
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
} app_def;

/* hello: GET / , /plaintext, /json (the TechEmpower shapes). */
extern const app_def app_hello;

/* todo: an in-memory todo API sharded by id across the worker threads. */
extern const app_def app_todo;

/* todo on PostgreSQL (--todo-store postgres, DATABASE_URL): the same routes
 * on the table todos, one list for every process on the database. Mounted
 * in app_todo's place. */
extern const app_def app_todo_postgres;

/* cep: Brazilian postal-code lookup, cache-aside in PostgreSQL in front of
 * the ViaCEP API (VIACEP_URL). */
extern const app_def app_cep;

/* users: a users API on PostgreSQL (DATABASE_URL), pipelined on the ring. */
extern const app_def app_users;

/* embed: sentence embeddings (BERT, e.g. all-MiniLM-L6-v2) on an
 * inference pool; POST /embed and POST /v1/embeddings. */
extern const app_def app_embed;

/* Texts per forward pass by default: where a MiniLM-sized float32 pass
 * peaks in sentences/s on a Zen 5 core (perf/tools' coring-embed-forward:
 * 302 at 8, 322 at 16, 314 at 32); larger batches only make each request
 * wait behind a longer pass (wrk, 32 connections, the embed scenario's
 * sentences: p99 188 ms at 32 against 114 ms at 16). */
#define APP_EMBED_DEFAULT_MAX_BATCH 16

/* Where the inference threads run (--embed-placement; docs/embeddings.md). */
typedef enum app_embed_placement {
    APP_EMBED_PLACEMENT_AUTO = 0, /* spare when the affinity mask has CPUs the rings leave, else batch */
    APP_EMBED_PLACEMENT_SPARE,    /* pinned to the CPUs the ring threads leave (batch when none) */
    APP_EMBED_PLACEMENT_BATCH,    /* on every CPU, below the rings: SCHED_BATCH at nice 10 */
    APP_EMBED_PLACEMENT_IDLE,     /* on every CPU, SCHED_IDLE: only when no normal thread wants it */
    APP_EMBED_PLACEMENT_SHARED,   /* on every CPU, at the rings' priority */
} app_embed_placement;

typedef struct app_embed_options {
    const char *model_dir;   /* folder with config.json, model.safetensors, vocab.txt; NULL: 503 */
    unsigned threads;        /* inference threads; 0: the CPUs in the affinity mask */
    unsigned max_batch;      /* texts per forward pass; 0: APP_EMBED_DEFAULT_MAX_BATCH */
    unsigned max_wait_us;    /* how long a batch may wait to fill, microseconds */
    unsigned max_queue;      /* texts waiting at most before 503; 0: 1024 */
    bool int8;               /* linear layers in int8 (embed_bert_quantize_int8) */
    app_embed_placement placement;
    unsigned ring_threads;   /* the server's ring threads (net_config.threads); 0: the CPUs in
                              * the affinity mask. Pinned (--pin on), the rings take the
                              * mask's first ones. */
    bool rings_pinned;       /* net_config.pin: false, the rings may run on any CPU of the
                              * mask, so "auto" never picks "spare" */
} app_embed_options;

/* app_embed_configure - set the embed app's options (copied; @o->model_dir
 * must stay valid). Main thread, before mounting. */
void app_embed_configure(const app_embed_options *o);

/*
 * app_openapi_mount - add GET /openapi.json (apps/openapi/openapi.json, the
 * operations whose method and pattern @r holds when the first request for
 * it comes), GET /docs (Swagger UI on it) and GET /docs/{file} (the page's
 * files, embedded at build time; 503 when the build had no npm). Mounted
 * whatever --apps says. Main thread, before serving; @r must outlive the
 * server. Returns 0 or http_router_add's -errno. See docs/openapi.md.
 */
int app_openapi_mount(http_router *r);

#endif
