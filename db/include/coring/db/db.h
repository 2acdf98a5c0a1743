/*
 * Pipelined PostgreSQL on the thread's ring.
 *
 * Each worker thread owns a small pool of libpq connections in
 * non-blocking pipeline mode (libpq docs, "Pipeline Mode"). A request's
 * coroutine calls db_run(): the query (a registered statement and its
 * parameters) is queued on the least-loaded live connection of the thread
 * and the coroutine parks. The connection's driver, a coroutine of its own,
 * sends everything queued in one go (PQsendQueryPrepared each, then one
 * Sync: PQsendPipelineSync with libpq 17, PQpipelineSync before), waits for
 * the socket through the ring (net_park on PQsocket), reads the results in
 * order (PQconsumeInput, PQisBusy, PQgetResult) and wakes each waiter with
 * its own result. Many concurrent requests thus share one round trip. A
 * query queued while a round trip is in flight is sent at the loop's next
 * turn, in a Sync group of its own, while fewer than 4 groups are in flight
 * on the connection (else as soon as the oldest one's results are read).
 * After start-up no libpq call blocks a worker thread.
 *
 * Statements are prepared once per connection when it opens. Reads and
 * writes share a Sync group, which PostgreSQL runs as one implicit
 * transaction. A query marked `writes`, and any query after a write in its
 * group, is reported done only once the group's Sync confirmed the commit.
 * When a query of a group fails, PostgreSQL rolls back the group's earlier
 * queries and skips the later ones (PGRES_PIPELINE_ABORTED): those are
 * sent again (in the next group, then alone in a group of their own: up to
 * 3 sends in all), so no request's write is rolled back or failed by
 * another's error; the failing query gets its own error. A group whose
 * implicit transaction fails at its commit (a deferred constraint, 40001
 * under SERIALIZABLE: an error after its last result, before its Sync's)
 * has every query that waited for the commit rolled back: its only write
 * gets the error as its own; with several writes, each is sent again
 * alone, where the one at fault gets it.
 *
 * Coalescing: a statement registered with a batch form (db_statement's
 * batch_sql) has the queries of it that wait in one connection's queue
 * when the driver sends (2 to DB_COALESCE_MAX of them, none sent before,
 * their keys distinct and not NULL; a query whose key is taken stays
 * queued, and for a writing statement the batch then ends its Sync group,
 * so that the duplicate runs in a transaction of its own) go out as one
 * query of the batch form: their parameters
 * as arrays, in queue order, and each waiter gets, as a result of its
 * own, the rows whose key column equals its key parameter (a reading
 * statement), or the row at its own place in the arrays (a writing one:
 * what a write returns is the row as stored, which a trigger or a
 * normalisation may have changed, its key included). PostgreSQL
 * then plans, starts and checks one statement where it would run many (an
 * insert's constraints and index expressions: the users app's INSERT
 * costs its backend about half the CPU per row in batches of ~8). One
 * statement succeeds or fails as a whole: when the batch fails, for any
 * reason but a broken connection, its queries are sent again each in a
 * Sync group of its own (each then gets its own result or error; the
 * attempt counts as one of the 3 sends), so a duplicate key in one
 * request never fails another's; a batch rolled back for another query's
 * error sends its queries again together in the next group, as single
 * queries go. Each connection checks the registration as it opens
 * (PQdescribePrepared of both forms): a batch form that does not return
 * the statement's columns (names and types, in order) with a key column
 * of the key parameter's type is refused for the process, logged once,
 * and the statement's queries are sent one by one. A batch result that
 * still does not fit at run time (no row set, or no key column of the key
 * parameter's type: the schema changed; for a writing batch, not exactly
 * one row per query: a trigger skipped one) refuses the form likewise; a
 * writing batch's queries then fail with -EPROTO (it committed), a
 * reading one's are sent again one by one. db_config.coalesce off
 * (--db-coalesce off) sends every query as it was asked.
 *
 * Failures: a connection that breaks fails its queries with -ECONNRESET
 * (-EINPROGRESS for a write that may have committed: see db_run) and is
 * re-opened with exponential backoff (backoff_min_ns doubling up to
 * backoff_max_ns). While no connection of the thread is up, db_run fails
 * at once with -ENOTCONN instead of queueing. A query not answered within
 * query_timeout_ns fails with -ETIMEDOUT (-EINPROGRESS for a write that
 * may have committed). Slow statements fail alone: each connection's
 * session has statement_timeout and lock_timeout at nine tenths of the
 * time its queries wait (query_timeout_ns, half of it on a replica), so
 * the server ends a slow statement first (-ETIMEDOUT, the rest of its
 * Sync group sent again); and a query whose waiter gave up, its time run
 * out or its wait cancelled (net_task_cancel: the drain's deadline, or a
 * caller's own deadline), is cancelled on the server (PQcancel, on a
 * helper thread) while it is what the server runs. Only when the server
 * stays silent for 1.5 query_timeout_ns, asked or not, is the connection
 * dropped and re-opened.
 *
 * Statements are registered once, at start-up, with their parameters'
 * types (db_register returns a handle); a query binds its parameters as C
 * values (db_param_int64 ...), sent in binary format, and reads its
 * results, in binary format too, as C values (db_result_int64,
 * db_result_bool, db_result_time, db_result_string), each checking the
 * column's type (PQftype). docs/database.md is the guide for app authors.
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
 * statement: db_run sends a `replica_ok` statement to the read set while
 * one of this thread's replica connections is up, and to the primary at
 * once otherwise (no failed query while the replica is down). A replica
 * query gets half of query_timeout_ns; one that fails with -ECONNRESET or
 * -ENOTCONN, times out (a silent replica, or a hot standby holding it
 * while it replays a lock), or is cancelled for a conflict with recovery
 * (SQLSTATE 40001) is asked again, once, of the primary, with the other
 * half. Every other statement (every write, and every read inside a
 * write path or that must see the caller's own writes) goes to the
 * primary. Replication is asynchronous: a replica read may miss rows the
 * primary has committed (replication lag). A caller that must see its own
 * write keeps a second statement with the same SQL without `replica_ok`
 * and asks it on a miss (see apps/users: GET /users/{id}).
 *
 * Replication lag: after db_lag_register, each worker thread measures its
 * replica's lag once a second on its own connections (a service
 * coroutine; its queries count in no query metric): seconds (0 when the
 * replica has replayed all the WAL it received, else the age of its last
 * replayed transaction) and bytes (the primary's WAL position less the
 * replica's replayed one), in /metrics as db_replica_lag_seconds and
 * db_replica_lag_bytes per thread (-1 when unknown). While the seconds
 * exceed db_config.replica_max_lag_ns (0: no bound), the thread's
 * replica_ok reads go to the primary and db_reading_replica says why; they
 * return at the first measure back within the bound. An unknown lag (the
 * primary or the replica not answering the probe) sends nothing away
 * from the replica: the fallbacks above decide.
 */
