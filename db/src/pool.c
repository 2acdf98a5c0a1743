/*
 * The per-thread connection pool and each connection's driver coroutine:
 * see coring/db/db.h for the contract, queue.h for the bookkeeping.
 *
 * Driver turn: send every queued query, reads and writes alike, under one
 * Sync at the end (one write, one round trip), PQflush, then park on the
 * socket: for POLLIN always (results, or the server closing an idle
 * connection), for POLLOUT while libpq has unsent bytes. A request queued
 * while the driver is parked wakes it (net_unpark), which runs at the
 * loop's next turn, after the other requests of this turn have queued
 * theirs: concurrent requests share a round trip. Up to DB_MAX_SYNCS
 * Sync groups may be in flight on a connection; a query that arrives
 * while that many are out rides in the next group, sent as soon as the
 * oldest group's results are read. A group in which a query fails is
 * rolled back by the server: its other queries are sent again, in the
 * next group, and alone in a group the third time (queue.h).
 */
#include "coring/db/db.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/core/metrics.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"
#include "batch.h"
#include "codec.h"
#include "queue.h"
#include "resolve.h"
#include "statement.h"

#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define DB_MAX_BATCH 1024   /* queries sent per driver turn */
#define DB_MAX_ATTEMPTS 3   /* sends of a query rolled back without its own fault */
#define DB_MAX_SYNCS 4      /* Sync groups in flight per connection (docs/database.md) */

typedef struct db_pool db_pool;
typedef struct db_set db_set;

typedef struct db_conn {
    db_pool *pool;
    db_set *set;       /* the primary's or the replica's */
    unsigned index;
    PGconn *pg;
    bool up;           /* open, statements prepared: takes queries */
    bool idle;         /* driver parked with nothing in flight: wake it */
    bool parked;       /* driver parked waiting for results: wake it to send more */
    uint64_t progress_at; /* last result read, or the first query sent after idling */
    bool lost_logged;  /* the current outage was logged */
    net_task *driver;
    db_queue q;
    db_resolve **resolving; /* per target: its name being resolved, kept across attempts */
    char addrs[DB_RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN]; /* the last one's addresses */
    char error[512];        /* why the last attempt failed */
} db_conn;

/* One entry of the conninfo's host list. */
typedef struct db_target {
    char host[256];
    char port[16];   /* "": libpq's default */
    bool resolve;    /* a name (not a socket path or numeric address) */
} db_target;

/* The connections to one server (DATABASE_URL's, or DATABASE_READ_URL's). */
struct db_set {
    const char *conninfo;
    bool replica;       /* the read set: prepares only replica_ok statements */
    const char *what;   /* "database" or "database replica", for messages */
    db_conn *conns;     /* cfg->connections of them, in the pool's array */
    unsigned up;        /* of them that take queries */
    /* Set when the conninfo names a host to resolve: the other options
     * (keywords/values, with 3 free slots before the NULL for host,
     * hostaddr and port) and the host list. NULL: libpq gets the conninfo
     * as it is. */
    PQconninfoOption *parsed;
    const char **keywords, **values;
    size_t nopts;
    db_target *targets;
    size_t ntargets;
};

struct db_pool {
    const db_config *cfg;
    db_conn *conns;     /* the primary's, then the replica's */
    db_set sets[2];     /* [0] the primary (DATABASE_URL), [1] the replica */
    unsigned nsets;     /* 2 with cfg->read_conninfo */
    db_pending *free_list;
    /* Per registered statement (db_stmt.index), the size of its recent
     * results' values in bytes (a moving average over about 8):
     * the weight DB_ROUTING_FILL gives its next query. NULL when it could
     * not be allocated (every query then weighs as a lookup). */
    uint32_t *result_bytes;
    size_t nstatements;
};

#define PRIMARY(pool) (&(pool)->sets[0])

static _Thread_local db_pool *tl_pool;

/*
 * Each worker thread's pool state as the other threads may read it, for
 * db_ready(): written only by the owning thread, when its pool opens or
 * closes and when a connection comes up or drops (rare), with relaxed
 * stores; read with relaxed loads. One cache line per thread, none of them
 * written by a request. Threads past DB_PUBLISHED_THREADS are not
 * published (coring runs at most 1024).
 */
#define DB_PUBLISHED_THREADS 1024
static struct {
    alignas(64) atomic_bool open; /* the thread's pool exists */
    atomic_uint up;               /* its connections that take queries */
} published[DB_PUBLISHED_THREADS];

static void publish(const db_pool *pool, bool open)
{
    int i = net_thread_index();
    if (i < 0 || i >= DB_PUBLISHED_THREADS)
        return;
    atomic_store_explicit(&published[i].up, open ? PRIMARY(pool)->up : 0, memory_order_relaxed);
    atomic_store_explicit(&published[i].open, open, memory_order_relaxed);
}

/* --- metrics (docs/metrics.md) -------------------------------------------- */

static const char *const error_kinds[] = {"timeout", "connection", "query", "other"};
static const cr_metric_label error_labels[] = {{"kind", error_kinds, 4}};
/* Query durations, ns: 100 us to 10 s. */
static const uint64_t query_bounds[] = {100000,   250000,   500000,    1000000,   2500000,
                                        5000000,  10000000, 25000000,  50000000,  100000000,
                                        250000000, 500000000, 1000000000, 2500000000, 10000000000};
static const char *const read_targets[] = {"replica", "primary"};
static const char *const resend_reasons[] = {"group", "deadlock", "batch"};
static const cr_metric_label resend_labels[] = {{"reason", resend_reasons, 3}};
static const cr_metric_label read_labels[] = {{"target", read_targets, 2}};
static struct {
    cr_metric queries, round_trips, waiting, lost, errors, duration, reads, replica_up, resent,
        coalesced, batches;
} dbm;

