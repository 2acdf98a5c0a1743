/*
 * The binary wire format of typed parameters and results (db/src/codec.c),
 * checked byte by byte against what PostgreSQL's send/recv functions
 * write: network byte order, two's complement, microseconds since
 * 2000-01-01 for timestamptz, SQL NULL as a NULL value.
 */
#include "db/src/codec.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

/* Encode @p for @declared; the bytes in @buf, their count returned. */
static int encode(db_param p, db_type declared, char buf[8], const char **value)
{
    int len = -1;
    int err = db_encode_param(&p, declared, buf, value, &len);
    cr_assert_eq(err, 0, "encode: %d", err);
    return len;
}

Test(codec, int8_network_byte_order)
{
    char buf[8];
    const char *v;
    cr_assert_eq(encode(db_param_int64(0x0102030405060708), DB_INT8, buf, &v), 8);
    cr_assert_eq(v, buf);
    cr_assert(memcmp(buf, "\x01\x02\x03\x04\x05\x06\x07\x08", 8) == 0);
    int64_t out = 0;
    cr_assert_eq(db_decode_int64(DB_INT8, buf, 8, &out), 0);
    cr_assert_eq(out, 0x0102030405060708);
}

Test(codec, int8_negative_two_complement)
{
    char buf[8];
    const char *v;
    encode(db_param_int64(-1), DB_INT8, buf, &v);
    cr_assert(memcmp(buf, "\xff\xff\xff\xff\xff\xff\xff\xff", 8) == 0);
    encode(db_param_int64(-2), DB_INT8, buf, &v);
    cr_assert(memcmp(buf, "\xff\xff\xff\xff\xff\xff\xff\xfe", 8) == 0);
    encode(db_param_int64(INT64_MIN), DB_INT8, buf, &v);
    cr_assert(memcmp(buf, "\x80\0\0\0\0\0\0\0", 8) == 0);
    int64_t out = 0;
    cr_assert_eq(db_decode_int64(DB_INT8, buf, 8, &out), 0);
    cr_assert_eq(out, INT64_MIN);
    cr_assert_eq(db_decode_int64(DB_INT8, "\xff\xff\xff\xff\xff\xff\xff\xfe", 8, &out), 0);
    cr_assert_eq(out, -2);
}

Test(codec, int4_range_and_sign)
{
    char buf[8];
    const char *v;
    cr_assert_eq(encode(db_param_int32(-3), DB_INT4, buf, &v), 4);
    cr_assert(memcmp(buf, "\xff\xff\xff\xfd", 4) == 0);
    cr_assert_eq(encode(db_param_int64(0x7fffffff), DB_INT4, buf, &v), 4);
    cr_assert(memcmp(buf, "\x7f\xff\xff\xff", 4) == 0);
    db_param big = db_param_int64(INT64_C(0x80000000));
    int len;
    cr_assert_eq(db_encode_param(&big, DB_INT4, buf, &v, &len), -ERANGE);
    /* An int4 widens into an int8 parameter. */
    cr_assert_eq(encode(db_param_int32(-3), DB_INT8, buf, &v), 8);
    cr_assert(memcmp(buf, "\xff\xff\xff\xff\xff\xff\xff\xfd", 8) == 0);
    int64_t out = 0;
    cr_assert_eq(db_decode_int64(DB_INT4, "\xff\xff\xff\xfd", 4, &out), 0);
    cr_assert_eq(out, -3);
    cr_assert_eq(db_decode_int64(21 /* int2 */, "\x80\x00", 2, &out), 0);
    cr_assert_eq(out, -32768);
}

Test(codec, bool_one_byte)
{
    char buf[8];
    const char *v;
    cr_assert_eq(encode(db_param_bool(true), DB_BOOL, buf, &v), 1);
    cr_assert_eq(buf[0], 1);
    cr_assert_eq(encode(db_param_bool(false), DB_BOOL, buf, &v), 1);
    cr_assert_eq(buf[0], 0);
    bool out = false;
    cr_assert_eq(db_decode_bool(DB_BOOL, "\x01", 1, &out), 0);
    cr_assert(out);
    cr_assert_eq(db_decode_bool(DB_BOOL, "\x00", 1, &out), 0);
    cr_assert(!out);
}

