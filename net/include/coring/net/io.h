/*
 * Coroutine I/O on the calling thread's ring.
 *
 * Each call submits SQEs whose user_data names the waiting operation,
 * yields, and returns the CQE's result when the loop resumes the coroutine:
 * code reads like blocking I/O. Call only from a coroutine running on a
 * worker thread (inside net_hooks.on_connection, or a coroutine spawned
 * with net_spawn).
 *
 * Timeouts are relative, in nanoseconds; 0 means none. A timed-out
 * operation returns -ETIMEDOUT (implemented with a linked timeout SQE,
 * IORING_OP_LINK_TIMEOUT). An operation cancelled through net_task_cancel
 * or by shutdown returns -ECANCELED. Other errors are the negative errno of
 * the underlying system call (see recv(2), send(2), connect(2), poll(2)).
 */
#ifndef CORING_NET_IO_H
#define CORING_NET_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A coroutine known to the loop (one per connection, or spawned). */
typedef struct net_task net_task;

/*
 * A received buffer. When `provided` is true the bytes live in a buffer of
 * the thread's provided-buffer ring (io_uring "provided buffers"), chosen
 * by the kernel when data arrived, and must be given back with
 * net_rbuf_release() once parsed. The bytes may be modified in place.
 */
typedef struct net_rbuf {
    char *data;
    size_t len;
    uint16_t bid;   /* buffer id in the ring */
    bool provided;
} net_rbuf;

/*
 * net_recv_provided - receive into a provided buffer (IOSQE_BUFFER_SELECT):
 * an idle connection holds no buffer memory, the kernel picks a buffer only
 * when data arrives. Returns the byte count (0 at EOF), -ENOBUFS when every
 * provided buffer is in use (then read with net_recv into memory of your
 * own), -ETIMEDOUT, -ECANCELED or -errno.
 * On the descriptor of the calling connection task (the one passed to
 * net_hooks.on_connection) it reads from that connection's multishot recv
 * (armed at the first call, kernel 6.0+; single shots on older kernels):
 * data that arrived while the task was busy elsewhere is returned first,
 * one kernel completion per call, in order; its timeout then fires up to
 * one 100 ms tick late. On any other descriptor, one recv per call.
 */
ssize_t net_recv_provided(int fd, net_rbuf *out, uint64_t timeout_ns);

/* net_rbuf_release - give a provided buffer back to the ring (no-op when
 * not provided). The data must not be used after. */
void net_rbuf_release(net_rbuf *b);

/* net_recv - recv(2) into @buf. Returns bytes, 0 at EOF, or -errno. On a
 * connection whose multishot recv is armed or holds data (net_recv_provided)
 * it copies from that, so the two never race for the bytes. */
ssize_t net_recv(int fd, void *buf, size_t len, uint64_t timeout_ns);

/*
 * net_send_all - send all @len bytes (repeating after short sends).
 * Returns @len, or -errno (-EPIPE, -ECONNRESET, -ETIMEDOUT, -ECANCELED...).
 * One send at a time per socket: the caller must not have another send in
 * flight on @fd (two can reorder bytes).
 */
ssize_t net_send_all(int fd, const void *buf, size_t len, uint64_t timeout_ns);

/*
 * net_send_last - a cancelled task's last words: one send(2) of @len bytes
 * of @buf on @fd, MSG_DONTWAIT, outside the ring and without waiting, so
 * that it works after net_task_cancel (the drain's deadline), when every
 * other operation returns -ECANCELED. For a short answer (a few hundred
 * bytes) into a socket that has room: what does not fit is not sent.
 * The caller must have no send in flight on @fd. Any thread, any context.
 * Returns the bytes sent (maybe fewer than @len), or -errno (-EAGAIN: no
 * room, -EPIPE, -ECONNRESET...). send(2), MSG_DONTWAIT | MSG_NOSIGNAL.
 */
ssize_t net_send_last(int fd, const void *buf, size_t len);

/* net_cancelled - the current task was cancelled (net_task_cancel, the
 * drain's deadline): every operation it starts returns -ECANCELED. False
 * outside a task. Worker coroutine. */
bool net_cancelled(void);

/*
 * Deadlines (net/src/deadline.c, docs/deadlines.md). A task may carry one
 * deadline at a time, on the loop's tick (no syscall, no SQE of its own):
 * when it passes, the task is cancelled as by net_task_cancel (its wait
 * ends with -ECANCELED, and so does every later one) and net_stop_cause()
 * says NET_STOP_DEADLINE. The drain's deadline ends every task in flight
 * through the same path, as NET_STOP_DRAIN (which overrides a task's own
 * deadline, and is never undone).
 */
