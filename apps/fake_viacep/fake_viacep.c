/*
 * coring-fake-viacep: a stand-in for the ViaCEP API (viacep.com.br), which
 * these machines cannot reach, for tests and benchmarks only. It answers
 * like ViaCEP for the CEPs of a data file (apps/fake_viacep/make-data.py):
 *
 *   GET /ws/{cep}/json/   200 with the record; 200 {"erro": true} for an
 *                         unknown CEP; 400 for a malformed one.
 *
 * and can be told to misbehave, for fault tests:
 *
 *   PUT /_fake/behaviour  {"delay_ms": N, "status": S, "body": "normal" |
 *                         "garbage" | "huge" | "erro_string"}
 *   GET /_fake/stats      {"requests": N} (lookups served since reset)
 *   GET /_fake/last-request  {"traceparent": ..., "tracestate": ...}: the
 *                         trace context fields of the last lookup (null
 *                         where it had none), for the trace tests
 *   POST /_fake/reset     back to normal, counter to 0
 *
 * It is a separate binary: the coring server never mounts it.
 */
#include "coring/core/clock.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/http/server.h"
#include "coring/net/io.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct record {
    uint32_t cep;   /* 8 digits as a number */
    char *json;     /* the response body */
    size_t len;
} record;

static record *records;
static size_t num_records;

enum body_mode { BODY_NORMAL, BODY_GARBAGE, BODY_HUGE, BODY_ERRO_STRING };

/* Behaviour shared by the worker threads (a test fixture: atomics suffice). */
static atomic_uint delay_ms;
static atomic_int status_override; /* 0: none */
static atomic_int body_mode;
static atomic_ulong lookups;

/* The trace context fields of the last lookup (a test fixture: a lock
 * suffices), each with whether the lookup had it. */
static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static struct last_field {
    bool present;
    char value[1024];
} last_traceparent, last_tracestate;

static void remember(struct last_field *f, const http_request *req, const char *name)
{
    const http_str *v = http_request_header(req, name);
    f->present = v != NULL;
    snprintf(f->value, sizeof(f->value), "%.*s", v ? (int)v->len : 0, v ? v->ptr : "");
}

static int cmp_record(const void *a, const void *b)
{
    const record *x = a, *y = b;
    return x->cep < y->cep ? -1 : x->cep > y->cep;
}

static bool parse_cep8(const char *s, size_t len, uint32_t *out)
{
    if (len != 8)
        return false;
    uint32_t v = 0;
    for (size_t i = 0; i < 8; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint32_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

/* Load one JSON object a line; re-serialise each as the response body. */
static int load(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "coring-fake-viacep: cannot open %s\n", path);
        return -1;
    }
    cr_json_parser *p = cr_json_parser_create(64 * 1024, 16);
    char *line = NULL;
    size_t cap = 0, lineno = 0, alloc = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (n <= 1)
            continue;
        cr_json_value root, v;
        const char *cep;
        size_t cep_len;
        uint32_t key;
        char digits[9] = {0};
        if (cr_json_parse(p, line, (size_t)n, &root) != CR_JSON_OK ||
            cr_json_object_get(root, "cep", 3, &v) != CR_JSON_OK ||
            cr_json_get_string(v, &cep, &cep_len) != CR_JSON_OK || cep_len != 9 ||
            cep[5] != '-') {
            fprintf(stderr, "coring-fake-viacep: %s:%zu: not a ViaCEP record\n", path, lineno);
            continue;
        }
        memcpy(digits, cep, 5);
        memcpy(digits + 5, cep + 6, 3);
        if (!parse_cep8(digits, 8, &key))
            continue;
        if (num_records == alloc) {
            alloc = alloc ? alloc * 2 : 1024;
            records = realloc(records, alloc * sizeof(*records));
            if (!records)
                return -1;
        }
        /* ViaCEP's layout: the object as given, pretty-printing aside. */
        size_t len = (size_t)n;
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            len--;
        records[num_records++] = (record){.cep = key, .json = strndup(line, len), .len = len};
    }
    free(line);
    fclose(f);
    cr_json_parser_destroy(p);
    qsort(records, num_records, sizeof(*records), cmp_record);
    return 0;
}

