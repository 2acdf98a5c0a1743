/*
 * JSON parsing: simdjson's DOM parser behind a small C API.
 *
 * One cr_json_parser per thread (it owns simdjson's buffers and reuses them
 * between documents). A parsed document stays valid until the next
 * cr_json_parse() on the same parser. Values are small handles (copy them
 * freely) into that document. Input is copied into the parser's own padded
 * buffer first, because simdjson reads up to SIMDJSON_PADDING (64) bytes
 * past the end of its input.
 *
 * simdjson validates UTF-8 (RFC 3629) as it parses: invalid UTF-8 anywhere
 * in the document is an error, as is nesting deeper than the parser's limit.
 * Parsing does not recurse: any nesting is safe on a small coroutine stack.
 *
 * A parser and its document belong to one thread at a time (iteration keeps
 * cursors inside the document, so even reading is not thread-safe).
 *
 * Errors are a cr_json_error (not errno), with a message from
 * cr_json_error_message().
 */
#ifndef CORING_CORE_JSON_H
#define CORING_CORE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cr_json_parser cr_json_parser;

/* A handle to one value in a parsed document. Opaque: 16 bytes of
 * simdjson::dom::element. Valid until the next parse on its parser.
 * A zeroed handle, which failed lookups store, behaves as JSON null. */
typedef struct cr_json_value {
    uint64_t opaque[2];
} cr_json_value;

typedef enum cr_json_type {
    CR_JSON_NULL,
    CR_JSON_BOOL,
    CR_JSON_INT,     /* fits int64_t */
    CR_JSON_UINT,    /* fits uint64_t, not int64_t */
    CR_JSON_DOUBLE,
    CR_JSON_STRING,
    CR_JSON_ARRAY,
    CR_JSON_OBJECT,
} cr_json_type;

typedef enum cr_json_error {
    CR_JSON_OK = 0,
    CR_JSON_EINVALID,   /* not valid JSON (syntax) */
    CR_JSON_EUTF8,      /* invalid UTF-8 in the input */
    CR_JSON_EDEPTH,     /* nested deeper than the parser's max_depth */
    CR_JSON_ETOOBIG,    /* larger than the parser's capacity */
    CR_JSON_ENOMEM,     /* allocation failed */
    CR_JSON_ETYPE,      /* value is not of the requested type */
    CR_JSON_ENOKEY,     /* object has no such key */
    CR_JSON_ERANGE,     /* number does not fit the requested type, or index out of range */
} cr_json_error;

/*
 * cr_json_parser_create - a parser for documents of up to @max_bytes bytes
 * nested at most @max_depth deep (each 0 for its default: 1 MiB, 64): at
 * most @max_depth arrays and objects inside each other around any value,
 * an empty [] or {} being a value like 1: 1 and [] are 0 deep, [1] and
 * [[]] 1, [[1]] 2; with 64, 64 objects around {} are taken, 65 are not.
 * Memory grows with the largest document parsed (about 15 bytes per byte of
 * it, from 4 KiB up) and is kept until the parser is destroyed.
 * Returns NULL on allocation failure. Free with cr_json_parser_destroy.
 */
cr_json_parser *cr_json_parser_create(size_t max_bytes, size_t max_depth);
void cr_json_parser_destroy(cr_json_parser *p);

/*
 * cr_json_parse - parse @len bytes at @json (need not be NUL-terminated nor
 * padded: they are copied). On success *@root is the document's root value.
 * Returns CR_JSON_OK, CR_JSON_EINVALID, CR_JSON_EUTF8, CR_JSON_EDEPTH,
 * CR_JSON_ETOOBIG or CR_JSON_ENOMEM (on error *@root is a null handle).
 * Empty input is CR_JSON_EINVALID, and so is a number that fits neither
 * int64, uint64 nor double (18446744073709551616, 1e400: simdjson rejects
 * them). Invalidates earlier values of @p.
 */
cr_json_error cr_json_parse(cr_json_parser *p, const char *json, size_t len,
                            cr_json_value *root);

/* cr_json_error_message - a short English message for @err, static. */
const char *cr_json_error_message(cr_json_error err);

/*
 * cr_json_parser_detail - simdjson's own English message (static) for the
 * failure of the last cr_json_parse on @p, which says what was wrong where
 * cr_json_error_message only says "invalid JSON": "The JSON document has
 * an improper structure: missing or superfluous commas, braces, missing
 * keys, etc.", "A string is opened, but never closed.", "Problem while
 * parsing a number"... (simdjson's error_message()). NULL when that parse
 * succeeded, when no parse ran yet, and when it failed before simdjson
 * read the input (CR_JSON_ETOOBIG, or CR_JSON_ENOMEM for the parser's own
 * buffers). Same thread as the parse; the string is static.
 */
const char *cr_json_parser_detail(const cr_json_parser *p);

/* cr_json_type_of - the type of @v. */
cr_json_type cr_json_type_of(cr_json_value v);

/*
 * cr_json_object_get - the value of key @key (exact bytes, @key_len) in
 * object @obj. If a key repeats, the first is returned.
 * Returns CR_JSON_OK, CR_JSON_ETYPE (@obj is not an object) or CR_JSON_ENOKEY.
 */
cr_json_error cr_json_object_get(cr_json_value obj, const char *key, size_t key_len,
                                 cr_json_value *out);

/*
 * Object iteration: cr_json_object_size gives the number of members (or -1
 * if @obj is not an object); cr_json_object_at gives the @i-th key (not
 * NUL-terminated, valid while the document lives) and value.
 * Returns CR_JSON_OK, CR_JSON_ETYPE or CR_JSON_ERANGE.
 * Cost: reaching member @i walks from the last one asked for in the same
 * object (a few objects and arrays are remembered per document), so a loop
 * over i = 0, 1, 2... is O(1) a step, nested loops included; any other
 * order is O(i) a call.
 */
long cr_json_object_size(cr_json_value obj);
cr_json_error cr_json_object_at(cr_json_value obj, size_t i, const char **key,
                                size_t *key_len, cr_json_value *value);

/* Arrays: size (-1 if not an array) and the @i-th element
 * (CR_JSON_ETYPE, CR_JSON_ERANGE), at the same cost as cr_json_object_at. */
long cr_json_array_size(cr_json_value arr);
cr_json_error cr_json_array_at(cr_json_value arr, size_t i, cr_json_value *out);

/*
 * Scalars. Each returns CR_JSON_OK or CR_JSON_ETYPE; numbers also
 * CR_JSON_ERANGE when the value does not fit (a negative number asked as
 * uint64, above INT64_MAX asked as int64, any double asked as an integer,
 * even 2.0); *@out is left alone on error. Integers convert to double.
 * cr_json_get_string: *@s points into the document (valid until the next
 * parse), *@len its length in bytes; the string is valid UTF-8 and may
 * contain NUL bytes (from \u0000).
 */
cr_json_error cr_json_get_bool(cr_json_value v, bool *out);
cr_json_error cr_json_get_int64(cr_json_value v, int64_t *out);
cr_json_error cr_json_get_uint64(cr_json_value v, uint64_t *out);
cr_json_error cr_json_get_double(cr_json_value v, double *out);
cr_json_error cr_json_get_string(cr_json_value v, const char **s, size_t *len);
bool cr_json_is_null(cr_json_value v);

#endif
