/*
 * users: a users API on PostgreSQL through the db layer (pipelined libpq
 * on each worker's ring).
 *
 *   GET  /users[?limit=N&after_id=ID]  first users by id (limit 1..100,
 *                                      default 50; keyset paging)
 *   GET  /users/{id}                   200, or 404; 400 for an id that is
 *                                      not a positive 64-bit integer
 *   POST /users {"name","email"}       201 + Location; 409 when the email
 *                                      exists (case-insensitive); 400/422
 *                                      for bad input. With Idempotency-Key:
 *                                      performed once, a retry replayed
 *                                      (coring/apps/idempotency.h)
 *
 * A user is {"id": <int>, "name": "...", "email": "...", "created_at":
 * "<RFC 3339 UTC>"}. The schema is apps/users/migrations/0001_users.sql, applied
 * at start-up. While the database is unreachable every route answers 503
 * {"error":"database unavailable"} at once; a POST whose insert reached
 * the server but whose commit was not confirmed answers 504 (its outcome
 * is unknown: app_db_respond_error).
 *
 * With DATABASE_READ_URL the two GETs read from the replica (db.h,
 * replica_ok) while it is up, POST writes to the primary; a GET /users/{id}
 * that the replica answers with no row is asked again of the primary
 * before a 404, so a client never misses the user it just created. GET
 * /users (the list) may lag the primary by the replication delay.
 */
#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/apps/idempotency.h"
#include "coring/core/clock.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/db/admin.h"
#include "coring/db/db.h"
#include "coring/http/query.h"
#include "coring/http/server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USERS_NAME_MAX 100   /* characters */
#define USERS_EMAIL_MAX 254  /* characters (RFC 5321 path limit) */
#define USERS_LIMIT_DEFAULT 50
#define USERS_LIMIT_MAX 100

/* The columns every statement returns: id bigint, name text, email text,
 * created_at timestamptz (apps/users/migrations/0001_users.sql). */
#define USER_COLUMNS "id, name, email, created_at"

/* The reads may be answered by the read replica (DATABASE_READ_URL), lag
 * included; get_primary_def is get_def on the primary, for a miss. */
#define USER_BY_ID "SELECT " USER_COLUMNS " FROM users WHERE id = $1"
static const db_statement list_def = {
    .sql = "SELECT " USER_COLUMNS " FROM users WHERE id > $1 ORDER BY id LIMIT $2",
    .types = {DB_INT8, DB_INT8}, /* after_id, limit */
    .replica_ok = true,
};
static const db_statement get_def = {
    .sql = USER_BY_ID,
    .types = {DB_INT8},
    .replica_ok = true,
};
static const db_statement get_primary_def = {
    .sql = USER_BY_ID,
    .types = {DB_INT8},
};
/* Concurrent inserts are coalesced (db.h, "Coalescing"): the batch form
 * inserts the rows of its two arrays in their order and returns each as
 * stored, one per request, which gets the row at its place; the email is
 * the key that keeps a duplicate out of a batch. In a batch of 8 the backend
 * spends about half the CPU per row (perf/db_cost.sh --case post-user,
 * --db-coalesce on against off: docs/database.md). Lookups by id gain
 * nothing from it (WHERE id = ANY($1) at 10 clients: the same backend CPU
 * per query, a few more round trips), so they have no batch form. */
static const db_statement insert_def = {
    .sql = "INSERT INTO users (name, email) VALUES ($1, $2) RETURNING " USER_COLUMNS,
    .types = {DB_TEXT, DB_TEXT},
    .writes = true,
    .batch_sql = "INSERT INTO users (name, email) SELECT * FROM unnest($1, $2) RETURNING "
                 USER_COLUMNS,
    .batch_key_param = 1,  /* email */
    .batch_key_column = 2, /* email */
};

/* A POST with an Idempotency-Key: the insert and the key's row in one
 * statement (coring/apps/idempotency.h), the answer's body built there as
 * write_user writes it (RFC 3339 with microseconds; to_json escapes as the
 * JSON writer does), so that a replay is the first answer byte for byte.
 * Never coalesced: it has no batch form. */
#define USERS_SCOPE "POST /users"
#define USER_JSON_SQL                                                                              \
    "format('{\"id\":%s,\"name\":%s,\"email\":%s,\"created_at\":%s}', id, to_json(name), "         \
    "to_json(email), to_json(to_char(created_at AT TIME ZONE 'UTC', "                             \
    "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')))"
static const db_statement insert_keyed_def = {
    .sql = APP_IDEMPOTENT_INSERT_SQL(USERS_SCOPE, "$3", "$4",
                                     "INSERT INTO users (name, email) SELECT $1, $2 FROM "
                                     APP_IDEMPOTENCY_GO " RETURNING " USER_COLUMNS,
                                     "SELECT 201 AS status, '/users/' || id AS location, "
                                     USER_JSON_SQL " AS body FROM made"),
    .types = {DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT}, /* name, email, key, fingerprint */
    .writes = true,
};

