/*
 * Internal to db/: handing a batch's rows to the queries it stands for
 * (coring/db/db.h, "Coalescing"): a reading batch's by their key, a
 * writing batch's by their position. Kept apart from the driver so that
 * it can be unit-tested with results made by hand
 * (tests/unit/db/test_batch.c).
 */
#ifndef CORING_DB_BATCH_H
#define CORING_DB_BATCH_H

#include <stdbool.h>
#include <stddef.h>

struct pg_result;

/*
 * db_batch_fits - whether batch result @r fits its statement's
 * registration: a row set (PGRES_TUPLES_OK) with a column @key_col whose
 * type (PQftype) is @key_oid, the key parameter's; and, for a writing
 * batch (@members >= 0, its members' count), exactly one row per member
 * (db_batch_row). A reading batch passes -1: its members may get any
 * number of rows.
 */
bool db_batch_fits(const struct pg_result *r, int key_col, unsigned key_oid, int members);

/*
 * db_batch_form_fits - whether a statement's batch form, as the server
 * describes it, stands in for the statement: @single and @batch are the
 * two prepared statements' descriptions (PQdescribePrepared, status
 * PGRES_COMMAND_OK); the batch form returns rows (at least one column),
 * the same columns as @single, in the same order, by name and type
 * (a handler reads a member's result as it would read the statement's own),
 * and its column @key_col has type @key_oid, the key parameter's. When it
 * does not, @why (of @why_size bytes) says where they differ. Source:
 * libpq docs, "PQdescribePrepared", "PQfname", "PQftype".
 */
bool db_batch_form_fits(const struct pg_result *single, const struct pg_result *batch, int key_col,
                        unsigned key_oid, char *why, size_t why_size);

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

/*
 * db_batch_row - a result of one query's own, made from writing batch
 * result @r (which db_batch_fits with its members' count): its columns
 * and its row @row, the row the batch inserted for its member @row (0 the
 * first, in the order of the arrays). Writes are matched by position, not
 * by key: what a write returns is the row as stored, which a trigger or a
 * normalisation may have changed (the key included), while INSERT ...
 * SELECT ... FROM unnest(...) inserts the arrays' elements in their order
 * and returns each row as it inserts it. The caller owns it (PQclear).
 * Returns NULL without memory.
 */
struct pg_result *db_batch_row(const struct pg_result *r, int row);

#endif
