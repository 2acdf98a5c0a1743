/* The metrics registry and its text writer (Criterion runs each test in a
 * process of its own, so each starts with an empty registry). */
#include "coring/core/metrics.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char *scrape(void)
{
    cr_buf b = CR_BUF_INIT;
    cr_assert_eq(cr_metrics_write(&b), 0);
    cr_buf_append(&b, "", 1);
    return b.data;
}

static const char *const methods[] = {"GET", "POST"};
static const char *const statuses[] = {"200", "404"};
static const cr_metric_label req_labels[] = {
    {"method", methods, 2},
    {"status", statuses, 2},
};

Test(metrics, counter_sums_threads_and_skips_zero_series)
{
    cr_metric m;
    cr_metric_def def = {.name = "http_requests_total", .help = "Requests.",
                         .type = CR_METRIC_COUNTER, .labels = req_labels, .num_labels = 2};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_inc(&m, 0 * 2 + 0); /* GET 200 */
    cr_metric_add(&m, 1 * 2 + 1, 5); /* POST 404 */
    char *text = scrape();
    cr_assert(strstr(text, "# HELP http_requests_total Requests.\n# TYPE http_requests_total counter\n"));
    cr_assert(strstr(text, "http_requests_total{method=\"GET\",status=\"200\"} 1\n"), "%s", text);
    cr_assert(strstr(text, "http_requests_total{method=\"POST\",status=\"404\"} 5\n"), "%s", text);
    cr_assert_null(strstr(text, "status=\"404\"} 0"), "zero series left out: %s", text);
    cr_assert_null(strstr(text, "method=\"GET\",status=\"404\""), "%s", text);
    free(text);
}

static cr_metric shared;

static void *hammer(void *arg)
{
    cr_assert_eq(cr_metrics_thread_attach(arg, true), 0);
    for (int i = 0; i < 100000; i++)
        cr_metric_inc(&shared, 0);
    return NULL;
}