typedef enum net_stop_cause {
    NET_STOP_NONE = 0, /* not cancelled */
    NET_STOP_DEADLINE, /* its own deadline (net_deadline_set) passed */
    NET_STOP_DRAIN,    /* the drain's deadline (--shutdown-timeout) */
    NET_STOP_OTHER,    /* net_task_cancel (the drain ending an idle wait, a service) */
} net_stop_cause;

/*
 * net_deadline_set - cancel the current task at @deadline_ns (monotonic
 * ns, cr_clock_now_ns; one already past cancels it at the next tick).
 * Granularity: the loop's tick (100 ms); the deadline is armed half a tick
 * early so that it fires within +-50 ms of @deadline_ns (and the loop's
 * own lateness). Replaces the task's earlier deadline. Returns 0, or
 * -EPERM outside a worker task. Worker coroutine.
 */
int net_deadline_set(uint64_t deadline_ns);

/*
 * net_deadline_clear - disarm the current task's deadline and say what
 * ended it: NET_STOP_NONE when nothing cancelled the task, else its cause.
 * A task cancelled by its own deadline only (NET_STOP_DEADLINE) is
 * cancelled no more when this returns: its next operations run (a
 * connection goes on to its next request). Any other cause stays. Worker
 * coroutine, not waiting (nothing of the task's may still be in flight).
 */
net_stop_cause net_deadline_clear(void);

/* net_stop_cause - why the current task is cancelled (NET_STOP_NONE: it
 * is not; also outside a task). Worker coroutine. */
net_stop_cause net_stop_cause_get(void);

/* net_writev - writev(2) once (may be short). Returns bytes or -errno. */
ssize_t net_writev(int fd, const struct iovec *iov, int iovcnt, uint64_t timeout_ns);

/* net_connect - connect(2) a socket (non-blocking or not). 0 or -errno. */
int net_connect(int fd, const struct sockaddr *addr, socklen_t addrlen, uint64_t timeout_ns);

/* net_poll - wait until @fd is ready for @events (POLLIN, POLLOUT...), for
 * a descriptor owned by someone else (libpq, libcurl). Returns the ready
 * events mask, -ETIMEDOUT or -ECANCELED. */
int net_poll(int fd, unsigned events, uint64_t timeout_ns);

/* net_sleep - suspend the coroutine for @ns. 0, -EINTR (net_task_interrupt)
 * or -ECANCELED. */
int net_sleep(uint64_t ns);

/* net_shutdown - shutdown(2) @fd (SHUT_RD, SHUT_WR, SHUT_RDWR), at once
 * (it does not block). 0 or -errno (-ENOTCONN...). Any thread. */
int net_shutdown(int fd, int how);

/*
 * net_close - close(2) @fd through the ring, without waiting: on a worker
 * coroutine the close is queued (IOSQE_CQE_SKIP_SUCCESS, nobody reads its
 * completion) and runs at the loop's next submit; returns 0 (close(2)
 * releases the descriptor even when it reports an error). Elsewhere a
 * plain close(2): 0 or -errno. Ends the connection's armed receive, if
 * any (net_recv_provided). Never fails to release @fd.
 */
int net_close(int fd);

/*
 * net_connection_idle - the calling connection task (net_hooks.on_connection)
 * is between requests, with nothing of its own to send: give up its
 * coroutine until input comes. On 0 the connection is idle: on_connection
 * must return at once without touching its descriptor again (nor closing
 * it); its stack goes back to the pool, and what stays is the runtime's
 * record of the connection (about 200 bytes, its multishot receive still
 * armed) and @state, the caller's, owned by the connection from now on.
 * When data comes (or every provided buffer is in use), on_connection
 * runs again in a new coroutine on this thread, and net_connection_state()
 * returns @state; when the peer closes or resets the connection, after
 * @timeout_ns (relative, ns; 0: none; up to one 100 ms tick late), or when
 * the drain ends it, the runtime closes it without a coroutine and calls
 * net_hooks.on_idle_close with @state. Returns 0 (idle: return now),
 * -EAGAIN (input is queued already, or the runtime cannot leave this
 * connection idle: once the drain's idle grace is over
 * (net_config.drain_idle_grace_ns), on a kernel without multishot receive;
 * go on receiving with net_recv_provided, with the same timeout), -EPERM
 * (not a connection task), -EBADF (its descriptor is closed), -ECANCELED
 * (the task was cancelled: close the connection).
 */
int net_connection_idle(void *state, uint64_t timeout_ns);

/* net_connection_state - in a connection task, the state given to the
 * connection's last net_connection_idle; NULL on its first run (just
 * accepted) and outside a connection task. */
