/*
 * Unit tests for the coroutines and the stack pool (coring/core/coro.h):
 * switch ordering, nesting, stack and register state kept across switches,
 * stack reuse through the pool, the per-coroutine arena, and misuse that
 * must stop the process rather than corrupt it.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "coring/core/coro.h"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

static cr_stack_pool *pool;

#include "coro_util.h"

static void pool_setup(void)
{
    pool = new_pool(0, 8);
    cr_assert_not_null(pool);
}

static void pool_teardown(void)
{
    cr_stack_pool_destroy(pool);
    pool = NULL;
}

TestSuite(coro, .init = pool_setup, .fini = pool_teardown);

/* An ordered log of steps, shared by the tests below. */
static int steps[64];
static int nsteps;

static void step(int s)
{
    if (nsteps < (int)(sizeof(steps) / sizeof(steps[0])))
        steps[nsteps] = s;
    nsteps++;
}

static void assert_steps(const int *want, int n)
{
    cr_assert_eq(nsteps, n, "got %d steps, want %d", nsteps, n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(steps[i], want[i], "step %d is %d, want %d", i, steps[i], want[i]);
}

static void two_halves(void *arg)
{
    (void)arg;
    step(1);
    cr_coro_yield();
    step(3);
}

Test(coro, resume_yield_finish_ordering)
{
    nsteps = 0;
    cr_coro *co = new_coro(pool, two_halves, NULL);
    cr_assert_not_null(co);
    cr_assert_not(cr_coro_finished(co));
    step(0);
    cr_coro_resume(co);
    cr_assert_not(cr_coro_finished(co));
    step(2);
    cr_coro_resume(co);
    cr_assert(cr_coro_finished(co));
    step(4);
    assert_steps((int[]){0, 1, 2, 3, 4}, 5);
    cr_coro_destroy(co);
}

struct args {
    int a, b, sum;
    cr_coro *self;
    cr_coro *seen_current;
    void *seen_data;
};

static void add(void *arg)
{
    struct args *x = arg;
    x->seen_current = cr_coro_current();
    x->seen_data = cr_coro_data(x->self);
    x->sum = x->a + x->b;
}

Test(coro, arguments_current_and_data)
{
    struct args x = {.a = 40, .b = 2};
    cr_coro *co = new_coro(pool, add, &x);
    x.self = co;
    int tag;
    cr_coro_set_data(co, &tag);
    cr_assert_eq(cr_coro_data(co), &tag);
    cr_assert_null(cr_coro_current());
    cr_coro_resume(co);
    cr_assert_null(cr_coro_current(), "current must be NULL outside a coroutine");
    cr_assert_eq(x.sum, 42);
    cr_assert_eq(x.seen_current, co);
    cr_assert_eq(x.seen_data, &tag);
    cr_assert(cr_coro_finished(co));
    cr_coro_destroy(co);
}

struct counter {
    long n;
    bool stop;
};

static void count_up(void *arg)
{
    struct counter *c = arg;
    while (!c->stop) {
        c->n++;
        cr_coro_yield();
    }
}

Test(coro, many_yields)
{
    struct counter c = {0};
    cr_coro *co = new_coro(pool, count_up, &c);
    for (long i = 1; i <= 1000000; i++) {
        cr_coro_resume(co);
        cr_assert_eq(c.n, i);
    }
    cr_assert_not(cr_coro_finished(co));
    c.stop = true;
    cr_coro_resume(co);
    cr_assert(cr_coro_finished(co));
    cr_assert_eq(c.n, 1000000);
    cr_coro_destroy(co);
}

static cr_coro *inner_co, *outer_co;

static void inner(void *arg)
{
    (void)arg;
    cr_assert_eq(cr_coro_current(), inner_co);
    step(2);
    cr_coro_yield(); /* back to outer, its resumer */
    cr_assert_eq(cr_coro_current(), inner_co);
    step(6);
}

static void outer(void *arg)
{
    (void)arg;
    step(1);
    cr_coro_resume(inner_co);
    cr_assert_eq(cr_coro_current(), outer_co);
    step(3);
    cr_coro_yield(); /* back to the thread */
    cr_assert_eq(cr_coro_current(), outer_co);
    step(5);
    cr_coro_resume(inner_co);
    cr_assert(cr_coro_finished(inner_co));
    step(7);
}

Test(coro, nested_resume_yields_to_the_resumer)
{
    nsteps = 0;
    outer_co = new_coro(pool, outer, NULL);
    inner_co = new_coro(pool, inner, NULL);
    step(0);
    cr_coro_resume(outer_co);
    cr_assert_null(cr_coro_current());
    step(4);
    cr_coro_resume(outer_co);
    step(8);
    cr_assert(cr_coro_finished(outer_co));
    assert_steps((int[]){0, 1, 2, 3, 4, 5, 6, 7, 8}, 9);
    cr_coro_destroy(inner_co);
    cr_coro_destroy(outer_co);
}

static void noop(void *arg)
{
    ++*(int *)arg;
}

Test(coro, ten_thousand_coroutines_reuse_pooled_stacks)
{
    /* One at a time: the same cached stack comes back every time. */
    int runs = 0;
    void *first_lo = NULL;
    for (int i = 0; i < 10000; i++) {
        cr_coro *co = new_coro(pool, noop, &runs);
        cr_assert_not_null(co);
        void *lo, *hi;
        cr_assert_eq(cr_coro_stack_bounds(co, &lo, &hi), 0);
        if (i == 0)
            first_lo = lo;
        cr_assert_eq(lo, first_lo, "iteration %d did not reuse the cached stack", i);
        cr_coro_resume(co);
        cr_coro_destroy(co);
    }
    cr_assert_eq(runs, 10000);

    /* Many alive at once: more than the pool caches, so some are unmapped. */
    enum { LIVE = 100 };
    cr_coro *live[LIVE];
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < LIVE; i++) {
            live[i] = new_coro(pool, noop, &runs);
            cr_assert_not_null(live[i]);
        }
        for (int i = 0; i < LIVE; i++)
            cr_coro_resume(live[i]);
        for (int i = 0; i < LIVE; i++)
            cr_coro_destroy(live[i]);
    }
    cr_assert_eq(runs, 10000 + 20 * LIVE);
}

