/*
 * Unit tests for cr_arena (coring/core/arena.h): 16-byte alignment, large
 * allocations in chunks of their own, what reset keeps (so a keep-alive
 * steady state allocates nothing), strndup and absurd sizes.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "coring/core/arena.h"

Test(arena, init_is_empty_and_defaults_to_4k)
{
    cr_arena a;
    cr_arena_init(&a, 0);
    cr_assert_null(a.head);
    cr_assert_eq(a.chunk_size, 4096);
    cr_arena_reset(&a); /* reset and free of an empty arena are no-ops */
    cr_assert_null(a.head);
    cr_arena_free(&a);
    cr_assert_null(a.head);
}

Test(arena, allocations_are_aligned_and_disjoint)
{
    cr_arena a;
    cr_arena_init(&a, 1000); /* not a multiple of 16 on purpose */
    unsigned char *p[200];
    for (size_t i = 0; i < 200; i++) {
        size_t n = i % 37 + 1;
        p[i] = cr_arena_alloc(&a, n);
        cr_assert_not_null(p[i]);
        cr_assert_eq((uintptr_t)p[i] % 16, 0, "allocation %zu not 16-aligned", i);
        memset(p[i], (int)i, n);
    }
    for (size_t i = 0; i < 200; i++)
        for (size_t j = 0; j < i % 37 + 1; j++)
            cr_assert_eq(p[i][j], (unsigned char)i, "allocation %zu overwritten", i);
    cr_arena_free(&a);
}

Test(arena, small_allocations_bump_within_a_chunk)
{
    cr_arena a;
    cr_arena_init(&a, 4096);
    char *x = cr_arena_alloc(&a, 1);
    char *y = cr_arena_alloc(&a, 17);
    char *z = cr_arena_alloc(&a, 0);
    cr_assert_eq(y, x + 16);
    cr_assert_eq(z, y + 32);
    cr_arena_free(&a);
}

Test(arena, large_allocation_gets_own_chunk_and_current_chunk_stays)
{
    cr_arena a;
    cr_arena_init(&a, 4096);
    char *x = cr_arena_alloc(&a, 16);
    char *big = cr_arena_alloc(&a, 100000);
    cr_assert_not_null(big);
    cr_assert_eq((uintptr_t)big % 16, 0);
    memset(big, 0xab, 100000);
    /* The space left in the current chunk is still used after a large one. */
    char *y = cr_arena_alloc(&a, 16);
    cr_assert_eq(y, x + 16);
    cr_assert_eq((unsigned char)big[99999], 0xab);
    cr_arena_free(&a);
}

Test(arena, large_allocation_first)
{
    cr_arena a;
    cr_arena_init(&a, 256);
    char *big = cr_arena_alloc(&a, 5000);
    cr_assert_not_null(big);
    char *x = cr_arena_alloc(&a, 16);
    cr_assert_not_null(x);
    cr_assert(x < big || x >= big + 5000);
    cr_arena_reset(&a); /* the oversized chunk is freed, the small one kept */
    cr_assert_eq(cr_arena_alloc(&a, 16), x);
    cr_arena_free(&a);
}

Test(arena, reset_keeps_the_first_chunk)
{
    cr_arena a;
    cr_arena_init(&a, 1024);
    char *first = cr_arena_alloc(&a, 100);
    for (int i = 0; i < 100; i++) /* spill over into ~10 more chunks */
        cr_assert_not_null(cr_arena_alloc(&a, 100));
    cr_assert_not_null(cr_arena_alloc(&a, 50000));
    cr_arena_reset(&a);
    cr_assert_not_null(a.head);
    cr_assert_eq(cr_arena_alloc(&a, 100), first, "reset must keep the oldest chunk");
    cr_arena_free(&a);
}

Test(arena, steady_state_reuses_memory)
{
    /* A keep-alive loop: each "request" allocates less than a chunk, then
     * the arena is reset. Every round must get the same memory back. */
    cr_arena a;
    cr_arena_init(&a, 0);
    char *base = NULL;
    for (int round = 0; round < 1000; round++) {
        char *p = cr_arena_alloc(&a, 300);
        for (int i = 0; i < 10; i++)
            cr_assert_not_null(cr_arena_alloc(&a, 200));
        if (round == 0)
            base = p;
        cr_assert_eq(p, base, "round %d got new memory", round);
        cr_arena_reset(&a);
    }
    cr_arena_free(&a);
}

Test(arena, free_leaves_a_usable_arena)
{
    cr_arena a;
    cr_arena_init(&a, 64);
    cr_assert_not_null(cr_arena_alloc(&a, 48));
    cr_assert_not_null(cr_arena_alloc(&a, 4800));
    cr_arena_free(&a);
    cr_assert_null(a.head);
    cr_assert_eq(a.chunk_size, 64);
    char *p = cr_arena_alloc(&a, 10);
    cr_assert_not_null(p);
    cr_arena_free(&a);
}