static void lookup(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *cep = http_route_param(ctx->params, "cep");
    uint32_t key;
    if (!cep || !parse_cep8(cep->ptr, cep->len, &key)) {
        http_respond(ctx, 400, "text/html", "<h1>Erro 400</h1>", 17);
        return;
    }
    atomic_fetch_add(&lookups, 1);
    pthread_mutex_lock(&last_lock);
    remember(&last_traceparent, ctx->req, "traceparent");
    remember(&last_tracestate, ctx->req, "tracestate");
    pthread_mutex_unlock(&last_lock);
    unsigned delay = atomic_load(&delay_ms);
    if (delay)
        net_sleep((uint64_t)delay * CR_NS_PER_MS);
    int status = atomic_load(&status_override);
    if (status) {
        http_respond(ctx, status, "text/html", "<h1>upstream error</h1>", 23);
        return;
    }
    switch (atomic_load(&body_mode)) {
    case BODY_GARBAGE:
        http_respond(ctx, 200, "application/json", "{\"cep\": \"0100", 13);
        return;
    case BODY_HUGE: {
        size_t len = 10u * 1024 * 1024;
        char *big = malloc(len);
        if (!big) {
            http_respond(ctx, 500, "text/plain", "no memory", 9);
            return;
        }
        memset(big, ' ', len);
        big[0] = '{';
        big[len - 1] = '}';
        http_respond(ctx, 200, "application/json", big, len);
        free(big);
        return;
    }
    default:
        break;
    }
    record k = {.cep = key};
    const record *r = bsearch(&k, records, num_records, sizeof(k), cmp_record);
    if (!r) {
        if (atomic_load(&body_mode) == BODY_ERRO_STRING)
            http_respond(ctx, 200, "application/json", "{\"erro\": \"true\"}", 16);
        else
            http_respond(ctx, 200, "application/json", "{\"erro\": true}", 14);
        return;
    }
    http_respond(ctx, 200, "application/json; charset=utf-8", r->json, r->len);
}

static void set_behaviour(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_value root, v;
    if (!ctx->body ||
        cr_json_parse(http_json_parser(), ctx->body, ctx->body_len, &root) != CR_JSON_OK ||
        cr_json_type_of(root) != CR_JSON_OBJECT) {
        http_respond_error(ctx, 400, "expected a JSON object");
        return;
    }
    uint64_t n;
    if (cr_json_object_get(root, "delay_ms", 8, &v) == CR_JSON_OK &&
        cr_json_get_uint64(v, &n) == CR_JSON_OK)
        atomic_store(&delay_ms, (unsigned)(n > 600000 ? 600000 : n));
    if (cr_json_object_get(root, "status", 6, &v) == CR_JSON_OK &&
        cr_json_get_uint64(v, &n) == CR_JSON_OK)
        atomic_store(&status_override, n >= 100 && n <= 599 && n != 200 ? (int)n : 0);
    const char *s;
    size_t len;
    if (cr_json_object_get(root, "body", 4, &v) == CR_JSON_OK &&
        cr_json_get_string(v, &s, &len) == CR_JSON_OK) {
        int mode = BODY_NORMAL;
        if (len == 7 && memcmp(s, "garbage", 7) == 0)
            mode = BODY_GARBAGE;
        else if (len == 4 && memcmp(s, "huge", 4) == 0)
            mode = BODY_HUGE;
        else if (len == 11 && memcmp(s, "erro_string", 11) == 0)
            mode = BODY_ERRO_STRING;
        atomic_store(&body_mode, mode);
    }
    http_respond(ctx, 204, NULL, NULL, 0);
}

