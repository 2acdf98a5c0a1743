/*
 * A blocking call on a helper thread, its end signalled on an eventfd:
 * see offload.h.
 */
#include "offload.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct db_offload {
    atomic_int refs; /* the helper thread and the owner */
    atomic_bool done;
    int efd;
    void (*fn)(void *arg);
    void *arg;
    void (*release)(void *arg);
};

static void release(db_offload *o)
{
    if (atomic_fetch_sub(&o->refs, 1) == 1) {
        if (o->release)
            o->release(o->arg);
        close(o->efd);
        free(o);
    }
}

static void *offload_main(void *arg)
{
    db_offload *o = arg;
    o->fn(o->arg);
    atomic_store(&o->done, true);
    uint64_t one = 1;
    ssize_t w = write(o->efd, &one, sizeof(one));
    (void)w;
    release(o);
    return NULL;
}

db_offload *db_offload_start(void (*fn)(void *arg), void *arg, void (*release_arg)(void *arg))
{
    db_offload *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    *o = (db_offload){.fn = fn, .arg = arg, .release = release_arg};
    o->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (o->efd < 0) {
        free(o);
        return NULL;
    }
    atomic_init(&o->refs, 2);
    atomic_init(&o->done, false);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* The helper takes no signal: they belong to the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int err = pthread_create(&t, &attr, offload_main, o);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err) {
        close(o->efd);
        free(o);
        return NULL;
    }
    return o;
}

int db_offload_fd(const db_offload *o)
{
    return o->efd;
}

bool db_offload_done(const db_offload *o)
{
    return atomic_load(&o->done);
}

void *db_offload_arg(const db_offload *o)
{
    return o->arg;
}

void db_offload_release(db_offload *o)
{
    if (o)
        release(o);
}
