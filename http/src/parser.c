/*
 * HTTP/1.1 request parser and chunked decoder (RFC 9112). See
 * coring/http/parser.h.
 *
 * Every request a connection serves goes through http_parse_request(), so it
 * works in place on the receive buffer and never allocates. A header section
 * that arrives whole (nearly every one) is parsed in one pass, each byte read
 * once; one that does not is read about twice: once to find the end of the
 * header section and once to parse it. A header section that arrives over
 * many reads is searched from where the last call stopped (picohttpparser's
 * last_len, kept in an http_parse_progress), so that a header trickled a byte
 * at a time costs time linear in its length, not quadratic; it is parsed
 * once, when whole.
 * It is strict where leniency has led to request smuggling in other servers:
 * framing headers, bare CR, obs-fold and whitespace before a colon are
 * rejected rather than guessed at.
 */
#include "coring/http/parser.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <netinet/in.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* A method longer than this is answered 501 (RFC 9112 section 3: a server
 * that receives a method longer than any it implements SHOULD send 501). */
#define METHOD_MAX_LEN 32

/* The longest tail of a request line after its request-target that a call
 * can leave incomplete: SP and "HTTP/1.1\r", its line end not yet there. A
 * resumed scan of the request-target starts this far back, so that it
 * finds the SP that ended it if the last call had seen that SP. */
#define REQUEST_LINE_TAIL_MAX 10

/* Bounds of a chunk-size line (with its extensions) and of the trailer
 * section: they are read and thrown away, so they need a limit of their own. */
#define CHUNK_SIZE_LINE_MAX 4096u
#define CHUNK_TRAILER_MAX (8u * 1024u)
/* Chunk extensions are read, checked and thrown away: besides each size
 * line's 4 KiB, a body may carry at most this many bytes of them in all (so
 * that 1-byte chunks cannot each bring 4 KiB of input that decodes to
 * nothing). Counted from each ";" to the CR that ends its line. */
#define CHUNK_EXT_TOTAL_MAX (16u * 1024u)

/* tchar (RFC 9110 section 5.6.2): the bytes of a method and a field name. */
static const unsigned char tchar_table[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1,         ['&'] = 1,         ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,         ['^'] = 1,         ['_'] = 1,
    ['`'] = 1, ['|'] = 1, ['~'] = 1, ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

/* field-vchar, SP and HTAB (RFC 9110 section 5.5): the bytes of a field value,
 * obs-text included. NUL, the other controls and DEL are not. */
static const unsigned char value_table[256] = {
    ['\t'] = 1,
    [0x20 ... 0x7e] = 1,
    [0x80 ... 0xff] = 1,
};

/* The bytes of a request-target: visible ASCII, no space (RFC 9112 section
 * 3.2 and RFC 3986 section 2; a server rejects anything else with 400). */
static const unsigned char target_table[256] = {
    [0x21 ... 0x7e] = 1,
};

static inline bool is_tchar(char c)
{
    return tchar_table[(unsigned char)c];
}

static inline bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static inline unsigned char ascii_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + ('a' - 'A')) : c;
}

/* Case-insensitive comparison of @n bytes at @s with the lower-case @lit. */
static bool equal_lower(const char *s, const char *lit, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ascii_lower((unsigned char)s[i]) != (unsigned char)lit[i])
            return false;
    return true;
}

/*
 * Is the field name at @s (@n bytes, all tchar: parse_fields checked them)
 * the lower-case @lit, a name of letters and '-'? Eight or four bytes at a
 * time, each OR 0x20: that lowers a letter and changes no other tchar into
 * a letter or '-' (of the bytes that OR 0x20 makes '-', 0x0d is no tchar),
 * so the comparison is exact. @n is 4 or more (the names on_field looks
 * for); the last word overlaps the one before it.
 */
static inline bool name_equal(const char *s, const char *lit, size_t n)
{
    if (n < 8) {
        uint32_t a, b, x, y;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(&x, lit, 4);
        memcpy(&y, lit + n - 4, 4);
        return ((a | 0x20202020u) == x) & ((b | 0x20202020u) == y);
    }
    const uint64_t lower = 0x2020202020202020u;
    uint64_t a, x;
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&a, s + i, 8);
        memcpy(&x, lit + i, 8);
        if ((a | lower) != x)
            return false;
    }
    memcpy(&a, s + n - 8, 8);
    memcpy(&x, lit + n - 8, 8);
    return (a | lower) == x;
}

bool http_str_equal_ci(http_str s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower((unsigned char)s.ptr[i]) != ascii_lower((unsigned char)lit[i]))
            return false;
    return true;
}

const http_str *http_request_header(const http_request *req, const char *name)
{
    for (size_t i = 0; i < req->num_headers; i++)
        if (http_str_equal_ci(req->headers[i].name, name))
            return &req->headers[i].value;
    return NULL;
}

http_limits http_limits_default(void)
{
    return (http_limits){
        .max_header_bytes = HTTP_MAX_HEADER_BYTES_DEFAULT,
        .max_headers = HTTP_MAX_HEADERS_DEFAULT,
        .max_body_bytes = HTTP_MAX_BODY_BYTES_DEFAULT,
    };
}

/* ------------------------------------------------------------------------ */
/* Scanning                                                                  */

/* The first byte in [p, end) that may not appear in a request-target. */
static const char *scan_target(const char *p, const char *end)
{
#ifdef __SSE2__
    const __m128i low = _mm_set1_epi8(0x21);
    const __m128i del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* Signed compare: 0x80-0xff are negative, so below 0x21 as well. */
        __m128i bad = _mm_or_si128(_mm_cmplt_epi8(x, low), _mm_cmpeq_epi8(x, del));
        int mask = _mm_movemask_epi8(bad);
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && target_table[(unsigned char)*p])
        p++;
    return p;
}