/* Memory of the test's own for a fixed chunk, 16-byte aligned. */
static _Alignas(16) unsigned char fixed_mem[2048];

static bool in_fixed(const void *p)
{
    return (const unsigned char *)p >= fixed_mem && (const unsigned char *)p < fixed_mem + sizeof(fixed_mem);
}

Test(arena, fixed_chunk_is_used_first_and_kept)
{
    cr_arena a;
    cr_arena_init_fixed(&a, fixed_mem, sizeof(fixed_mem), 1024);
    cr_assert_eq(a.chunk_size, 1024);
    char *first = cr_arena_alloc(&a, 100);
    cr_assert(in_fixed(first), "the first allocation comes from the fixed chunk");
    char *spill[40];
    for (int i = 0; i < 40; i++) /* past the 2 KiB: chunks from malloc */
        cr_assert_not_null(spill[i] = cr_arena_alloc(&a, 100));
    cr_assert(!in_fixed(spill[39]), "what does not fit comes from malloc");
    char *big = cr_arena_alloc(&a, 50000);
    cr_assert(big && !in_fixed(big));
    memset(big, 1, 50000);
    cr_arena_reset(&a);
    cr_assert_eq(a.head, a.fixed, "reset keeps only the fixed chunk (the ASan build sees a leak)");
    cr_assert_eq(cr_arena_alloc(&a, 100), first, "reset keeps the fixed chunk, emptied");
    cr_arena_free(&a); /* must not free() memory it does not own */
    cr_assert_eq(a.head, a.fixed, "free leaves the fixed chunk as the only one");
    cr_assert_eq(cr_arena_alloc(&a, 16), first, "and the arena usable");
    cr_arena_free(&a);
}

Test(arena, fixed_chunk_steady_state_never_mallocs)
{
    cr_arena a;
    cr_arena_init_fixed(&a, fixed_mem, sizeof(fixed_mem), 0);
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < 10; i++)
            cr_assert(in_fixed(cr_arena_alloc(&a, 150)), "round %d left the fixed chunk", round);
        cr_arena_reset(&a);
    }
    cr_arena_free(&a);
}

Test(arena, unusable_fixed_memory_gives_a_plain_arena)
{
    cr_arena a;
    cr_arena_init_fixed(&a, fixed_mem + 8, sizeof(fixed_mem) - 8, 0); /* misaligned */
    cr_assert_null(a.head);
    cr_assert_null(a.fixed);
    cr_arena_init_fixed(&a, fixed_mem, 40, 0); /* no room past the header */
    cr_assert_null(a.fixed);
    cr_arena_init_fixed(&a, NULL, 4096, 0);
    cr_assert_null(a.fixed);
    char *p = cr_arena_alloc(&a, 10);
    cr_assert(p && !in_fixed(p));
    cr_arena_free(&a);
    cr_assert_null(a.head);
}

Test(arena, strndup_copies_and_terminates)
{
    cr_arena a;
    cr_arena_init(&a, 0);
    const char src[] = "hello, world";
    char *s = cr_arena_strndup(&a, src, 5);
    cr_assert_str_eq(s, "hello");
    char *e = cr_arena_strndup(&a, src, 0);
    cr_assert_str_eq(e, "");
    const char bin[4] = {'a', '\0', 'b', 'c'}; /* copies exactly len bytes */
    char *b = cr_arena_strndup(&a, bin, 4);
    cr_assert_eq(memcmp(b, bin, 4), 0);
    cr_assert_eq(b[4], '\0');
    char big[9000];
    memset(big, 'x', sizeof(big));
    char *l = cr_arena_strndup(&a, big, sizeof(big));
    cr_assert_eq(strlen(l), sizeof(big));
    cr_arena_free(&a);
}

Test(arena, absurd_sizes_fail_with_enomem)
{
    cr_arena a;
    cr_arena_init(&a, 0);
    errno = 0;
    cr_assert_null(cr_arena_alloc(&a, SIZE_MAX));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(cr_arena_alloc(&a, SIZE_MAX - 20));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(cr_arena_alloc(&a, (size_t)PTRDIFF_MAX + 1));
    cr_assert_eq(errno, ENOMEM);
    errno = 0;
    cr_assert_null(cr_arena_strndup(&a, "x", SIZE_MAX));
    cr_assert_eq(errno, ENOMEM);
    /* The arena is still usable. */
    cr_assert_not_null(cr_arena_alloc(&a, 8));
    cr_arena_free(&a);
}
