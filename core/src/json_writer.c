/*
 * Streaming JSON writer: responses are appended straight into a cr_buf, with
 * no tree built first. Strings are escaped per RFC 8259 section 7 and
 * checked as UTF-8 (RFC 3629) on the way, so whatever bytes a handler passes
 * in (a database row, an upstream reply), the output is always valid JSON
 * in valid UTF-8. Runs of plain ASCII are found eight bytes at a time and
 * copied with one append.
 */
#include "coring/core/json_writer.h"
#include "coring/core/float_format.h"
#include "coring/core/utf8.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Plain bytes are copied as they are; the rest need an escape (control
 * characters, '"', '\\') or a UTF-8 check (0x80 and up). */
enum { PLAIN = 0, ESCAPE = 1, NON_ASCII = 2 };

static const unsigned char byte_class[256] = {
    [0x00 ... 0x1f] = ESCAPE,
    ['"'] = ESCAPE,
    ['\\'] = ESCAPE,
    [0x80 ... 0xff] = NON_ASCII,
};

/* Two-character escapes from RFC 8259 section 7; others are \u00XX. */
static const char short_escape[0x60] = {
    ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n',  ['\r'] = 'r',
    ['\t'] = 't', ['"'] = '"',  ['\\'] = '\\',
};

static const char replacement_character[3] = {'\xef', '\xbf', '\xbd'}; /* U+FFFD */

/* Whether none of the 8 bytes in @x is a control character, '"', '\\' or
 * non-ASCII (the "haszero"/"hasless" tricks of Bit Twiddling Hacks: exact
 * as a yes/no answer for the whole word). */
static inline bool word_is_plain(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t high = 0x8080808080808080ull;
    uint64_t control = (x - ones * 0x20) & ~x;
    uint64_t quote = x ^ (ones * '"');
    uint64_t backslash = x ^ (ones * '\\');
    quote = (quote - ones) & ~quote;
    backslash = (backslash - ones) & ~backslash;
    return ((control | quote | backslash | x) & high) == 0;
}

static void append_escape(cr_buf *out, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    if (short_escape[c]) {
        char e[2] = {'\\', short_escape[c]};
        cr_buf_append(out, e, sizeof(e));
    } else {
        char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 0xf]};
        cr_buf_append(out, e, sizeof(e));
    }
}

void cr_json_escape_string(cr_buf *out, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    size_t run = 0; /* start of the bytes not yet appended */

    cr_buf_reserve(out, len + 2); /* the common case: nothing to escape */
    cr_buf_append(out, "\"", 1);
    while (i < len) {
        while (len - i >= 8) {
            uint64_t word;
            memcpy(&word, p + i, sizeof(word));
            if (!word_is_plain(word))
                break;
            i += 8;
        }
        while (i < len && byte_class[p[i]] == PLAIN)
            i++;
        if (i == len)
            break;
        if (byte_class[p[i]] == ESCAPE) {
            cr_buf_append(out, p + run, i - run);
            append_escape(out, p[i]);
            run = ++i;
            continue;
        }
        size_t n = cr_utf8_sequence_length(p + i, len - i);
        if (n) {
            i += n; /* well-formed: stays in the run */
            continue;
        }
        cr_buf_append(out, p + run, i - run);
        cr_buf_append(out, replacement_character, sizeof(replacement_character));
        run = ++i;
    }
    cr_buf_append(out, p + run, len - run);
    cr_buf_append(out, "\"", 1);
}

void cr_json_writer_init(cr_json_writer *w, cr_buf *out)
{
    memset(w, 0, sizeof(*w));
    w->out = out;
}

/* The comma before a value, unless it is the value of the key just written. */
static void before_value(cr_json_writer *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->need_comma[w->depth])
        cr_buf_append(w->out, ",", 1);
    w->need_comma[w->depth] = true;
}

static void begin(cr_json_writer *w, char open)
{
    if (w->depth >= CR_JSON_WRITER_MAX_DEPTH) {
        w->out->failed = true; /* the output is abandoned: write nothing */
        return;
    }
    before_value(w);
    cr_buf_append(w->out, &open, 1);
    w->depth++;
    w->need_comma[w->depth] = false;
}

