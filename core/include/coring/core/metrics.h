/*
 * Metrics: counters, gauges and histograms with labels, kept per thread and
 * summed when they are read, written out in the Prometheus text exposition
 * format 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/).
 *
 * Model. A family (one metric name, one HELP, one TYPE) is registered once,
 * on the main thread before serving, with the names of its labels and, for
 * each label, the fixed list of values it may take: a series is one
 * combination of them, so a family's cardinality is known and bounded when
 * it is registered (no request can add a series). Each series of each family
 * owns a few 64-bit slots at fixed offsets; every thread that writes metrics
 * has its own block of slots (cr_metrics_thread_attach).
 *
 * Writing (the hot path) touches only the calling thread's block: a relaxed
 * atomic load and a relaxed atomic store of the thread's own slot, no lock,
 * no lock-prefixed instruction (one writer per slot, so no increment is
 * lost), and clean under ThreadSanitizer. A thread with no block (the main
 * thread) writes nothing.
 *
 * Reading (cr_metrics_write) loads every block's slots with relaxed loads
 * and sums them (or, for per-thread families, writes one series per thread
 * with a `thread` label). Consistency: each slot is read whole (no torn
 * 64-bit values), but a scrape is not a snapshot: it may see thread A's
 * counter after an increment and thread B's before one made earlier, and a
 * histogram's _count may lag or lead its buckets by the observations made
 * while it was read. Counters only grow on each thread, so their sums are
 * monotonic from one scrape to the next.
 *
 * Names follow Prometheus' naming guide (https://prometheus.io/docs/practices/naming/):
 * base units (seconds, bytes), `_total` on counters; the registry checks
 * the characters of names, not the words.
 */
#ifndef CORING_CORE_METRICS_H
#define CORING_CORE_METRICS_H

#include "coring/core/buffer.h"
#include "coring/core/error.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most labels per family, most values per label, most bucket bounds. */
#define CR_METRICS_MAX_LABELS 4
#define CR_METRICS_MAX_BUCKETS 24
/* Slots per thread block, all families together (8 bytes each; calloc'd,
 * so the pages of families no thread writes cost no memory). */
#define CR_METRICS_MAX_SLOTS 65536u
/* Thread blocks at most (worker and inference threads together). */
#define CR_METRICS_MAX_BLOCKS 4096u

typedef enum cr_metric_type {
    CR_METRIC_COUNTER,   /* only grows; one slot per series */
    CR_METRIC_GAUGE,     /* signed, goes up and down; summed over threads */
    CR_METRIC_HISTOGRAM, /* fixed buckets: a slot per bucket, +Inf, then the sum */
} cr_metric_type;

/* One label: its name and the values it may take. */
typedef struct cr_metric_label {
    const char *name;            /* [a-zA-Z_][a-zA-Z0-9_]*, not starting "__" */
    const char *const *values;   /* @count strings, any bytes (escaped on output) */
    unsigned count;              /* at least 1 */
} cr_metric_label;

typedef struct cr_metric_def {
    const char *name;            /* [a-zA-Z_:][a-zA-Z0-9_:]* */
    const char *help;            /* one line (backslash and newline escaped on output) */
    cr_metric_type type;
    const cr_metric_label *labels; /* @num_labels of them; copied pointers, must outlive the registry */
    unsigned num_labels;
    /* Per-thread family: written out as one series per worker thread, with
     * a `thread` label added last, instead of summed. */
    bool per_thread;
    /* Histograms: upper bounds, strictly increasing, in the unit the values
     * are observed in (e.g. nanoseconds). */
    const uint64_t *bounds;
    unsigned num_bounds;
    /* The factor that turns the stored unit into the base unit written out:
     * 1e-9 for nanoseconds written as seconds (a histogram's bounds and
     * sum, or a counter); 0 means 1 (integers written as they are). */
    double scale;
} cr_metric_def;

/* A registered family: where its series' slots start. 0 means "not
 * registered" (every write to it is dropped). */
typedef struct cr_metric {
    uint32_t base;        /* first slot, 0 when the family is not registered */
    uint16_t stride;      /* slots per series */
    uint16_t num_bounds;  /* histograms */
    const uint64_t *bounds;
} cr_metric;

/* The calling thread's block of slots, or NULL. */
typedef struct cr_metrics_block {
    _Atomic uint64_t slots[CR_METRICS_MAX_SLOTS];
} cr_metrics_block;

extern _Thread_local cr_metrics_block *cr_metrics_tl;

/*
 * cr_metrics_register - add the family @def and store its handle in @out.
 * Main thread, before any thread that reads or writes it runs (registering
 * while threads write is safe for them, but a scrape running at the same
 * time may miss the family). @def's strings and arrays are kept, not copied.
 * Returns 0; -EINVAL for a bad name, label or bounds; -EEXIST for a name
 * already registered; -ENOSPC when the slots or families run out. On error
 * @out is zeroed: writes to it do nothing.
 */
int cr_metrics_register(const cr_metric_def *def, cr_metric *out);