/* The first byte in [p, end) that may not appear in a field value. */
static const char *scan_value(const char *p, const char *end)
{
#ifdef __SSE2__
    const __m128i space = _mm_set1_epi8(0x20);
    const __m128i minus_one = _mm_set1_epi8(-1);
    const __m128i tab = _mm_set1_epi8('\t');
    const __m128i del = _mm_set1_epi8(0x7f);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* Controls are 0x00-0x1f: non-negative and below SP; HTAB is allowed. */
        __m128i ctl = _mm_and_si128(_mm_cmplt_epi8(x, space), _mm_cmpgt_epi8(x, minus_one));
        ctl = _mm_andnot_si128(_mm_cmpeq_epi8(x, tab), ctl);
        int mask = _mm_movemask_epi8(_mm_or_si128(ctl, _mm_cmpeq_epi8(x, del)));
        if (mask)
            return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && value_table[(unsigned char)*p])
        p++;
    return p;
}

/* What the LF at @p says of the header section: where it ends (just past
 * its empty line), @end when it can never be completed, or NULL when this
 * LF does not end it or the bytes after it are not there yet (*@more set
 * then). */
static inline const char *at_lf(const char *p, const char *end, bool allow_bare_lf, bool *more)
{
    if (!allow_bare_lf && p[-1] != '\r')
        return end;
    p++;
    if (p == end) {
        *more = true;
        return NULL;
    }
    if (*p == '\n')
        return allow_bare_lf ? p + 1 : end;
    if (*p == '\r') {
        if (p + 1 == end) {
            *more = true;
            return NULL;
        }
        return p[1] == '\n' ? p + 2 : end;
    }
    return NULL;
}

/*
 * The end of the header section: just past the first empty line (CRLF CRLF,
 * or LF LF when @allow_bare_lf, since RFC 9112 section 2.2 lets a recipient
 * take a bare LF as a line end) whose LF is at @p or after, or NULL when
 * [p, end) holds none yet. A line that starts with a bare CR can never be
 * completed, nor can a section holding a bare LF when !@allow_bare_lf: then
 * @end is returned, for the parser to find that error (or an earlier one)
 * in what there is. @p is the request line's first byte (not an LF:
 * skip_empty_lines() has run) or a byte after it, where an earlier call
 * left off.
 */
static const char *find_header_end(const char *p, const char *end, bool allow_bare_lf)
{
    bool more = false;
#ifdef __SSE2__
    /* Sixteen bytes a step, each LF in them looked at in turn: a request's
     * lines are short, and a memchr call per line cost more than its
     * search (picohttpparser's findchar_fast, for one byte). */
    const __m128i lf = _mm_set1_epi8('\n');
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, lf));
        while (mask) {
            const char *r = at_lf(p + __builtin_ctz(mask), end, allow_bare_lf, &more);
            if (r || more)
                return r;
            mask &= mask - 1;
        }
        p += 16;
    }
#endif
    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        const char *r = at_lf(p, end, allow_bare_lf, &more);
        if (r || more)
            return r;
        p++;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Request line and header section                                           */

/* Framing state gathered from the header fields, checked at the end. */
struct framing {
    size_t hosts;           /* Host fields seen */
    bool content_length;    /* a Content-Length field seen */
    bool transfer_encoding; /* a Transfer-Encoding field seen */
    bool te_chunked;        /* `chunked` among the codings */
    bool te_chunked_twice;  /* ... more than once */
    bool te_chunked_last;   /* ... and last so far */
    bool te_other;          /* a coding other than chunked */
    bool conn_close;        /* Connection: close */
    bool conn_keep_alive;   /* Connection: keep-alive */
    bool expect_continue;   /* Expect: 100-continue */
};

/* Sets the error in @req; returns HTTP_PARSE_ERROR. */
static int reject(http_request *req, int status, const char *why)
{
    req->error_status = status;
    req->error = why;
    return HTTP_PARSE_ERROR;
}

/* reject() for the functions that return a position: NULL, with *ret set. */
static const char *fail(http_request *req, int *ret, int status, const char *why)
{
    *ret = reject(req, status, why);
    return NULL;
}

static const char *need_more(int *ret)
{
    *ret = HTTP_PARSE_INCOMPLETE;
    return NULL;
}

/* After a CR at @p: the byte past its LF, or NULL (bare CR, or more needed). */
static const char *expect_lf(const char *p, const char *end, http_request *req, int *ret)
{
    if (p == end)
        return need_more(ret);
    if (*p != '\n') /* RFC 9112 section 2.2: a bare CR is invalid */
        return fail(req, ret, 400, "bare CR");
    return p + 1;
}

/* A bare LF at the end of a line of the header section: accepted only when
 * the limits allow it (RFC 9112 section 2.2 lets a recipient, but a proxy
 * in front that reads it otherwise disagrees with us about where a field,
 * and so the header section, ends). Returns the byte after it, or NULL with
 * *ret set. */
static const char *bare_lf(const char *p, const http_limits *lim, http_request *req, int *ret)
{
    if (!lim->allow_bare_lf)
        return fail(req, ret, 400, "bare LF");
    return p + 1;
}

/* RFC 9112 section 2.2: a server SHOULD ignore at least one empty line
 * received before the request-line. Returns the request line's first byte,
 * or NULL with *ret set; *@stop is where the skip stopped (the first byte
 * of an empty line not yet complete, when more bytes are needed). */
static const char *skip_empty_lines(const char *p, const char *end, const http_limits *lim,
                                    http_request *req, int *ret, const char **stop)
{
    while (p < end) {
        *stop = p;
        const char *next;
        if (*p == '\n')
            next = bare_lf(p, lim, req, ret);
        else if (*p == '\r')
            next = expect_lf(p + 1, end, req, ret);
        else
            return p;
        if (!next)
            return NULL;
        p = next;
    }
    *stop = p;
    return need_more(ret);
}

