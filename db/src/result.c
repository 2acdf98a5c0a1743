/*
 * Typed access to a query's result (text format): see coring/db/db.h.
 */
#include "coring/db/db.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdlib.h>

int db_result_rows(const db_result *r)
{
    return r->pg ? PQntuples(r->pg) : 0;
}

int db_result_columns(const db_result *r)
{
    return r->pg ? PQnfields(r->pg) : 0;
}

static bool in_range(const db_result *r, int row, int col)
{
    return r->pg && row >= 0 && col >= 0 && row < PQntuples(r->pg) && col < PQnfields(r->pg);
}

bool db_result_is_null(const db_result *r, int row, int col)
{
    return !in_range(r, row, col) || PQgetisnull(r->pg, row, col);
}

const char *db_result_text(const db_result *r, int row, int col, size_t *len)
{
    if (db_result_is_null(r, row, col))
        return NULL;
    if (len)
        *len = (size_t)PQgetlength(r->pg, row, col);
    return PQgetvalue(r->pg, row, col);
}

int db_result_int64(const db_result *r, int row, int col, int64_t *out)
{
    const char *s = db_result_text(r, row, col, NULL);
    if (!s)
        return -ENODATA;
    if (!*s)
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = v;
    return 0;
}

const char *db_result_sqlstate(const db_result *r)
{
    const char *s = r->pg ? PQresultErrorField(r->pg, PG_DIAG_SQLSTATE) : NULL;
    return s ? s : "";
}

const char *db_result_message(const db_result *r)
{
    const char *s = r->pg ? PQresultErrorField(r->pg, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    return s ? s : "";
}

void db_result_clear(db_result *r)
{
    if (r->pg)
        PQclear(r->pg);
    r->pg = NULL;
}
