/*
 * The HTTP layer's metrics: requests by route pattern, method and status,
 * their duration, request and response bytes, connections, and the bytes
 * the request parser read. Registered once
 * from http_serve (the router is complete then), written by each worker
 * thread into its own block (coring/core/metrics.h). A request that matched
 * no route is labelled route="unmatched", so that a scanner trying paths
 * adds no series.
 */
#include "internal.h"

#include "coring/core/log.h"
#include "coring/core/metrics.h"

#include <stdlib.h>
#include <string.h>

/* Statuses with a series of their own; any other is status="other". */
static const int status_codes[] = {200, 201, 202, 204, 301, 302, 304, 400, 401, 403,
                                   404, 405, 408, 409, 411, 413, 414, 415, 417, 422,
                                   429, 431, 500, 501, 502, 503, 504, 505, 507};
#define NUM_STATUSES (sizeof(status_codes) / sizeof(status_codes[0]))
static const char *const status_values[NUM_STATUSES + 1] = {
    "200", "201", "202", "204", "301", "302", "304", "400", "401", "403",
    "404", "405", "408", "409", "411", "413", "414", "415", "417", "422",
    "429", "431", "500", "501", "502", "503", "504", "505", "507", "other"};
/* status -> index into status_values, for 100..599; filled at registration. */
static unsigned char status_index[600];

/* Label values of the method label, in http_method order. */
static const char *const method_values[] = {"OTHER", "GET", "HEAD", "POST", "PUT",
                                            "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"};
#define NUM_METHODS (sizeof(method_values) / sizeof(method_values[0]))

/* Request durations, ns: 50 us to 10 s. */
static const uint64_t duration_bounds[] = {
    50000,    100000,    250000,    500000,     1000000,    2500000,    5000000,
    10000000, 25000000,  50000000,  100000000,  250000000,  500000000,  1000000000,
    2500000000, 5000000000, 10000000000};

static const char **route_values; /* the distinct patterns, then "unmatched" */
static unsigned num_routes;       /* distinct patterns, without "unmatched" */
/* A router route (one per method and pattern, http_route_match.route) to
 * its pattern's index in route_values: GET and POST /todos are one route
 * label value, so that a series labelled by route alone is not repeated. */
static unsigned *pattern_of_route;
static unsigned num_router_routes;
static cr_metric_label request_labels[3], duration_labels[2];
static const cr_metric_label refused_labels[] = {{"status", status_values, NUM_STATUSES + 1}};

static struct {
    cr_metric requests, duration, request_bytes, response_bytes, connections_open,
        connections_total, refused, parser_read, rate_limited, deadline_exceeded,
        client_transfers;
} m;

