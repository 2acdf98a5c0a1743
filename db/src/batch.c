/*
 * A batch's rows for each of its queries: see batch.h.
 */
#include "batch.h"

#include <libpq-fe.h>
#include <string.h>

bool db_batch_fits(const PGresult *r, int key_col, unsigned key_oid)
{
    return PQresultStatus(r) == PGRES_TUPLES_OK && key_col >= 0 && key_col < PQnfields(r) &&
           PQftype(r, key_col) == key_oid;
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
