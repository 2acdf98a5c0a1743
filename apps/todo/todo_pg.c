/*
 * todo on PostgreSQL (--todo-store postgres): the todo routes of todo.c,
 * answered from the table todos (apps/todo/migrations/0003_todos.sql) through the
 * pipelined db layer, so that every process on the database sees one list.
 *
 * todo.c parses and validates each request; this file runs one typed
 * prepared statement for it (db_run: parameters and results in binary
 * format) and writes the same JSON as the in-memory store. Ids come from
 * the table's identity column: unique across processes, increasing, never
 * above INT64_MAX (a larger id is answered 404 without a query).
 * --todo-max-items bounds the table as it bounds the memory store (it also
 * bounds what one GET /todos loads): a POST inserts only while the row
 * count that the table's triggers keep in todo_count is below it; POSTs
 * at the same moment on other connections may pass it together.
 *
 * A POST with an Idempotency-Key inserts the todo and the key's row in one
 * statement (coring/apps/idempotency.h): shared by every process on the
 * database, like the todos.
 *
 * With DATABASE_READ_URL the two GETs read from the replica while it is
 * up (db.h, replica_ok), as the users app's do, so that they go on while
 * the primary is down; a GET /todos/{id} that the replica answers with no
 * row is asked again of the primary before a 404 (a client never misses
 * the todo it just made). GET /todos, and a todo just changed or deleted,
 * may lag the primary by the replication delay (docs/todo.md).
 *
 * While the database is unreachable every route answers 503
 * {"error":"database unavailable"} with Retry-After, like users (reads
 * too, unless a replica answers them); a write whose commit was not
 * confirmed answers 504 (app_db_respond_error).
 */
#include "todo.h"

#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/core/clock.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/db/db.h"

#include <errno.h>
#include <stdio.h>

#define TODO_COLUMNS "id, title, completed"

/* The reads may be answered by the read replica (DATABASE_READ_URL), lag
 * included; get_primary_def is get_def on the primary, for a miss (as
 * users reads: apps/users/users.c). */
static const db_statement list_def = {
    .sql = "SELECT " TODO_COLUMNS " FROM todos ORDER BY id",
    .replica_ok = true,
};
static const db_statement get_def = {
    .sql = "SELECT " TODO_COLUMNS " FROM todos WHERE id = $1",
    .replica_ok = true,
    .types = {DB_INT8},
};
static const db_statement get_primary_def = {
    .sql = "SELECT " TODO_COLUMNS " FROM todos WHERE id = $1",
    .types = {DB_INT8},
};
/* No row inserted once the table holds $3 todos (by the count its
 * triggers keep; the migration says how far concurrent POSTs may pass it). */
static const db_statement insert_def = {
    .sql = "INSERT INTO todos (title, completed) SELECT $1, $2 "
           "WHERE (SELECT sum(n) FROM todo_count) < $3 RETURNING " TODO_COLUMNS,
    .writes = true,
    .types = {DB_TEXT, DB_BOOL, DB_INT8},
};
/* With an Idempotency-Key: the insert and the key's row in one statement
 * (coring/apps/idempotency.h), the body built as todo_write_json writes it
 * (to_json escapes as the JSON writer does). Its $1-$3 are insert_def's. */
#define TODO_SCOPE "POST /todos"
static const db_statement insert_keyed_def = {
    .sql = APP_IDEMPOTENT_INSERT_SQL(
        TODO_SCOPE, "$4", "$5",
        "INSERT INTO todos (title, completed) SELECT $1, $2 FROM " APP_IDEMPOTENCY_GO
        " AND (SELECT sum(n) FROM todo_count) < $3 RETURNING " TODO_COLUMNS,
        "SELECT 201 AS status, '/todos/' || id AS location, format('{\"id\":%s,\"title\":%s,"
        "\"completed\":%s}', id, to_json(title), to_json(completed)) AS body FROM made"),
    .writes = true,
    .types = {DB_TEXT, DB_BOOL, DB_INT8, DB_TEXT, DB_TEXT}, /* ..., key, fingerprint */
};
/* $2 and $3 NULL keep the title and completed. */
static const db_statement update_def = {
    .sql = "UPDATE todos SET title = COALESCE($2, title), completed = COALESCE($3, completed) "
           "WHERE id = $1 RETURNING " TODO_COLUMNS,
    .writes = true,
    .types = {DB_INT8, DB_TEXT, DB_BOOL},
};
static const db_statement delete_def = {
    .sql = "DELETE FROM todos WHERE id = $1 RETURNING id",
    .writes = true,
    .types = {DB_INT8},
};

