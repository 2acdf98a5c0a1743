/*
 * Internal to db/: readiness as the other threads see it. db_ready()
 * (coring/db/db.h) on any worker thread answers for the whole process, so
 * each worker publishes whether its pool is open and how many of its
 * primary connections are up; the replica's state goes to the
 * db_replica_up gauge. Written rarely (a pool opens or closes, a
 * connection comes up or drops), never by a request.
 */
#ifndef CORING_DB_READY_H
#define CORING_DB_READY_H

#include "conn.h"

#include <stdbool.h>

/* db_ready_publish - publish the calling worker thread's pool: @open
 * (it exists) and @up (its primary connections that take queries).
 * Owner thread; a thread past the first 1024 is not published. */
void db_ready_publish(bool open, unsigned up);

/* db_ready_publish_set - a connection of @set came up or dropped (or the
 * pool opened): publish the primary's count of connections up, or set the
 * db_replica_up gauge to whether the replica has one. Owner thread. */
void db_ready_publish_set(const db_set *set);

/* db_ready_threads_down - of worker threads 0..@threads-1, those whose
 * pool is not open or has no primary connection up. Any thread; relaxed
 * loads, so a change may be seen a moment late. */
unsigned db_ready_threads_down(unsigned threads);

#endif
