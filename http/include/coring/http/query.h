/*
 * Query parameters by name: the part of the request-target after '?'
 * (RFC 9112 section 3.2, RFC 3986 section 3.4), read as the name=value
 * pairs that HTML forms, URLSearchParams, curl --data-urlencode -G and
 * Python's urllib.parse.urlencode send (WHATWG URL Standard,
 * application/x-www-form-urlencoded parsing):
 *
 *   - pairs are separated by '&'; empty pairs ("a=1&&b=2") are skipped;
 *   - a pair splits at its first '='; a pair without '=' is a name with
 *     the empty value ("?verbose" is verbose="");
 *   - names and values are percent-decoded (RFC 3986 section 2.1: '%'
 *     followed by two hexadecimal digits, either case, is the byte they
 *     spell), and '+' means a space, as in the form encoding (RFC 3986
 *     alone gives '+' no meaning; a literal plus is sent as %2B). A '%'
 *     not followed by two hexadecimal digits is malformed (an error here,
 *     where the WHATWG parser would keep it as is);
 *   - names compare as decoded bytes, case-sensitively.
 *
 * Nothing is allocated and the request is not modified: each call scans
 * the query again (queries are short; the request line is bounded by
 * http_limits.max_request_line). Any thread; the functions only read @req.
 */
#ifndef CORING_HTTP_QUERY_H
#define CORING_HTTP_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "coring/http/parser.h"

/*
 * http_query_param - the value of the query parameter @name (a
 * NUL-terminated, already decoded name) of @req, percent-decoded into
 * @buf, which holds @cap bytes (the value and a terminating NUL). *@len
 * gets the decoded length in bytes (the value may itself contain NUL
 * bytes, from %00); @len may be NULL.
 * Returns 0, or:
 *   -ENOENT  no parameter of that name (pairs whose name holds a malformed
 *            escape never match);
 *   -EEXIST  the name appears more than once ("?limit=1&limit=2"): which
 *            one was meant is not knowable, so neither is taken;
 *   -EINVAL  the value holds a malformed escape ("%", "%4", "%zz");
 *   -ENOSPC  the decoded value and its NUL do not fit in @cap bytes; *@len
 *            then gets the length the value needs (without the NUL).
 * On an error @buf is left as an empty string when @cap > 0.
 */
int http_query_param(const http_request *req, const char *name, char *buf, size_t cap,
                     size_t *len);

/*
 * http_query_int64 - the query parameter @name of @req as a decimal
 * integer in [@min, @max], into *@out (untouched on any error). The value,
 * once percent-decoded, must be an optional '-' and one or more decimal
 * digits, nothing else (no '+', no space, no "0x"); leading zeros are
 * allowed.
 * Returns 0, or -ENOENT (absent: the caller applies its default), -EEXIST
 * (repeated), -EINVAL (a malformed escape, an empty value, or not a
 * decimal integer) or -ERANGE (an integer outside [@min, @max], including
 * one that does not fit int64_t).
 */
int http_query_int64(const http_request *req, const char *name, int64_t min, int64_t max,
                     int64_t *out);

#endif