/*
 * cr_metrics_thread_attach - give the calling thread a block of its own,
 * named @thread (copied, e.g. "0" for worker 0; shown as the `thread`
 * label of per-thread families when @worker). Threads that are not ring
 * workers (inference threads) pass @worker false: their values join the
 * sums, and per-thread families leave them out. Call once per thread,
 * before it writes; the block lives until the process exits (its values
 * stay in the sums after the thread ends, as counters must). Takes a
 * process-wide lock: not for the request path. Returns 0, -ENOMEM, or
 * -ENOSPC past CR_METRICS_MAX_BLOCKS. Calling it again on a thread that has
 * a block returns 0 and keeps the block.
 */
int cr_metrics_thread_attach(const char *thread, bool worker);

/* Collector: appends text for families computed at read time (process
 * metrics, build info) to @out, each with its HELP and TYPE lines. */
typedef void (*cr_metrics_collector_fn)(cr_buf *out, void *user);

/*
 * cr_metrics_add_collector - call @fn(@out, @user) at each cr_metrics_write,
 * after the registered families. Main thread, before serving. Returns 0 or
 * -ENOSPC (more than 16 collectors).
 */
int cr_metrics_add_collector(cr_metrics_collector_fn fn, void *user);

/*
 * cr_metrics_write - append every family in the text format 0.0.4 to @out:
 * for each, `# HELP`, `# TYPE` and its series; counters and histograms whose
 * series are all zero are written without those series (a family that
 * nothing has counted yet shows only its HELP and TYPE), except families
 * without labels, always written. Then the collectors' text. Any thread;
 * reads every block with relaxed loads (see the consistency note above).
 * Returns 0 or -ENOMEM (out->failed).
 */
int cr_metrics_write(cr_buf *out);

/*
 * cr_metrics_write_process - the process_* families of the Prometheus client
 * libraries, from /proc/self (proc(5)): process_cpu_seconds_total (utime +
 * stime of /proc/self/stat), process_resident_memory_bytes (rss pages),
 * process_virtual_memory_bytes, process_open_fds (entries of /proc/self/fd),
 * process_max_fds (RLIMIT_NOFILE) and process_start_time_seconds (starttime
 * of stat over the boot time of /proc/stat). A collector: add it with
 * cr_metrics_add_collector(cr_metrics_write_process, NULL). A value that
 * cannot be read is left out.
 */
void cr_metrics_write_process(cr_buf *out, void *user);

/*
 * cr_metrics_escape_label - append @len bytes of @value escaped as a label
 * value: backslash, double quote and line feed as \\, \" and \n. Any thread.
 */
void cr_metrics_escape_label(cr_buf *out, const char *value, size_t len);

/* Slot @offset of @m's first series in the calling thread's block, or NULL when it has none or the
 * family is not registered. */
static inline _Atomic uint64_t *cr_metric_slot_(const cr_metric *m, uint32_t offset)
{
    cr_metrics_block *b = cr_metrics_tl;
    if (cr_unlikely(!b || !m->base))
        return NULL;
    return &b->slots[m->base + offset];
}

/* One writer per slot: load and store, no read-modify-write instruction. */
static inline void cr_metric_slot_add_(_Atomic uint64_t *s, uint64_t v)
{
    atomic_store_explicit(s, atomic_load_explicit(s, memory_order_relaxed) + v,
                          memory_order_relaxed);
}

/*
 * cr_metric_add - add @v to series @series of counter or gauge @m on the
 * calling thread (for a gauge, @v may be a negative number cast to uint64_t:
 * the slots wrap and the sum is read as signed). @series: the flat index of
 * the label values, first label slowest (cr_metric_series). Owner thread
 * only; a series index out of range is the caller's bug (not checked).
 */
static inline void cr_metric_add(const cr_metric *m, uint32_t series, uint64_t v)
{
    _Atomic uint64_t *s = cr_metric_slot_(m, series * m->stride);
    if (s)
        cr_metric_slot_add_(s, v);
}

/* cr_metric_inc - cr_metric_add(@m, @series, 1). */
static inline void cr_metric_inc(const cr_metric *m, uint32_t series)
{
    cr_metric_add(m, series, 1);
}

/*
 * cr_metric_set - set the calling thread's value of series @series of @m to
 * @v (a gauge the thread owns, or a counter whose running total the thread
 * reads from elsewhere, e.g. the kernel's CQ overflow count). Owner thread.
 */
static inline void cr_metric_set(const cr_metric *m, uint32_t series, uint64_t v)
{
    _Atomic uint64_t *s = cr_metric_slot_(m, series * m->stride);
    if (s)
        atomic_store_explicit(s, v, memory_order_relaxed);
}

/*
 * cr_metric_observe - count @v (in the unit of the family's bounds) in
 * series @series of histogram @m: its bucket (the first bound >= v, else
 * +Inf) and the sum; _count is written as the buckets' total, so that it
 * always equals the +Inf bucket. Owner thread.
 */
static inline void cr_metric_observe(const cr_metric *m, uint32_t series, uint64_t v)
{
    _Atomic uint64_t *s = cr_metric_slot_(m, series * m->stride);
    if (!s)
        return;
    unsigned i = 0;
    while (i < m->num_bounds && v > m->bounds[i])
        i++;
    cr_metric_slot_add_(&s[i], 1);
    cr_metric_slot_add_(&s[m->num_bounds + 1], v);
}

#endif
