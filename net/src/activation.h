/*
 * Internal to net/: listeners that outlive a process, passed by systemd
 * (socket activation) or handed over by a predecessor (--take-over). Not a
 * public header.
 */
#ifndef CORING_NET_ACTIVATION_H
#define CORING_NET_ACTIVATION_H

#include <stdint.h>
#include <sys/socket.h>

/*
 * Fill net_rt.listen_fds (and net_rt.listeners) with inherited listeners
 * for --host/--port (@ss, its port net_rt.cfg.port; 0 matches any port):
 * with net_config.take_over those the predecessor hands over (all must
 * match), otherwise the first socket systemd passed that matches
 * (sd_listen_fds_with_names(3); the rest are closed). The port served in
 * *@port_out. Main thread, before the workers start.
 * Returns 1 when listeners were inherited, 0 when there are none to
 * inherit (bind as usual), or -errno (logged): a failed take-over
 * (handover.h's errors), -EADDRNOTAVAIL for a predecessor on another port.
 */
int net_listeners_inherit(const struct sockaddr_storage *ss, uint16_t *port_out);

#endif
