/*
 * Idle connections (net_connection_idle): a connection between requests
 * holds no coroutine. on_connection returns, the connection's receive stays
 * armed, and the next bytes run on_connection again in a new coroutine
 * with the same state; EOF, the idle timeout and the drain close an idle
 * connection with no coroutine at all, through net_hooks.on_idle_close.
 * A client thread talks to the server over loopback.
 */
#include "coring/core/clock.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static atomic_int port;
static atomic_int runs;        /* on_connection calls */
static atomic_int running;     /* on_connection calls not returned */
static atomic_int idle_closed; /* on_idle_close calls */
static atomic_int task_closed; /* connections closed by on_connection */

/* What a connection keeps while idle: which it is, how often it ran. */
typedef struct conn_state {
    int id;
    int runs;
} conn_state;

static void on_listening(const char *host, uint16_t p, unsigned threads, void *user)
{
    (void)host, (void)threads, (void)user;
    atomic_store(&port, p);
}

/* Answers each "ping" with "pong<runs>" and goes idle when nothing is
 * queued: connection 3 with a 300 ms idle timeout, the others 10 s. */
static void serve(int fd, void *user)
{
    (void)user;
    static int connections;
    atomic_fetch_add(&runs, 1);
    atomic_fetch_add(&running, 1);
    conn_state *st = net_connection_state();
    if (!st) {
        st = calloc(1, sizeof(*st));
        st->id = ++connections;
    }
    st->runs++;
    for (;;) {
        uint64_t timeout = (st->id == 3 ? 300 : 10000) * CR_NS_PER_MS;
        if (net_connection_idle(st, timeout) == 0) {
            atomic_fetch_sub(&running, 1);
            return;
        }
        net_rbuf rb = {0};
        ssize_t n = net_recv_provided(fd, &rb, timeout);
        if (n <= 0)
            break;
        net_rbuf_release(&rb);
        char out[16];
        int len = snprintf(out, sizeof(out), "pong%d", st->runs);
        if (net_send_all(fd, out, (size_t)len, CR_NS_PER_S) < 0)
            break;
    }
    net_close(fd);
    free(st);
    atomic_fetch_add(&task_closed, 1);
    atomic_fetch_sub(&running, 1);
}

static void closed(void *state, void *user)
{
    (void)user;
    free(state);
    atomic_fetch_add(&idle_closed, 1);
}

static int dial(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atomic_load(&port))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(s);
        return -1;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return s;
}

/* What the client saw, checked by the test once net_run returned. */
static struct {
    int idle_after_accept; /* on_connection calls running once 3 were accepted */
    int runs_after_accept;
    char first[16], second[16]; /* answers on connection 1 */
    int idle_after_answers;
    int runs_after_eof;         /* on_connection calls after connection 2 closed */
    int idle_closed_after_eof;
    int idle_closed_after_timeout;
    ssize_t c_read;             /* connection 3 after its idle timeout: EOF (0) */
    int failed;
} seen = {.c_read = -2};

static void wait_until(atomic_int *v, int want)
{
    uint64_t t0 = cr_clock_now_ns();
    while (atomic_load(v) < want && cr_clock_now_ns() - t0 < 3 * CR_NS_PER_S)
        usleep(2000);
}

static ssize_t ping(int s, char *answer, size_t size)
{
    if (write(s, "ping", 4) != 4)
        return -1;
    ssize_t n = read(s, answer, size - 1);
    answer[n > 0 ? n : 0] = '\0';
    return n;
}

static void *client(void *arg)
{
    (void)arg;
    uint64_t t0 = cr_clock_now_ns();
    while (atomic_load(&port) == 0 && cr_clock_now_ns() - t0 < 5 * CR_NS_PER_S)
        usleep(1000);
    int a = dial(), b = dial(), c = dial();
    if (a < 0 || b < 0 || c < 0) {
        seen.failed = 1;
        goto out;
    }
    wait_until(&runs, 3);
    usleep(50 * 1000);
    seen.runs_after_accept = atomic_load(&runs);
    seen.idle_after_accept = atomic_load(&running);

    /* Connection 1 runs again for each request, with its state. */
    ping(a, seen.first, sizeof(seen.first));
    usleep(50 * 1000);
    ping(a, seen.second, sizeof(seen.second));
    usleep(50 * 1000);
    seen.idle_after_answers = atomic_load(&running);

    /* Connection 2 closes while idle: closed with no run. */
    int before = atomic_load(&runs);
    close(b);
    wait_until(&idle_closed, 1);
    usleep(50 * 1000);
    seen.runs_after_eof = atomic_load(&runs) - before;
    seen.idle_closed_after_eof = atomic_load(&idle_closed);

    /* Connection 3's idle timeout (300 ms) closes it, with no run. */
    char buf[8];
    seen.c_read = read(c, buf, sizeof(buf));
    usleep(50 * 1000);
    seen.idle_closed_after_timeout = atomic_load(&idle_closed);
    close(c);

out:
    /* The drain closes connection 1, idle. */
    kill(getpid(), SIGTERM);
    if (a >= 0) {
        while (read(a, buf, sizeof(buf)) > 0) {
        }
        close(a);
    }
    return NULL;
}

Test(conn_idle, a_connection_between_requests_holds_no_coroutine, .timeout = 30)
{
    net_config cfg = net_config_default();
    cfg.threads = 1;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 16;
    net_hooks hooks = {.on_connection = serve, .on_idle_close = closed, .on_listening = on_listening};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, client, NULL), 0);
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    pthread_join(th, NULL);

    cr_assert_eq(seen.failed, 0, "could not connect");
    cr_expect_eq(seen.runs_after_accept, 3, "one run per accepted connection");
    cr_expect_eq(seen.idle_after_accept, 0, "accepted connections left idle: no run goes on");
    cr_expect_str_eq(seen.first, "pong2", "the state is the connection's, run after run");
    cr_expect_str_eq(seen.second, "pong3");
    cr_expect_eq(seen.idle_after_answers, 0, "answered, idle again: no run goes on");
    cr_expect_eq(seen.runs_after_eof, 0, "a peer's close while idle runs nothing");
    cr_expect_eq(seen.idle_closed_after_eof, 1, "and closes the connection (on_idle_close)");
    cr_expect_eq(seen.c_read, 0, "the idle timeout closed connection 3");
    cr_expect_eq(seen.idle_closed_after_timeout, 2);
    cr_expect_eq(atomic_load(&idle_closed), 3, "the drain closed connection 1, idle");
    cr_expect_eq(atomic_load(&task_closed), 0, "no connection was closed by a run");
    cr_expect_eq(atomic_load(&running), 0);
}