int db_metrics_register(void)
{
    const cr_metric_def defs[] = {
        {.name = "db_queries_total", .help = "Queries asked of the database pool.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_round_trips_total",
         .help = "Pipeline Syncs sent: round trips; queries per round trip = queries / round trips.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_queries_waiting", .help = "Queries queued or in flight, waiting for their result.",
         .type = CR_METRIC_GAUGE},
        {.name = "db_connections_lost_total",
         .help = "Database connections lost (each is then re-opened with backoff).",
         .type = CR_METRIC_COUNTER},
        {.name = "db_query_errors_total", .help = "Queries that failed, by kind.",
         .type = CR_METRIC_COUNTER, .labels = error_labels, .num_labels = 1},
        {.name = "db_query_duration_seconds", .help = "Time from a query asked to its result.",
         .type = CR_METRIC_HISTOGRAM, .bounds = query_bounds,
         .num_bounds = sizeof(query_bounds) / sizeof(query_bounds[0]), .scale = 1e-9},
        {.name = "db_reads_total",
         .help = "Queries of statements that do not write, by the server asked: the replica "
                 "(replica_ok ones while it is up) or the primary (the others, and all "
                 "without DATABASE_READ_URL or while the replica is down).",
         .type = CR_METRIC_COUNTER, .labels = read_labels, .num_labels = 1},
        {.name = "db_replica_up",
         .help = "Worker threads with a DATABASE_READ_URL connection up (reads go there).",
         .type = CR_METRIC_GAUGE},
        {.name = "db_queries_resent_total",
         .help = "Queries sent again after PostgreSQL rolled them back without their own "
                 "fault: another query of their Sync group failed (group), or their group "
                 "was chosen to end a deadlock or a serialization failure (deadlock); or "
                 "one by one after the batch they were coalesced into failed (batch).",
         .type = CR_METRIC_COUNTER, .labels = resend_labels, .num_labels = 1},
        {.name = "db_batches_total",
         .help = "Queries of a statement's batch form sent, each standing for several "
                 "coalesced queries.",
         .type = CR_METRIC_COUNTER},
        {.name = "db_coalesced_queries_total",
         .help = "Queries sent inside a batch; per batch = coalesced / batches.",
         .type = CR_METRIC_COUNTER},
    };
    cr_metric *out[] = {&dbm.queries, &dbm.round_trips, &dbm.waiting, &dbm.lost,
                        &dbm.errors,  &dbm.duration,    &dbm.reads,   &dbm.replica_up,
                        &dbm.resent,  &dbm.batches,     &dbm.coalesced};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST)
            return err;
    }
    return 0;
}

/* The kind label of a db_run error. */
static unsigned error_kind(int err)
{
    switch (err) {
    case -ETIMEDOUT: return 0;
    case -ECONNRESET: case -ENOTCONN: return 1;
    case -EREMOTEIO: return 2;
    default: return 3;
    }
}

db_config db_config_default(void)
{
    return (db_config){
        .connections = 2,
        .query_timeout_ns = 5 * CR_NS_PER_S,
        .connect_timeout_ns = 5 * CR_NS_PER_S,
        .backoff_min_ns = 50 * CR_NS_PER_MS,
        .backoff_max_ns = 2 * CR_NS_PER_S,
        .coalesce = true,
    };
}

/* --- queries' memory ------------------------------------------------------ */

static db_pending *pending_alloc(db_pool *pool)
{
    db_pending *p = pool->free_list;
    if (p)
        pool->free_list = p->next;
    else if (!(p = malloc(sizeof(*p))))
        return NULL;
    *p = (db_pending){0};
    return p;
}

static void pending_free(db_pool *pool, db_pending *p)
{
    if (p->result)
        PQclear(p->result);
    p->result = NULL;
    free(p->owned);
    p->owned = NULL;
    p->next = pool->free_list;
    pool->free_list = p;
}

/* Hand @p's outcome to its waiter, or drop it when the waiter gave up.
 * A batch hands its error to each of its members, then goes. */
static void pending_done(db_conn *c, db_pending *p)
{
    if (p->members) {
        for (db_pending *m = p->members, *next; m; m = next) {
            next = m->next;
            m->next = NULL;
            m->error = p->error ? p->error : -EIO;
            pending_done(c, m);
        }
        p->members = NULL;
        pending_free(c->pool, p);
        return;
    }
    p->state = DB_PENDING_DONE;
    if (p->waiter)
        net_unpark(p->waiter);
    else
        pending_free(c->pool, p);
}

/* --- waiting for the socket --------------------------------------------- */

/* Wait for @fd: through the ring from a coroutine, with poll(2) at
 * start-up (@blocking). Returns the events, -ETIMEDOUT or -errno. */
static int wait_socket(int fd, unsigned events, uint64_t timeout_ns, bool blocking)
{
    if (!blocking)
        return net_park(fd, events, timeout_ns);
    struct pollfd pfd = {.fd = fd, .events = (short)events};
    int r = poll(&pfd, 1, (int)(timeout_ns / CR_NS_PER_MS));
    if (r < 0)
        return -errno;
    return r == 0 ? -ETIMEDOUT : pfd.revents;
}

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    cr_log_debug("database: %s", message);
}

/* Whether statement @s is prepared on @c: all on the primary, only the
 * replica_ok ones on a replica (a hot standby refuses writes). */
static bool prepared_on(const db_conn *c, const db_stmt *s)
{
    return !c->set->replica || (s->def.replica_ok && !s->def.writes);
}

static size_t prepared_count(const db_conn *c)
{
    size_t registered, n = 0;
    const db_stmt *const *stmts = db_statements(&registered);
    for (size_t i = 0; i < registered; i++)
        n += prepared_on(c, stmts[i]);
    return n;
}

/* Whether @s has a batch form that @c prepares: @c describes the two. */
static bool described_on(const db_conn *c, const db_stmt *s)
{
    return s->batch && prepared_on(c, s);
}

/* The first 60 bytes of @s's SQL, and whether there are more: for
 * messages ("%.60s%s"). */
#define SQL_HEAD(s) (s)->def.sql, strlen((s)->def.sql) > 60 ? "..." : ""

/* Description @batch of the batch form of the statement at or after *@at
 * that has one, described just before as @single (*@at then moves past
 * it): a form that does not stand in for its statement (batch.h) is
 * refused, its queries sent one by one (logged once). Returns false only
 * when no statement was waiting for a description. */
static bool check_batch_form(db_conn *c, size_t *at, const PGresult *single,
                             const PGresult *batch)
{
    size_t registered;
    const db_stmt *const *stmts = db_statements(&registered);
    while (*at < registered && !described_on(c, stmts[*at]))
        ++*at;
    if (*at == registered) {
        cr_log_error("%s: a statement description that was not asked for", c->set->what);
        return false;
    }
    const db_stmt *s = stmts[(*at)++];
    char why[256];
    if (!db_batch_form_fits(single, batch, s->def.batch_key_column,
                            s->oids[s->def.batch_key_param], why, sizeof(why)) &&
        db_stmt_refuse_batch(s))
        cr_log_error("%s: the batch form of statement %s (%.60s%s) does not stand in for "
                     "it: %s (db.h, \"Coalescing\"); its queries are sent one by one",
                     c->set->what, s->name, SQL_HEAD(s), why);
    return true;
}

/* Read the results of the prepares, then of the descriptions of each
 * statement with a batch form and of that form (checked against each
 * other), and their Sync. 0 or -errno. */
