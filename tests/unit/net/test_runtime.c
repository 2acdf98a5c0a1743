/*
 * The runtime end to end without HTTP: worker threads, coroutine I/O with
 * timeouts, cancellation, cross-core messages over IORING_OP_MSG_RING, and
 * shutdown on SIGTERM. Each Criterion test runs in its own process, so
 * net_run() may take the process's signals.
 */
#include "coring/core/clock.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
    uint64_t slept_ns;
    ssize_t recv_timeout_res;
    uint64_t recv_timeout_ns;
    ssize_t recv_data_res;
    char data[8];
    int ran_on;
    int calls_done;
    int spawn_err;
} result;

static int sv[2];

typedef struct echo_msg {
    net_msg base;
    int ran_on;
    int value;
} echo_msg;

static void on_target(net_msg *m)
{
    echo_msg *msg = (echo_msg *)m;
    msg->ran_on = net_thread_index();
    msg->value *= 2;
}

static void scenario(void *arg)
{
    (void)arg;
    uint64_t t0 = cr_clock_now_ns();
    net_sleep(20 * CR_NS_PER_MS);
    result.slept_ns = cr_clock_now_ns() - t0;

    char buf[8];
    t0 = cr_clock_now_ns();
    result.recv_timeout_res = net_recv(sv[1], buf, sizeof(buf), 50 * CR_NS_PER_MS);
    result.recv_timeout_ns = cr_clock_now_ns() - t0;

    if (write(sv[0], "ping", 4) != 4)
        return;
    result.recv_data_res = net_recv(sv[1], result.data, sizeof(result.data), CR_NS_PER_S);

    for (int i = 0; i < 100; i++) {
        echo_msg msg = {.base.fn = on_target, .value = i};
        net_call(1, &msg.base);
        if (msg.value == 2 * i)
            result.calls_done++;
        result.ran_on = msg.ran_on;
    }
    kill(getpid(), SIGTERM);
}

static int thread_init(void *user)
{
    (void)user;
    if (net_thread_index() == 0)
        result.spawn_err = net_spawn(scenario, NULL);
    return 0;
}

static void never_connected(int fd, void *user)
{
    (void)user;
    net_close(fd);
}

Test(runtime, io_timeouts_messages_and_shutdown, .timeout = 20)
{
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    net_config cfg = net_config_default();
    cfg.threads = 2;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    cfg.shutdown_timeout_ns = 2 * CR_NS_PER_S;
    net_hooks hooks = {.thread_init = thread_init, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);

    cr_expect_eq(result.spawn_err, 0);
    cr_expect_geq(result.slept_ns, 20 * CR_NS_PER_MS, "net_sleep returned early");
    cr_expect_eq(result.recv_timeout_res, -ETIMEDOUT);
    cr_expect_geq(result.recv_timeout_ns, 50 * CR_NS_PER_MS);
    cr_expect_lt(result.recv_timeout_ns, 2 * CR_NS_PER_S);
    cr_expect_eq(result.recv_data_res, 4);
    cr_expect_eq(memcmp(result.data, "ping", 4), 0);
    cr_expect_eq(result.calls_done, 100, "cross-core calls answered: %d", result.calls_done);
    cr_expect_eq(result.ran_on, 1, "message ran on thread %d", result.ran_on);
}

static atomic_int cancelled_res;

static void idle_waiter(void *arg)
{
    (void)arg;
    char buf[4];
    net_task_set_idle(true);
    /* Nothing ever arrives: only shutdown can end this wait. */
    atomic_store(&cancelled_res, (int)net_recv(sv[1], buf, sizeof(buf), 0));
}

static void send_term(void *arg)
{
    (void)arg;
    net_sleep(50 * CR_NS_PER_MS);
    kill(getpid(), SIGTERM);
}

static int thread_init_idle(void *user)
{
    (void)user;
    net_spawn(idle_waiter, NULL);
    if (net_thread_index() == 0)
        net_spawn(send_term, NULL);
    return 0;
}

Test(runtime, shutdown_cancels_idle_tasks, .timeout = 20)
{
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    net_config cfg = net_config_default();
    cfg.threads = 1;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    cfg.shutdown_timeout_ns = 5 * CR_NS_PER_S;
    net_hooks hooks = {.thread_init = thread_init_idle, .on_connection = never_connected};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_lt(cr_clock_now_ns() - t0, 2 * CR_NS_PER_S, "an idle task delayed shutdown");
    cr_expect_eq(atomic_load(&cancelled_res), -ECANCELED);
}

Test(runtime, bind_failure_is_reported)
{
    net_config cfg = net_config_default();
    cfg.threads = 1;
    cfg.host = "not-an-address";
    net_hooks hooks = {.on_connection = never_connected};
    cr_expect_eq(net_run(&cfg, &hooks), -EINVAL);
}

/* A foreign thread (not a worker) wakes a waiting coroutine. */
static struct {
    int wait_err;
    int wake_err;
    int resumed_on;
    int value;
} woken;

typedef struct job {
    net_wait_handle *wait;
    int input, output;
} job;

static void *foreign_worker(void *p)
{
    job *j = p;
    usleep(20 * 1000);
    j->output = j->input + 1;
    woken.wake_err = net_wake(j->wait);
    return NULL;
}

