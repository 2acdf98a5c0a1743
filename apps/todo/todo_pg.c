/*
 * todo on PostgreSQL (--todo-store postgres): the todo routes of todo.c,
 * answered from the table todos (db/migrations/0003_todos.sql) through the
 * pipelined db layer, so that every process on the database sees one list.
 *
 * todo.c parses and validates each request; this file runs one prepared
 * statement for it and writes the same JSON as the in-memory store. Ids
 * come from the table's identity column: unique across processes,
 * increasing, never above INT64_MAX (a larger id is answered 404 without a
 * query). --todo-max-items bounds the table as it bounds the memory store:
 * a POST inserts only while the row count that the table's triggers keep
 * in todo_count is below it, holding that row's lock until it commits.
 *
 * While the database is unreachable every route answers 503
 * {"error":"database unavailable"} with Retry-After, like users.
 */
#include "todo.h"

#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/db/db.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define TODO_COLUMNS "id, title, completed"

enum { STMT_LIST, STMT_GET, STMT_INSERT, STMT_UPDATE, STMT_DELETE };

static const db_statement statements[] = {
    [STMT_LIST] = {"SELECT " TODO_COLUMNS " FROM todos ORDER BY id", 0, false},
    [STMT_GET] = {"SELECT " TODO_COLUMNS " FROM todos WHERE id = $1::bigint", 1, false},
    /* No row from todo_count, hence none inserted, once the table holds
     * $3 todos; FOR UPDATE makes a concurrent POST wait for this one's
     * commit and see its count. */
    [STMT_INSERT] = {"INSERT INTO todos (title, completed) SELECT $1::text, $2::boolean "
                     "FROM todo_count WHERE n < $3::bigint FOR UPDATE RETURNING " TODO_COLUMNS,
                     3, true},
    [STMT_UPDATE] = {"UPDATE todos SET title = COALESCE($2::text, title), "
                     "completed = COALESCE($3::boolean, completed) "
                     "WHERE id = $1::bigint RETURNING " TODO_COLUMNS,
                     3, true},
    [STMT_DELETE] = {"DELETE FROM todos WHERE id = $1::bigint RETURNING id", 1, true},
};

/* Index of STMT_LIST in the process-wide statement list (app_db_register). */
static int stmt_base;

/* --todo-max-items, as the text of STMT_INSERT's $3. */
static char max_items[24];

/* --- answers ------------------------------------------------------------- */

/* Row @row of @r (id, title, completed) as the memory store writes a todo. */
static void write_todo(cr_json_writer *w, const db_result *r, int row)
{
    int64_t id = 0;
    size_t len = 0;
    db_result_int64(r, row, 0, &id);
    const char *title = db_result_text(r, row, 1, &len);
    const char *completed = db_result_text(r, row, 2, NULL);
    cr_json_object_begin(w);
    cr_json_key(w, "id", 2);
    cr_json_uint64(w, (uint64_t)id);
    cr_json_key(w, "title", 5);
    cr_json_string(w, title ? title : "", title ? len : 0);
    cr_json_key(w, "completed", 9);
    cr_json_bool(w, completed && completed[0] == 't');
    cr_json_object_end(w);
}

static void respond_todo(http_ctx *ctx, int status, const db_result *r)
{
    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    write_todo(&w, r, 0);
    http_respond_json(ctx, status, b);
}

/* Answer a failed query @err (db_query's) with result @r. */
static void answer_db_error(http_ctx *ctx, int err, const db_result *r)
{
    if (err == -EREMOTEIO) {
        cr_log_error("todo: database error %s: %s", db_result_sqlstate(r), db_result_message(r));
        http_respond_error(ctx, 500, "database error");
        return;
    }
    if (err == -ENOMEM) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    /* Not connected, connection lost, timed out, shutting down. */
    http_add_header(ctx, "Retry-After", "1");
    http_respond_error(ctx, 503, "database unavailable");
}

