/*
 * Rate limits per client: GCRA over a set-associative table of 64-bit
 * theoretical arrival times shared by every worker thread, and the 429 a
 * client over its rate gets. See coring/http/rate_limit.h for the
 * algorithm and docs/rate-limits.md for the bounds.
 *
 * The request path pays, with the limit on: a comparison per exempt path
 * (lengths first), the client's address as 16 bytes
 * (http_request_client_bytes: nothing formatted), one hash of them, a
 * scan of one cache line for its key and one CAS. Nothing is locked:
 * two threads admitting the same client race on one CAS, and the loser
 * tries again with the TAT the winner wrote.
 */
#include "internal.h"

#include "coring/core/clock.h"
#include "coring/core/random.h"
#include "coring/http/rate_limit.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One client: the hash of its address (0: empty) and its TAT, ns on
 * CLOCK_MONOTONIC. The two are moved apart; see claim() for the races. */
typedef struct rate_entry {
    _Atomic uint64_t key;
    _Atomic uint64_t tat;
} rate_entry;

typedef struct exempt_path {
    size_t len;
    char path[HTTP_RATE_LIMIT_EXEMPT_PATH_MAX];
} exempt_path;

struct http_rate_limit {
    uint64_t interval_ns;  /* T: one request's worth of time, 1 s / rate */
    uint64_t tolerance_ns; /* B * T: how far past now a client's TAT may run */
    uint64_t seed;         /* of the address hash: not known outside the process */
    rate_entry *table;     /* HTTP_RATE_LIMIT_SETS * HTTP_RATE_LIMIT_WAYS, 64-byte aligned */
    size_t num_exempt;
    exempt_path exempt[HTTP_RATE_LIMIT_EXEMPT_MAX];
    char policy[48];       /* the RateLimit-Policy value */
};

_Static_assert(sizeof(rate_entry) * HTTP_RATE_LIMIT_WAYS == 64, "a set is one cache line");
_Static_assert((HTTP_RATE_LIMIT_SETS & (HTTP_RATE_LIMIT_SETS - 1)) == 0, "sets: a power of 2");

/* Reads the comma-separated @list into @rl's exempt paths. */
static int parse_exempt(http_rate_limit *rl, const char *list, char *error, size_t size)
{
    if (!list || !*list)
        return 0;
    const char *p;
    size_t n;
    while (http_list_next(&list, &p, &n)) {
        if (n == 0)
            return http_setting_refused(error, size, "an empty path in the list");
        if (*p != '/')
            return http_setting_refused(error, size, "'%.*s': a path starts with '/'", (int)n, p);
        if (n >= HTTP_RATE_LIMIT_EXEMPT_PATH_MAX)
            return http_setting_refused(error, size, "'%.40s...': longer than %d bytes", p,
                                        HTTP_RATE_LIMIT_EXEMPT_PATH_MAX - 1);
        if (rl->num_exempt == HTTP_RATE_LIMIT_EXEMPT_MAX)
            return http_setting_refused(error, size, "more than %d paths",
                                        HTTP_RATE_LIMIT_EXEMPT_MAX);
        exempt_path *x = &rl->exempt[rl->num_exempt++];
        memcpy(x->path, p, n);
        x->len = n;
    }
    return 0;
}

int http_rate_limit_create(unsigned rate, unsigned burst, const char *exempt,
                           http_rate_limit **out, char *error, size_t error_size)
{
    *out = NULL;
    if (rate < 1 || rate > HTTP_RATE_LIMIT_MAX)
        return http_setting_refused(error, error_size,
                                    "a rate of %u: expected 1 to %u requests a second", rate,
                                    HTTP_RATE_LIMIT_MAX);
    if (burst > HTTP_RATE_LIMIT_MAX)
        return http_setting_refused(error, error_size, "a burst of %u: expected 1 to %u requests",
                                    burst, HTTP_RATE_LIMIT_MAX);
    http_rate_limit *rl = calloc(1, sizeof(*rl));
    if (!rl)
        return -ENOMEM;
    int err = parse_exempt(rl, exempt, error, error_size);
    if (err < 0) {
        free(rl);
        return err;
    }
    size_t table_bytes = sizeof(rate_entry) * HTTP_RATE_LIMIT_SETS * HTTP_RATE_LIMIT_WAYS;
    rl->table = aligned_alloc(64, table_bytes);
    if (!rl->table) {
        free(rl);
        return -ENOMEM;
    }
    memset(rl->table, 0, table_bytes);
    rl->interval_ns = CR_NS_PER_S / rate;
    rl->tolerance_ns = (uint64_t)(burst ? burst : rate) * rl->interval_ns;
    /* A seed the clients cannot guess, so that they cannot choose
     * addresses that share a set. */
    cr_random_seed(&rl->seed, sizeof(rl->seed));
    snprintf(rl->policy, sizeof(rl->policy), "\"default\";q=%u;w=1", rate);
    *out = rl;
    return 0;
}

void http_rate_limit_destroy(http_rate_limit *rl)
{
    if (!rl)
        return;
    free(rl->table);
    free(rl);
}

bool http_rate_limit_exempt(const http_rate_limit *rl, http_str path)
{
    for (size_t i = 0; i < rl->num_exempt; i++)
        if (rl->exempt[i].len == path.len && memcmp(rl->exempt[i].path, path.ptr, path.len) == 0)
            return true;
    return false;
}

