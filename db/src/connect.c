/*
 * Opening a connection without blocking the thread: the host named by the
 * conninfo resolved off the ring (resolve.h, hosts.h), libpq's connection
 * polled through the ring (PQconnectPoll), non-blocking pipeline mode
 * entered, and every registered statement prepared, each batch form
 * described and checked against its statement (batch.h). See connect.h.
 */
#include "connect.h"

#include "batch.h"
#include "coring/core/clock.h"
#include "coring/core/error.h"
#include "coring/core/log.h"
#include "statement.h"

#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

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
                     c->set->what, s->name, DB_SQL_HEAD(s), why);
    return true;
}

/* The statement_timeout and lock_timeout of @c's sessions, ms (0: none):
 * just under the time a query's waiter waits (db_run: the query timeout,
 * half of it on a replica), so that the server ends a slow statement,
 * and its lock waits, before the waiter gives up: the statement fails
 * alone, known not to have taken effect, and the connection stays up. */
static uint64_t server_timeout_ms(const db_conn *c)
{
    uint64_t budget = c->cfg->query_timeout_ns;
    if (c->set->replica)
        budget /= 2;
    uint64_t ms = budget / 10 * 9 / CR_NS_PER_MS;
    return budget && !ms ? 1 : ms;
}

#define SET_TIMEOUTS_SQL                                                                           \
    "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $1, false)"

/* Read the results of the timeouts' setting (@settings: it was sent), the
 * prepares, then of the descriptions of each statement with a batch form
 * and of that form (checked against each other), and their Sync. 0 or
 * -errno. */
static int read_prepares(db_conn *c, PGconn *pg, bool settings, uint64_t deadline, bool blocking)
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
            if (st == PGRES_TUPLES_OK && settings) {
                settings = false;
            } else if (st == PGRES_COMMAND_OK && ok < prepares) {
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
    if (ok != prepares || unpaired || settings) {
        cr_log_error("%s: %zu of %zu statements prepared%s%s", c->set->what, ok, prepares,
                     unpaired ? ", a description without its batch form's" : "",
                     settings ? ", statement_timeout not set" : "");
        return -EIO;
    }
    return 0;
}

void db_conn_note_error(db_conn *c, PGconn *pg, int err)
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
    /* The session's timeouts first: committed with the prepares. */
    char ms[24];
    snprintf(ms, sizeof(ms), "%llu", (unsigned long long)server_timeout_ms(c));
    const char *const timeouts[1] = {ms};
    bool settings = server_timeout_ms(c) > 0;
    if (settings && !PQsendQueryParams(pg, SET_TIMEOUTS_SQL, 1, NULL, timeouts, NULL, NULL, 0)) {
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
    err = read_prepares(c, pg, settings, deadline, blocking);
    if (err < 0)
        goto fail;
    c->pg = pg;
    return 0;

fail:
    db_conn_note_error(c, pg, err);
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
    const char *host = c->set->hosts.targets[target].host;
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

/* Host by host, address by address, as libpq would: see connect.h. */
int db_conn_open(db_conn *c, bool blocking)
{
    db_hosts *hosts = &c->set->hosts;
    uint64_t timeout = c->cfg->connect_timeout_ns;
    uint64_t deadline = cr_clock_now_ns() + timeout;
    int err = -EHOSTUNREACH;
    snprintf(c->error, sizeof(c->error), "no host to connect to");
    if (!hosts->targets) {
        err = open_started(c, PQconnectStart(c->set->conninfo), deadline, blocking);
    } else {
        for (size_t i = 0; i < hosts->ntargets && err != 0 && err != -ECANCELED; i++) {
            const db_target *t = &hosts->targets[i];
            int addrs = 1;
            if (t->resolve &&
                (addrs = resolve_host(c, i, cr_clock_now_ns() + timeout, blocking)) < 0) {
                err = addrs;
                continue;
            }
            for (int k = 0; k < addrs && err != 0 && err != -ECANCELED; k++) {
                deadline = cr_clock_now_ns() + timeout;
                db_hosts_params(hosts, i, t->resolve ? c->addrs[k] : "");
                err = open_started(c, PQconnectStartParams(hosts->keywords, hosts->values, 0),
                                   deadline, blocking);
            }
        }
    }
    if (err < 0 && !c->lost_logged && err != -ECANCELED)
        cr_log_warn("%s connection %u: cannot connect: %s", c->set->what, c->index, c->error);
    return err;
}
