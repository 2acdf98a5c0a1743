/*
 * Provided-buffer ring bookkeeping against a real io_uring: buffers are
 * handed out once each, the ring runs dry with -ENOBUFS, and a recycled
 * buffer is handed out again.
 */
#include "net/src/buf_ring.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct io_uring ring;
static int sv[2];

static void setup(void)
{
    cr_assert_eq(io_uring_queue_init(16, &ring, 0), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
}

static void teardown(void)
{
    close(sv[0]);
    close(sv[1]);
    io_uring_queue_exit(&ring);
}

/* One recv with IOSQE_BUFFER_SELECT; returns res, sets *flags. */
static int recv_selected(net_buf_ring *r, uint32_t *flags)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    io_uring_prep_recv(sqe, sv[1], NULL, r->buf_size, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = r->bgid;
    cr_assert_eq(io_uring_submit(&ring), 1);
    struct io_uring_cqe *cqe;
    cr_assert_eq(io_uring_wait_cqe(&ring, &cqe), 0);
    int res = cqe->res;
    *flags = cqe->flags;
    io_uring_cqe_seen(&ring, cqe);
    return res;
}

TestSuite(buf_ring, .init = setup, .fini = teardown);

Test(buf_ring, rejects_bad_sizes)
{
    net_buf_ring r;
    cr_expect_eq(net_buf_ring_setup(&ring, &r, 3, 64, 0), -EINVAL);
    cr_expect_eq(net_buf_ring_setup(&ring, &r, 0, 64, 0), -EINVAL);
    cr_expect_eq(net_buf_ring_setup(&ring, &r, 4, 0, 0), -EINVAL);
    cr_expect_eq(net_buf_ring_setup(&ring, &r, 65536, 64, 0), -EINVAL);
}

Test(buf_ring, hands_out_each_buffer_once_then_runs_dry_then_recycles)
{
    net_buf_ring r;
    cr_assert_eq(net_buf_ring_setup(&ring, &r, 4, 64, 7), 0);
    bool seen[4] = {false};
    for (int i = 0; i < 4; i++) {
        char msg[16];
        int n = snprintf(msg, sizeof(msg), "message %d", i);
        cr_assert_eq(write(sv[0], msg, (size_t)n), n);
        uint32_t flags;
        int res = recv_selected(&r, &flags);
        cr_assert_eq(res, n, "recv %d returned %d", i, res);
        cr_assert(flags & IORING_CQE_F_BUFFER, "no buffer selected");
        uint16_t bid = (uint16_t)(flags >> IORING_CQE_BUFFER_SHIFT);
        cr_assert_lt(bid, 4);
        cr_assert_not(seen[bid], "buffer %u handed out twice", bid);
        seen[bid] = true;
        net_buf_ring_taken(&r, bid);
        cr_assert_eq(memcmp(net_buf_ring_buffer(&r, bid), msg, (size_t)n), 0);
    }
    cr_expect_eq(r.outstanding, 4);

    /* All four are out: the next recv finds the ring empty. */
    cr_assert_eq(write(sv[0], "x", 1), 1);
    uint32_t flags;
    cr_expect_eq(recv_selected(&r, &flags), -ENOBUFS);

    /* Give buffer 2 back: it is the one the kernel picks next. */
    net_buf_ring_recycle(&r, 2);
    cr_expect_eq(r.outstanding, 3);
    int res = recv_selected(&r, &flags);
    cr_assert_eq(res, 1);
    cr_assert(flags & IORING_CQE_F_BUFFER);
    cr_expect_eq(flags >> IORING_CQE_BUFFER_SHIFT, 2u);
    cr_expect_eq(net_buf_ring_buffer(&r, 2)[0], 'x');
    net_buf_ring_free(&ring, &r);
    cr_expect_null(r.br);
}

Test(buf_ring, buffers_do_not_overlap)
{
    net_buf_ring r;
    cr_assert_eq(net_buf_ring_setup(&ring, &r, 8, 100, 1), 0);
    for (uint16_t i = 0; i + 1 < 8; i++)
        cr_expect_eq(net_buf_ring_buffer(&r, i + 1) - net_buf_ring_buffer(&r, i), 100);
    net_buf_ring_free(&ring, &r);
}