static int read_prepares(db_conn *c, PGconn *pg, uint64_t deadline, bool blocking)
{
    size_t ok = 0, prepares = prepared_count(c), at = 0;
    PGresult *single = NULL; /* a statement's description, awaiting its form's */
    int err = 0;
    bool synced = false;
    while (!synced && !err) {
        int f = PQflush(pg);
        if (f < 0) {
            err = -EIO;
            break;
        }
        while (!PQisBusy(pg)) {
            PGresult *r = PQgetResult(pg);
            if (!r)
                continue; /* end of one prepare's or description's results */
            ExecStatusType st = PQresultStatus(r);
            if (st == PGRES_COMMAND_OK && ok < prepares) {
                ok++;
            } else if (st == PGRES_COMMAND_OK && !single) {
                single = r;
                continue;
            } else if (st == PGRES_COMMAND_OK) {
                bool asked = check_batch_form(c, &at, single, r);
                PQclear(single);
                single = NULL;
                err = asked ? 0 : -EIO;
            } else if (st == PGRES_PIPELINE_SYNC) {
                synced = true;
            } else {
                if (!c->lost_logged)
                    cr_log_error("%s: cannot prepare statement: %s", c->set->what,
                                 PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                                     ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY)
                                     : PQresStatus(st));
                err = -EIO;
            }
            PQclear(r);
            if (synced || err)
                break;
        }
        if (synced || err)
            break;
        uint64_t now = cr_clock_now_ns();
        if (now >= deadline) {
            err = -ETIMEDOUT;
            break;
        }
        int ev = wait_socket(PQsocket(pg), POLLIN | (f ? POLLOUT : 0), deadline - now, blocking);
        if (ev < 0)
            err = ev;
        else if (!PQconsumeInput(pg))
            err = -EIO;
    }
    bool unpaired = single != NULL;
    PQclear(single);
    if (err)
        return err;
    if (ok != prepares || unpaired) {
        cr_log_error("%s: %zu of %zu statements prepared%s", c->set->what, ok, prepares,
                     unpaired ? ", a description without its batch form's" : "");
        return -EIO;
    }
    return 0;
}

/* Note why @pg failed (its first line) in c->error. */
static void note_error(db_conn *c, PGconn *pg, int err)
{
    const char *msg = pg ? PQerrorMessage(pg) : "";
    size_t n = strcspn(msg, "\n");
    if (n)
        snprintf(c->error, sizeof(c->error), "%.*s", (int)n, msg);
    else
        snprintf(c->error, sizeof(c->error), "%s", cr_strerror(err));
}

/*
 * Finish opening @pg, just started by PQconnectStart(Params), without
 * blocking (PQconnectPoll, libpq docs "Database Connection Control
 * Functions"), switch it to non-blocking pipeline mode and prepare the
 * statements. 0 with c->pg set, or -errno with c->error saying why.
 */
static int open_started(db_conn *c, PGconn *pg, uint64_t deadline, bool blocking)
{
    if (!pg) {
        snprintf(c->error, sizeof(c->error), "out of memory");
        return -ENOMEM;
    }
    int err = 0;
    if (PQstatus(pg) == CONNECTION_BAD) {
        err = -ECONNREFUSED;
        goto fail;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED) {
            err = -ECONNREFUSED;
            goto fail;
        }
        uint64_t now = cr_clock_now_ns();
        if (now >= deadline) {
            err = -ETIMEDOUT;
            goto fail;
        }
        /* The socket can change between attempts (several hosts). */
        int ev = wait_socket(PQsocket(pg), st == PGRES_POLLING_READING ? POLLIN : POLLOUT,
                             deadline - now, blocking);
        if (ev < 0 && ev != -ETIMEDOUT) {
            err = ev;
            goto fail;
        }
        st = PQconnectPoll(pg);
    }
    PQsetNoticeProcessor(pg, quiet_notice, NULL);
    int fd = PQsocket(pg);
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
        (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (PQsetnonblocking(pg, 1) != 0 || !PQenterPipelineMode(pg)) {
        err = -EIO;
        goto fail;
    }
    /* Every registered statement this connection serves, its parameters'
     * types declared. */
    size_t registered;
    const db_stmt *const *stmts = db_statements(&registered);
    for (size_t i = 0; i < registered; i++) {
        const db_stmt *s = stmts[i];
        if (!prepared_on(c, s))
            continue;
        if (!PQsendPrepare(pg, s->name, s->def.sql, s->nparams, s->oids)) {
            err = -EIO;
            goto fail;
        }
    }
    /* Each batch form described after its statement, checked before any
     * query rides in it (read_prepares). */
    for (size_t i = 0; i < registered; i++) {
        const db_stmt *s = stmts[i];
        if (described_on(c, s) && (!PQsendDescribePrepared(pg, s->name) ||
                                   !PQsendDescribePrepared(pg, s->batch->name))) {
            err = -EIO;
            goto fail;
        }
    }
    if (!PQpipelineSync(pg)) {
        err = -EIO;
        goto fail;
    }
    err = read_prepares(c, pg, deadline, blocking);
    if (err < 0)
        goto fail;
    c->pg = pg;
    return 0;

fail:
    note_error(c, pg, err);
    PQfinish(pg);
    return err;
}

/*
 * Resolve target @target's host off the ring: on a helper thread, waiting for its eventfd
 * through the ring (with poll(2) at start-up, @blocking) until @deadline.
 * A resolution still running at the deadline is kept for the next attempt
 * rather than started again: at most one lookup per host and connection.
 * Returns the number of addresses, now in c->addrs, or -ETIMEDOUT,
 * -EHOSTUNREACH (no address), -ECANCELED, -ENOMEM, with c->error saying
 * why.
 */
static int resolve_host(db_conn *c, size_t target, uint64_t deadline, bool blocking)
{
    const char *host = c->set->targets[target].host;
    db_resolve **slot = &c->resolving[target];
    if (!*slot && cr_clock_now_ns() >= deadline) {
        snprintf(c->error, sizeof(c->error), "cannot resolve %.200s: no time left to ask", host);
        return -ETIMEDOUT;
    }
    if (!*slot && !(*slot = db_resolve_start(host))) {
        snprintf(c->error, sizeof(c->error), "cannot resolve %.200s: no thread or memory", host);
        return -ENOMEM;
    }
    while (!db_resolve_done(*slot)) {
        uint64_t now = cr_clock_now_ns();
        if (now >= deadline) {
            snprintf(c->error, sizeof(c->error),
                     "cannot resolve %.200s: no answer within the connect timeout", host);
            return -ETIMEDOUT;
        }
        int ev = wait_socket(db_resolve_fd(*slot), POLLIN, deadline - now, blocking);
        if (ev == -ECANCELED)
            return -ECANCELED;
        if (ev < 0 && ev != -ETIMEDOUT) {
            snprintf(c->error, sizeof(c->error), "cannot resolve %.200s: %s", host,
                     cr_strerror(ev));
            return ev;
        }
    }
    const char (*addrs)[INET6_ADDRSTRLEN];
    const char *why;
    int n = db_resolve_result(*slot, &addrs, &why);
    if (n > 0)
        memcpy(c->addrs, addrs, sizeof(c->addrs));
    else
        snprintf(c->error, sizeof(c->error), "cannot resolve %.200s: %s", host, why);
    db_resolve_release(*slot);
    *slot = NULL;
    return n > 0 ? n : -EHOSTUNREACH;
}

/*
 * Open a connection without blocking the thread. A conninfo that names
 * hosts to resolve is tried host by host, in its order, as libpq would:
 * each name resolved off the ring (resolve_host), each of its addresses
 * given to libpq as `hostaddr=` beside `host=` (PQconnectStartParams), so
 * that libpq itself never calls getaddrinfo. As libpq's connect_timeout,
 * the connect timeout applies to each host's lookup and to each address
 * separately: a lookup that hangs, or an address that drops packets, does
 * not keep the hosts after it from being tried. Any other conninfo (socket
 * paths, numeric addresses, an explicit hostaddr) goes to PQconnectStart
 * as it is. 0 or -errno; c->pg set on success.
 */
