/*
 * Provided-buffer ring set-up and recycling. See buf_ring.h.
 */
#include "buf_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if __has_include(<liburing/io_uring_version.h>)
#include <liburing/io_uring_version.h>
#endif
#if defined(IO_URING_VERSION_MAJOR) &&                                                             \
    (IO_URING_VERSION_MAJOR > 2 || (IO_URING_VERSION_MAJOR == 2 && IO_URING_VERSION_MINOR >= 4))
#define HAVE_SETUP_BUF_RING 1
#endif

int net_buf_ring_setup(struct io_uring *ring, net_buf_ring *r, unsigned entries, unsigned buf_size,
                       uint16_t bgid)
{
    memset(r, 0, sizeof(*r));
    if (entries == 0 || entries > 32768 || (entries & (entries - 1)) || buf_size == 0)
        return -EINVAL;
    size_t data_bytes = (size_t)entries * buf_size;
    char *base = mmap(NULL, data_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return -ENOMEM;

#ifdef HAVE_SETUP_BUF_RING
    int err = 0;
    struct io_uring_buf_ring *br = io_uring_setup_buf_ring(ring, entries, bgid, 0, &err);
    if (!br) {
        munmap(base, data_bytes);
        return err ? err : -ENOMEM;
    }
#else
    /* What io_uring_setup_buf_ring() does in liburing 2.4+: a page-aligned
     * array of io_uring_buf, registered by address. */
    size_t ring_bytes = (size_t)entries * sizeof(struct io_uring_buf);
    struct io_uring_buf_ring *br =
        mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (br == MAP_FAILED) {
        munmap(base, data_bytes);
        return -ENOMEM;
    }
    struct io_uring_buf_reg reg = {
        .ring_addr = (unsigned long)br,
        .ring_entries = entries,
        .bgid = bgid,
    };
    int ret = io_uring_register_buf_ring(ring, &reg, 0);
    if (ret < 0) {
        munmap(br, ring_bytes);
        munmap(base, data_bytes);
        return ret;
    }
    io_uring_buf_ring_init(br);
#endif

    r->br = br;
    r->base = base;
    r->entries = entries;
    r->buf_size = buf_size;
    r->bgid = bgid;
    int mask = io_uring_buf_ring_mask(entries);
    for (unsigned i = 0; i < entries; i++)
        io_uring_buf_ring_add(br, base + (size_t)i * buf_size, buf_size, (unsigned short)i, mask,
                              (int)i);
    io_uring_buf_ring_advance(br, (int)entries);
    return 0;
}

void net_buf_ring_free(struct io_uring *ring, net_buf_ring *r)
{
    if (!r->br)
        return;
#ifdef HAVE_SETUP_BUF_RING
    io_uring_free_buf_ring(ring, r->br, r->entries, r->bgid);
#else
    io_uring_unregister_buf_ring(ring, r->bgid);
    munmap(r->br, (size_t)r->entries * sizeof(struct io_uring_buf));
#endif
    munmap(r->base, (size_t)r->entries * r->buf_size);
    memset(r, 0, sizeof(*r));
}

void net_buf_ring_recycle(net_buf_ring *r, uint16_t bid)
{
    io_uring_buf_ring_add(r->br, net_buf_ring_buffer(r, bid), r->buf_size, bid,
                          io_uring_buf_ring_mask(r->entries), 0);
    io_uring_buf_ring_advance(r->br, 1);
    if (r->outstanding)
        r->outstanding--;
}
