/*
 * Accepted connections end to end on the runtime, without HTTP: the
 * socket options they inherit from the listener, and the connection's
 * armed (multishot) receive into provided buffers: what arrives while the
 * task is busy elsewhere is queued and handed out in order, EOF after it.
 * Pausing it after NET_RECV_PAUSE unread CQEs loses nothing.
 * A client thread talks to the server over loopback.
 */
#include "coring/core/clock.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_int port;

static struct {
    int nodelay;       /* TCP_NODELAY of the accepted socket */
    int pieces;        /* receives that returned data, after the first */
    char got[64];      /* what they returned, concatenated */
    size_t got_len;
    ssize_t last;      /* the receive after the client's shutdown(SHUT_WR) */
    int all_provided;  /* every piece came in a provided buffer */
    int shutdown_res;  /* net_shutdown(SHUT_WR) at the end */
} r = {.nodelay = -1, .all_provided = 1, .shutdown_res = 1};

static void on_listening(const char *host, uint16_t p, unsigned threads, void *user)
{
    (void)host, (void)threads, (void)user;
    atomic_store(&port, p);
}

static void serve(int fd, void *user)
{
    (void)user;
    int v = 0;
    socklen_t vl = sizeof(v);
    if (getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl) == 0)
        r.nodelay = v;
    net_rbuf rb = {0};
    /* The first receive: "go", which tells the client to send three
     * pieces while this task sleeps (busy elsewhere). */
    ssize_t n = net_recv_provided(fd, &rb, 5 * CR_NS_PER_S);
    if (n <= 0)
        goto out;
    /* Kept: on a busy machine "go" and "one," may arrive as one piece. */
    if ((size_t)n < sizeof(r.got)) {
        memcpy(r.got, rb.data, (size_t)n);
        r.got_len = (size_t)n;
    }
    net_rbuf_release(&rb);
    net_sleep(400 * CR_NS_PER_MS);
    for (int i = 0; i < 10; i++) {
        n = net_recv_provided(fd, &rb, 5 * CR_NS_PER_S);
        if (n <= 0)
            break;
        if (!rb.provided)
            r.all_provided = 0;
        if (r.got_len + (size_t)n < sizeof(r.got)) {
            memcpy(r.got + r.got_len, rb.data, (size_t)n);
            r.got_len += (size_t)n;
        }
        net_rbuf_release(&rb);
        r.pieces++;
    }
    r.last = n;
    r.shutdown_res = net_shutdown(fd, SHUT_WR); /* the client reads EOF */
out:
    net_close(fd);
    kill(getpid(), SIGTERM);
}

static void *client(void *arg)
{
    (void)arg;
    uint64_t t0 = cr_clock_now_ns();
    while (atomic_load(&port) == 0 && cr_clock_now_ns() - t0 < 5 * CR_NS_PER_S)
        usleep(1000);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atomic_load(&port))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0)
        return NULL;
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (write(s, "go", 2) != 2)
        return NULL;
    usleep(20 * 1000);
    const char *pieces[] = {"one,", "two,", "three,", "four,", "five,", "six"};
    for (int i = 0; i < 6; i++) {
        if (write(s, pieces[i], strlen(pieces[i])) < 0)
            break;
        usleep(40 * 1000);
    }
    shutdown(s, SHUT_WR);
    char buf[16];
    while (read(s, buf, sizeof(buf)) > 0) {
    }
    close(s);
    return NULL;
}

static void run_server(void)
{
    net_config cfg = net_config_default();
    cfg.threads = 1;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 16;
    net_hooks hooks = {.on_connection = serve, .on_listening = on_listening};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, client, NULL), 0);
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    pthread_join(th, NULL);
}

static void expect_pieces(void)
{
    r.got[r.got_len] = '\0';
    cr_expect_str_eq(r.got, "goone,two,three,four,five,six");
    cr_expect(r.all_provided);
    /* Six writes 40 ms apart arrive while the task sleeps: the armed
     * receive queued one completion each until 4 waited unread (then it
     * was cancelled, and re-armed once they were read: the rest came in
     * one). A single-shot receive issued after the sleep returns all of
     * them at once. */
    printf("pieces received after the sleep: %d\n", r.pieces);
    cr_expect_geq(r.pieces, 4, "queued receives: %d", r.pieces);
    cr_expect_leq(r.pieces, 6, "queued receives: %d", r.pieces);
    cr_expect_eq(r.last, 0, "EOF after the queued data");
}

Test(conn_recv, inherited_nodelay_queued_pieces_in_order_then_eof, .timeout = 30)
{
    run_server();
    cr_expect_eq(r.nodelay, 1, "an accepted socket inherits TCP_NODELAY from its listener");
    expect_pieces();
    cr_expect_eq(r.shutdown_res, 0);
}