/* The statements' handles (app_db_statement), set in mount(). */
static const db_stmt *list_stmt, *get_stmt, *get_primary_stmt, *insert_stmt, *insert_keyed_stmt;

/* --- answers ------------------------------------------------------------- */

/* A user as the statements return it (USER_COLUMNS); the strings are the
 * result's. */
typedef struct user_row {
    int64_t id;
    const char *name, *email;
    size_t name_len, email_len;
    int64_t created_at; /* us since the Unix epoch */
} user_row;

/* Row @row of @r as a user. 0 or the db_result_* error (-EPROTO for a
 * column of an unexpected type: the schema and the statements disagree). */
static int read_user(const db_result *r, int row, user_row *u)
{
    int err;
    if ((err = db_result_int64(r, row, 0, &u->id)) < 0 ||
        (err = db_result_string(r, row, 1, &u->name, &u->name_len)) < 0 ||
        (err = db_result_string(r, row, 2, &u->email, &u->email_len)) < 0 ||
        (err = db_result_time(r, row, 3, &u->created_at)) < 0)
        return err;
    return 0;
}

/* @unix_us as RFC 3339 UTC with microseconds ("2026-01-02T03:04:05.000006Z"
 * RFC 3339 section 5.6) into @out (32 bytes). */
static void format_time(int64_t unix_us, char out[32])
{
    int64_t secs = unix_us / 1000000, us = unix_us % 1000000;
    if (us < 0) {
        us += 1000000;
        secs--;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%06dZ", (int)us);
}

static void write_user(cr_json_writer *w, const user_row *u)
{
    char created[32];
    format_time(u->created_at, created);
    cr_json_object_begin(w);
    cr_json_key(w, "id", 2);
    cr_json_int64(w, u->id);
    cr_json_key(w, "name", 4);
    cr_json_string(w, u->name, u->name_len);
    cr_json_key(w, "email", 5);
    cr_json_string(w, u->email, u->email_len);
    cr_json_key(w, "created_at", 10);
    cr_json_string(w, created, strlen(created));
    cr_json_object_end(w);
}

/* A row the schema cannot produce: log it once per request, answer 500. */
static void answer_bad_row(http_ctx *ctx, int err)
{
    cr_log_error("users: unexpected row from the database: %s", cr_strerror(err));
    http_respond_error(ctx, 500, "database error");
}

/* Answer @status with user @u. */
static void respond_user(http_ctx *ctx, int status, const user_row *u)
{
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, status, "application/json"));
    write_user(&w, u);
    http_response_end(ctx);
}

/* Answer a failed query: the database's state decides the status (the
 * constraint violations are the client's; the rest as every app). */
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
    }
    app_db_respond_error(ctx, "users", err, r);
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
 * answering the error. A copy in the request arena: the parser's strings
 * last only until the thread's next parse, which another request may run
 * while this one waits for the database. */
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
    char *copy = cr_arena_alloc(ctx->arena, *len);
    if (!copy) {
        http_respond_error(ctx, 500, "out of memory");
        return NULL;
    }
    memcpy(copy, s, *len);
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
    db_result r;
    int err = DB_RUN(list_stmt, &r, db_param_int64(after), db_param_int64(limit));
    if (err < 0) {
        answer_db_error(ctx, err, &r);
        db_result_clear(&r);
        return;
    }
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, 200, "application/json"));
    cr_json_array_begin(&w);
    for (int i = 0, n = db_result_rows(&r); i < n; i++) {
        user_row u;
        if ((err = read_user(&r, i, &u)) < 0)
            break;
        write_user(&w, &u);
    }
    cr_json_array_end(&w);
    if (err < 0) {
        http_response_cancel(ctx);
        answer_bad_row(ctx, err);
    } else {
        http_response_end(ctx);
    }
    db_result_clear(&r);
}

static void get_user(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *p = http_route_param(ctx->params, "id");
    int64_t id;
    if (!p || !parse_int64(p->ptr, p->len, &id)) {
        /* Past 64 bits too, as todo answers: 400, not 404. */
        http_respond_error(ctx, 400, "id must be a positive integer");
        return;
    }
    db_result r;
    user_row u;
    /* Where db_run sends it, decided before it yields (this thread only). */
    bool on_replica = db_reading_replica(NULL, 0);
    int err = DB_RUN(get_stmt, &r, db_param_int64(id));
    if (err == 0 && db_result_rows(&r) == 0 && on_replica) {
        /* Read after write: a user just created may not have reached the
         * replica yet; the primary decides before a 404. */
        db_result_clear(&r);
        err = DB_RUN(get_primary_stmt, &r, db_param_int64(id));
    }
    if (err < 0)
        answer_db_error(ctx, err, &r);
    else if (db_result_rows(&r) == 0)
        http_respond_error(ctx, 404, "user not found");
    else if ((err = read_user(&r, 0, &u)) < 0)
        answer_bad_row(ctx, err);
    else
        respond_user(ctx, 200, &u);
    db_result_clear(&r);
}

