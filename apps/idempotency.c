/*
 * Idempotency-Key for the apps' creating POSTs: the header read and
 * checked, the answers a key gives, the per-thread claims, and the
 * PostgreSQL side (the keyed statement's outcome, the lookup after a
 * unique violation). See coring/apps/idempotency.h.
 */
#include "coring/apps/idempotency.h"

#include "coring/apps/database.h"
#include "coring/db/admin.h"
#include "coring/core/log.h"

#include <errno.h>
#include <string.h>

/* --- the header ---------------------------------------------------------- */

int app_idempotency_key_parse(const char *value, size_t len, char *out)
{
    size_t n = 0;
    if (len > 0 && value[0] == '"') {
        /* RFC 8941 section 4.2.5: parsing a String. */
        size_t i = 1;
        for (;;) {
            if (i == len)
                return -EINVAL; /* no closing DQUOTE */
            unsigned char c = (unsigned char)value[i++];
            if (c == '"')
                break;
            if (c == '\\') {
                if (i == len || (value[i] != '"' && value[i] != '\\'))
                    return -EINVAL;
                c = (unsigned char)value[i++];
            } else if (c < 0x20 || c > 0x7e) {
                return -EINVAL;
            }
            if (n == APP_IDEMPOTENCY_KEY_MAX)
                return -EINVAL;
            out[n++] = (char)c;
        }
        if (i != len)
            return -EINVAL; /* parameters or anything else after it */
    } else {
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)value[i];
            if (c < 0x21 || c > 0x7e || n == APP_IDEMPOTENCY_KEY_MAX)
                return -EINVAL;
            out[n++] = (char)c;
        }
    }
    return n ? (int)n : -EINVAL;
}

int app_idempotency_key_get(http_ctx *ctx, app_idempotency_key *key)
{
    const http_str *value = NULL;
    for (size_t i = 0; i < ctx->req->num_headers; i++) {
        const http_header *h = &ctx->req->headers[i];
        if (!http_str_equal_ci(h->name, "Idempotency-Key"))
            continue;
        if (value) {
            http_respond_error(ctx, 400, "Idempotency-Key must be given once");
            return -1;
        }
        value = &h->value;
    }
    if (!value)
        return 0;
    char *out = cr_arena_alloc(ctx->arena, APP_IDEMPOTENCY_KEY_MAX);
    if (!out) {
        http_respond_error(ctx, 500, "out of memory");
        return -1;
    }
    int n = app_idempotency_key_parse(value->ptr, value->len, out);
    if (n < 0) {
        http_respond_error(ctx, 400, "Idempotency-Key must be 1 to 255 printable ASCII characters, "
                                     "bare or as a quoted string");
        return -1;
    }
    *key = (app_idempotency_key){.ptr = out, .len = (size_t)n};
    return 1;
}

/* --- answers ------------------------------------------------------------- */

void app_idempotency_respond(http_ctx *ctx, int status, const char *location, const char *body,
                             size_t len, bool replayed)
{
    if (location)
        http_add_header(ctx, "Location", location);
    if (replayed)
        http_add_header(ctx, "Idempotent-Replayed", "true");
    http_respond(ctx, status, "application/json", body, len);
}

void app_idempotency_respond_mismatch(http_ctx *ctx)
{
    http_respond_error(ctx, 422, "this Idempotency-Key was used with another request body");
}

void app_idempotency_respond_in_flight(http_ctx *ctx)
{
    http_add_header(ctx, "Retry-After", "1");
    http_respond_error(ctx, 409, "a request with this Idempotency-Key is still being performed: "
                                 "retry it later");
}

/* --- claims -------------------------------------------------------------- */

/* This thread's claims: as many as its requests with a key in flight. */
static _Thread_local app_idempotency_claim *claims;

bool app_idempotency_claim_take(app_idempotency_claim *c, const char *scope,
                           const app_idempotency_key *key)
{
    for (app_idempotency_claim *o = claims; o; o = o->next)
        if (o->key.len == key->len && memcmp(o->key.ptr, key->ptr, key->len) == 0 &&
            strcmp(o->scope, scope) == 0)
            return false;
    *c = (app_idempotency_claim){.next = claims, .scope = scope, .key = *key};
    claims = c;
    return true;
}

void app_idempotency_claim_release(app_idempotency_claim *c)
{
    for (app_idempotency_claim **p = &claims; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            return;
        }
    }
}

/* --- PostgreSQL ---------------------------------------------------------- */

/* A key as kept: on the primary, whatever the statement's snapshot saw. */
static const db_statement lookup_def = {
    .sql = "SELECT status, location, body, fingerprint = sha256(convert_to($3, 'UTF8')) "
           "FROM idempotency_keys WHERE scope = $1 AND key = $2",
    .types = {DB_TEXT, DB_TEXT, DB_TEXT}, /* scope, key, fingerprint */
};
static const db_stmt *lookup_stmt;