#ifndef CORING_DB_DB_H
#define CORING_DB_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The types a typed statement's parameters and results bind to C types.
 * Each value is the PostgreSQL type's OID (src/include/catalog/pg_type.dat),
 * sent as the statement's paramTypes to PQprepare. All go over the wire in
 * binary format (libpq docs, "PQexecPrepared": paramFormats 1; the type's
 * send/recv functions in src/backend/utils/adt/ say what the bytes are):
 *
 *   DB_INT8         int8send/int8recv: 8 bytes, two's complement, network
 *                   byte order (int64_t)
 *   DB_INT4         int4send/int4recv: 4 bytes, network byte order (int32_t)
 *   DB_BOOL         boolsend/boolrecv: 1 byte, 0 or 1 (bool)
 *   DB_TIMESTAMPTZ  timestamptz_send/recv: an int8 of microseconds since
 *                   PostgreSQL's epoch, 2000-01-01 00:00:00 UTC (integer
 *                   datetimes, the only kind since PostgreSQL 10); the C
 *                   side counts microseconds since the Unix epoch
 *   DB_TEXT         textsend/textrecv: the bytes of the string in the
 *                   client encoding, no terminator ((ptr, len))
 */
typedef enum db_type {
    DB_TYPE_NONE = 0,         /* end of a statement's type list */
    DB_BOOL = 16,
    DB_INT8 = 20,
    DB_INT4 = 23,
    DB_TEXT = 25,
    DB_TIMESTAMPTZ = 1184,
} db_type;

