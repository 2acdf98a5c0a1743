/*
 * todo: an in-memory todo API, sharded by id across the worker threads.
 *
 * Each worker owns one shard. A todo created on thread t gets an id with
 * (id - 1) % threads == t, so it lives where it was created; a request for
 * another thread's todo travels there as a cross-core message (net_call,
 * IORING_OP_MSG_RING) and the owner answers. No lock is taken on any path.
 *
 * GET /todos takes the same path on every thread count: it asks every
 * shard at once (net_call_all: all requests out, then one wait) for its
 * items, merges them by id into a per-thread buffer and answers. With the
 * list cache (--todo-list-cache on, the default) each thread keeps the
 * last list it built, tagged with the version of each shard it reflects;
 * each shard counts its writes in a version that only its own thread
 * writes (an atomic, one cache line a shard). A GET whose tags all equal
 * the shards' versions answers the cached body; any other builds anew. A
 * write bumps its shard's version before its response is sent, so a GET
 * read after that response lists the write, on whatever thread it lands
 * ("exact": docs/todo.md).
 *
 * A shard keeps its todos in an array sorted by id (ids only grow, so an
 * insert is an append; a lookup a binary search); with the cache on and
 * several threads it also keeps its own items' JSON until its next write.
 * The store is bounded: --todo-max-items split evenly over the shards (and
 * 256 MiB of titles a shard); a POST past its shard's share answers 507
 * and changes nothing.
 *
 * A POST with an Idempotency-Key is performed by the shard the key hashes
 * to (FNV-1a, modulo the threads), wherever it arrived: that shard keeps
 * the key with the answer it gave (at most as many keys as its share of
 * --todo-max-items, each for APP_IDEMPOTENCY_TTL_S; past that the oldest
 * is forgotten first) and answers a retry from it. The shard runs the
 * whole request without yielding, so two requests with one key never
 * overlap: the second is always a replay (or 422), never 409. The keys
 * are the process's own, as the todos are.
 *
 * With --todo-store postgres the same handlers parse and validate each
 * request and hand it to the PostgreSQL store (todo_pg.c) instead.
 */
#include "todo.h"

#include "coring/apps/apps.h"
#include "coring/core/clock.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/http/compress.h"
#include "coring/http/server.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <errno.h>
#include <pthread.h>
#include <search.h>
#include <stdatomic.h>
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

/* A list cache holds at most this much JSON (bytes), a shard's items or a
 * thread's whole list; a longer one is built for each request. */
#define TODO_LIST_CACHE_MAX_BYTES (4u * 1024u * 1024u)
/* Listers a thread keeps for reuse (more live only while GETs overlap),
 * and the buffer size (bytes) a kept one may hold on to. */
#define TODO_LISTERS_KEPT 16
#define TODO_LISTER_KEEP_BYTES (1024u * 1024u)

/* --todo-list-cache (default on). Set before the threads start. */
static bool list_cache = true;

/* Each shard's write count: written by its own thread only (release),
 * read by every thread's GET /todos (acquire). One cache line each. */
typedef struct todo_version {
    _Alignas(64) _Atomic uint64_t value;
} todo_version;
static todo_version *versions; /* net_thread_count() of them */
static pthread_once_t versions_once = PTHREAD_ONCE_INIT;

/* What one GET /todos in progress uses, kept per thread and reused: one
 * message and one part buffer a shard, and the merged body. */
typedef struct todo_lister todo_lister;

typedef struct todo_shard {
    todo *items;        /* sorted by id */
    size_t count, cap;
    size_t max_count;   /* this shard's share of --todo-max-items */
    size_t title_bytes;
    uint64_t next_seq;  /* ids of this shard: next_seq * threads + index + 1 */
    _Atomic uint64_t *version; /* &versions[this thread] */
    cr_buf part;        /* cache on, several threads: the items as a list part
                           (shard_write_part), valid while part_valid */
    bool part_valid;
    /* This thread's list cache (as a lister, of every shard): */
    cr_buf list_body;   /* "[...]", valid while list_valid */
    http_encoded_cache list_encoded; /* list_body compressed, per coding */
    uint64_t *list_seen;/* the version of each shard that list_body reflects */
    bool list_valid;
    todo_lister *free_listers;
    unsigned free_count;
    /* Idempotency-Keys of the POSTs this shard performed: a tree by key
     * (tsearch) and a list from the oldest, for their expiry. */
    void *keys;
    struct todo_kept *oldest, *newest;
    size_t key_count;
} todo_shard;