/* The table of keys, written in C rather than as a file of an app's
 * migrations/ folder: the helper is no app, and its migrations are its
 * own ("idempotency" in schema_migrations). It was
 * db/migrations/0005_idempotency_keys.sql, whose number it keeps.
 *
 * A row is written by the same statement that inserts the resource
 * (APP_IDEMPOTENT_INSERT_SQL), so the two commit together or not at all.
 * fingerprint is sha256 of the request's fields as the app canonicalises
 * them; status, location and body are the answer sent, replayed byte for
 * byte. Kept at least 24 hours (created_at): each keyed POST deletes up to
 * 4 of the oldest rows past that, so the table holds about a day of keyed
 * POSTs; an operator may trim it with DELETE FROM idempotency_keys WHERE
 * created_at < now() - interval '24 hours'. */
static const db_migration table_sql[] = {
    {"0005_idempotency_keys.sql",
     "CREATE TABLE idempotency_keys ("
     " scope text NOT NULL,"
     " key text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),"
     " fingerprint bytea NOT NULL,"
     " status int NOT NULL,"
     " location text,"
     " body text NOT NULL,"
     " created_at timestamptz NOT NULL DEFAULT now(),"
     " PRIMARY KEY (scope, key));"
     "CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);"},
};
static const db_migration_set table_migrations = {"idempotency", table_sql, 1};

int app_idempotency_mount(const char *app)
{
    int err = app_db_migrations(&table_migrations);
    if (err < 0)
        return err;
    return lookup_stmt ? 0 : app_db_statement(app, &lookup_def, &lookup_stmt);
}

/* Answer a key's answer from row 0 of @r, whose columns from @col on are
 * status, location, body, and whether the fields are the same; @replayed:
 * a kept answer, not the one just made. */
static void answer_kept(http_ctx *ctx, const db_result *r, int col, bool replayed)
{
    int64_t status = 0;
    bool same = true;
    const char *location = NULL, *body = "";
    size_t location_len = 0, body_len = 0;
    if (replayed && db_result_bool(r, 0, col + 3, &same) == 0 && !same) {
        app_idempotency_respond_mismatch(ctx);
        return;
    }
    if (db_result_int64(r, 0, col, &status) < 0 || status < 100 || status > 599 ||
        db_result_string(r, 0, col + 2, &body, &body_len) < 0) {
        cr_log_error("idempotency: a key's answer is not a status and a body");
        http_respond_error(ctx, 500, "database error");
        return;
    }
    if (db_result_string(r, 0, col + 1, &location, &location_len) < 0)
        location = NULL; /* NULL: no Location */
    app_idempotency_respond(ctx, (int)status, location, body, body_len, replayed);
}

bool app_idempotent_write(http_ctx *ctx, const char *app, const char *scope,
                          const app_idempotency_key *key, const char *fingerprint,
                          size_t fingerprint_len, const db_stmt *stmt, const db_param *params,
                          size_t count, int *err, db_result *r)
{
    app_idempotency_claim claim;
    if (!app_idempotency_claim_take(&claim, scope, key)) {
        app_idempotency_respond_in_flight(ctx);
        return true;
    }
    bool answered = true;
    *err = db_run(stmt, params, count, r);
    if (*err == 0 && db_result_rows(r) == 1) {
        bool free = false, replayed = false;
        db_result_bool(r, 0, 0, &free);
        db_result_bool(r, 0, 1, &replayed);
        if (replayed)
            answer_kept(ctx, r, 2, true);
        else if (!free)
            app_idempotency_respond_in_flight(ctx);
        else if (db_result_is_null(r, 0, 2))
            answered = false; /* nothing made: the app says why */
        else
            answer_kept(ctx, r, 2, false);
    } else if (*err == -EREMOTEIO && strcmp(db_result_sqlstate(r), "23505") == 0) {
        /* Committed by another transaction after this statement's snapshot:
         * the key, or the resource of the first request with it. */
        db_result kept;
        int lerr = DB_RUN(lookup_stmt, &kept, db_param_text(scope, strlen(scope)),
                          db_param_text(key->ptr, key->len),
                          db_param_text(fingerprint, fingerprint_len));
        if (lerr < 0)
            app_db_respond_error(ctx, app, lerr, &kept);
        else if (db_result_rows(&kept) == 1)
            answer_kept(ctx, &kept, 0, true);
        else
            answered = false; /* a conflict of the app's own */
        db_result_clear(&kept);
    } else {
        answered = false;
    }
    app_idempotency_claim_release(&claim);
    if (answered)
        db_result_clear(r);
    return answered;
}
