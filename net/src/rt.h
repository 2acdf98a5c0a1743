/*
 * Internal to net/: the process-wide runtime state and the functions the
 * files of net/src/ call across each other. Not a public header; loop.h
 * holds the types (net_loop, net_task, net_op). Which file owns what:
 *
 *   loop.c      the loop, its completions, SQEs, cancels, the tick
 *   task.c      tasks, parking, the ready queue
 *   msg.c       cross-core messages (MSG_RING) and wake-ups
 *   listener.c  binding the listeners, accept, the connection limit
 *   shutdown.c  signals, the drain grace, the drain
 *   setup.c     net_run, rings, worker threads, CPUs, rlimits; net_rt
 *   wheel.c     the timer wheel of the tasks' coarse deadlines (wheel.h)
 *   io.c, buf_ring.c, stats.c: coroutine I/O, provided buffers, metrics
 */
#ifndef CORING_NET_RT_H
#define CORING_NET_RT_H

#include "loop.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Process-wide runtime state: written by the main thread before workers
 * start (and ring_fds by each worker before the start barrier), read-only
 * afterwards, except the atomics. Defined in setup.c. */
typedef struct net_runtime {
    net_config cfg;
    net_hooks hooks;
    unsigned threads;
    unsigned max_conn_per_thread;
    int *cpus;             /* CPU of each worker */
    int *listen_fds;       /* listener of each worker */
    int *ring_fds;         /* ring fd of each worker, for MSG_RING */
    net_loop **loops;
    pthread_barrier_t started;
    atomic_int init_failed;
    atomic_uint drained;   /* workers with no task left after shutdown began */
    atomic_uint running;
    atomic_bool stopping;  /* the first SIGINT/SIGTERM came (grace or drain) */
} net_runtime;

extern net_runtime net_rt;

/* The worker thread's loop (NULL elsewhere). Defined in loop.c. */
extern _Thread_local net_loop *net_tl_loop;

/* A message crosses threads through the kernel (IORING_OP_MSG_RING), which
 * ThreadSanitizer cannot see: tell it that posting a message publishes what
 * was written to it and that receiving one acquires that. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define NET_TSAN_RELEASE(p) __tsan_release(p)
#define NET_TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define NET_TSAN_RELEASE(p) ((void)(p))
#define NET_TSAN_ACQUIRE(p) ((void)(p))
#endif

/* loop.c */

/* Cancel the operation named @user_data: only a failure (-ENOENT,
 * -EALREADY: it completed first) posts a CQE, which nothing reads. */
void net_submit_cancel(net_loop *loop, uint64_t user_data);
/* A timeout of @ns that posts control command @cmd; @ts must outlive it. */
void net_submit_ctrl_timeout(net_loop *loop, struct __kernel_timespec *ts, uint64_t ns,
                             unsigned cmd);
/* Run the worker's loop until every worker is drained (NET_CTRL_EXIT). */
void net_loop_run(net_loop *loop);

/* task.c */

/* Resume @task's coroutine; destroys it if it finished. */
void net_loop_resume(net_loop *loop, net_task *task);
/* Resume the parked tasks woken since the last turn (and those they wake). */
void net_run_ready(net_loop *loop);
/* Start a task for accepted connection @fd (hooks.on_connection); returns
 * 0 or -ENOMEM (the caller closes @fd). */
int net_task_start_connection(net_loop *loop, int fd);

/* msg.c */

void net_msg_post(net_loop *loop, net_msg *msg, unsigned target);
void net_msg_arrived(net_loop *loop, net_msg *msg);
void net_msg_failed(net_loop *loop, net_msg *msg, int res);
void net_msg_retry(net_loop *loop);
void net_msg_take_failed_replies(net_loop *loop);

/* listener.c */

/* Bind one SO_REUSEPORT listener per worker into net_rt.listen_fds; the
 * bound port in *@port_out. Returns 0 or -errno (logged). */
int net_bind_listeners(uint16_t *port_out);
void net_accept_arm(net_loop *loop);
void net_accepted(net_loop *loop, int res, uint32_t flags);
void net_listener_close(net_loop *loop);

/* shutdown.c */

void net_drain_start(net_loop *loop);
void net_drain_deadline(net_loop *loop);
void net_drain_progress(net_loop *loop);
/* Install the SIGINT/SIGTERM handlers (and ignore SIGPIPE, SIGHUP), then
 * block both in the calling thread, the old mask in *@old_mask (the
 * workers it starts inherit the block). Returns 0 or -errno. */
int net_signals_install(sigset_t *old_mask);
/* On the main thread: wait for SIGINT/SIGTERM (and the drain grace), or a
 * worker that stopped on its own. Returns 0, or -EIO for the latter. */
int net_signals_wait(void);
/* Drain every worker and let them leave their loops (exits on a second
 * signal or a drain stuck 5 s past its deadline). */
void net_shut_down(void);
/* The default SIGINT/SIGTERM actions back, the signal pipe closed. */
void net_signals_restore(void);

#endif
