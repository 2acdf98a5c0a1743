/*
 * A wake-up from a thread that is not a worker, when its own wake ring
 * fails it (net/src/msg.c, post_foreign): it is delivered once, never
 * twice, and never lost to a hang. The failures are injected with
 * -Wl,--wrap (tests/CMakeLists.txt) on liburing's io_uring_submit and
 * __io_uring_get_cqe (what io_uring_wait_cqe_nr calls), only in a thread
 * that asks for it: a signal's -EINTR after the MSG_RING was really
 * delivered, and a submit that fails; and a second delivery, made by hand
 * with the runtime's internals (net/src/msg.h), as is the return of an
 * abandoned envelope before its waiter resumed. And a wake-up for a
 * thread whose loop has left. Each Criterion test runs
 * in its own process, so net_run() may take the process's signals.
 */
#include "coring/core/clock.h"

#include "runtime_util.h"

#include "net/src/msg.h"
#include "net/src/rt.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

/* --- the seam ---------------------------------------------------------- */

/* Faults to inject in the calling thread (the others see none). */
static _Thread_local int eintr_after_wait; /* waits that get their CQE, then say -EINTR */
static _Thread_local int failing_submits;  /* submits that fail with -EBUSY, sending nothing */

int __real___io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
                              unsigned submit, unsigned wait_nr, sigset_t *sigmask);
int __wrap___io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
                              unsigned submit, unsigned wait_nr, sigset_t *sigmask);
int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring);

/* As if a signal (SIGSTOP/SIGCONT, ptrace) ended the wait just after the
 * kernel delivered the MSG_RING: its CQE is there, unread. */
int __wrap___io_uring_get_cqe(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
                              unsigned submit, unsigned wait_nr, sigset_t *sigmask)
{
    int ret = __real___io_uring_get_cqe(ring, cqe_ptr, submit, wait_nr, sigmask);
    if (ret == 0 && eintr_after_wait > 0) {
        eintr_after_wait--;
        return -EINTR;
    }
    return ret;
}

/* A submit that fails before the kernel takes the SQE: it stays queued in
 * the SQ, where a later submit of the same ring would send it. */
int __wrap_io_uring_submit(struct io_uring *ring)
{
    if (failing_submits > 0) {
        failing_submits--;
        return -EBUSY;
    }
    return __real_io_uring_submit(ring);
}

/* --- -EINTR after a real delivery: a reused handle is not woken --------- */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wake_res;
    int first_res;  /* the wait that was woken */
    int second_res; /* the next wait, on the same envelope, that nobody wakes */
    bool reused;    /* the second handle is the first one's envelope again */
} reuse = {.wake_res = 1, .first_res = 1, .second_res = 1};

static void *interrupted_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&reuse.handle)))
        usleep(1000);
    eintr_after_wait = 1;
    atomic_store(&reuse.wake_res, net_wake(h));
    return NULL;
}

static void reusing_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h, *again;
    if (net_wait_init(&h) < 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, interrupted_waker, NULL);
    atomic_store(&reuse.handle, h);
    reuse.first_res = net_wait(h, 0);
    /* The envelope is recycled: the next handle of this thread is it. A
     * second delivery of the first wake-up (the inbox reads it within a
     * 100 ms tick) would end this wait, which nobody wakes. */
    if (net_wait_init(&again) == 0) {
        reuse.reused = again == h;
        reuse.second_res = net_wait(again, 500 * CR_NS_PER_MS);
    }
    pthread_join(th, NULL);
    kill(getpid(), SIGTERM);
}

static int thread_init_reuse(void *user)
{
    (void)user;
    if (net_thread_index() == 1)
        net_spawn(reusing_waiter, NULL);
    return 0;
}