Test(metrics, each_thread_writes_its_own_block_and_nothing_is_lost)
{
    cr_metric_def def = {.name = "work_total", .help = "Work.", .type = CR_METRIC_COUNTER};
    cr_assert_eq(cr_metrics_register(&def, &shared), 0);
    pthread_t t[4];
    char names[4][4];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof(names[i]), "%d", i);
        pthread_create(&t[i], NULL, hammer, names[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    char *text = scrape();
    cr_assert(strstr(text, "\nwork_total 400000\n"), "%s", text);
    free(text);
}

Test(metrics, a_thread_without_a_block_writes_nothing_and_unlabelled_zero_is_written)
{
    cr_metric m;
    cr_metric_def def = {.name = "idle_total", .help = "Nothing.", .type = CR_METRIC_COUNTER};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_metric_inc(&m, 0); /* no block on this thread: dropped */
    cr_metric unregistered = {0};
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_inc(&unregistered, 0); /* a family that failed to register: dropped */
    char *text = scrape();
    cr_assert(strstr(text, "\nidle_total 0\n"), "%s", text);
    free(text);
}

Test(metrics, gauge_is_signed_and_summed)
{
    cr_metric m;
    cr_metric_def def = {.name = "open_things", .help = "Open.", .type = CR_METRIC_GAUGE};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_add(&m, 0, (uint64_t)-3);
    char *text = scrape();
    cr_assert(strstr(text, "\nopen_things -3\n"), "%s", text);
    free(text);
    cr_metric_add(&m, 0, 5);
    text = scrape();
    cr_assert(strstr(text, "\nopen_things 2\n"), "%s", text);
    free(text);
}

Test(metrics, histogram_buckets_are_cumulative_in_base_units)
{
    static const uint64_t bounds[] = {1000000, 10000000, 100000000}; /* 1, 10, 100 ms in ns */
    cr_metric m;
    cr_metric_def def = {.name = "op_duration_seconds", .help = "Time.", .type = CR_METRIC_HISTOGRAM,
                         .bounds = bounds, .num_bounds = 3, .scale = 1e-9};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_observe(&m, 0, 500000);     /* 0.5 ms */
    cr_metric_observe(&m, 0, 1000000);    /* 1 ms: le is inclusive */
    cr_metric_observe(&m, 0, 50000000);   /* 50 ms */
    cr_metric_observe(&m, 0, 2000000000); /* 2 s: +Inf */
    char *text = scrape();
    cr_assert(strstr(text, "op_duration_seconds_bucket{le=\"0.001\"} 2\n"), "%s", text);
    cr_assert(strstr(text, "op_duration_seconds_bucket{le=\"0.01\"} 2\n"), "%s", text);
    cr_assert(strstr(text, "op_duration_seconds_bucket{le=\"0.1\"} 3\n"), "%s", text);
    cr_assert(strstr(text, "op_duration_seconds_bucket{le=\"+Inf\"} 4\n"), "%s", text);
    cr_assert(strstr(text, "op_duration_seconds_sum 2.0515\n"), "%s", text);
    cr_assert(strstr(text, "op_duration_seconds_count 4\n"), "%s", text);
    free(text);
}

Test(metrics, histogram_with_labels_puts_le_last)
{
    static const uint64_t bounds[] = {1, 4};
    static const char *const routes[] = {"/a", "/b"};
    static const cr_metric_label labels[] = {{"route", routes, 2}};
    cr_metric m;
    cr_metric_def def = {.name = "batch_size", .help = "Texts.", .type = CR_METRIC_HISTOGRAM,
                         .labels = labels, .num_labels = 1, .bounds = bounds, .num_bounds = 2};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_observe(&m, 1, 3);
    char *text = scrape();
    cr_assert(strstr(text, "batch_size_bucket{route=\"/b\",le=\"1\"} 0\n"), "%s", text);
    cr_assert(strstr(text, "batch_size_bucket{route=\"/b\",le=\"4\"} 1\n"), "%s", text);
    cr_assert(strstr(text, "batch_size_sum{route=\"/b\"} 3\n"), "%s", text);
    cr_assert_null(strstr(text, "route=\"/a\""), "%s", text);
    free(text);
}

static void *inference_thread(void *arg)
{
    cr_metric *m = arg;
    cr_assert_eq(cr_metrics_thread_attach("embed0", false), 0);
    cr_metric_add(m, 0, 7);
    return NULL;
}

Test(metrics, per_thread_family_has_a_thread_label_for_workers_only)
{
    cr_metric per, sum;
    cr_metric_def d1 = {.name = "ring_sqes_submitted_total", .help = "SQEs.",
                        .type = CR_METRIC_COUNTER, .per_thread = true};
    cr_metric_def d2 = {.name = "texts_total", .help = "Texts.", .type = CR_METRIC_COUNTER};
    cr_assert_eq(cr_metrics_register(&d1, &per), 0);
    cr_assert_eq(cr_metrics_register(&d2, &sum), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_add(&per, 0, 3);
    cr_metric_add(&sum, 0, 1);
    pthread_t t;
    pthread_create(&t, NULL, inference_thread, &sum);
    pthread_join(t, NULL);
    char *text = scrape();
    cr_assert(strstr(text, "ring_sqes_submitted_total{thread=\"0\"} 3\n"), "%s", text);
    cr_assert_null(strstr(text, "thread=\"embed0\""), "%s", text);
    cr_assert(strstr(text, "\ntexts_total 8\n"), "%s", text);
    free(text);
}

Test(metrics, label_values_and_help_are_escaped)
{
    static const char *const odd[] = {"a\"b\\c\nd"};
    static const cr_metric_label labels[] = {{"route", odd, 1}};
    cr_metric m;
    cr_metric_def def = {.name = "odd_total", .help = "Back\\slash and\nnewline.",
                         .type = CR_METRIC_COUNTER, .labels = labels, .num_labels = 1};
    cr_assert_eq(cr_metrics_register(&def, &m), 0);
    cr_assert_eq(cr_metrics_thread_attach("0", true), 0);
    cr_metric_inc(&m, 0);
    char *text = scrape();
    cr_assert(strstr(text, "# HELP odd_total Back\\\\slash and\\nnewline.\n"), "%s", text);
    cr_assert(strstr(text, "odd_total{route=\"a\\\"b\\\\c\\nd\"} 1\n"), "%s", text);
    free(text);
}

Test(metrics, register_refuses_bad_definitions)
{
    static const uint64_t down[] = {5, 2};
    static const char *const v[] = {"x"};
    static const cr_metric_label reserved[] = {{"__name", v, 1}};
    static const cr_metric_label le[] = {{"le", v, 1}};
    static const cr_metric_label twice[] = {{"a", v, 1}, {"a", v, 1}};
    cr_metric m;
    cr_metric_def ok = {.name = "ok_total", .help = "x", .type = CR_METRIC_COUNTER};
    cr_assert_eq(cr_metrics_register(&ok, &m), 0);
    cr_assert_eq(cr_metrics_register(&ok, &m), -EEXIST);
    cr_assert_eq(m.base, 0, "a failed registration leaves a handle that writes nothing");
    cr_metric_def bad = ok;
    bad.name = "1abc";
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
    bad.name = "has-dash";
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
    bad = (cr_metric_def){.name = "h", .help = "x", .type = CR_METRIC_HISTOGRAM, .bounds = down, .num_bounds = 2};
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
    bad = (cr_metric_def){.name = "r", .help = "x", .labels = reserved, .num_labels = 1};
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
    bad.labels = le;
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
    bad.labels = twice;
    bad.num_labels = 2;
    cr_assert_eq(cr_metrics_register(&bad, &m), -EINVAL);
}

Test(metrics, register_refuses_past_the_slots)
{
    static const char *v[256];
    for (int i = 0; i < 256; i++)
        v[i] = "x";
    static const cr_metric_label big[] = {{"a", v, 256}, {"b", v, 256}};
    cr_metric m;
    cr_metric_def def = {.name = "huge_total", .help = "x", .type = CR_METRIC_COUNTER,
                         .labels = big, .num_labels = 2};
    cr_assert_eq(cr_metrics_register(&def, &m), -ENOSPC);
}

Test(metrics, process_collector_writes_the_client_library_families)
{
    cr_assert_eq(cr_metrics_add_collector(cr_metrics_write_process, NULL), 0);
    char *text = scrape();
    const char *names[] = {"# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total ",
                           "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ",
                           "\nprocess_start_time_seconds ", "\nprocess_max_fds "};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cr_assert(strstr(text, names[i]), "%s missing in:\n%s", names[i], text);
    double start = 0;
    const char *p = strstr(text, "\nprocess_start_time_seconds ");
    sscanf(p, "\nprocess_start_time_seconds %lf", &start);
    cr_assert(start > 1.6e9 && start < 4e9, "start time %f", start);
    unsigned long long rss = 0;
    sscanf(strstr(text, "\nprocess_resident_memory_bytes "), "\nprocess_resident_memory_bytes %llu", &rss);
    cr_assert(rss > 100000, "rss %llu", rss);
    free(text);
}
