/*
 * Host names resolved off the ring. libpq resolves a `host=` name with a
 * blocking getaddrinfo(3) inside PQconnectStart/PQconnectPoll: during a
 * DNS outage every reconnect attempt froze the worker thread for the
 * resolver's whole timeout. So the pool resolves names itself, here, on a
 * helper thread (offload.h), and hands libpq `hostaddr=` beside `host=`
 * (libpq docs, "Parameter Key Words", hostaddr: "... a connection attempt
 * that never blocks"). The waiting coroutine polls an eventfd through the
 * ring.
 *
 * A request is shared by its helper thread and its owner (a connection):
 * whichever lets go last frees it, so an owner may give up waiting (the
 * connect deadline) while the helper still sits in getaddrinfo.
 */
#ifndef CORING_DB_RESOLVE_H
#define CORING_DB_RESOLVE_H

#include <netinet/in.h>
#include <stdbool.h>

#define DB_RESOLVE_MAX_ADDRS 8

/* A name's resolution: a call on a helper thread (offload.h). */
typedef struct db_offload db_resolve;

/* db_resolve_start - resolve @name (TCP, IPv4 and IPv6) on a new detached
 * thread. Returns the request, or NULL without memory or threads. */
db_resolve *db_resolve_start(const char *name);

/* db_resolve_fd - an eventfd that turns readable once @r is done (poll it
 * for POLLIN). Owned by @r. */
int db_resolve_fd(const db_resolve *r);

/* db_resolve_done - whether @r has finished. */
bool db_resolve_done(const db_resolve *r);

/* db_resolve_result - once done: the numeric addresses found (up to
 * DB_RESOLVE_MAX_ADDRS, NUL-terminated strings owned by @r) in *@addrs,
 * their count returned; 0 when none, with getaddrinfo's message in
 * *@error. */
int db_resolve_result(const db_resolve *r, const char (**addrs)[INET6_ADDRSTRLEN],
                      const char **error);

/* db_resolve_release - the owner lets go of @r (done or not). */
void db_resolve_release(db_resolve *r);

#endif