Test(msg_faults, an_interrupted_wake_is_delivered_once_and_a_reused_handle_stays_asleep,
     .timeout = 30)
{
    net_config cfg = test_config(2, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_reuse, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(atomic_load(&reuse.wake_res), 0, "net_wake returned %d",
                 atomic_load(&reuse.wake_res));
    cr_expect_eq(reuse.first_res, 0);
    cr_assert(reuse.reused, "the envelope was not reused: this run proves nothing");
    cr_expect_eq(reuse.second_res, -ETIMEDOUT,
                 "a wait that nobody woke returned %d (a stale delivery ended it)",
                 reuse.second_res);
}

/* --- -EINTR after a real delivery: a net_call's fn never runs late ------ */

static int call_block[2]; /* thread 1 blocks reading it */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wake_res;
    atomic_bool call_returned;
    atomic_int fn_runs;
    atomic_int fn_runs_after_return; /* the bug: the target ran fn for a caller that left */
    int call_res;
    bool reused;
} late = {.wake_res = 1, .call_res = 1};

static void late_fn(net_msg *m)
{
    (void)m;
    atomic_fetch_add(&late.fn_runs, 1);
    if (atomic_load(&late.call_returned))
        atomic_fetch_add(&late.fn_runs_after_return, 1);
}

/* Static, not on the caller's stack: if net_call returned early, thread 1
 * runs fn on it later, which must be observed here, not crash. */
static net_msg late_msg = {.fn = late_fn};

static void *late_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&late.handle)))
        usleep(1000);
    eintr_after_wait = 1;
    atomic_store(&late.wake_res, net_wake(h));
    /* Thread 1 answers messages again 1 s later: long after a second
     * delivery of this wake-up could have ended the call. */
    usleep(1000 * 1000);
    if (write(call_block[1], "x", 1) != 1)
        return NULL;
    return NULL;
}

static void late_blocker(void *arg)
{
    (void)arg;
    net_sleep(20 * CR_NS_PER_MS); /* past the start barrier */
    char c;
    ssize_t n = read(call_block[0], &c, 1); /* the whole thread, not just this task */
    (void)n;
}

static void late_caller(void *arg)
{
    (void)arg;
    net_sleep(100 * CR_NS_PER_MS); /* thread 1 is blocked by now */
    net_wait_handle *h;
    if (net_wait_init(&h) < 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, late_waker, NULL);
    atomic_store(&late.handle, h);
    net_wait(h, 0);
    /* The same envelope carries the call: a second delivery of the
     * wake-up must not pass for its reply. */
    net_wait_handle *probe;
    if (net_wait_init(&probe) == 0) {
        late.reused = probe == h;
        net_wait_release(probe);
    }
    late.call_res = net_call(1, &late_msg);
    atomic_store(&late.call_returned, true);
    pthread_join(th, NULL);
    kill(getpid(), SIGTERM);
}

static int thread_init_late(void *user)
{
    (void)user;
    net_spawn(net_thread_index() == 0 ? late_caller : late_blocker, NULL);
    return 0;
}

Test(msg_faults, an_interrupted_wake_never_ends_a_net_call_whose_message_is_out, .timeout = 30)
{
    cr_assert_eq(pipe(call_block), 0);
    net_config cfg = test_config(2, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_late, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(atomic_load(&late.wake_res), 0);
    cr_assert(late.reused, "the envelope was not reused: this run proves nothing");
    cr_expect_eq(late.call_res, 0);
    cr_expect_eq(atomic_load(&late.fn_runs), 1);
    cr_expect_eq(atomic_load(&late.fn_runs_after_return), 0,
                 "the target ran the message's fn after net_call had returned");
}

/* --- a delivery of an earlier use of an envelope is dropped ------------- */

static struct {
    int first_res;
    int second_res;
    bool reused;
} stale = {.first_res = 1, .second_res = 1};

/* What a second delivery of a wake-up brings, made by hand: the MSG_RING
 * of the envelope's first use arrives again while its second use waits. */
static void stale_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h, *again;
    if (net_wait_init(&h) < 0)
        return;
    net_envelope *e = (net_envelope *)(void *)h;
    uint32_t first_gen = e->gen;
    net_wake(h); /* from this worker: a MSG_RING to its own ring */
    stale.first_res = net_wait(h, 0);
    if (net_wait_init(&again) == 0) {
        stale.reused = again == h;
        net_loop *loop = net_loop_current();
        net_ring_msg(&loop->ring, loop->ring.ring.ring_fd, net_ptr_name(e, NET_TAG_MSG), first_gen,
                     net_ptr_name(e, NET_TAG_MSG_FAILED));
        stale.second_res = net_wait(again, 300 * CR_NS_PER_MS);
    }
    kill(getpid(), SIGTERM);
}

