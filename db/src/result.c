/*
 * Typed access to a query's result, binary (db_run) or text (db_query)
 * format: see coring/db/db.h; the binary values' decoding is codec.c's.
 */
#include "coring/db/db.h"

#include "codec.h"

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

/* The value at @row, @col of a binary-format column: its bytes in *@v,
 * *@len, and its type. -ENODATA for NULL or out of range, -EPROTO for a
 * text-format column. */
static int binary_value(const db_result *r, int row, int col, const char **v, int *len,
                        unsigned *oid)
{
    if (db_result_is_null(r, row, col))
        return -ENODATA;
    if (PQfformat(r->pg, col) != 1)
        return -EPROTO;
    *v = PQgetvalue(r->pg, row, col);
    *len = PQgetlength(r->pg, row, col);
    *oid = PQftype(r->pg, col);
    return 0;
}

/* The decimal text of a text-format column (db_query's results). */
static int parse_int64(const char *s, int64_t *out)
{
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

int db_result_int64(const db_result *r, int row, int col, int64_t *out)
{
    if (db_result_is_null(r, row, col))
        return -ENODATA;
    if (PQfformat(r->pg, col) == 0)
        return parse_int64(PQgetvalue(r->pg, row, col), out);
    const char *v;
    int len;
    unsigned oid;
    int err = binary_value(r, row, col, &v, &len, &oid);
    return err < 0 ? err : db_decode_int64(oid, v, len, out);
}

int db_result_bool(const db_result *r, int row, int col, bool *out)
{
    const char *v;
    int len;
    unsigned oid;
    int err = binary_value(r, row, col, &v, &len, &oid);
    return err < 0 ? err : db_decode_bool(oid, v, len, out);
}

int db_result_time(const db_result *r, int row, int col, int64_t *unix_us)
{
    const char *v;
    int len;
    unsigned oid;
    int err = binary_value(r, row, col, &v, &len, &oid);
    return err < 0 ? err : db_decode_time(oid, v, len, unix_us);
}

int db_result_string(const db_result *r, int row, int col, const char **s, size_t *len)
{
    if (db_result_is_null(r, row, col))
        return -ENODATA;
    if (PQfformat(r->pg, col) == 0) {
        *s = PQgetvalue(r->pg, row, col);
        *len = (size_t)PQgetlength(r->pg, row, col);
        return 0;
    }
    const char *v;
    int n;
    unsigned oid;
    int err = binary_value(r, row, col, &v, &n, &oid);
    return err < 0 ? err : db_decode_text(oid, v, n, s, len);
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
