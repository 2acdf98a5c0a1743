/*
 * Internal to net/ (not a public header: it pulls in <liburing.h>, which
 * no user of coring_net needs). Provided-buffer rings
 * (IORING_REGISTER_PBUF_RING, kernel 5.19+).
 *
 * A ring of fixed-size buffers registered with io_uring under a buffer
 * group id. A recv SQE with IOSQE_BUFFER_SELECT lets the kernel pick a
 * buffer only when data arrives; the CQE names it (IORING_CQE_F_BUFFER,
 * buffer id in cqe->flags >> IORING_CQE_BUFFER_SHIFT) and the application
 * hands it back with net_buf_ring_recycle() once done with the bytes.
 *
 * liburing 2.3 (Debian 12) lacks io_uring_setup_buf_ring(); this file does
 * the mmap and registration itself there, and uses liburing's helper when a
 * newer liburing provides it. See io_uring_register_buf_ring(3).
 */
#ifndef CORING_NET_BUF_RING_H
#define CORING_NET_BUF_RING_H

#include <liburing.h>
#include <stdint.h>

typedef struct net_buf_ring {
    struct io_uring_buf_ring *br; /* the shared ring of buffer descriptors */
    char *base;                   /* entries * buf_size bytes of buffers */
    unsigned entries;             /* power of two, <= 32768 */
    unsigned buf_size;            /* bytes per buffer */
    uint16_t bgid;                /* buffer group id */
    unsigned outstanding;         /* buffers handed out by the kernel, not yet recycled */
} net_buf_ring;

/*
 * net_buf_ring_setup - allocate @entries buffers of @buf_size bytes, register
 * them with @ring as group @bgid and hand them all to the kernel.
 * Returns 0, -EINVAL (entries not a power of two or over 32768, buf_size 0),
 * -ENOMEM, or the registration's -errno (-EINVAL on kernels before 5.19).
 * Thread owning @ring only.
 */
int net_buf_ring_setup(struct io_uring *ring, net_buf_ring *r, unsigned entries, unsigned buf_size,
                       uint16_t bgid);

/* net_buf_ring_free - unregister and unmap. Safe on a zeroed struct. */
void net_buf_ring_free(struct io_uring *ring, net_buf_ring *r);

/* net_buf_ring_buffer - the memory of buffer @bid (bid < entries). */
static inline char *net_buf_ring_buffer(const net_buf_ring *r, uint16_t bid)
{
    return r->base + (size_t)bid * r->buf_size;
}

/*
 * net_buf_ring_taken - note that the kernel handed out buffer @bid (call for
 * each CQE carrying IORING_CQE_F_BUFFER). Bookkeeping only.
 */
static inline void net_buf_ring_taken(net_buf_ring *r, uint16_t bid)
{
    (void)bid;
    r->outstanding++;
}

/* net_buf_ring_recycle - give buffer @bid back to the kernel. */
void net_buf_ring_recycle(net_buf_ring *r, uint16_t bid);

#endif
