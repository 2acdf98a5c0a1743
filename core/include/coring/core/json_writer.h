/*
 * A streaming JSON writer into a cr_buf, escaping strings per RFC 8259
 * section 7: '"', '\\' and control characters U+0000..U+001F are escaped
 * (\b \f \n \r \t, others as \u00XX); DEL and non-ASCII pass through. Input
 * strings that are not valid UTF-8 have each invalid byte replaced by
 * U+FFFD, so the writer never emits invalid UTF-8. The writer inserts commas
 * itself; keys and values alternate inside objects.
 */
#ifndef CORING_CORE_JSON_WRITER_H
#define CORING_CORE_JSON_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coring/core/buffer.h"

#define CR_JSON_WRITER_MAX_DEPTH 32

typedef struct cr_json_writer {
    cr_buf *out;                               /* not owned */
    unsigned depth;                            /* open arrays/objects */
    bool need_comma[CR_JSON_WRITER_MAX_DEPTH + 1];
    bool after_key;                            /* a key was written, its value is next */
} cr_json_writer;

/* cr_json_writer_init - write into @out (appending; @out is not owned). */
void cr_json_writer_init(cr_json_writer *w, cr_buf *out);

/* Structure. Nesting beyond CR_JSON_WRITER_MAX_DEPTH sets out->failed, as
 * does misuse the writer can see: an end without a begin, a key followed by
 * another key or by an end. The caller keeps keys and values alternating
 * (the writer does not know an object from an array) and matches each end
 * to its begin. */
void cr_json_object_begin(cr_json_writer *w);
void cr_json_object_end(cr_json_writer *w);
void cr_json_array_begin(cr_json_writer *w);
void cr_json_array_end(cr_json_writer *w);

/* cr_json_key - an object key (@len bytes, escaped like a string). */
void cr_json_key(cr_json_writer *w, const char *key, size_t len);

/* Values. Doubles that are NaN or infinite are written as null (JSON has
 * no such numbers); finite doubles with up to 9 significant digits
 * (%.9g, enough to round-trip a float32). */
void cr_json_string(cr_json_writer *w, const char *s, size_t len);
void cr_json_cstring(cr_json_writer *w, const char *s); /* NULL writes null */
void cr_json_uint64(cr_json_writer *w, uint64_t v);
void cr_json_int64(cr_json_writer *w, int64_t v);
void cr_json_double(cr_json_writer *w, double v);
/* cr_json_float - @v (binary32) with the fewest digits that read back as
 * the same float (cr_float_shortest, coring/core/float_format.h: never
 * longer than %.9g); NaN and infinities as null. */
void cr_json_float(cr_json_writer *w, float v);
/* cr_json_float_array - @n floats at @v as one JSON array of
 * cr_json_float values, with one capacity check for the whole array. */
void cr_json_float_array(cr_json_writer *w, const float *v, size_t n);
void cr_json_bool(cr_json_writer *w, bool v);
void cr_json_null(cr_json_writer *w);

/*
 * cr_json_escape_string - append @s (@len bytes) to @out as a quoted,
 * escaped JSON string, without the writer's comma bookkeeping.
 */
void cr_json_escape_string(cr_buf *out, const char *s, size_t len);

#endif