static int conn_open(db_conn *c, bool blocking)
{
    db_set *set = c->set;
    uint64_t timeout = c->pool->cfg->connect_timeout_ns;
    uint64_t deadline = cr_clock_now_ns() + timeout;
    int err = -EHOSTUNREACH;
    snprintf(c->error, sizeof(c->error), "no host to connect to");
    if (!set->targets) {
        err = open_started(c, PQconnectStart(set->conninfo), deadline, blocking);
    } else {
        size_t n = set->nopts;
        set->keywords[n] = "host";
        set->keywords[n + 1] = "hostaddr";
        set->keywords[n + 2] = "port";
        for (size_t i = 0; i < set->ntargets && err != 0 && err != -ECANCELED; i++) {
            const db_target *t = &set->targets[i];
            int addrs = 1;
            if (t->resolve &&
                (addrs = resolve_host(c, i, cr_clock_now_ns() + timeout, blocking)) < 0) {
                err = addrs;
                continue;
            }
            for (int k = 0; k < addrs && err != 0 && err != -ECANCELED; k++) {
                deadline = cr_clock_now_ns() + timeout;
                set->values[n] = t->host;
                set->values[n + 1] = t->resolve ? c->addrs[k] : "";
                set->values[n + 2] = t->port;
                err = open_started(c, PQconnectStartParams(set->keywords, set->values, 0),
                                   deadline, blocking);
            }
        }
    }
    if (err < 0 && !c->lost_logged && err != -ECANCELED)
        cr_log_warn("%s connection %u: cannot connect: %s", c->set->what, c->index, c->error);
    return err;
}

/* Split the conninfo into options and a host list when a host needs
 * resolving (see struct db_set). Returns 0 or -ENOMEM; a conninfo libpq
 * cannot parse, or one that needs no resolution, leaves set->targets
 * NULL. */
static int plan_hosts(db_set *set)
{
    PQconninfoOption *opts = PQconninfoParse(set->conninfo, NULL);
    if (!opts)
        return 0; /* libpq says why on connect */
    const char *host = NULL, *hostaddr = NULL, *port = NULL;
    size_t count = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else
            count++;
    }
    if (!host || !*host)
        host = getenv("PGHOST"); /* what libpq falls back on */
    if (!port || !*port)
        port = NULL;
    size_t nhosts = 1, nports = 1;
    for (const char *p = host; p && *p; p++)
        nhosts += *p == ',';
    for (const char *p = port; p && *p; p++)
        nports += *p == ',';
    if ((hostaddr && *hostaddr) || !host || !*host || (port && nports > 1 && nports != nhosts)) {
        PQconninfoFree(opts); /* nothing to resolve, or libpq will refuse it */
        return 0;
    }
    db_target *targets = calloc(nhosts, sizeof(*targets));
    if (!targets) {
        PQconninfoFree(opts);
        return -ENOMEM;
    }
    bool any = false;
    const char *h = host, *pt = port;
    for (size_t i = 0; i < nhosts; i++) {
        size_t hl = strcspn(h, ",");
        snprintf(targets[i].host, sizeof(targets[i].host), "%.*s", (int)hl, h);
        h += hl + (h[hl] == ',');
        if (pt) {
            size_t pl = strcspn(pt, ",");
            snprintf(targets[i].port, sizeof(targets[i].port), "%.*s", (int)pl, pt);
            if (nports > 1)
                pt += pl + (pt[pl] == ',');
        }
        const char *name = targets[i].host;
        unsigned char buf[sizeof(struct in6_addr)];
        targets[i].resolve = *name && name[0] != '/' && name[0] != '@' &&
                             inet_pton(AF_INET, name, buf) != 1 &&
                             inet_pton(AF_INET6, name, buf) != 1;
        any = any || targets[i].resolve;
    }
    if (!any) {
        free(targets);
        PQconninfoFree(opts);
        return 0;
    }
    set->keywords = calloc(count + 4, sizeof(char *));
    set->values = calloc(count + 4, sizeof(char *));
    if (!set->keywords || !set->values) {
        free(set->keywords);
        free(set->values);
        set->keywords = NULL;
        set->values = NULL;
        free(targets);
        PQconninfoFree(opts);
        return -ENOMEM;
    }
    size_t n = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val && strcmp(o->keyword, "host") != 0 && strcmp(o->keyword, "hostaddr") != 0 &&
            strcmp(o->keyword, "port") != 0) {
            set->keywords[n] = o->keyword;
            set->values[n++] = o->val;
        }
    set->nopts = n;
    set->parsed = opts;
    set->targets = targets;
    set->ntargets = nhosts;
    return 0;
}

/* The replica gauge: this thread reads from its replica or not. */
static void publish_replica(const db_set *set)
{
    if (set->replica)
        cr_metric_set(&dbm.replica_up, 0, set->up > 0);
}

static void conn_up(db_conn *c)
{
    if (c->lost_logged)
        cr_log_info("%s connection %u: connected again", c->set->what, c->index);
    c->lost_logged = false;
    c->up = true;
    c->set->up++;
    publish(c->pool, true);
    publish_replica(c->set);
}

/* Drop the connection: every query on it fails with @err. */
static void conn_down(db_conn *c, int err)
{
    if (c->up) {
        c->up = false;
        c->set->up--;
        publish(c->pool, true);
        publish_replica(c->set);
    }
    c->idle = c->parked = false;
    if (c->pg) {
        if (err != -ECANCELED) {
            note_error(c, c->pg, err); /* why it is down, for db_ready() */
            cr_metric_inc(&dbm.lost, 0);
        }
        if (err != -ECANCELED && !c->lost_logged) {
            const char *msg = PQerrorMessage(c->pg);
            size_t n = strcspn(msg, "\n");
            if (n)
                cr_log_warn("%s connection %u lost (%.*s): reconnecting", c->set->what,
                            c->index, (int)n, msg);
            else
                cr_log_warn("%s connection %u lost (%s): reconnecting", c->set->what, c->index,
                            cr_strerror(err));
            c->lost_logged = true;
        }
        PQfinish(c->pg);
        c->pg = NULL;
    }
    db_pending *p = db_queue_take_all(&c->q);
    while (p) {
        db_pending *next = p->next;
        p->next = NULL;
        if (p->result)
            PQclear(p->result);
        p->result = NULL;
        p->error = err == -ECANCELED ? -ECANCELED : -ECONNRESET;
        pending_done(c, p);
        p = next;
    }
}

/* --- the driver ------------------------------------------------------------ */

static db_event classify(const PGresult *r)
{
    if (!r)
        return DB_EVENT_END;
    switch (PQresultStatus(r)) {
    case PGRES_PIPELINE_SYNC:
        return DB_EVENT_SYNC;
    case PGRES_PIPELINE_ABORTED:
        return DB_EVENT_ABORTED;
    case PGRES_FATAL_ERROR:
    case PGRES_NONFATAL_ERROR:
    case PGRES_BAD_RESPONSE:
        return DB_EVENT_ERROR;
    default:
        return DB_EVENT_RESULT;
    }
}