static int thread_init_stale(void *user)
{
    (void)user;
    net_spawn(stale_waiter, NULL);
    return 0;
}

Test(msg_faults, a_delivery_of_an_envelopes_earlier_use_ends_no_wait, .timeout = 30)
{
    net_config cfg = test_config(1, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_stale, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(stale.first_res, 0);
    cr_assert(stale.reused, "the envelope was not reused: this run proves nothing");
    cr_expect_eq(stale.second_res, -ETIMEDOUT,
                 "the wait of the envelope's second use returned %d", stale.second_res);
}

/* --- a submit that fails: through the inbox, and shutdown does not hang - */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wake_res;
    atomic_int second_wake_res;
    int wait_res;
    int second_wait_res;
} submit = {.wake_res = 1, .second_wake_res = 1, .wait_res = 1, .second_wait_res = 1};

static void *failing_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&submit.handle)))
        usleep(1000);
    failing_submits = 1;
    atomic_store(&submit.wake_res, net_wake(h));
    /* The next wake-up from this thread goes through its (remade) ring. */
    atomic_store(&submit.handle, NULL);
    while (!(h = atomic_load(&submit.handle)))
        usleep(1000);
    atomic_store(&submit.second_wake_res, net_wake(h));
    return NULL;
}

static void submit_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    if (net_wait_init(&h) < 0)
        return;
    pthread_t th;
    pthread_create(&th, NULL, failing_waker, NULL);
    atomic_store(&submit.handle, h);
    submit.wait_res = net_wait(h, 2 * CR_NS_PER_S);
    while (atomic_load(&submit.handle))
        net_sleep(CR_NS_PER_MS);
    if (net_wait_init(&h) == 0) {
        atomic_store(&submit.handle, h);
        submit.second_wait_res = net_wait(h, 2 * CR_NS_PER_S);
    }
    pthread_join(th, NULL);
    kill(getpid(), SIGTERM);
}

static int thread_init_submit(void *user)
{
    (void)user;
    if (net_thread_index() == 1)
        net_spawn(submit_waiter, NULL);
    return 0;
}

Test(msg_faults, a_wake_whose_submit_fails_goes_through_the_inbox_and_shutdown_ends,
     .timeout = 30)
{
    net_config cfg = test_config(2, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_submit, .on_connection = never_connected};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    uint64_t took = cr_clock_now_ns() - t0;
    cr_expect_eq(atomic_load(&submit.wake_res), 0);
    cr_expect_eq(submit.wait_res, 0, "the wake-up whose submit failed: %d", submit.wait_res);
    cr_expect_eq(atomic_load(&submit.second_wake_res), 0);
    cr_expect_eq(submit.second_wait_res, 0, "the next wake-up from that thread: %d",
                 submit.second_wait_res);
    cr_expect_lt(took, 5 * CR_NS_PER_S, "net_run took %lu ms",
                 (unsigned long)(took / CR_NS_PER_MS));
}

/* --- an abandoned envelope that comes back before its waiter resumes ---- */

static struct {
    net_task *waiter;
    net_wait_handle *handle;
    net_wait_handle *other; /* the helper's handle, in use while the waiter resumes */
    int wait_res;
    bool other_free; /* the waiter's next handle was the helper's: it was recycled under it */
} late_back = {.wait_res = 1};

/* Deliver @h on this thread, as its MSG_RING's completion would. */
static void deliver_by_hand(net_wait_handle *h)
{
    net_envelope *e = (net_envelope *)(void *)h;
    net_loop *loop = net_loop_current();
    loop->on_cqe[NET_TAG_MSG].fn(loop, loop->on_cqe[NET_TAG_MSG].ctx,
                                 net_ptr_name(e, NET_TAG_MSG), (int)e->gen, 0);
}

static void abandoning_waiter(void *arg)
{
    (void)arg;
    late_back.waiter = net_task_current();
    if (net_wait_init(&late_back.handle) < 0)
        return;
    late_back.wait_res = net_wait(late_back.handle, 0);
    net_wait_handle *next;
    if (net_wait_init(&next) == 0) {
        late_back.other_free = next == late_back.other;
        net_wait_release(next);
    }
    if (!late_back.other_free)
        net_wait_release(late_back.other); /* the helper left it to this task */
    kill(getpid(), SIGTERM);
}

