/*
 * HTTP/1.1 request parser (RFC 9112), in place, never allocating.
 *
 * http_parse_request() reads the request line and header section from the
 * caller's buffer and fills an http_request whose strings point into that
 * buffer. It returns the number of bytes the request line and headers take
 * (up to and including the empty line), HTTP_PARSE_INCOMPLETE when more
 * bytes are needed, or HTTP_PARSE_ERROR with req->error_status set to the
 * status to answer (the connection must then be closed: after a framing
 * error nothing that follows can be trusted). It may be called again on the
 * same buffer after more bytes arrive: given the http_parse_progress of the
 * last call, it searches only the bytes that arrived since (and re-reads a
 * bounded few), so that a header section received a byte at a time costs
 * time linear in its length (picohttpparser's last_len contract); the
 * section is parsed once, when it is whole.
 *
 * Strictness (RFC 9112 sections 2.2, 3, 5, 6, 7 and 11): a bare CR
 * anywhere, obs-fold, whitespace between a field name and its colon,
 * invalid token characters in the method or a field name, control
 * characters in a field value or the request target, a missing or
 * malformed HTTP-version, Transfer-Encoding together with Content-Length,
 * differing or malformed Content-Length values, Transfer-Encoding whose
 * final coding is not chunked, and any of these over their limits are
 * rejected, and so is a Host field whose value is not uri-host [":" port]
 * (RFC 9110 section 7.2, RFC 3986 section 3.2.2) or has an empty uri-host
 * (an "http" URI's host is never empty, RFC 9110 section 4.2.1).
 * A bare CR is never accepted; nor, by default, is a bare LF anywhere in the
 * header section (start-line, field lines, the empty lines before the
 * request-line and the one that ends the section): RFC 9112 section 2.2
 * lets a recipient take it as a line end, but a proxy in front that keeps it
 * inside a field value then disagrees with us about where the header
 * section ends (request smuggling). http_limits.allow_bare_lf accepts it.
 * HTTP/1.2 and later minor versions are read as HTTP/1.1 (RFC 9110 section
 * 2.5).
 *
 * Status chosen for each error: 400 for syntax and framing, 414 when the
 * request target alone is over the limit, 431 when the header section is,
 * 413 when Content-Length exceeds the body limit, 501 for a transfer coding
 * other than chunked (and for a method longer than 32 bytes), 505 for an
 * HTTP version other than 1.0 or 1.1.
 */
#ifndef CORING_HTTP_PARSER_H
#define CORING_HTTP_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_PARSE_INCOMPLETE (-1)
#define HTTP_PARSE_ERROR (-2)

#define HTTP_MAX_HEADERS_DEFAULT 100
#define HTTP_MAX_HEADER_BYTES_DEFAULT (16u * 1024u)
#define HTTP_MAX_BODY_BYTES_DEFAULT (1024u * 1024u)

/* A slice of the caller's buffer; not NUL-terminated. */
typedef struct http_str {
    const char *ptr;
    size_t len;
} http_str;

typedef struct http_header {
    http_str name;   /* as sent; compare with http_str_equal_ci */
    http_str value;  /* leading and trailing spaces/tabs removed */
} http_header;

typedef enum http_method {
    HTTP_METHOD_OTHER = 0, /* a valid token we do not know: see method_str */
    HTTP_GET,
    HTTP_HEAD,
    HTTP_POST,
    HTTP_PUT,
    HTTP_PATCH,
    HTTP_DELETE,
    HTTP_OPTIONS,
    HTTP_CONNECT,
    HTTP_TRACE,
} http_method;

typedef struct http_limits {
    size_t max_header_bytes; /* request line + headers, bytes (16 KiB) */
    size_t max_headers;      /* header fields (100); must be <= the array given */
    size_t max_body_bytes;   /* decoded body, bytes (1 MiB) */
    bool allow_bare_lf;      /* take a bare LF as a line end in the header
                              * section (false: 400); unsafe behind a proxy */
} http_limits;

typedef struct http_request {
    http_method method;
    http_str method_str;
    http_str target;         /* request-target as sent */
    http_str path;           /* target up to '?' (origin-form); whole target otherwise */
    http_str query;          /* after '?', without it; len 0 if none */
    int minor_version;       /* 0 or 1 (HTTP/1.0, HTTP/1.1) */

    http_header *headers;    /* caller's array; filled with num_headers entries */
    size_t num_headers;

    /* Framing, derived from the headers. */
    bool has_content_length;
    uint64_t content_length;
    bool chunked;            /* Transfer-Encoding: chunked (final coding) */
    bool keep_alive;         /* after this request, per RFC 9112 9.3 */
    bool expect_continue;    /* Expect: 100-continue */
    bool has_host;
    const http_str *request_id; /* the first X-Request-Id field's value (in headers), or NULL */

    int error_status;        /* set when HTTP_PARSE_ERROR is returned */
    const char *error;       /* static, short English reason for the log/body */
} http_request;

