/*
 * Internal to net/: a hashed timer wheel for the coarse deadlines of a
 * worker's tasks (keep-alive, header and body reads, sends: every timeout
 * of at least NET_COARSE_TIMEOUT_NS). The loop's tick used to walk every
 * task every 100 ms to find the few past their deadline; the wheel puts
 * each deadline in the slot of its tick (deadline / tick_ns, modulo
 * NET_WHEEL_SLOTS), so arming and disarming are O(1) (a doubly linked
 * list, no allocation: the net_timer is embedded in its owner) and an
 * expiry looks only at the slots of the ticks that passed. A deadline
 * further than NET_WHEEL_SLOTS ticks away waits in its slot for the rounds
 * in between (it is looked at, and left, once per round). Timers fire no
 * earlier than their deadline and at most one expiry call late; tick by
 * tick in deadline order, within one tick in no particular order.
 * One thread (the loop's); see Varghese & Lauck, "Hashed and hierarchical
 * timing wheels" (1987), scheme 6.
 */
#ifndef CORING_NET_WHEEL_H
#define CORING_NET_WHEEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_WHEEL_SLOTS 1024u /* a power of two: at 100 ms a tick, 102.4 s a round */

typedef struct net_timer {
    uint64_t deadline_ns; /* monotonic ns; 0 while not armed */
    struct net_timer *prev, *next;
    unsigned slot;        /* the slot it is in, while armed */
} net_timer;

typedef struct net_wheel {
    net_timer *slots[NET_WHEEL_SLOTS]; /* list heads */
    uint64_t tick_ns;                  /* width of a slot */
    uint64_t tick;                     /* ticks before this one are expired */
    size_t count;                      /* armed timers */
} net_wheel;

/* net_wheel_init - an empty wheel of slots @tick_ns wide (> 0), whose
 * first tick is the one of @now_ns (monotonic ns). */
void net_wheel_init(net_wheel *w, uint64_t tick_ns, uint64_t now_ns);

/* net_wheel_add - arm @t (not armed) for @deadline_ns (monotonic ns, > 0;
 * one already past fires at the next expiry). O(1). */
void net_wheel_add(net_wheel *w, net_timer *t, uint64_t deadline_ns);

/* net_wheel_remove - disarm @t; nothing when it is not armed. O(1). */
void net_wheel_remove(net_wheel *w, net_timer *t);

/* net_timer_armed - whether @t is in a wheel. */
static inline bool net_timer_armed(const net_timer *t)
{
    return t->deadline_ns != 0;
}

/*
 * net_wheel_expire - disarm every timer whose deadline is at or before
 * @now_ns and call @fire(@t, @arg) for each, tick by tick in deadline
 * order (after a gap of a round or more, slot by slot from the oldest
 * tick). @fire may arm the fired timer again, and arm or disarm timers
 * that this call does not fire (one it disarms that this call took out
 * already still fires). It must not arm another timer this call took out
 * and has not fired yet: the fire list is chained through the timers'
 * own links, which arming rewrites.
 * Returns how many fired. Looks at the slots of the ticks since the last
 * call (all of them, once, after a gap of a round or more).
 */
size_t net_wheel_expire(net_wheel *w, uint64_t now_ns, void (*fire)(net_timer *t, void *arg),
                        void *arg);

#endif
