/*
 * The outbound client (libcurl on the ring) against a small HTTP server
 * running on the same runtime: a coroutine fetches while the other
 * coroutines of the process serve, all over loopback.
 */
#include "coring/core/clock.h"
#include "coring/http/client.h"
#include "coring/net/io.h"
#include "coring/net/runtime.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../net/runtime_util.h"

static atomic_int port;
static atomic_int accepted;

/* The test server: GET /ok, /slow (2 s), /big (100 KiB), /fail (500). */
static void serve(int fd, void *user)
{
    (void)user;
    atomic_fetch_add(&accepted, 1);
    char req[4096];
    size_t len = 0;
    for (;;) {
        net_task_set_idle(len == 0); /* between requests: shutdown may end it */
        ssize_t n = net_recv(fd, req + len, sizeof(req) - 1 - len, 5 * CR_NS_PER_S);
        net_task_set_idle(false);
        if (n <= 0)
            break;
        len += (size_t)n;
        req[len] = '\0';
        char *end = strstr(req, "\r\n\r\n");
        if (!end)
            continue;
        char head[256];
        static char big[100 * 1024];
        const char *body = "hello";
        size_t body_len = 5;
        int status = 200;
        if (strncmp(req, "GET /slow", 9) == 0) {
            net_sleep(2 * CR_NS_PER_S);
        } else if (strncmp(req, "GET /big", 8) == 0) {
            memset(big, 'x', sizeof(big));
            body = big;
            body_len = sizeof(big);
        } else if (strncmp(req, "GET /fail", 9) == 0) {
            status = 500;
            body = "no";
            body_len = 2;
        }
        int h = snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n\r\n", status,
                         body_len);
        if (net_send_all(fd, head, (size_t)h, CR_NS_PER_S) < 0 ||
            net_send_all(fd, body, body_len, CR_NS_PER_S) < 0)
            break;
        size_t used = (size_t)(end + 4 - req);
        memmove(req, req + used, len - used);
        len -= used;
    }
    net_close(fd);
}

static void on_listening(const char *host, uint16_t p, unsigned threads, void *user)
{
    (void)host, (void)threads, (void)user;
    atomic_store(&port, p);
}

static struct {
    int ok_err;
    long ok_status;
    char ok_body[16];
    int fail_err;
    long fail_status;
    int slow_err;
    uint64_t slow_ns;
    int big_err;
    int refused_err;
    int concurrent_ok;
} r;

static void url(char *out, size_t n, int p, const char *path)
{
    snprintf(out, n, "http://127.0.0.1:%d%s", p, path);
}

static void one_of_many(void *arg)
{
    (void)arg;
    char u[64];
    url(u, sizeof(u), atomic_load(&port), "/ok");
    http_fetch_result res;
    if (http_fetch(u, NULL, &res) == 0 && res.status == 200 && res.body.len == 5)
        r.concurrent_ok++;
    cr_buf_free(&res.body);
}