/* POST /users with an Idempotency-Key: the fields as one JSON array are
 * the request's fingerprint. */
static void create_user_keyed(http_ctx *ctx, const app_idempotency_key *key, const char *name,
                              size_t name_len, const char *email, size_t email_len)
{
    cr_buf fingerprint = CR_BUF_INIT;
    cr_json_writer w;
    cr_json_writer_init(&w, &fingerprint);
    cr_json_array_begin(&w);
    cr_json_string(&w, name, name_len);
    cr_json_string(&w, email, email_len);
    cr_json_array_end(&w);
    if (fingerprint.failed) {
        cr_buf_free(&fingerprint);
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    db_result r;
    int err;
    db_param params[] = {db_param_text(name, name_len), db_param_text(email, email_len),
                         db_param_text(key->ptr, key->len),
                         db_param_text(fingerprint.data, fingerprint.len)};
    if (!app_idempotent_write(ctx, "users", USERS_SCOPE, key, fingerprint.data, fingerprint.len,
                              insert_keyed_stmt, params, 4, &err, &r)) {
        answer_db_error(ctx, err < 0 ? err : -EIO, &r);
        db_result_clear(&r);
    }
    cr_buf_free(&fingerprint);
}

static void create_user(http_ctx *ctx, void *user)
{
    (void)user;
    app_idempotency_key key;
    int keyed = app_idempotency_key_get(ctx, &key);
    if (keyed < 0)
        return;
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
    if (keyed) {
        create_user_keyed(ctx, &key, name, name_len, email, email_len);
        return;
    }
    db_result r;
    user_row u;
    int err = DB_RUN(insert_stmt, &r, db_param_text(name, name_len), db_param_text(email, email_len));
    if (err < 0 || db_result_rows(&r) != 1) {
        answer_db_error(ctx, err < 0 ? err : -EIO, &r);
    } else if ((err = read_user(&r, 0, &u)) < 0) {
        answer_bad_row(ctx, err);
    } else {
        char location[40];
        snprintf(location, sizeof(location), "/users/%" PRId64, u.id);
        http_add_header(ctx, "Location", location);
        respond_user(ctx, 201, &u);
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
    if ((err = app_db_statement("users", &list_def, &list_stmt)) < 0 ||
        (err = app_db_statement("users", &get_def, &get_stmt)) < 0 ||
        (err = app_db_statement("users", &get_primary_def, &get_primary_stmt)) < 0 ||
        (err = app_db_statement("users", &insert_def, &insert_stmt)) < 0 ||
        (err = app_db_statement("users", &insert_keyed_def, &insert_keyed_stmt)) < 0 ||
        (err = app_idempotency_mount("users")) < 0)
        return err;
    return 0;
}

/* The app's settings: its options' fields. */
typedef struct users_settings {
    unsigned long long seed; /* --seed-users: users to insert at start-up; 0: none */
} users_settings;

static users_settings settings;

static const coring_option options[] = {
    {.name = "seed-users", .value = "N", .kind = CORING_OPTION_NUMBER,
     CORING_OPTION_FIELD(users_settings, seed), .min = 1, .max = 100000000, .implicit = "10000",
     .help = "insert N users at start-up (default N: 10000)",
     .default_doc = "off (N: 10000)"},
};

static int start(const app_options *opts)
{
    (void)opts;
    if (!settings.seed)
        return 0;
    if (settings.seed > INT64_MAX) {
        cr_log_error("users: cannot seed %llu users", settings.seed);
        return -ERANGE;
    }
    char err[512];
    db_param count = db_param_int64((int64_t)settings.seed);
    long long rows = 0;
    /* Emails carry the transaction id: seeding twice adds new users. */
    int ret = db_exec(app_db_url(),
                      "INSERT INTO users (name, email) SELECT 'User ' || g, 'user' || g || '.' || "
                      "txid_current() || '@seed.example.com' FROM generate_series(1, $1) g",
                      &count, 1, &rows, err, sizeof(err));
    if (ret < 0) {
        cr_log_error("users: seeding failed: %s", err);
        return ret;
    }
    cr_log_info("users: seeded %lld users", rows);
    return 0;
}

/* apps/users/openapi.json and migrations/, built in (apps/CMakeLists.txt). */
extern const char users_openapi[];
extern const db_migration_set users_migrations;

const app_def app_users = {
    .name = "users",
    .deadline_ns = 3 * CR_NS_PER_S, /* docs/deadlines.md */
    .summary = "GET/POST /users, GET /users/{id} (PostgreSQL: DATABASE_URL)",
    .openapi = users_openapi,
    .database = true,
    .migrations = &users_migrations,
    .options = options,
    .num_options = sizeof(options) / sizeof(options[0]),
    .config = &settings,
    .mount = mount,
    .start = start,
    .longest_request_ns = app_db_longest_request_ns,
    .ready = app_db_ready,
    .ready_check = "database",
};
