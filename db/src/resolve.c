/*
 * getaddrinfo(3) on a helper thread (offload.h): see resolve.h.
 */
#include "resolve.h"

#include "offload.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A lookup's name and, once done, its outcome: the call's argument. */
typedef struct lookup {
    int naddrs;
    char error[128];
    char addrs[DB_RESOLVE_MAX_ADDRS][INET6_ADDRSTRLEN];
    char name[256];
} lookup;

static void resolve_call(void *arg)
{
    lookup *l = arg;
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->name, NULL, &hints, &res);
    if (rc != 0) {
        snprintf(l->error, sizeof(l->error), "%s",
                 rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return;
    }
    for (struct addrinfo *a = res; a && l->naddrs < DB_RESOLVE_MAX_ADDRS; a = a->ai_next) {
        const void *p = a->ai_family == AF_INET
                            ? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
        if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
            inet_ntop(a->ai_family, p, l->addrs[l->naddrs], INET6_ADDRSTRLEN))
            l->naddrs++;
    }
    freeaddrinfo(res);
    if (!l->naddrs)
        snprintf(l->error, sizeof(l->error), "no IPv4 or IPv6 address");
}

db_resolve *db_resolve_start(const char *name)
{
    lookup *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    snprintf(l->name, sizeof(l->name), "%s", name);
    db_offload *o = db_offload_start(resolve_call, l, free);
    if (!o)
        free(l);
    return o;
}

int db_resolve_fd(const db_resolve *r)
{
    return db_offload_fd(r);
}

bool db_resolve_done(const db_resolve *r)
{
    return db_offload_done(r);
}

int db_resolve_result(const db_resolve *r, const char (**addrs)[INET6_ADDRSTRLEN],
                      const char **error)
{
    const lookup *l = db_offload_arg(r);
    *addrs = l->addrs;
    *error = l->error;
    return l->naddrs;
}

void db_resolve_release(db_resolve *r)
{
    db_offload_release(r);
}
