/*
 * The hashed timer wheel of the coarse deadlines. See wheel.h.
 */
#include "wheel.h"

#include <string.h>

void net_wheel_init(net_wheel *w, uint64_t tick_ns, uint64_t now_ns)
{
    memset(w->slots, 0, sizeof(w->slots));
    w->tick_ns = tick_ns;
    w->tick = now_ns / tick_ns;
    w->count = 0;
}

void net_wheel_add(net_wheel *w, net_timer *t, uint64_t deadline_ns)
{
    uint64_t tick = deadline_ns / w->tick_ns;
    if (tick < w->tick)
        tick = w->tick; /* past: the next expiry looks at this slot */
    t->slot = (unsigned)(tick & (NET_WHEEL_SLOTS - 1));
    net_timer **head = &w->slots[t->slot];
    t->deadline_ns = deadline_ns;
    t->prev = NULL;
    t->next = *head;
    if (*head)
        (*head)->prev = t;
    *head = t;
    w->count++;
}

void net_wheel_remove(net_wheel *w, net_timer *t)
{
    if (!t->deadline_ns)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        w->slots[t->slot] = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    t->deadline_ns = 0;
    w->count--;
}

size_t net_wheel_expire(net_wheel *w, uint64_t now_ns, void (*fire)(net_timer *t, void *arg),
                        void *arg)
{
    uint64_t now_tick = now_ns / w->tick_ns;
    if (now_tick < w->tick)
        return 0;
    /* Take the expired timers out first, tick by tick, into a list in that
     * order; then fire them, so that @fire may arm and disarm at will. */
    net_timer *first = NULL, *last = NULL;
    uint64_t ticks = now_tick - w->tick + 1;
    if (ticks > NET_WHEEL_SLOTS)
        ticks = NET_WHEEL_SLOTS; /* a round or more: every slot once */
    for (uint64_t i = 0; i < ticks && w->count; i++) {
        net_timer *t = w->slots[(w->tick + i) & (NET_WHEEL_SLOTS - 1)];
        while (t) {
            net_timer *next = t->next;
            if (t->deadline_ns <= now_ns) {
                net_wheel_remove(w, t);
                if (last)
                    last->next = t;
                else
                    first = t;
                last = t;
            }
            t = next;
        }
    }
    /* The slot of now_tick may hold deadlines later in this tick (or in
     * later rounds): look at it again next time. */
    w->tick = now_tick;
    size_t n = 0;
    while (first) {
        net_timer *next = first->next;
        first->next = NULL;
        fire(first, arg);
        first = next;
        n++;
    }
    return n;
}
