/*
 * Internal to db/: a blocking call run on a helper thread, so that it
 * never blocks a worker's ring: getaddrinfo(3) for a host name
 * (resolve.h), PQcancel for a query to cancel (cancel.h). The call's end
 * is signalled on an eventfd that the waiting coroutine polls through the
 * ring (net_park), without a lock on the worker's side.
 *
 * A call is shared by its helper thread and its owner: whichever lets go
 * last frees it, and its argument with it, so an owner may give up
 * waiting (a deadline, shutdown) while the helper still sits in the call.
 */
#ifndef CORING_DB_OFFLOAD_H
#define CORING_DB_OFFLOAD_H

#include <stdbool.h>

typedef struct db_offload db_offload;

/*
 * db_offload_start - run @fn(@arg) on a new detached thread (256 KiB of
 * stack, every signal blocked: they belong to the main thread). @arg is
 * the call's: what @fn writes into it is the owner's to read once
 * db_offload_done says so; @release(@arg) frees it when both let go
 * (NULL: nothing to free). Returns the call, or NULL without memory or
 * threads (then @arg was not taken: the caller still owns it).
 */
db_offload *db_offload_start(void (*fn)(void *arg), void *arg, void (*release)(void *arg));

/* db_offload_fd - an eventfd that turns readable once @o is done (poll it
 * for POLLIN). Owned by @o. */
int db_offload_fd(const db_offload *o);

/* db_offload_done - whether @o's call has returned (its writes to its
 * argument are then visible: an acquire load). */
bool db_offload_done(const db_offload *o);

/* db_offload_arg - the argument @o was started with. */
void *db_offload_arg(const db_offload *o);

/* db_offload_release - the owner lets go of @o (done or not); NULL is a
 * no-op. */
void db_offload_release(db_offload *o);

#endif