static void stats(http_ctx *ctx, void *user)
{
    (void)user;
    cr_buf *b = http_scratch();
    cr_buf_appendf(b, "{\"requests\":%lu}", (unsigned long)atomic_load(&lookups));
    http_respond_json(ctx, 200, b);
}

static void last_request(http_ctx *ctx, void *user)
{
    (void)user;
    cr_buf *b = http_scratch();
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    cr_json_object_begin(&w);
    pthread_mutex_lock(&last_lock);
    cr_json_key(&w, "traceparent", 11);
    cr_json_cstring(&w, last_traceparent.present ? last_traceparent.value : NULL);
    cr_json_key(&w, "tracestate", 10);
    cr_json_cstring(&w, last_tracestate.present ? last_tracestate.value : NULL);
    pthread_mutex_unlock(&last_lock);
    cr_json_object_end(&w);
    http_respond_json(ctx, 200, b);
}

static void reset(http_ctx *ctx, void *user)
{
    (void)user;
    atomic_store(&delay_ms, 0);
    atomic_store(&status_override, 0);
    atomic_store(&body_mode, BODY_NORMAL);
    atomic_store(&lookups, 0);
    http_respond(ctx, 204, NULL, NULL, 0);
}

static void on_listening(const char *host, uint16_t port, unsigned threads, void *user)
{
    (void)user;
    cr_log_info("coring-fake-viacep listening on http://%s:%u threads=%u records=%zu", host, port,
                threads, num_records);
}

int main(int argc, char **argv)
{
    net_config net = net_config_default();
    net.host = "127.0.0.1";
    net.port = 8081;
    net.threads = 1;
    const char *data[8];
    size_t num_data = 0;
    static const struct option options[] = {
        {"host", required_argument, NULL, 'h'},  {"port", required_argument, NULL, 'p'},
        {"threads", required_argument, NULL, 't'}, {"data", required_argument, NULL, 'd'},
        {"delay-ms", required_argument, NULL, 'D'}, {"help", no_argument, NULL, 'H'},
        {0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case 'h': net.host = optarg; break;
        case 'p': net.port = (uint16_t)atoi(optarg); break;
        case 't': net.threads = (unsigned)atoi(optarg); break;
        case 'd':
            if (num_data < 8)
                data[num_data++] = optarg;
            break;
        case 'D': atomic_store(&delay_ms, (unsigned)atoi(optarg)); break;
        case 'H':
            printf("Usage: coring-fake-viacep --data FILE.jsonl [--data FILE...] [--host ADDR]\n"
                   "       [--port N (8081)] [--threads N (1)] [--delay-ms N]\n"
                   "A stand-in for ViaCEP for tests and benchmarks; see the source for the\n"
                   "control endpoints.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'coring-fake-viacep --help'.\n");
            return 2;
        }
    }
    if (num_data == 0) {
        fprintf(stderr, "coring-fake-viacep: --data FILE is required\n");
        return 2;
    }
    for (size_t i = 0; i < num_data; i++)
        if (load(data[i]) < 0)
            return 1;

    http_router *r = http_router_create();
    if (!r || http_router_add(r, HTTP_GET, "/ws/{cep}/json/", lookup, NULL) < 0 ||
        http_router_add(r, HTTP_PUT, "/_fake/behaviour", set_behaviour, NULL) < 0 ||
        http_router_add(r, HTTP_GET, "/_fake/stats", stats, NULL) < 0 ||
        http_router_add(r, HTTP_GET, "/_fake/last-request", last_request, NULL) < 0 ||
        http_router_add(r, HTTP_POST, "/_fake/reset", reset, NULL) < 0)
        return 1;
    http_server srv = {
        .cfg = http_server_config_default(),
        .router = r,
        .on_listening = on_listening,
    };
    srv.cfg.limits.max_body_bytes = 4096;
    int ret = http_serve(&srv, &net);
    http_router_destroy(r);
    for (size_t i = 0; i < num_records; i++)
        free(records[i].json);
    free(records);
    return ret == 0 ? 0 : 1;
}
