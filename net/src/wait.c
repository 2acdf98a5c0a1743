/*
 * The one wait state machine (see wait.h) and the table that names waits
 * and connections' receives: a slot per waiter or connection, a
 * generation per name. Both the resumption of a wait
 * (its completion's handler) and its early ends (deadline, unpark,
 * interrupt, drain, cancel) go through here, so that the first end decides
 * and an end reaches every kind of wait the same way.
 */
#include "wait.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct net_slot {
    uintptr_t owner;    /* what holds the slot, its address with the tag of the names
                           it takes in the low bits (NET_TAG_OP: a waiter, NET_TAG_RECV:
                           a connection); 0 while free */
    uint32_t gen;       /* of its latest name; never 0 once used */
    uint32_t next_free; /* in the free list, while unused: index + 1, 0 ends it */
} net_slot;

struct net_waits {
    net_slot *slots;
    uint32_t len, cap;
    uint32_t free; /* index + 1 of the first free slot, 0: none */
};

void *net_slot_owner(net_loop *loop, uint64_t name)
{
    uint32_t slot = net_name_slot(name);
    struct net_waits *t = loop->waits;
    if (slot >= t->len)
        return NULL;
    uintptr_t owner = t->slots[slot].owner;
    /* A slot given back and taken by an owner of the other kind since the
     * name was made matches nothing. */
    if ((owner & NET_TAG_MASK) != (name & NET_TAG_MASK))
        return NULL;
    return (void *)(owner & ~(uintptr_t)NET_TAG_MASK);
}

void net_slot_hold(net_loop *loop, uint32_t slot, void *owner, unsigned tag)
{
    loop->waits->slots[slot].owner = (uintptr_t)owner | tag;
}

uint64_t net_slot_rename(net_loop *loop, uint32_t slot, unsigned tag)
{
    net_slot *s = &loop->waits->slots[slot];
    if (++s->gen == 0)
        s->gen = 1;
    return net_name(tag, slot, s->gen);
}

