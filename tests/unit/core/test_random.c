/*
 * Unit tests for cr_random_seed and its clock fallback
 * (coring/core/random.h): exactly @len bytes written at any length, and
 * two calls that do not repeat each other; the mix against splitmix64's
 * published first output.
 */
#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "coring/core/random.h"

typedef bool (*fill_fn)(void *out, size_t len);

static bool clock_fill(void *out, size_t len)
{
    cr_random_seed_clock(out, len);
    return false;
}

/* @fill writes @len bytes between two guard bands it leaves alone, and the
 * bytes are not all one value (for len >= 8: 2^-56 by chance). */
static void check_lengths(fill_fn fill)
{
    for (size_t len = 0; len <= 40; len++) {
        unsigned char buf[8 + 40 + 8];
        memset(buf, 0xa5, sizeof(buf));
        fill(buf + 8, len);
        for (size_t i = 0; i < 8; i++) {
            cr_assert_eq(buf[i], 0xa5, "len %zu: wrote before the buffer", len);
            cr_assert_eq(buf[8 + len + i], 0xa5, "len %zu: wrote past the buffer", len);
        }
        if (len >= 8) {
            bool same = true;
            for (size_t i = 1; i < len; i++)
                same &= buf[8 + i] == buf[8];
            cr_assert(!same, "len %zu: every byte is %#x", len, buf[8]);
        }
    }
}

/* Two 32-byte fills from @fill differ (a repeat is a 2^-256 chance from
 * the pool; the clock moves between two calls). */
static void check_no_repeat(fill_fn fill)
{
    uint64_t a[4], b[4];
    fill(a, sizeof(a));
    fill(b, sizeof(b));
    cr_assert_neq(memcmp(a, b, sizeof(a)), 0);
}

Test(random, seed_writes_exactly_len_bytes)
{
    check_lengths(cr_random_seed);
}

Test(random, seed_does_not_repeat)
{
    check_no_repeat(cr_random_seed);
}

Test(random, seed_comes_from_the_pool_here)
{
    uint64_t x;
    cr_assert(cr_random_seed(&x, sizeof(x)), "getrandom(GRND_NONBLOCK) failed on a booted machine");
    cr_assert(cr_random_seed(&x, 0), "an empty request needs no pool");
}

Test(random, clock_fallback_writes_exactly_len_bytes)
{
    check_lengths(clock_fill);
}

Test(random, clock_fallback_does_not_repeat)
{
    check_no_repeat(clock_fill);
}

/* splitmix64 from state 0 first outputs 0xe220a8397b1dcdaf (Vigna's
 * reference splitmix64.c): the mix of the first golden-ratio step. */
Test(random, mix_is_splitmix64s_output_function)
{
    cr_assert_eq(cr_random_mix64(0x9e3779b97f4a7c15ull), 0xe220a8397b1dcdafull);
    cr_assert_eq(cr_random_mix64(0), 0); /* xorshifts and products keep 0 */
}