/* Their handles (mount). */
static const db_stmt *list_stmt, *get_stmt, *get_primary_stmt, *insert_stmt,
    *insert_keyed_stmt, *update_stmt, *delete_stmt;

/* --todo-max-items (start). */
static int64_t max_items = APP_TODO_DEFAULT_MAX_ITEMS;

/* --- answers ------------------------------------------------------------- */

/* Row @row of @r (id, title, completed) as the memory store writes a todo. */
static void write_todo(cr_json_writer *w, const db_result *r, int row)
{
    /* The columns are NOT NULL and of these types (the migration): the
     * readers cannot fail on a row of this table. */
    int64_t id = 0;
    const char *title = "";
    size_t len = 0;
    bool completed = false;
    db_result_int64(r, row, 0, &id);
    db_result_string(r, row, 1, &title, &len);
    db_result_bool(r, row, 2, &completed);
    todo_write_json(w, (uint64_t)id, title, len, completed);
}

static void respond_todo(http_ctx *ctx, int status, const db_result *r)
{
    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    write_todo(&w, r, 0);
    http_respond_json(ctx, status, b);
}

/* The outcome @err of a db_run into *@r: true on success, else false
 * after answering the error and clearing *@r. */
static bool ran(http_ctx *ctx, int err, db_result *r)
{
    if (err < 0) {
        app_db_respond_error(ctx, "todo", err, r);
        db_result_clear(r);
        return false;
    }
    return true;
}

/* The row with @id, for a statement of @stmt's kind: the answer
 * (204 for DELETE, else the row) or 404. No row can have an id above
 * INT64_MAX: such an id is answered 404 without a query. */
static void by_id(http_ctx *ctx, const db_stmt *stmt, uint64_t id, const db_param *params,
                  size_t count)
{
    if (id > INT64_MAX) {
        http_respond_error(ctx, 404, "todo not found");
        return;
    }
    db_result r;
    bool on_replica = stmt == get_stmt && db_reading_replica(NULL, 0);
    int err = db_run(stmt, params, count, &r);
    if (err == 0 && db_result_rows(&r) == 0 && on_replica) {
        /* Read your writes: a todo just made may not be on the replica
         * yet; the primary decides before a 404. */
        db_result_clear(&r);
        err = db_run(get_primary_stmt, params, count, &r);
    }
    if (!ran(ctx, err, &r))
        return;
    if (db_result_rows(&r) == 0)
        http_respond_error(ctx, 404, "todo not found");
    else if (stmt == delete_stmt)
        http_respond(ctx, 204, NULL, NULL, 0);
    else
        respond_todo(ctx, 200, &r);
    db_result_clear(&r);
}

/* --- the store ----------------------------------------------------------- */

static void pg_list(http_ctx *ctx)
{
    db_result r;
    if (!ran(ctx, db_run(list_stmt, NULL, 0, &r), &r))
        return;
    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    cr_json_array_begin(&w);
    for (int i = 0, n = db_result_rows(&r); i < n; i++)
        write_todo(&w, &r, i);
    cr_json_array_end(&w);
    db_result_clear(&r);
    if (b->failed)
        http_respond_error(ctx, 500, "out of memory");
    else
        http_respond_json(ctx, 200, b);
}