int net_waits_take(net_loop *loop, uint32_t *slot)
{
    struct net_waits *t = loop->waits;
    if (t->free) {
        *slot = t->free - 1;
        t->free = t->slots[*slot].next_free;
        return 0;
    }
    if (t->len == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 256;
        if (cap > 1u << NET_SLOT_BITS)
            return -ENOMEM;
        net_slot *s = realloc(t->slots, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        t->slots = s;
        t->cap = cap;
    }
    /* A new slot's generations start at 1: 0 is never a valid one. */
    t->slots[t->len] = (net_slot){.owner = 0, .gen = 0};
    *slot = t->len++;
    return 0;
}

void net_waits_give(net_loop *loop, uint32_t slot)
{
    struct net_waits *t = loop->waits;
    t->slots[slot].owner = 0;
    t->slots[slot].next_free = t->free;
    t->free = slot + 1;
}

void net_waiter_init(net_waiter *w, net_loop *loop, cr_coro *co, uint32_t slot)
{
    *w = (net_waiter){.ready.coro = co, .loop = loop, .fd = -1, .slot = slot};
    net_slot_hold(loop, slot, w, NET_TAG_OP);
}

void net_waiter_close(net_waiter *w)
{
    net_waits_give(w->loop, w->slot);
}


uint64_t net_wait_begin(net_waiter *w, net_wait_kind kind, uint64_t deadline_ns)
{
    w->kind = kind;
    w->state = NET_WAIT_ON;
    w->res = 0;
    w->flags = 0;
    w->cancel = 0;
    w->fd = -1;
    w->pending = 0;
    w->abandon = NULL;
    w->name = net_slot_rename(w->loop, w->slot, NET_TAG_OP);
    if (deadline_ns)
        net_wheel_add(&w->loop->wheel, &w->timer, deadline_ns);
    return w->name;
}

int net_wait_suspend(net_waiter *w)
{
    cr_coro_yield();
    net_wheel_remove(&w->loop->wheel, &w->timer);
    w->state = NET_WAIT_NONE;
    w->ended = w->end;
    if (w->end != NET_END_CANCELLED)
        w->end = NET_END_NONE;
    w->cancel = 0;
    w->abandon = NULL;
    return w->res;
}

void net_wait_complete(net_waiter *w, int res, uint32_t flags)
{
    if (w->state == NET_WAIT_ENDING && w->cancel)
        w->loop->load.ending_waits--;
    w->state = NET_WAIT_NONE;
    w->res = res;
    w->flags = flags;
    net_loop_resume(w->ready.coro); /* @w lives on that coroutine's stack */
}

static int end_result(net_end why)
{
    switch (why) {
    case NET_END_WOKEN:
        return 0;
    case NET_END_INTERRUPTED:
        return -EINTR;
    case NET_END_DEADLINE:
        return -ETIMEDOUT;
    default:
        return -ECANCELED;
    }
}

bool net_wait_end(net_waiter *w, net_end why)
{
    if (why == NET_END_CANCELLED) {
        if (w->end == NET_END_CANCELLED)
            return false;
        w->end = NET_END_CANCELLED; /* for good; an end under way now ends cancelled */
        if (w->state != NET_WAIT_ON)
            return true;
    } else {
        if (w->state != NET_WAIT_ON)
            return false; /* not waiting, or its end is decided */
        w->end = why;
    }
    if (w->cancel) {
        /* Its SQE's CQE (-ECANCELED, or a result that won) resumes it;
         * until then the loop does not batch-wait (loop.c). */
        w->state = NET_WAIT_ENDING;
        w->loop->load.ending_waits++;
        net_ring_cancel(&w->loop->ring, w->cancel);
    } else if (w->abandon && !w->abandon(w)) {
        w->state = NET_WAIT_ENDING; /* messages still out come back first */
    } else {
        w->state = NET_WAIT_READY;
        w->res = end_result(why);
        net_loop_ready(w->loop, &w->ready);
    }
    return true;
}

int net_wait_result(net_waiter *w, int res)
{
    switch (w->ended) {
    case NET_END_DRAIN:
        /* The drain cancelled an idle wait; a result that won the race (a
         * request had arrived) stands and the task goes on. */
        if (res == -ECANCELED)
            w->end = NET_END_CANCELLED;
        return res;
    case NET_END_INTERRUPTED:
        return res == -ECANCELED ? -EINTR : res;
    case NET_END_DEADLINE:
        return res == -ECANCELED || res == -EINTR ? -ETIMEDOUT : res;
    default:
        return res;
    }
}

int net_wait_sqe(net_waiter *w, net_wait_kind kind, struct io_uring_sqe *sqe, int fd,
                 uint64_t timeout_ns, struct __kernel_timespec *ts)
{
    net_loop *loop = w->loop;
    bool coarse = timeout_ns >= NET_COARSE_TIMEOUT_NS;
    uint64_t name = net_wait_begin(w, kind, coarse ? loop->now_ns + timeout_ns : 0);
    io_uring_sqe_set_data64(sqe, name);
    net_wait_on_sqe(w, name, fd);
    if (timeout_ns && !coarse) {
        sqe->flags |= IOSQE_IO_LINK;
        ts->tv_sec = (long long)(timeout_ns / CR_NS_PER_S);
        ts->tv_nsec = (long long)(timeout_ns % CR_NS_PER_S);
        struct io_uring_sqe *t = net_ring_sqe(&loop->ring);
        io_uring_prep_link_timeout(t, ts, 0);
        io_uring_sqe_set_data64(t, 0);
    }
    int res = net_wait_result(w, net_wait_suspend(w));
    if (res == -ECANCELED && timeout_ns && !net_waiter_cancelled(w))
        return -ETIMEDOUT;
    return res;
}

/* --- the loop's handlers ----------------------------------------------- */

/* A completion named NET_TAG_OP: resume the wait it names, if that wait is
 * still on (a stale one, of a wait over or a slot reused, matches nothing:
 * the slot's waiter has a newer name). */
static void op_completed(net_loop *loop, void *ctx, uint64_t data, int res, uint32_t flags)
{
    (void)ctx;
    net_waiter *w = net_waiter_of(loop, data);
    if (w && w->name == data && net_waiting(w))
        net_wait_complete(w, res, flags);
}

static void deadline_passed(net_timer *timer, void *arg)
{
    (void)arg;
    net_waiter *w = (net_waiter *)(void *)((char *)timer - offsetof(net_waiter, timer));
    net_wait_end(w, NET_END_DEADLINE);
}

static void expire_deadlines(net_loop *loop, void *ctx)
{
    (void)ctx;
    net_wheel_expire(&loop->wheel, cr_clock_now_ns(), deadline_passed, NULL);
}

int net_waits_attach(net_loop *loop)
{
    loop->waits = calloc(1, sizeof(*loop->waits));
    if (!loop->waits)
        return -ENOMEM;
    net_wheel_init(&loop->wheel, NET_TICK_NS, loop->now_ns);
    net_loop_on_cqe(loop, NET_TAG_OP, op_completed, NULL);
    net_loop_on_tick(loop, expire_deadlines, NULL);
    return 0;
}

void net_waits_detach(net_loop *loop)
{
    if (loop->waits)
        free(loop->waits->slots);
    free(loop->waits);
    loop->waits = NULL;
}
