/*
 * Hand-over: a running coring passes its listening sockets to a successor,
 * so that a new binary or configuration takes the port without a moment
 * where connections are refused. The old process serves a UNIX socket
 * (--handover-socket PATH, SOCK_SEQPACKET, mode 0600); a successor started
 * with --take-over connects to it and receives the listeners as SCM_RIGHTS
 * (unix(7)), as HAProxy's `expose-fd listeners` does. Both processes then
 * accept on the same sockets. Once the successor serves (its apps started,
 * its workers accepting) it says READY; only then does the old process stop
 * accepting, drain and exit 0. A successor that dies before READY changes
 * nothing: the old process goes on serving. The successor then serves PATH
 * itself, for its own successor.
 *
 * The protocol, one message each (SOCK_SEQPACKET keeps their boundaries):
 *   old -> new  "coring-handover 1 K"   K listening sockets follow
 *   old -> new  "F" + up to 200 descriptors (SCM_RIGHTS), until K came
 *   new -> old  "READY"
 * docs/operating.md ("Restarting and upgrading") says why this rather than
 * nginx's descriptors inherited across execve.
 */
#include "handover.h"
#include "rt.h"

#include "coring/core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define HANDOVER_MAGIC "coring-handover 1"
#define FDS_PER_MESSAGE 200 /* below the kernel's SCM_MAX_FD, 253 */

/* Main thread only. */
static struct {
    int listen_fd;     /* PATH served for a successor, or -1 */
    int peer_fd;       /* the successor connected (old side), or the predecessor (new side) */
    int *kept;         /* copies of the distinct listeners, to hand over */
    unsigned num_kept; /* their count: net_rt.listeners */
    bool handed_over;  /* a successor said READY: PATH is its own now */
} ho = {.listen_fd = -1, .peer_fd = -1};

static int path_address(struct sockaddr_un *sun)
{
    const char *path = net_rt.cfg.handover_socket;
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sun->sun_path)) {
        cr_log_error("--handover-socket %s: longer than %zu bytes", path,
                     sizeof(sun->sun_path) - 1);
        return -ENAMETOOLONG;
    }
    strcpy(sun->sun_path, path);
    return 0;
}

/* A connected SOCK_SEQPACKET socket to PATH, or -errno. */
static int connect_path(void)
{
    struct sockaddr_un sun;
    int ret = path_address(&sun);
    if (ret < 0)
        return ret;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        ret = -errno;
        close(fd);
        return ret;
    }
    return fd;
}

/* Serve PATH (replacing a stale socket file there) for a successor. */
static int listen_path(void)
{
    struct sockaddr_un sun;
    int ret = path_address(&sun);
    if (ret < 0)
        return ret;
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    unlink(sun.sun_path);
    mode_t old = umask(0177); /* 0600: whoever may take the port over is this user */
    ret = bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || listen(fd, 4) < 0 ? -errno : 0;
    umask(old);
    if (ret < 0) {
        close(fd);
        cr_log_error("--handover-socket %s: %s", sun.sun_path, cr_strerror(ret));
        return ret;
    }
    ho.listen_fd = fd;
    return 0;
}

int net_handover_receive(int **fds_out, unsigned *n_out)
{
    const char *path = net_rt.cfg.handover_socket;
    int fd = connect_path();
    if (fd < 0) {
        cr_log_error("--take-over: no coring serves %s: %s", path, cr_strerror(fd));
        return fd;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char head[64];
    ssize_t len = recv(fd, head, sizeof(head) - 1, 0);
    unsigned n = 0;
    if (len <= 0) {
        int err = len < 0 ? -errno : -EBUSY;
        cr_log_error("--take-over: %s: %s", path,
                     len == 0 ? "closed at once: another take-over is under way"
                              : cr_strerror(err));
        close(fd);
        return err;
    }
    head[len] = '\0';
    if (sscanf(head, HANDOVER_MAGIC " %u", &n) != 1 || n == 0 || n > 65536) {
        cr_log_error("--take-over: %s: not a coring hand-over socket", path);
        close(fd);
        return -EPROTO;
    }
    int *fds = calloc(n, sizeof(int));
    if (!fds) {
        close(fd);
        return -ENOMEM;
    }
    unsigned got = 0;
    while (got < n) {
        char byte;
        union {
            char buf[CMSG_SPACE(FDS_PER_MESSAGE * sizeof(int))];
            struct cmsghdr align;
        } control;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf)};
        if (recvmsg(fd, &msg, MSG_CMSG_CLOEXEC) <= 0 || (msg.msg_flags & MSG_CTRUNC))
            break;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            for (unsigned i = 0; i < k; i++) {
                int one;
                memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (got < n)
                    fds[got++] = one;
                else
                    close(one);
            }
        }
    }
    if (got < n) {
        cr_log_error("--take-over: %s: %u of %u listening sockets came", path, got, n);
        for (unsigned i = 0; i < got; i++)
            close(fds[i]);
        free(fds);
        close(fd);
        return -EPROTO;
    }
    ho.peer_fd = fd;
    *fds_out = fds;
    *n_out = n;
    return 0;
}