/* While the waiter waits: cancel it (it is ready, not resumed), then its
 * wake-up comes back, then this task takes a handle and is woken, all
 * before the waiter runs again. */
static void abandoning_helper(void *arg)
{
    (void)arg;
    net_task_cancel(late_back.waiter);
    deliver_by_hand(late_back.handle);
    if (net_wait_init(&late_back.other) < 0)
        return;
    deliver_by_hand(late_back.other);
}

static int thread_init_late_back(void *user)
{
    (void)user;
    net_spawn(abandoning_waiter, NULL);
    net_spawn(abandoning_helper, NULL);
    return 0;
}

Test(msg_faults, an_abandoned_envelope_is_recycled_by_its_waiter_not_under_another_owner,
     .timeout = 30)
{
    net_config cfg = test_config(1, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_late_back, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    cr_expect_eq(late_back.wait_res, -ECANCELED,
                 "the cancelled wait returned %d (it read an envelope another task held)",
                 late_back.wait_res);
    cr_expect_not(late_back.other_free,
                  "the helper's handle, still in use, was on the free list (recycled under it)");
}

/* --- a wake-up for a thread whose loop has left ----------------------- */

static struct {
    _Atomic(net_wait_handle *) handle;
    atomic_int wake_res;
    atomic_bool woken;   /* the waker is done: thread 1 may leave */
    atomic_bool saw_closed; /* thread 0's ring fd read -1 before the wake-up */
    int wait_res;
} gone = {.wake_res = 1, .wait_res = 1};

static void *after_exit_waker(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    while (!(h = atomic_load(&gone.handle)))
        usleep(1000);
    kill(getpid(), SIGTERM); /* the drain cancels the wait; the loops leave */
    /* Thread 0 has left its loop (thread 1 waits in its thread_fini for
     * this wake-up, so net_run is still joining). */
    for (int i = 0; i < 5000 && net_rt.ring_fds[0] >= 0; i++)
        usleep(1000);
    atomic_store(&gone.saw_closed, net_rt.ring_fds[0] < 0);
    atomic_store(&gone.wake_res, net_wake(h));
    /* Nothing of the test's keeps the envelope reachable: LeakSanitizer
     * sees it unless the runtime frees it. */
    atomic_store(&gone.handle, NULL);
    h = NULL;
    atomic_store(&gone.woken, true);
    return NULL;
}

static void gone_waiter(void *arg)
{
    (void)arg;
    net_wait_handle *h;
    if (net_wait_init(&h) < 0)
        return;
    atomic_store(&gone.handle, h);
    gone.wait_res = net_wait(h, 0);
}

static int thread_init_gone(void *user)
{
    (void)user;
    if (net_thread_index() == 0)
        net_spawn(gone_waiter, NULL);
    return 0;
}

static void thread_fini_gone(void *user)
{
    (void)user;
    for (int i = 0; net_thread_index() == 1 && i < 10000 && !atomic_load(&gone.woken); i++)
        usleep(1000);
}

Test(msg_faults, a_wake_for_a_thread_whose_loop_has_left_is_refused_and_nothing_leaks,
     .timeout = 30)
{
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, after_exit_waker, NULL), 0);
    net_config cfg = test_config(2, CR_NS_PER_S);
    net_hooks hooks = {.thread_init = thread_init_gone,
                       .thread_fini = thread_fini_gone,
                       .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    pthread_join(th, NULL);
    cr_expect_eq(gone.wait_res, -ECANCELED);
    cr_assert(atomic_load(&gone.saw_closed), "thread 0's ring fd still names its closed ring");
    cr_expect_eq(atomic_load(&gone.wake_res), -ESHUTDOWN, "net_wake returned %d",
                 atomic_load(&gone.wake_res));
#if defined(__SANITIZE_ADDRESS__)
    /* The envelope, out when its waiter was cancelled, freed by net_run
     * (tests/run --sanitize: a leak at exit is printed, not failed). */
    cr_expect_eq(__lsan_do_recoverable_leak_check(), 0, "leaks: see the report above");
#endif
}
