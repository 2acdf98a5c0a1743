/*
 * Queries' memory and their hand-over to their waiters: see pending.h.
 */
#include "pending.h"

#include "coring/net/io.h"

#include <errno.h>
#include <libpq-fe.h>
#include <stdlib.h>

db_pending *db_pending_alloc(db_pending **free_list)
{
    db_pending *p = *free_list;
    if (p)
        *free_list = p->next;
    else if (!(p = malloc(sizeof(*p))))
        return NULL;
    *p = (db_pending){0};
    return p;
}

void db_pending_free(db_pending **free_list, db_pending *p)
{
    if (p->result)
        PQclear(p->result);
    p->result = NULL;
    free(p->owned);
    p->owned = NULL;
    p->next = *free_list;
    *free_list = p;
}

void db_pending_done(db_pending **free_list, db_pending *p)
{
    if (p->members) {
        for (db_pending *m = p->members, *next; m; m = next) {
            next = m->next;
            m->next = NULL;
            m->error = p->error ? p->error : -EIO;
            db_pending_done(free_list, m);
        }
        p->members = NULL;
        db_pending_free(free_list, p);
        return;
    }
    p->state = DB_PENDING_DONE;
    if (p->waiter)
        net_unpark(p->waiter);
    else
        db_pending_free(free_list, p);
}
