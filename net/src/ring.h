/*
 * Internal to net/: the ring, the leaf every other file of net/src/ calls
 * and that calls none of them. Everything that touches the io_uring
 * itself is here: taking SQEs (submitting first when the SQ is full),
 * submitting and waiting (the batch wait), cancels, control timeouts, the
 * backlog of reaped completions, and how an operation is named in
 * user_data. See io_uring(7), liburing's io_uring_submit_and_wait(3).
 *
 * user_data, by its low three bits (the tag):
 *
 *   0                  nothing waits for it (linked timeouts, cancels)
 *   gen << 32 | slot << 3 | TAG_OP
 *                      a task's wait: slot (29 bits) is the task's entry in
 *                      its loop's table of waiters (wait.c), gen (32 bits,
 *                      never 0) the generation of that slot's wait
 *   gen << 32 | slot << 3 | TAG_RECV
 *                      a connection's multishot recv (recv.c), named the
 *                      same way by its own generation
 *   TAG_ACCEPT         an accept (listener.c)
 *   pointer | TAG_MSG  a cross-core message arriving (msg.c)
 *   pointer | TAG_MSG_FAILED  our MSG_RING could not be posted (msg.c)
 *   cmd << 3 | TAG_CTRL       a control event (loop.c's table)
 *
 * Pointers are 8-byte aligned, which frees the low 3 bits for the tag.
 * A wait is never named by its address (a stack): a stack is reused by the
 * next coroutine, so a completion or a cancel that outlived its operation
 * could otherwise hit a new one at the same address. With the generation, a
 * stale completion matches nothing and a stale cancel finds nothing to
 * cancel, whatever the order of submissions. The generation wraps after
 * 2^32 waits of one slot, each over before the next: a CQE that old cannot
 * be pending.
 */
#ifndef CORING_NET_RING_H
#define CORING_NET_RING_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    NET_TAG_OP = 0,
    NET_TAG_ACCEPT = 1,
    NET_TAG_MSG = 2,
    NET_TAG_MSG_FAILED = 3,
    NET_TAG_CTRL = 4,
    NET_TAG_RECV = 5,
    NET_TAG_COUNT = 8,
    NET_TAG_MASK = 7,
};

#define NET_SLOT_SHIFT 3
#define NET_SLOT_BITS 29 /* slots per thread: 2^29, far above any connection limit */
#define NET_GEN_SHIFT 32

/* user_data naming generation @gen (never 0) of slot @slot, tagged @tag
 * (NET_TAG_OP or NET_TAG_RECV). Never 0: that stays "nothing waits". */
static inline uint64_t net_name(unsigned tag, uint32_t slot, uint32_t gen)
{
    return (uint64_t)gen << NET_GEN_SHIFT | (uint64_t)slot << NET_SLOT_SHIFT | tag;
}

/* user_data of a wait's operation: generation @gen of slot @slot. */
static inline uint64_t net_op_data(uint32_t slot, uint32_t gen)
{
    return net_name(NET_TAG_OP, slot, gen);
}

static inline uint32_t net_name_slot(uint64_t data)
{
    return (uint32_t)(data >> NET_SLOT_SHIFT) & ((1u << NET_SLOT_BITS) - 1);
}

static inline uint32_t net_name_gen(uint64_t data)
{
    return (uint32_t)(data >> NET_GEN_SHIFT);
}

/* user_data carrying pointer @p (8-byte aligned) with @tag, and back. */
static inline uint64_t net_ptr_name(const void *p, unsigned tag)
{
    return (uint64_t)(uintptr_t)p | tag;
}

static inline void *net_name_ptr(uint64_t data)
{
    return (void *)(uintptr_t)(data & ~(uint64_t)NET_TAG_MASK);
}

/* user_data of control command @cmd (loop.h, NET_CTRL_*). */
#define NET_CTRL(cmd) (((uint64_t)(cmd) << 3) | NET_TAG_CTRL)

/* A completion taken out of the CQ, waiting in the backlog. */
typedef struct net_cqe {
    uint64_t data;
    int32_t res;
    uint32_t flags;
} net_cqe;

typedef struct net_ring {
    struct io_uring ring;
    unsigned setup_flags;   /* the IORING_SETUP_* flags the kernel took */
    unsigned batch_wait_us; /* a wait for several completions waits at most this long for
                             * them, then for one (net_ring_submit_and_wait); 0: off */
    net_cqe *backlog;       /* completions reaped from the CQ, to dispatch in order */
    size_t backlog_head, backlog_len, backlog_cap;
} net_ring;

/*
 * net_ring_init - set up @r with @entries SQ entries, @cq_entries CQ
 * entries (IORING_SETUP_CQSIZE, clamped) and set-up flags @flags.
 * Returns 0 or the -errno of io_uring_setup(2) (-EINVAL: a flag this
 * kernel lacks). The calling thread owns the ring (SINGLE_ISSUER).
 */
