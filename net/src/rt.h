/*
 * Internal to net/: the process-wide runtime state, which every file of
 * net/src/ reads and setup.c writes. Types only: each file's functions are
 * declared in its own header. Not a public header.
 */
#ifndef CORING_NET_RT_H
#define CORING_NET_RT_H

#include "coring/net/runtime.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Written by the main thread before the workers start (and ring_fds by
 * each worker before the start barrier), read-only afterwards, except the
 * atomics. Defined in setup.c. */
typedef struct net_runtime {
    net_config cfg;
    net_hooks hooks;
    unsigned threads;
    unsigned max_conn_per_thread;
    int *cpus;        /* CPU of each worker */
    int *listen_fds;  /* listener of each worker, until its loop takes it */
    atomic_int *ring_fds; /* ring fd of each worker, for MSG_RING; -1 before its ring
                             is set up and once its loop has left (setup.c) */
    unsigned listeners; /* distinct listening sockets: listen_fds[0..listeners); the
                           other workers' are dups of them (activation.c) */
    net_loop **loops; /* each worker's loop: freed by net_run once no thread can
                         reach them (wakes_closed) */
    pthread_barrier_t started;
    atomic_int init_failed;
    atomic_uint drained; /* workers with no task left after shutdown began */
    atomic_uint running;
    atomic_bool stopping;      /* the first SIGINT/SIGTERM came (grace or drain) */
    atomic_uint foreign_wakes; /* posts from threads that are not workers (net_wake, the
                                  broadcast) under way: a worker closes its ring only
                                  when none is, after its ring_fds went -1 */
    atomic_bool wakes_closed;  /* net_run is done: net_wake from other threads
                                  returns -ESHUTDOWN */
} net_runtime;

extern net_runtime net_rt;

#endif
