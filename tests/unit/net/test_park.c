/*
 * net_park / net_unpark: a coroutine parked on the same thread is woken by
 * another coroutine, by its descriptor becoming ready, by its timeout
 * (short: a timeout SQE; long: the loop's tick), or by shutdown.
 */
#include "coring/core/clock.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
    net_task *sleeper;
    int woken_res;
    int woken_order;     /* 1 when the waker ran on after net_unpark first */
    bool unpark_ret, unpark_again;
    int fd_res;
    int short_res;
    uint64_t short_ns;
    int long_res;
    uint64_t long_ns;
    int fd_unpark_res;
    int idle_res;
    int step;
} r;

static int sv[2];

static void sleeper(void *arg)
{
    (void)arg;
    r.sleeper = net_task_current();
    r.woken_res = net_park(-1, 0, 0);
    r.woken_order = r.step;
}

static void waker(void *arg)
{
    (void)arg;
    net_sleep(5 * CR_NS_PER_MS);
    r.unpark_ret = net_unpark(r.sleeper);
    r.unpark_again = net_unpark(r.sleeper); /* already woken: false */
    r.step = 1;                             /* the sleeper has not run yet */
}

static void fd_waiter(void *arg)
{
    (void)arg;
    r.fd_res = net_park(sv[1], POLLIN, 2 * CR_NS_PER_S);

    uint64_t t0 = cr_clock_now_ns();
    r.short_res = net_park(-1, 0, 20 * CR_NS_PER_MS);
    r.short_ns = cr_clock_now_ns() - t0;

    t0 = cr_clock_now_ns();
    r.long_res = net_park(-1, 0, CR_NS_PER_S);
    r.long_ns = cr_clock_now_ns() - t0;

    /* Parked on a descriptor that stays quiet, woken by another coroutine. */
    r.sleeper = net_task_current();
    r.fd_unpark_res = net_park(sv[1], POLLPRI, 0);
    kill(getpid(), SIGTERM);
}

static void fd_waker(void *arg)
{
    (void)arg;
    net_sleep(5 * CR_NS_PER_MS);
    if (write(sv[0], "x", 1) != 1)
        return;
    char c;
    net_sleep(5 * CR_NS_PER_MS);
    if (read(sv[1], &c, 1) != 1)
        return;
    /* Wait until the waiter is parked on the quiet descriptor. */
    while (r.long_ns == 0)
        net_sleep(10 * CR_NS_PER_MS);
    net_sleep(5 * CR_NS_PER_MS);
    net_unpark(r.sleeper);
}

static void idle_parker(void *arg)
{
    (void)arg;
    net_task_set_idle(true);
    r.idle_res = net_park(-1, 0, 0); /* only shutdown ends this */
}

static int thread_init(void *user)
{
    (void)user;
    net_spawn(sleeper, NULL);
    net_spawn(waker, NULL);
    net_spawn(idle_parker, NULL);
    return 0;
}

static void never_connected(int fd, void *user)
{
    (void)user;
    net_close(fd);
}

static int thread_init_fd(void *user)
{
    (void)user;
    net_spawn(fd_waiter, NULL);
    net_spawn(fd_waker, NULL);
    net_spawn(idle_parker, NULL);
    return 0;
}

static net_config one_thread(void)
{
    net_config cfg = net_config_default();
    cfg.threads = 1;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    cfg.shutdown_timeout_ns = 5 * CR_NS_PER_S;
    return cfg;
}

static void term_soon(void *arg)
{
    (void)arg;
    net_sleep(50 * CR_NS_PER_MS);
    kill(getpid(), SIGTERM);
}

static int thread_init_term(void *user)
{
    thread_init(user);
    net_spawn(term_soon, NULL);
    return 0;
}

Test(park, unpark_wakes_at_the_next_turn_and_shutdown_cancels_idle, .timeout = 20)
{
    net_config cfg = one_thread();
    net_hooks hooks = {.thread_init = thread_init_term, .on_connection = never_connected};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_lt(cr_clock_now_ns() - t0, 2 * CR_NS_PER_S, "an idle parked task delayed shutdown");
    cr_expect(r.unpark_ret);
    cr_expect_not(r.unpark_again);
    cr_expect_eq(r.woken_res, 0);
    cr_expect_eq(r.woken_order, 1, "the parked task ran inside net_unpark");
    cr_expect_eq(r.idle_res, -ECANCELED);
}

Test(park, descriptor_timeouts_and_unpark_of_a_poll, .timeout = 20)
{
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    net_config cfg = one_thread();
    net_hooks hooks = {.thread_init = thread_init_fd, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect(r.fd_res > 0 && (r.fd_res & POLLIN), "fd readiness: %d", r.fd_res);
    cr_expect_eq(r.short_res, -ETIMEDOUT);
    cr_expect_geq(r.short_ns, 20 * CR_NS_PER_MS);
    cr_expect_lt(r.short_ns, 500 * CR_NS_PER_MS);
    cr_expect_eq(r.long_res, -ETIMEDOUT);
    cr_expect_geq(r.long_ns, CR_NS_PER_S);
    cr_expect_lt(r.long_ns, 1500 * CR_NS_PER_MS);
    cr_expect_eq(r.fd_unpark_res, 0);
    cr_expect_eq(r.idle_res, -ECANCELED);
}
