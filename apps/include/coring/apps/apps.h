/*
 * The apps that the `coring` binary can mount. Each app adds its routes to
 * the router at start-up and may keep per-thread state (its shard).
 */
#ifndef CORING_APPS_APPS_H
#define CORING_APPS_APPS_H

#include "coring/http/router.h"

typedef struct app_def {
    const char *name;       /* as given to --apps */
    const char *summary;    /* one line for --help */
    /* Add the app's routes (main thread, before serving). 0 or -errno. */
    int (*mount)(http_router *router);
    /* On each worker thread before it serves / after it stopped. */
    int (*thread_init)(void);
    void (*thread_fini)(void);
} app_def;

/* hello: GET / , /plaintext, /json (the TechEmpower shapes). */
extern const app_def app_hello;

/* todo: an in-memory todo API sharded by id across the worker threads. */
extern const app_def app_todo;

#endif
