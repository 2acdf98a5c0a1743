/*
 * perf/peers/floor/floor.c: the floor peer. The least an epoll server can
 * do for GET /: one thread per core, each with its own SO_REUSEPORT
 * listener (TCP_NODELAY set on it, inherited by accepted sockets) and its
 * own epoll set; every read(2) is answered with one fixed 200 response per
 * "\r\n\r\n" it completes (so 16 pipelined requests get 16 responses), in
 * one write(2). It parses nothing else: no request line, no headers, no
 * routing, no Date. What it costs per request is the kernel's loopback TCP
 * cost plus epoll's, the floor any epoll server stands on (perf/README.md).
 *
 *   floor PORT THREADS      listen on 127.0.0.1:PORT with THREADS threads
 *
 * Built by perf/peers/floor/peer with cc -O2; not part of coring's build.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The same body as coring's GET / ({"message":"hello world"}, 25 bytes). */
static const char response[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: 25\r\n"
                               "\r\n"
                               "{\"message\":\"hello world\"}";
#define RESPONSE_LEN (sizeof(response) - 1)
#define MAX_FDS 65536
#define MAX_BATCH 256 /* responses written by one write(2) at most */

/* Per descriptor: how much of "\r\n\r\n" the bytes read so far end with
 * (0..3), and responses owed but not yet written (a short write). */
struct conn {
    unsigned char matched;
    unsigned owed;
    unsigned sent; /* bytes of the first owed response already written */
};
static struct conn conns[MAX_FDS];
static int port;

static int listener(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 4096) < 0) {
        perror("floor: listen");
        exit(1);
    }
    return fd;
}

static void drop(int ep, int fd)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    conns[fd] = (struct conn){0};
    close(fd);
}

/* Write what @fd is owed; wait for EPOLLOUT when the socket is full. */
static void flush(int ep, int fd, char *out)
{
    struct conn *c = &conns[fd];
    while (c->owed) {
        unsigned n = c->owed < MAX_BATCH ? c->owed : MAX_BATCH;
        size_t len = n * RESPONSE_LEN - c->sent;
        memcpy(out, response + c->sent, RESPONSE_LEN - c->sent);
        for (unsigned i = 1; i < n; i++)
            memcpy(out + i * RESPONSE_LEN - c->sent, response, RESPONSE_LEN);
        ssize_t w = write(fd, out, len);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
            epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            return;
        }
        if (w < 0) {
            drop(ep, fd);
            return;
        }
        size_t done = (size_t)w + c->sent;
        c->owed -= (unsigned)(done / RESPONSE_LEN);
        c->sent = (unsigned)(done % RESPONSE_LEN);
        if ((size_t)w < len) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.fd = fd};
            epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
            return;
        }
    }
}

static void *worker(void *arg)
{
    (void)arg;
    int lfd = listener();
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static __thread char in[65536];
    static __thread char out[MAX_BATCH * RESPONSE_LEN];
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (c >= MAX_FDS) {
                        close(c);
                        continue;
                    }
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
                }
                continue;
            }
            struct conn *c = &conns[fd];
            if (events[i].events & EPOLLOUT) {
                unsigned before = c->owed;
                flush(ep, fd, out);
                if (before && conns[fd].owed == 0) {
                    struct epoll_event cev = {.events = EPOLLIN, .data.fd = fd};
                    epoll_ctl(ep, EPOLL_CTL_MOD, fd, &cev);
                }
                if (!(events[i].events & EPOLLIN))
                    continue;
            }
            ssize_t r = read(fd, in, sizeof(in));
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                drop(ep, fd);
                continue;
            }
            /* Count the "\r\n\r\n" this read completes, carrying a partial
             * match over from the last read. */
            static const char end[] = "\r\n\r\n";
            unsigned m = c->matched, ends = 0;
            for (ssize_t k = 0; k < r; k++) {
                char ch = in[k];
                if (ch == end[m]) {
                    if (++m == 4) {
                        ends++;
                        m = 0;
                    }
                } else {
                    m = ch == '\r' ? 1 : 0;
                }
            }
            c->matched = (unsigned char)m;
            if (ends) {
                bool waiting = c->owed != 0; /* already waiting for EPOLLOUT */
                c->owed += ends;
                if (!waiting)
                    flush(ep, fd, out);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (port = atoi(argv[1])) <= 0 || atoi(argv[2]) <= 0) {
        fprintf(stderr, "usage: floor PORT THREADS\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    pthread_t t;
    for (int i = 1; i < threads; i++)
        if (pthread_create(&t, NULL, worker, NULL) != 0) {
            perror("floor: pthread_create");
            return 1;
        }
    worker(NULL);
    return 0;
}
