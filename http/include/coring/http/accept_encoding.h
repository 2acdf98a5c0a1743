/*
 * Content codings and Accept-Encoding negotiation (RFC 9110 sections 8.4.1
 * and 12.5.3): which of the codings coring can produce (zstd, br, gzip) a
 * client accepts, and which one it prefers. Pure functions over the
 * request's field values, in the style of the parser: no allocation, no
 * state beyond the caller's struct, table-tested (tests/unit/http).
 *
 * Choices where the RFC leaves one (docs/compression.md):
 * - no Accept-Encoding field, an empty one, or one that does not parse:
 *   identity (RFC 9110 section 12.5.3 allows any coding for an absent
 *   field; sending none is what browsers and proxies expect);
 * - nothing acceptable, identity;q=0 included: identity, as section
 *   12.5.3 says a server "ought to" ("... respond with a response without
 *   any content coding"), not 406: a client that forbids identity and
 *   accepts nothing we have still gets a body it can at worst refuse;
 * - equal q-values: the server's order, zstd, br, gzip (smallest first on
 *   coring's JSON, perf/compression.sh); identity only when the field
 *   rates it (by name or through "*") higher than every acceptable coding:
 *   "gzip;q=0.5" alone still gets gzip.
 */
#ifndef CORING_HTTP_ACCEPT_ENCODING_H
#define CORING_HTTP_ACCEPT_ENCODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The codings, identity first, then the server's order of preference. */
typedef enum http_coding {
    HTTP_CODING_IDENTITY = 0,
    HTTP_CODING_ZSTD, /* RFC 8878 */
    HTTP_CODING_BR,   /* RFC 7932 */
    HTTP_CODING_GZIP, /* RFC 1952; "x-gzip" taken as gzip (RFC 9110 8.4.1.3) */
    HTTP_CODING_COUNT
} http_coding;

#define HTTP_CODING_BIT(c) (1u << (c))
/* Every coding coring produces (the default of --compression). */
#define HTTP_CODINGS_ALL                                                                           \
    (HTTP_CODING_BIT(HTTP_CODING_ZSTD) | HTTP_CODING_BIT(HTTP_CODING_BR) |                         \
     HTTP_CODING_BIT(HTTP_CODING_GZIP))

/* What one request accepts: each field line of Accept-Encoding is parsed
 * into it in turn (a list field may be split over several lines, RFC 9110
 * section 5.3). q-values in thousandths, 0..1000; -1: not named. */
typedef struct http_accept_encoding {
    int16_t q[HTTP_CODING_COUNT]; /* identity, zstd, br, gzip */
    int16_t any;                  /* "*" */
    bool present;                 /* a field line was parsed */
    bool invalid;                 /* a line did not parse: the whole field is ignored */
} http_accept_encoding;

/* http_accept_encoding_init - @ae as for a request without the field. */
void http_accept_encoding_init(http_accept_encoding *ae);

/*
 * http_accept_encoding_parse - add one Accept-Encoding field line, the
 * @len bytes at @value (spaces around it already removed), to @ae. The
 * grammar of RFC 9110 section 12.5.3: #( codings [ weight ] ), codings =
 * content-coding / "identity" / "*", weight = OWS ";" OWS "q=" qvalue
 * (section 12.4.2: at most three decimals, none above 1); names compare
 * case-insensitively; codings coring does not know are skipped; when a
 * coding is named twice the first counts. Returns 0, or -EINVAL for a
 * line that does not parse (then @ae->invalid is set and the choice is
 * identity). Any thread.
 */
int http_accept_encoding_parse(http_accept_encoding *ae, const char *value, size_t len);

/*
 * http_accept_encoding_choose - the coding to send, of those in @offered
 * (HTTP_CODING_BIT set; identity implied), for what @ae accepts: the one
 * with the highest q-value above 0 (its own, else that of "*"), ties
 * going to the order of http_coding; identity when no coding qualifies,
 * when identity's q-value (its own, else that of "*") is higher, or when
 * @ae is absent, empty or invalid (see the top of this file). Any thread.
 */
http_coding http_accept_encoding_choose(const http_accept_encoding *ae, unsigned offered);

/* http_coding_name - "identity", "zstd", "br", "gzip" (the tokens of
 * Content-Encoding); NULL for a value out of range. */
const char *http_coding_name(http_coding coding);

/*
 * http_codings_parse - the value of --compression into *@mask: "on" (every
 * coding, HTTP_CODINGS_ALL), "off" (0), or a comma-separated list of
 * coding names ("zstd,gzip"; spaces around names allowed). Returns 0, or
 * -EINVAL for an empty list or an unknown name (*@mask unchanged). Any
 * thread.
 */
int http_codings_parse(const char *text, unsigned *mask);

#endif
