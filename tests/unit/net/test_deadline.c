/*
 * A task's deadline (net_deadline_set, net/src/deadline.c): it ends the
 * task's wait at the deadline, within the tick's half either side, with
 * -ECANCELED and net_stop_cause NET_STOP_DEADLINE; net_deadline_clear then
 * lets the task go on (its next wait runs); a deadline cleared before it
 * passes does nothing; the drain's deadline ends a task the same way, as
 * NET_STOP_DRAIN, which net_deadline_clear does not undo.
 */
#include "runtime_util.h"

#include <criterion/criterion.h>
#include <errno.h>

static struct {
    int cut_res;
    uint64_t cut_ns;
    net_stop_cause cut_cause, cleared;
    int after_res;
    int kept_res;
    net_stop_cause kept_cleared;
    int drained_res;
    net_stop_cause drained_cause, drained_cleared;
    int drained_after;
} r;

static void cut(void *arg)
{
    (void)arg;
    uint64_t t0 = cr_clock_now_ns();
    net_deadline_set(t0 + 300 * CR_NS_PER_MS);
    r.cut_res = net_sleep(5 * CR_NS_PER_S);
    r.cut_ns = cr_clock_now_ns() - t0;
    r.cut_cause = net_stop_cause_get();
    r.cleared = net_deadline_clear();
    r.after_res = net_sleep(1 * CR_NS_PER_MS); /* goes on: not cancelled any more */
}

static void kept(void *arg)
{
    (void)arg;
    net_deadline_set(cr_clock_now_ns() + 200 * CR_NS_PER_MS);
    net_sleep(10 * CR_NS_PER_MS);
    r.kept_cleared = net_deadline_clear(); /* before it passed */
    r.kept_res = net_sleep(400 * CR_NS_PER_MS);
}

static void drained(void *arg)
{
    (void)arg;
    net_deadline_set(cr_clock_now_ns() + 30 * CR_NS_PER_S);
    r.drained_res = net_sleep(20 * CR_NS_PER_S);
    r.drained_cause = net_stop_cause_get();
    r.drained_cleared = net_deadline_clear();
    r.drained_after = net_sleep(1 * CR_NS_PER_MS); /* still cancelled */
}

static void term_later(void *arg)
{
    (void)arg;
    net_sleep(700 * CR_NS_PER_MS);
    kill(getpid(), SIGTERM);
}

static int thread_init(void *user)
{
    (void)user;
    net_spawn(cut, NULL);
    net_spawn(kept, NULL);
    net_spawn(drained, NULL);
    net_spawn(term_later, NULL);
    return 0;
}

Test(deadline, cuts_the_wait_clearing_lets_the_task_go_on_and_the_drain_goes_the_same_way,
     .timeout = 20)
{
    net_config cfg = test_config(1, 300 * CR_NS_PER_MS);
    net_hooks hooks = {.thread_init = thread_init, .on_connection = never_connected};
    cr_assert_eq(net_run(&cfg, &hooks), 0);

    cr_expect_eq(r.cut_res, -ECANCELED);
    cr_expect_eq(r.cut_cause, NET_STOP_DEADLINE);
    cr_expect_eq(r.cleared, NET_STOP_DEADLINE);
    cr_expect(r.cut_ns >= 250 * CR_NS_PER_MS && r.cut_ns < 450 * CR_NS_PER_MS,
              "cut after %llu ms (deadline 300 ms, tick 100 ms)",
              (unsigned long long)(r.cut_ns / CR_NS_PER_MS));
    cr_expect_eq(r.after_res, 0, "the task goes on after net_deadline_clear: %d", r.after_res);

    cr_expect_eq(r.kept_cleared, NET_STOP_NONE);
    cr_expect_eq(r.kept_res, 0, "a deadline cleared before it passed cut the task: %d", r.kept_res);

    cr_expect_eq(r.drained_res, -ECANCELED);
    cr_expect_eq(r.drained_cause, NET_STOP_DRAIN);
    cr_expect_eq(r.drained_cleared, NET_STOP_DRAIN);
    cr_expect_eq(r.drained_after, -ECANCELED, "the drain's cut was undone");
}
