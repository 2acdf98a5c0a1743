/*
 * A coroutine that overflows its stack must fault on the guard region below
 * it, never write into memory beyond. Each test forks a child that recurses
 * without end inside a coroutine; the parent checks how the child died.
 *
 * With the default disposition the child dies of SIGSEGV. With a handler on
 * an alternate signal stack, it reports whether the faulting address lies
 * in the guard region of that coroutine's stack (exit 99) or elsewhere
 * (exit 98). Both work with and without AddressSanitizer: the child replaces
 * ASan's SIGSEGV handler, which would otherwise report and exit(1).
 *
 * The frames of the recursion are 200 bytes, or 12 KiB: larger than a
 * page, as a handler with a big local buffer would be. For those a canary
 * mapping is placed right below the guard region (when that address range
 * is free): its bytes must be intact when the fault comes, i.e. nothing
 * stepped over the guard.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coring/core/coro.h"

#include "coro_util.h"

enum {
    EXIT_GUARD_HIT = 99, /* fault inside the guard page */
    EXIT_FAULT_ELSEWHERE = 98,
    EXIT_NO_FAULT = 97, /* the recursion returned: cannot happen */
    EXIT_SETUP_FAILED = 96,
    EXIT_CANARY_HIT = 95, /* memory below the guard was written */
};

enum { CANARY_BYTES = 64 * 1024, CANARY = 0x5a };

static uintptr_t guard_lo, guard_hi;
static volatile int depth_limit = 1 << 30;
static unsigned char *canary; /* CANARY_BYTES right below the guard, or NULL */

static bool canary_intact(void)
{
    for (size_t i = 0; canary && i < CANARY_BYTES; i++)
        if (canary[i] != CANARY)
            return false;
    return true;
}

static void on_segv(int sig, siginfo_t *info, void *ctx)
{
    (void)sig, (void)ctx;
    uintptr_t addr = (uintptr_t)info->si_addr;
    if (!canary_intact())
        _exit(EXIT_CANARY_HIT);
    _exit(addr >= guard_lo && addr < guard_hi ? EXIT_GUARD_HIT : EXIT_FAULT_ELSEWHERE);
}

/* Not a tail call: the frame stays live until the deeper call returns. */
static __attribute__((noinline)) int recurse(int depth)
{
    volatile char buf[200];
    buf[0] = (char)depth;
    if (depth == depth_limit)
        return 0;
    return recurse(depth + 1) + buf[0];
}

/* A frame larger than a page: 12 KiB of locals, written at both ends. */
static __attribute__((noinline)) int recurse_big(int depth)
{
    volatile char buf[12 * 1024];
    buf[0] = (char)depth;
    buf[sizeof(buf) - 1] = (char)depth;
    if (depth == depth_limit)
        return 0;
    return recurse_big(depth + 1) + buf[0] + buf[sizeof(buf) - 1];
}

static void overflow(void *arg)
{
    (void)arg;
    recurse(0);
    _exit(EXIT_NO_FAULT);
}

static void overflow_big(void *arg)
{
    (void)arg;
    recurse_big(0);
    _exit(EXIT_NO_FAULT);
}

/* In the child: run a coroutine that overflows, with our handler or with
 * the default action for SIGSEGV. Never returns. */