/* SQLSTATE class 40 states that PostgreSQL asks the client to retry: the
 * transaction was rolled back to end a deadlock (40P01) or a serialization
 * failure (40001), and may succeed when run again (PostgreSQL docs, 13.5
 * "Serialization Failure Handling"; Appendix A). Writes that share a Sync
 * group share a transaction, so two groups inserting the same keys in
 * opposite orders can deadlock without either request being at fault. */
static bool retry_state(const char *state)
{
    return state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0);
}

/* Send @p again if it may be (a waiter, attempts left): true when queued.
 * Its result is dropped; @reason is the metric's label index. */
static bool resend(db_conn *c, db_pending *p, unsigned reason)
{
    if (p->result)
        PQclear(p->result);
    p->result = NULL;
    if (!p->waiter || p->attempts >= DB_MAX_ATTEMPTS)
        return false;
    cr_metric_inc(&dbm.resent, reason);
    db_queue_push(&c->q, p);
    return true;
}

/* Whether error result @r says the database went away, not that the
 * query was at fault: no SQLSTATE (an error libpq made up: the connection
 * closed), class 08 (connection exception), 57P0x (shutdown, terminated
 * backend), or the connection is bad. */
static bool connection_error(const db_conn *c, const PGresult *r)
{
    const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    return !state || !*state || strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
           PQstatus(c->pg) == CONNECTION_BAD;
}

/* A batch's results are complete: hand each member its rows. When the
 * batch failed, send its members again, each in a Sync group of its own
 * (the one at fault among them must not roll back the others), unless
 * the connection broke under it. A result that does not fit the
 * registration fails the members of a writing batch (it committed:
 * sending them again would write twice) and sends a reading one's again.
 * Then free the batch. */
static void complete_batch(db_conn *c, db_pending *b)
{
    const db_stmt *stmt = b->members->stmt;
    const PGresult *r = b->result;
    bool clean = r && !b->failed && !b->aborted && !b->rolled_back;
    bool ok = clean && db_batch_fits(r, stmt->def.batch_key_column,
                                     stmt->oids[stmt->def.batch_key_param]);
    int fail = 0; /* when not ok: an error for every member, or 0 to send them again */
    unsigned reason = 2;
    if (clean && !ok) {
        /* The registration is wrong (checked when the connection opened,
         * but the schema may have changed since): no more batches. */
        if (db_stmt_refuse_batch(stmt))
            cr_log_error("%s: the batch form of statement %s (%.60s%s) returned no row set, or "
                         "no key column %d of its key parameter's type: %s, and its queries "
                         "are sent one by one from now on",
                         c->set->what, stmt->name, SQL_HEAD(stmt), stmt->def.batch_key_column,
                         b->writes ? "this batch's queries fail" : "this batch's are sent again");
        fail = b->writes ? -EPROTO : 0;
    } else if (b->failed && connection_error(c, r)) {
        fail = -ECONNRESET;
    } else if (!r && !b->aborted && !b->rolled_back) {
        fail = -EIO;
    } else if (b->aborted || b->rolled_back) {
        reason = 0;
    } else if (retry_state(PQresultErrorField(r, PG_DIAG_SQLSTATE))) {
        reason = 1;
    }
    for (db_pending *m = b->members, *next; m; m = next) {
        next = m->next;
        m->next = NULL;
        if (ok) {
            m->error = 0;
            int k = stmt->def.batch_key_param;
            if (m->waiter && !(m->result = db_batch_rows(r, stmt->def.batch_key_column,
                                                         m->values[k], m->lengths[k])))
                m->error = -ENOMEM;
        } else if (fail) {
            m->error = fail;
        } else if (resend(c, m, reason)) {
            /* When the batch itself failed, the one at fault is among
             * them: each alone. Rolled back for another's error, they
             * share the next group, as single queries do. */
            m->alone = b->failed;
            continue;
        } else {
            m->error = -EIO;
        }
        pending_done(c, m);
    }
    b->members = NULL;
    pending_free(c->pool, b);
}

/* A query's results are complete: retry, fail or hand it over. */
static void complete(db_conn *c, db_pending *p)
{
    if (p->members) {
        complete_batch(c, p);
        return;
    }
    if ((p->aborted && !p->result) || p->rolled_back) {
        /* Skipped, or rolled back, because another query of its Sync
         * group failed: it did not take effect; send it again. */
        if (resend(c, p, 0))
            return;
        p->error = -EIO;
    } else if (!p->result) {
        p->error = -EIO;
    } else if (p->failed) {
        const char *state = PQresultErrorField(p->result, PG_DIAG_SQLSTATE);
        if (connection_error(c, p->result)) {
            p->error = -ECONNRESET;
        } else if (retry_state(state) && p->waiter && p->attempts < DB_MAX_ATTEMPTS) {
            /* Its whole group was rolled back; the third send goes alone. */
            resend(c, p, 1);
            return;
        } else {
            p->error = -EREMOTEIO;
        }
    } else {
        p->error = 0;
    }
    pending_done(c, p);
}

/* Read every result that is available. 0, or -EPROTO when they do not
 * match what was sent. */
static int read_results(db_conn *c)
{
    unsigned bound = 4 * (c->q.sent + c->q.syncs) + 8; /* never spin on a broken connection */
    while (db_queue_busy(&c->q) && bound-- && !PQisBusy(c->pg)) {
        PGresult *r = PQgetResult(c->pg);
        db_event ev = classify(r);
        db_pending *done;
        bool ok = db_queue_feed(&c->q, ev, r, &done);
        if (r && (!ok || (ev != DB_EVENT_RESULT && ev != DB_EVENT_ERROR)))
            PQclear(r);
        if (!ok) {
            /* A connection that broke makes libpq invent results: no news. */
            if (PQstatus(c->pg) != CONNECTION_BAD)
                cr_log_error("%s connection %u: unexpected %s result: dropping it",
                             c->set->what, c->index,
                             r ? PQresStatus(PQresultStatus(r)) : "end-of-query");
            return -EPROTO;
        }
        c->progress_at = cr_clock_now_ns();
        while (done) {
            db_pending *next = done->next;
            done->next = NULL;
            complete(c, done);
            done = next;
        }
    }
    return 0;
}

/* Send a Sync: PQsendPipelineSync (libpq 17) leaves the flush to the
 * driver's PQflush; PQpipelineSync (libpq 14-16) tries one itself. */
static int send_sync(db_conn *c)
{
#ifdef LIBPQ_HAS_SEND_PIPELINE_SYNC
    if (!PQsendPipelineSync(c->pg))
        return -EIO;
#else
    if (!PQpipelineSync(c->pg))
        return -EIO;
#endif
    cr_metric_inc(&dbm.round_trips, 0);
    db_queue_mark_sync(&c->q);
    return 0;
}