static void pg_create(http_ctx *ctx, const char *title, size_t title_len, bool completed,
                      const todo_key *key)
{
    db_result r;
    int err;
    if (key) {
        db_param params[] = {db_param_text(title, title_len), db_param_bool(completed),
                             db_param_int64(max_items), db_param_text(key->key.ptr, key->key.len),
                             db_param_text(key->fingerprint, key->fingerprint_len)};
        if (app_idempotent_write(ctx, "todo", TODO_SCOPE, &key->key, key->fingerprint,
                                 key->fingerprint_len, insert_keyed_stmt, params, 5, &err, &r))
            return;
        if (ran(ctx, err, &r)) { /* nothing made: the store is full */
            http_respond_error(ctx, 507, "todo store is full");
            db_result_clear(&r);
        }
        return;
    }
    err = DB_RUN(insert_stmt, &r, db_param_text(title, title_len), db_param_bool(completed),
                 db_param_int64(max_items));
    if (!ran(ctx, err, &r))
        return;
    if (db_result_rows(&r) == 0) {
        http_respond_error(ctx, 507, "todo store is full");
    } else {
        int64_t id = 0;
        db_result_int64(&r, 0, 0, &id);
        char location[40];
        snprintf(location, sizeof(location), "/todos/%lld", (long long)id);
        http_add_header(ctx, "Location", location);
        respond_todo(ctx, 201, &r);
    }
    db_result_clear(&r);
}

static void pg_get(http_ctx *ctx, uint64_t id)
{
    db_param p[] = {db_param_int64((int64_t)id)};
    by_id(ctx, get_stmt, id, p, 1);
}

static void pg_patch(http_ctx *ctx, uint64_t id, const char *title, size_t title_len, int completed)
{
    db_param p[] = {
        db_param_int64((int64_t)id),
        title ? db_param_text(title, title_len) : db_param_null(),
        completed < 0 ? db_param_null() : db_param_bool(completed == 1),
    };
    by_id(ctx, update_stmt, id, p, 3);
}

static void pg_remove(http_ctx *ctx, uint64_t id)
{
    db_param p[] = {db_param_int64((int64_t)id)};
    by_id(ctx, delete_stmt, id, p, 1);
}

static const todo_store pg_store = {
    .list = pg_list,
    .create = pg_create,
    .get = pg_get,
    .patch = pg_patch,
    .remove = pg_remove,
};

/* --- the app ------------------------------------------------------------- */

static int mount(http_router *r)
{
    /* The name is what app_db_start's message says needs DATABASE_URL. */
    static const char app[] = "todo (--todo-store postgres)";
    int err;
    if ((err = todo_mount_routes(r, &pg_store)) < 0 ||
        (err = app_db_statement(app, &list_def, &list_stmt)) < 0 ||
        (err = app_db_statement(app, &get_def, &get_stmt)) < 0 ||
        (err = app_db_statement(app, &get_primary_def, &get_primary_stmt)) < 0 ||
        (err = app_db_statement(app, &insert_def, &insert_stmt)) < 0 ||
        (err = app_db_statement(app, &insert_keyed_def, &insert_keyed_stmt)) < 0 ||
        (err = app_idempotency_mount(app)) < 0 ||
        (err = app_db_statement(app, &update_def, &update_stmt)) < 0 ||
        (err = app_db_statement(app, &delete_def, &delete_stmt)) < 0)
        return err;
    return 0;
}

static int start(const app_options *opts)
{
    (void)opts;
    if (todo_config.max_items)
        max_items = (int64_t)todo_config.max_items;
    return 0;
}

/* apps/todo/migrations/, built in (apps/CMakeLists.txt). */
extern const db_migration_set todo_migrations;

const app_def app_todo_postgres = {
    .name = "todo",
    .deadline_ns = 3 * CR_NS_PER_S, /* docs/deadlines.md */
    .summary = "the todo app on PostgreSQL (--todo-store postgres)",
    .openapi = todo_openapi,
    .database = true,
    .migrations = &todo_migrations,
    .mount = mount,
    .start = start,
    .longest_request_ns = app_db_longest_request_ns,
    .ready = app_db_ready,
    .ready_check = "database",
};