void *net_connection_state(void);

/*
 * net_spawn - start @fn(@arg) in a new coroutine on this thread; it runs
 * until its first wait before net_spawn returns. Its stack is a
 * connection's (net_config.stack_size). Loop thread only.
 * Returns 0, -EINVAL off a worker thread, or -ENOMEM.
 */
int net_spawn(void (*fn)(void *arg), void *arg);

/*
 * net_spawn_service - net_spawn for a service coroutine (see
 * net_task_set_service, which it implies): one that calls into libraries
 * with deep stacks (libpq, libcurl, OpenSSL's handshake) runs on a larger
 * stack, net_config.service_stack_size (docs/runtime.md, "Stacks").
 * Same returns as net_spawn.
 */
int net_spawn_service(void (*fn)(void *arg), void *arg);

/* net_task_current - the task running now, or NULL outside one. */
net_task *net_task_current(void);

/*
 * net_task_set_idle - mark the current task as idle (waiting between
 * requests) or busy. Shutdown lets busy tasks finish; idle ones wait as
 * usual until the drain's idle grace is over
 * (net_config.drain_idle_grace_ns), then their operations are cancelled,
 * except one on a descriptor with input already waiting (a request that
 * arrived), which is let finish, and from then on an idle task's next
 * operation runs only if its descriptor has input waiting (else
 * -ECANCELED). Same thread only.
 */
void net_task_set_idle(bool idle);

/*
 * net_task_interrupt - make @task's in-flight operation (if any) return
 * -EINTR now; later operations are unaffected. For a coroutine that waits
 * on something whose parameters changed (a poll's events, a timer's
 * deadline). Same thread only.
 */
void net_task_interrupt(net_task *task);

/*
 * net_task_set_service - mark the current task as a service coroutine that
 * other tasks depend on (a database connection's driver, the curl timer,
 * a socket watcher), or unmark it. Shutdown neither cancels a service when
 * it is idle nor at the drain deadline: services run until every other task
 * of the thread has ended, then they are cancelled (their operations return
 * -ECANCELED) and must end.
 */
void net_task_set_service(bool service);

/* net_task_cancel - end @task's wait, whatever it waits for (an operation,
 * a park, net_call, net_wait): it returns -ECANCELED, and so does every
 * later one until the task ends. Same thread only. */
void net_task_cancel(net_task *task);

/*
 * Cross-core messages (IORING_OP_MSG_RING).
 *
 * A net_msg is embedded in a caller's struct. net_call() sends it to worker
 * @target, where @fn runs on that thread's loop (outside any coroutine: it
 * must not block nor yield), then the calling coroutine resumes. The
 * message, and anything it points to, must stay valid until net_call
 * returns; while it is away the target owns it. The runtime carries it in
 * an envelope of its own and never touches the message after net_call
 * returns, whatever ended the call: a call that ends early (its deadline,
 * net_task_cancel, the drain's deadline) before the target took the
 * message returns at once and @fn never runs; once the target took it, the
 * call waits for @fn to finish (it does not block) and its result stands.
 * Calling with @target == net_thread_index() runs @fn directly.
 * Returns 0, -EINVAL for a bad target, -ECANCELED (the task was cancelled:
 * @fn did not run), -ENOMEM (no envelope), or the -errno of a MSG_RING that
 * could not be posted (other than a full completion queue, which is
 * retried): on the way there @fn has not run; on the way back (the reply)
 * @fn has run, and the caller resumes with the error within a tick
 * (100 ms) instead of waiting forever. Worker coroutine only.
 */
typedef struct net_msg net_msg;
typedef void (*net_msg_fn)(net_msg *msg);
struct net_msg {
    net_msg_fn fn; /* runs on the target thread */
};

int net_call(unsigned target, net_msg *msg);

/*
 * net_call_timeout - net_call that gives up after @timeout_ns (relative,
 * ns; 0: none; checked by the loop's tick, up to 100 ms late) when the
 * target has not taken the message by then (a thread that never answers):
 * returns -ETIMEDOUT, and @fn never runs.
 */
int net_call_timeout(unsigned target, net_msg *msg, uint64_t timeout_ns);

/*
 * net_call_all - net_call for @n messages at once: @msgs[i] goes to worker
 * @targets[i]; every one is posted before any reply is awaited, so the
 * targets run their @fn in parallel, and the caller resumes once, when the
 * last reply is back (a message for the calling thread itself runs
 * directly, after the others are posted). Same rules as net_call for each
 * message (valid and untouched until this returns; @fn must not yield).
 * Worker coroutine only. Returns 0, -EINVAL for a bad target (then nothing
 * was posted), -ECANCELED when cancelled before every target took its
 * message (those not taken did not run), or the first -errno net_call would
 * have returned for one of them (the others still completed: check each
 * message's own result).
 */
