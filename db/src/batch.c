/*
 * A batch's rows for each of its queries: see batch.h.
 */
#include "batch.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

bool db_batch_fits(const PGresult *r, int key_col, unsigned key_oid, int members)
{
    return PQresultStatus(r) == PGRES_TUPLES_OK && key_col >= 0 && key_col < PQnfields(r) &&
           PQftype(r, key_col) == key_oid && (members < 0 || PQntuples(r) == members);
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

/* Row @row of @r copied as row @n of @own. False without memory. */
static bool copy_row(PGresult *own, int n, const PGresult *r, int row)
{
    for (int col = 0, cols = PQnfields(r); col < cols; col++) {
        bool null = PQgetisnull(r, row, col);
        if (!PQsetvalue(own, n, col, null ? NULL : PQgetvalue(r, row, col),
                        null ? -1 : PQgetlength(r, row, col)))
            return false;
    }
    return true;
}

PGresult *db_batch_rows(const PGresult *r, int key_col, const char *key, int key_len)
{
    PGresult *own = PQcopyResult(r, PG_COPYRES_ATTRS);
    if (!own)
        return NULL;
    for (int row = 0, rows = PQntuples(r), n = 0; row < rows; row++) {
        if (!key_equal(r, row, key_col, key, key_len))
            continue;
        if (!copy_row(own, n++, r, row)) {
            PQclear(own);
            return NULL;
        }
    }
    return own;
}

PGresult *db_batch_row(const PGresult *r, int row)
{
    PGresult *own = PQcopyResult(r, PG_COPYRES_ATTRS);
    if (own && !copy_row(own, 0, r, row)) {
        PQclear(own);
        return NULL;
    }
    return own;
}