/* Run statement @stmt with @n parameters into *@r; false after answering
 * the error (and clearing *@r). */
static bool query(http_ctx *ctx, unsigned stmt, int n, const char *const *params, db_result *r)
{
    int err = db_query((unsigned)stmt_base + stmt, n, params, r);
    if (err < 0) {
        answer_db_error(ctx, err, r);
        db_result_clear(r);
        return false;
    }
    return true;
}

/* @id as the text of a bigint parameter; false (after answering 404) when
 * it is above INT64_MAX, which no row can have. */
static bool id_text(http_ctx *ctx, uint64_t id, char (*out)[24])
{
    if (id > INT64_MAX) {
        http_respond_error(ctx, 404, "todo not found");
        return false;
    }
    snprintf(*out, sizeof(*out), "%llu", (unsigned long long)id);
    return true;
}

/* --- the store ----------------------------------------------------------- */

static void pg_list(http_ctx *ctx)
{
    db_result r;
    if (!query(ctx, STMT_LIST, 0, NULL, &r))
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

static void pg_create(http_ctx *ctx, const char *title, size_t title_len, bool completed)
{
    (void)title_len; /* @title is NUL-terminated and holds no NUL */
    const char *params[] = {title, completed ? "true" : "false", max_items};
    db_result r;
    if (!query(ctx, STMT_INSERT, 3, params, &r))
        return;
    if (db_result_rows(&r) == 0) {
        http_respond_error(ctx, 507, "todo store is full");
    } else {
        char location[40];
        snprintf(location, sizeof(location), "/todos/%s", db_result_text(&r, 0, 0, NULL));
        http_add_header(ctx, "Location", location);
        respond_todo(ctx, 201, &r);
    }
    db_result_clear(&r);
}

/* GET, PATCH (@title, @completed) and DELETE: statement @stmt on @id;
 * 404 when it found no row, else 204 (DELETE) or the row. */
static void by_id(http_ctx *ctx, unsigned stmt, uint64_t id, const char *title, int completed)
{
    char id_s[24];
    if (!id_text(ctx, id, &id_s))
        return;
    const char *params[] = {id_s, title, completed < 0 ? NULL : completed ? "true" : "false"};
    db_result r;
    if (!query(ctx, stmt, statements[stmt].params, params, &r))
        return;
    if (db_result_rows(&r) == 0)
        http_respond_error(ctx, 404, "todo not found");
    else if (stmt == STMT_DELETE)
        http_respond(ctx, 204, NULL, NULL, 0);
    else
        respond_todo(ctx, 200, &r);
    db_result_clear(&r);
}

static void pg_get(http_ctx *ctx, uint64_t id)
{
    by_id(ctx, STMT_GET, id, NULL, -1);
}

static void pg_patch(http_ctx *ctx, uint64_t id, const char *title, size_t title_len,
                     int completed)
{
    (void)title_len;
    by_id(ctx, STMT_UPDATE, id, title, completed);
}

static void pg_remove(http_ctx *ctx, uint64_t id)
{
    by_id(ctx, STMT_DELETE, id, NULL, -1);
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
    int err = todo_mount_routes(r, &pg_store);
    if (err < 0)
        return err;
    /* The name is what app_db_start's message says needs DATABASE_URL. */
    stmt_base = app_db_register("todo (--todo-store postgres)", statements,
                                sizeof(statements) / sizeof(statements[0]));
    return stmt_base < 0 ? stmt_base : 0;
}

static int start(const app_options *opts)
{
    snprintf(max_items, sizeof(max_items), "%llu",
             opts->todo_max_items ? opts->todo_max_items : APP_TODO_DEFAULT_MAX_ITEMS);
    return 0;
}

const app_def app_todo_postgres = {
    .name = "todo",
    .summary = "the todo app on PostgreSQL (--todo-store postgres)",
    .mount = mount,
    .start = start,
    .ready = app_db_ready,
    .ready_check = "database",
};
