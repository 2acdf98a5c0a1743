/*
 * A conninfo's host list, planned for resolution off the ring: see
 * hosts.h.
 */
#include "hosts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int db_hosts_plan(db_hosts *h, const char *conninfo)
{
    *h = (db_hosts){0};
    PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
    if (!opts)
        return 0; /* libpq says why on connect */
    const char *host = NULL, *hostaddr = NULL, *port = NULL;
    size_t count = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++) {
        if (!o->val)
            continue;
        if (strcmp(o->keyword, "host") == 0)
            host = o->val;
        else if (strcmp(o->keyword, "hostaddr") == 0)
            hostaddr = o->val;
        else if (strcmp(o->keyword, "port") == 0)
            port = o->val;
        else
            count++;
    }
    if (!host || !*host)
        host = getenv("PGHOST"); /* what libpq falls back on */
    if (!port || !*port)
        port = NULL;
    size_t nhosts = 1, nports = 1;
    for (const char *p = host; p && *p; p++)
        nhosts += *p == ',';
    for (const char *p = port; p && *p; p++)
        nports += *p == ',';
    if ((hostaddr && *hostaddr) || !host || !*host || (port && nports > 1 && nports != nhosts)) {
        PQconninfoFree(opts); /* nothing to resolve, or libpq will refuse it */
        return 0;
    }
    db_target *targets = calloc(nhosts, sizeof(*targets));
    if (!targets) {
        PQconninfoFree(opts);
        return -ENOMEM;
    }
    bool any = false;
    const char *at = host, *pt = port;
    for (size_t i = 0; i < nhosts; i++) {
        size_t hl = strcspn(at, ",");
        snprintf(targets[i].host, sizeof(targets[i].host), "%.*s", (int)hl, at);
        at += hl + (at[hl] == ',');
        if (pt) {
            size_t pl = strcspn(pt, ",");
            snprintf(targets[i].port, sizeof(targets[i].port), "%.*s", (int)pl, pt);
            if (nports > 1)
                pt += pl + (pt[pl] == ',');
        }
        const char *name = targets[i].host;
        unsigned char buf[sizeof(struct in6_addr)];
        targets[i].resolve = *name && name[0] != '/' && name[0] != '@' &&
                             inet_pton(AF_INET, name, buf) != 1 &&
                             inet_pton(AF_INET6, name, buf) != 1;
        any = any || targets[i].resolve;
    }
    if (!any) {
        free(targets);
        PQconninfoFree(opts);
        return 0;
    }
    h->keywords = calloc(count + 4, sizeof(char *));
    h->values = calloc(count + 4, sizeof(char *));
    if (!h->keywords || !h->values) {
        free(h->keywords);
        free(h->values);
        h->keywords = NULL;
        h->values = NULL;
        free(targets);
        PQconninfoFree(opts);
        return -ENOMEM;
    }
    size_t n = 0;
    for (PQconninfoOption *o = opts; o->keyword; o++)
        if (o->val && strcmp(o->keyword, "host") != 0 && strcmp(o->keyword, "hostaddr") != 0 &&
            strcmp(o->keyword, "port") != 0) {
            h->keywords[n] = o->keyword;
            h->values[n++] = o->val;
        }
    h->nopts = n;
    h->parsed = opts;
    h->targets = targets;
    h->ntargets = nhosts;
    return 0;
}

void db_hosts_params(db_hosts *h, size_t target, const char *hostaddr)
{
    const db_target *t = &h->targets[target];
    size_t n = h->nopts;
    h->keywords[n] = "host";
    h->keywords[n + 1] = "hostaddr";
    h->keywords[n + 2] = "port";
    h->values[n] = t->host;
    h->values[n + 1] = hostaddr;
    h->values[n + 2] = t->port;
}

void db_hosts_free(db_hosts *h)
{
    free(h->keywords);
    free(h->values);
    free(h->targets);
    if (h->parsed)
        PQconninfoFree(h->parsed);
    *h = (db_hosts){0};
}
