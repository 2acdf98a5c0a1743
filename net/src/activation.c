/*
 * Listeners that outlive a process: the listening sockets systemd passes
 * (socket activation, sd_listen_fds(3): LISTEN_FDS, LISTEN_PID,
 * LISTEN_FDNAMES, from fd 3 on) or that a predecessor hands over
 * (--take-over, handover.c). Either way coring serves an open socket
 * instead of binding one, so that connections queue in its accept queue
 * while no process accepts, rather than being refused, during a restart.
 *
 * One socket serves every worker: each worker's ring arms its own multishot
 * accept on a dup of it (the kernel wakes one accept per connection:
 * io_uring's accept waits exclusively). docs/operating.md ("Restarting and
 * upgrading") has the measurement behind serving one shared socket rather
 * than asking systemd for per-thread ReusePort= sockets.
 */
#include "handover.h"
#include "listener.h"
#include "rt.h"

#include "coring/core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* Is @ss the wildcard address (0.0.0.0 or ::)? */
static bool wildcard(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

/*
 * Is @fd a listening TCP socket that serves what --host/--port (@ss, @port)
 * ask for? The family, type, listening state and port (any port for port
 * 0) by sd_is_socket_inet(3); for a wildcard --host any address (systemd's
 * `ListenStream=8080` is a dual-stack [::] socket that serves IPv4 too),
 * otherwise the same address.
 */
static bool listener_matches(int fd, const struct sockaddr_storage *ss, uint16_t port)
{
    if (sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, port) <= 0)
        return false;
    if (wildcard(ss))
        return true;
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &len) < 0 || bound.ss_family != ss->ss_family)
        return false;
    if (ss->ss_family == AF_INET)
        return ((struct sockaddr_in *)&bound)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)ss)->sin_addr.s_addr;
    return memcmp(&((struct sockaddr_in6 *)&bound)->sin6_addr,
                  &((const struct sockaddr_in6 *)ss)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

/* The port listening socket @fd is bound to (0 when unknown). */
static uint16_t bound_port(int fd)
{
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    if (getsockname(fd, (struct sockaddr *)&bound, &len) < 0)
        return 0;
    return ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in *)&bound)->sin_port
                                            : ((struct sockaddr_in6 *)&bound)->sin6_port);
}

/*
 * Serve the @n listening sockets @fds (owned from now on) on the workers:
 * worker i takes fds[i] while there are as many, a dup of fds[i % n]
 * otherwise. Sockets beyond the thread count (a predecessor that ran more
 * threads) are closed: their accept queues move to the port's other
 * SO_REUSEPORT listeners only with net.ipv4.tcp_migrate_req=1
 * (docs/operating.md). Returns 0 or -errno (from fcntl(2); what was
 * placed in net_rt.listen_fds is net_run's to close).
 */
static int adopt(int *fds, unsigned n, uint16_t *port_out)
{
    unsigned used = n < net_rt.threads ? n : net_rt.threads;
    int err = 0;
    for (unsigned i = 0; i < net_rt.threads && !err; i++) {
        net_rt.listen_fds[i] = i < used ? fds[i] : fcntl(fds[i % used], F_DUPFD_CLOEXEC, 3);
        if (net_rt.listen_fds[i] < 0)
            err = -errno; /* net_run closes the others */
    }
    if (n > used)
        cr_log_warn("%u listening sockets for %u threads: closing %u (connections queued on "
                    "them are reset unless net.ipv4.tcp_migrate_req=1)",
                    n, net_rt.threads, n - used);
    for (unsigned j = used; j < n; j++)
        close(fds[j]);
    if (err)
        return err;
    /* Accepted sockets inherit TCP_NODELAY from the listener, as from the
     * ones coring binds (net_bind_listeners); systemd's NoDelay= may be off. */
    int one = 1;
    for (unsigned i = 0; i < used; i++)
        setsockopt(net_rt.listen_fds[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    net_rt.listeners = used;
    *port_out = bound_port(net_rt.listen_fds[0]);
    return 0;
}

/* Take the listeners the predecessor hands over (--take-over): all must
 * serve --host/--port. */
static int take_over(const struct sockaddr_storage *ss, uint16_t port, uint16_t *port_out)
{
    int *fds = NULL;
    unsigned n = 0;
    int ret = net_handover_receive(&fds, &n);
    if (ret < 0)
        return ret;
    for (unsigned i = 0; i < n; i++)
        if (!listener_matches(fds[i], ss, port)) {
            cr_log_error("--take-over: the predecessor listens on port %u, not on %s port %u",
                         bound_port(fds[i]), net_rt.cfg.host, port);
            for (unsigned j = 0; j < n; j++)
                close(fds[j]);
            free(fds);
            return -EADDRNOTAVAIL;
        }
    ret = adopt(fds, n, port_out);
    free(fds);
    if (ret == 0)
        cr_log_info("took over %u listening socket(s) on port %u from the predecessor", n,
                    *port_out);
    return ret < 0 ? ret : 1;
}

/*
 * Socket activation: the sockets systemd passed (sd_listen_fds_with_names,
 * which also unsets LISTEN_* so that nothing this process starts sees
 * them). The first that serves --host/--port is taken; the others are
 * closed, with a warning naming them.
 */
static int activated(const struct sockaddr_storage *ss, uint16_t port, uint16_t *port_out)
{
    char **names = NULL;
    int n = sd_listen_fds_with_names(1, &names);
    if (n <= 0) {
        if (n < 0)
            cr_log_warn("LISTEN_FDS: %s: binding instead", cr_strerror(n));
        return 0;
    }
    int taken = -1;
    for (int i = 0; i < n; i++) {
        int fd = SD_LISTEN_FDS_START + i;
        const char *name = names && names[i] ? names[i] : "unknown";
        if (taken < 0 && listener_matches(fd, ss, port)) {
            taken = fd;
            cr_log_info("serving the listening socket systemd passed (fd %d, %s)", fd, name);
        } else {
            cr_log_warn("socket activation: fd %d (%s) is not a TCP listener for %s port %u: "
                        "closing it",
                        fd, name, net_rt.cfg.host, port);
            close(fd);
        }
    }
    for (int i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
    if (taken < 0) {
        cr_log_info("socket activation: none of the %d socket(s) serves %s port %u: binding", n,
                    net_rt.cfg.host, port);
        return 0;
    }
    int ret = adopt(&taken, 1, port_out);
    return ret < 0 ? ret : 1;
}

int net_listeners_inherit(const struct sockaddr_storage *ss, uint16_t *port_out)
{
    uint16_t port = net_rt.cfg.port;
    if (net_rt.cfg.take_over)
        return take_over(ss, port, port_out);
    return activated(ss, port, port_out);
}
