/*
 * Idempotent POSTs: the Idempotency-Key request header (IETF httpapi
 * draft "The Idempotency-Key HTTP Header Field", Stripe's convention), for
 * the apps whose POST creates a resource (users, todo).
 *
 * A client that sends a key and gets no answer (a host killed, a database
 * failover in the middle of a commit) sends the same request with the
 * same key again: the first request that carries a key is performed once,
 * and each retry with the same key and the same fields gets the first
 * answer back (status, Location, body, byte for byte, marked
 * Idempotent-Replayed: true) instead of creating a second resource; the
 * same key with other fields is 422, and a retry that arrives while the
 * first is still being performed is 409. Only an answer that created
 * something (201) is kept: a request that failed (a 409 conflict, a 503)
 * did nothing, and a retry is performed again.
 *
 * On PostgreSQL the key is a row of idempotency_keys
 * (its migration is in apps/idempotency.c) written by the very statement
 * that inserts the resource (APP_IDEMPOTENT_INSERT_SQL), so that the two
 * commit together or not at all, on any host; kept at least
 * APP_IDEMPOTENCY_TTL_S. The in-memory todo store keeps its keys itself
 * (apps/todo/todo.c). docs/users.md says what a client sees.
 */
#ifndef CORING_APPS_IDEMPOTENCY_H
#define CORING_APPS_IDEMPOTENCY_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/db/db.h"
#include "coring/http/server.h"

/* A key is 1 to this many bytes (Stripe's limit). */
#define APP_IDEMPOTENCY_KEY_MAX 255
/* How long a key is kept at least, seconds (24 hours, as Stripe). */
#define APP_IDEMPOTENCY_TTL_S 86400
#define APP_IDEMPOTENCY_TTL_SQL "interval '86400 seconds'"

/* A request's key: its characters, unquoted (in the request arena). */
typedef struct app_idempotency_key {
    const char *ptr;
    size_t len;
} app_idempotency_key;

/*
 * app_idempotency_key_parse - the key in an Idempotency-Key field value of
 * @len bytes at @value: an RFC 8941 sf-string (section 3.3.3: DQUOTE,
 * printable ASCII 0x20-0x7E with \" and \\ as the only escapes, DQUOTE),
 * as the draft has it, or a bare key of visible ASCII (0x21-0x7E, not
 * starting with DQUOTE), as Stripe's clients send it; nothing may follow
 * (no parameters). The unescaped key is written to @out (at least
 * APP_IDEMPOTENCY_KEY_MAX bytes) and its length returned: 1 to
 * APP_IDEMPOTENCY_KEY_MAX. Returns -EINVAL for anything else (empty, too
 * long, another byte, an unfinished string). Any thread; no allocation.
 */
int app_idempotency_key_parse(const char *value, size_t len, char *out);

/*
 * app_idempotency_key_get - the request's Idempotency-Key. Returns 1 with
 * *@key set (its bytes in the request arena), 0 when the request has
 * none, or -1 after answering 400 {"error":...} itself: a malformed value
 * (app_idempotency_key_parse), or the field given more than once.
 * Request handler.
 */
int app_idempotency_key_get(http_ctx *ctx, app_idempotency_key *key);

/*
 * app_idempotency_respond - answer a kept (@replayed) or first answer:
 * @status, Location @location (NUL-terminated; NULL for none), the JSON
 * @body of @len bytes (copied), and Idempotent-Replayed: true when
 * @replayed. Request handler.
 */
void app_idempotency_respond(http_ctx *ctx, int status, const char *location, const char *body,
                             size_t len, bool replayed);

/* app_idempotency_respond_mismatch - 422: the key was used with other
 * fields. Request handler. */
void app_idempotency_respond_mismatch(http_ctx *ctx);

/* app_idempotency_respond_in_flight - 409 with Retry-After: 1: a request
 * with this key is still being performed (the draft, section 2.7).
 * Request handler. */
void app_idempotency_respond_in_flight(http_ctx *ctx);

/*
 * A key claimed by a request of this worker thread while its statement is
 * in flight (app_idempotency_claim_take): the driver may put two queries of one
 * thread in one Sync group, one transaction, where PostgreSQL's advisory
 * lock cannot tell them apart; the claim answers the second 409 first.
 * Lives in the handler's frame.
 */
typedef struct app_idempotency_claim {
    struct app_idempotency_claim *next;
    const char *scope;
    app_idempotency_key key;
} app_idempotency_claim;

/*
 * app_idempotency_claim_take - claim @key of @scope (a static string naming
 * the operation, "POST /users") for this request on this worker thread.
 * Returns false when another request of this thread holds it. A true
 * return must be paired with app_idempotency_claim_release before the handler
 * returns. Request handler; @c, @key's bytes and @scope must outlive the
 * claim.
 */
