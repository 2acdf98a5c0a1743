/*
 * A batch's rows for each of its queries: see batch.h.
 */
#include "batch.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

bool db_batch_fits(const PGresult *r, int key_col, unsigned key_oid)
{
    return PQresultStatus(r) == PGRES_TUPLES_OK && key_col >= 0 && key_col < PQnfields(r) &&
           PQftype(r, key_col) == key_oid;
}

bool db_batch_form_fits(const PGresult *single, const PGresult *batch, int key_col,
                        unsigned key_oid, char *why, size_t why_size)
{
    if (PQresultStatus(single) != PGRES_COMMAND_OK || PQresultStatus(batch) != PGRES_COMMAND_OK) {
        snprintf(why, why_size, "no description");
        return false;
    }
    int n = PQnfields(batch);
    if (n == 0) {
        snprintf(why, why_size, "the batch form returns no rows");
        return false;
    }
    if (n != PQnfields(single)) {
        snprintf(why, why_size, "%d columns against the statement's %d", n, PQnfields(single));
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (strcmp(PQfname(batch, i), PQfname(single, i)) != 0 ||
            PQftype(batch, i) != PQftype(single, i)) {
            snprintf(why, why_size, "column %d is %.64s (type %u), the statement's %.64s (type %u)",
                     i, PQfname(batch, i), PQftype(batch, i), PQfname(single, i),
                     PQftype(single, i));
            return false;
        }
    }
    if (key_col < 0 || key_col >= n || PQftype(batch, key_col) != key_oid) {
        snprintf(why, why_size, "key column %d is not of the key parameter's type %u", key_col,
                 key_oid);
        return false;
    }
    return true;
}

/* Whether the binary value at @row, @col of @r is the @len bytes at @key. */
static bool key_equal(const PGresult *r, int row, int col, const char *key, int len)
{
    return key && !PQgetisnull(r, row, col) && PQgetlength(r, row, col) == len &&
           memcmp(PQgetvalue(r, row, col), key, (size_t)len) == 0;
}

PGresult *db_batch_rows(const PGresult *r, int key_col, const char *key, int key_len)
{
    PGresult *own = PQcopyResult(r, PG_COPYRES_ATTRS);
    if (!own)
        return NULL;
    int rows = PQntuples(r), cols = PQnfields(r), n = 0;
    for (int row = 0; row < rows; row++) {
        if (!key_equal(r, row, key_col, key, key_len))
            continue;
        for (int col = 0; col < cols; col++) {
            bool null = PQgetisnull(r, row, col);
            if (!PQsetvalue(own, n, col, null ? NULL : PQgetvalue(r, row, col),
                            null ? -1 : PQgetlength(r, row, col))) {
                PQclear(own);
                return NULL;
            }
        }
        n++;
    }
    return own;
}