#define DB_MAX_PARAMS 16  /* parameters of a typed statement */
#define DB_COALESCE_MAX 64 /* queries coalesced into one of a batch form */

/* PostgreSQL's epoch (2000-01-01 00:00:00 UTC) in microseconds since the
 * Unix epoch: timestamptz's binary value is the Unix time minus this
 * (src/include/datatype/timestamp.h, POSTGRES_EPOCH_JDATE). */
#define DB_PG_EPOCH_UNIX_US INT64_C(946684800000000)

/* A statement to prepare on every connection of the pool (db_register). */
typedef struct db_statement {
    const char *sql;   /* with $1..$n placeholders */
    bool writes;       /* changes data: done only once its Sync group committed */
    bool replica_ok;   /* a read that may be answered by the read replica
                          (read_conninfo), lag included; never with writes */
    db_type types[DB_MAX_PARAMS]; /* of $1.. in order, then DB_TYPE_NONE: their count */
    /* Optional: the same work for many parameter sets in one statement
     * (its "batch form"), with each $i the one-dimensional array of the
     * sets' $i (int8 -> int8[], text -> text[] ...), for example
     * "INSERT INTO t (a, b) SELECT * FROM unnest($1, $2) RETURNING ..." or
     * "SELECT ... WHERE id = ANY($1)". A reading form: each row it
     * returns must carry, in result column batch_key_column, of the key
     * parameter's type, the same value (byte for byte, in binary format)
     * as parameter batch_key_param of the set it answers; a set gets the
     * rows whose key equals its own (none, one or more). A writing form
     * (writes): exactly one row per set, in the sets' order, as INSERT ...
     * SELECT ... FROM unnest(...) RETURNING gives them (unnest yields the
     * arrays' elements in order, and INSERT returns each row as it inserts
     * it); a set gets the row at its place, whatever its key became (a
     * trigger may change it); it still returns a key column of the key
     * parameter's type, and the key still keeps duplicates out of a
     * batch. Either must return the statement's
     * own columns, by name and type, in order (alias them with AS where
     * the default names differ): checked as each connection opens. See
     * "Coalescing" in the header comment. NULL: none. */
    const char *batch_sql;
    int batch_key_param;   /* 0-based index of the key parameter */
    int batch_key_column;  /* 0-based result column that echoes it */
} db_statement;

/* A registered statement (db_register): opaque, valid for the process's
 * life, usable from every worker thread. */
typedef struct db_stmt db_stmt;

/*
 * A parameter bound as a C value: make one with db_param_int64() and
 * friends below. @type DB_TYPE_NONE with @null is SQL NULL, which fits a
 * parameter of any type. Text is not copied: @text must stay valid until
 * db_run returns.
 */
typedef struct db_param {
    db_type type;
    bool null;
    size_t len;             /* DB_TEXT: bytes at @v.text */
    union {
        int64_t i64;        /* DB_INT8, DB_INT4 (range-checked), DB_TIMESTAMPTZ (Unix us) */
        bool b;             /* DB_BOOL */
        const char *text;   /* DB_TEXT */
    } v;
} db_param;