Test(coro, never_resumed_coroutine_can_be_destroyed)
{
    int runs = 0;
    cr_coro *co = new_coro(pool, noop, &runs);
    cr_coro_destroy(co);
    cr_assert_eq(runs, 0);
}

/* Recursion with 512-byte frames, each filled with a pattern that depends on
 * the depth and checked after the coroutine was switched out at every level
 * on the way down and up. */
enum { FRAME_BYTES = 512 };

static __attribute__((noinline)) unsigned deep(int depth, int max, unsigned salt)
{
    volatile unsigned char buf[FRAME_BYTES];
    for (int i = 0; i < FRAME_BYTES; i++)
        buf[i] = (unsigned char)(depth * 31 + i + salt);
    cr_coro_yield();
    unsigned sum = depth < max ? deep(depth + 1, max, salt) : 0;
    cr_coro_yield();
    for (int i = 0; i < FRAME_BYTES; i++)
        if (buf[i] != (unsigned char)(depth * 31 + i + salt))
            return 1u << 31; /* marks corruption */
    return sum + 1;
}

struct deep_args {
    int levels;
    unsigned salt;
    unsigned result;
    uintptr_t lowest;
};

static void deep_entry(void *arg)
{
    struct deep_args *d = arg;
    d->result = deep(1, d->levels, d->salt);
}

