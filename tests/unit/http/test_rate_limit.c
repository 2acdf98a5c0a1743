/*
 * Tests of the rate limiter's bucket (http/src/rate_limit.c) with the time
 * passed in, no sleeps: the rate over a long run, the burst, the refill,
 * Retry-After's rounding, clients that share a set of the table, threads
 * taking from one client at once, and the options it refuses.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "coring/core/clock.h"
#include "coring/http/rate_limit.h"

#define MS CR_NS_PER_MS
/* Far from 0, as a monotonic clock is: an empty entry's TAT is 0. */
#define T0 (1000 * CR_NS_PER_S)

static http_rate_limit *make(unsigned rate, unsigned burst)
{
    char why[160] = "";
    http_rate_limit *rl = NULL;
    int err = http_rate_limit_create(rate, burst, NULL, &rl, why, sizeof(why));
    cr_assert_eq(err, 0, "refused: %d %s", err, why);
    return rl;
}

/* Requests of @key admitted among @n sent @step_ns apart from @start_ns. */
static unsigned admitted(http_rate_limit *rl, uint64_t key, unsigned n, uint64_t start_ns,
                         uint64_t step_ns)
{
    unsigned ok = 0;
    for (unsigned i = 0; i < n; i++)
        ok += http_rate_limit_take_key(rl, key, start_ns + i * step_ns) == 0;
    return ok;
}

Test(rate_limit, rate_over_a_long_run)
{
    /* 10 a second, burst 5, a request every ms from 0 to 9.999 s: the
     * burst, then one each 100 ms from 0.1 s to 9.9 s: B + N * D, rounded
     * down. */
    http_rate_limit *rl = make(10, 5);
    cr_assert_eq(admitted(rl, 42, 10000, T0, MS), 5 + 99);
    /* 1000 a second, burst 10, from a client sending 3000 a second for 2 s. */
    http_rate_limit *fast = make(1000, 10);
    unsigned n = 0;
    for (uint64_t t = 0; t < 2 * CR_NS_PER_S; t += CR_NS_PER_S / 3000)
        n += http_rate_limit_take_key(fast, 7, T0 + t) == 0;
    cr_assert(n >= 2009 && n <= 2011, "%u admitted in 2 s at 1000/s", n);
    http_rate_limit_destroy(rl);
    http_rate_limit_destroy(fast);
}

Test(rate_limit, burst)
{
    http_rate_limit *rl = make(10, 5);
    cr_assert_eq(admitted(rl, 1, 8, T0, 0), 5, "5 at once, no more");
    /* The burst defaults to the rate. */
    http_rate_limit *dflt = make(20, 0);
    cr_assert_eq(admitted(dflt, 1, 30, T0, 0), 20);
    /* A refused request takes nothing: the 6th waits 100 ms, not more,
     * however many were refused before it. */
    cr_assert_eq(http_rate_limit_take_key(rl, 1, T0), 100 * MS);
    cr_assert_eq(http_rate_limit_take_key(rl, 1, T0 + 100 * MS), 0);
    http_rate_limit_destroy(rl);
    http_rate_limit_destroy(dflt);
}

Test(rate_limit, refill)
{
    http_rate_limit *rl = make(10, 5);
    cr_assert_eq(admitted(rl, 1, 5, T0, 0), 5);
    /* 300 ms later: 3 tokens back. */
    cr_assert_eq(admitted(rl, 1, 5, T0 + 300 * MS, 0), 3);
    /* An hour idle: a full bucket, the burst and no more. */
    cr_assert_eq(admitted(rl, 1, 10, T0 + 3600 * CR_NS_PER_S, 0), 5);
    /* Another client's bucket is its own. */
    cr_assert_eq(admitted(rl, 2, 10, T0 + 3600 * CR_NS_PER_S, 0), 5);
    http_rate_limit_destroy(rl);
}