int net_call_all(net_msg *const *msgs, const unsigned *targets, size_t n);

/*
 * Waiting for another thread (an inference pool, a resolver): the
 * coroutine takes a handle (net_wait_init), hands it to the other thread,
 * and calls net_wait(); that thread calls net_wake() once, and the
 * coroutine resumes on its own ring (the wake-up travels as a MSG_RING
 * completion, so no lock and no eventfd on the worker). The handle is the
 * runtime's, never the waiter's memory: a waiter that gives up (its
 * deadline, a cancel) returns at once, and the wake-up that comes later is
 * received and dropped.
 *
 * net_wait_init - a handle for the calling coroutine, in *@out. Returns 0,
 * -EPERM off a worker coroutine, or -ENOMEM.
 * net_wait - suspend until net_wake(@w), for at most @timeout_ns (relative,
 * ns; 0: none; up to one 100 ms tick late). Call once per handle; the
 * handle is released when it returns (a wake-up still due is received and
 * dropped). Returns 0 (woken; also when the wake-up came before this
 * call), -ETIMEDOUT, -ECANCELED (net_task_cancel, the drain), -EPERM off
 * a worker coroutine, or the -errno of a wake-up that a worker's MSG_RING
 * could not post (then resumed within a tick instead of never).
 * net_wake - from any thread, including a worker: resume @w's coroutine.
 * Exactly once per handle. A wake-up from a thread that is not a worker
 * travels through a small ring of that thread's (made on first use, freed
 * at thread exit), and that thread waits for the kernel's answer (through
 * signals: -EINTR is waited again). When that ring cannot be made, its
 * submit fails (the ring is then remade) or the kernel refuses the
 * MSG_RING (the waiter's CQ is full: -EOVERFLOW), the wake-up goes to the
 * waiter's thread's inbox, which that thread reads every tick (100 ms);
 * it is delivered once, never twice. Returns 0, -EINVAL for a NULL @w,
 * -ESHUTDOWN from a thread that is not a worker once the waiter's thread
 * has left its loop (shutdown) or net_run has returned (nobody waits any
 * more; the handle is freed when net_run returns), or
 * -EINPROGRESS in the one case nobody can know: the MSG_RING was
 * submitted but waiting for its answer failed with another error (logged);
 * it may or may not arrive, must not be repeated, and the waiter's
 * deadline or a cancel (the drain's) ends a wait it never reaches.
 * net_wait_release - give back a handle that was never handed to another
 * thread and will not be waited for (the hand-over failed). Its coroutine.
 */
typedef struct net_wait_handle net_wait_handle;

int net_wait_init(net_wait_handle **out);
int net_wait(net_wait_handle *w, uint64_t timeout_ns);
int net_wake(net_wait_handle *w);
void net_wait_release(net_wait_handle *w);

/*
 * Parking: waiting for another coroutine of the same thread (a database
 * connection's driver and the requests queued on it), with no message and
 * no system call when nothing but the wake-up is waited for.
 *
 * net_park - suspend the current coroutine until one of:
 *   - another coroutine (or loop callback) of this thread calls
 *     net_unpark() on it: returns 0;
 *   - @fd >= 0 becomes ready for @events (POLLIN, POLLOUT..., as net_poll):
 *     returns the ready events mask (> 0); with @fd < 0 no descriptor is
 *     watched and @events is ignored;
 *   - @timeout_ns (relative, ns; 0: none) passes: returns -ETIMEDOUT;
 *   - the task is cancelled (net_task_cancel, shutdown of an idle task):
 *     returns -ECANCELED.
 * A wake-up that races with readiness or the timeout may be reported as
 * either: callers re-check their own state after any return. Returns -EPERM
 * off a worker coroutine. Cost: with @fd < 0 and no timeout, or a timeout of
 * at least 1 s (checked by the loop's tick, up to 100 ms late), no SQE at
 * all; otherwise one poll or timeout SQE, plus a cancel on net_unpark.
 */
int net_park(int fd, unsigned events, uint64_t timeout_ns);

/*
 * net_unpark - wake @task if it is in net_park() and not already woken.
 * Same thread only (a coroutine or a loop callback). The task does not run
 * inside this call: it resumes at the loop's next turn, after the current
 * completions, so the caller keeps running. Returns true when @task was
 * parked and is now woken, false otherwise (not parked, or already woken by
 * its timeout, readiness or cancellation).
 */
bool net_unpark(net_task *task);

#endif