/* The parameters of a batch, in memory of the driver's (db_pending.owned). */
typedef struct batch_params {
    const char *values[DB_MAX_PARAMS];
    int lengths[DB_MAX_PARAMS];
    int formats[DB_MAX_PARAMS];
    char data[];
} batch_params;

/* Parameter @i of queries @taken[0..@n) into @values and @lengths. */
static void gather(db_pending *const *taken, unsigned n, int i, const char **values,
                   int *lengths)
{
    for (unsigned k = 0; k < n; k++) {
        values[k] = taken[k]->values[i];
        lengths[k] = taken[k]->lengths[i];
    }
}

/* Whether waiting query @p may ride in a batch of @stmt: it asks @stmt,
 * was never sent, and has a key (not SQL NULL). */
static bool eligible(const db_stmt *stmt, const db_pending *p)
{
    return p->stmt == stmt && !p->attempts && p->values[stmt->def.batch_key_param];
}

/* Whether one of @taken[0..@n) has @p's key parameter @k: a batch gives
 * each row to one query, so its keys are distinct. */
static bool key_taken_by(const db_pending *p, int k, db_pending *const *taken, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (taken[i]->lengths[k] == p->lengths[k] &&
            memcmp(taken[i]->values[k], p->values[k], (size_t)p->lengths[k]) == 0)
            return true;
    return false;
}

/* When the first waiting query's statement has a batch form and two or
 * more queries of it wait, never sent, with distinct keys, replace them
 * with one query of the batch form (db.h, "Coalescing"); a query whose
 * key is taken stays queued. Without memory they go one by one. Returns
 * whether the batch must end its Sync group: a writing statement's query
 * left out for its key would otherwise run in the batch's transaction
 * and, a duplicate, roll the whole batch back. */
static bool coalesce(db_conn *c)
{
    db_pending *first = c->q.queued_head;
    if (!c->pool->cfg->coalesce || !first || !first->stmt || !db_stmt_batches(first->stmt))
        return false;
    const db_stmt *stmt = first->stmt;
    db_pending *taken[DB_COALESCE_MAX];
    unsigned n = 0;
    bool key_taken = false;
    for (db_pending *p = first; p; p = p->next) {
        if (!eligible(stmt, p))
            continue;
        if (n < DB_COALESCE_MAX && !key_taken_by(p, stmt->def.batch_key_param, taken, n)) {
            taken[n++] = p;
            continue;
        }
        /* Its key is taken, or the batch is full and its key not looked
         * at: it must not share the batch's transaction. */
        key_taken = true;
        if (n == DB_COALESCE_MAX)
            break;
    }
    if (n < 2 || taken[0] != first)
        return false;
    const char *values[DB_COALESCE_MAX];
    int lengths[DB_COALESCE_MAX];
    size_t sizes[DB_MAX_PARAMS], total = 0;
    for (int i = 0; i < stmt->nparams; i++) {
        gather(taken, n, i, values, lengths);
        sizes[i] = db_encode_array(stmt->oids[i], n, values, lengths, NULL);
        if (sizes[i] > INT_MAX)
            return false;
        total += sizes[i];
    }
    db_pending *b = pending_alloc(c->pool);
    batch_params *bp = b ? malloc(sizeof(*bp) + total) : NULL;
    if (!bp) {
        if (b)
            pending_free(c->pool, b);
        return false;
    }
    char *at = bp->data;
    for (int i = 0; i < stmt->nparams; i++) {
        gather(taken, n, i, values, lengths);
        db_encode_array(stmt->oids[i], n, values, lengths, at);
        bp->values[i] = at;
        bp->lengths[i] = (int)sizes[i];
        bp->formats[i] = 1;
        at += sizes[i];
    }
    b->stmt = stmt->batch;
    b->name = stmt->batch->name;
    b->nparams = stmt->nparams;
    b->values = bp->values;
    b->lengths = bp->lengths;
    b->formats = bp->formats;
    b->result_format = 1;
    b->writes = stmt->def.writes;
    b->owned = bp;
    db_queue_coalesce(&c->q, b, taken, n);
    cr_metric_inc(&dbm.batches, 0);
    cr_metric_add(&dbm.coalesced, 0, n);
    return key_taken && stmt->def.writes;
}

/* Send what is queued, while fewer than DB_MAX_SYNCS Sync groups are in
 * flight: the queued queries in one group, under one Sync, except a query
 * sent twice before, which gets a group of its own; the queries of a
 * statement with a batch form coalesced first (a writing batch that left
 * a query out for its key ends its group). 0 or -EIO. */
static int send_queued(db_conn *c)
{
    bool unsynced = false;
    if (c->q.queued && !db_queue_busy(&c->q))
        c->progress_at = cr_clock_now_ns();
    for (unsigned n = 0; n < DB_MAX_BATCH && c->q.queued; n++) {
        bool alone = db_queue_next_alone(&c->q);
        if (alone && unsynced) {
            if (send_sync(c) < 0)
                return -EIO;
            unsynced = false;
        }
        if (!unsynced && c->q.syncs >= DB_MAX_SYNCS)
            break;
        bool end_group = coalesce(c);
        db_pending *p = db_queue_send_next(&c->q);
        if (!PQsendQueryPrepared(c->pg, p->name, p->nparams, p->values, p->lengths, p->formats,
                                 p->result_format))
            return -EIO;
        unsynced = true;
        if (alone || end_group) {
            if (send_sync(c) < 0)
                return -EIO;
            unsynced = false;
        }
    }
    if (unsynced && send_sync(c) < 0)
        return -EIO;
    return 0;
}

/* Serve queries on an open connection until it breaks (-errno) or the
 * driver is cancelled (-ECANCELED). */
static int conn_serve(db_conn *c)
{
    const db_config *cfg = c->pool->cfg;
    for (;;) {
        if (send_queued(c) < 0)
            return -EIO;
        int f = PQflush(c->pg);
        if (f < 0)
            return -EIO;
        bool busy = db_queue_busy(&c->q);
        if (busy && c->q.queued && c->q.syncs < DB_MAX_SYNCS)
            continue; /* batch limit reached: keep sending */
        /* Sending can read: when the socket's send buffer is full libpq
         * reads the input into its own buffer (pqSendSome), and the socket
         * is then no longer readable. Parse what libpq holds first. */
        if (busy && !PQisBusy(c->pg)) {
            int err = read_results(c);
            if (err < 0)
                return err;
            continue;
        }
        /* No result for the query timeout while some are awaited, however
         * often new queries woke the driver: the connection is stalled. */
        uint64_t now = cr_clock_now_ns(), wait = 0;
        bool late = false;
        if (busy && cfg->query_timeout_ns) { /* 0: no timeout, wait for the socket */
            uint64_t deadline = c->progress_at + cfg->query_timeout_ns;
            late = deadline <= now;
            /* Past it: one last look at the socket, not woken by queries. */
            wait = late ? CR_NS_PER_MS : deadline - now;
        }
        c->idle = !busy;
        c->parked = busy && !late && c->q.syncs < DB_MAX_SYNCS;
        net_task_set_idle(c->idle);
        int ev = net_park(PQsocket(c->pg), POLLIN | (f ? POLLOUT : 0), wait);
        c->idle = c->parked = false;
        net_task_set_idle(false);
        if (ev == 0)
            continue; /* woken: a query was queued */
        if (ev == -ECANCELED)
            return -ECANCELED;
        if (ev == -ETIMEDOUT) {
            if (!c->lost_logged)
                cr_log_warn("%s connection %u: no answer within the query timeout "
                            "(queued %u, sent %u, syncs %u, closing %u, libpq busy %d)",
                            c->set->what, c->index, c->q.queued, c->q.sent, c->q.syncs,
                            c->q.closing, PQisBusy(c->pg));
            return -ETIMEDOUT;
        }
        if (ev < 0)
            return ev;
        if (ev & (POLLIN | POLLERR | POLLHUP)) {
            bool alive = PQconsumeInput(c->pg) == 1;
            int err = read_results(c); /* even when it broke: results read before stand */
            if (err < 0)
                return err;
            if (!alive || PQstatus(c->pg) == CONNECTION_BAD)
                return -ECONNRESET;
        }
    }
}