static http_method method_from_token(const char *m, size_t n)
{
    /* RFC 9110 section 9.1: methods are case-sensitive. */
    switch (n) {
    case 3:
        if (memcmp(m, "GET", 3) == 0)
            return HTTP_GET;
        if (memcmp(m, "PUT", 3) == 0)
            return HTTP_PUT;
        break;
    case 4:
        if (memcmp(m, "HEAD", 4) == 0)
            return HTTP_HEAD;
        if (memcmp(m, "POST", 4) == 0)
            return HTTP_POST;
        break;
    case 5:
        if (memcmp(m, "PATCH", 5) == 0)
            return HTTP_PATCH;
        if (memcmp(m, "TRACE", 5) == 0)
            return HTTP_TRACE;
        break;
    case 6:
        if (memcmp(m, "DELETE", 6) == 0)
            return HTTP_DELETE;
        break;
    case 7:
        if (memcmp(m, "OPTIONS", 7) == 0)
            return HTTP_OPTIONS;
        if (memcmp(m, "CONNECT", 7) == 0)
            return HTTP_CONNECT;
        break;
    }
    return HTTP_METHOD_OTHER;
}

/* request-line = method SP request-target SP HTTP-version (RFC 9112 section
 * 3). Returns the byte after its line end, or NULL with *ret set. @resume:
 * NULL, or the end of the bytes an earlier call checked and found to be the
 * start of a request line: its request-target is then scanned from a few
 * bytes before it rather than from its first byte. Adds the bytes it reads
 * to *@bytes_read, or counts nothing when @bytes_read is NULL (a caller that
 * parses a whole section counts its bytes at once: the hot path). */
static inline __attribute__((always_inline)) const char *
parse_request_line(const char *p, const char *end, const char *resume,
                                      const http_limits *lim, http_request *req, int *ret,
                                      size_t *bytes_read)
{
    /* method = token (RFC 9110 section 9.1) */
    const char *start = p;
    const char *limit = (size_t)(end - p) > METHOD_MAX_LEN ? p + METHOD_MAX_LEN + 1 : end;
    while (p < limit && is_tchar(*p))
        p++;
    if (p - start > METHOD_MAX_LEN)
        return fail(req, ret, 501, "method too long");
    if (bytes_read)
        *bytes_read += (size_t)(p - start);
    if (p == end)
        return need_more(ret);
    if (p == start || *p != ' ')
        return fail(req, ret, 400, "invalid method");
    req->method_str = (http_str){start, (size_t)(p - start)};
    req->method = method_from_token(start, (size_t)(p - start));
    p++;

    /* request-target (RFC 9112 section 3.2): its form is checked later.
     * Resumed, the bytes before @resume are target bytes already checked,
     * or the target ended in the last REQUEST_LINE_TAIL_MAX of them: the
     * scan from there finds the same first non-target byte. */
    start = p;
    if (resume && resume > start && (size_t)(resume - start) > REQUEST_LINE_TAIL_MAX)
        p = resume - REQUEST_LINE_TAIL_MAX;
    const char *scan_from = p;
    p = scan_target(p, end);
    if (bytes_read)
        *bytes_read += (size_t)(p - scan_from) + (p < end);
    if (p == end)
        return need_more(ret);
    if (p == start || *p != ' ')
        return fail(req, ret, 400, "invalid request-target");
    req->target = (http_str){start, (size_t)(p - start)};
    p++;

    /* HTTP-version = "HTTP/" DIGIT "." DIGIT, case-sensitive (RFC 9112
     * section 2.3). */
    static const char version[] = "HTTP/#.#";
    static const char common[] = "HTTP/1.1\r\n";
    size_t tail = (size_t)(end - p);
    if (bytes_read)
        *bytes_read += tail < sizeof(common) - 1 ? tail : sizeof(common) - 1;
    if (tail >= sizeof(common) - 1 && memcmp(p, common, sizeof(common) - 1) == 0) {
        /* Nearly every request: the loop below in one comparison. */
        req->minor_version = 1;
        return p + sizeof(common) - 1;
    }
    for (size_t i = 0; i < sizeof(version) - 1; i++) {
        if (p + i == end)
            return need_more(ret);
        char c = p[i];
        if (version[i] == '#' ? (c < '0' || c > '9') : c != version[i])
            return fail(req, ret, 400, "invalid HTTP-version");
    }
    if (p[5] != '1') /* RFC 9110 section 15.6.6 */
        return fail(req, ret, 505, "HTTP version not supported");
    /* RFC 9110 section 2.5: a higher minor version of a major version we
     * implement is processed as the highest minor we know (HTTP/1.2 as 1.1). */
    req->minor_version = p[7] > '1' ? 1 : p[7] - '0';
    p += sizeof(version) - 1;

    if (p == end)
        return need_more(ret);
    if (*p == '\r')
        return expect_lf(p + 1, end, req, ret);
    if (*p != '\n')
        return fail(req, ret, 400, "invalid request line");
    return bare_lf(p, lim, req, ret);
}

/* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 section 3.1) */
static bool is_scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '-' || c == '.';
}

/* Sets path and query from the request-target by its form (RFC 9112
 * section 3.2). Returns 0 or -1 with the error set in @req. */
static int split_target(http_request *req)
{
    const char *t = req->target.ptr;
    const char *end = t + req->target.len;

    if (t[0] == '/') { /* origin-form, 3.2.1: absolute-path [ "?" query ] */
        const char *q = memchr(t, '?', req->target.len);
        if (q) {
            req->path = (http_str){t, (size_t)(q - t)};
            req->query = (http_str){q + 1, (size_t)(end - q - 1)};
        } else {
            req->path = req->target;
        }
        return 0;
    }
    if (req->method == HTTP_CONNECT) { /* authority-form, 3.2.3 */
        req->path = req->target;
        return 0;
    }
    if (req->target.len == 1 && t[0] == '*') { /* asterisk-form, 3.2.4 */
        if (req->method != HTTP_OPTIONS)
            goto bad;
        req->path = req->target;
        return 0;
    }

    /* absolute-form, 3.2.2: scheme "://" authority path-abempty [ "?" query ]
     * (RFC 3986 section 3). The path is what a router needs; the authority
     * overrides Host, which the server reads from the target if it cares. */
    if (!((t[0] >= 'a' && t[0] <= 'z') || (t[0] >= 'A' && t[0] <= 'Z')))
        goto bad;
    const char *colon = memchr(t, ':', req->target.len);
    if (!colon || end - colon < 3 || colon[1] != '/' || colon[2] != '/')
        goto bad;
    for (const char *s = t + 1; s < colon; s++)
        if (!is_scheme_char(*s))
            goto bad;
    const char *authority = colon + 3;
    const char *p = authority;
    while (p < end && *p != '/' && *p != '?')
        p++;
    if (p == authority) /* RFC 9110 section 4.2.1: an empty host is invalid */
        goto bad;
    const char *path = p;
    while (p < end && *p != '?')
        p++;
    if (p == path)
        req->path = (http_str){"/", 1}; /* RFC 9110 section 4.2.3 */
    else
        req->path = (http_str){path, (size_t)(p - path)};
    if (p < end)
        req->query = (http_str){p + 1, (size_t)(end - p - 1)};
    return 0;
bad:
    reject(req, 400, "invalid request-target");
    return -1;
}