Test(rate_limit, addresses_have_their_own_buckets)
{
    http_rate_limit *rl = make(1, 2);
    const char *a = "127.0.0.1", *b = "127.0.0.2", *v6 = "2001:db8::1234:5678:9abc:def0";
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(http_rate_limit_take(rl, a, strlen(a), T0), 0);
        cr_assert_eq(http_rate_limit_take(rl, v6, strlen(v6), T0), 0);
    }
    cr_assert_neq(http_rate_limit_take(rl, a, strlen(a), T0), 0);
    cr_assert_neq(http_rate_limit_take(rl, v6, strlen(v6), T0), 0);
    cr_assert_eq(http_rate_limit_take(rl, b, strlen(b), T0), 0);
    http_rate_limit_destroy(rl);
}

Test(rate_limit, retry_after_rounds_up)
{
    cr_assert_eq(http_rate_limit_retry_after_s(1), 1);
    cr_assert_eq(http_rate_limit_retry_after_s(CR_NS_PER_S - 1), 1);
    cr_assert_eq(http_rate_limit_retry_after_s(CR_NS_PER_S), 1);
    cr_assert_eq(http_rate_limit_retry_after_s(CR_NS_PER_S + 1), 2);
    cr_assert_eq(http_rate_limit_retry_after_s(2500 * MS), 3);
    /* 1 a second, burst 1: the second request waits the whole second, then
     * half of it; neither is told 0. */
    http_rate_limit *rl = make(1, 1);
    cr_assert_eq(http_rate_limit_take_key(rl, 9, T0), 0);
    uint64_t wait = http_rate_limit_take_key(rl, 9, T0);
    cr_assert_eq(wait, CR_NS_PER_S);
    cr_assert_eq(http_rate_limit_retry_after_s(wait), 1);
    wait = http_rate_limit_take_key(rl, 9, T0 + CR_NS_PER_S / 2);
    cr_assert_eq(wait, CR_NS_PER_S / 2);
    cr_assert_eq(http_rate_limit_retry_after_s(wait), 1);
    /* A client that waits what it was told is admitted. */
    cr_assert_eq(http_rate_limit_take_key(rl, 9, T0 + CR_NS_PER_S / 2 + wait), 0);
    http_rate_limit_destroy(rl);
}

Test(rate_limit, set_collisions)
{
    /* Five clients of one set (four ways): 10 a second, burst 2. */
    http_rate_limit *rl = make(10, 2);
    uint64_t key[5];
    for (unsigned i = 0; i < 5; i++)
        key[i] = 3 + (uint64_t)i * HTTP_RATE_LIMIT_SETS;
    /* The first four use their bursts 10 ms apart: four live entries, their
     * TATs 200, 210, 220 and 230 ms past T0. */
    for (unsigned i = 0; i < 4; i++)
        cr_assert_eq(admitted(rl, key[i], 3, T0 + i * 10 * MS, 0), 2, "client %u", i);
    /* The fifth finds the set full of clients in debt: it starts with a
     * full bucket, and the one nearest to full (the first) is evicted. */
    uint64_t t = T0 + 40 * MS;
    cr_assert_eq(admitted(rl, key[4], 3, t, 0), 2);
    /* The three others kept their state: still refused. */
    for (unsigned i = 1; i < 4; i++)
        cr_assert_neq(http_rate_limit_take_key(rl, key[i], t), 0, "client %u", i);
    /* The evicted one comes back with a full bucket: at most the burst more
     * than its rate, the bound docs/rate-limits.md states. */
    cr_assert_eq(admitted(rl, key[0], 5, t, 0), 2);
    /* Once their buckets are full again, entries are taken without loss:
     * a sixth client, then four of the old ones, get exactly the burst. */
    t = T0 + 10 * CR_NS_PER_S;
    cr_assert_eq(admitted(rl, key[4] + HTTP_RATE_LIMIT_SETS, 5, t, 0), 2);
    for (unsigned i = 0; i < 4; i++)
        cr_assert_eq(admitted(rl, key[i], 5, t + CR_NS_PER_S, 0), 2, "client %u", i);
    /* A client of another set is not touched by any of it. */
    cr_assert_eq(admitted(rl, 4, 5, T0 + 40 * MS, 0), 2);
    http_rate_limit_destroy(rl);
}

typedef struct taker {
    http_rate_limit *rl;
    pthread_barrier_t *start;
    uint64_t key;
    unsigned admitted;
} taker;

