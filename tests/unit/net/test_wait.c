/*
 * Every suspension ends (net/src/wait.c, msg.c): a net_call to a thread
 * that never answers ends at its deadline, without the target ever running
 * the message it took too late; the drain's deadline reaches a task in
 * net_wait; a wake-up from a thread that cannot post it through a ring of
 * its own still resumes its waiter (the inbox). Each Criterion test runs in
 * its own process, so net_run() may take the process's signals.
 */
#include "coring/core/clock.h"

#include "runtime_util.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* --- a net_call to a thread that never answers ------------------------- */

static int block_pipe[2];

static struct {
    atomic_int fn_runs;  /* how many times a message's fn ran */
    int timeout_res;     /* net_call_timeout to the blocked thread */
    uint64_t timeout_ns; /* how long it took */
    int later_res;       /* a net_call once the thread answers again */
    int later_value;
} call;

typedef struct count_msg {
    net_msg base;
    int value;
} count_msg;

static void count_fn(net_msg *m)
{
    atomic_fetch_add(&call.fn_runs, 1);
    ((count_msg *)m)->value++;
}

/* Thread 1's loop stops answering: one of its coroutines blocks the whole
 * thread in read(2) until the pipe is written. */
static void blocker(void *arg)
{
    (void)arg;
    net_sleep(20 * CR_NS_PER_MS); /* past the start barrier */
    char c;
    ssize_t n = read(block_pipe[0], &c, 1);
    (void)n;
}

/* The message lives in this frame, which is gone (and its stack reused by
 * scribble) long before thread 1 reads the message it was sent. */
static int call_blocked(void)
{
    count_msg msg = {.base.fn = count_fn, .value = 41};
    return net_call_timeout(1, &msg.base, 200 * CR_NS_PER_MS);
}

static void scribble(void)
{
    volatile unsigned char junk[512];
    memset((void *)junk, 0xa5, sizeof(junk));
}

static void *unblock_later(void *arg)
{
    (void)arg;
    usleep(1500 * 1000);
    if (write(block_pipe[1], "x", 1) != 1)
        return NULL;
    return NULL;
}

static void caller(void *arg)
{
    (void)arg;
    net_sleep(100 * CR_NS_PER_MS); /* thread 1 is blocked by now */
    uint64_t t0 = cr_clock_now_ns();
    call.timeout_res = call_blocked();
    call.timeout_ns = cr_clock_now_ns() - t0;
    scribble();
    /* Thread 1 answers again once unblocked: the abandoned envelope comes
     * back (its fn not run) and a new call runs. */
    count_msg msg = {.base.fn = count_fn, .value = 1};
    call.later_res = net_call(1, &msg.base);
    call.later_value = msg.value;
    kill(getpid(), SIGTERM);
}

static int thread_init_call(void *user)
{
    (void)user;
    net_spawn(net_thread_index() == 0 ? caller : blocker, NULL);
    return 0;
}

Test(wait, a_call_to_a_thread_that_never_answers_ends_at_its_deadline, .timeout = 30)
{
    cr_assert_eq(pipe(block_pipe), 0);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, unblock_later, NULL), 0);
    net_config cfg = test_config(2, 2 * CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_call, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    pthread_join(th, NULL);
    cr_expect_eq(call.timeout_res, -ETIMEDOUT, "net_call_timeout returned %d", call.timeout_res);
    cr_expect_geq(call.timeout_ns, 200 * CR_NS_PER_MS);
    cr_expect_lt(call.timeout_ns, 1000 * CR_NS_PER_MS, "ended after %lu ms",
                 (unsigned long)(call.timeout_ns / CR_NS_PER_MS));
    cr_expect_eq(call.later_res, 0);
    cr_expect_eq(call.later_value, 2);
    cr_expect_eq(atomic_load(&call.fn_runs), 1, "the abandoned message's fn ran");
}

/* --- the drain's deadline reaches net_wait ------------------------------ */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wait_res;
    atomic_bool returned;
} parked = {.wait_res = 1};

static void busy_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    if (net_wait_init(&h) < 0)
        return;
    atomic_store(&parked.handle, h); /* handed out: only the drain ends this */
    atomic_store(&parked.wait_res, net_wait(h, 0));
    atomic_store(&parked.returned, true);
}

static int thread_init_parked(void *user)
{
    (void)user;
    net_spawn(busy_waiter, NULL);
    net_spawn(sigterm_soon, NULL);
    return 0;
}

Test(wait, the_drain_deadline_reaches_a_task_in_net_wait, .timeout = 30)
{
    net_config cfg = test_config(1, 300 * CR_NS_PER_MS);
    net_hooks hooks = {.thread_init = thread_init_parked, .on_connection = never_connected};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    uint64_t took = cr_clock_now_ns() - t0;
    cr_expect(atomic_load(&parked.returned), "net_wait never returned");
    cr_expect_eq(atomic_load(&parked.wait_res), -ECANCELED);
    cr_expect_lt(took, 2 * CR_NS_PER_S, "shutdown took %lu ms",
                 (unsigned long)(took / CR_NS_PER_MS));
    /* The waker comes after the runtime is gone: refused, nothing touched. */
    cr_expect_eq(net_wake(atomic_load(&parked.handle)), -ESHUTDOWN);
}

/* --- a wake-up from a thread that cannot make its ring ----------------- */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wake_res;
    atomic_int ring_err; /* what the thread's own io_uring_setup got */
    int wait_res;
    int resumed_on;
    uint64_t waited_ns;
} fallback = {.wake_res = 1};

/* Wake from a thread whose RLIMIT_NOFILE leaves no descriptor free: its
 * wake ring (an io_uring, an fd) cannot be made. */
static void *starved_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&fallback.handle)))
        usleep(1000);
    usleep(20 * 1000);
    struct rlimit old, none = {.rlim_cur = 0};
    getrlimit(RLIMIT_NOFILE, &old);
    none.rlim_max = old.rlim_max;
    setrlimit(RLIMIT_NOFILE, &none);
    int p[2];
    atomic_store(&fallback.ring_err, pipe(p) < 0 ? -errno : 0); /* the limit holds */
    atomic_store(&fallback.wake_res, net_wake(h));
    setrlimit(RLIMIT_NOFILE, &old);
    return NULL;
}

static void fallback_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    if (net_wait_init(&h) < 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, starved_waker, NULL);
    uint64_t t0 = cr_clock_now_ns();
    atomic_store(&fallback.handle, h);
    fallback.wait_res = net_wait(h, 0);
    fallback.waited_ns = cr_clock_now_ns() - t0;
    fallback.resumed_on = net_thread_index();
    pthread_join(th, NULL);
    kill(getpid(), SIGTERM);
}

static int thread_init_fallback(void *user)
{
    (void)user;
    if (net_thread_index() == 1)
        net_spawn(fallback_waiter, NULL);
    return 0;
}

Test(wait, a_wake_up_that_cannot_be_posted_goes_through_the_inbox, .timeout = 30)
{
    net_config cfg = test_config(2, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_fallback, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(atomic_load(&fallback.ring_err), -EMFILE, "the waker had descriptors left");
    cr_expect_eq(atomic_load(&fallback.wake_res), 0, "net_wake returned %d",
                 atomic_load(&fallback.wake_res));
    cr_expect_eq(fallback.wait_res, 0);
    cr_expect_eq(fallback.resumed_on, 1);
    cr_expect_lt(fallback.waited_ns, CR_NS_PER_S, "resumed after %lu ms",
                 (unsigned long)(fallback.waited_ns / CR_NS_PER_MS));
}
