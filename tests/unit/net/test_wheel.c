/*
 * The timer wheel of the coarse deadlines (net/src/wheel.h): timers fire
 * no earlier than their deadline, tick by tick in order; a disarmed one
 * never fires; deadlines beyond one round of the wheel, and the slot index
 * wrapping around, are handled; a long gap fires everything due once.
 */
#include <criterion/criterion.h>

#include "net/src/wheel.h"

#define MS (1000ull * 1000)
#define TICK (100 * MS)
#define T0 (1000000 * TICK + 37 * MS) /* an arbitrary monotonic start, mid-tick */

typedef struct fired {
    net_timer *order[64];
    uint64_t at[64];
    size_t n;
    uint64_t now;
} fired;

static void record(net_timer *t, void *arg)
{
    fired *f = arg;
    cr_assert_lt(f->n, 64);
    cr_expect_not(net_timer_armed(t), "a fired timer is disarmed before its callback");
    f->order[f->n] = t;
    f->at[f->n++] = f->now;
}

static size_t expire(net_wheel *w, fired *f, uint64_t now)
{
    f->now = now;
    return net_wheel_expire(w, now, record, f);
}

Test(wheel, fires_in_deadline_order_never_early)
{
    net_wheel w;
    net_wheel_init(&w, TICK, T0);
    net_timer t[5] = {0};
    const uint64_t after_ms[5] = {350, 50, 1250, 150, 250};
    for (int i = 0; i < 5; i++)
        net_wheel_add(&w, &t[i], T0 + after_ms[i] * MS);
    cr_assert_eq(w.count, 5);
    fired f = {0};
    /* Every 10 ms up to 1.5 s: each fires at the first call at or past its
     * deadline. */
    for (uint64_t now = T0; now <= T0 + 1500 * MS; now += 10 * MS)
        expire(&w, &f, now);
    cr_assert_eq(f.n, 5);
    const int want[5] = {1, 3, 4, 0, 2};
    for (size_t i = 0; i < 5; i++) {
        cr_expect_eq(f.order[i], &t[want[i]], "fired #%zu", i);
        uint64_t deadline = T0 + after_ms[want[i]] * MS;
        cr_expect_geq(f.at[i], deadline, "timer %d fired early", want[i]);
        cr_expect_lt(f.at[i], deadline + 10 * MS, "timer %d fired late", want[i]);
    }
    cr_expect_eq(w.count, 0);
}

Test(wheel, a_disarmed_timer_never_fires)
{
    net_wheel w;
    net_wheel_init(&w, TICK, T0);
    net_timer a = {0}, b = {0}, c = {0}, d = {0};
    net_wheel_add(&w, &a, T0 + 200 * MS);
    net_wheel_add(&w, &b, T0 + 200 * MS); /* same slot as a */
    net_wheel_add(&w, &c, T0 + 200 * MS);
    net_wheel_add(&w, &d, T0 + 900 * MS);
    net_wheel_remove(&w, &b); /* the middle of a slot's list */
    net_wheel_remove(&w, &c); /* its head */
    net_wheel_remove(&w, &c); /* twice: nothing */
    cr_expect_not(net_timer_armed(&c));
    net_wheel_remove(&w, &d);
    cr_expect_eq(w.count, 1);
    fired f = {0};
    cr_expect_eq(expire(&w, &f, T0 + 5000 * MS), 1);
    cr_expect_eq(f.order[0], &a);
    /* Re-armed after a disarm: fires again. */
    net_wheel_add(&w, &b, T0 + 5100 * MS);
    cr_expect_eq(expire(&w, &f, T0 + 5099 * MS), 0);
    cr_expect_eq(expire(&w, &f, T0 + 5100 * MS), 1);
    cr_expect_eq(f.order[1], &b);
}

Test(wheel, deadlines_beyond_a_round_and_slot_wrap)
{
    net_wheel w;
    net_wheel_init(&w, TICK, T0);
    const uint64_t round = NET_WHEEL_SLOTS * TICK;
    net_timer far = {0}, wrap = {0}, near = {0};
    /* Same slot as a deadline 5 ticks away, but 2 rounds later. */
    net_wheel_add(&w, &far, T0 + 2 * round + 5 * TICK);
    net_wheel_add(&w, &near, T0 + 5 * TICK);
    fired f = {0};
    /* Tick by tick through 3 rounds: the slot index wraps to 0 three
     * times. On the way, arm one whose slot lies past the wrap. */
    uint64_t wrap_deadline = 0;
    for (uint64_t now = T0; now <= T0 + 3 * round; now += TICK) {
        expire(&w, &f, now);
        if (!wrap_deadline && (now / TICK) % NET_WHEEL_SLOTS == NET_WHEEL_SLOTS - 3) {
            wrap_deadline = now + 10 * TICK;
            net_wheel_add(&w, &wrap, wrap_deadline);
        }
    }
    cr_assert_eq(f.n, 3);
    cr_expect_eq(f.order[0], &near);
    cr_expect_eq(f.order[1], &wrap);
    cr_expect_eq(f.order[2], &far);
    cr_expect_geq(f.at[1], wrap_deadline);
    cr_expect_lt(f.at[1], wrap_deadline + TICK);
    cr_expect_geq(f.at[2], T0 + 2 * round + 5 * TICK, "fired at its slot a round early");
    cr_expect_lt(f.at[2], T0 + 2 * round + 6 * TICK);
}

Test(wheel, a_long_gap_fires_everything_due_once)
{
    net_wheel w;
    net_wheel_init(&w, TICK, T0);
    const uint64_t round = NET_WHEEL_SLOTS * TICK;
    net_timer t[4] = {0};
    net_wheel_add(&w, &t[0], T0 + 1 * TICK);
    net_wheel_add(&w, &t[1], T0 + round + 7 * TICK);
    net_wheel_add(&w, &t[2], T0 - 5 * TICK); /* already past */
    net_wheel_add(&w, &t[3], T0 + 5 * round); /* not due */
    fired f = {0};
    cr_expect_eq(expire(&w, &f, T0 + 3 * round), 3, "one call after 3 rounds");
    cr_expect_eq(w.count, 1);
    cr_expect(net_timer_armed(&t[3]));
    cr_expect_eq(expire(&w, &f, T0 + 5 * round - 1), 0);
    cr_expect_eq(expire(&w, &f, T0 + 5 * round), 1);
    cr_expect_eq(f.order[3], &t[3]);
}

static void rearm(net_timer *t, void *arg)
{
    net_wheel *w = arg;
    static int times;
    if (++times < 3)
        net_wheel_add(w, t, 1); /* long past: fires at the next call */
}

Test(wheel, a_callback_may_arm_the_fired_timer_again)
{
    net_wheel w;
    net_wheel_init(&w, TICK, T0);
    net_timer t = {0};
    net_wheel_add(&w, &t, T0);
    cr_expect_eq(net_wheel_expire(&w, T0, rearm, &w), 1);
    cr_expect(net_timer_armed(&t), "re-armed inside its callback");
    cr_expect_eq(net_wheel_expire(&w, T0 + 1, rearm, &w), 1);
    cr_expect_eq(net_wheel_expire(&w, T0 + 2, rearm, &w), 1);
    cr_expect_not(net_timer_armed(&t));
    cr_expect_eq(w.count, 0);
}