/*
 * Where the scan of one request's header section stopped, kept by the
 * caller between calls on the same buffer while they return
 * HTTP_PARSE_INCOMPLETE. Zero it for each new request (and when the bytes
 * before the request move to another offset). picohttpparser's last_len
 * alone is not enough here: the empty lines allowed before the request line
 * (RFC 9112 section 2.2) and the request line itself, checked before the
 * section ends, would have to be read again from their first byte each
 * time; so their ends are kept too. Offsets are from the buffer's start.
 */
typedef struct http_parse_progress {
    size_t scanned;    /* the buffer's length at the last call: no end of the
                        * header section and no error found in it */
    size_t line_start; /* where the empty lines before the request line end
                        * (so far, while they are all there is) */
    size_t line_end;   /* just past the request line; 0 until it has ended */
    size_t bytes_read; /* bytes read by every call for this request, re-reads
                        * included: the parser's cost, for statistics */
} http_parse_progress;

/* http_limits_default - the defaults above; bare LF not allowed. */
http_limits http_limits_default(void);

/*
 * http_parse_request - parse the request line and headers at @buf.
 * @buf, @len: received bytes; not modified. @progress: NULL to parse from
 * the first byte, or the progress of the earlier calls for this request on
 * the same bytes (a prefix of @buf, @len not smaller), zeroed before the
 * first; updated when the result is HTTP_PARSE_INCOMPLETE. @req->headers
 * must point to an array of at least @lim->max_headers entries before the
 * call; @lim NULL: http_limits_default().
 * Returns the header section's length in bytes (> 0), HTTP_PARSE_INCOMPLETE
 * (more bytes needed; if @len already exceeds max_header_bytes the result
 * is HTTP_PARSE_ERROR with 431 or 414 instead), or HTTP_PARSE_ERROR with
 * req->error_status and req->error set. With or without @progress the
 * result for the same bytes is the same. Any thread; pure but for
 * @progress and @req.
 */
int http_parse_request(const char *buf, size_t len, http_parse_progress *progress,
                       http_request *req, const http_limits *lim);

/*
 * Chunked transfer coding (RFC 9112 section 7.1), decoded in place.
 *
 * http_chunked_decode() consumes the chunked body at @buf (length *@len)
 * and moves the decoded data to the front of @buf. It can be called again as
 * more bytes arrive, with @buf pointing at the first byte not yet consumed
 * and the decoder state kept: the decoded bytes are always written at the
 * start of the given @buf, so callers append the output each time.
 * On return *@len is the number of decoded bytes now at @buf.
 * Chunk extensions are checked against chunk-ext (RFC 9112 section 7.1.1:
 * BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ], BWS nowhere
 * else) and discarded; trailer fields are read and discarded.
 * Returns the number of input bytes consumed after the last-chunk and
 * trailers once the body is complete (>= 0), HTTP_PARSE_INCOMPLETE when the
 * body continues, or HTTP_PARSE_ERROR with error_status and error set: 400
 * for a malformed chunk size, a size over 64 bits, a malformed chunk
 * extension, a chunk-size line of 4,096 bytes or more of size and
 * extensions (with its CR, over 4 KiB), more than 16 KiB of extensions in
 * the whole body, bytes other than CRLF after chunk data, any line of the
 * coding ended by a bare LF; 413 ("body too large") when the decoded size
 * passes max_body; 431 for a trailer section over 8 KiB (its final CRLF
 * included). The state is only in @d, so a body may arrive in any pieces.
 */
typedef struct http_chunked_decoder {
    int state;            /* internal */
    uint64_t remaining;   /* bytes left in the current chunk */
    uint64_t total;       /* decoded bytes so far */
    uint64_t max_body;    /* limit on total, bytes */
    size_t hex_digits;    /* digits read of the current size */
    size_t line_bytes;    /* bytes of the current size/trailer line */
    size_t ext_bytes;     /* bytes of chunk extensions so far, all lines */
    int error_status;     /* set with HTTP_PARSE_ERROR */
    const char *error;    /* static, short reason, set with HTTP_PARSE_ERROR */
} http_chunked_decoder;

/* http_chunked_init - start a body with a limit of @max_body decoded bytes. */
void http_chunked_init(http_chunked_decoder *d, uint64_t max_body);

ssize_t http_chunked_decode(http_chunked_decoder *d, char *buf, size_t *len);

/* http_str_equal_ci - ASCII case-insensitive comparison with a C string. */
bool http_str_equal_ci(http_str s, const char *lit);

/* http_request_header - the first header named @name (case-insensitive),
 * or NULL. */
const http_str *http_request_header(const http_request *req, const char *name);

#endif
