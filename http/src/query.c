/*
 * Query parameters by name (coring/http/query.h): a scan of the query for
 * the pairs of one name, then a decoder that yields one byte at a time so
 * that the string and the integer readers share it and neither needs a
 * buffer of its own. WHATWG URL Standard, application/x-www-form-urlencoded
 * parsing; percent-encoding per RFC 3986 section 2.1.
 */
#include "coring/http/query.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The next decoded byte of [*p, end) (0..255), advancing *p; -1 for a
 * malformed escape. '+' is a space (the form encoding). */
static int next_byte(const char **p, const char *end)
{
    char c = *(*p)++;
    if (c == '+')
        return ' ';
    if (c != '%')
        return (unsigned char)c;
    if (end - *p < 2)
        return -1;
    int hi = hex_value((*p)[0]), lo = hex_value((*p)[1]);
    if (hi < 0 || lo < 0)
        return -1;
    *p += 2;
    return hi << 4 | lo;
}

/* Does the encoded name [s, end) decode to exactly @name (@name_len bytes)? */
static bool name_matches(const char *s, const char *end, const char *name, size_t name_len)
{
    size_t i = 0;
    while (s < end) {
        int b = next_byte(&s, end);
        if (b < 0 || i == name_len || (unsigned char)name[i] != b)
            return false;
        i++;
    }
    return i == name_len;
}

/* The encoded value of the one pair named @name: 0 and [*v, *v_end),
 * -ENOENT or -EEXIST. */
static int find(const http_request *req, const char *name, const char **v, const char **v_end)
{
    const char *q = req->query.ptr, *end = q + req->query.len;
    size_t name_len = strlen(name);
    int found = 0;
    while (q && q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *stop = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(stop - q));
        const char *name_end = eq ? eq : stop;
        if (stop > q && name_matches(q, name_end, name, name_len)) {
            if (found++)
                return -EEXIST;
            *v = eq ? eq + 1 : stop;
            *v_end = stop;
        }
        q = amp ? amp + 1 : end;
    }
    return found ? 0 : -ENOENT;
}

int http_query_param(const http_request *req, const char *name, char *buf, size_t cap,
                     size_t *len)
{
    if (cap)
        buf[0] = '\0';
    const char *p, *end;
    int err = find(req, name, &p, &end);
    if (err < 0)
        return err;
    size_t n = 0;
    while (p < end) {
        int b = next_byte(&p, end);
        if (b < 0) {
            if (cap)
                buf[0] = '\0';
            return -EINVAL;
        }
        if (n + 1 < cap)
            buf[n] = (char)b;
        n++;
    }
    if (len)
        *len = n;
    if (n >= cap) {
        if (cap)
            buf[0] = '\0';
        return -ENOSPC;
    }
    buf[n] = '\0';
    return 0;
}

int http_query_int64(const http_request *req, const char *name, int64_t min, int64_t max,
                     int64_t *out)
{
    const char *p, *end;
    int err = find(req, name, &p, &end);
    if (err < 0)
        return err;
    bool negative = false, overflow = false;
    size_t digits = 0, i = 0;
    uint64_t mag = 0;
    for (; p < end; i++) {
        int b = next_byte(&p, end);
        if (b == '-' && i == 0) {
            negative = true;
            continue;
        }
        unsigned d = (unsigned)(b - '0');
        if (b < 0 || d > 9)
            return -EINVAL;
        digits++;
        if (mag > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            mag = mag * 10 + d;
    }
    if (digits == 0)
        return -EINVAL;
    const uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (overflow || mag > limit)
        return -ERANGE;
    int64_t v = !negative ? (int64_t)mag : mag == limit ? INT64_MIN : -(int64_t)mag;
    if (v < min || v > max)
        return -ERANGE;
    *out = v;
    return 0;
}