static void driver_main(void *arg)
{
    db_conn *c = arg;
    const db_config *cfg = c->pool->cfg;
    /* Requests still in flight at shutdown need their connection: the
     * driver ends only after them. */
    net_task_set_service(true);
    c->driver = net_task_current();
    uint64_t backoff = 0;
    for (;;) {
        if (!c->pg) {
            net_task_set_idle(true);
            if (backoff && net_park(-1, 0, backoff) == -ECANCELED)
                break;
            int err = conn_open(c, false);
            if (err == -ECANCELED)
                break;
            if (err < 0) {
                c->lost_logged = true; /* log the outage once, and its end */
                backoff = backoff ? backoff * 2 : cfg->backoff_min_ns;
                if (backoff > cfg->backoff_max_ns)
                    backoff = cfg->backoff_max_ns;
                continue;
            }
            conn_up(c);
        }
        uint64_t since = cr_clock_now_ns();
        int err = conn_serve(c);
        conn_down(c, err);
        if (err == -ECANCELED)
            break;
        /* Reconnect at once after a long healthy run; keep backing off
         * when connections keep breaking right after they open. */
        if (cr_clock_now_ns() - since > cfg->backoff_max_ns)
            backoff = 0;
        else
            backoff = backoff ? backoff : cfg->backoff_min_ns;
    }
    conn_down(c, -ECANCELED);
    c->driver = NULL;
}

/* --- the pool ---------------------------------------------------------------- */

static void set_free(db_set *set)
{
    free(set->keywords);
    free(set->values);
    free(set->targets);
    if (set->parsed)
        PQconninfoFree(set->parsed);
}

int db_thread_init(const db_config *cfg)
{
    if (!cfg || !cfg->conninfo || !cfg->connections || net_thread_index() < 0)
        return -EINVAL;
    db_statements_close();
    db_pool *pool = calloc(1, sizeof(*pool));
    if (!pool)
        return -ENOMEM;
    pool->cfg = cfg;
    db_statements(&pool->nstatements);
    pool->result_bytes = calloc(pool->nstatements ? pool->nstatements : 1, sizeof(uint32_t));
    pool->nsets = cfg->read_conninfo && *cfg->read_conninfo ? 2 : 1;
    pool->conns = calloc((size_t)cfg->connections * pool->nsets, sizeof(db_conn));
    if (!pool->conns) {
        free(pool->result_bytes);
        free(pool);
        return -ENOMEM;
    }
    for (unsigned k = 0; k < pool->nsets; k++) {
        db_set *set = &pool->sets[k];
        set->replica = k == 1;
        set->conninfo = k ? cfg->read_conninfo : cfg->conninfo;
        set->what = k ? "database replica" : "database";
        set->conns = pool->conns + (size_t)k * cfg->connections;
        if (plan_hosts(set) < 0) {
            set_free(&pool->sets[0]);
            free(pool->conns);
            free(pool->result_bytes);
            free(pool);
            return -ENOMEM;
        }
    }
    tl_pool = pool;
    publish(pool, true);
    for (unsigned k = 0; k < pool->nsets; k++) {
        db_set *set = &pool->sets[k];
        publish_replica(set);
        for (unsigned i = 0; i < cfg->connections; i++) {
            db_conn *c = &set->conns[i];
            c->pool = pool;
            c->set = set;
            c->index = (unsigned)net_thread_index() * cfg->connections + i;
            if (set->targets && !(c->resolving = calloc(set->ntargets, sizeof(*c->resolving))))
                return -ENOMEM;
            /* Start-up may block: have the connections ready before serving. */
            if (conn_open(c, true) == 0)
                conn_up(c);
            else
                c->lost_logged = true;
            int err = net_spawn_service(driver_main, c);
            if (err < 0) {
                cr_log_error("database: cannot start a connection driver: %s", cr_strerror(err));
                return err;
            }
        }
    }
    return 0;
}

void db_thread_fini(void)
{
    db_pool *pool = tl_pool;
    if (!pool)
        return;
    for (unsigned i = 0; i < pool->cfg->connections * pool->nsets; i++) {
        db_conn *c = &pool->conns[i];
        if (c->driver)
            continue; /* still running (the loop failed): leave it be */
        if (c->pg)
            PQfinish(c->pg);
        for (size_t k = 0; c->resolving && k < c->set->ntargets; k++)
            db_resolve_release(c->resolving[k]);
        free(c->resolving);
    }
    while (pool->free_list) {
        db_pending *p = pool->free_list;
        pool->free_list = p->next;
        free(p);
    }
    for (unsigned k = 0; k < pool->nsets; k++)
        set_free(&pool->sets[k]);
    free(pool->conns);
    free(pool->result_bytes);
    publish(pool, false);
    free(pool);
    tl_pool = NULL;
}

bool db_available(void)
{
    return tl_pool && PRIMARY(tl_pool)->up > 0;
}

/* The first connection error of @set's connections, or a stock phrase. */
static const char *set_error(const db_set *set, unsigned connections)
{
    for (unsigned i = 0; i < connections; i++)
        if (set->conns[i].error[0])
            return set->conns[i].error;
    return "no connection up";
}

bool db_reading_replica(char *why, size_t len)
{
    db_pool *pool = tl_pool;
    if (len)
        *why = '\0';
    if (!pool || pool->nsets < 2) {
        snprintf(why, len, "no DATABASE_READ_URL");
        return false;
    }
    if (pool->sets[1].up > 0)
        return true;
    snprintf(why, len, "replica unreachable: %s",
             set_error(&pool->sets[1], pool->cfg->connections));
    return false;
}

