/*
 * libFuzzer target: the JSON wrapper (core/src/json.cpp over simdjson) and
 * the JSON string escaper (core/src/json_writer.c).
 *
 * The input is parsed (documents up to 64 KiB, 64 deep) and, when valid,
 * walked with every accessor, arrays and objects in order and backwards (the
 * wrapper keeps cursors: both orders must give the same values). Then the
 * input is escaped as a JSON string and parsed back: the escaper must always
 * produce a valid JSON string (simdjson checks its UTF-8), equal to the input
 * when that is valid UTF-8.
 */
#include "coring/core/buffer.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static cr_json_parser *parser;

/* Well-formed UTF-8 (RFC 3629 section 4): no overlong forms, no surrogates,
 * nothing above U+10FFFF. */
static bool valid_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp, min;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (n - i < len)
            return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

static void walk(cr_json_value v, unsigned depth)
{
    if (depth > 64)
        abort(); /* deeper than the parser allows */
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
    size_t n;
    switch (cr_json_type_of(v)) {
    case CR_JSON_NULL:
        if (!cr_json_is_null(v))
            abort();
        break;
    case CR_JSON_BOOL:
        if (cr_json_get_bool(v, &b) != CR_JSON_OK)
            abort();
        break;
    case CR_JSON_INT:
        if (cr_json_get_int64(v, &i) != CR_JSON_OK || cr_json_get_double(v, &d) != CR_JSON_OK)
            abort();
        (void)cr_json_get_uint64(v, &u);
        break;
    case CR_JSON_UINT:
        if (cr_json_get_uint64(v, &u) != CR_JSON_OK || cr_json_get_int64(v, &i) != CR_JSON_ERANGE)
            abort();
        break;
    case CR_JSON_DOUBLE:
        if (cr_json_get_double(v, &d) != CR_JSON_OK || cr_json_get_int64(v, &i) == CR_JSON_OK)
            abort();
        break;
    case CR_JSON_STRING:
        if (cr_json_get_string(v, &s, &n) != CR_JSON_OK || cr_json_get_bool(v, &b) != CR_JSON_ETYPE)
            abort();
        break;
    case CR_JSON_ARRAY: {
        long size = cr_json_array_size(v);
        if (size < 0)
            abort();
        for (long k = 0; k < size; k++) {
            cr_json_value e;
            if (cr_json_array_at(v, (size_t)k, &e) != CR_JSON_OK)
                abort();
            walk(e, depth + 1);
        }
        cr_json_value e;
        if (cr_json_array_at(v, (size_t)size, &e) != CR_JSON_ERANGE)
            abort();
        for (long k = size; k-- > 0 && k > size - 4;)
            if (cr_json_array_at(v, (size_t)k, &e) != CR_JSON_OK)
                abort();
        break;
    }
    case CR_JSON_OBJECT: {
        long size = cr_json_object_size(v);
        if (size < 0)
            abort();
        for (long k = 0; k < size; k++) {
            const char *key;
            size_t key_len;
            cr_json_value e, first;
            if (cr_json_object_at(v, (size_t)k, &key, &key_len, &e) != CR_JSON_OK)
                abort();
            if (cr_json_object_get(v, key, key_len, &first) != CR_JSON_OK)
                abort();
            walk(e, depth + 1);
        }
        cr_json_value e;
        if (cr_json_object_get(v, "\xff", 1, &e) != CR_JSON_ENOKEY) /* never valid UTF-8 */
            abort();
        break;
    }
    default:
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!parser && !(parser = cr_json_parser_create(64 * 1024, 64)))
        abort();
    cr_json_value root;
    cr_json_error err = cr_json_parse(parser, (const char *)data, size, &root);
    if (err == CR_JSON_OK)
        walk(root, 1);
    else if (!cr_json_error_message(err) || !cr_json_is_null(root))
        abort();

    /* Escape, then parse back. */
    cr_buf out = {0};
    cr_json_escape_string(&out, (const char *)data, size);
    if (out.failed) {
        cr_buf_free(&out);
        return 0;
    }
    err = cr_json_parse(parser, out.data, out.len, &root);
    if (err == CR_JSON_ETOOBIG) {
        cr_buf_free(&out);
        return 0;
    }
    const char *s;
    size_t n;
    if (err != CR_JSON_OK || cr_json_get_string(root, &s, &n) != CR_JSON_OK)
        abort();
    /* Valid UTF-8 in, the same bytes out. */
    if (valid_utf8(data, size) && (n != size || memcmp(s, data, size) != 0))
        abort();
    cr_buf_free(&out);
    return 0;
}