/*
 * The next element of a comma-separated list (RFC 9110 section 5.6.1) from
 * *p to @end, OWS trimmed, possibly empty; *p moves past it, to NULL after
 * the last. Returns false when the list is exhausted.
 */
static bool next_list_element(const char **p, const char *end, http_str *elem)
{
    const char *s = *p;
    if (!s)
        return false;
    const char *comma = memchr(s, ',', (size_t)(end - s));
    const char *e = comma ? comma : end;
    *p = comma ? comma + 1 : NULL;
    while (s < e && is_ows(*s))
        s++;
    while (e > s && is_ows(e[-1]))
        e--;
    *elem = (http_str){s, (size_t)(e - s)};
    return true;
}

/* Content-Length = 1*DIGIT (RFC 9110 section 8.6). A list of equal values
 * (from one field or several) may be taken as one; anything else is a
 * framing error (RFC 9112 section 6.3, point 5). */
static int on_content_length(http_request *req, struct framing *f, http_str v)
{
    const char *p = v.ptr;
    const char *end = v.ptr + v.len;
    http_str elem;
    while (next_list_element(&p, end, &elem)) {
        if (elem.len == 0)
            return -1;
        uint64_t n = 0;
        for (size_t i = 0; i < elem.len; i++) {
            unsigned d = (unsigned char)elem.ptr[i] - '0';
            if (d > 9 || n > (UINT64_MAX - d) / 10)
                return -1;
            n = n * 10 + d;
        }
        if (f->content_length && n != req->content_length)
            return -1;
        f->content_length = true;
        req->content_length = n;
    }
    return 0;
}

/* transfer-coding = token *( OWS ";" OWS transfer-parameter ) (RFC 9112
 * section 7). Returns 0 or -1 for a malformed element. */
static int on_transfer_encoding(struct framing *f, http_str v)
{
    const char *p = v.ptr;
    const char *end = v.ptr + v.len;
    http_str elem;
    f->transfer_encoding = true;
    while (next_list_element(&p, end, &elem)) {
        if (elem.len == 0) /* RFC 9110 section 5.6.1: empty elements are ignored */
            continue;
        size_t n = 0;
        while (n < elem.len && is_tchar(elem.ptr[n]))
            n++;
        if (n == 0)
            return -1;
        size_t rest = n;
        while (rest < elem.len && is_ows(elem.ptr[rest]))
            rest++;
        bool params = rest < elem.len;
        if (params && elem.ptr[rest] != ';')
            return -1;
        if (n == 7 && equal_lower(elem.ptr, "chunked", 7)) {
            if (params) /* chunked takes no parameters (RFC 9112 section 7.1) */
                return -1;
            f->te_chunked_twice |= f->te_chunked;
            f->te_chunked = true;
            f->te_chunked_last = true;
        } else {
            f->te_other = true;
            f->te_chunked_last = false;
        }
    }
    return 0;
}

/* Connection = #connection-option (RFC 9110 section 7.6.1), options are
 * case-insensitive. */
static void on_connection(struct framing *f, http_str v)
{
    const char *p = v.ptr;
    const char *end = v.ptr + v.len;
    http_str elem;
    while (next_list_element(&p, end, &elem)) {
        if (elem.len == 5 && equal_lower(elem.ptr, "close", 5))
            f->conn_close = true;
        else if (elem.len == 10 && equal_lower(elem.ptr, "keep-alive", 10))
            f->conn_keep_alive = true;
    }
}

/* unreserved / sub-delims (RFC 3986 section 2): the bytes of a reg-name, with
 * pct-encoded triplets, and of an IP-literal with ':' added. A table, as
 * the other classes: every request's Host goes through it. */