bool app_idempotency_claim_take(app_idempotency_claim *c, const char *scope,
                           const app_idempotency_key *key);

/* app_idempotency_claim_release - end the claim @c. Request handler. */
void app_idempotency_claim_release(app_idempotency_claim *c);

/*
 * APP_IDEMPOTENT_INSERT_SQL - the keyed form of a statement that creates a
 * resource, as one statement (string literals all):
 *   @scope   the operation, "POST /users": a key means something per scope
 *   @key, @fingerprint   the parameters ("$3", "$4") of the key and of the
 *            request's canonical fields (text; stored as its sha256)
 *   @insert  the INSERT, whose SELECT reads FROM APP_IDEMPOTENCY_GO (so
 *            that it inserts only when the key is new and not in flight),
 *            with a RETURNING clause
 *   @answer  a SELECT FROM made (the INSERT's rows) of the answer:
 *            status (int), location (text), body (text, the JSON sent)
 * It takes the key's advisory lock (pg_try_advisory_xact_lock, held until
 * commit) without waiting, inserts the resource and the key's row
 * together, deletes up to 4 keys older than APP_IDEMPOTENCY_TTL_S, and
 * returns one row: free (bool: the lock was taken, no other transaction
 * performs this key), replayed (bool: the key was found), status (NULL
 * when nothing was made), location, body, same (bool: the key was found
 * with these fields, or not found). A
 * key committed after the statement's snapshot was taken is not seen: the
 * insert then fails on a unique index (23505), and app_idempotent_write
 * looks the key up again.
 */
#define APP_IDEMPOTENT_INSERT_SQL(scope, key, fingerprint, insert, answer)                         \
    "WITH earlier AS (SELECT status, location, body, fingerprint = sha256(convert_to(" fingerprint  \
    ", 'UTF8')) AS same FROM idempotency_keys WHERE scope = '" scope "' AND key = " key "), "       \
    "claim AS (SELECT pg_try_advisory_xact_lock(hashtextextended('" scope " ' || " key             \
    ", 0)) AS free), "                                                                             \
    "made AS (" insert "), "                                                                       \
    "answer AS (" answer "), "                                                                     \
    "kept AS (INSERT INTO idempotency_keys (scope, key, fingerprint, status, location, body) "     \
    "SELECT '" scope "', " key ", sha256(convert_to(" fingerprint ", 'UTF8')), status, location, " \
    "body FROM answer), "                                                                          \
    "expired AS (DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(SELECT ctid FROM "           \
    "idempotency_keys WHERE created_at < now() - " APP_IDEMPOTENCY_TTL_SQL " ORDER BY created_at " \
    "LIMIT 4 FOR UPDATE SKIP LOCKED))) "                                                          \
    "SELECT claim.free, earlier.status IS NOT NULL, coalesce(earlier.status, answer.status), "    \
    "coalesce(earlier.location, answer.location), coalesce(earlier.body, answer.body), "           \
    "coalesce(earlier.same, true) FROM claim LEFT JOIN earlier ON true LEFT JOIN answer ON true"

/* The FROM ... WHERE of APP_IDEMPOTENT_INSERT_SQL's @insert: a row only
 * when the key is free and new ("AND ..." may follow). */
#define APP_IDEMPOTENCY_GO "claim WHERE free AND NOT EXISTS (SELECT FROM earlier)"

/*
 * app_idempotency_mount - register the key's lookup for app @app (static;
 * for messages) and the table's migration (app_db_migrations, owner
 * "idempotency"), once whatever the number of apps that call it. Main
 * thread, in an app's mount(). Returns 0 or app_db_statement's or
 * app_db_migrations' error.
 */
int app_idempotency_mount(const char *app);

/*
 * app_idempotent_write - run @stmt (an APP_IDEMPOTENT_INSERT_SQL statement,
 * @count @params) for a request with @key in @scope, whose canonical fields
 * are the @fingerprint_len bytes at @fingerprint (also among @params), and
 * answer what is the key's to answer: the answer made (201 ...), a
 * replay, 422 (other fields), 409 (in flight on this thread or another
 * host). A unique violation (23505) makes it look the key up: found, a
 * replay or 422; not found, the conflict is the app's.
 * Returns true when it answered. Returns false, with *@err (0, or db_run's
 * error) and *@r for the app to answer (and clear): err 0 when the
 * statement made nothing (status NULL: say, a full store), else the
 * statement's error (the 23505 of a conflict included). @app names the app
 * in log lines. Request handler; yields.
 */
bool app_idempotent_write(http_ctx *ctx, const char *app, const char *scope,
                          const app_idempotency_key *key, const char *fingerprint,
                          size_t fingerprint_len, const db_stmt *stmt, const db_param *params,
                          size_t count, int *err, db_result *r);

#endif
