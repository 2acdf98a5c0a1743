/*
 * todo: an in-memory todo API, sharded by id across the worker threads.
 *
 * Each worker owns one shard. A todo created on thread t gets an id with
 * (id - 1) % threads == t, so it lives where it was created; a request for
 * another thread's todo travels there as a cross-core message (net_call,
 * IORING_OP_MSG_RING) and the owner answers. GET /todos asks every shard
 * and merges their lists by id. No lock is taken on any path.
 *
 * A shard keeps its todos in an array sorted by id (ids only grow, so an
 * insert is an append; a lookup a binary search) and caches the JSON of its
 * whole list until the next change. The store is bounded: --todo-max-items
 * split evenly over the shards (and 256 MiB of titles a shard); a POST
 * past its shard's share answers 507 and changes nothing.
 *
 * With --todo-store postgres the same handlers parse and validate each
 * request and hand it to the PostgreSQL store (todo_pg.c) instead.
 */
#include "todo.h"

#include "coring/apps/apps.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/http/server.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TODO_TITLE_MAX 1000
#define TODO_SHARD_MAX_TITLE_BYTES (256u * 1024u * 1024u)

/* --todo-max-items, for the whole store: each of the T worker threads'
 * shards holds at most ceil(max_items / T) (set by thread_init). */
static unsigned long long max_items = APP_TODO_DEFAULT_MAX_ITEMS;

typedef struct todo {
    uint64_t id;
    char *title;        /* malloc'd, title_len bytes, valid UTF-8 */
    size_t title_len;
    bool completed;
} todo;

typedef struct todo_shard {
    todo *items;        /* sorted by id */
    size_t count, cap;
    size_t max_count;   /* this shard's share of --todo-max-items */
    size_t title_bytes;
    uint64_t next_seq;  /* ids of this shard: next_seq * threads + index + 1 */
    cr_buf list_json;   /* "[...]" of every item, valid while list_valid */
    bool list_valid;
} todo_shard;

static _Thread_local todo_shard *shard;

/* The store that answers, when not the in-memory one (todo_mount_routes). */
static const todo_store *store;

/* --- the shard (runs on its own thread only) ------------------------------ */

