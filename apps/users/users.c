/*
 * users: a users API on PostgreSQL through the db layer (pipelined libpq
 * on each worker's ring).
 *
 *   GET  /users[?limit=N&after_id=ID]  first users by id (limit 1..100,
 *                                      default 50; keyset paging)
 *   GET  /users/{id}                   200, or 404
 *   POST /users {"name","email"}       201 + Location; 409 when the email
 *                                      exists (case-insensitive); 400/422
 *                                      for bad input
 *
 * A user is {"id": <int>, "name": "...", "email": "...", "created_at":
 * "<RFC 3339 UTC>"}. The schema is db/migrations/0001_users.sql, applied
 * at start-up. While the database is unreachable every route answers 503
 * {"error":"database unavailable"} at once.
 */
#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/db/admin.h"
#include "coring/db/db.h"
#include "coring/http/query.h"
#include "coring/http/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USERS_NAME_MAX 100   /* characters */
#define USERS_EMAIL_MAX 254  /* characters (RFC 5321 path limit) */
#define USERS_LIMIT_DEFAULT 50
#define USERS_LIMIT_MAX 100

/* The columns every statement returns, created_at already in RFC 3339. */
#define USER_COLUMNS                                                                               \
    "id, name, email, "                                                                            \
    "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"

enum { STMT_LIST, STMT_GET, STMT_INSERT };

static const db_statement statements[] = {
    [STMT_LIST] = {"SELECT " USER_COLUMNS " FROM users WHERE id > $1 ORDER BY id LIMIT $2", 2,
                   false},
    [STMT_GET] = {"SELECT " USER_COLUMNS " FROM users WHERE id = $1", 1, false},
    [STMT_INSERT] = {"INSERT INTO users (name, email) VALUES ($1, $2) RETURNING " USER_COLUMNS, 2,
                     true},
};

/* Index of STMT_LIST in the process-wide statement list (app_db_register). */
static int stmt_base;

/* --- answers ------------------------------------------------------------- */

static void write_user(cr_json_writer *w, const db_result *r, int row)
{
    int64_t id = 0;
    size_t len = 0;
    const char *s;
    db_result_int64(r, row, 0, &id);
    cr_json_object_begin(w);
    cr_json_key(w, "id", 2);
    cr_json_int64(w, id);
    cr_json_key(w, "name", 4);
    s = db_result_text(r, row, 1, &len);
    cr_json_string(w, s ? s : "", s ? len : 0);
    cr_json_key(w, "email", 5);
    s = db_result_text(r, row, 2, &len);
    cr_json_string(w, s ? s : "", s ? len : 0);
    cr_json_key(w, "created_at", 10);
    s = db_result_text(r, row, 3, &len);
    cr_json_string(w, s ? s : "", s ? len : 0);
    cr_json_object_end(w);
}

/* Answer @status with the user in row @row of @r. */
static void respond_user(http_ctx *ctx, int status, const db_result *r, int row)
{
    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    write_user(&w, r, row);
    http_respond_json(ctx, status, b);
}

/* Answer a failed query: the database's state decides the status. */
static void answer_db_error(http_ctx *ctx, int err, const db_result *r)
{
    if (err == -EREMOTEIO) {
        const char *state = db_result_sqlstate(r);
        if (strcmp(state, "23505") == 0) {
            http_respond_error(ctx, 409, "a user with this email already exists");
            return;
        }
        if (strncmp(state, "22", 2) == 0 || strcmp(state, "23514") == 0) {
            http_respond_error(ctx, 422, "invalid user");
            return;
        }
        cr_log_error("users: database error %s: %s", state, db_result_message(r));
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

/* --- input --------------------------------------------------------------- */

/* A decimal in [0, INT64_MAX]: digits only. */
static bool parse_int64(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 19)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (INT64_MAX - (int64_t)d) / 10)
            return false;
        v = v * 10 + (int64_t)d;
    }
    *out = v;
    return true;
}

/* Characters (code points) of valid UTF-8. */
static size_t utf8_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

static bool all_space(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    return true;
}

/* A string field of the body: present, a string, no NUL. NULL after
 * answering the error. The copy is NUL-terminated, in the request arena. */
static const char *string_field(http_ctx *ctx, cr_json_value root, const char *key, size_t *len)
{
    cr_json_value v;
    const char *s;
    if (cr_json_object_get(root, key, strlen(key), &v) != CR_JSON_OK) {
        http_respond_errorf(ctx, 422, "%s is required", key);
        return NULL;
    }
    if (cr_json_get_string(v, &s, len) != CR_JSON_OK) {
        http_respond_errorf(ctx, 422, "%s must be a string", key);
        return NULL;
    }
    if (*len == 0 || all_space(s, *len)) {
        http_respond_errorf(ctx, 422, "%s must not be empty", key);
        return NULL;
    }
    if (memchr(s, '\0', *len)) {
        http_respond_errorf(ctx, 422, "%s must not contain NUL", key);
        return NULL;
    }
    char *copy = cr_arena_alloc(ctx->arena, *len + 1);
    if (!copy) {
        http_respond_error(ctx, 500, "out of memory");
        return NULL;
    }
    memcpy(copy, s, *len);
    copy[*len] = '\0';
    return copy;
}

/* Exactly one '@' between a local part and a domain; no space and no
 * control character: C0 (bytes up to 0x1F), DEL (0x7F) or C1 (U+0080 to
 * U+009F, UTF-8 C2 80 to C2 9F). @s is valid UTF-8. */