Test(coro, stack_contents_survive_switches)
{
    /* 64 levels of > 512 bytes: at least 32 KiB of the 64 KiB stack. */
    struct deep_args a = {.levels = 64, .salt = 7}, b = {.levels = 64, .salt = 99};
    cr_coro *ca = new_coro(pool, deep_entry, &a);
    cr_coro *cb = new_coro(pool, deep_entry, &b);
    while (!cr_coro_finished(ca) || !cr_coro_finished(cb)) {
        /* Interleave two deep stacks and scribble on the thread's own. */
        volatile unsigned char scratch[4096];
        memset((void *)scratch, 0x5a, sizeof(scratch));
        if (!cr_coro_finished(ca))
            cr_coro_resume(ca);
        if (!cr_coro_finished(cb))
            cr_coro_resume(cb);
        cr_assert_eq(scratch[4095], 0x5a);
    }
    cr_assert_eq(a.result, 64u, "stack of a corrupted: %#x", a.result);
    cr_assert_eq(b.result, 64u, "stack of b corrupted: %#x", b.result);
    cr_coro_destroy(ca);
    cr_coro_destroy(cb);
}

static __attribute__((noinline)) uintptr_t frame_address(void)
{
    return (uintptr_t)__builtin_frame_address(0);
}

static void check_alignment(void *arg)
{
    uintptr_t *out = arg;
    out[0] = frame_address();
    char buf[64];
    /* printf with doubles uses aligned SSE spills on x86-64: it crashes on
     * a misaligned stack. */
    snprintf(buf, sizeof(buf), "%.3f %Lf", 3.14159, (long double)2.5);
    out[1] = strcmp(buf, "3.142 2.500000") == 0;
    cr_coro_yield();
    out[2] = frame_address();
}

Test(coro, stack_is_aligned_per_abi)
{
    uintptr_t out[3] = {1, 0, 1};
    cr_coro *co = new_coro(pool, check_alignment, out);
    cr_coro_resume(co);
    cr_coro_resume(co);
    cr_assert_eq(out[0] % 16, 0);
    cr_assert_eq(out[1], 1);
    cr_assert_eq(out[2] % 16, 0);
    void *lo, *hi;
    cr_assert_eq(cr_coro_stack_bounds(co, &lo, &hi), 0);
    cr_assert(out[0] > (uintptr_t)lo && out[0] < (uintptr_t)hi, "frame not on the stack");
    cr_assert_geq((char *)hi - (char *)lo, CR_CORO_DEFAULT_STACK_SIZE);
    cr_coro_destroy(co);
}

static void float_work(void *arg)
{
    double *out = arg;
    double x = out[0];
    for (int i = 0; i < 10; i++) {
        x = x * 1.5 + 0.25;
        cr_coro_yield();
    }
    out[1] = x;
}

Test(coro, doubles_live_across_switches)
{
    double in_a[2] = {1.0, 0}, in_b[2] = {-3.0, 0};
    cr_coro *a = new_coro(pool, float_work, in_a);
    cr_coro *b = new_coro(pool, float_work, in_b);
    double mine = 0.125;
    while (!cr_coro_finished(a)) {
        mine = mine * 2.0 - 0.0625;
        cr_coro_resume(a);
        cr_coro_resume(b);
    }
    double want_a = 1.0, want_b = -3.0, want_mine = 0.125;
    for (int i = 0; i < 10; i++) {
        want_a = want_a * 1.5 + 0.25;
        want_b = want_b * 1.5 + 0.25;
    }
    for (int i = 0; i < 11; i++)
        want_mine = want_mine * 2.0 - 0.0625;
    cr_assert_float_eq(in_a[1], want_a, 1e-12);
    cr_assert_float_eq(in_b[1], want_b, 1e-12);
    cr_assert_float_eq(mine, want_mine, 1e-12);
    cr_coro_destroy(a);
    cr_coro_destroy(b);
}

#if defined(__x86_64__)
static unsigned short x87_control_word(void)
{
    unsigned short cw;
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    return cw;
}

static void set_x87_control_word(unsigned short cw)
{
    __asm__ volatile("fldcw %0" : : "m"(cw));
}

struct fp_state {
    unsigned mxcsr_after_yield;
    unsigned short x87_after_yield;
};

static void change_rounding(void *arg)
{
    struct fp_state *s = arg;
    _mm_setcsr((_mm_getcsr() & ~0x6000u) | 0x4000u); /* round up */
    set_x87_control_word((unsigned short)((x87_control_word() & ~0x0c00u) | 0x0800u));
    cr_coro_yield();
    s->mxcsr_after_yield = _mm_getcsr();
    s->x87_after_yield = x87_control_word();
}
#endif