const char *http_rate_limit_policy(const http_rate_limit *rl)
{
    return rl->policy;
}

uint64_t http_rate_limit_retry_after_s(uint64_t wait_ns)
{
    uint64_t s = wait_ns / CR_NS_PER_S + (wait_ns % CR_NS_PER_S != 0);
    return s ? s : 1;
}

/* The key of the address @p (@n bytes) under @seed: 8 bytes at a time,
 * each mixed in, the length first so that "1" and "1\0" differ. An
 * address is at most 45 bytes: 6 rounds. */
static uint64_t address_key(uint64_t seed, const char *p, size_t n)
{
    uint64_t h = cr_random_mix64(seed ^ n);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = cr_random_mix64(h ^ w);
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, p, n);
        h = cr_random_mix64(h ^ w);
    }
    return h;
}

/*
 * The entry of @key in @set, taken for it when it has none: the way whose
 * TAT is lowest (an empty way's is 0; a TAT at or before @now_ns is a full
 * bucket, nothing to lose), and when that is a client still in debt, its
 * TAT is reset so that @key starts full (that client loses its debt: at
 * most B requests). Two threads may claim for two keys at once: the key's
 * CAS decides, the loser looks again. A request of the old client racing
 * the claim may land its TAT on the new one: one request, at a change of
 * hands.
 */
static rate_entry *claim(rate_entry *set, uint64_t key, uint64_t now_ns)
{
    for (;;) {
        rate_entry *victim = &set[0];
        uint64_t victim_tat = atomic_load_explicit(&set[0].tat, memory_order_relaxed);
        for (unsigned w = 1; w < HTTP_RATE_LIMIT_WAYS; w++) {
            uint64_t tat = atomic_load_explicit(&set[w].tat, memory_order_relaxed);
            if (tat < victim_tat) {
                victim = &set[w];
                victim_tat = tat;
            }
        }
        uint64_t old = atomic_load_explicit(&victim->key, memory_order_relaxed);
        if (old == key)
            return victim;
        if (atomic_compare_exchange_strong_explicit(&victim->key, &old, key, memory_order_relaxed,
                                                    memory_order_relaxed)) {
            if (victim_tat > now_ns)
                atomic_compare_exchange_strong_explicit(&victim->tat, &victim_tat, 0,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed);
            return victim;
        }
        /* Another thread took that way: for this key, perhaps. */
        for (unsigned w = 0; w < HTTP_RATE_LIMIT_WAYS; w++)
            if (atomic_load_explicit(&set[w].key, memory_order_relaxed) == key)
                return &set[w];
    }
}

uint64_t http_rate_limit_take_key(http_rate_limit *rl, uint64_t key, uint64_t now_ns)
{
    key = key ? key : 1;
    rate_entry *set = &rl->table[(key & (HTTP_RATE_LIMIT_SETS - 1)) * HTTP_RATE_LIMIT_WAYS];
    rate_entry *e = NULL;
    for (unsigned w = 0; w < HTTP_RATE_LIMIT_WAYS && !e; w++)
        if (atomic_load_explicit(&set[w].key, memory_order_relaxed) == key)
            e = &set[w];
    if (!e)
        e = claim(set, key, now_ns);

    /* GCRA, virtual scheduling: admitted when the TAT this request would
     * leave is at most B * T past now. */
    uint64_t tat = atomic_load_explicit(&e->tat, memory_order_relaxed);
    for (;;) {
        uint64_t next = (tat > now_ns ? tat : now_ns) + rl->interval_ns;
        if (next - now_ns > rl->tolerance_ns)
            return next - now_ns - rl->tolerance_ns;
        if (atomic_compare_exchange_weak_explicit(&e->tat, &tat, next, memory_order_relaxed,
                                                  memory_order_relaxed))
            return 0;
    }
}

uint64_t http_rate_limit_take(http_rate_limit *rl, const char *client, size_t len,
                              uint64_t now_ns)
{
    return http_rate_limit_take_key(rl, address_key(rl->seed, client, len), now_ns);
}

bool http_rate_limit_refuse(http_rate_limit *rl, http_ctx *ctx, uint64_t now_ns)
{
    if (http_rate_limit_exempt(rl, ctx->req->path))
        return false;
    /* The client's 16 bytes, not its text: formatting the address cost
     * more than the rest of the limit. */
    uint8_t client[16];
    http_request_client_bytes(ctx, client);
    uint64_t wait_ns =
        http_rate_limit_take_key(rl, address_key(rl->seed, (const char *)client, 16), now_ns);
    if (wait_ns == 0)
        return false;
    http_metrics_rate_limited();
    /* RFC 9110 section 10.2.3; the draft's fields: the policy, and none
     * left until the same wait has passed. */
    char retry_after[24], state[48];
    uint64_t s = http_rate_limit_retry_after_s(wait_ns);
    snprintf(retry_after, sizeof(retry_after), "%llu", (unsigned long long)s);
    snprintf(state, sizeof(state), "\"default\";r=0;t=%llu", (unsigned long long)s);
    http_add_header(ctx, "Retry-After", retry_after);
    http_add_header(ctx, "RateLimit-Policy", rl->policy);
    http_add_header(ctx, "RateLimit", state);
    http_respond_error(ctx, 429, "rate limit exceeded");
    return true;
}
