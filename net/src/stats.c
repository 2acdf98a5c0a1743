/*
 * The runtime's per-thread metrics: one series per worker thread (label
 * thread="0"...), see net/src/stats.h for where each is counted and
 * docs/metrics.md for their meaning.
 */
#include "stats.h"

#include "coring/core/log.h"

#include <errno.h>

net_stats net_stat;

int net_stats_register(void)
{
    static const struct {
        const char *name, *help;
        cr_metric_type type;
        cr_metric *out;
    } defs[] = {
        {"coring_ring_sqes_submitted_total", "SQEs submitted to the worker's io_uring.",
         CR_METRIC_COUNTER, &net_stat.sqes_submitted},
        {"coring_ring_submits_total",
         "io_uring_submit calls (each at most one io_uring_enter; none when nothing is queued): SQEs per submit = sqes_submitted / submits.",
         CR_METRIC_COUNTER, &net_stat.submits},
        {"coring_ring_cqes_reaped_total", "CQEs reaped from the worker's io_uring.",
         CR_METRIC_COUNTER, &net_stat.cqes_reaped},
        {"coring_ring_cq_overflows_total", "CQEs the kernel dropped on a full CQ (cq.koverflow).",
         CR_METRIC_COUNTER, &net_stat.cq_overflows},
        {"coring_provided_buffers_exhausted_total",
         "Receives that found every provided buffer in use and fell back to the connection's own memory.",
         CR_METRIC_COUNTER, &net_stat.buffers_exhausted},
        {"coring_messages_sent_total", "Cross-core messages (IORING_OP_MSG_RING) posted.",
         CR_METRIC_COUNTER, &net_stat.messages_sent},
        {"coring_messages_retried_total", "Cross-core messages re-posted after the target's CQ was full.",
         CR_METRIC_COUNTER, &net_stat.messages_retried},
        {"coring_messages_stale_total",
         "Cross-core message deliveries dropped as stale (a second delivery, or one after its use ended); should stay 0.",
         CR_METRIC_COUNTER, &net_stat.messages_stale},
        {"coring_coroutines_alive", "Coroutines (connections and services) alive, sampled every 100 ms.",
         CR_METRIC_GAUGE, &net_stat.coroutines},
        {"coring_stack_pool_stacks", "Free coroutine stacks cached in the pool, sampled every 100 ms.",
         CR_METRIC_GAUGE, &net_stat.stacks_cached},
        {"coring_connections_idle",
         "Connections idle between requests, holding no coroutine, sampled every 100 ms.",
         CR_METRIC_GAUGE, &net_stat.connections_idle},
        {"coring_loop_turns_cut_total",
         "Loop turns that reached a bound (completions, coroutines resumed, connections started) and left the rest for the next turn.",
         CR_METRIC_COUNTER, &net_stat.turns_cut},
    };
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        cr_metric_def d = {.name = defs[i].name, .help = defs[i].help, .type = defs[i].type,
                           .per_thread = true};
        int err = cr_metrics_register(&d, defs[i].out);
        if (err < 0 && err != -EEXIST) {
            cr_log_error("metric %s: %s", defs[i].name, cr_strerror(err));
            return err;
        }
    }
    return 0;
}