Test(coro, fp_control_state_stays_with_its_context)
{
#if defined(__x86_64__)
    unsigned mxcsr = _mm_getcsr();
    unsigned short x87 = x87_control_word();
    struct fp_state s = {0};
    cr_coro *co = new_coro(pool, change_rounding, &s);
    cr_coro_resume(co);
    cr_assert_eq(_mm_getcsr() & 0xffc0u, mxcsr & 0xffc0u, "MXCSR leaked out of the coroutine");
    cr_assert_eq(x87_control_word(), x87, "x87 control word leaked out of the coroutine");
    cr_coro_resume(co);
    cr_assert(cr_coro_finished(co));
    cr_assert_eq(s.mxcsr_after_yield & 0x6000u, 0x4000u, "the coroutine lost its MXCSR");
    cr_assert_eq(s.x87_after_yield & 0x0c00u, 0x0800u, "the coroutine lost its x87 word");
    cr_assert_eq(_mm_getcsr() & 0xffc0u, mxcsr & 0xffc0u);
    cr_assert_eq(x87_control_word(), x87);
    cr_coro_destroy(co);
#else
    cr_skip_test("MXCSR and the x87 control word exist on x86-64 only");
#endif
}

struct arena_use {
    char *small, *large;
};

static void use_arena(void *arg)
{
    struct arena_use *u = arg;
    cr_arena *a = cr_coro_arena(cr_coro_current());
    u->small = cr_arena_alloc(a, 100);
    u->large = cr_arena_alloc(a, 200000);
    cr_coro_yield();
    memset(u->small, 1, 100);
    memset(u->large, 2, 200000);
    for (int i = 0; i < 50; i++)
        cr_arena_strndup(a, "some request data", 17);
}

Test(coro, arena_is_freed_on_destroy)
{
    /* Unpooled: everything goes back to malloc; ASan's leak check at exit
     * reports it otherwise. */
    cr_stack_pool *none = new_pool(0, 0);
    struct arena_use u = {0};
    cr_coro *co = new_coro(none, use_arena, &u);
    cr_assert_not_null(cr_coro_arena(co));
    cr_assert_not_null(cr_coro_arena(co)->fixed, "the arena's first chunk is in the mapping");
    cr_assert_eq(cr_coro_arena(co)->head, cr_coro_arena(co)->fixed,
                 "a new coroutine's arena holds its fixed chunk only");
    cr_coro_resume(co);
    cr_assert_not_null(u.small);
    cr_assert((char *)u.small > (char *)co, "the first chunk lies above the record, not in the stack");
    cr_assert_not_null(u.large);
    cr_coro_resume(co);
    cr_coro_destroy(co);
    cr_stack_pool_destroy(none);

    /* Pooled: the record keeps one chunk, so the next coroutine on that
     * stack allocates without malloc and gets the same memory back. */
    struct arena_use v = {0}, w = {0};
    co = new_coro(pool, use_arena, &v);
    cr_coro_resume(co);
    cr_coro_resume(co);
    cr_coro_destroy(co);
    co = new_coro(pool, use_arena, &w);
    cr_coro_resume(co);
    cr_assert_eq(w.small, v.small, "the cached arena chunk was not reused");
    cr_coro_resume(co);
    cr_coro_destroy(co);
}

Test(coro, create_rejects_null_arguments)
{
    cr_coro *co = (cr_coro *)&co; /* a value the failures must leave alone */
    cr_assert_eq(cr_coro_create(&co, NULL, noop, NULL), -EINVAL);
    cr_assert_eq(cr_coro_create(&co, pool, NULL, NULL), -EINVAL);
    cr_assert_eq(cr_coro_create(NULL, pool, noop, NULL), -EINVAL);
    cr_assert_eq(co, (cr_coro *)&co, "a failed cr_coro_create wrote its out argument");
    cr_assert_eq(cr_stack_pool_create(NULL, 0, 1), -EINVAL);
    cr_stack_pool *p = (cr_stack_pool *)&p;
    cr_assert_eq(cr_stack_pool_create(&p, SIZE_MAX, 1), -ENOMEM);
    cr_assert_eq(p, (cr_stack_pool *)&p, "a failed cr_stack_pool_create wrote its out argument");
    void *lo, *hi;
    cr_assert_lt(cr_coro_stack_bounds(NULL, &lo, &hi), 0);
}

