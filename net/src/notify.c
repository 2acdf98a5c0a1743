/*
 * Telling the service manager how the server is: sd_notify(3) from
 * libsystemd, a datagram to $NOTIFY_SOCKET when systemd (or anything else
 * that sets it) runs coring, nothing otherwise. READY=1 once the listeners
 * are open and every worker serves (the apps' start-up checks, migrations
 * included, ran before); STOPPING=1 when a drain begins; STATUS= lines for
 * `systemctl status`; and, when the unit sets WatchdogSec= (WATCHDOG_USEC,
 * sd_watchdog_enabled(3)), WATCHDOG=1 every half interval, but only while
 * every worker's loop turns: each worker stamps a heartbeat at its tick
 * (every NET_TICK_NS, whatever the load), and the main thread sends
 * WATCHDOG=1 only when every stamp is fresh. A ring that stops turning
 * (a handler that blocks it, a kernel that never completes) then gets the
 * process restarted by systemd.
 *
 * Test hook: CORING_TEST_STALL_RING=I,AFTER_MS,FOR_MS makes worker I block
 * its ring FOR_MS milliseconds once, AFTER_MS after it started (a ring
 * that stops turning, for tests/integration/test_notify.py). Unset, it
 * costs nothing; docs/operating.md names it.
 */
#include "notify.h"
#include "rt.h"

#include "coring/core/clock.h"
#include "coring/core/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>
#include <time.h>

/* Main thread, except the stamps (each worker writes its own). */
static struct {
    uint64_t interval_ns;    /* WATCHDOG_USEC; 0: no watchdog */
    uint64_t last_sent_ns;   /* the last WATCHDOG=1 */
    _Atomic uint64_t *beats; /* each worker's last tick, monotonic ns */
    unsigned threads;
} wd;

/* The test hook's stall, read once by each worker. */
struct stall {
    int ring;
    uint64_t after_ns, for_ns;
    uint64_t start_ns;
    bool done;
};
static _Thread_local struct stall stall = {.ring = -1};

void net_notify_ready(const char *host, uint16_t port, unsigned threads)
{
    sd_notifyf(0, "READY=1\nSTATUS=serving on %s port %u, %u thread(s)", host, port, threads);
}

void net_notify_stopping(const char *why)
{
    sd_notifyf(0, "STOPPING=1\nSTATUS=draining: %s", why);
}

void net_notify_status(const char *status)
{
    sd_notifyf(0, "STATUS=%s", status);
}

int net_watchdog_setup(void)
{
    uint64_t usec = 0;
    wd.interval_ns = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    wd.beats = calloc(net_rt.threads, sizeof(*wd.beats));
    if (!wd.beats)
        return -ENOMEM;
    wd.threads = net_rt.threads;
    wd.interval_ns = usec * 1000;
    wd.last_sent_ns = 0;
    uint64_t now = cr_clock_now_ns();
    for (unsigned i = 0; i < wd.threads; i++)
        atomic_store_explicit(&wd.beats[i], now, memory_order_relaxed);
    cr_log_info("systemd watchdog: every worker's loop must turn within %.1f s",
                (double)wd.interval_ns / 2e9);
    return 0;
}

/* A worker's tick: stamp its heartbeat (and run the test hook's stall). */
static void heartbeat(net_loop *loop, void *ctx)
{
    (void)ctx;
    if (stall.ring == loop->index && !stall.done &&
        loop->now_ns - stall.start_ns >= stall.after_ns) {
        stall.done = true;
        cr_log_warn("test hook CORING_TEST_STALL_RING: blocking this ring for %llu ms",
                    (unsigned long long)(stall.for_ns / 1000000));
        struct timespec ts = {.tv_sec = (time_t)(stall.for_ns / CR_NS_PER_S),
                              .tv_nsec = (long)(stall.for_ns % CR_NS_PER_S)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    if (wd.beats)
        atomic_store_explicit(&wd.beats[loop->index], cr_clock_now_ns(), memory_order_relaxed);
}

void net_watchdog_attach(net_loop *loop)
{
    const char *hook = getenv("CORING_TEST_STALL_RING");
    unsigned long long after_ms = 0, for_ms = 0;
    int ring = -1;
    if (hook && sscanf(hook, "%d,%llu,%llu", &ring, &after_ms, &for_ms) == 3 &&
        ring == loop->index) {
        stall = (struct stall){.ring = ring,
                               .after_ns = after_ms * 1000000,
                               .for_ns = for_ms * 1000000,
                               .start_ns = cr_clock_now_ns()};
    }
    if (wd.beats || stall.ring == loop->index)
        net_loop_on_tick(loop, heartbeat, NULL);
}

void net_watchdog_kick(void)
{
    if (!wd.interval_ns)
        return;
    uint64_t now = cr_clock_now_ns();
    if (now - wd.last_sent_ns < wd.interval_ns / 2)
        return;
    /* Fresh: stamped within half the interval, and within three ticks at
     * least (a loop stamps once per NET_TICK_NS). */
    uint64_t fresh = wd.interval_ns / 2 > 3 * NET_TICK_NS ? wd.interval_ns / 2 : 3 * NET_TICK_NS;
    for (unsigned i = 0; i < wd.threads; i++) {
        uint64_t beat = atomic_load_explicit(&wd.beats[i], memory_order_relaxed);
        if (now > beat && now - beat > fresh)
            return; /* a ring stopped turning: no WATCHDOG=1 */
    }
    sd_notify(0, "WATCHDOG=1");
    wd.last_sent_ns = now;
}

void net_watchdog_free(void)
{
    free(wd.beats);
    wd.beats = NULL;
    wd.interval_ns = 0;
}