int net_handover_open(void)
{
    if (!net_rt.cfg.handover_socket)
        return 0;
    ho.kept = calloc(net_rt.listeners, sizeof(int));
    if (!ho.kept)
        return -ENOMEM;
    for (unsigned i = 0; i < net_rt.listeners; i++) {
        ho.kept[i] = fcntl(net_rt.listen_fds[i], F_DUPFD_CLOEXEC, 3);
        if (ho.kept[i] < 0) {
            int err = -errno;
            net_handover_close();
            return err;
        }
        ho.num_kept = i + 1;
    }
    if (net_rt.cfg.take_over)
        return 0; /* PATH is the predecessor's until this process serves */
    /* An accidental second instance on another port must not take PATH
     * from the one serving it. */
    int fd = connect_path();
    if (fd >= 0) {
        close(fd);
        cr_log_error("--handover-socket %s: another coring serves it (use --take-over to "
                     "replace it)",
                     net_rt.cfg.handover_socket);
        net_handover_close();
        return -EADDRINUSE;
    }
    int ret = listen_path();
    if (ret < 0)
        net_handover_close();
    return ret;
}

void net_handover_ready(void)
{
    if (ho.peer_fd < 0)
        return;
    if (send(ho.peer_fd, "READY", 5, MSG_NOSIGNAL) != 5)
        cr_log_warn("--take-over: telling the predecessor: %s: it goes on serving beside this "
                    "process",
                    cr_strerror(-errno));
    close(ho.peer_fd);
    ho.peer_fd = -1;
    if (listen_path() == 0)
        cr_log_info("serving %s for a successor (--take-over)", net_rt.cfg.handover_socket);
}

/* Send the kept listeners to the successor on ho.peer_fd. */
static int send_listeners(void)
{
    char head[64];
    int len = snprintf(head, sizeof(head), HANDOVER_MAGIC " %u", ho.num_kept);
    if (send(ho.peer_fd, head, (size_t)len, MSG_NOSIGNAL) != len)
        return -errno;
    for (unsigned at = 0; at < ho.num_kept; at += FDS_PER_MESSAGE) {
        unsigned k = ho.num_kept - at < FDS_PER_MESSAGE ? ho.num_kept - at : FDS_PER_MESSAGE;
        union {
            char buf[CMSG_SPACE(FDS_PER_MESSAGE * sizeof(int))];
            struct cmsghdr align;
        } control;
        memset(&control, 0, sizeof(control));
        struct iovec iov = {.iov_base = "F", .iov_len = 1};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = control.buf,
                             .msg_controllen = CMSG_SPACE(k * sizeof(int))};
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(k * sizeof(int));
        memcpy(CMSG_DATA(c), ho.kept + at, k * sizeof(int));
        if (sendmsg(ho.peer_fd, &msg, MSG_NOSIGNAL) != 1)
            return -errno;
    }
    return 0;
}

int net_handover_pollfds(struct pollfd *pfd)
{
    int n = 0;
    if (ho.listen_fd >= 0)
        pfd[n++] = (struct pollfd){.fd = ho.listen_fd, .events = POLLIN};
    if (ho.peer_fd >= 0)
        pfd[n++] = (struct pollfd){.fd = ho.peer_fd, .events = POLLIN};
    return n;
}

bool net_handover_event(const struct pollfd *pfd, int n)
{
    bool ready = false;
    for (int i = 0; i < n; i++) {
        if (!pfd[i].revents)
            continue;
        if (pfd[i].fd == ho.listen_fd) {
            int fd = accept4(ho.listen_fd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                continue;
            if (ho.peer_fd >= 0) {
                close(fd); /* one take-over at a time: it reads EOF */
                continue;
            }
            ho.peer_fd = fd;
            int err = send_listeners();
            if (err < 0) {
                cr_log_warn("hand-over: sending the listeners: %s", cr_strerror(err));
                close(ho.peer_fd);
                ho.peer_fd = -1;
            } else {
                cr_log_info("hand-over: listeners sent to a successor; serving until it is "
                            "ready");
            }
        } else if (pfd[i].fd == ho.peer_fd) {
            char buf[16];
            ssize_t len = recv(ho.peer_fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (len < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (len == 5 && memcmp(buf, "READY", 5) == 0) {
                ready = ho.handed_over = true;
            } else {
                cr_log_warn("hand-over: the successor went away before it was ready: "
                            "serving on");
            }
            close(ho.peer_fd);
            ho.peer_fd = -1;
        }
    }
    return ready;
}

void net_handover_close(void)
{
    if (ho.listen_fd >= 0) {
        close(ho.listen_fd);
        if (!ho.handed_over) /* else a successor serves PATH now */
            unlink(net_rt.cfg.handover_socket);
    }
    if (ho.peer_fd >= 0)
        close(ho.peer_fd);
    ho.listen_fd = ho.peer_fd = -1;
    for (unsigned i = 0; i < ho.num_kept; i++)
        close(ho.kept[i]);
    free(ho.kept);
    ho.kept = NULL;
    ho.num_kept = 0;
}
