/*
 * Typed access to a query's result (binary format): see coring/db/db.h;
 * the values' decoding is codec.c's.
 */
#include "coring/db/db.h"

#include "codec.h"

#include <errno.h>
#include <libpq-fe.h>

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

/* The value at @row, @col of a binary-format column: its bytes in *@v,
 * *@len, and its type. -ENODATA for NULL or out of range, -EPROTO for a
 * text-format column (every result is binary: a text one is not ours). */
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

int db_result_int64(const db_result *r, int row, int col, int64_t *out)
{
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