Test(coro, odd_stack_sizes_round_up_to_pages)
{
    cr_stack_pool *p = new_pool(10000, 1);
    cr_assert_not_null(p);
    int runs = 0;
    cr_coro *co = new_coro(p, noop, &runs);
    void *lo, *hi;
    cr_coro_stack_bounds(co, &lo, &hi);
    cr_assert_geq((char *)hi - (char *)lo, 10000);
    cr_assert_eq((uintptr_t)lo % 4096, 0);
    cr_coro_resume(co);
    cr_assert_eq(runs, 1);
    cr_coro_destroy(co);
    cr_stack_pool_destroy(p);
}

Test(coro, resume_of_a_finished_coroutine_aborts, .signal = SIGABRT)
{
    int runs = 0;
    cr_coro *co = new_coro(pool, noop, &runs);
    cr_coro_resume(co);
    cr_coro_resume(co);
}

Test(coro, yield_outside_a_coroutine_aborts, .signal = SIGABRT)
{
    cr_coro_yield();
}

Test(coro, trim_unmaps_the_stacks_unused_since_the_last_trim)
{
    cr_stack_pool *p = new_pool(0, 64);
    cr_assert_not_null(p);
    /* A burst: 20 coroutines at once, each touching its stack. */
    cr_coro *cos[20];
    int runs = 0;
    for (int i = 0; i < 20; i++)
        cos[i] = new_coro(p, noop, &runs);
    void *lo[20], *hi;
    for (int i = 0; i < 20; i++) {
        cr_coro_stack_bounds(cos[i], &lo[i], &hi);
        cr_coro_resume(cos[i]);
        cr_coro_destroy(cos[i]);
    }
    cr_assert_eq(cr_stack_pool_cached(p), 20);
    /* The first trim after the burst: the pool had none cached before it,
     * so none stayed unused all along. */
    cr_assert_eq(cr_stack_pool_trim(p, 4), 0);
    /* A working set of 3 is taken and given back in this interval: the
     * other 17 stayed unused, and all but 4 of those go. */
    for (int round = 0; round < 5; round++) {
        cr_coro *a = new_coro(p, noop, &runs), *b = new_coro(p, noop, &runs),
                *c = new_coro(p, noop, &runs);
        cr_coro_resume(a), cr_coro_resume(b), cr_coro_resume(c);
        cr_coro_destroy(c), cr_coro_destroy(b), cr_coro_destroy(a);
    }
    cr_assert_eq(cr_stack_pool_trim(p, 4), 13);
    cr_assert_eq(cr_stack_pool_cached(p), 7);
    /* The coldest went: the stacks touched first in the burst (at the
     * bottom of the LIFO) are unmapped: mincore(2) fails on them. */
    unsigned char v;
    cr_assert_neq(mincore((void *)((uintptr_t)lo[0] & ~(uintptr_t)4095), 4096, &v), 0,
                  "the coldest stack is still mapped");
    /* Nothing used since: everything beyond @keep goes. */
    cr_assert_eq(cr_stack_pool_trim(p, 4), 3);
    cr_assert_eq(cr_stack_pool_cached(p), 4);
    cr_assert_eq(cr_stack_pool_trim(p, 4), 0);
    /* The pool still works, from its cache and beyond it. */
    cr_coro *more[6];
    for (int i = 0; i < 6; i++)
        more[i] = new_coro(p, noop, &runs);
    for (int i = 0; i < 6; i++) {
        cr_coro_resume(more[i]);
        cr_coro_destroy(more[i]);
    }
    cr_assert_eq(runs, 20 + 15 + 6);
    cr_stack_pool_destroy(p);
}
