/*
 * libFuzzer target: the chunked transfer-coding decoder
 * (http_chunked_decode), whole and in pieces.
 *
 * The input is decoded once in a single call and once split at points the
 * first bytes choose, appending each call's output as the connection loop
 * does. Both ways must agree on the result, the bytes consumed and the
 * decoded body; the body never exceeds the limit; errors carry 400, 413 or
 * 431.
 */
#include "coring/http/parser.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define MAX_BODY 4096u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    size_t step1 = data[0] % 17 + 1, step2 = data[1] % 251 + 1;
    data += 2;
    size -= 2;

    /* Whole. */
    char *whole = malloc(size);
    memcpy(whole, data, size);
    http_chunked_decoder d;
    http_chunked_init(&d, MAX_BODY);
    size_t whole_len = size;
    ssize_t whole_r = http_chunked_decode(&d, whole, &whole_len);
    if (whole_r == HTTP_PARSE_ERROR &&
        ((d.error_status != 400 && d.error_status != 413 && d.error_status != 431) || !d.error))
        abort();
    if (whole_r >= 0 && (size_t)whole_r > size)
        abort();
    if (whole_len > MAX_BODY || whole_len > size || d.total > MAX_BODY)
        abort();

    /* In pieces of alternating sizes. */
    char *body = malloc(size);
    size_t body_len = 0, pos = 0;
    http_chunked_init(&d, MAX_BODY);
    ssize_t r = HTTP_PARSE_INCOMPLETE;
    for (int turn = 0; pos < size; turn++) {
        size_t n = turn & 1 ? step2 : step1;
        if (n > size - pos)
            n = size - pos;
        char *piece = malloc(n); /* exact size: ASan sees overreads */
        memcpy(piece, data + pos, n);
        size_t out = n;
        r = http_chunked_decode(&d, piece, &out);
        if (out > n)
            abort();
        memcpy(body + body_len, piece, out);
        body_len += out;
        free(piece);
        if (r == HTTP_PARSE_ERROR)
            break;
        if (r >= 0) {
            if ((size_t)r > n)
                abort();
            pos += (size_t)r;
            break;
        }
        pos += n;
    }
    if ((r >= 0 ? 0 : r) != (whole_r >= 0 ? 0 : whole_r)) /* done, incomplete, error */
        abort();
    if (r >= 0 && pos != (size_t)whole_r)
        abort();
    if (r >= 0 && (body_len != whole_len || memcmp(body, whole, body_len) != 0))
        abort();
    free(body);
    free(whole);
    return 0;
}
