/*
 * Internal to db/: handing a batch's rows to the queries it stands for
 * (coring/db/db.h, "Coalescing"), kept apart from the driver so that it
 * can be unit-tested with results made by hand (tests/unit/db/test_batch.c).
 */
#ifndef CORING_DB_BATCH_H
#define CORING_DB_BATCH_H

#include <stdbool.h>

struct pg_result;

/*
 * db_batch_fits - whether batch result @r fits its statement's
 * registration: a row set (PGRES_TUPLES_OK) with a column @key_col whose
 * type (PQftype) is @key_oid, the key parameter's.
 */
bool db_batch_fits(const struct pg_result *r, int key_col, unsigned key_oid);

/*
 * db_batch_rows - a result of one query's own, made from batch result @r
 * (which db_batch_fits): its columns (PQcopyResult with
 * PG_COPYRES_ATTRS), and those of its rows, in their order, whose column
 * @key_col holds exactly the @key_len bytes at @key (binary format; a
 * NULL value never matches), none included. The caller owns it (PQclear).
 * Returns NULL without memory. Source: libpq docs, "PQcopyResult" and
 * "PQsetvalue".
 */
struct pg_result *db_batch_rows(const struct pg_result *r, int key_col, const char *key,
                                int key_len);

#endif