int http_metrics_register(const http_router *router)
{
    num_router_routes = http_router_route_count(router);
    route_values = calloc(num_router_routes + 1, sizeof(*route_values));
    pattern_of_route = calloc(num_router_routes + 1, sizeof(*pattern_of_route));
    if (!route_values || !pattern_of_route) {
        free(route_values);
        free(pattern_of_route);
        return -ENOMEM;
    }
    num_routes = 0;
    for (unsigned i = 0; i < num_router_routes; i++) {
        const char *pattern = http_router_route_pattern(router, i);
        unsigned p = 0;
        while (p < num_routes && strcmp(route_values[p], pattern) != 0)
            p++;
        if (p == num_routes)
            route_values[num_routes++] = pattern;
        pattern_of_route[i] = p;
    }
    route_values[num_routes] = "unmatched";
    for (unsigned s = 0; s < sizeof(status_index); s++)
        status_index[s] = NUM_STATUSES;
    for (unsigned i = 0; i < NUM_STATUSES; i++)
        status_index[status_codes[i]] = (unsigned char)i;

    cr_metric_label route = {"route", route_values, num_routes + 1};
    cr_metric_label method = {"method", method_values, NUM_METHODS};
    request_labels[0] = route;
    request_labels[1] = method;
    request_labels[2] = (cr_metric_label){"status", status_values, NUM_STATUSES + 1};
    duration_labels[0] = route;
    duration_labels[1] = method;

    const cr_metric_def defs[] = {
        {.name = "http_requests_total",
         .help = "HTTP requests answered, by route pattern (\"unmatched\" for none), method and status.",
         .type = CR_METRIC_COUNTER, .labels = request_labels, .num_labels = 3},
        {.name = "http_request_duration_seconds",
         .help = "Time from a request's dispatch to its response being queued, by route and method.",
         .type = CR_METRIC_HISTOGRAM, .labels = duration_labels, .num_labels = 2,
         .bounds = duration_bounds, .num_bounds = sizeof(duration_bounds) / sizeof(duration_bounds[0]),
         .scale = 1e-9},
        {.name = "http_request_size_bytes_total",
         .help = "Bytes of requests answered: request line and headers, and the body (decoded, when chunked), by route.",
         .type = CR_METRIC_COUNTER, .labels = request_labels, .num_labels = 1},
        {.name = "http_response_size_bytes_total",
         .help = "Bytes of responses queued (status line, headers and body), by route.",
         .type = CR_METRIC_COUNTER, .labels = request_labels, .num_labels = 1},
        {.name = "http_connections_open", .help = "Client connections open now.",
         .type = CR_METRIC_GAUGE},
        {.name = "http_connections_total", .help = "Client connections accepted and served.",
         .type = CR_METRIC_COUNTER},
        {.name = "http_requests_refused_total",
         .help = "Requests refused while being read, before routing (400 malformed, 408, 413, "
                 "431, 500 out of memory...), by status; the connection is closed after each.",
         .type = CR_METRIC_COUNTER, .labels = refused_labels, .num_labels = 1},
        {.name = "http_parser_read_bytes_total",
         .help = "Bytes the request parser read looking for and parsing header sections, "
                 "re-reads included: a few per header byte received, however the bytes arrive.",
         .type = CR_METRIC_COUNTER},
        {.name = "http_rate_limited_total",
         .help = "Requests refused with 429 by --rate-limit: their client was over its rate.",
         .type = CR_METRIC_COUNTER},
        {.name = "http_deadline_exceeded_total",
         .help = "Requests whose handler their route's deadline (or the drain's) cancelled, by "
                 "route and method (docs/deadlines.md).",
         .type = CR_METRIC_COUNTER, .labels = duration_labels, .num_labels = 2},
        {.name = "http_client_transfers_open",
         .help = "Outbound transfers (http_fetch: the cep app's calls to ViaCEP) in libcurl's "
                 "multi handle now.",
         .type = CR_METRIC_GAUGE},
    };
    cr_metric *out[] = {&m.requests,       &m.duration,         &m.request_bytes,
                        &m.response_bytes, &m.connections_open, &m.connections_total,
                        &m.refused,        &m.parser_read,      &m.rate_limited,
                        &m.deadline_exceeded, &m.client_transfers};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST) {
            cr_log_error("metric %s: %s", defs[i].name, cr_strerror(err));
            return err;
        }
    }
    return 0;
}

unsigned http_metrics_unmatched(void)
{
    return num_router_routes;
}

/* @status's index into status_values ("other" past the known ones). */
static unsigned status_label(int status)
{
    return status >= 0 && status < (int)sizeof(status_index) ? status_index[status]
                                                             : NUM_STATUSES;
}

void http_metrics_request(unsigned route, http_method method, int status, uint64_t duration_ns,
                          size_t request_bytes, size_t response_bytes)
{
    route = route < num_router_routes ? pattern_of_route[route] : num_routes;
    unsigned mi = (unsigned)method < NUM_METHODS ? (unsigned)method : 0;
    unsigned si = status_label(status);
    uint32_t rm = route * NUM_METHODS + mi;
    cr_metric_inc(&m.requests, rm * (NUM_STATUSES + 1) + si);
    cr_metric_observe(&m.duration, rm, duration_ns);
    cr_metric_add(&m.request_bytes, route, request_bytes);
    cr_metric_add(&m.response_bytes, route, response_bytes);
}

void http_metrics_deadline(unsigned route, http_method method)
{
    route = route < num_router_routes ? pattern_of_route[route] : num_routes;
    unsigned mi = (unsigned)method < NUM_METHODS ? (unsigned)method : 0;
    cr_metric_inc(&m.deadline_exceeded, route * NUM_METHODS + mi);
}

void http_metrics_refused(int status)
{
    cr_metric_inc(&m.refused, status_label(status));
}

void http_metrics_rate_limited(void)
{
    cr_metric_inc(&m.rate_limited, 0);
}

void http_metrics_parser_read(size_t bytes)
{
    cr_metric_add(&m.parser_read, 0, bytes);
}

void http_metrics_connection(bool open)
{
    cr_metric_add(&m.connections_open, 0, open ? 1 : (uint64_t)-1);
    if (open)
        cr_metric_inc(&m.connections_total, 0);
}

void http_metrics_client_transfer(bool open)
{
    cr_metric_add(&m.client_transfers, 0, open ? 1 : (uint64_t)-1);
}
