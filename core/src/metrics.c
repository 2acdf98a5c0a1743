/*
 * The metrics registry and its text writer: families registered at start-up,
 * per-thread blocks of slots written without locks, summed when read. See
 * coring/core/metrics.h for the model and the consistency a reader gets.
 */
#include "coring/core/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_FAMILIES 256
#define MAX_COLLECTORS 16

typedef struct family {
    cr_metric_def def;
    cr_metric handle;
    uint32_t series; /* number of series: the product of the label counts */
} family;

/* Written by the main thread before serving; read-only afterwards. */
static family families[MAX_FAMILIES];
static unsigned num_families;
static uint32_t next_slot = 1; /* slot 0 means "not registered" */
static struct {
    cr_metrics_collector_fn fn;
    void *user;
} collectors[MAX_COLLECTORS];
static unsigned num_collectors;

/* Thread blocks: appended under the lock, published by num_blocks. */
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static cr_metrics_block *blocks[CR_METRICS_MAX_BLOCKS];
static char block_names[CR_METRICS_MAX_BLOCKS][16];
static bool block_worker[CR_METRICS_MAX_BLOCKS];
static _Atomic unsigned num_blocks;

_Thread_local cr_metrics_block *cr_metrics_tl;

static bool name_ok(const char *s, bool colon)
{
    if (!s || !*s)
        return false;
    for (size_t i = 0; s[i]; i++) {
        char c = s[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                     (colon && c == ':');
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

int cr_metrics_register(const cr_metric_def *def, cr_metric *out)
{
    *out = (cr_metric){0};
    if (!def || !name_ok(def->name, true) || !def->help || def->num_labels > CR_METRICS_MAX_LABELS ||
        (def->num_labels && !def->labels))
        return -EINVAL;
    uint64_t series = 1;
    for (unsigned i = 0; i < def->num_labels; i++) {
        const cr_metric_label *l = &def->labels[i];
        if (!name_ok(l->name, false) || strncmp(l->name, "__", 2) == 0 || l->count == 0 ||
            !l->values || strcmp(l->name, "le") == 0 || (def->per_thread && !strcmp(l->name, "thread")))
            return -EINVAL;
        for (unsigned k = 0; k < i; k++)
            if (strcmp(def->labels[k].name, l->name) == 0)
                return -EINVAL;
        series *= l->count;
        if (series > CR_METRICS_MAX_SLOTS)
            return -ENOSPC;
    }
    unsigned stride = 1;
    if (def->type == CR_METRIC_HISTOGRAM) {
        if (def->num_bounds == 0 || def->num_bounds > CR_METRICS_MAX_BUCKETS || !def->bounds)
            return -EINVAL;
        for (unsigned i = 1; i < def->num_bounds; i++)
            if (def->bounds[i] <= def->bounds[i - 1])
                return -EINVAL;
        stride = def->num_bounds + 2;
    } else if (def->type != CR_METRIC_COUNTER && def->type != CR_METRIC_GAUGE) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < num_families; i++)
        if (strcmp(families[i].def.name, def->name) == 0)
            return -EEXIST;
    if (num_families == MAX_FAMILIES || series * stride > CR_METRICS_MAX_SLOTS - next_slot)
        return -ENOSPC;
    family *f = &families[num_families++];
    f->def = *def;
    f->series = (uint32_t)series;
    f->handle = (cr_metric){
        .base = next_slot,
        .stride = (uint16_t)stride,
        .num_bounds = (uint16_t)(def->type == CR_METRIC_HISTOGRAM ? def->num_bounds : 0),
        .bounds = def->type == CR_METRIC_HISTOGRAM ? def->bounds : NULL,
    };
    next_slot += (uint32_t)(series * stride);
    *out = f->handle;
    return 0;
}

int cr_metrics_thread_attach(const char *thread, bool worker)
{
    if (cr_metrics_tl)
        return 0;
    cr_metrics_block *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    pthread_mutex_lock(&blocks_lock);
    unsigned n = atomic_load_explicit(&num_blocks, memory_order_relaxed);
    if (n == CR_METRICS_MAX_BLOCKS) {
        pthread_mutex_unlock(&blocks_lock);
        free(b);
        return -ENOSPC;
    }
    blocks[n] = b;
    snprintf(block_names[n], sizeof(block_names[n]), "%s", thread ? thread : "");
    block_worker[n] = worker;
    atomic_store_explicit(&num_blocks, n + 1, memory_order_release);
    pthread_mutex_unlock(&blocks_lock);
    cr_metrics_tl = b;
    return 0;
}

int cr_metrics_add_collector(cr_metrics_collector_fn fn, void *user)
{
    if (num_collectors == MAX_COLLECTORS)
        return -ENOSPC;
    collectors[num_collectors].fn = fn;
    collectors[num_collectors].user = user;
    num_collectors++;
    return 0;
}

/* --- the text writer ------------------------------------------------- */

void cr_metrics_escape_label(cr_buf *out, const char *value, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        const char *rep = value[i] == '\\' ? "\\\\" : value[i] == '"' ? "\\\"" : value[i] == '\n' ? "\\n" : NULL;
        if (!rep)
            continue;
        cr_buf_append(out, value + start, i - start);
        cr_buf_append(out, rep, 2);
        start = i + 1;
    }
    cr_buf_append(out, value + start, len - start);
}

/* HELP text: backslash and line feed escaped (not the double quote). */
static void escape_help(cr_buf *out, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            cr_buf_append(out, "\\\\", 2);
        else if (*s == '\n')
            cr_buf_append(out, "\\n", 2);
        else
            cr_buf_append(out, s, 1);
    }
}