Test(codec, timestamptz_counts_from_2000)
{
    char buf[8];
    const char *v;
    /* 2000-01-01 00:00:00 UTC is PostgreSQL's zero. */
    cr_assert_eq(encode(db_param_time(946684800 * INT64_C(1000000)), DB_TIMESTAMPTZ, buf, &v), 8);
    cr_assert(memcmp(buf, "\0\0\0\0\0\0\0\0", 8) == 0);
    /* The Unix epoch is 946684800 s before it: -946684800000000 us. */
    encode(db_param_time(0), DB_TIMESTAMPTZ, buf, &v);
    int64_t pg = -INT64_C(946684800000000);
    char want[8];
    for (int i = 0; i < 8; i++)
        want[i] = (char)((uint64_t)pg >> (56 - 8 * i));
    cr_assert(memcmp(buf, want, 8) == 0);
    int64_t out = 1;
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, buf, 8, &out), 0);
    cr_assert_eq(out, 0);
    /* One microsecond after 2000: 00..01; before 1970: negative Unix time. */
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, "\0\0\0\0\0\0\0\x01", 8, &out), 0);
    cr_assert_eq(out, DB_PG_EPOCH_UNIX_US + 1);
    encode(db_param_time(-1), DB_TIMESTAMPTZ, buf, &v);
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, buf, 8, &out), 0);
    cr_assert_eq(out, -1);
    /* timestamp (without time zone) reads the same way, as UTC. */
    cr_assert_eq(db_decode_time(1114, "\0\0\0\0\0\0\0\x02", 8, &out), 0);
    cr_assert_eq(out, DB_PG_EPOCH_UNIX_US + 2);
}

Test(codec, timestamptz_infinity_is_out_of_range)
{
    int64_t out;
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, "\x7f\xff\xff\xff\xff\xff\xff\xff", 8, &out),
                 -ERANGE);
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, "\x80\0\0\0\0\0\0\0", 8, &out), -ERANGE);
    char buf[8];
    const char *v;
    int len;
    db_param p = db_param_time(INT64_MIN);
    cr_assert_eq(db_encode_param(&p, DB_TIMESTAMPTZ, buf, &v, &len), -ERANGE);
}

Test(codec, text_points_at_the_caller_bytes)
{
    char buf[8];
    const char *v = NULL;
    const char *s = "abcdef";
    cr_assert_eq(encode(db_param_text(s, 3), DB_TEXT, buf, &v), 3);
    cr_assert_eq(v, s);
    /* Empty text is not NULL. */
    cr_assert_eq(encode(db_param_text(NULL, 0), DB_TEXT, buf, &v), 0);
    cr_assert_not_null(v);
    const char *t;
    size_t n;
    cr_assert_eq(db_decode_text(DB_TEXT, "xyz", 3, &t, &n), 0);
    cr_assert_eq(n, 3);
    cr_assert_eq(db_decode_text(1043 /* varchar */, "xyz", 2, &t, &n), 0);
    cr_assert_eq(n, 2);
}

Test(codec, null_fits_every_type)
{
    db_type types[] = {DB_INT8, DB_INT4, DB_BOOL, DB_TEXT, DB_TIMESTAMPTZ};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char buf[8];
        const char *v = "x";
        int len = -1;
        db_param p = db_param_null();
        cr_assert_eq(db_encode_param(&p, types[i], buf, &v, &len), 0);
        cr_assert_null(v);
    }
}

Test(codec, mismatched_types_are_refused)
{
    char buf[8];
    const char *v;
    int len;
    db_param text = db_param_text("1", 1), num = db_param_int64(1), b = db_param_bool(true);
    cr_assert_eq(db_encode_param(&text, DB_INT8, buf, &v, &len), -EINVAL);
    cr_assert_eq(db_encode_param(&num, DB_TEXT, buf, &v, &len), -EINVAL);
    cr_assert_eq(db_encode_param(&b, DB_INT8, buf, &v, &len), -EINVAL);
    cr_assert_eq(db_encode_param(&num, DB_TIMESTAMPTZ, buf, &v, &len), -EINVAL);
    cr_assert_eq(db_encode_param(&num, (db_type)700 /* float4 */, buf, &v, &len), -EINVAL);
}

