/*
 * Internal to db/: the binary wire format of typed parameters and result
 * values, kept free of libpq and of the runtime so that it can be
 * unit-tested alone (tests/unit/db/test_codec.c).
 *
 * Every value travels as its type's send/recv functions define it
 * (PostgreSQL docs, "Binary format" in the frontend/backend protocol's
 * message formats; src/backend/utils/adt/int8.c, int.c, bool.c,
 * timestamp.c, varlena.c): integers in network byte order (big-endian,
 * two's complement), bool as one byte 0/1, timestamptz as an int8 of
 * microseconds since 2000-01-01 00:00:00 UTC, text as its bytes.
 */
#ifndef CORING_DB_CODEC_H
#define CORING_DB_CODEC_H

#include "coring/db/db.h"

#include <stdbool.h>
#include <stdint.h>

/* PostgreSQL type OIDs read back from results besides db_type's
 * (pg_type.dat). */
enum {
    DB_OID_NAME = 19,
    DB_OID_INT2 = 21,
    DB_OID_JSON = 114,
    DB_OID_BPCHAR = 1042,
    DB_OID_VARCHAR = 1043,
    DB_OID_TIMESTAMP = 1114,
};

/* timestamptz's 'infinity' and '-infinity' (DT_NOEND, DT_NOBEGIN). */
#define DB_PG_TIME_INFINITY INT64_MAX
#define DB_PG_TIME_MINUS_INFINITY INT64_MIN

/* Whether @t is a type the typed API binds. */
bool db_type_known(db_type t);

/* The OID of the one-dimensional array type of @t's values (pg_type.dat:
 * _bool 1000, _int8 1016, _int4 1007, _text 1009, _timestamptz 1185), or
 * 0 for a type the typed API does not bind. */
unsigned db_array_oid(db_type t);

/*
 * db_encode_array - the binary wire form of a one-dimensional array (lower
 * bound 1) of @n values of element type @elem_oid, each already in its
 * type's binary form (@values[i], @lengths[i] bytes; NULL for SQL NULL),
 * as array_send writes it (src/backend/utils/adt/arrayfuncs.c): int32
 * ndim 1, int32 has-nulls flag, OID of the element type, int32 length and
 * int32 lower bound of the dimension, then per element an int32 length
 * (-1 for NULL) and its bytes; every integer big-endian.
 * Writes into @out when it is not NULL (the caller sized it with a first
 * call with @out NULL). Returns the bytes the array takes.
 */
size_t db_encode_array(unsigned elem_oid, size_t n, const char *const *values,
                       const int *lengths, char *out);

/*
 * db_encode_param - the wire form of @p for a parameter declared @declared:
 * *@value and *@length for PQexecPrepared's paramValues and paramLengths,
 * all in binary format (paramFormats 1). Integers and timestamps are
 * written into @buf (8 bytes, the caller's); text points at @p's own bytes;
 * SQL NULL sets *@value to NULL.
 * Returns 0, -EINVAL when @p's C type does not fit @declared, -ERANGE when
 * an int64 does not fit an int4, a time is out of timestamptz's int8
 * range, or text is longer than INT_MAX bytes.
 */
int db_encode_param(const db_param *p, db_type declared, char buf[8], const char **value,
                    int *length);

/*
 * db_decode_int64 / db_decode_bool / db_decode_time / db_decode_text -
 * a binary result value, @len bytes at @v, of column type @oid, as a C
 * value. Each returns 0 or -EPROTO when @oid is not a type it reads or @len
 * is wrong for it; db_decode_time also -ERANGE for (-)infinity and times
 * that do not fit microseconds since the Unix epoch in an int64.
 * int64 reads int8, int4 and int2; time reads timestamptz and timestamp
 * (as UTC); text reads text, varchar, char(n), name and json.
 */
int db_decode_int64(unsigned oid, const char *v, int len, int64_t *out);
int db_decode_bool(unsigned oid, const char *v, int len, bool *out);
int db_decode_time(unsigned oid, const char *v, int len, int64_t *unix_us);
int db_decode_text(unsigned oid, const char *v, int len, const char **s, size_t *out_len);

#endif
