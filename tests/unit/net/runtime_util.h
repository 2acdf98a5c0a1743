/*
 * Shorthands for the unit tests that run the runtime (net_run): a
 * configuration on loopback, an ephemeral port and few provided buffers, a
 * connection handler for runs that accept none, and a task that ends the
 * run (SIGTERM) shortly after it starts.
 */
#ifndef CORING_TESTS_UNIT_NET_RUNTIME_UTIL_H
#define CORING_TESTS_UNIT_NET_RUNTIME_UTIL_H

#include "coring/core/clock.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <signal.h>
#include <unistd.h>

static inline net_config test_config(unsigned threads, uint64_t shutdown_timeout_ns)
{
    net_config cfg = net_config_default();
    cfg.threads = threads;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 8;
    if (shutdown_timeout_ns)
        cfg.shutdown_timeout_ns = shutdown_timeout_ns;
    return cfg;
}

/* on_connection for runs that accept none. */
static inline void never_connected(int fd, void *user)
{
    (void)user;
    net_close(fd);
}

/* A task (net_spawn) that sends the process SIGTERM after 100 ms: the run
 * drains and net_run returns. */
static inline void sigterm_soon(void *arg)
{
    (void)arg;
    net_sleep(100 * CR_NS_PER_MS);
    kill(getpid(), SIGTERM);
}

#endif