bool db_ready(char *why, size_t len)
{
    db_pool *pool = tl_pool;
    if (len)
        *why = '\0';
    if (!pool) {
        snprintf(why, len, "no database pool on this thread");
        return false;
    }
    if (PRIMARY(pool)->up == 0) {
        /* This thread's own connections say why. */
        snprintf(why, len, "unreachable: %s", set_error(PRIMARY(pool), pool->cfg->connections));
        return false;
    }
    unsigned threads = net_thread_count(), down = 0;
    for (unsigned i = 0; i < threads && i < DB_PUBLISHED_THREADS; i++)
        if (!atomic_load_explicit(&published[i].open, memory_order_relaxed) ||
            atomic_load_explicit(&published[i].up, memory_order_relaxed) == 0)
            down++;
    if (down) {
        snprintf(why, len, "unreachable from %u of %u worker threads (reconnecting)", down,
                 threads);
        return false;
    }
    return true;
}
static int query(db_pool *pool, db_set *set, net_task *self, const db_pending *ask,
                 db_result *out, uint64_t timeout_ns);

/* The weight DB_ROUTING_FILL gives a query of @stmt: its recent results'
 * size in DB_FILL_UNIT_BYTES (0: a lookup's). */
static unsigned result_weight(const db_pool *pool, const db_stmt *stmt)
{
    if (!pool->result_bytes || stmt->index >= pool->nstatements)
        return 0;
    return pool->result_bytes[stmt->index] / DB_FILL_UNIT_BYTES;
}

/* Fold a result of @stmt into its moving average (weight 1/8): the bytes
 * of its values (PQgetlength), not of the PGresult, whose first block
 * (~3 KB) a one-row lookup fills no more than a 50-row list; a result
 * counts at most 1 MiB. */
static void learn_result_size(db_pool *pool, const db_stmt *stmt, const db_result *res)
{
    if (!pool->result_bytes || stmt->index >= pool->nstatements || !res->pg)
        return;
    size_t size = 0;
    int rows = PQntuples(res->pg), cols = PQnfields(res->pg);
    for (int r = 0; r < rows && size < (1u << 20); r++)
        for (int f = 0; f < cols; f++)
            size += (size_t)PQgetlength(res->pg, r, f);
    uint32_t now = size > (1u << 20) ? 1u << 20 : (uint32_t)size;
    uint32_t *avg = &pool->result_bytes[stmt->index];
    *avg = *avg - *avg / 8 + now / 8;
}

int db_run(const db_stmt *stmt, const db_param *params, size_t count, db_result *out)
{
    out->pg = NULL;
    db_pool *pool = tl_pool;
    net_task *self = net_task_current();
    if (!pool || !self)
        return -EPERM;
    if (!stmt || count != (size_t)stmt->nparams || (count && !params))
        return -EINVAL;
    /* The encoded values live in this frame, which outlives the query's
     * sends: a query is (re-)sent only while its waiter waits here. */
    char bytes[DB_MAX_PARAMS][8];
    const char *values[DB_MAX_PARAMS];
    int lengths[DB_MAX_PARAMS], formats[DB_MAX_PARAMS];
    for (size_t i = 0; i < count; i++) {
        int err = db_encode_param(&params[i], stmt->def.types[i], bytes[i], &values[i],
                                  &lengths[i]);
        if (err < 0)
            return err;
        formats[i] = 1;
    }
    db_pending ask = {.stmt = stmt, .name = stmt->name, .nparams = (int)count, .values = values,
                      .lengths = lengths, .formats = formats, .result_format = 1,
                      .writes = stmt->def.writes, .weight = result_weight(pool, stmt)};
    uint64_t start = cr_clock_now_ns();
    cr_metric_inc(&dbm.queries, 0);
    /* Routing: a replica_ok statement goes to the replica while one of its
     * connections is up, else to the primary at once. The replica gets
     * half of the query's time: a replica connection that breaks under it
     * (-ECONNRESET, or none up any more), a replica that stays silent or
     * stalls (a hot standby holding a query while it replays a lock:
     * -ETIMEDOUT), or one that cancels it for a conflict with recovery
     * (SQLSTATE 40001) has it asked again, once, of the primary, with the
     * other half. Everything else goes to the primary, with all of it. */
    db_set *set = PRIMARY(pool);
    const db_statement *s = &stmt->def;
    if (s->replica_ok && !s->writes && pool->nsets > 1 && pool->sets[1].up > 0)
        set = &pool->sets[1];
    uint64_t budget = pool->cfg->query_timeout_ns;
    int err = query(pool, set, self, &ask, out, set->replica ? budget / 2 : budget);
    if (set->replica &&
        (err == -ECONNRESET || err == -ENOTCONN || err == -ETIMEDOUT ||
         (err == -EREMOTEIO && strcmp(db_result_sqlstate(out), "40001") == 0))) {
        db_result_clear(out);
        set = PRIMARY(pool);
        err = query(pool, set, self, &ask, out, budget - budget / 2);
    }
    if (err == 0 && pool->cfg->routing == DB_ROUTING_FILL)
        learn_result_size(pool, stmt, out); /* only fill reads the weights */
    if (!s->writes)
        cr_metric_inc(&dbm.reads, set->replica ? 0 : 1);
    cr_metric_observe(&dbm.duration, 0, cr_clock_now_ns() - start);
    if (err < 0)
        cr_metric_inc(&dbm.errors, error_kind(err));
    return err;
}

/* db_run on @set's connections, once its parameters are encoded; the
 * result within @timeout_ns or -ETIMEDOUT. */
static int query(db_pool *pool, db_set *set, net_task *self, const db_pending *ask,
                 db_result *out, uint64_t timeout_ns)
{
    const db_config *cfg = pool->cfg;
    db_conn *c = NULL;
    for (unsigned i = 0; i < cfg->connections; i++) {
        db_conn *k = &set->conns[i];
        if (k->up && (!c || db_queue_prefer(&k->q, &c->q, cfg->routing, DB_MAX_SYNCS)))
            c = k;
    }
    if (!c)
        return -ENOTCONN;
    db_pending *p = pending_alloc(pool);
    if (!p)
        return -ENOMEM;
    cr_metric_inc(&dbm.waiting, 0);
    p->stmt = ask->stmt;
    p->name = ask->name;
    p->nparams = ask->nparams;
    p->values = ask->values;
    p->lengths = ask->lengths;
    p->formats = ask->formats;
    p->result_format = ask->result_format;
    p->writes = ask->writes;
    p->weight = ask->weight;
    p->waiter = self;
    db_queue_push(&c->q, p);
    if (c->idle || c->parked) {
        /* Idle, or waiting for results with room for another Sync group:
         * it sends this (and what else this turn queues) at the next turn. */
        c->idle = c->parked = false;
        net_unpark(c->driver);
    }
    int res = net_park(-1, 0, timeout_ns);
    cr_metric_add(&dbm.waiting, 0, (uint64_t)-1);
    if (p->state != DB_PENDING_DONE) {
        /* Timed out or cancelled: unhook from the connection. A query
         * still queued is dropped; one in flight is left to the driver,
         * which frees it when its result arrives. */
        if (p->state == DB_PENDING_QUEUED && db_queue_unqueue(&c->q, p))
            pending_free(pool, p);
        else
            p->waiter = NULL;
        return res == -ECANCELED ? -ECANCELED : -ETIMEDOUT;
    }
    int err = p->error;
    out->pg = p->result;
    p->result = NULL;
    pending_free(pool, p);
    return err;
}
