/*
 * Seeds: unpredictable bytes for hash seeds and id prefixes, from the
 * kernel's pool, with a clock-derived fallback when the pool cannot answer.
 * Not for secrets: the fallback is guessable.
 */
#ifndef CORING_CORE_RANDOM_H
#define CORING_CORE_RANDOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * cr_random_mix64 - splitmix64's output function (Steele, Lea and Flood,
 * "Fast splittable pseudorandom number generators", OOPSLA 2014): a
 * bijective multiply-xorshift mix of @h, every input bit reaching every
 * output bit. For hashing and seeding, not secrets. Pure; any thread.
 */
static inline uint64_t cr_random_mix64(uint64_t h)
{
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 31);
}

/*
 * cr_random_seed - fill @out with @len bytes from getrandom(2) with
 * GRND_NONBLOCK (it does not block once the pool is initialised, long
 * before a server starts). When getrandom fails or returns short (a pool
 * not yet initialised at early boot, a seccomp filter that refuses it),
 * fills @out with cr_random_seed_clock() instead.
 * @out: caller-owned, @len bytes written; @len may be 0.
 * Returns true when the bytes came from getrandom, false when from the
 * clock. Never fails. Any thread.
 */
bool cr_random_seed(void *out, size_t len);

/*
 * cr_random_seed_clock - fill @out with @len bytes of splitmix64 (a
 * golden-ratio counter through cr_random_mix64) started from
 * CLOCK_REALTIME, CLOCK_MONOTONIC and @out's address: different per call
 * and per thread, but guessable. cr_random_seed's
 * fallback, public so that it can be tested on its own.
 * @out: caller-owned, @len bytes written; @len may be 0.
 * Never fails. Any thread.
 */
void cr_random_seed_clock(void *out, size_t len);

#endif