static bool valid_email(const char *s, size_t len)
{
    const char *at = memchr(s, '@', len);
    if (!at || at == s || at == s + len - 1 || memchr(at + 1, '@', len - (size_t)(at - s) - 1))
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c == 0x7f)
            return false;
        if (c == 0xc2 && i + 1 < len && (unsigned char)s[i + 1] <= 0x9f)
            return false; /* C1: the continuation byte is 0x80..0x9F */
    }
    return true;
}

/* --- handlers ------------------------------------------------------------ */

static void list_users(http_ctx *ctx, void *user)
{
    (void)user;
    int64_t limit = USERS_LIMIT_DEFAULT, after = 0;
    int qerr = http_query_int64(ctx->req, "limit", 1, USERS_LIMIT_MAX, &limit);
    if (qerr < 0 && qerr != -ENOENT) {
        http_respond_error(ctx, 400, qerr == -EEXIST ? "limit must be given once"
                                                     : "limit must be an integer from 1 to 100");
        return;
    }
    qerr = http_query_int64(ctx->req, "after_id", 0, INT64_MAX, &after);
    if (qerr < 0 && qerr != -ENOENT) {
        http_respond_error(ctx, 400, qerr == -EEXIST ? "after_id must be given once"
                                                     : "after_id must be a non-negative integer");
        return;
    }
    char after_s[24], limit_s[24];
    snprintf(after_s, sizeof(after_s), "%lld", (long long)after);
    snprintf(limit_s, sizeof(limit_s), "%lld", (long long)limit);
    const char *params[] = {after_s, limit_s};
    db_result r;
    int err = db_query((unsigned)stmt_base + STMT_LIST, 2, params, &r);
    if (err < 0) {
        answer_db_error(ctx, err, &r);
    } else {
        cr_buf *b = http_scratch();
        cr_json_writer w;
        cr_json_writer_init(&w, b);
        cr_json_array_begin(&w);
        for (int i = 0, n = db_result_rows(&r); i < n; i++)
            write_user(&w, &r, i);
        cr_json_array_end(&w);
        http_respond_json(ctx, 200, b);
    }
    db_result_clear(&r);
}

static void get_user(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *p = http_route_param(&ctx->params, "id");
    int64_t id;
    if (!p || !parse_int64(p->ptr, p->len, &id)) {
        bool digits = p && p->len > 0 && strspn(p->ptr, "0123456789") >= p->len;
        if (digits) /* too large to be an id */
            http_respond_error(ctx, 404, "user not found");
        else
            http_respond_error(ctx, 400, "id must be a positive integer");
        return;
    }
    char id_s[24];
    snprintf(id_s, sizeof(id_s), "%lld", (long long)id);
    const char *params[] = {id_s};
    db_result r;
    int err = db_query((unsigned)stmt_base + STMT_GET, 1, params, &r);
    if (err < 0) {
        answer_db_error(ctx, err, &r);
    } else if (db_result_rows(&r) == 0) {
        http_respond_error(ctx, 404, "user not found");
    } else {
        respond_user(ctx, 200, &r, 0);
    }
    db_result_clear(&r);
}

static void create_user(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_value root;
    if (!http_json_object_body(ctx, &root))
        return;
    size_t name_len, email_len;
    const char *name = string_field(ctx, root, "name", &name_len);
    if (!name)
        return;
    const char *email = string_field(ctx, root, "email", &email_len);
    if (!email)
        return;
    if (utf8_chars(name, name_len) > USERS_NAME_MAX) {
        http_respond_error(ctx, 422, "name must be at most 100 characters");
        return;
    }
    if (utf8_chars(email, email_len) > USERS_EMAIL_MAX) {
        http_respond_error(ctx, 422, "email must be at most 254 characters");
        return;
    }
    if (!valid_email(email, email_len)) {
        http_respond_error(ctx, 422, "email must contain exactly one @ between a local part and a "
                                     "domain, and no spaces nor control characters");
        return;
    }
    const char *params[] = {name, email};
    db_result r;
    int err = db_query((unsigned)stmt_base + STMT_INSERT, 2, params, &r);
    if (err < 0 || db_result_rows(&r) != 1) {
        answer_db_error(ctx, err < 0 ? err : -EIO, &r);
    } else {
        char location[40];
        snprintf(location, sizeof(location), "/users/%s", db_result_text(&r, 0, 0, NULL));
        http_add_header(ctx, "Location", location);
        respond_user(ctx, 201, &r, 0);
    }
    db_result_clear(&r);
}

/* --- the app ------------------------------------------------------------- */

static int mount(http_router *r)
{
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/users", list_users, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_POST, "/users", create_user, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/users/{id}", get_user, NULL)) < 0)
        return err;
    stmt_base = app_db_register("users", statements, sizeof(statements) / sizeof(statements[0]));
    return stmt_base < 0 ? stmt_base : 0;
}

static int start(const app_options *opts)
{
    if (!opts->seed_users)
        return 0;
    char n[24], err[512];
    snprintf(n, sizeof(n), "%llu", opts->seed_users);
    const char *params[] = {n};
    long long rows = 0;
    /* Emails carry the transaction id: seeding twice adds new users. */
    int ret = db_exec(app_db_url(),
                      "INSERT INTO users (name, email) SELECT 'User ' || g, 'user' || g || '.' || "
                      "txid_current() || '@seed.example.com' FROM generate_series(1, $1::bigint) g",
                      1, params, &rows, err, sizeof(err));
    if (ret < 0) {
        cr_log_error("users: seeding failed: %s", err);
        return ret;
    }
    cr_log_info("users: seeded %lld users", rows);
    return 0;
}

const app_def app_users = {
    .name = "users",
    .summary = "GET/POST /users, GET /users/{id} (PostgreSQL: DATABASE_URL)",
    .mount = mount,
    .start = start,
    .ready = app_db_ready,
    .ready_check = "database",
};
