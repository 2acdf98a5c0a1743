/*
 * Rate limits per client (--rate-limit): a token bucket with a burst per
 * client address (http_request_client: the peer, or the X-Forwarded-For
 * hop --trusted-proxies selects), shared by every worker thread, so that
 * a client whose connections land on every thread gets the configured
 * rate, not the threads times it.
 *
 * The bucket is GCRA, the generic cell rate algorithm (ITU-T I.371; the
 * "virtual scheduling" form): a client's whole state is one theoretical
 * arrival time (TAT), the time its bucket would be full again. A request
 * at time t is admitted when max(TAT, t) + T - t <= B * T (T = 1/rate, B
 * the burst), and then moves TAT to max(TAT, t) + T. One 64-bit atomic per
 * client holds it, moved by compare-and-swap: no lock, and no state per
 * thread to reconcile, so the limit holds across threads exactly (every
 * admission is one successful CAS on the client's TAT).
 *
 * The clients live in a fixed-size table, set-associative: a 64-bit hash
 * of the address (seeded at random per process) picks a set of
 * HTTP_RATE_LIMIT_WAYS entries and is stored in the entry as its key. A
 * client not in its set takes the entry whose TAT is lowest: an empty one,
 * or one whose bucket is full again (nothing is lost by forgetting it);
 * only when every entry of the set belongs to a client still in debt is
 * one of them evicted, the one nearest to full, which can then send at
 * most B requests more than its rate once. docs/rate-limits.md states the
 * bounds.
 */
#ifndef CORING_HTTP_RATE_LIMIT_H
#define CORING_HTTP_RATE_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coring/http/parser.h"

typedef struct http_rate_limit http_rate_limit;

/* The highest --rate-limit and --rate-burst, requests a second and requests. */
#define HTTP_RATE_LIMIT_MAX 1000000u

/* Entries per set (one 64-byte cache line of 16-byte entries) and sets:
 * 65,536 clients in debt at once, 1 MiB. */
#define HTTP_RATE_LIMIT_WAYS 4u
#define HTTP_RATE_LIMIT_SETS 16384u

/* Paths never limited unless --rate-limit-exempt says otherwise: the
 * probes and the scrape, which must keep working for a client over its
 * rate (a load balancer, Prometheus). */
#define HTTP_RATE_LIMIT_EXEMPT_DEFAULT "/livez,/readyz,/metrics"

/* Entries accepted in a --rate-limit-exempt list, and bytes of each. */
#define HTTP_RATE_LIMIT_EXEMPT_MAX 16
#define HTTP_RATE_LIMIT_EXEMPT_PATH_MAX 128

/*
 * http_rate_limit_create - a limiter admitting @rate requests a second per
 * client (1 ... HTTP_RATE_LIMIT_MAX) with bursts of @burst requests (1 ...
 * HTTP_RATE_LIMIT_MAX; 0: @rate), and never limiting the exact paths of
 * the comma-separated list @exempt (each starting with '/', spaces around
 * an entry ignored; "" or NULL: none). The table (1 MiB) is allocated and
 * zeroed here, and the hash seeded from getrandom(2).
 * On success *@out is set (free with http_rate_limit_destroy) and 0
 * returned. Errors: -EINVAL with a message in @error (@error_size bytes,
 * NUL-terminated; may be NULL) for a rate or burst out of range, or an
 * exempt entry that is empty, does not start with '/', is longer than
 * HTTP_RATE_LIMIT_EXEMPT_PATH_MAX or past HTTP_RATE_LIMIT_EXEMPT_MAX
 * entries; -ENOMEM. *@out is NULL on failure. Main thread, at start-up;
 * then shared by every worker thread.
 */
int http_rate_limit_create(unsigned rate, unsigned burst, const char *exempt,
                           http_rate_limit **out, char *error, size_t error_size);

/* http_rate_limit_destroy - free @rl (NULL is fine), once no server uses it. */
void http_rate_limit_destroy(http_rate_limit *rl);

/* http_rate_limit_exempt - whether @path (a request's path, without its
 * query) is one of @rl's exempt paths, byte for byte. Any thread. */
bool http_rate_limit_exempt(const http_rate_limit *rl, http_str path);

/*
 * http_rate_limit_take - one request of the client whose address is the
 * @len bytes at @client, at @now_ns (CLOCK_MONOTONIC, ns: cr_clock_now_ns;
 * every caller must use that clock). Returns 0 when it is admitted (its
 * token taken), else the time in ns (> 0) until the client's next request
 * would be admitted; a refused request takes nothing. One hash, and one
 * CAS on the client's entry (more only when another thread moved it at the
 * same time). Any thread, lock-free.
 */
uint64_t http_rate_limit_take(http_rate_limit *rl, const char *client, size_t len,
                              uint64_t now_ns);

/*
 * http_rate_limit_take_key - http_rate_limit_take for a client already
 * hashed to @key (0 is taken as 1: 0 marks an empty entry). Its set is
 * @key modulo HTTP_RATE_LIMIT_SETS. For tests that choose which clients
 * share a set. Any thread, lock-free.
 */
uint64_t http_rate_limit_take_key(http_rate_limit *rl, uint64_t key, uint64_t now_ns);

/* http_rate_limit_retry_after_s - a wait of @wait_ns as whole seconds for
 * Retry-After (RFC 9110 section 10.2.3: delay-seconds), rounded up so that
 * a client that waits that long is admitted: 1 for any wait of 1 ns to
 * 1 s. Any thread. */
uint64_t http_rate_limit_retry_after_s(uint64_t wait_ns);

/* http_rate_limit_policy - the RateLimit-Policy field value of @rl,
 * "\"default\";q=RATE;w=1" (draft-ietf-httpapi-ratelimit-headers-10,
 * the structured-field form of -08 on), NUL-terminated, owned by @rl. Any thread. */
const char *http_rate_limit_policy(const http_rate_limit *rl);

#endif
