/*
 * getaddrinfo(3) on a helper thread, its end signalled on an eventfd: see
 * resolve.h.
 */
#include "resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct db_resolve {
    atomic_int refs; /* the helper thread and the owner */
    atomic_bool done;
    int efd;
    int naddrs;
    char error[128];
    char addrs[DB_RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN];
    char name[256];
};

static void release(db_resolve *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1) {
        close(r->efd);
        free(r);
    }
}

static void *resolve_main(void *arg)
{
    db_resolve *r = arg;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(r->name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(r->error, sizeof(r->error), "%s",
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
    } else {
        for (struct addrinfo *a = res; a && r->naddrs < DB_RESOLVE_MAX_ADDRS; a = a->ai_next) {
            const void *p = a->ai_family == AF_INET
                                ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                                : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
            if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
                inet_ntop(a->ai_family, p, r->addrs[r->naddrs], INET6_ADDRSTRLEN))
                r->naddrs++;
        }
        freeaddrinfo(res);
        if (!r->naddrs)
            snprintf(r->error, sizeof(r->error), "no IPv4 or IPv6 address");
    }
    atomic_store(&r->done, true);
    uint64_t one = 1;
    ssize_t w = write(r->efd, &one, sizeof(one));
    (void)w;
    release(r);
    return NULL;
}

db_resolve *db_resolve_start(const char *name)
{
    db_resolve *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->efd < 0) {
        free(r);
        return NULL;
    }
    atomic_init(&r->refs, 2);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    /* The helper takes no signal: they belong to the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int err = pthread_create(&t, &attr, resolve_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err) {
        close(r->efd);
        free(r);
        return NULL;
    }
    return r;
}

const char *db_resolve_name(const db_resolve *r)
{
    return r->name;
}

int db_resolve_fd(const db_resolve *r)
{
    return r->efd;
}

bool db_resolve_done(const db_resolve *r)
{
    return atomic_load(&r->done);
}

int db_resolve_result(const db_resolve *r, const char (**addrs)[INET6_ADDRSTRLEN],
                      const char **error)
{
    *addrs = r->addrs;
    *error = r->error;
    return r->naddrs;
}

void db_resolve_release(db_resolve *r)
{
    if (r)
        release(r);
}
