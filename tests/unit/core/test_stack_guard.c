/*
 * A coroutine that overflows its stack must fault on the guard page below
 * it, never write into memory beyond. Each test forks a child that recurses
 * without end inside a coroutine; the parent checks how the child died.
 *
 * With the default disposition the child dies of SIGSEGV. With a handler on
 * an alternate signal stack, it reports whether the faulting address lies
 * in the guard page of that coroutine's stack (exit 99) or elsewhere (exit
 * 98). Both work with and without AddressSanitizer: the child replaces
 * ASan's SIGSEGV handler, which would otherwise report and exit(1).
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coring/core/coro.h"

enum {
    EXIT_GUARD_HIT = 99, /* fault inside the guard page */
    EXIT_FAULT_ELSEWHERE = 98,
    EXIT_NO_FAULT = 97, /* the recursion returned: cannot happen */
    EXIT_SETUP_FAILED = 96,
};

static uintptr_t guard_lo, guard_hi;
static volatile int depth_limit = 1 << 30;

static void on_segv(int sig, siginfo_t *info, void *ctx)
{
    (void)sig, (void)ctx;
    uintptr_t addr = (uintptr_t)info->si_addr;
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

static void overflow(void *arg)
{
    (void)arg;
    recurse(0);
    _exit(EXIT_NO_FAULT);
}

/* In the child: run a coroutine that overflows, with our handler or with
 * the default action for SIGSEGV. Never returns. */
static void child(size_t stack_size, bool handler)
{
    cr_stack_pool *pool = cr_stack_pool_create(stack_size, 1);
    cr_coro *co = pool ? cr_coro_create(pool, overflow, NULL) : NULL;
    void *lo, *hi;
    if (!co || cr_coro_stack_bounds(co, &lo, &hi) != 0)
        _exit(EXIT_SETUP_FAILED);
    long page = sysconf(_SC_PAGESIZE);
    guard_lo = (uintptr_t)lo - (uintptr_t)page;
    guard_hi = (uintptr_t)lo;

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
static int run_child(size_t stack_size, bool handler)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0)
        child(stack_size, handler);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return status;
}

Test(stack_guard, overflow_kills_with_sigsegv)
{
    int status = run_child(0, false);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
              "child did not die of SIGSEGV (exited %d, signal %d)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1,
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

Test(stack_guard, overflow_faults_on_the_guard_page)
{
    int status = run_child(0, true);
    cr_assert(WIFEXITED(status), "child died of signal %d, not through its handler",
              WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    cr_assert_eq(WEXITSTATUS(status), EXIT_GUARD_HIT);
}

Test(stack_guard, overflow_of_a_small_stack_faults_on_the_guard_page)
{
    int status = run_child(16 * 1024, true);
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), EXIT_GUARD_HIT);
}
