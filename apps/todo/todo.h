/*
 * The todo app's two stores, private to apps/todo: todo.c holds the HTTP
 * side (routes, request parsing, validation) and the in-memory store;
 * todo_pg.c the PostgreSQL store (--todo-store postgres). Every request is
 * parsed and validated once, in todo.c, whichever store answers it, so
 * that both give the same status codes and error messages.
 */
#ifndef CORING_APPS_TODO_TODO_H
#define CORING_APPS_TODO_TODO_H

#include "coring/apps/apps.h"
#include "coring/apps/idempotency.h"
#include "coring/core/json_writer.h"
#include "coring/http/router.h"
#include "coring/http/server.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A POST's Idempotency-Key (coring/apps/idempotency.h) and the request's
 * fingerprint: its fields as todo.c canonicalises them (the JSON array
 * [title, completed]), which a retry with the same key must repeat.
 */
typedef struct todo_key {
    app_idempotency_key key;
    const char *fingerprint;
    size_t fingerprint_len;
} todo_key;

/*
 * A store other than the in-memory one. Each operation gets a request
 * already validated (a title of 1 to 1,000 bytes of UTF-8 without NUL,
 * NUL-terminated, in the request's arena) and answers it itself: 200/201
 * with the todo's JSON, 204, 404 "todo not found", 507 "todo store is
 * full", or its own 5xx; a create with a @key (NULL: none) also the
 * key's answers (a replay, 409, 422). Called in the request's coroutine on
 * a worker thread; may yield.
 */
typedef struct todo_store {
    void (*list)(http_ctx *ctx);
    void (*create)(http_ctx *ctx, const char *title, size_t title_len, bool completed,
                   const todo_key *key);
    void (*get)(http_ctx *ctx, uint64_t id);
    /* @title NULL to keep it; @completed 0, 1, or -1 to keep it. */
    void (*patch)(http_ctx *ctx, uint64_t id, const char *title, size_t title_len, int completed);
    void (*remove)(http_ctx *ctx, uint64_t id);
} todo_store;

/*
 * todo_write_json - one todo as both stores answer it,
 * {"id":@id,"title":@title,"completed":@completed}, to @w. @title is
 * @title_len bytes of UTF-8 (escaped by the writer). Any thread.
 */
void todo_write_json(cr_json_writer *w, uint64_t id, const char *title, size_t title_len,
                     bool completed);

/*
 * todo_mount_routes - add the todo routes to @r, answered by @store, or by
 * the in-memory store (whose per-thread shards the app's thread_init
 * makes) when @store is NULL. @store is static data. Main thread, in an
 * app's mount(). Returns 0 or http_router_add's -errno.
 */
int todo_mount_routes(http_router *r, const todo_store *store);

/* Todos the store holds by default, all threads together. At the worst
 * (1,000-byte titles that JSON escapes six-fold) a todo costs 1.5 KB
 * stored and 19.5 KB at the peak of a GET /todos listing
 * (perf/todo_rss.py): 25,000 of them stay under 0.5 GB, inside 1 GB. */
#define APP_TODO_DEFAULT_MAX_ITEMS 25000ull

/* The todo app's settings: its options' fields (todo.c), read by both
 * stores' start(). */
typedef struct todo_settings {
    unsigned long long max_items; /* --todo-max-items; 0: APP_TODO_DEFAULT_MAX_ITEMS */
    bool postgres;                /* --todo-store postgres */
    bool list_cache_off;          /* --todo-list-cache off (memory store) */
} todo_settings;

extern todo_settings todo_config;

/* apps/todo/openapi.json, built in (apps/CMakeLists.txt): both stores'. */
extern const char todo_openapi[];

/* The app on PostgreSQL (todo_pg.c): app_todo's variant on --todo-store
 * postgres, the same routes on the table todos. */
extern const app_def app_todo_postgres;

#endif