/* db_param_int64 - @v for an int8 (or, when it fits, int4) parameter. */
static inline db_param db_param_int64(int64_t v)
{
    return (db_param){.type = DB_INT8, .v.i64 = v};
}

/* db_param_int32 - @v for an int4 parameter. */
static inline db_param db_param_int32(int32_t v)
{
    return (db_param){.type = DB_INT4, .v.i64 = v};
}

/* db_param_bool - @v for a bool parameter. */
static inline db_param db_param_bool(bool v)
{
    return (db_param){.type = DB_BOOL, .v.b = v};
}

/* db_param_text - the @len bytes at @s (no terminator needed; not copied)
 * for a text parameter. */
static inline db_param db_param_text(const char *s, size_t len)
{
    return (db_param){.type = DB_TEXT, .len = len, .v.text = s};
}

/* db_param_time - @unix_us, microseconds since the Unix epoch (UTC), for
 * a timestamptz parameter. */
static inline db_param db_param_time(int64_t unix_us)
{
    return (db_param){.type = DB_TIMESTAMPTZ, .v.i64 = unix_us};
}

/* db_param_null - SQL NULL, for a parameter of any type. */
static inline db_param db_param_null(void)
{
    return (db_param){.type = DB_TYPE_NONE, .null = true};
}

/*
 * How db_run chooses among a worker thread's connections for a new query
 * (docs/database.md, "Which connection a query takes"). Each Sync group
 * costs a round trip and a transaction; each connection is one backend,
 * that runs its queries one after the other.
 */
typedef enum db_routing {
    DB_ROUTING_FILL,   /* the first connection with less than 16 units of
                          work queued or in flight (DB_FILL_DEPTH), a query
                          counting 1 plus its statement's recent result
                          size in 256-byte units; when all have as much, as
                          SPREAD. The backends after the first stay asleep
                          until the load, or heavy queries, need them (the
                          default) */
    DB_ROUTING_SPREAD, /* the fewest queries queued or in flight: the most
                          backends at work */
    DB_ROUTING_PACK,   /* a connection with nothing in flight; else one whose
                          next Sync group is being formed (it goes out at
                          this loop turn's end); else as SPREAD. Fewer,
                          larger groups: less work per query for both
                          sides where each query is cheap */
} db_routing;

typedef struct db_config {
    const char *conninfo;          /* libpq URI or key=value string (DATABASE_URL) */
    const char *read_conninfo;     /* the read replica's (DATABASE_READ_URL), or NULL/"":
                                      replica_ok statements go to conninfo */
    uint64_t replica_max_lag_ns;   /* replica_ok reads go to the primary while the replica's
                                      measured lag exceeds this (0: no bound; "Replication
                                      lag" above; needs db_lag_register) */
    unsigned connections;          /* per worker thread (2) */
    db_routing routing;            /* which connection a query takes (FILL) */
    bool coalesce;                 /* queries of a statement with a batch form
                                      queued together go out as one (true) */
    bool trace_sql;                /* a sampled trace's query carries a sqlcommenter
                                      comment, sent unprepared (false: a client's
                                      sampled flag must not choose the server's
                                      slower path; docs/tracing.md) */
    uint64_t query_timeout_ns;     /* per query, from queueing to result (5 s; 0: none);
                                      the sessions' statement_timeout and lock_timeout
                                      are nine tenths of it (of half on a replica) */
    uint64_t connect_timeout_ns;   /* per connection attempt (5 s) */
    uint64_t backoff_min_ns;       /* first delay between reconnects (50 ms) */
    uint64_t backoff_max_ns;       /* cap of the doubling delay (2 s) */
} db_config;

/* The outcome of a query. Fill with db_run; free with db_result_clear. */
typedef struct db_result {
    struct pg_result *pg;  /* libpq's result, or NULL */
} db_result;

/* db_config_default - the defaults listed in the struct; no conninfo. */
db_config db_config_default(void);