static void scenario(void *arg)
{
    (void)arg;
    while (atomic_load(&port) == 0)
        net_sleep(10 * CR_NS_PER_MS);
    int p = atomic_load(&port);
    char u[64];
    http_fetch_result res;

    url(u, sizeof(u), p, "/ok");
    r.ok_err = http_fetch(u, NULL, &res);
    r.ok_status = res.status;
    snprintf(r.ok_body, sizeof(r.ok_body), "%.*s", (int)res.body.len, res.body.data);
    cr_buf_free(&res.body);

    url(u, sizeof(u), p, "/fail");
    r.fail_err = http_fetch(u, NULL, &res);
    r.fail_status = res.status;
    cr_buf_free(&res.body);

    url(u, sizeof(u), p, "/slow");
    http_fetch_options quick = {.total_timeout_ns = 300 * CR_NS_PER_MS};
    uint64_t t0 = cr_clock_now_ns();
    r.slow_err = http_fetch(u, &quick, &res);
    r.slow_ns = cr_clock_now_ns() - t0;
    cr_buf_free(&res.body);

    url(u, sizeof(u), p, "/big");
    r.big_err = http_fetch(u, NULL, &res);
    cr_buf_free(&res.body);

    /* A port nobody listens on. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    bind(s, (struct sockaddr *)&a, sizeof(a));
    getsockname(s, (struct sockaddr *)&a, &alen);
    close(s);
    url(u, sizeof(u), ntohs(a.sin_port), "/ok");
    r.refused_err = http_fetch(u, NULL, &res);
    cr_buf_free(&res.body);

    for (int i = 0; i < 20; i++)
        net_spawn(one_of_many, NULL);
    while (r.concurrent_ok < 20 && cr_clock_now_ns() - t0 < 5 * CR_NS_PER_S)
        net_sleep(10 * CR_NS_PER_MS);
    kill(getpid(), SIGTERM);
}

static int thread_init(void *user)
{
    (void)user;
    if (net_thread_index() == 0)
        net_spawn(scenario, NULL);
    return 0;
}

Test(client, fetch_errors_timeouts_and_concurrency, .timeout = 30)
{
    cr_assert_eq(http_client_global_init(), 0);
    net_config cfg = net_config_default();
    cfg.threads = 2;
    cfg.host = "127.0.0.1";
    cfg.port = 0;
    cfg.provided_buffers = 16;
    net_hooks hooks = {.thread_init = thread_init, .on_connection = serve, .on_listening = on_listening};
    cr_assert_eq(net_run(&cfg, &hooks), 0);

    cr_expect_eq(r.ok_err, 0);
    cr_expect_eq(r.ok_status, 200);
    cr_expect_str_eq(r.ok_body, "hello");
    cr_expect_eq(r.fail_err, 0, "a 500 is a response, not an error");
    cr_expect_eq(r.fail_status, 500);
    cr_expect_eq(r.slow_err, -ETIMEDOUT);
    cr_expect_geq(r.slow_ns, 250 * CR_NS_PER_MS);
    cr_expect_lt(r.slow_ns, 1500 * CR_NS_PER_MS, "timeout took %llu ms",
                 (unsigned long long)(r.slow_ns / CR_NS_PER_MS));
    cr_expect_eq(r.big_err, -EMSGSIZE);
    cr_expect_eq(r.refused_err, -ECONNREFUSED);
    cr_expect_eq(r.concurrent_ok, 20);
    cr_expect_lt(atomic_load(&accepted), 2 + 20 + 5, "connections were not reused");
}

/*
 * A fetch whose upstream never answers (a listener that accepts nothing:
 * the kernel completes the handshake, nobody reads) ends at the drain's
 * deadline, cancelled, instead of holding the drain until curl's own
 * timeout: the server exits 0 in time.
 */
static int silent_fd = -1;

static struct {
    int err;
    atomic_bool returned;
} stuck = {.err = 1};

static void stuck_fetch(void *arg)
{
    (void)arg;
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    getsockname(silent_fd, (struct sockaddr *)&a, &alen);
    char u[64];
    url(u, sizeof(u), ntohs(a.sin_port), "/never");
    http_fetch_options patient = {.total_timeout_ns = 60 * CR_NS_PER_S};
    http_fetch_result res;
    stuck.err = http_fetch(u, &patient, &res);
    atomic_store(&stuck.returned, true);
    cr_buf_free(&res.body);
}

static int thread_init_stuck(void *user)
{
    (void)user;
    net_spawn(stuck_fetch, NULL);
    net_spawn(sigterm_soon, NULL);
    return 0;
}

Test(client, a_fetch_that_never_answers_ends_at_the_drain_deadline, .timeout = 30)
{
    cr_assert_eq(http_client_global_init(), 0);
    silent_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(silent_fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(silent_fd, 16), 0);
    net_config cfg = test_config(1, 300 * CR_NS_PER_MS);
    net_hooks hooks = {.thread_init = thread_init_stuck, .on_connection = serve};
    uint64_t t0 = cr_clock_now_ns();
    cr_assert_eq(net_run(&cfg, &hooks), 0);
    uint64_t took = cr_clock_now_ns() - t0;
    close(silent_fd);
    cr_expect(atomic_load(&stuck.returned), "the fetch never returned");
    cr_expect_eq(stuck.err, -ECANCELED, "http_fetch returned %d", stuck.err);
    cr_expect_lt(took, 3 * CR_NS_PER_S, "shutdown took %llu ms",
                 (unsigned long long)(took / CR_NS_PER_MS));
}
