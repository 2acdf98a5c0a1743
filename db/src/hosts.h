/*
 * Internal to db/: host planning. libpq resolves a `host=` name itself,
 * with a blocking getaddrinfo(3) (resolve.h says why the pool does not let
 * it); so a conninfo that names hosts to resolve is split here, once per
 * pool, into its other options and its host list, and each connection
 * attempt gives libpq one host with one of its addresses as `hostaddr=`
 * (connect.c). Uses libpq's own conninfo parser (PQconninfoParse), no
 * server: unit-tested alone (tests/unit/db/test_hosts.c).
 */
#ifndef CORING_DB_HOSTS_H
#define CORING_DB_HOSTS_H

#include <stdbool.h>
#include <stddef.h>

struct _PQconninfoOption;

/* One entry of the conninfo's host list. */
typedef struct db_target {
    char host[256];
    char port[16]; /* "": libpq's default */
    bool resolve;  /* a name (not a socket path or numeric address) */
} db_target;

/* A conninfo's plan: when it names a host to resolve, the other options
 * (keywords/values, with 3 free slots before the NULL for host, hostaddr
 * and port: db_hosts_params) and the host list. targets NULL: libpq gets
 * the conninfo as it is. */
typedef struct db_hosts {
    struct _PQconninfoOption *parsed; /* owns the option strings */
    const char **keywords, **values;
    size_t nopts; /* options before the 3 free slots */
    db_target *targets;
    size_t ntargets;
} db_hosts;

/*
 * db_hosts_plan - split @conninfo (a libpq keyword/value string or URI)
 * into @h: its hosts (`host`, else $PGHOST, as libpq falls back) with
 * their ports (one for all, or one each), each marked to resolve unless
 * a socket path ("/..." or "@..."), a numeric IPv4 or IPv6 address. Sets
 * h->targets NULL, nothing to free, when there is nothing to resolve: no
 * host is a name, `hostaddr` is given, the ports do not pair with the
 * hosts (libpq will refuse it), or libpq cannot parse @conninfo (it says
 * why on connect). Returns 0 or -ENOMEM. Any thread. Source: libpq docs,
 * "Connection Strings", "Parameter Key Words" (host, hostaddr, port).
 */
int db_hosts_plan(db_hosts *h, const char *conninfo);

/* db_hosts_params - fill the 3 free slots of @h's keywords/values for an
 * attempt at target @target (< h->ntargets) at address @hostaddr ("" for
 * none: libpq then uses the host as it is); h->keywords and h->values are
 * then PQconnectStartParams's arguments, valid until the next call. */
void db_hosts_params(db_hosts *h, size_t target, const char *hostaddr);

/* Free what db_hosts_plan allocated; @h is then empty. */
void db_hosts_free(db_hosts *h);

#endif
