/*
 * Pipelined PostgreSQL on the thread's ring.
 *
 * Each worker thread owns a small pool of libpq connections in
 * non-blocking pipeline mode (libpq docs, "Pipeline Mode"). A request's
 * coroutine calls db_query(): the query (a prepared statement and its text
 * parameters) is queued on the least-loaded live connection of the thread
 * and the coroutine parks. The connection's driver, a coroutine of its own,
 * sends everything queued in one go (PQsendQueryPrepared each, then
 * PQpipelineSync), waits for the socket through the ring (net_park on
 * PQsocket), reads the results in order (PQconsumeInput, PQisBusy,
 * PQgetResult) and wakes each waiter with its own result. Many concurrent
 * requests thus share one round trip. After start-up no libpq call blocks a
 * worker thread.
 *
 * Statements are prepared once per connection when it opens. A statement
 * marked `writes` gets a Sync of its own, so that it is its own implicit
 * transaction: a failing write never rolls back another request's write,
 * and a write is reported done only once its Sync confirmed the commit.
 * Queries skipped because an earlier query of their Sync group failed
 * (PGRES_PIPELINE_ABORTED) are re-sent, up to 3 times.
 *
 * Failures: a connection that breaks fails its queries with -ECONNRESET and
 * is re-opened with exponential backoff (backoff_min_ns doubling up to
 * backoff_max_ns). While no connection of the thread is up, db_query fails
 * at once with -ENOTCONN instead of queueing. A query not answered within
 * query_timeout_ns fails with -ETIMEDOUT; when the server stays silent that
 * long the connection is dropped and re-opened.
 *
 * Results use the text format: db_result_text() gives the server's text
 * for a value, db_result_int64() parses an integer column.
 *
 * Host names are resolved off the ring (a helper thread per lookup, its
 * end polled through the ring; see src/resolve.h) and handed to libpq as
 * hostaddr= beside host=, so that libpq never calls a blocking getaddrinfo
 * on a worker thread; hosts are tried in the conninfo's order.
 *
 * TCP connections get TCP_NODELAY (a batch is written at once; leaving the
 * small writes to Nagle's algorithm costs ~40 ms a round trip).
 *
 * Read replicas: with db_config.read_conninfo (DATABASE_READ_URL) each
 * thread's pool holds a second set of `connections` connections, to that
 * server, with drivers of their own (same pipelining, reconnection and
 * name resolution); only the statements marked `replica_ok` are prepared
 * there. A query says it may be answered by a replica through its
 * statement: db_query sends a `replica_ok` statement to the read set while
 * one of this thread's replica connections is up, and to the primary at
 * once otherwise (no failed query while the replica is down); a replica
 * query that fails with -ECONNRESET or -ENOTCONN is asked again, once, of
 * the primary. Every other statement (every write, and every read inside a
 * write path or that must see the caller's own writes) goes to the
 * primary. Replication is asynchronous: a replica read may miss rows the
 * primary has committed (replication lag). A caller that must see its own
 * write keeps a second statement with the same SQL without `replica_ok`
 * and asks it on a miss (see apps/users: GET /users/{id}).
 */
#ifndef CORING_DB_DB_H
#define CORING_DB_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A statement prepared on every connection of the pool. */
typedef struct db_statement {
    const char *sql;   /* with $1..$n placeholders; parameter types inferred */
    int params;        /* number of parameters */
    bool writes;       /* changes data: gets its own Sync (own transaction) */
    bool replica_ok;   /* a read that may be answered by the read replica
                          (read_conninfo), lag included; never with writes */
} db_statement;

typedef struct db_config {
    const char *conninfo;          /* libpq URI or key=value string (DATABASE_URL) */
    const char *read_conninfo;     /* the read replica's (DATABASE_READ_URL), or NULL/"":
                                      replica_ok statements go to conninfo */
    unsigned connections;          /* per worker thread (2) */
    uint64_t query_timeout_ns;     /* per query, from queueing to result (5 s) */
    uint64_t connect_timeout_ns;   /* per connection attempt (5 s) */
    uint64_t backoff_min_ns;       /* first delay between reconnects (50 ms) */
    uint64_t backoff_max_ns;       /* cap of the doubling delay (2 s) */
    const db_statement *statements;/* prepared on each connection, by index */
    size_t statement_count;
} db_config;

/* The outcome of a query. Fill with db_query; free with db_result_clear. */
typedef struct db_result {
    struct pg_result *pg;  /* libpq's result, or NULL */
} db_result;

/* db_config_default - the defaults listed in the struct; no conninfo and
 * no statements. */
db_config db_config_default(void);

/*
 * db_thread_init - open this worker thread's pool: @cfg->connections
 * connections (and as many to @cfg->read_conninfo when set), each opened,
 * statements prepared, and its driver coroutine started. Call on a worker
 * thread before it serves (net_hooks.thread_init or an app's thread_init);
 * the first connection attempts block this thread (at most
 * connect_timeout_ns each, name resolution included), later ones never do.
 * A server that cannot be reached is not an error here: the drivers keep retrying
 * and queries fail with -ENOTCONN meanwhile.
 * @cfg and everything it points to must outlive db_thread_fini.
 * Returns 0, -EINVAL (no conninfo, no connection, or off a worker thread)
 * or -ENOMEM.
 */