Test(codec, decoders_check_the_column_type_and_length)
{
    int64_t i;
    bool b;
    const char *s;
    size_t n;
    /* A text column's bytes are not an int8, whatever their length. */
    cr_assert_eq(db_decode_int64(DB_TEXT, "12345678", 8, &i), -EPROTO);
    cr_assert_eq(db_decode_int64(1700 /* numeric */, "\0\0\0\0\0\0\0\0", 8, &i), -EPROTO);
    cr_assert_eq(db_decode_int64(DB_INT8, "\0\0\0\x01", 4, &i), -EPROTO);
    cr_assert_eq(db_decode_int64(DB_INT4, "\0\0\0\0\0\0\0\x01", 8, &i), -EPROTO);
    cr_assert_eq(db_decode_bool(DB_INT4, "\x01", 1, &b), -EPROTO);
    cr_assert_eq(db_decode_bool(DB_BOOL, "\x01\x00", 2, &b), -EPROTO);
    cr_assert_eq(db_decode_time(DB_INT8, "\0\0\0\0\0\0\0\0", 8, &i), -EPROTO);
    cr_assert_eq(db_decode_time(DB_TIMESTAMPTZ, "\0\0\0\0", 4, &i), -EPROTO);
    cr_assert_eq(db_decode_text(DB_INT8, "\0\0\0\0\0\0\0\0", 8, &s, &n), -EPROTO);
    cr_assert_eq(db_decode_text(17 /* bytea */, "ab", 2, &s, &n), -EPROTO);
}

/* A text[] of "ab", NULL, "" as array_send writes it (arrayfuncs.c):
 * ndim 1, has-nulls 1, element OID 25, dimension 3 from 1, then each
 * element's length (-1 for NULL) and bytes. */
Test(codec, one_dimensional_array_as_array_send_writes_it)
{
    const char *values[] = {"ab", NULL, ""};
    int lengths[] = {2, 0, 0};
    static const char want[] = "\0\0\0\x01"
                               "\0\0\0\x01"
                               "\0\0\0\x19"
                               "\0\0\0\x03"
                               "\0\0\0\x01"
                               "\0\0\0\x02"
                               "ab"
                               "\xff\xff\xff\xff"
                               "\0\0\0\0";
    size_t size = db_encode_array(DB_TEXT, 3, values, lengths, NULL);
    cr_assert_eq(size, sizeof(want) - 1);
    char out[64];
    memset(out, 0x55, sizeof(out));
    cr_assert_eq(db_encode_array(DB_TEXT, 3, values, lengths, out), size);
    cr_assert(memcmp(out, want, size) == 0);
    cr_assert_eq((unsigned char)out[size], 0x55, "wrote past its size");
}

Test(codec, array_without_nulls_clears_the_flag_and_array_oids)
{
    char a[8], b[8];
    const char *values[] = {a, b};
    int lengths[] = {8, 8};
    memset(a, 1, 8);
    memset(b, 2, 8);
    char out[64];
    cr_assert_eq(db_encode_array(DB_INT8, 2, values, lengths, out), 20 + 2 * 12);
    cr_assert(memcmp(out + 4, "\0\0\0\0\0\0\0\x14", 8) == 0, "has-nulls 0, OID 20");
    cr_assert_eq(db_array_oid(DB_INT8), 1016u);
    cr_assert_eq(db_array_oid(DB_TEXT), 1009u);
    cr_assert_eq(db_array_oid(DB_INT4), 1007u);
    cr_assert_eq(db_array_oid(DB_BOOL), 1000u);
    cr_assert_eq(db_array_oid(DB_TIMESTAMPTZ), 1185u);
    cr_assert_eq(db_array_oid(DB_TYPE_NONE), 0u);
}