static _Thread_local todo_shard *shard;

/* A write changed this shard: the next GET /todos anywhere rebuilds. */
static void shard_changed(void)
{
    uint64_t v = atomic_load_explicit(shard->version, memory_order_relaxed);
    atomic_store_explicit(shard->version, v + 1, memory_order_release);
    shard->part_valid = false;
}

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

/* One todo's JSON appended to @out: the bytes todo_write_json writes, with
 * the keys as constants (no writer state, no key escaping): the memory
 * store's list is this, once a todo, on every uncached GET /todos. */
static void todo_json(cr_buf *out, const todo *t)
{
    cr_buf_append(out, "{\"id\":", 6);
    cr_buf_append_u64(out, t->id);
    cr_buf_append(out, ",\"title\":", 9);
    cr_json_escape_string(out, t->title, t->title_len);
    if (t->completed)
        cr_buf_append(out, ",\"completed\":true}", 18);
    else
        cr_buf_append(out, ",\"completed\":false}", 19);
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
    shard_changed();
    return t;
}

/* A key this shard performed a POST for, and the answer it gave (201, the
 * todo's JSON, its id for Location). One allocation: the struct, then the
 * key, the fingerprint and the body. */
typedef struct todo_kept {
    struct todo_kept *newer;
    uint64_t created_ns; /* monotonic */
    uint64_t id;
    const char *key, *fingerprint, *body;
    size_t key_len, fingerprint_len, body_len;
} todo_kept;

static int kept_compare(const void *a, const void *b)
{
    const todo_kept *x = a, *y = b;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len ? -1 : 1;
    return memcmp(x->key, y->key, x->key_len);
}

/* Forget the oldest key. */
static void keys_drop_oldest(void)
{
    todo_kept *k = shard->oldest;
    tdelete(k, &shard->keys, kept_compare);
    shard->oldest = k->newer;
    if (!shard->oldest)
        shard->newest = NULL;
    shard->key_count--;
    free(k);
}

/* Forget the keys older than APP_IDEMPOTENCY_TTL_S. */
static void keys_expire(uint64_t now)
{
    while (shard->oldest && now - shard->oldest->created_ns >= APP_IDEMPOTENCY_TTL_S * CR_NS_PER_S)
        keys_drop_oldest();
}

static todo_kept *keys_find(const char *key, size_t len)
{
    todo_kept probe = {.key = key, .key_len = len};
    todo_kept **found = tfind(&probe, &shard->keys, kept_compare);
    return found ? *found : NULL;
}

/* Keep @key with the answer @body for todo @id; the oldest key goes first
 * when the shard holds its share. False without memory (then the POST
 * stands, unkept: a retry would make a second todo, as without a key). */
static bool keys_keep(const char *key, size_t key_len, const char *fingerprint, size_t fp_len,
                      const cr_buf *body, uint64_t id, uint64_t now)
{
    while (shard->key_count && shard->key_count >= shard->max_count)
        keys_drop_oldest();
    todo_kept *k = malloc(sizeof(*k) + key_len + fp_len + body->len);
    if (!k)
        return false;
    char *p = (char *)(k + 1);
    *k = (todo_kept){.created_ns = now, .id = id, .key = p, .key_len = key_len,
                     .fingerprint = p + key_len, .fingerprint_len = fp_len,
                     .body = p + key_len + fp_len, .body_len = body->len};
    memcpy(p, key, key_len);
    memcpy(p + key_len, fingerprint, fp_len);
    memcpy(p + key_len + fp_len, body->data, body->len);
    if (!tsearch(k, &shard->keys, kept_compare)) {
        free(k);
        return false;
    }
    if (shard->newest)
        shard->newest->newer = k;
    else
        shard->oldest = k;
    shard->newest = k;
    shard->key_count++;
    return true;
}

/* A list part: the shard's count entries (id and JSON length of each item,
 * by id), then the items' JSON back to back. */
typedef struct todo_list_entry {
    uint64_t id;
    size_t len;
} todo_list_entry;

/* Write this shard's items as a list part to @out (emptied first).
 * Returns false when memory ran out. */
