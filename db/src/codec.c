/*
 * The binary wire format of typed values: see codec.h.
 */
#include "codec.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

bool db_type_known(db_type t)
{
    switch (t) {
    case DB_BOOL: case DB_INT8: case DB_INT4: case DB_TEXT: case DB_TIMESTAMPTZ:
        return true;
    default:
        return false;
    }
}

unsigned db_array_oid(db_type t)
{
    switch (t) {
    case DB_BOOL: return 1000;
    case DB_INT8: return 1016;
    case DB_INT4: return 1007;
    case DB_TEXT: return 1009;
    case DB_TIMESTAMPTZ: return 1185;
    default: return 0;
    }
}

/* Big-endian stores and loads, byte by byte: no alignment, any host. */
static void put_be64(char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (char)(v & 0xff);
}

static void put_be32(char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (char)(v & 0xff);
}

static uint64_t get_be(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

size_t db_encode_array(unsigned elem_oid, size_t n, const char *const *values,
                       const int *lengths, char *out)
{
    size_t size = 20;
    bool nulls = false;
    for (size_t i = 0; i < n; i++) {
        size += 4 + (values[i] ? (size_t)lengths[i] : 0);
        nulls = nulls || !values[i];
    }
    if (!out)
        return size;
    put_be32(out, 1);
    put_be32(out + 4, nulls ? 1 : 0);
    put_be32(out + 8, elem_oid);
    put_be32(out + 12, (uint32_t)n);
    put_be32(out + 16, 1);
    char *at = out + 20;
    for (size_t i = 0; i < n; i++) {
        if (!values[i]) {
            put_be32(at, UINT32_MAX); /* -1: NULL */
            at += 4;
            continue;
        }
        put_be32(at, (uint32_t)lengths[i]);
        memcpy(at + 4, values[i], (size_t)lengths[i]);
        at += 4 + (size_t)lengths[i];
    }
    return size;
}

int db_encode_param(const db_param *p, db_type declared, char buf[8], const char **value,
                    int *length)
{
    if (p->null) {
        *value = NULL;
        *length = 0;
        return 0;
    }
    switch (declared) {
    case DB_INT8:
        if (p->type != DB_INT8 && p->type != DB_INT4)
            return -EINVAL;
        put_be64(buf, (uint64_t)p->v.i64);
        *length = 8;
        break;
    case DB_INT4:
        if (p->type != DB_INT8 && p->type != DB_INT4)
            return -EINVAL;
        if (p->v.i64 < INT32_MIN || p->v.i64 > INT32_MAX)
            return -ERANGE;
        put_be32(buf, (uint32_t)(int32_t)p->v.i64);
        *length = 4;
        break;
    case DB_BOOL:
        if (p->type != DB_BOOL)
            return -EINVAL;
        buf[0] = p->v.b ? 1 : 0;
        *length = 1;
        break;
    case DB_TIMESTAMPTZ:
        if (p->type != DB_TIMESTAMPTZ)
            return -EINVAL;
        /* Unix us to PostgreSQL us; the infinities are not times. */
        if (p->v.i64 < INT64_MIN + 1 + DB_PG_EPOCH_UNIX_US)
            return -ERANGE;
        put_be64(buf, (uint64_t)(p->v.i64 - DB_PG_EPOCH_UNIX_US));
        *length = 8;
        break;
    case DB_TEXT:
        if (p->type != DB_TEXT)
            return -EINVAL;
        if (p->len > INT_MAX)
            return -ERANGE;
        /* A NULL pointer would read as SQL NULL: empty text needs bytes. */
        *value = p->len ? p->v.text : "";
        *length = (int)p->len;
        return 0;
    default:
        return -EINVAL;
    }
    *value = buf;
    return 0;
}

int db_decode_int64(unsigned oid, const char *v, int len, int64_t *out)
{
    switch (oid) {
    case DB_INT8:
        if (len != 8)
            return -EPROTO;
        *out = (int64_t)get_be(v, 8);
        return 0;
    case DB_INT4:
        if (len != 4)
            return -EPROTO;
        *out = (int32_t)(uint32_t)get_be(v, 4);
        return 0;
    case DB_OID_INT2:
        if (len != 2)
            return -EPROTO;
        *out = (int16_t)(uint16_t)get_be(v, 2);
        return 0;
    default:
        return -EPROTO;
    }
}

int db_decode_bool(unsigned oid, const char *v, int len, bool *out)
{
    if (oid != DB_BOOL || len != 1)
        return -EPROTO;
    *out = v[0] != 0;
    return 0;
}

int db_decode_time(unsigned oid, const char *v, int len, int64_t *unix_us)
{
    if ((oid != DB_TIMESTAMPTZ && oid != DB_OID_TIMESTAMP) || len != 8)
        return -EPROTO;
    int64_t pg = (int64_t)get_be(v, 8);
    if (pg == DB_PG_TIME_INFINITY || pg == DB_PG_TIME_MINUS_INFINITY ||
        pg > INT64_MAX - DB_PG_EPOCH_UNIX_US)
        return -ERANGE;
    *unix_us = pg + DB_PG_EPOCH_UNIX_US;
    return 0;
}

int db_decode_text(unsigned oid, const char *v, int len, const char **s, size_t *out_len)
{
    switch (oid) {
    case DB_TEXT: case DB_OID_VARCHAR: case DB_OID_BPCHAR: case DB_OID_NAME: case DB_OID_JSON:
        break;
    default:
        return -EPROTO;
    }
    if (len < 0)
        return -EPROTO;
    *s = v;
    *out_len = (size_t)len;
    return 0;
}
