/*
 * Cancel requests for what no one waits for: see cancel.h.
 */
#include "cancel.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"
#include "coring/net/io.h"
#include "metrics.h"
#include "offload.h"

#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdlib.h>

/* How long a cancel request is waited for when no connect timeout is set. */
#define CANCEL_WAIT_NS (5 * CR_NS_PER_S)

/* A cancel request, the helper thread's call (offload.h). */
typedef struct cancel_call {
    PGcancel *cancel; /* PQgetCancel's, made on the driver's thread */
    bool sent;        /* PQcancel returned 1: the server took the request */
    char error[256];  /* else why not */
} cancel_call;

static void cancel_run(void *arg)
{
    cancel_call *k = arg;
    k->sent = PQcancel(k->cancel, k->error, sizeof(k->error)) == 1;
}

static void cancel_free(void *arg)
{
    cancel_call *k = arg;
    PQfreeCancel(k->cancel);
    free(k);
}

void db_abandon(db_conn *c, db_pending *p)
{
    p->waiter = NULL;
    db_pending *unit = p->batch ? p->batch : p;
    if (unit->abandoned)
        return;
    unit->abandoned = true;
    c->abandoned++;
    if (c->awaiting) {
        c->awaiting = c->parked = false;
        net_unpark(c->driver);
    }
}

/* The end of request c->cancel_request, waited for through the ring by a
 * coroutine of its own, so that the driver goes on reading results (the
 * cancelled statement's 57014 among them). */
static void cancel_wait(void *arg)
{
    db_conn *c = arg;
    db_offload *o = c->cancel_request;
    net_task_set_idle(true); /* shutdown ends it at once */
    uint64_t timeout = c->cfg->connect_timeout_ns ? c->cfg->connect_timeout_ns : CANCEL_WAIT_NS;
    uint64_t deadline = cr_clock_now_ns() + timeout;
    for (uint64_t now; !db_offload_done(o) && (now = cr_clock_now_ns()) < deadline;)
        if (net_park(db_offload_fd(o), POLLIN, deadline - now) == -ECANCELED)
            break;
    const cancel_call *k = db_offload_arg(o);
    if (!db_offload_done(o))
        cr_log_warn("%s connection %u: no end to a cancel request within %.1f s", c->set->what,
                    c->index, (double)timeout / 1e9);
    else if (!k->sent)
        cr_log_warn("%s connection %u: cancel request not sent: %s", c->set->what, c->index,
                    k->error);
    /* What was sent until now may have been hit. */
    c->cancel_upto = c->q.sent_seq;
    c->cancelling = false;
    c->cancel_request = NULL;
    db_offload_release(o);
    if (c->awaiting) {
        /* Another abandoned query may be running by now. */
        c->awaiting = c->parked = false;
        net_unpark(c->driver);
    }
}

void db_cancel_check(db_conn *c)
{
    if (c->cancelling || !c->pg)
        return;
    uint64_t target = db_queue_cancel_target(&c->q);
    if (!target || target == c->cancel_target)
        return;
    c->cancel_target = target;
    cancel_call *k = calloc(1, sizeof(*k));
    if (k && !(k->cancel = PQgetCancel(c->pg))) {
        free(k);
        k = NULL;
    }
    db_offload *o = k ? db_offload_start(cancel_run, k, cancel_free) : NULL;
    if (!o) {
        if (k)
            cancel_free(k);
        cr_log_warn("%s connection %u: cannot send a cancel request: no memory or thread",
                    c->set->what, c->index);
        return;
    }
    cr_metric_inc(&db_metrics.cancels, 0);
    c->cancelling = true;
    c->cancel_request = o;
    if (net_spawn(cancel_wait, c) < 0) {
        /* It lands unwatched: count what is sent until now as hit. */
        c->cancelling = false;
        c->cancel_request = NULL;
        c->cancel_upto = c->q.sent_seq;
        db_offload_release(o);
    }
}

bool db_cancel_may_have_hit(const db_conn *c, const db_pending *p)
{
    return c->cancelling || (p->seq && p->seq <= c->cancel_upto);
}

void db_cancel_forget(db_conn *c)
{
    c->abandoned = 0;
    c->cancel_target = 0;
}