static bool shard_write_part(cr_buf *out)
{
    cr_buf_reset(out);
    size_t header = shard->count * sizeof(todo_list_entry);
    if (cr_buf_reserve(out, header) < 0)
        return false;
    out->len = header;
    for (size_t k = 0; k < shard->count; k++) {
        size_t off = out->len;
        todo_json(out, &shard->items[k]);
        if (out->failed)
            return false;
        todo_list_entry e = {shard->items[k].id, out->len - off};
        memcpy(out->data + k * sizeof(e), &e, sizeof(e));
    }
    return !out->failed;
}

/* --- operations, run by the owning shard ------------------------------- */

enum todo_op { TODO_GET, TODO_PATCH, TODO_DELETE, TODO_LIST, TODO_CREATE_KEYED };

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
    cr_buf *out;        /* answer: JSON of the todo, or the list part */
    size_t count;       /* answer to TODO_LIST: entries at the start of out */
    uint64_t version;   /* answer to TODO_LIST: the shard's version it reflects */
    const todo_key *key;/* TODO_CREATE_KEYED: the key; title, completed as PATCH */
    bool replayed;      /* answer to TODO_CREATE_KEYED: the key's kept answer;
                           status 201, 422, 507, 500; id: the todo's */
} todo_msg;

/* TODO_LIST: this shard's list part into msg->out, from the shard's own
 * cache when there is one. */
static void shard_list(todo_msg *msg)
{
    msg->count = shard->count;
    msg->version = atomic_load_explicit(shard->version, memory_order_relaxed);
    if (!list_cache) {
        msg->status = shard_write_part(msg->out) ? 200 : 500;
        return;
    }
    if (!shard->part_valid) {
        shard->part_valid = shard_write_part(&shard->part);
        if (!shard->part_valid) {
            cr_buf_free(&shard->part);
            msg->status = 500;
            return;
        }
    }
    cr_buf_reset(msg->out);
    cr_buf_append(msg->out, shard->part.data, shard->part.len);
    msg->status = msg->out->failed ? 500 : 200;
    if (shard->part.len > TODO_LIST_CACHE_MAX_BYTES) {
        cr_buf_free(&shard->part); /* too large to keep: built per request */
        shard->part_valid = false;
    }
}

/* TODO_CREATE_KEYED on the shard the key hashes to: the kept answer, or
 * the todo made here and its answer kept. */
static void shard_create_keyed(todo_msg *msg)
{
    const todo_key *k = msg->key;
    uint64_t now = cr_clock_now_ns();
    keys_expire(now);
    todo_kept *kept = keys_find(k->key.ptr, k->key.len);
    if (kept) {
        if (kept->fingerprint_len != k->fingerprint_len ||
            memcmp(kept->fingerprint, k->fingerprint, k->fingerprint_len) != 0) {
            msg->status = 422;
            return;
        }
        msg->status = 201;
        msg->replayed = true;
        msg->id = kept->id;
        cr_buf_append(msg->out, kept->body, kept->body_len);
        msg->status = msg->out->failed ? 500 : 201;
        return;
    }
    todo *t = shard_insert(msg->title, msg->title_len, msg->completed == 1, &msg->status);
    if (!t)
        return;
    msg->id = t->id;
    todo_json(msg->out, t);
    if (msg->out->failed) {
        msg->status = 500;
        return;
    }
    keys_keep(k->key.ptr, k->key.len, k->fingerprint, k->fingerprint_len, msg->out, t->id, now);
    msg->status = 201;
}