static void waiter(void *arg)
{
    (void)arg;
    job j = {.input = 41};
    woken.wait_err = net_wait_init(&j.wait);
    pthread_t tid;
    pthread_create(&tid, NULL, foreign_worker, &j);
    net_wait(j.wait, 0);
    woken.resumed_on = net_thread_index();
    woken.value = j.output;
    pthread_join(tid, NULL);
    kill(getpid(), SIGTERM);
}

static int thread_init_wait(void *user)
{
    (void)user;
    if (net_thread_index() == 1)
        net_spawn(waiter, NULL);
    return 0;
}

Test(runtime, foreign_thread_wakes_a_coroutine_on_its_own_ring, .timeout = 20)
{
    net_config cfg = net_config_default();
    cfg.threads = 2;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    net_hooks hooks = {.thread_init = thread_init_wait, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(woken.wait_err, 0);
    cr_expect_eq(woken.wake_err, 0);
    cr_expect_eq(woken.resumed_on, 1);
    cr_expect_eq(woken.value, 42);
}

/*
 * A wake-up that IORING_OP_MSG_RING cannot post (an error that is not
 * retried) must not leave its waiter parked forever. A worker posts it the
 * way net_wake does, with the one change that the target descriptor is not
 * a ring (an eventfd), so the kernel really fails it (-EBADFD) and the
 * failure takes the runtime's own path back.
 */
#include "net/src/loop.h"

#include <sys/eventfd.h>

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wait_res;
    atomic_bool resumed;
    int post_fd;
} lost;

static void lost_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    net_wait_init(&h);
    atomic_store(&lost.handle, h);
    int res = net_wait(h, 0);
    atomic_store(&lost.wait_res, res);
    atomic_store(&lost.resumed, true);
    kill(getpid(), SIGTERM);
}

static void failing_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&lost.handle)))
        net_sleep(CR_NS_PER_MS);
    lost.post_fd = eventfd(0, EFD_CLOEXEC);
    net_loop *loop = net_loop_current();
    net_ring_msg(&loop->ring, lost.post_fd, net_ptr_name(h, NET_TAG_MSG), 0,
                 net_ptr_name(h, NET_TAG_MSG_FAILED));
    /* Unfixed, the waiter never resumes: end the run anyway (the drain
     * then cannot finish either, and the process exits with status 1). */
    net_sleep(2 * CR_NS_PER_S);
    if (!atomic_load(&lost.resumed))
        kill(getpid(), SIGTERM);
}

static int thread_init_lost(void *user)
{
    (void)user;
    net_spawn(net_thread_index() == 0 ? lost_waiter : failing_waker, NULL);
    return 0;
}

Test(runtime, a_reply_msg_ring_cannot_post_fails_its_waiter, .timeout = 20)
{
    net_config cfg = net_config_default();
    cfg.threads = 2;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    cfg.shutdown_timeout_ns = CR_NS_PER_S;
    net_hooks hooks = {.thread_init = thread_init_lost, .on_connection = never_connected};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    close(lost.post_fd);
    cr_expect(atomic_load(&lost.resumed), "the waiter of a reply that could not be posted never resumed");
    cr_expect_eq(atomic_load(&lost.wait_res), -EBADFD, "net_wait returned %d", atomic_load(&lost.wait_res));
    cr_expect_lt(cr_clock_now_ns() - t0, 2 * CR_NS_PER_S);
}

/* net_call_all: messages to three threads (one of them the caller's own,
 * one thread twice) are all out before one wait; each ran on its target. */
static struct {
    int err, rounds_ok, wrong_thread;
    int bad_target_err;
} all_result;

static void call_all_scenario(void *arg)
{
    (void)arg;
    /* Spawned from thread_init: let every worker's ring come up first
     * (their fds are published before the start barrier). */
    net_sleep(50 * CR_NS_PER_MS);
    for (int round = 0; round < 200; round++) {
        echo_msg msgs[4];
        net_msg *ptrs[4];
        const unsigned targets[4] = {1, 2, 0, 1};
        for (int i = 0; i < 4; i++) {
            msgs[i] = (echo_msg){.base.fn = on_target, .value = round + i, .ran_on = -1};
            ptrs[i] = &msgs[i].base;
        }
        int err = net_call_all(ptrs, targets, 4);
        if (err < 0)
            all_result.err = err;
        bool ok = true;
        for (int i = 0; i < 4; i++) {
            ok = ok && msgs[i].value == 2 * (round + i);
            if (msgs[i].ran_on != (int)targets[i])
                all_result.wrong_thread++;
        }
        all_result.rounds_ok += ok;
    }
    echo_msg one = {.base.fn = on_target, .value = 1};
    net_msg *p = &one.base;
    const unsigned bad[1] = {3};
    all_result.bad_target_err = net_call_all(&p, bad, 1);
    kill(getpid(), SIGTERM);
}

static int thread_init_call_all(void *user)
{
    (void)user;
    if (net_thread_index() == 0)
        net_spawn(call_all_scenario, NULL);
    return 0;
}

Test(runtime, call_all_runs_every_message_on_its_target, .timeout = 20)
{
    net_config cfg = net_config_default();
    cfg.threads = 3;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    cfg.shutdown_timeout_ns = 2 * CR_NS_PER_S;
    net_hooks hooks = {.thread_init = thread_init_call_all, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(all_result.err, 0, "net_call_all: %d", all_result.err);
    cr_expect_eq(all_result.rounds_ok, 200, "rounds with every answer: %d", all_result.rounds_ok);
    cr_expect_eq(all_result.wrong_thread, 0);
    cr_expect_eq(all_result.bad_target_err, -EINVAL);
}