int net_ring_init(net_ring *r, unsigned entries, unsigned cq_entries, unsigned flags);

/* net_ring_exit - tear down @r (io_uring_queue_exit) and free its backlog. */
void net_ring_exit(net_ring *r);

/*
 * net_ring_set_batch_wait - let waits for several completions wait up to
 * @us microseconds for them (0: off). Returns whether this liburing and
 * this kernel can: liburing 2.8+ with the kernel's min-wait (Linux 6.12,
 * IORING_FEAT_MIN_TIMEOUT), or an older liburing with timed waits
 * (IORING_FEAT_EXT_ARG, Linux 5.11). Off when not.
 */
bool net_ring_set_batch_wait(net_ring *r, unsigned us);

/*
 * net_ring_sqe - an SQE of @r. When the SQ is full it submits first and
 * moves the CQ's completions to the backlog (never dispatched from here):
 * callable from a coroutine or from the loop. Never NULL.
 */
struct io_uring_sqe *net_ring_sqe(net_ring *r);

/* net_ring_reserve - make sure @n SQEs can be taken without a submit in
 * between (linked SQEs). */
void net_ring_reserve(net_ring *r, unsigned n);

/* net_ring_cancel - cancel the operation named @user_data
 * (IORING_OP_ASYNC_CANCEL): only a failure (-ENOENT, -EALREADY: it
 * completed first) posts a CQE, with user_data 0, which nothing reads. */
void net_ring_cancel(net_ring *r, uint64_t user_data);

/* net_ring_timeout - a timeout of @ns nanoseconds that completes with
 * @user_data (a control command); @ts must outlive it. */
void net_ring_timeout(net_ring *r, struct __kernel_timespec *ts, uint64_t ns, uint64_t user_data);

/*
 * net_ring_msg - post @data to the ring whose fd is @ring_fd
 * (IORING_OP_MSG_RING): it arrives there as a CQE with user_data @data and
 * res @res (the SQE's len). Only a failure posts a CQE here, with
 * user_data @failed (e.g. -EOVERFLOW: the target's CQ is full).
 */
void net_ring_msg(net_ring *r, int ring_fd, uint64_t data, uint32_t res, uint64_t failed);

/* net_ring_close - close(2) @fd through the ring, with nobody waiting: a
 * close that succeeds posts no CQE (IOSQE_CQE_SKIP_SUCCESS), a failing
 * one's (user_data 0) is dropped; the descriptor is gone either way. */
void net_ring_close(net_ring *r, int fd);

/* net_ring_submit - submit what the SQ holds. Returns the SQEs submitted
 * or -errno (io_uring_enter(2)). */
int net_ring_submit(net_ring *r);

/* net_ring_submit_and_peek - submit, and have the kernel post the
 * completions that are ready (with DEFER_TASKRUN they are posted only when
 * the ring is entered for them) without waiting for any: a turn that has
 * work left still takes in what came meanwhile. Returns the SQEs
 * submitted or -errno (io_uring_submit_and_get_events(3)). */
int net_ring_submit_and_peek(net_ring *r);

/*
 * net_ring_submit_and_wait - submit, and wait for @wait_nr completions at
 * most batch_wait_us (when @wait_nr > 1 and the batch wait is on), then
 * for one; with @wait_nr 1, for one. Loop thread only. Returns the SQEs
 * submitted (>= 0) or a negative errno: -ETIME (nothing completed within
 * the overall 1 s bound of a batch wait), -EINTR, -EBUSY, -EAGAIN as
 * io_uring_enter(2) says, which the caller treats as a turn with nothing
 * new.
 */
int net_ring_submit_and_wait(net_ring *r, unsigned wait_nr);

/*
 * net_ring_reap - move every CQE now in the CQ to the backlog, behind what
 * is there. Returns the CQEs moved; when the backlog cannot grow (no
 * memory) they stay in the CQ.
 */
unsigned net_ring_reap(net_ring *r);

/* net_ring_next - take the oldest completion of the backlog into *@out;
 * false when the backlog is empty (it is then reset). */
static inline bool net_ring_next(net_ring *r, net_cqe *out)
{
    if (r->backlog_head == r->backlog_len) {
        r->backlog_head = r->backlog_len = 0;
        return false;
    }
    *out = r->backlog[r->backlog_head++];
    return true;
}

/* net_ring_backlog_empty - no completion waits in the backlog. */
static inline bool net_ring_backlog_empty(const net_ring *r)
{
    return r->backlog_head == r->backlog_len;
}

/* net_ring_cq_overflows - CQEs the kernel could not post (cq.koverflow). */
static inline unsigned net_ring_cq_overflows(const net_ring *r)
{
    return *r->ring.cq.koverflow;
}

#endif