int db_thread_init(const db_config *cfg);

/*
 * db_thread_fini - free this thread's pool. Call after the thread stopped
 * serving (net_hooks.thread_fini): the drivers have ended by then, their
 * idle waits being cancelled by shutdown.
 */
void db_thread_fini(void);

/*
 * db_available - whether a connection of this thread's pool is up (a
 * query would be queued rather than refused). Worker thread only.
 */
bool db_available(void);

/*
 * db_has_replica - whether this thread's pool has a read set (the config
 * had a read_conninfo), up or not. Worker thread only.
 */
bool db_has_replica(void);

/*
 * db_reading_replica - whether this thread's replica_ok queries go to the
 * replica now (one of its replica connections is up). When not, writes why
 * into @why (@len bytes, NUL-terminated): "no DATABASE_READ_URL", or
 * "replica unreachable: <libpq's reason>" (reads then go to the primary).
 * Worker thread only; never blocks. For GET /readyz.
 */
bool db_reading_replica(char *why, size_t len);

/*
 * db_ready - whether every worker thread's pool has a primary connection
 * up (the read replica's are not counted: see db_reading_replica), for a
 * readiness check (GET /readyz). Each pool publishes its count of live
 * connections whenever one opens or drops (its driver notices a server
 * that closes an idle connection at once; one that goes silent, when a
 * query times out); this reads those counts without a lock.
 * When not ready, writes why into @why (@len bytes, NUL-terminated): this
 * thread's last connection error when its own pool is down ("unreachable:
 * connection to server ... failed: ..."), else how many threads have no
 * connection. Worker thread only (a request handler); never blocks.
 * Returns true when ready; false also on a thread without a pool.
 */
bool db_ready(char *why, size_t len);

/*
 * db_query - run prepared statement @stmt (index in cfg->statements), on
 * the replica or the primary as its replica_ok says (see the header), with
 * @nparams text parameters @values (NUL-terminated strings, NULL for SQL
 * NULL; they must stay valid until db_query returns) and wait for its
 * result. Call from a coroutine on a worker thread (a request handler).
 * On return *@out holds the result or the server's error (free it with
 * db_result_clear in every case).
 * Returns:
 *   0            success; rows in *@out
 *   -EREMOTEIO   the server answered with an error: db_result_sqlstate and
 *                db_result_message say which
 *   -ENOTCONN    no connection of this thread is up (answered at once); for a
 *                replica_ok statement: neither a replica nor a primary one
 *   -ECONNRESET  the connection broke while the query was in flight (the
 *                query may or may not have run)
 *   -ETIMEDOUT   no answer within query_timeout_ns
 *   -ECANCELED   shutdown cancelled the wait
 *   -EINVAL      bad @stmt or @nparams; -EPERM off a worker coroutine;
 *   -ENOMEM
 * Source: libpq docs, "Pipeline Mode" and "Asynchronous Command Processing".
 */
int db_query(unsigned stmt, int nparams, const char *const *values, db_result *out);

/* db_result_rows - rows in @r (0 for no result or a command). */
int db_result_rows(const db_result *r);

/* db_result_columns - columns in @r. */
int db_result_columns(const db_result *r);

/* db_result_is_null - whether the value at @row, @col is SQL NULL (true
 * also when out of range). */
bool db_result_is_null(const db_result *r, int row, int col);

/*
 * db_result_text - the text of the value at @row, @col, NUL-terminated,
 * owned by @r (valid until db_result_clear); its length in bytes in *@len
 * when @len is not NULL. NULL for SQL NULL or out of range.
 */
const char *db_result_text(const db_result *r, int row, int col, size_t *len);

/*
 * db_result_int64 - the value at @row, @col as a signed 64-bit integer.
 * Returns 0, -ENODATA for SQL NULL or out of range, -EINVAL when the text
 * is not a decimal integer, -ERANGE when it does not fit.
 */
int db_result_int64(const db_result *r, int row, int col, int64_t *out);

/* db_result_sqlstate - the five-character SQLSTATE of an error result
 * ("23505"...), or "" (libpq: PG_DIAG_SQLSTATE). Owned by @r. */
const char *db_result_sqlstate(const db_result *r);

/* db_result_message - the primary error message of an error result, or ""
 * (libpq: PG_DIAG_MESSAGE_PRIMARY). Owned by @r. */
const char *db_result_message(const db_result *r);

/* db_result_clear - free @r's result (PQclear); @r may be reused. */
void db_result_clear(db_result *r);

/*
 * db_metrics_register - register the pool's metrics (db_queries_total,
 * db_round_trips_total, db_queries_waiting, db_connections_lost_total,
 * db_query_errors_total{kind}, db_query_duration_seconds,
 * db_reads_total{target}, db_replica_up; docs/metrics.md).
 * Main thread, before the workers start. Returns 0 or -errno from
 * cr_metrics_register. Without it the pool counts nothing.
 */
int db_metrics_register(void);

#endif