static void child(size_t stack_size, bool handler, bool big_frames)
{
    cr_stack_pool *pool = new_pool(stack_size, 1);
    cr_coro *co = pool ? new_coro(pool, big_frames ? overflow_big : overflow, NULL) : NULL;
    void *lo, *hi;
    if (!co || cr_coro_stack_bounds(co, &lo, &hi) != 0)
        _exit(EXIT_SETUP_FAILED);
    long page = sysconf(_SC_PAGESIZE);
    size_t guard = ((size_t)CR_CORO_GUARD_SIZE + (size_t)page - 1) & ~((size_t)page - 1);
    guard_lo = (uintptr_t)lo - guard;
    guard_hi = (uintptr_t)lo;
    /* The canary, where the address range below the guard is free. */
    void *want = (void *)(guard_lo - CANARY_BYTES);
    void *got = mmap(want, CANARY_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (got == want) {
        canary = got;
        memset(canary, CANARY, CANARY_BYTES);
    } else if (got != MAP_FAILED) {
        munmap(got, CANARY_BYTES); /* a kernel without MAP_FIXED_NOREPLACE */
    }

    /* The handler cannot run on the overflowed stack. */
    stack_t ss = {.ss_sp = malloc(1 << 16), .ss_size = 1 << 16};
    struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    if (!handler)
        sa = (struct sigaction){.sa_handler = SIG_DFL};
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0)
        _exit(EXIT_SETUP_FAILED);
    cr_coro_resume(co);
    _exit(EXIT_NO_FAULT);
}

/* Fork a child running child(); returns its wait status. */
static int run_child(size_t stack_size, bool handler, bool big_frames)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0)
        child(stack_size, handler, big_frames);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

Test(stack_guard, overflow_kills_with_sigsegv)
{
    int status = run_child(0, false, false);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
              "child did not die of SIGSEGV (exited %d, signal %d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(stack_guard, overflow_faults_on_the_guard_page)
{
    int status = run_child(0, true, false);
    cr_assert(WIFEXITED(status), "child died of signal %d, not through its handler",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert_eq(WEXITSTATUS(status), EXIT_GUARD_HIT);
}

Test(stack_guard, overflow_of_a_small_stack_faults_on_the_guard_page)
{
    int status = run_child(16 * 1024, true, false);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), EXIT_GUARD_HIT);
}

/* Frames larger than a page (a handler with a 12 KiB buffer): the overflow
 * still faults inside the guard region and nothing below it is written. */
Test(stack_guard, overflow_with_frames_over_a_page_kills_with_sigsegv)
{
    int status = run_child(0, false, true);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
              "child did not die of SIGSEGV (exited %d, signal %d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(stack_guard, overflow_with_frames_over_a_page_faults_on_the_guard)
{
    int status = run_child(0, true, true);
    cr_assert(WIFEXITED(status), "child died of signal %d, not through its handler",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert_neq(WEXITSTATUS(status), EXIT_CANARY_HIT, "memory below the guard was written");
    cr_assert_eq(WEXITSTATUS(status), EXIT_GUARD_HIT);
}

/* CORING_STACK_REPORT: the deepest use of a stack is measured (painting),
 * within a page of what the coroutine touched. */
static void use_20k(void *arg)
{
    (void)arg;
    volatile char buf[20 * 1024];
    buf[0] = 1;
    buf[sizeof(buf) - 1] = buf[0];
}

Test(stack_guard, deepest_stack_use_is_measured_when_asked)
{
    cr_assert_eq(setenv("CORING_STACK_REPORT", "1", 1), 0);
    cr_stack_pool *pool = new_pool(0, 1);
    cr_assert_not_null(pool);
    cr_assert_eq(cr_stack_pool_deepest(pool), 0);
    cr_coro *co = new_coro(pool, use_20k, NULL);
    cr_assert_not_null(co);
    cr_coro_resume(co);
    cr_coro_destroy(co);
    size_t deepest = cr_stack_pool_deepest(pool);
    cr_expect_geq(deepest, 20u * 1024u);
    cr_expect_lt(deepest, 24u * 1024u + 4096u);
    cr_stack_pool_destroy(pool);
    unsetenv("CORING_STACK_REPORT");

    pool = new_pool(0, 1);
    co = new_coro(pool, use_20k, NULL);
    cr_coro_resume(co);
    cr_coro_destroy(co);
    cr_expect_eq(cr_stack_pool_deepest(pool), 0, "measured without CORING_STACK_REPORT");
    cr_stack_pool_destroy(pool);
}