/* A float as Go's strconv (and so Prometheus) reads it: the shortest of
 * %.15g and %.17g that reads back the same, "+Inf", "-Inf" or "NaN". */
static void append_double(cr_buf *out, double v)
{
    if (isnan(v)) {
        cr_buf_append_str(out, "NaN");
        return;
    }
    if (isinf(v)) {
        cr_buf_append_str(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char s[40];
    snprintf(s, sizeof(s), "%.15g", v);
    if (strtod(s, NULL) != v)
        snprintf(s, sizeof(s), "%.17g", v);
    cr_buf_append_str(out, s);
}

/* @v in @scale: a scale below 1 (1e-9) divides by its inverse, rounded,
 * so that 2051500000 ns reads 2.0515 and not 2.0515000000000003. */
static double scaled(double v, double scale)
{
    if (scale > 0 && scale < 1)
        return v / (double)(uint64_t)(1 / scale + 0.5);
    return v * scale;
}

/* The value of a counter (unsigned) or gauge (signed) in @f's scale. */
static void append_value(cr_buf *out, const family *f, uint64_t v)
{
    bool gauge = f->def.type == CR_METRIC_GAUGE;
    if (f->def.scale == 0 || f->def.scale == 1) {
        if (gauge && (int64_t)v < 0)
            cr_buf_appendf(out, "%lld", (long long)(int64_t)v);
        else
            cr_buf_append_u64(out, v);
        return;
    }
    append_double(out, scaled(gauge ? (double)(int64_t)v : (double)v, f->def.scale));
}

/* `{a="x",b="y"` for series @series (no closing brace), plus the thread
 * label when @thread; writes nothing when there are no labels at all and
 * @open_extra is false. Returns whether a brace was opened. */
static bool append_labels(cr_buf *out, const family *f, uint32_t series, const char *thread)
{
    if (f->def.num_labels == 0 && !thread)
        return false;
    cr_buf_append(out, "{", 1);
    uint32_t rest = series, div = f->series;
    for (unsigned i = 0; i < f->def.num_labels; i++) {
        const cr_metric_label *l = &f->def.labels[i];
        div /= l->count;
        unsigned v = rest / div;
        rest %= div;
        if (i)
            cr_buf_append(out, ",", 1);
        cr_buf_append_str(out, l->name);
        cr_buf_append(out, "=\"", 2);
        cr_metrics_escape_label(out, l->values[v], strlen(l->values[v]));
        cr_buf_append(out, "\"", 1);
    }
    if (thread) {
        if (f->def.num_labels)
            cr_buf_append(out, ",", 1);
        cr_buf_append_str(out, "thread=\"");
        cr_metrics_escape_label(out, thread, strlen(thread));
        cr_buf_append(out, "\"", 1);
    }
    return true;
}

static void append_sample(cr_buf *out, const family *f, const char *suffix, uint32_t series,
                          const char *thread, const char *le)
{
    cr_buf_append_str(out, f->def.name);
    cr_buf_append_str(out, suffix);
    bool open = append_labels(out, f, series, thread);
    if (le) {
        cr_buf_append_str(out, open ? ",le=\"" : "{le=\"");
        cr_buf_append_str(out, le);
        cr_buf_append(out, "\"", 1);
        open = true;
    }
    if (open)
        cr_buf_append(out, "}", 1);
    cr_buf_append(out, " ", 1);
}

/* Slot @offset of @f's series @series: summed over all blocks (@only < 0)
 * or read from block @only. */
static uint64_t read_slot(const family *f, uint32_t series, uint32_t offset, unsigned nblocks,
                          int only)
{
    uint32_t at = f->handle.base + series * f->handle.stride + offset;
    if (only >= 0)
        return atomic_load_explicit(&blocks[only]->slots[at], memory_order_relaxed);
    uint64_t sum = 0;
    for (unsigned b = 0; b < nblocks; b++)
        sum += atomic_load_explicit(&blocks[b]->slots[at], memory_order_relaxed);
    return sum;
}

static void write_series(cr_buf *out, const family *f, uint32_t series, unsigned nblocks, int only)
{
    const char *thread = only >= 0 ? block_names[only] : NULL;
    bool skip_zero = f->def.num_labels > 0;
    if (f->def.type != CR_METRIC_HISTOGRAM) {
        uint64_t v = read_slot(f, series, 0, nblocks, only);
        if (v == 0 && skip_zero)
            return;
        append_sample(out, f, "", series, thread, NULL);
        append_value(out, f, v);
        cr_buf_append(out, "\n", 1);
        return;
    }
    unsigned nb = f->def.num_bounds;
    uint64_t counts[CR_METRICS_MAX_BUCKETS + 1];
    uint64_t total = 0;
    for (unsigned i = 0; i <= nb; i++) {
        counts[i] = read_slot(f, series, i, nblocks, only);
        total += counts[i];
    }
    if (total == 0 && skip_zero)
        return;
    double scale = f->def.scale ? f->def.scale : 1;
    uint64_t cumulative = 0;
    for (unsigned i = 0; i <= nb; i++) {
        cumulative += counts[i];
        char le[40];
        if (i == nb) {
            snprintf(le, sizeof(le), "+Inf");
        } else {
            cr_buf tmp = CR_BUF_INIT;
            append_double(&tmp, scaled((double)f->def.bounds[i], scale));
            snprintf(le, sizeof(le), "%.*s", (int)tmp.len, tmp.data ? tmp.data : "");
            cr_buf_free(&tmp);
        }
        append_sample(out, f, "_bucket", series, thread, le);
        cr_buf_append_u64(out, cumulative);
        cr_buf_append(out, "\n", 1);
    }
    append_sample(out, f, "_sum", series, thread, NULL);
    uint64_t sum = read_slot(f, series, nb + 1, nblocks, only);
    if (f->def.scale == 0 || f->def.scale == 1)
        cr_buf_append_u64(out, sum);
    else
        append_double(out, scaled((double)sum, scale));
    cr_buf_append(out, "\n", 1);
    append_sample(out, f, "_count", series, thread, NULL);
    cr_buf_append_u64(out, total);
    cr_buf_append(out, "\n", 1);
}

int cr_metrics_write(cr_buf *out)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    unsigned nblocks = atomic_load_explicit(&num_blocks, memory_order_acquire);
    for (unsigned i = 0; i < num_families; i++) {
        const family *f = &families[i];
        cr_buf_append_str(out, "# HELP ");
        cr_buf_append_str(out, f->def.name);
        cr_buf_append(out, " ", 1);
        escape_help(out, f->def.help);
        cr_buf_append_str(out, "\n# TYPE ");
        cr_buf_append_str(out, f->def.name);
        cr_buf_append(out, " ", 1);
        cr_buf_append_str(out, type_names[f->def.type]);
        cr_buf_append(out, "\n", 1);
        for (uint32_t s = 0; s < f->series; s++) {
            if (!f->def.per_thread) {
                write_series(out, f, s, nblocks, -1);
                continue;
            }
            for (unsigned b = 0; b < nblocks; b++)
                if (block_worker[b])
                    write_series(out, f, s, nblocks, (int)b);
        }
    }
    for (unsigned i = 0; i < num_collectors; i++)
        collectors[i].fn(out, collectors[i].user);
    return out->failed ? -ENOMEM : 0;
}

/* --- process metrics ------------------------------------------------- */

static void family_header(cr_buf *out, const char *name, const char *type, const char *help)
{
    cr_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The whole of a small /proc file into @buf (NUL-terminated); its length or -1. */
static ssize_t read_small_file(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (ssize_t)n;
}

/* The boot time, seconds since the epoch: the btime line of /proc/stat
 * (after the cpu and intr lines, which can run to many KiB). 0 if unread. */
static unsigned long long boot_time(void)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long t = 0;
    bool line_start = true;
    while (fgets(line, sizeof(line), f)) {
        if (line_start && strncmp(line, "btime ", 6) == 0) {
            t = strtoull(line + 6, NULL, 10);
            break;
        }
        line_start = strchr(line, '\n') != NULL; /* a long line comes in pieces */
    }
    fclose(f);
    return t;
}

void cr_metrics_write_process(cr_buf *out, void *user)
{
    (void)user;
    long ticks = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    char stat[1024];
    /* proc(5): after the last ')' (the command may hold any byte), field 3
     * (state) onwards: utime is 14, stime 15, starttime 22, vsize 23, rss 24. */
    if (ticks > 0 && read_small_file("/proc/self/stat", stat, sizeof(stat)) > 0) {
        char *p = strrchr(stat, ')');
        unsigned long long f[25] = {0};
        int field = 3;
        if (p) {
            p += 2;
            while (field <= 24 && *p) {
                char *end;
                f[field] = strtoull(p, &end, 10);
                if (end == p) { /* state: a letter */
                    while (*p && *p != ' ')
                        p++;
                } else {
                    p = end;
                }
                while (*p == ' ')
                    p++;
                field++;
            }
        }
        if (field > 24) {
            family_header(out, "process_cpu_seconds_total", "counter",
                          "Total user and system CPU time spent in seconds.");
            cr_buf_append_str(out, "process_cpu_seconds_total ");
            append_double(out, (double)(f[14] + f[15]) / (double)ticks);
            cr_buf_append(out, "\n", 1);
            family_header(out, "process_virtual_memory_bytes", "gauge",
                          "Virtual memory size in bytes.");
            cr_buf_appendf(out, "process_virtual_memory_bytes %llu\n", f[23]);
            family_header(out, "process_resident_memory_bytes", "gauge",
                          "Resident memory size in bytes.");
            cr_buf_appendf(out, "process_resident_memory_bytes %llu\n", f[24] * (unsigned long long)page);
            unsigned long long btime = boot_time();
            if (btime) {
                double start = (double)btime + (double)f[22] / (double)ticks;
                family_header(out, "process_start_time_seconds", "gauge",
                              "Start time of the process since unix epoch in seconds.");
                cr_buf_append_str(out, "process_start_time_seconds ");
                append_double(out, start);
                cr_buf_append(out, "\n", 1);
            }
        }
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long n = 0;
        for (struct dirent *e; (e = readdir(d));)
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        family_header(out, "process_open_fds", "gauge", "Number of open file descriptors.");
        cr_buf_appendf(out, "process_open_fds %ld\n", n > 0 ? n - 1 : 0); /* less the listing's own */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        family_header(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        cr_buf_appendf(out, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
}