/*
 * db_thread_init - open this worker thread's pool: @cfg->connections
 * connections (and as many to @cfg->read_conninfo when set), each opened,
 * the registered statements prepared (no more can be registered after the
 * first call; the replica's connections prepare the replica_ok ones only),
 * and its driver coroutine started. Call on a worker thread before it
 * serves (net_hooks.thread_init or an app's thread_init); the first
 * connection attempts block this thread (at most connect_timeout_ns each,
 * name resolution included), later ones never do.
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
 * db_reading_replica - whether this thread's replica_ok queries go to the
 * replica now (one of its replica connections is up, and it lags no more
 * than replica_max_lag_ns). When not, writes why into @why (@len bytes,
 * NUL-terminated): "no DATABASE_READ_URL", "replica unreachable: <libpq's
 * reason>" or "replica lags S s, past --replica-max-lag B s" (reads then
 * go to the primary).
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
 * db_lag_register - measure the read replica's lag in every pool opened
 * after this call ("Replication lag" above): registers the probe's two
 * statements and the metric families db_replica_lag_seconds,
 * db_replica_lag_bytes (per thread) and db_replica_lag_exceeded. The
 * probe needs to read pg_stat-style functions only (pg_current_wal_lsn,
 * pg_last_wal_replay_lsn, pg_last_xact_replay_timestamp): any role.
 * Main thread, before any db_thread_init; once (a second call does
 * nothing). Returns 0 or db_register's error.
 */
int db_lag_register(void);

/*
 * db_register - register statement @def for every pool opened after this
 * call: each connection prepares it when it opens (PQprepare with
 * paramTypes from @def->types; libpq docs, "PQprepare"). @def is copied;
 * its SQL must be static. Main thread, before any db_thread_init.
 * On success *@out is the statement's handle for db_run. A batch form
 * (@def->batch_sql) is prepared beside it, its parameters declared as the
 * arrays of @def->types, and checked against it on each connection (a
 * misfit is logged and not used; see "Coalescing").
 * Returns 0, -EINVAL (no SQL, more than DB_MAX_PARAMS types, a type this
 * API does not know, or a batch form's key parameter or column out of
 * range), -EBUSY (a pool is already open) or -ENOMEM.
 */
int db_register(const db_statement *def, const db_stmt **out);

/*
 * db_run - run registered statement @stmt with parameters @params (@count
 * of them, one per declared type; see db_param_int64 and friends) and wait
 * for its result, on the replica or the primary as @stmt's replica_ok says
 * (see the header), asked in binary format (libpq docs, "PQexecPrepared"
 * with resultFormat 1) and read with db_result_int64, db_result_bool,
 * db_result_time and db_result_string. Integers, booleans and timestamps
 * are encoded in the caller's frame, not allocated; text is sent from the
 * caller's memory, which must stay valid until db_run returns.
 * Call from a coroutine on a worker thread (a request handler). On return
 * *@out holds the result or the server's error (free it with
 * db_result_clear in every case).
 * Returns:
 *   0            success; rows in *@out
 *   -EREMOTEIO   the server answered with an error: db_result_sqlstate and
 *                db_result_message say which
 *   -ENOTCONN    no connection of this thread is up (answered at once); for a
 *                replica_ok statement: neither a replica nor a primary one
 *   -ECONNRESET  the connection broke while the query was in flight, and
 *                it did not take effect: a read (which may have run), or a
 *                write whose Sync had not reached the server
 *   -ETIMEDOUT   no answer within query_timeout_ns (a replica_ok query:
 *                neither the replica nor then the primary within half
 *                each), and it did not take effect: a read, or a write
 *                still queued or whose Sync had not gone out
 *   -EINPROGRESS the outcome of a write is unknown: its Sync was flushed
 *                to the server, which commits there, but no outcome came
 *                (the connection broke, query_timeout_ns passed, or the
 *                wait was cancelled): it may have committed, or may
 *                still. Answer 504, not 503 (app_db_respond_error in
 *                apps/: a retry with the same Idempotency-Key is safe)
 *   -ECANCELED   the wait was cancelled (net_task_cancel: the drain's
 *                deadline) before the query took effect
 *   -EINVAL      no @stmt, @count differs from its parameters, or a
 *                parameter's C type does not match its declared type
 *                (nothing sent)
 *   -ERANGE      an int64 bound to an int4 parameter does not fit, or text
 *                longer than INT_MAX bytes (nothing sent)
 *   -EPERM       off a worker coroutine
 *   -EPROTO      the query rode in a batch whose result does not fit the
 *                statement's batch form (see "Coalescing"): a writing
 *                query may have taken effect
 *   -ENOMEM
 * Source: libpq docs, "Pipeline Mode", "Asynchronous Command Processing"
 * and "PQexecPrepared"; PostgreSQL docs, "Binary format" (protocol message
 * formats) and each type's send/recv functions.
 */