static void shard_run(net_msg *m)
{
    todo_msg *msg = (todo_msg *)m;
    if (msg->op == TODO_CREATE_KEYED) {
        shard_create_keyed(msg);
        return;
    }
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
        shard_changed();
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
        shard_changed();
        msg->status = 204;
        break;
    case TODO_LIST:
        shard_list(msg);
        break;
    case TODO_CREATE_KEYED:
        break;
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

/* The shard that performs the POSTs with @key: FNV-1a over its bytes. */
static unsigned key_owner(const app_idempotency_key *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < key->len; i++)
        h = (h ^ (unsigned char)key->ptr[i]) * 0x100000001b3ull;
    return (unsigned)(h % net_thread_count());
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
    if (!parse_id(http_route_param(ctx->params, "id"), id)) {
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

struct todo_lister {
    todo_lister *next;  /* in the thread's free list */
    todo_msg *msgs;     /* one a shard */
    net_msg **msg_ptrs;
    unsigned *targets;
    cr_buf *parts;      /* the shards' list parts */
    size_t *next_entry, *next_off; /* merge cursors, one a shard */
    cr_buf body;        /* the merged "[...]" */
};

static void lister_free(todo_lister *l, unsigned n)
{
    if (!l)
        return;
    for (unsigned s = 0; s < n && l->parts; s++)
        cr_buf_free(&l->parts[s]);
    cr_buf_free(&l->body);
    free(l->msgs);
    free(l->msg_ptrs);
    free(l->targets);
    free(l->parts);
    free(l->next_entry);
    free(l->next_off);
    free(l);
}

/* A lister from this thread's free list, or a new one; NULL without memory. */
static todo_lister *lister_take(unsigned n)
{
    todo_lister *l = shard->free_listers;
    if (l) {
        shard->free_listers = l->next;
        shard->free_count--;
        return l;
    }
    l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->msgs = calloc(n, sizeof(*l->msgs));
    l->msg_ptrs = calloc(n, sizeof(*l->msg_ptrs));
    l->targets = calloc(n, sizeof(*l->targets));
    l->parts = calloc(n, sizeof(*l->parts));
    l->next_entry = calloc(n, sizeof(*l->next_entry));
    l->next_off = calloc(n, sizeof(*l->next_off));
    if (!l->msgs || !l->msg_ptrs || !l->targets || !l->parts || !l->next_entry || !l->next_off) {
        lister_free(l, n);
        return NULL;
    }
    for (unsigned s = 0; s < n; s++) {
        l->msg_ptrs[s] = &l->msgs[s].base;
        l->targets[s] = s;
    }
    return l;
}

/* Back to the free list, its buffers trimmed so that one long list does not
 * pin its memory; past TODO_LISTERS_KEPT, freed. */
static void lister_give(todo_lister *l, unsigned n)
{
    if (shard->free_count >= TODO_LISTERS_KEPT) {
        lister_free(l, n);
        return;
    }
    for (unsigned s = 0; s < n; s++) {
        cr_buf_reset(&l->parts[s]);
        cr_buf_shrink(&l->parts[s], TODO_LISTER_KEEP_BYTES);
    }
    cr_buf_reset(&l->body);
    cr_buf_shrink(&l->body, TODO_LISTER_KEEP_BYTES);
    l->next = shard->free_listers;
    shard->free_listers = l;
    shard->free_count++;
}

/* One thread, one shard: its items straight into l->body as "[...]",
 * nothing to merge. False without memory. */
static bool lister_write_one(todo_lister *l)
{
    cr_buf *b = &l->body;
    cr_buf_reset(b);
    cr_buf_append(b, "[", 1);
    for (size_t k = 0; k < shard->count; k++) {
        if (k)
            cr_buf_append(b, ",", 1);
        todo_json(b, &shard->items[k]);
    }
    cr_buf_append(b, "]", 1);
    l->msgs[0].version = atomic_load_explicit(shard->version, memory_order_relaxed);
    return !b->failed;
}

/* Ask every shard for its list part at once. Returns false when one could
 * not answer (memory, or a message that could not travel). */
static bool lister_gather(todo_lister *l, unsigned n)
{
    for (unsigned s = 0; s < n; s++) {
        todo_msg *m = &l->msgs[s];
        *m = (todo_msg){.base.fn = shard_run, .op = TODO_LIST, .status = 500, .out = &l->parts[s]};
    }
    bool ok = net_call_all(l->msg_ptrs, l->targets, n) == 0;
    for (unsigned s = 0; s < n; s++)
        ok = ok && l->msgs[s].status == 200;
    return ok;
}

/* Merge the shards' parts by id into l->body, "[...]". Each part is sorted
 * by id, so this takes the smallest head each time. False without memory. */
static bool lister_merge(todo_lister *l, unsigned n)
{
    cr_buf *b = &l->body;
    cr_buf_reset(b);
    size_t bytes = 2, left = 0;
    for (unsigned s = 0; s < n; s++) {
        l->next_entry[s] = 0;
        l->next_off[s] = l->msgs[s].count * sizeof(todo_list_entry);
        bytes += l->parts[s].len - l->next_off[s] + l->msgs[s].count;
        left += l->msgs[s].count;
    }
    if (cr_buf_reserve(b, bytes) < 0)
        return false;
    b->data[b->len++] = '[';
    for (bool first = true; left; left--, first = false) {
        unsigned best = n;
        uint64_t best_id = UINT64_MAX;
        for (unsigned s = 0; s < n; s++) {
            if (l->next_entry[s] == l->msgs[s].count)
                continue;
            uint64_t id;
            memcpy(&id, l->parts[s].data + l->next_entry[s] * sizeof(todo_list_entry), sizeof(id));
            if (best == n || id < best_id) {
                best = s;
                best_id = id;
            }
        }
        todo_list_entry e;
        memcpy(&e, l->parts[best].data + l->next_entry[best] * sizeof(e), sizeof(e));
        if (!first)
            b->data[b->len++] = ',';
        memcpy(b->data + b->len, l->parts[best].data + l->next_off[best], e.len);
        b->len += e.len;
        l->next_entry[best]++;
        l->next_off[best] += e.len;
    }
    b->data[b->len++] = ']';
    return true;
}

/* Whether this thread's cached list reflects every shard's latest write. */
static bool list_cache_current(unsigned n)
{
    if (!shard->list_valid)
        return false;
    for (unsigned s = 0; s < n; s++)
        if (atomic_load_explicit(&versions[s].value, memory_order_acquire) != shard->list_seen[s])
            return false;
    return true;
}

/* Keep @l's body as this thread's cached list (the buffers are swapped,
 * not copied), tagged with the versions its parts reflect. */
static void list_cache_keep(todo_lister *l, unsigned n)
{
    if (l->body.len > TODO_LIST_CACHE_MAX_BYTES) {
        shard->list_valid = false;
        return;
    }
    cr_buf old = shard->list_body;
    shard->list_body = l->body;
    l->body = old;
    http_encoded_cache_clear(&shard->list_encoded);
    for (unsigned s = 0; s < n; s++)
        shard->list_seen[s] = l->msgs[s].version;
    shard->list_valid = true;
}

static void list_todos(http_ctx *ctx, void *user)
{
    (void)user;
    if (store) {
        store->list(ctx);
        return;
    }
    unsigned n = net_thread_count();
    if (list_cache && list_cache_current(n)) {
        http_respond_cached(ctx, 200, "application/json", &shard->list_body, &shard->list_encoded);
        return;
    }
    todo_lister *l = lister_take(n);
    if (!l) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    if (n == 1 ? lister_write_one(l) : lister_gather(l, n) && lister_merge(l, n)) {
        if (list_cache)
            list_cache_keep(l, n);
        if (list_cache && shard->list_valid)
            http_respond_cached(ctx, 200, "application/json", &shard->list_body,
                                &shard->list_encoded);
        else
            http_respond_json(ctx, 200, &l->body);
    } else {
        http_respond_error(ctx, 500, "out of memory");
    }
    lister_give(l, n);
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

/* A keyed POST on the memory store: run by the key's shard. */
static void create_keyed(http_ctx *ctx, const todo_input *in, const todo_key *key)
{
    cr_buf out = CR_BUF_INIT;
    todo_msg msg = {.op = TODO_CREATE_KEYED, .key = key, .title = in->title,
                    .title_len = in->title_len, .completed = in->completed, .out = &out,
                    .status = 500};
    shard_call(key_owner(&key->key), &msg);
    if (msg.status == 201) {
        char location[40];
        snprintf(location, sizeof(location), "/todos/%llu", (unsigned long long)msg.id);
        app_idempotency_respond(ctx, 201, location, out.data, out.len, msg.replayed);
    } else if (msg.status == 422) {
        app_idempotency_respond_mismatch(ctx);
    } else {
        http_respond_error(ctx, msg.status,
                           msg.status == 507 ? "todo store is full" : "out of memory");
    }
    cr_buf_free(&out);
}

static void create_todo(http_ctx *ctx, void *user)
{
    (void)user;
    todo_key key;
    int keyed = app_idempotency_key_get(ctx, &key.key);
    if (keyed < 0)
        return;
    todo_input in;
    if (!parse_input(ctx, &in))
        return;
    if (!in.title) {
        http_respond_error(ctx, 422, "title is required");
        return;
    }
    cr_buf fingerprint = CR_BUF_INIT;
    if (keyed) {
        /* The request's fields, canonical: [title, completed]. */
        cr_json_writer w;
        cr_json_writer_init(&w, &fingerprint);
        cr_json_array_begin(&w);
        cr_json_string(&w, in.title, in.title_len);
        cr_json_bool(&w, in.completed == 1);
        cr_json_array_end(&w);
        if (fingerprint.failed) {
            cr_buf_free(&fingerprint);
            http_respond_error(ctx, 500, "out of memory");
            return;
        }
        key.fingerprint = fingerprint.data;
        key.fingerprint_len = fingerprint.len;
    }
    if (store)
        store->create(ctx, in.title, in.title_len, in.completed == 1, keyed ? &key : NULL);
    else if (keyed)
        create_keyed(ctx, &in, &key);
    cr_buf_free(&fingerprint);
    if (store || keyed)
        return;
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
    (void)opts;
    if (todo_config.max_items)
        max_items = todo_config.max_items;
    list_cache = !todo_config.list_cache_off;
    return 0;
}

/* Once, by the first worker in thread_init. Never freed: kept for the
 * process's life (a worker may still read them while others finish). */
static void versions_alloc(void)
{
    versions = aligned_alloc(_Alignof(todo_version), net_thread_count() * sizeof(todo_version));
    if (versions)
        for (unsigned s = 0; s < net_thread_count(); s++)
            atomic_init(&versions[s].value, 0);
}

static int thread_init(void)
{
    pthread_once(&versions_once, versions_alloc);
    if (!versions)
        return -ENOMEM;
    shard = calloc(1, sizeof(*shard));
    if (!shard)
        return -ENOMEM;
    unsigned threads = net_thread_count();
    shard->list_seen = calloc(threads, sizeof(*shard->list_seen));
    if (!shard->list_seen) {
        free(shard);
        shard = NULL;
        return -ENOMEM;
    }
    shard->version = &versions[net_thread_index()].value;
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
    cr_buf_free(&shard->part);
    cr_buf_free(&shard->list_body);
    http_encoded_cache_free(&shard->list_encoded);
    free(shard->list_seen);
    while (shard->free_listers) {
        todo_lister *l = shard->free_listers;
        shard->free_listers = l->next;
        lister_free(l, net_thread_count());
    }
    while (shard->oldest)
        keys_drop_oldest();
    free(shard);
    shard = NULL;
}

todo_settings todo_config;

static const char *const todo_stores[] = {"memory", "postgres"};

#define FIELD(f) CORING_OPTION_FIELD(todo_settings, f)

static const coring_option options[] = {
    {.name = "todo-max-items", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(max_items),
     .min = 1, .max = 1ull << 32,
     .help = "todos in the store (default 25000); past it POST /todos\n"
             "answers 507. memory: all threads together, each\n"
             "thread's shard holding N/threads; postgres: the table",
     .default_doc = "25000"},
    {.name = "todo-store", .value = "STORE", .kind = CORING_OPTION_CHOICE, FIELD(postgres),
     .words = todo_stores, .num_words = 2,
     .help = "where todos live: memory (default, the fastest; per\n"
             "process: two processes or hosts hold two lists) or\n"
             "postgres (the table todos on DATABASE_URL, required\n"
             "then: one list for every process on the database;\n"
             "docs/todo.md)",
     .default_doc = "`memory`"},
    {.name = "todo-list-cache", .value = "on|off", .kind = CORING_OPTION_ON_OFF,
     FIELD(list_cache_off), .inverted = true,
     .help = "memory store: each thread keeps the GET /todos body it\n"
             "built until a write on any thread (default on; exact:\n"
             "a GET read after a write's response lists it); off:\n"
             "built per request, as the peers in perf/ (docs/todo.md)",
     .default_doc = "`on`"},
};

/* --todo-store postgres: the PostgreSQL store is mounted instead. */
static const app_def *variant(void)
{
    return todo_config.postgres ? &app_todo_postgres : NULL;
}

const app_def app_todo = {
    .name = "todo",
    .deadline_ns = 3 * CR_NS_PER_S, /* docs/deadlines.md */
    .summary = "GET/POST /todos, GET/PATCH/DELETE /todos/{id}, GET /health (--todo-store)",
    .openapi = todo_openapi,
    .options = options,
    .num_options = sizeof(options) / sizeof(options[0]),
    .config = &todo_config,
    .variant = variant,
    .mount = mount,
    .start = start,
    .thread_init = thread_init,
    .thread_fini = thread_fini,
};
