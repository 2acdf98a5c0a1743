/*
 * libFuzzer target: the HTTP/1.1 request parser (http_parse_request).
 *
 * Checks, beyond "no crash and no sanitizer report": the result is one of
 * the documented values; a parsed request's strings lie inside the input;
 * an error carries a 4xx/5xx status and a reason; and the parser is
 * incremental: a strict prefix of a request that parses is never itself a
 * complete request of another length, re-parsing the same bytes gives the
 * same answer, and so does feeding them in pieces with one
 * http_parse_progress (the scan resumed where the last call stopped). The
 * first input byte picks small or default limits, so the "too large" paths
 * are reached too, whether a bare LF is allowed, and the pieces' size.
 */
#include "coring/http/parser.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 100

static void check_inside(const char *buf, size_t len, http_str s)
{
    if (s.len == 0)
        return;
    if (s.ptr < buf || s.ptr + s.len > buf + len)
        abort();
}

static int parse(const char *buf, size_t len, const http_limits *lim, http_request *req,
                 http_header *headers)
{
    *req = (http_request){.headers = headers};
    return http_parse_request(buf, len, NULL, req, lim);
}

/* @buf's @size bytes fed @piece bytes more at a time, the scan resumed with
 * one progress, until a result other than "need more". */
static int parse_in_pieces(const char *buf, size_t size, size_t piece, const http_limits *lim,
                           http_request *req, http_header *headers)
{
    http_parse_progress progress = {0};
    int r = HTTP_PARSE_INCOMPLETE;
    size_t len = 0;
    do {
        len = size - len > piece ? len + piece : size;
        *req = (http_request){.headers = headers};
        r = http_parse_request(buf, len, &progress, req, lim);
    } while (r == HTTP_PARSE_INCOMPLETE && len < size);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    http_limits lim = http_limits_default();
    if (data[0] & 1) {
        lim.max_header_bytes = 256;
        lim.max_headers = 4;
        lim.max_body_bytes = 64;
    }
    lim.allow_bare_lf = (data[0] & 2) != 0;
    size_t piece = 1 + (data[0] >> 2); /* 1 to 64 bytes a call */
    data++;
    size--;
    /* An exact-size heap copy: ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);

    http_header headers[MAX_HEADERS];
    http_request req;
    int r = parse(buf, size, &lim, &req, headers);
    if (r == HTTP_PARSE_ERROR) {
        if (req.error_status < 400 || req.error_status > 599 || !req.error)
            abort();
    } else if (r != HTTP_PARSE_INCOMPLETE) {
        if (r <= 0 || (size_t)r > size || (size_t)r > lim.max_header_bytes)
            abort();
        if (req.num_headers > lim.max_headers || req.minor_version < 0 || req.minor_version > 1)
            abort();
        check_inside(buf, size, req.method_str);
        check_inside(buf, size, req.target);
        if (!(req.path.len == 1 && req.path.ptr[0] == '/')) /* "/" for an empty absolute path */
            check_inside(buf, size, req.path);
        check_inside(buf, size, req.query);
        for (size_t i = 0; i < req.num_headers; i++) {
            check_inside(buf, size, headers[i].name);
            check_inside(buf, size, headers[i].value);
        }
        if (req.chunked && req.has_content_length)
            abort(); /* smuggling: both framings accepted */
        if (req.has_content_length && req.content_length > lim.max_body_bytes)
            abort();
        (void)http_request_header(&req, "host");

        /* Every strict prefix is incomplete or an error, never a request. */
        for (size_t cut = (size_t)r > 64 ? (size_t)r - 64 : 0; cut < (size_t)r; cut++) {
            http_request p;
            http_header ph[MAX_HEADERS];
            int pr = parse(buf, cut, &lim, &p, ph);
            if (pr >= 0)
                abort();
        }
    }
    /* Same bytes, same answer. */
    http_request again;
    http_header h2[MAX_HEADERS];
    if (parse(buf, size, &lim, &again, h2) != r)
        abort();
    /* In pieces, resumed: the same answer, the same request or error. */
    http_request resumed;
    int pr = parse_in_pieces(buf, size, piece, &lim, &resumed, h2);
    if (pr != r)
        abort();
    if (r == HTTP_PARSE_ERROR && resumed.error_status != req.error_status)
        abort();
    if (r > 0 && (resumed.num_headers != req.num_headers || resumed.method != req.method ||
                  resumed.target.ptr != req.target.ptr || resumed.target.len != req.target.len ||
                  resumed.content_length != req.content_length || resumed.chunked != req.chunked ||
                  resumed.keep_alive != req.keep_alive))
        abort();
    free(buf);
    return 0;
}