static todo *shard_find(uint64_t id)
{
    size_t lo = 0, hi = shard->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shard->items[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < shard->count && shard->items[lo].id == id ? &shard->items[lo] : NULL;
}

void todo_write_json(cr_json_writer *w, uint64_t id, const char *title, size_t title_len,
                     bool completed)
{
    cr_json_object_begin(w);
    cr_json_key(w, "id", 2);
    cr_json_uint64(w, id);
    cr_json_key(w, "title", 5);
    cr_json_string(w, title, title_len);
    cr_json_key(w, "completed", 9);
    cr_json_bool(w, completed);
    cr_json_object_end(w);
}

static void write_todo(cr_json_writer *w, const todo *t)
{
    todo_write_json(w, t->id, t->title, t->title_len, t->completed);
}

static void todo_json(cr_buf *out, const todo *t)
{
    cr_json_writer w;
    cr_json_writer_init(&w, out);
    write_todo(&w, t);
}

static char *copy_title(const char *s, size_t len)
{
    char *p = malloc(len ? len : 1);
    if (p)
        memcpy(p, s, len);
    return p;
}

/* Returns the new todo, or NULL with *status 507 (full) or 500 (memory). */
static todo *shard_insert(const char *title, size_t title_len, bool completed, int *status)
{
    *status = 507;
    if (shard->count >= shard->max_count ||
        shard->title_bytes + title_len > TODO_SHARD_MAX_TITLE_BYTES)
        return NULL;
    *status = 500;
    if (shard->count == shard->cap) {
        size_t cap = shard->cap ? shard->cap * 2 : 64;
        todo *items = realloc(shard->items, cap * sizeof(todo));
        if (!items)
            return NULL;
        shard->items = items;
        shard->cap = cap;
    }
    char *copy = copy_title(title, title_len);
    if (!copy)
        return NULL;
    todo *t = &shard->items[shard->count++];
    *t = (todo){
        .id = shard->next_seq++ * net_thread_count() + (uint64_t)net_thread_index() + 1,
        .title = copy,
        .title_len = title_len,
        .completed = completed,
    };
    shard->title_bytes += title_len;
    shard->list_valid = false;
    return t;
}

static const cr_buf *shard_list_json(void)
{
    if (!shard->list_valid) {
        cr_buf *b = &shard->list_json;
        cr_buf_reset(b);
        cr_json_writer w;
        cr_json_writer_init(&w, b);
        cr_json_array_begin(&w);
        for (size_t i = 0; i < shard->count; i++)
            write_todo(&w, &shard->items[i]);
        cr_json_array_end(&w);
        shard->list_valid = !b->failed;
    }
    return &shard->list_json;
}

/* --- operations, run by the owning shard ------------------------------- */

enum todo_op { TODO_GET, TODO_PATCH, TODO_DELETE, TODO_LIST };

/* A request to a shard. Travels to the owner thread and back; everything
 * it points to belongs to the requesting coroutine, which waits. */
typedef struct todo_msg {
    net_msg base;
    enum todo_op op;
    uint64_t id;
    const char *title;  /* PATCH: new title, or NULL */
    size_t title_len;
    int completed;      /* PATCH: 0, 1, or -1 to keep */
    int status;         /* answer: 200, 204, 404, 500 */
    cr_buf *out;        /* answer: JSON of the todo, or the list items */
    size_t count;       /* answer to TODO_LIST: entries at the start of out */
} todo_msg;

typedef struct todo_list_entry {
    uint64_t id;
    size_t off, len;
} todo_list_entry;

static void shard_run(net_msg *m)
{
    todo_msg *msg = (todo_msg *)m;
    todo *t = msg->op == TODO_LIST ? NULL : shard_find(msg->id);
    msg->status = 200;
    switch (msg->op) {
    case TODO_GET:
        if (!t)
            msg->status = 404;
        else
            todo_json(msg->out, t);
        break;
    case TODO_PATCH:
        if (!t) {
            msg->status = 404;
            break;
        }
        if (msg->title) {
            char *copy = copy_title(msg->title, msg->title_len);
            if (!copy) {
                msg->status = 500;
                break;
            }
            shard->title_bytes = shard->title_bytes - t->title_len + msg->title_len;
            free(t->title);
            t->title = copy;
            t->title_len = msg->title_len;
        }
        if (msg->completed >= 0)
            t->completed = msg->completed;
        shard->list_valid = false;
        todo_json(msg->out, t);
        break;
    case TODO_DELETE:
        if (!t) {
            msg->status = 404;
            break;
        }
        shard->title_bytes -= t->title_len;
        free(t->title);
        size_t i = (size_t)(t - shard->items);
        memmove(t, t + 1, (shard->count - i - 1) * sizeof(todo));
        shard->count--;
        shard->list_valid = false;
        msg->status = 204;
        break;
    case TODO_LIST: {
        /* Items as (id, offset, length) entries followed by their JSON. */
        size_t header = shard->count * sizeof(todo_list_entry);
        if (cr_buf_reserve(msg->out, header) < 0) {
            msg->status = 500;
            break;
        }
        msg->out->len = header;
        msg->count = shard->count;
        for (size_t k = 0; k < shard->count; k++) {
            size_t off = msg->out->len;
            todo_json(msg->out, &shard->items[k]);
            todo_list_entry e = {shard->items[k].id, off, msg->out->len - off};
            memcpy(msg->out->data + k * sizeof(e), &e, sizeof(e));
        }
        if (msg->out->failed)
            msg->status = 500;
        break;
    }
    }
}

/* Run @msg on the shard owning msg->id (or @target for lists). */
static void shard_call(unsigned target, todo_msg *msg)
{
    msg->base.fn = shard_run;
    net_call(target, &msg->base);
}

static unsigned owner_of(uint64_t id)
{
    return (unsigned)((id - 1) % net_thread_count());
}

/* --- request parsing ---------------------------------------------------- */

/* Parse a decimal u64 path parameter: digits only, no sign, no overflow. */
static bool parse_id(const http_str *s, uint64_t *out)
{
    if (!s || s->len == 0 || s->len > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < s->len; i++) {
        unsigned d = (unsigned)(s->ptr[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool id_param(http_ctx *ctx, uint64_t *id)
{
    if (!parse_id(http_route_param(&ctx->params, "id"), id)) {
        http_respond_error(ctx, 400, "id must be an unsigned 64-bit integer");
        return false;
    }
    return true;
}

typedef struct todo_input {
    const char *title;  /* NULL when absent */
    size_t title_len;
    int completed;      /* -1 when absent */
} todo_input;

/* Parse and validate a POST/PATCH body. Answers the error itself and
 * returns false when the body is not acceptable. */
static bool parse_input(http_ctx *ctx, todo_input *in)
{
    *in = (todo_input){.completed = -1};
    cr_json_value root, v;
    if (!http_json_object_body(ctx, &root))
        return false;
    if (cr_json_object_get(root, "title", 5, &v) == CR_JSON_OK) {
        if (cr_json_get_string(v, &in->title, &in->title_len) != CR_JSON_OK) {
            http_respond_error(ctx, 422, "title must be a string");
            return false;
        }
        if (in->title_len == 0) {
            http_respond_error(ctx, 422, "title must not be empty");
            return false;
        }
        if (in->title_len > TODO_TITLE_MAX) {
            http_respond_error(ctx, 422, "title must be at most 1000 bytes");
            return false;
        }
        /* "\u0000": PostgreSQL's text cannot hold it; the stores agree. */
        if (memchr(in->title, '\0', in->title_len)) {
            http_respond_error(ctx, 422, "title must not contain NUL");
            return false;
        }
        /* The string lives in the thread's JSON parser, which the next
         * request on this thread reuses: a PATCH sent to another core
         * yields before the owner copies it. */
        in->title = cr_arena_strndup(ctx->arena, in->title, in->title_len);
        if (!in->title) {
            http_respond_error(ctx, 500, "out of memory");
            return false;
        }
    }
    if (cr_json_object_get(root, "completed", 9, &v) == CR_JSON_OK) {
        bool b;
        if (cr_json_get_bool(v, &b) != CR_JSON_OK) {
            http_respond_error(ctx, 422, "completed must be a boolean");
            return false;
        }
        in->completed = b;
    }
    return true;
}

/* --- handlers ------------------------------------------------------------ */

static void get_health(http_ctx *ctx, void *user)
{
    (void)user;
    http_respond(ctx, 200, "text/plain", "OK", 2);
}

static int cmp_entry(const void *a, const void *b)
{
    const todo_list_entry *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void list_todos(http_ctx *ctx, void *user)
{
    (void)user;
    if (store) {
        store->list(ctx);
        return;
    }
    unsigned n = net_thread_count();
    if (n == 1) {
        http_respond_json(ctx, 200, shard_list_json());
        return;
    }
    /* Gather every shard's items, then merge them by id. One slot a
     * thread, from the request's arena: not a VLA on the coroutine stack. */
    cr_buf *parts = cr_arena_alloc(ctx->arena, n * sizeof(*parts));
    size_t *counts = cr_arena_alloc(ctx->arena, n * sizeof(*counts));
    if (!parts || !counts) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    size_t total_bytes = 0, total = 0;
    bool ok = true;
    for (unsigned s = 0; s < n; s++) {
        parts[s] = CR_BUF_INIT;
        todo_msg msg = {.op = TODO_LIST, .out = &parts[s]};
        shard_call(s, &msg);
        ok = ok && msg.status == 200;
        counts[s] = msg.status == 200 ? msg.count : 0;
        total += counts[s];
        total_bytes += parts[s].len;
    }
    /* Each entry's offset gets its shard in the top 16 bits. */
    todo_list_entry *all = total ? malloc(total * sizeof(*all)) : NULL;
    ok = ok && (all || !total);
    cr_buf body = CR_BUF_INIT;
    if (ok) {
        size_t k = 0;
        for (unsigned s = 0; s < n; s++) {
            const todo_list_entry *e = (const todo_list_entry *)parts[s].data;
            for (size_t i = 0; i < counts[s]; i++, k++) {
                all[k] = e[i];
                all[k].off = (size_t)s << 48 | e[i].off;
            }
        }
        if (total > 1) /* qsort(NULL, 0, ...) is undefined (C17 7.22.5) */
            qsort(all, total, sizeof(*all), cmp_entry);
        cr_buf_reserve(&body, total_bytes + 2);
        cr_buf_append(&body, "[", 1);
        for (size_t i = 0; i < total; i++) {
            const cr_buf *part = &parts[all[i].off >> 48];
            if (i)
                cr_buf_append(&body, ",", 1);
            cr_buf_append(&body, part->data + (all[i].off & 0xffffffffffffull), all[i].len);
        }
        cr_buf_append(&body, "]", 1);
        ok = !body.failed;
    }
    if (ok)
        http_respond_json(ctx, 200, &body);
    else
        http_respond_error(ctx, 500, "out of memory");
    cr_buf_free(&body);
    free(all);
    for (unsigned s = 0; s < n; s++)
        cr_buf_free(&parts[s]);
}

static void answer(http_ctx *ctx, const todo_msg *msg)
{
    switch (msg->status) {
    case 200:
        http_respond_json(ctx, 200, msg->out);
        break;
    case 204:
        http_respond(ctx, 204, NULL, NULL, 0);
        break;
    case 404:
        http_respond_error(ctx, 404, "todo not found");
        break;
    default:
        http_respond_error(ctx, 500, "out of memory");
        break;
    }
}

static void by_id(http_ctx *ctx, enum todo_op op, const todo_input *in)
{
    uint64_t id;
    if (!id_param(ctx, &id))
        return;
    if (store) {
        if (op == TODO_GET)
            store->get(ctx, id);
        else if (op == TODO_DELETE)
            store->remove(ctx, id);
        else
            store->patch(ctx, id, in->title, in->title_len, in->completed);
        return;
    }
    cr_buf out = CR_BUF_INIT;
    todo_msg msg = {.op = op, .id = id, .out = &out, .completed = -1};
    if (in) {
        msg.title = in->title;
        msg.title_len = in->title_len;
        msg.completed = in->completed;
    }
    if (id == 0)
        msg.status = 404;
    else
        shard_call(owner_of(id), &msg);
    answer(ctx, &msg);
    cr_buf_free(&out);
}

static void get_todo(http_ctx *ctx, void *user)
{
    (void)user;
    by_id(ctx, TODO_GET, NULL);
}

static void delete_todo(http_ctx *ctx, void *user)
{
    (void)user;
    by_id(ctx, TODO_DELETE, NULL);
}

static void patch_todo(http_ctx *ctx, void *user)
{
    (void)user;
    uint64_t id;
    if (!id_param(ctx, &id))
        return;
    todo_input in;
    if (!parse_input(ctx, &in))
        return;
    if (!in.title && in.completed < 0) {
        http_respond_error(ctx, 422, "nothing to update: give title and/or completed");
        return;
    }
    by_id(ctx, TODO_PATCH, &in);
}

static void create_todo(http_ctx *ctx, void *user)
{
    (void)user;
    todo_input in;
    if (!parse_input(ctx, &in))
        return;
    if (!in.title) {
        http_respond_error(ctx, 422, "title is required");
        return;
    }
    if (store) {
        store->create(ctx, in.title, in.title_len, in.completed == 1);
        return;
    }
    int status;
    todo *t = shard_insert(in.title, in.title_len, in.completed == 1, &status);
    if (!t) {
        http_respond_error(ctx, status, status == 507 ? "todo store is full" : "out of memory");
        return;
    }
    char location[40];
    snprintf(location, sizeof(location), "/todos/%llu", (unsigned long long)t->id);
    http_add_header(ctx, "Location", location);
    cr_buf *b = http_scratch();
    todo_json(b, t);
    http_respond_json(ctx, 201, b);
}

/* --- the app ------------------------------------------------------------- */

int todo_mount_routes(http_router *r, const todo_store *s)
{
    store = s;
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/health", get_health, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/todos", list_todos, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_POST, "/todos", create_todo, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/todos/{id}", get_todo, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_PATCH, "/todos/{id}", patch_todo, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_DELETE, "/todos/{id}", delete_todo, NULL)) < 0)
        return err;
    return 0;
}

static int mount(http_router *r)
{
    return todo_mount_routes(r, NULL);
}

static int start(const app_options *opts)
{
    if (opts->todo_max_items)
        max_items = opts->todo_max_items;
    return 0;
}

static int thread_init(void)
{
    shard = calloc(1, sizeof(*shard));
    if (!shard)
        return -ENOMEM;
    unsigned threads = net_thread_count();
    shard->max_count = (size_t)((max_items + threads - 1) / threads);
    return 0;
}

static void thread_fini(void)
{
    if (!shard)
        return;
    for (size_t i = 0; i < shard->count; i++)
        free(shard->items[i].title);
    free(shard->items);
    cr_buf_free(&shard->list_json);
    free(shard);
    shard = NULL;
}

const app_def app_todo = {
    .name = "todo",
    .summary = "GET/POST /todos, GET/PATCH/DELETE /todos/{id}, GET /health (--todo-store)",
    .mount = mount,
    .start = start,
    .thread_init = thread_init,
    .thread_fini = thread_fini,
};
