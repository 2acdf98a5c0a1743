/*
 * Each worker thread's pool state, published for db_ready(): see
 * ready.h.
 */
#include "ready.h"

#include "coring/net/runtime.h"
#include "metrics.h"

#include <stdalign.h>
#include <stdatomic.h>

/*
 * Written only by the owning thread, with relaxed stores; read with
 * relaxed loads. One cache line per thread. Threads past
 * DB_PUBLISHED_THREADS are not published (coring runs at most 1024).
 */
#define DB_PUBLISHED_THREADS 1024
static struct {
    alignas(64) atomic_bool open; /* the thread's pool exists */
    atomic_uint up;               /* its connections that take queries */
} published[DB_PUBLISHED_THREADS];

void db_ready_publish(bool open, unsigned up)
{
    int i = net_thread_index();
    if (i < 0 || i >= DB_PUBLISHED_THREADS)
        return;
    atomic_store_explicit(&published[i].up, open ? up : 0, memory_order_relaxed);
    atomic_store_explicit(&published[i].open, open, memory_order_relaxed);
}

void db_ready_publish_set(const db_set *set)
{
    if (set->replica)
        cr_metric_set(&db_metrics.replica_up, 0, set->up > 0);
    else
        db_ready_publish(true, set->up);
}

unsigned db_ready_threads_down(unsigned threads)
{
    unsigned down = 0;
    for (unsigned i = 0; i < threads && i < DB_PUBLISHED_THREADS; i++)
        if (!atomic_load_explicit(&published[i].open, memory_order_relaxed) ||
            atomic_load_explicit(&published[i].up, memory_order_relaxed) == 0)
            down++;
    return down;
}