#define TAKERS 4
#define TAKES 400000u
#define ROUNDS 40

static void *take_many(void *arg)
{
    taker *tk = arg;
    pthread_barrier_wait(tk->start);
    for (unsigned i = 0; i < TAKES; i++)
        tk->admitted += http_rate_limit_take_key(tk->rl, tk->key, T0) == 0;
    return NULL;
}

Test(rate_limit, threads_share_the_bucket)
{
    /* 4 threads take from one client at the same instant, released
     * together, while its bucket of 1,000,000 empties: the burst once, not
     * 4 bursts, and no token taken twice (a lost update would admit more).
     * Several rounds, a client each: threads overlap in some at least,
     * however busy the machine. */
    http_rate_limit *rl = make(1000, HTTP_RATE_LIMIT_MAX);
    for (uint64_t round = 0; round < ROUNDS; round++) {
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, TAKERS);
        pthread_t th[TAKERS];
        taker tk[TAKERS];
        for (int i = 0; i < TAKERS; i++) {
            tk[i] = (taker){.rl = rl, .start = &start, .key = 100 + round};
            cr_assert_eq(pthread_create(&th[i], NULL, take_many, &tk[i]), 0);
        }
        unsigned total = 0;
        for (int i = 0; i < TAKERS; i++) {
            pthread_join(th[i], NULL);
            total += tk[i].admitted;
        }
        pthread_barrier_destroy(&start);
        cr_assert_eq(total, HTTP_RATE_LIMIT_MAX, "round %u: %u admitted", (unsigned)round, total);
    }
    http_rate_limit_destroy(rl);
}

Test(rate_limit, exempt_paths)
{
    char why[160] = "";
    http_rate_limit *rl = NULL;
    cr_assert_eq(http_rate_limit_create(5, 0, HTTP_RATE_LIMIT_EXEMPT_DEFAULT, &rl, why,
                                        sizeof(why)),
                 0, "%s", why);
    static const char *const yes[] = {"/livez", "/readyz", "/metrics"};
    static const char *const no[] = {"/", "/livez/", "/metric", "/metrics2", "/LIVEZ", ""};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        cr_assert(http_rate_limit_exempt(rl, (http_str){yes[i], strlen(yes[i])}), "%s", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        cr_assert_not(http_rate_limit_exempt(rl, (http_str){no[i], strlen(no[i])}), "%s", no[i]);
    cr_assert_str_eq(http_rate_limit_policy(rl), "\"default\";q=5;w=1");
    http_rate_limit_destroy(rl);

    cr_assert_eq(http_rate_limit_create(5, 0, " /a , /b/c ", &rl, why, sizeof(why)), 0);
    cr_assert(http_rate_limit_exempt(rl, (http_str){"/b/c", 4}));
    cr_assert_not(http_rate_limit_exempt(rl, (http_str){"/livez", 6}));
    http_rate_limit_destroy(rl);
    cr_assert_eq(http_rate_limit_create(5, 0, "", &rl, why, sizeof(why)), 0);
    cr_assert_not(http_rate_limit_exempt(rl, (http_str){"/livez", 6}));
    http_rate_limit_destroy(rl);
}

Test(rate_limit, options_refused)
{
    static const struct {
        unsigned rate, burst;
        const char *exempt, *why;
    } bad[] = {
        {0, 0, NULL, "rate"},         {HTTP_RATE_LIMIT_MAX + 1, 0, NULL, "rate"},
        {5, HTTP_RATE_LIMIT_MAX + 1, NULL, "burst"},
        {5, 0, "livez", "starts with '/'"}, {5, 0, "/a,,/b", "empty"},
        {5, 0, "/a,", "empty"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[160] = "";
        http_rate_limit *rl = (http_rate_limit *)1;
        cr_assert_eq(http_rate_limit_create(bad[i].rate, bad[i].burst, bad[i].exempt, &rl, why,
                                            sizeof(why)),
                     -EINVAL, "case %zu", i);
        cr_assert_null(rl);
        cr_assert(strstr(why, bad[i].why), "case %zu: '%s'", i, why);
    }
}