static const unsigned char host_table[256] = {
    ['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1,
    ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1, ['+'] = 1,
    [','] = 1, [';'] = 1, ['='] = 1, ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

static inline bool is_host_char(char c)
{
    return host_table[(unsigned char)c];
}

/* Are the 8 bytes at @p all host_table bytes? One branch for eight. */
static inline bool host_chars8(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return host_table[u[0]] & host_table[u[1]] & host_table[u[2]] & host_table[u[3]] &
           host_table[u[4]] & host_table[u[5]] & host_table[u[6]] & host_table[u[7]];
}

/* HEXDIG (RFC 5234 appendix B.1, either case as RFC 3986 section 2.1
 * allows), without isxdigit's call: the Host loop keeps its registers. */
static inline bool is_hex_digit(char c)
{
    unsigned char u = (unsigned char)c;
    return (unsigned char)(u - '0') < 10 || (unsigned char)((u | 0x20) - 'a') < 6;
}

/* IP-literal = "[" ( IPv6address / IPvFuture ) "]" (RFC 3986 section
 * 3.2.2), @p..@end without the brackets. IPvFuture = "v" 1*HEXDIG "."
 * 1*( unreserved / sub-delims / ":" ); IPv6address as inet_pton() reads it
 * (RFC 4291 section 2.2, the grammar RFC 3986 gives). */
static __attribute__((noinline)) bool valid_ip_literal(const char *p, const char *end)
{
    size_t n = (size_t)(end - p);
    if (n > 0 && (*p == 'v' || *p == 'V')) {
        const char *q = p + 1;
        while (q < end && isxdigit((unsigned char)*q))
            q++;
        if (q == p + 1 || q == end || *q != '.' || ++q == end)
            return false;
        for (; q < end; q++)
            if (!is_host_char(*q) && *q != ':')
                return false;
        return true;
    }
    char text[INET6_ADDRSTRLEN];
    struct in6_addr addr;
    if (n == 0 || n >= sizeof(text))
        return false;
    memcpy(text, p, n);
    text[n] = '\0';
    return inet_pton(AF_INET6, text, &addr) == 1;
}

/* Host = uri-host [ ":" port ] (RFC 9110 section 7.2), uri-host = IP-literal /
 * IPv4address / reg-name (RFC 3986 section 3.2.2; a reg-name takes in any
 * IPv4address), port = *DIGIT. The value may be empty only when the target
 * URI has no authority (RFC 9110 section 7.2), and every target this server
 * takes is an "http" URI, whose host must not be empty (RFC 9110 section
 * 4.2.1): so an empty uri-host is invalid here, with or without a port. */
static bool valid_host(http_str v)
{
    const char *p = v.ptr;
    const char *end = v.ptr + v.len;
    if (p == end || *p == ':')
        return false;
    if (*p == '[') {
        const char *start = ++p;
        while (p < end && *p != ']')
            p++;
        if (p == end || !valid_ip_literal(start, p))
            return false;
        p++;
    } else {
        /* Runs of host_table bytes, eight at a time while all eight are
         * (every request's Host comes here), a pct-encoded triplet between
         * them; what ends a run otherwise is ':' or an invalid byte, told
         * apart below. */
        for (;;) {
            while (end - p >= 8 && host_chars8(p))
                p += 8;
            while (p < end && is_host_char(*p))
                p++;
            if (p == end || *p != '%')
                break;
            if (end - p < 3 || !is_hex_digit(p[1]) || !is_hex_digit(p[2]))
                return false;
            p += 3;
        }
    }
    if (p < end && *p++ != ':')
        return false;
    for (; p < end; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

/* Looks at the fields that frame the message or the connection (and picks
 * X-Request-Id). Returns 0, or -1 with the error set in @req. */
static int on_field(http_request *req, struct framing *f, http_str name, http_str value)
{
    switch (name.len) {
    case 4:
        if (name_equal(name.ptr, "host", 4)) {
            /* RFC 9112 section 3.2: 400 for more than one Host field */
            if (++f->hosts > 1) {
                reject(req, 400, "more than one Host");
                return -1;
            }
            /* ... and for an invalid one */
            if (!valid_host(value)) {
                reject(req, 400, "invalid Host");
                return -1;
            }
        }
        break;
    case 6:
        if (name_equal(name.ptr, "expect", 6) && value.len == 12 &&
            equal_lower(value.ptr, "100-continue", 12))
            f->expect_continue = true;
        break;
    case 10:
        if (name_equal(name.ptr, "connection", 10))
            on_connection(f, value);
        break;
    case 12:
        /* Not framing: picked here so that the server need not search the
         * fields for it on every request (coring/http/request_id.h). */
        if (!req->request_id && name_equal(name.ptr, "x-request-id", 12))
            req->request_id = &req->headers[req->num_headers - 1].value;
        break;
    case 14:
        if (name_equal(name.ptr, "content-length", 14) && on_content_length(req, f, value) < 0) {
            reject(req, 400, "invalid Content-Length");
            return -1;
        }
        break;
    case 17:
        if (name_equal(name.ptr, "transfer-encoding", 17) && on_transfer_encoding(f, value) < 0) {
            reject(req, 400, "invalid Transfer-Encoding");
            return -1;
        }
        break;
    }
    return 0;
}

/* field-line = field-name ":" OWS field-value OWS (RFC 9112 section 5), each
 * ended by CRLF (or LF, when allowed), up to the empty line. Returns the byte
 * after the empty line, or NULL with *ret set. */
static const char *parse_fields(const char *p, const char *end, http_request *req,
                                const http_limits *lim, struct framing *f, int *ret)
{
    for (;;) {
        if (p == end)
            return need_more(ret);
        if (*p == '\r')
            return expect_lf(p + 1, end, req, ret);
        if (*p == '\n')
            return bare_lf(p, lim, req, ret);
        /* RFC 9112 section 5.2: obs-fold is rejected; section 2.2: so is
         * whitespace between the start-line and the first field. */
        if (is_ows(*p))
            return fail(req, ret, 400, "obs-fold or leading whitespace");

        const char *name = p;
        while (p < end && is_tchar(*p))
            p++;
        if (p == end)
            return need_more(ret);
        /* RFC 9112 section 5.1: no whitespace between name and colon. */
        if (p == name || *p != ':')
            return fail(req, ret, 400, "invalid field name");
        size_t name_len = (size_t)(p - name);
        p++;

        while (p < end && is_ows(*p))
            p++;
        const char *value = p;
        p = scan_value(p, end);
        if (p == end)
            return need_more(ret);
        const char *value_end = p;
        if (*p == '\r') {
            p = expect_lf(p + 1, end, req, ret);
            if (!p)
                return NULL;
        } else if (*p == '\n') {
            p = bare_lf(p, lim, req, ret);
            if (!p)
                return NULL;
        } else { /* RFC 9110 section 5.5: NUL, CTL and DEL are invalid */
            return fail(req, ret, 400, "invalid character in field value");
        }
        while (value_end > value && is_ows(value_end[-1]))
            value_end--;

        if (req->num_headers >= lim->max_headers) /* RFC 6585 section 5 */
            return fail(req, ret, 431, "too many header fields");
        http_header *h = &req->headers[req->num_headers++];
        h->name = (http_str){name, name_len};
        h->value = (http_str){value, (size_t)(value_end - value)};
        if (on_field(req, f, h->name, h->value) < 0) {
            *ret = HTTP_PARSE_ERROR;
            return NULL;
        }
    }
}

/* The checks that need the whole header section. Returns 0 or
 * HTTP_PARSE_ERROR with the error set in @req. */
static int check_framing(http_request *req, const http_limits *lim, const struct framing *f)
{
    /* RFC 9112 section 3.2: 400 for an HTTP/1.1 request without Host. */
    if (req->minor_version == 1 && f->hosts == 0)
        return reject(req, 400, "missing Host");
    req->has_host = f->hosts != 0;

    if (f->transfer_encoding) {
        /* RFC 9112 section 6.1: Transfer-Encoding in HTTP/1.0 is faulty
         * framing; with Content-Length it is a smuggling attempt. */
        if (req->minor_version == 0)
            return reject(req, 400, "Transfer-Encoding in HTTP/1.0");
        if (f->content_length)
            return reject(req, 400, "Transfer-Encoding with Content-Length");
        /* RFC 9112 section 6.1: chunked is applied once; section 6.3,
         * point 4: it must be the final coding. */
        if (f->te_chunked_twice)
            return reject(req, 400, "chunked applied more than once");
        if (f->te_chunked && !f->te_chunked_last)
            return reject(req, 400, "chunked is not the final coding");
        /* RFC 9112 section 6.1: 501 for a coding the server does not know. */
        if (f->te_other)
            return reject(req, 501, "transfer coding not implemented");
        if (!f->te_chunked)
            return reject(req, 400, "empty Transfer-Encoding");
        req->chunked = true;
    }
    req->has_content_length = f->content_length;
    if (f->content_length && req->content_length > lim->max_body_bytes)
        return reject(req, 413, "body too large");

    /* RFC 9112 section 9.3: HTTP/1.1 persists unless "close"; HTTP/1.0
     * persists only with "keep-alive". */
    if (f->conn_close)
        req->keep_alive = false;
    else
        req->keep_alive = req->minor_version == 1 || f->conn_keep_alive;
    /* RFC 9110 section 10.1.1: 100-continue in HTTP/1.0 is ignored. */
    req->expect_continue = f->expect_continue && req->minor_version == 1;
    return 0;
}

static void reset_request(http_request *req)
{
    http_header *headers = req->headers;
    *req = (http_request){0};
    req->headers = headers;
}

/*
 * The header section did not end within max_header_bytes: report the first
 * error in it, or 414 when the request line itself did not end, or 431.
 */
static int too_long(const char *p, const char *end, http_request *req, const http_limits *lim,
                    size_t *bytes_read)
{
    int ret = HTTP_PARSE_ERROR;
    struct framing f = {0};
    *bytes_read += (size_t)(end - p);
    p = parse_request_line(p, end, NULL, lim, req, &ret, NULL);
    if (!p) {
        if (ret == HTTP_PARSE_INCOMPLETE)
            return reject(req, 414, "request-target too long");
        return ret;
    }
    if (split_target(req) < 0)
        return HTTP_PARSE_ERROR;
    if (!parse_fields(p, end, req, lim, &f, &ret) && ret == HTTP_PARSE_ERROR)
        return ret;
    return reject(req, 431, "header section too large");
}

/* The whole header section is in [p, section_end), or the section is
 * known to be bad there: parse it, once. Returns its length from @buf or
 * HTTP_PARSE_ERROR. */
static int parse_section(const char *buf, const char *p, const char *section_end, http_request *req,
                         const http_limits *lim, size_t *bytes_read)
{
    /* Every line below ends before section_end, so an INCOMPLETE from here
     * on cannot happen and would be a malformed line. */
    int ret = HTTP_PARSE_ERROR;
    struct framing f = {0};
    *bytes_read += (size_t)(section_end - p);
    p = parse_request_line(p, section_end, NULL, lim, req, &ret, NULL);
    if (p && split_target(req) < 0)
        return HTTP_PARSE_ERROR;
    if (p)
        p = parse_fields(p, section_end, req, lim, &f, &ret);
    if (!p) {
        if (ret == HTTP_PARSE_INCOMPLETE)
            return reject(req, 400, "malformed header section");
        return ret;
    }
    if (check_framing(req, lim, &f) < 0)
        return HTTP_PARSE_ERROR;
    return (int)(p - buf);
}

int http_parse_request(const char *buf, size_t len, http_parse_progress *progress,
                       http_request *req, const http_limits *lim)
{
    http_limits defaults;
    if (!lim) {
        defaults = http_limits_default();
        lim = &defaults;
    }
    http_parse_progress fresh = {0};
    http_parse_progress *pr = progress ? progress : &fresh;
    if (pr->scanned > len) /* not this buffer's: start over */
        *pr = (http_parse_progress){.bytes_read = pr->bytes_read};
    reset_request(req);
    if (len == 0)
        return HTTP_PARSE_INCOMPLETE;

    size_t max = lim->max_header_bytes < INT_MAX ? lim->max_header_bytes : INT_MAX;
    const char *end = buf + (len < max ? len : max);
    int ret = HTTP_PARSE_ERROR;
    /* The empty lines before the request line, from where the last call's
     * skip stopped; then the end of the section, searched from the request
     * line's start or from the last LF the last call may have left
     * undecided (the 2 bytes after an LF say whether it ends the section). */
    const char *stop = buf + pr->line_start;
    const char *p = stop;
    /* The first look at a request that starts with its request line, as
     * nearly every one does (each of a pipelined batch): the section is
     * parsed at once, each byte read once, with no search for its end
     * first (picohttpparser's way). Parsed whole, it is what the search
     * and parse below make of it: its lines all end in CRLF (or LF where
     * allowed), so the first empty line either finds is its end. Anything
     * else, incomplete or an error (whose report must not depend on where
     * the bytes were cut), is done again the way below, from the start. */
    if (pr->scanned == 0 && stop < end && *stop != '\r' && *stop != '\n') {
        struct framing f = {0};
        const char *q = parse_request_line(stop, end, NULL, lim, req, &ret, NULL);
        if (q && split_target(req) == 0 && (q = parse_fields(q, end, req, lim, &f, &ret)) &&
            check_framing(req, lim, &f) == 0) {
            pr->bytes_read += (size_t)(q - stop);
            return (int)(q - buf);
        }
        pr->bytes_read += (size_t)(end - stop);
        reset_request(req);
        ret = HTTP_PARSE_ERROR;
    }
    /* Empty lines first (rare), or nothing received past them yet. */
    if (stop >= end || *stop == '\r' || *stop == '\n') {
        p = skip_empty_lines(stop, end, lim, req, &ret, &stop);
        pr->bytes_read += (size_t)((p ? p : stop) - (buf + pr->line_start));
    }
    const char *section_end = NULL;
    if (p) {
        const char *from = pr->scanned > 2 && buf + pr->scanned - 2 > p ? buf + pr->scanned - 2 : p;
        section_end = find_header_end(from, end, lim->allow_bare_lf);
        pr->bytes_read += (size_t)((section_end ? section_end : end) - from);
    }
    if (section_end)
        return parse_section(buf, p, section_end, req, lim, &pr->bytes_read);

    if (!p && ret == HTTP_PARSE_ERROR)
        return ret;
    if (len >= max) /* no end within the limit: it will not fit */
        return p ? too_long(p, end, req, lim, &pr->bytes_read)
                 : reject(req, 431, "header section too large");
    /* Reject a request line that is already wrong (a TLS handshake, say)
     * without waiting for the rest: while it has not ended, it is checked
     * again with each call, its request-target from where the last call
     * left off. */
    if (p && pr->line_end == 0) {
        const char *resume = pr->scanned ? buf + pr->scanned : NULL;
        const char *line_end = parse_request_line(p, end, resume, lim, req, &ret, &pr->bytes_read);
        if (!line_end && ret == HTTP_PARSE_ERROR)
            return ret;
        if (line_end)
            pr->line_end = (size_t)(line_end - buf);
    }
    pr->scanned = len;
    pr->line_start = (size_t)((p ? p : stop) - buf);
    reset_request(req);
    return HTTP_PARSE_INCOMPLETE;
}

/* ------------------------------------------------------------------------ */
/* Chunked transfer coding (RFC 9112 section 7.1)                            */

enum chunk_state {
    CHUNK_SIZE = 0,        /* chunk-size = 1*HEXDIG */
    CHUNK_SIZE_BWS,        /* BWS after the size, before ";" (7.1.1) */
    CHUNK_EXT_NAME_START,  /* after ";": BWS, then chunk-ext-name */
    CHUNK_EXT_NAME,        /* chunk-ext-name = token */
    CHUNK_EXT_NAME_BWS,    /* BWS after the name: "=" or ";" follows */
    CHUNK_EXT_VALUE_START, /* after "=": BWS, then chunk-ext-val */
    CHUNK_EXT_TOKEN,       /* chunk-ext-val = token */
    CHUNK_EXT_QUOTED,      /* chunk-ext-val = quoted-string, inside the quotes */
    CHUNK_EXT_QUOTED_PAIR, /* after a backslash in the quoted-string */
    CHUNK_EXT_QUOTED_END,  /* after the closing quote */
    CHUNK_EXT_BWS,         /* BWS after a chunk-ext-val, before ";" */
    CHUNK_SIZE_LF,         /* CR seen at the end of the size line */
    CHUNK_DATA,            /* chunk-data: d->remaining bytes left */
    CHUNK_DATA_END,        /* CRLF expected after chunk-data */
    CHUNK_DATA_LF,         /* CR seen after chunk-data */
    CHUNK_TRAILER_START,   /* start of a trailer field line or the final line */
    CHUNK_TRAILER_NAME,    /* field-name of a trailer field */
    CHUNK_TRAILER_VALUE,   /* the rest of a trailer field line */
    CHUNK_TRAILER_LF,      /* CR seen at the end of a trailer field line */
    CHUNK_LAST_LF,         /* CR seen on the final empty line */
    CHUNK_DONE,
    CHUNK_FAILED,
};

/* In the chunk-ext of a size line (RFC 9112 section 7.1.1), past its first ";". */
static bool is_ext_state(int state)
{
    return state >= CHUNK_EXT_NAME_START && state <= CHUNK_EXT_BWS;
}

void http_chunked_init(http_chunked_decoder *d, uint64_t max_body)
{
    *d = (http_chunked_decoder){.state = CHUNK_SIZE, .max_body = max_body};
}

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = ascii_lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The size line has ended: on to the data, or to the trailers after the
 * last-chunk. Returns 0, or an HTTP status. */
static int chunk_size_done(http_chunked_decoder *d)
{
    d->line_bytes = 0;
    if (d->hex_digits == 0)
        return 400;
    d->hex_digits = 0;
    if (d->remaining == 0) {
        d->state = CHUNK_TRAILER_START;
        return 0;
    }
    if (d->total > d->max_body || d->remaining > d->max_body - d->total)
        return 413;
    d->state = CHUNK_DATA;
    return 0;
}

/* One byte of everything but chunk-data. Returns 0, or an HTTP status.
 * Every line of the chunked coding ends in CRLF (RFC 9112 section 7.1): the
 * bare-LF leniency of section 2.2 covers the start-line and header fields
 * only, and a chunk parser that accepts LF where a proxy in front does not
 * (or the reverse) lets a request be smuggled inside another's body. */
static int chunk_byte(http_chunked_decoder *d, unsigned char c)
{
    switch (d->state) {
    case CHUNK_SIZE: {
        int h = hex_value(c);
        if (h >= 0) {
            if (d->remaining >> 60) /* a 17th significant digit */
                return 400;
            d->remaining = (d->remaining << 4) | (uint64_t)h;
            d->hex_digits++;
            break;
        }
        if (d->hex_digits == 0)
            return 400;
        if (c == '\r')
            d->state = CHUNK_SIZE_LF;
        else if (c == ';')
            d->state = CHUNK_EXT_NAME_START;
        else if (is_ows((char)c))
            d->state = CHUNK_SIZE_BWS;
        else
            return 400;
        break;
    }
    case CHUNK_SIZE_BWS:
    case CHUNK_EXT_BWS:
        if (c == ';')
            d->state = CHUNK_EXT_NAME_START;
        else if (!is_ows((char)c))
            return 400;
        break;
    /* chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
     * (RFC 9112 section 7.1.1), chunk-ext-val = token / quoted-string (RFC
     * 9110 section 5.6.4). BWS only where the grammar puts it: none between
     * the last extension and the CRLF. */
    case CHUNK_EXT_NAME_START:
        if (tchar_table[c])
            d->state = CHUNK_EXT_NAME;
        else if (!is_ows((char)c))
            return 400;
        break;
    case CHUNK_EXT_NAME:
    case CHUNK_EXT_TOKEN:
        if (c == '\r')
            d->state = CHUNK_SIZE_LF;
        else if (c == ';')
            d->state = CHUNK_EXT_NAME_START;
        else if (c == '=' && d->state == CHUNK_EXT_NAME)
            d->state = CHUNK_EXT_VALUE_START;
        else if (is_ows((char)c))
            d->state = d->state == CHUNK_EXT_NAME ? CHUNK_EXT_NAME_BWS : CHUNK_EXT_BWS;
        else if (!tchar_table[c])
            return 400;
        break;
    case CHUNK_EXT_NAME_BWS:
        if (c == '=')
            d->state = CHUNK_EXT_VALUE_START;
        else if (c == ';')
            d->state = CHUNK_EXT_NAME_START;
        else if (!is_ows((char)c))
            return 400;
        break;
    case CHUNK_EXT_VALUE_START:
        if (tchar_table[c])
            d->state = CHUNK_EXT_TOKEN;
        else if (c == '"')
            d->state = CHUNK_EXT_QUOTED;
        else if (!is_ows((char)c))
            return 400;
        break;
    case CHUNK_EXT_QUOTED:
        /* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
        if (c == '"')
            d->state = CHUNK_EXT_QUOTED_END;
        else if (c == '\\')
            d->state = CHUNK_EXT_QUOTED_PAIR;
        else if (!value_table[c])
            return 400;
        break;
    case CHUNK_EXT_QUOTED_PAIR:
        /* quoted-pair = "\" ( HTAB / SP / VCHAR / obs-text ) */
        if (!value_table[c])
            return 400;
        d->state = CHUNK_EXT_QUOTED;
        break;
    case CHUNK_EXT_QUOTED_END:
        if (c == '\r')
            d->state = CHUNK_SIZE_LF;
        else if (c == ';')
            d->state = CHUNK_EXT_NAME_START;
        else if (is_ows((char)c))
            d->state = CHUNK_EXT_BWS;
        else
            return 400;
        break;
    case CHUNK_SIZE_LF:
        if (c != '\n') /* RFC 9112 section 2.2: bare CR */
            return 400;
        return chunk_size_done(d);
    case CHUNK_DATA_END:
        if (c != '\r')
            return 400;
        d->state = CHUNK_DATA_LF;
        break;
    case CHUNK_DATA_LF:
        if (c != '\n')
            return 400;
        d->state = CHUNK_SIZE;
        break;
    case CHUNK_TRAILER_START:
        if (c == '\r')
            d->state = CHUNK_LAST_LF;
        else if (tchar_table[c])
            d->state = CHUNK_TRAILER_NAME;
        else /* obs-fold, or no field name (RFC 9112 section 5) */
            return 400;
        break;
    case CHUNK_TRAILER_NAME:
        if (c == ':')
            d->state = CHUNK_TRAILER_VALUE;
        else if (!tchar_table[c])
            return 400;
        break;
    case CHUNK_TRAILER_VALUE:
        if (c == '\r')
            d->state = CHUNK_TRAILER_LF;
        else if (!value_table[c]) /* a bare LF too */
            return 400;
        break;
    case CHUNK_TRAILER_LF:
        if (c != '\n')
            return 400;
        d->state = CHUNK_TRAILER_START;
        break;
    case CHUNK_LAST_LF:
        if (c != '\n')
            return 400;
        d->state = CHUNK_DONE;
        break;
    default:
        return 400;
    }
    return 0;
}

ssize_t http_chunked_decode(http_chunked_decoder *d, char *buf, size_t *len)
{
    size_t in = 0;
    size_t out = 0;
    size_t n = *len;

    if (d->state == CHUNK_FAILED) {
        *len = 0;
        return HTTP_PARSE_ERROR;
    }
    while (in < n && d->state != CHUNK_DONE) {
        if (d->state == CHUNK_DATA) {
            size_t take = n - in;
            if (take > d->remaining)
                take = (size_t)d->remaining;
            if (out != in)
                memmove(buf + out, buf + in, take);
            in += take;
            out += take;
            d->remaining -= take;
            d->total += take;
            if (d->remaining == 0)
                d->state = CHUNK_DATA_END;
            continue;
        }

        bool in_ext = is_ext_state(d->state);
        int status = chunk_byte(d, (unsigned char)buf[in++]);
        const char *why = NULL;
        if (status == 0 && d->state >= CHUNK_TRAILER_START && d->state != CHUNK_DONE &&
            ++d->line_bytes > CHUNK_TRAILER_MAX) {
            status = 431;
            why = "trailer section too large";
        } else if (status == 0 && d->state < CHUNK_DATA && ++d->line_bytes > CHUNK_SIZE_LINE_MAX) {
            status = 400;
            why = "chunk-size line too long";
        } else if (status == 0 && (in_ext || is_ext_state(d->state)) &&
                   ++d->ext_bytes > CHUNK_EXT_TOTAL_MAX) {
            status = 400;
            why = "chunk extensions too long";
        } else if (status == 413) {
            why = "body too large";
        } else if (status) {
            why = in_ext ? "invalid chunk extension" : "malformed chunked body";
        }
        if (status) {
            d->state = CHUNK_FAILED;
            d->error_status = status;
            d->error = why;
            *len = out;
            return HTTP_PARSE_ERROR;
        }
    }
    *len = out;
    if (d->state == CHUNK_DONE)
        return (ssize_t)in;
    return HTTP_PARSE_INCOMPLETE;
}
