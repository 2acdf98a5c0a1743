/*
 * Service tasks (net_spawn_service: database drivers, the curl timer and
 * socket watchers) run on a larger stack than connections, since libpq,
 * libcurl and OpenSSL run on them: a frame that would overflow a
 * connection's 64 KiB, reached inside a library call (qsort(3) calling back
 * into a comparator with 80 KiB of locals), fits. On a 64 KiB stack the
 * same call faults on the guard region and takes the process down.
 */
#include "coring/core/coro.h"

#include "runtime_util.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEEP_FRAME (80 * 1024)

static struct {
    int spawn_err;
    size_t deepest; /* bytes of its stack the comparator reached, from the top */
    size_t stack;   /* the stack's usable size */
    int sorted;
} r = {.spawn_err = 1};

static int deep_compare(const void *a, const void *b)
{
    volatile unsigned char big[DEEP_FRAME];
    memset((void *)big, 1, sizeof(big));
    void *lo, *hi;
    if (cr_coro_stack_bounds(cr_coro_current(), &lo, &hi) == 0) {
        size_t used = (size_t)((char *)hi - (char *)big);
        if (used > r.deepest)
            r.deepest = used;
        r.stack = (size_t)((char *)hi - (char *)lo);
    }
    return *(const int *)a - *(const int *)b + (big[0] - big[sizeof(big) - 1]);
}

static void service(void *arg)
{
    (void)arg;
    int v[4] = {3, 1, 2, 0};
    qsort(v, 4, sizeof(v[0]), deep_compare);
    r.sorted = v[0] == 0 && v[1] == 1 && v[2] == 2 && v[3] == 3;
    kill(getpid(), SIGTERM);
}

static int thread_init(void *user)
{
    (void)user;
    r.spawn_err = net_spawn_service(service, NULL);
    return 0;
}

Test(service_stack, a_frame_over_64_kib_in_a_library_call_fits, .timeout = 20)
{
    net_config cfg = test_config(1, 0);
    cr_assert_eq(cfg.stack_size, 64 * 1024, "a connection's stack is 64 KiB");
    net_hooks hooks = {.thread_init = thread_init, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(r.spawn_err, 0);
    cr_expect(r.sorted, "qsort did not finish");
    cr_expect_gt(r.deepest, cfg.stack_size, "the frame reached %zu bytes deep: it fits 64 KiB",
                 r.deepest);
    cr_expect_geq(r.stack, cfg.service_stack_size, "service stack %zu bytes", r.stack);
}