static void end(cr_json_writer *w, char close)
{
    if (w->depth == 0 || w->after_key) {
        w->out->failed = true; /* an end without a begin, or a key without a value */
        if (w->depth == 0)
            return;
    }
    w->after_key = false;
    w->depth--;
    cr_buf_append(w->out, &close, 1);
}

void cr_json_object_begin(cr_json_writer *w)
{
    begin(w, '{');
}

void cr_json_object_end(cr_json_writer *w)
{
    end(w, '}');
}

void cr_json_array_begin(cr_json_writer *w)
{
    begin(w, '[');
}

void cr_json_array_end(cr_json_writer *w)
{
    end(w, ']');
}

void cr_json_key(cr_json_writer *w, const char *key, size_t len)
{
    if (w->after_key)
        w->out->failed = true; /* two keys in a row */
    if (w->need_comma[w->depth])
        cr_buf_append(w->out, ",", 1);
    w->need_comma[w->depth] = true;
    cr_json_escape_string(w->out, key, len);
    cr_buf_append(w->out, ":", 1);
    w->after_key = true;
}

void cr_json_string(cr_json_writer *w, const char *s, size_t len)
{
    before_value(w);
    cr_json_escape_string(w->out, s, len);
}

void cr_json_cstring(cr_json_writer *w, const char *s)
{
    if (!s) {
        cr_json_null(w);
        return;
    }
    cr_json_string(w, s, strlen(s));
}

void cr_json_uint64(cr_json_writer *w, uint64_t v)
{
    before_value(w);
    cr_buf_append_u64(w->out, v);
}

void cr_json_int64(cr_json_writer *w, int64_t v)
{
    before_value(w);
    if (v < 0) {
        cr_buf_append(w->out, "-", 1);
        cr_buf_append_u64(w->out, 0 - (uint64_t)v); /* INT64_MIN too */
    } else {
        cr_buf_append_u64(w->out, (uint64_t)v);
    }
}

void cr_json_double(cr_json_writer *w, double v)
{
    if (!isfinite(v)) {
        cr_json_null(w);
        return;
    }
    before_value(w);
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%.9g", v);
    if (n <= 0 || (size_t)n >= sizeof(tmp)) {
        w->out->failed = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        if (tmp[i] == ',') /* a locale's decimal comma; JSON wants a point */
            tmp[i] = '.';
    }
    cr_buf_append(w->out, tmp, (size_t)n);
}

void cr_json_float(cr_json_writer *w, float v)
{
    before_value(w);
    char tmp[CR_FLOAT_SHORTEST_MAX];
    size_t n = cr_float_shortest(v, tmp);
    if (n == 0)
        cr_buf_append(w->out, "null", 4);
    else
        cr_buf_append(w->out, tmp, n);
}

void cr_json_float_array(cr_json_writer *w, const float *v, size_t n)
{
    cr_json_array_begin(w);
    cr_buf *out = w->out;
    /* a comma and the longest float each, "null" being shorter */
    if (n > (((size_t)-1) >> 1) / (CR_FLOAT_SHORTEST_MAX + 1) ||
        cr_buf_reserve(out, n * (CR_FLOAT_SHORTEST_MAX + 1)) < 0) {
        out->failed = true;
        return;
    }
    char *p = out->data + out->len;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        size_t len = cr_float_shortest(v[i], p);
        if (len == 0) {
            memcpy(p, "null", 4);
            len = 4;
        }
        p += len;
    }
    out->len = (size_t)(p - out->data);
    cr_json_array_end(w);
}

void cr_json_bool(cr_json_writer *w, bool v)
{
    before_value(w);
    if (v)
        cr_buf_append(w->out, "true", 4);
    else
        cr_buf_append(w->out, "false", 5);
}

void cr_json_null(cr_json_writer *w)
{
    before_value(w);
    cr_buf_append(w->out, "null", 4);
}