int db_run(const db_stmt *stmt, const db_param *params, size_t count, db_result *out);

/* DB_RUN(stmt, out, params...) - db_run with the parameters listed in
 * place: DB_RUN(get_user, &r, db_param_int64(id)). */
#define DB_RUN(stmt, out, ...)                                                                     \
    db_run((stmt), (const db_param[]){__VA_ARGS__},                                                \
           sizeof((const db_param[]){__VA_ARGS__}) / sizeof(db_param), (out))

/* db_result_rows - rows in @r (0 for no result or a command). */
int db_result_rows(const db_result *r);

/* db_result_columns - columns in @r. */
int db_result_columns(const db_result *r);

/* db_result_is_null - whether the value at @row, @col is SQL NULL (true
 * also when out of range). */
bool db_result_is_null(const db_result *r, int row, int col);

/*
 * db_result_int64 - the int8, int4 or int2 value (PQftype) at @row, @col,
 * read in network byte order (int8recv and friends), as an int64.
 * Returns 0, -ENODATA for SQL NULL or out of range, -EPROTO when the
 * column is of another type or its length is wrong for it.
 */
int db_result_int64(const db_result *r, int row, int col, int64_t *out);

/*
 * db_result_bool - the bool value at @row, @col of a binary result (one
 * byte, boolrecv). Returns 0, -ENODATA for SQL NULL or out of range,
 * -EPROTO when the column is not bool.
 */
int db_result_bool(const db_result *r, int row, int col, bool *out);

/*
 * db_result_time - the timestamptz (or timestamp, read as UTC) value at
 * @row, @col of a binary result, in microseconds since the Unix epoch:
 * the server's microseconds since 2000-01-01 00:00:00 UTC plus
 * DB_PG_EPOCH_UNIX_US (timestamptz_recv). Returns 0, -ENODATA for SQL NULL
 * or out of range, -EPROTO when the column is of another type, -ERANGE for
 * 'infinity' and '-infinity'.
 */
int db_result_time(const db_result *r, int row, int col, int64_t *unix_us);

/*
 * db_result_string - the text-like value (text, varchar, char(n), name,
 * json) at @row, @col: *@s points at its *@len bytes, owned by @r (valid
 * until db_result_clear; libpq adds a NUL after them). Returns 0,
 * -ENODATA for SQL NULL or out of range, -EPROTO when the column is of
 * another type (its binary bytes are not text: cast it to text in SQL).
 */
int db_result_string(const db_result *r, int row, int col, const char **s, size_t *len);

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
 * db_reads_total{target}, db_replica_up, db_queries_resent_total{reason},
 * db_batches_total, db_coalesced_queries_total, db_cancel_requests_total;
 * docs/metrics.md).
 * Main thread, before the workers start. Returns 0 or -errno from
 * cr_metrics_register. Without it the pool counts nothing.
 */
int db_metrics_register(void);

#endif
