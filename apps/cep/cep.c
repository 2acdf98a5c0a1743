/*
 * cep: GET /api/v1/cep/{cep} answers a Brazilian postal code's address.
 *
 * Cache-aside: the database first (a prepared statement on the thread's
 * pipelined pool); on a miss, the ViaCEP API ({VIACEP_URL}/{cep}/json/)
 * through the ring-driven libcurl client, then the answer is stored
 * (INSERT ... ON CONFLICT DO NOTHING) and returned. An unknown CEP is
 * remembered for a while (negative cache) so a flood of them does not
 * reach the upstream; concurrent misses for one CEP on one thread share a
 * single upstream request (single flight).
 *
 * The negative cache has two levels. In front, each worker thread's own
 * table (no lock, no query). Behind it, PostgreSQL's table cep_unknown
 * (apps/cep/migrations/0004_cep_unknown.sql), shared by every thread of every
 * host on the database: an unknown CEP is written there (on the primary)
 * with its expiry, and read back with the address lookup itself (one
 * query, on the read replica when DATABASE_READ_URL is set), so that once
 * one thread anywhere learnt a CEP is unknown the others answer 404 without
 * asking ViaCEP, until the expiry. Bound: flights are per thread, not
 * shared across threads or hosts, so ViaCEP sees at most one call per CEP
 * per TTL from each thread that misses it within the window between the
 * first call's start and its cep_unknown row becoming readable there: the
 * upstream call, the commit on the primary, and the replication lag when
 * reads go to a replica. Sequential requests (apart by more than that
 * window) cost one call per CEP per TTL in all; N threads (all hosts
 * together) missing it at the same instant cost at most N. When the
 * primary is down the row is not written (logged): the per-thread cache
 * still holds it.
 */
#include "cep_code.h"

#include "coring/apps/apps.h"
#include "coring/apps/database.h"
#include "coring/core/clock.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/core/metrics.h"
#include "coring/http/client.h"
#include "coring/http/server.h"
#include "coring/net/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_UPSTREAM "https://viacep.com.br/ws"
#define DEFAULT_NEGATIVE_TTL_NS (3600 * CR_NS_PER_S)
#define NEGATIVE_CACHE_SLOTS 65536u /* per thread, power of two */

/* The fields ViaCEP returns, in the order of the INSERT's parameters $2.. */
static const char *const viacep_fields[] = {
    "logradouro", "complemento", "unidade", "bairro", "localidade", "uf",
    "estado",     "regiao",      "ibge",    "gia",    "ddd",        "siafi",
};
#define NUM_FIELDS (sizeof(viacep_fields) / sizeof(viacep_fields[0]))

/* The address (column 7 NULL), or, for a CEP known unknown, a row whose
 * column 7 is the microseconds left until its expiry (computed by the
 * server, so the hosts' clocks do not matter); no row: a miss. A read,
 * answered by the replica when there is one. cep is char(8): the text
 * parameter is cast to it, so that the primary key's index serves the
 * lookup (cep = $1 with $1 text would compare as text, casting every
 * row's cep instead). */
static const db_statement get_def = {
    .sql = "SELECT logradouro, complemento, bairro, localidade, uf, ibge, ddd, NULL::int8 "
           "FROM cep_addresses WHERE cep = $1::bpchar UNION ALL "
           "SELECT '', '', '', '', '', '', '', "
           "(extract(epoch FROM expires_at - now()) * 1000000)::int8 "
           "FROM cep_unknown WHERE cep = $1::bpchar AND expires_at > now()",
    .types = {DB_TEXT},
    .replica_ok = true,
};
/* $2: the TTL, microseconds. */
static const db_statement unknown_def = {
    .sql = "INSERT INTO cep_unknown (cep, expires_at) VALUES ($1, now() + $2 * interval "
           "'1 microsecond') ON CONFLICT (cep) DO UPDATE SET expires_at = EXCLUDED.expires_at",
    .types = {DB_TEXT, DB_INT8},
    .writes = true,
};
static const db_statement insert_def = {
    .sql = "INSERT INTO cep_addresses (cep, logradouro, complemento, unidade, bairro, "
           "localidade, uf, estado, regiao, ibge, gia, ddd, siafi) VALUES ($1, $2, $3, "
           "$4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (cep) DO NOTHING",
    .types = {DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT,
              DB_TEXT, DB_TEXT, DB_TEXT, DB_TEXT},
    .writes = true,
};
/* The statements' handles (app_db_statement), set in mount(). */
static const db_stmt *get_stmt, *insert_stmt, *unknown_stmt;

/* Settings, fixed before the workers start. */
static char upstream[512] = DEFAULT_UPSTREAM;
static bool upstream_off;
static uint64_t negative_ttl_ns = DEFAULT_NEGATIVE_TTL_NS;
static http_fetch_options fetch_options;

/* --- metrics (docs/metrics.md) -------------------------------------------- */

enum { LOOKUP_HIT, LOOKUP_MISS, LOOKUP_NEGATIVE_HIT };
static const char *const lookup_results[] = {"hit", "miss", "negative_hit"};
static const cr_metric_label lookup_labels[] = {{"result", lookup_results, 3}};
enum { UPSTREAM_FOUND, UPSTREAM_NOT_FOUND, UPSTREAM_ERROR };
static const char *const upstream_outcomes[] = {"found", "not_found", "error"};
static const cr_metric_label upstream_labels[] = {{"outcome", upstream_outcomes, 3}};
static cr_metric m_lookups, m_upstream, m_joins;

static int register_metrics(void)
{
    const cr_metric_def defs[] = {
        {.name = "cep_lookups_total",
         .help = "CEP lookups: hit (in the database), miss (not there), negative_hit (known unknown).",
         .type = CR_METRIC_COUNTER, .labels = lookup_labels, .num_labels = 1},
        {.name = "cep_upstream_calls_total", .help = "Calls to the ViaCEP upstream, by outcome.",
         .type = CR_METRIC_COUNTER, .labels = upstream_labels, .num_labels = 1},
        {.name = "cep_single_flight_joins_total",
         .help = "Misses that joined an upstream call already in flight for the same CEP.",
         .type = CR_METRIC_COUNTER},
    };
    cr_metric *out[] = {&m_lookups, &m_upstream, &m_joins};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST)
            return err;
    }
    return 0;
}

/* --- negative cache: CEPs ViaCEP said do not exist (per thread) --------- */

typedef struct negative_slot {
    uint32_t key_plus_one; /* 0: empty */
    uint64_t expires_ns;
} negative_slot;

/* A CEP answered by a flight, for the coroutines that waited on it. */
typedef struct flight {
    uint32_t key;
    bool done;
    bool orphaned;         /* the leader was cut (its deadline, the drain) before
                              the upstream answered: no answer for the waiters,
                              who look again (get_cep) */
    int status;            /* 200, 404, 503 */
    cr_buf body;           /* the response body */
    unsigned refs;         /* the leader and each waiter */
    net_task **waiters;    /* parked waiters; NULL where one left */
    size_t num_waiters, cap_waiters;
    struct flight *next;
} flight;

typedef struct cep_thread {
    negative_slot *negative;
    size_t negative_used;
    flight *flights;       /* in progress on this thread */
} cep_thread;

static _Thread_local cep_thread *tl_cep;

static uint32_t slot_of(uint32_t key)
{
    return (key * 2654435761u) & (NEGATIVE_CACHE_SLOTS - 1);
}

static bool negative_has(uint32_t key, uint64_t now)
{
    negative_slot *t = tl_cep->negative;
    for (uint32_t i = slot_of(key);; i = (i + 1) & (NEGATIVE_CACHE_SLOTS - 1)) {
        if (t[i].key_plus_one == 0)
            return false;
        if (t[i].key_plus_one == key + 1)
            return t[i].expires_ns > now;
    }
}

/* Remember @key as unknown until @expires_ns (monotonic clock). */
static void negative_add(uint32_t key, uint64_t expires_ns)
{
    cep_thread *ct = tl_cep;
    /* Keep the table at most half full: when it fills, start again (a
     * flood of unknown CEPs then costs one upstream call per CEP per TTL
     * at worst, never memory). */
    if (ct->negative_used >= NEGATIVE_CACHE_SLOTS / 2) {
        memset(ct->negative, 0, NEGATIVE_CACHE_SLOTS * sizeof(negative_slot));
        ct->negative_used = 0;
    }
    negative_slot *t = ct->negative;
    uint32_t i = slot_of(key);
    while (t[i].key_plus_one != 0 && t[i].key_plus_one != key + 1)
        i = (i + 1) & (NEGATIVE_CACHE_SLOTS - 1);
    if (t[i].key_plus_one == 0)
        ct->negative_used++;
    t[i] = (negative_slot){.key_plus_one = key + 1, .expires_ns = expires_ns};
}

/* --- answers ------------------------------------------------------------ */

static void write_address(cr_buf *out, const char digits[9], const char *const values[7],
                          const size_t lens[7], const char *source)
{
    static const char *const names[7] = {"logradouro", "complemento", "bairro", "localidade",
                                         "uf",         "ibge",        "ddd"};
    char formatted[10];
    cep_format(digits, formatted);
    cr_json_writer w;
    cr_json_writer_init(&w, out);
    cr_json_object_begin(&w);
    cr_json_key(&w, "cep", 3);
    cr_json_cstring(&w, formatted);
    for (int i = 0; i < 7; i++) {
        cr_json_key(&w, names[i], strlen(names[i]));
        cr_json_string(&w, values[i] ? values[i] : "", values[i] ? lens[i] : 0);
    }
    cr_json_key(&w, "source", 6);
    cr_json_cstring(&w, source);
    cr_json_object_end(&w);
}

/* The shared outcome's body: the one error body of coring. */
static void error_body(cr_buf *out, const char *message)
{
    http_error_body(out, message, strlen(message));
}

/* --- the upstream ---------------------------------------------------------- */

/* Is ViaCEP's "erro" member true (or the older "true")? */
static bool says_not_found(cr_json_value root)
{
    cr_json_value v;
    if (cr_json_object_get(root, "erro", 4, &v) != CR_JSON_OK)
        return false;
    bool b;
    const char *s;
    size_t len;
    if (cr_json_get_bool(v, &b) == CR_JSON_OK)
        return b;
    return cr_json_get_string(v, &s, &len) == CR_JSON_OK && len == 4 && memcmp(s, "true", 4) == 0;
}

/*
 * Ask ViaCEP for @digits; store and answer. Fills f->status and f->body.
 * Runs in the flight's leader coroutine.
 */
static void fetch_from_upstream(flight *f, const char digits[9], cr_arena *arena)
{
    char url[600];
    snprintf(url, sizeof(url), "%s/%s/json/", upstream, digits);
    http_fetch_result res;
    int err = http_fetch(url, &fetch_options, &res);
    if (err < 0 || res.status != 200) {
        if (err < 0)
            cr_log_warn("cep: upstream %s: %s", digits, res.error);
        else
            cr_log_warn("cep: upstream %s: status %ld", digits, res.status);
        f->status = 503;
        /* -EBUSY: this thread's upstream connections and wait queue are
         * full (--cep-max-connections): refused without asking. */
        error_body(&f->body, err == -EBUSY ? "upstream busy" : "upstream unavailable");
        cr_buf_free(&res.body);
        return;
    }

    /* Parse, then copy what we need: the thread's parser is shared with
     * every coroutine of this thread, and the INSERT below yields. */
    cr_json_value root, v;
    cr_json_error jerr = cr_json_parse(http_json_parser(), res.body.data, res.body.len, &root);
    if (jerr != CR_JSON_OK || cr_json_type_of(root) != CR_JSON_OBJECT) {
        cr_log_warn("cep: upstream %s: unparsable answer (%s)", digits,
                    jerr != CR_JSON_OK ? cr_json_error_message(jerr) : "not an object");
        f->status = 503;
        error_body(&f->body, "upstream unavailable");
        cr_buf_free(&res.body);
        return;
    }
    if (says_not_found(root)) {
        negative_add(cep_key(digits), cr_clock_now_ns() + negative_ttl_ns);
        cr_buf_free(&res.body);
        /* Tell every other thread and host (the shared negative cache). */
        db_result r = {0};
        err = DB_RUN(unknown_stmt, &r, db_param_text(digits, 8),
                     db_param_int64((int64_t)(negative_ttl_ns / 1000)));
        if (err < 0)
            cr_log_warn("cep: could not remember %s as unknown in the database (%s%s%s): this "
                        "thread remembers it",
                        digits, cr_strerror(err), err == -EREMOTEIO ? ": " : "",
                        err == -EREMOTEIO ? db_result_message(&r) : "");
        db_result_clear(&r);
        f->status = 404;
        error_body(&f->body, "CEP not found");
        return;
    }
    const char *values[NUM_FIELDS];
    size_t lens[NUM_FIELDS];
    bool ok = true;
    for (size_t i = 0; i < NUM_FIELDS; i++) {
        const char *s = "";
        size_t len = 0;
        /* A field ViaCEP did not send is stored empty. */
        if (cr_json_object_get(root, viacep_fields[i], strlen(viacep_fields[i]), &v) ==
                CR_JSON_OK &&
            cr_json_get_string(v, &s, &len) != CR_JSON_OK) {
            s = "";
            len = 0;
        }
        values[i] = cr_arena_strndup(arena, s, len);
        lens[i] = len;
        ok = ok && values[i] && !memchr(s, '\0', len);
    }
    /* The answer must be about the CEP asked for. */
    const char *cep_text = NULL;
    size_t cep_len = 0;
    char echoed[9];
    if (cr_json_object_get(root, "cep", 3, &v) == CR_JSON_OK)
        cr_json_get_string(v, &cep_text, &cep_len);
    if (!cep_text || cep_parse(cep_text, cep_len, echoed) < 0 || memcmp(echoed, digits, 8) != 0)
        ok = false;
    cr_buf_free(&res.body);
    if (!ok) {
        cr_log_warn("cep: upstream %s: answer without a matching cep or with bad fields", digits);
        f->status = 503;
        error_body(&f->body, "upstream unavailable");
        return;
    }

    db_param params[1 + NUM_FIELDS] = {db_param_text(digits, 8)};
    for (size_t i = 0; i < NUM_FIELDS; i++)
        params[1 + i] = db_param_text(values[i], lens[i]);
    db_result r = {0};
    err = db_run(insert_stmt, params, 1 + NUM_FIELDS, &r);
    if (err < 0)
        cr_log_warn("cep: could not store %s (%s%s%s): answering from the upstream", digits,
                    cr_strerror(err), err == -EREMOTEIO ? ": " : "",
                    err == -EREMOTEIO ? db_result_message(&r) : "");
    db_result_clear(&r);

    /* logradouro, complemento, bairro, localidade, uf, ibge, ddd */
    static const int shown[7] = {0, 1, 3, 4, 5, 8, 10};
    const char *out_values[7];
    size_t out_lens[7];
    for (int i = 0; i < 7; i++) {
        out_values[i] = values[shown[i]];
        out_lens[i] = lens[shown[i]];
    }
    f->status = 200;
    write_address(&f->body, digits, out_values, out_lens, "viacep");
}

/* --- single flight ---------------------------------------------------------- */

static void flight_release(flight *f)
{
    if (--f->refs)
        return;
    cr_buf_free(&f->body);
    free(f->waiters);
    free(f);
}

static void answer_from(http_ctx *ctx, const flight *f)
{
    if (f->status == 503)
        http_add_header(ctx, "Retry-After", "1");
    http_respond(ctx, f->status, "application/json", f->body.data, f->body.len);
}

/* Wait for the flight already fetching this CEP, and answer as it did.
 * Returns false, having answered nothing, when its leader was cut before
 * the upstream answered (flight.orphaned): the caller looks again, so that
 * a waiter fails only by its own deadline, never by its leader's. */
static bool join_flight(http_ctx *ctx, flight *f)
{
    net_task *self = net_task_current();
    if (f->num_waiters == f->cap_waiters) {
        size_t cap = f->cap_waiters ? f->cap_waiters * 2 : 8;
        net_task **w = realloc(f->waiters, cap * sizeof(*w));
        if (!w) {
            http_respond_error(ctx, 503, "out of memory");
            return true;
        }
        f->waiters = w;
        f->cap_waiters = cap;
    }
    size_t slot = f->num_waiters++;
    f->waiters[slot] = self;
    f->refs++;
    while (!f->done)
        if (net_park(-1, 0, 0) == -ECANCELED)
            break;
    f->waiters[slot] = NULL;
    bool answered = true;
    if (f->done && f->orphaned)
        answered = false;
    else if (f->done)
        answer_from(ctx, f);
    else
        http_respond_error(ctx, 503, "shutting down");
    flight_release(f);
    return answered;
}

static void lead_flight(http_ctx *ctx, const char digits[9], uint32_t key)
{
    cep_thread *ct = tl_cep;
    flight *f = calloc(1, sizeof(*f));
    if (!f) {
        http_respond_error(ctx, 503, "out of memory");
        return;
    }
    f->key = key;
    f->refs = 1;
    f->next = ct->flights;
    ct->flights = f;

    fetch_from_upstream(f, digits, ctx->arena);
    /* Cut before an answer: the transfer was abandoned for this request's
     * sake alone; the waiters' own deadlines may still allow one. */
    f->orphaned = f->status == 503 && net_stop_cause_get() != NET_STOP_NONE;
    if (!f->orphaned)
        cr_metric_inc(&m_upstream, f->status == 200   ? UPSTREAM_FOUND
                                   : f->status == 404 ? UPSTREAM_NOT_FOUND
                                                      : UPSTREAM_ERROR);

    f->done = true;
    for (flight **p = &ct->flights; *p; p = &(*p)->next)
        if (*p == f) {
            *p = f->next;
            break;
        }
    for (size_t i = 0; i < f->num_waiters; i++)
        if (f->waiters[i])
            net_unpark(f->waiters[i]);
    answer_from(ctx, f);
    flight_release(f);
}

/* --- the handler ------------------------------------------------------------ */

static void get_cep(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *param = http_route_param(ctx->params, "cep");
    char digits[9];
    if (!param || cep_parse(param->ptr, param->len, digits) < 0) {
        http_respond_error(ctx, 400, "invalid CEP");
        return;
    }
    uint32_t key = cep_key(digits);
    if (negative_has(key, cr_clock_now_ns())) {
        cr_metric_inc(&m_lookups, LOOKUP_NEGATIVE_HIT);
        http_respond_error(ctx, 404, "CEP not found");
        return;
    }

    db_result r = {0};
    int err = DB_RUN(get_stmt, &r, db_param_text(digits, 8));
    if (err < 0) {
        app_db_respond_error(ctx, "cep", err, &r);
        db_result_clear(&r);
        return;
    }
    int rows = db_result_rows(&r), address = -1, unknown = -1;
    for (int i = 0; i < rows; i++)
        *(db_result_is_null(&r, i, 7) ? &address : &unknown) = i;
    if (address < 0 && unknown >= 0) {
        /* Another thread or host learnt it is unknown: so does this one,
         * until the same expiry. */
        int64_t left_us = 0;
        if (db_result_int64(&r, unknown, 7, &left_us) == 0 && left_us > 0) {
            /* Never past our own TTL (another host may have a longer one). */
            uint64_t ns = (uint64_t)left_us * 1000;
            negative_add(key, cr_clock_now_ns() + (ns < negative_ttl_ns ? ns : negative_ttl_ns));
        }
        db_result_clear(&r);
        cr_metric_inc(&m_lookups, LOOKUP_NEGATIVE_HIT);
        http_respond_error(ctx, 404, "CEP not found");
        return;
    }
    cr_metric_inc(&m_lookups, address >= 0 ? LOOKUP_HIT : LOOKUP_MISS);
    if (address >= 0) {
        const char *values[7];
        size_t lens[7];
        for (int i = 0; i < 7 && err == 0; i++)
            err = db_result_string(&r, address, i, &values[i], &lens[i]);
        if (err < 0) {
            /* The columns are text NOT NULL: the schema and the statement disagree. */
            cr_log_error("cep: unexpected row from the database: %s", cr_strerror(err));
            db_result_clear(&r);
            http_respond_error(ctx, 500, "database error");
            return;
        }
        write_address(http_response_begin(ctx, 200, "application/json"), digits, values, lens,
                      "database");
        http_response_end(ctx);
        db_result_clear(&r);
        return;
    }
    db_result_clear(&r);

    if (upstream_off) {
        http_respond_error(ctx, 404, "CEP not found");
        return;
    }
    /* Join the flight fetching this CEP, or lead one; again when the
     * flight joined lost its leader (join_flight). */
    for (;;) {
        flight *f = tl_cep->flights;
        while (f && f->key != key)
            f = f->next;
        if (!f) {
            lead_flight(ctx, digits, key);
            return;
        }
        cr_metric_inc(&m_joins, 0);
        if (join_flight(ctx, f))
            return;
    }
}

/* --- the app ----------------------------------------------------------------- */

static int mount(http_router *r)
{
    if (register_metrics() < 0)
        cr_log_warn("cep: metrics could not be registered: they stay out of /metrics");
    int err = http_router_add(r, HTTP_GET, "/api/v1/cep/{cep}", get_cep, NULL);
    if (err < 0)
        return err;
    if ((err = app_db_statement("cep", &get_def, &get_stmt)) < 0 ||
        (err = app_db_statement("cep", &insert_def, &insert_stmt)) < 0 ||
        (err = app_db_statement("cep", &unknown_def, &unknown_stmt)) < 0)
        return err;
    return 0;
}

/* The app's settings: its options' fields. */
typedef struct cep_settings {
    bool upstream_off;           /* --cep-upstream off: serve from the database only */
    uint64_t negative_ttl_ns;    /* how long an unknown CEP is remembered; 0: 1 h */
    uint64_t connect_timeout_ns; /* upstream connect timeout; 0: 2 s */
    uint64_t total_timeout_ns;   /* upstream request timeout; 0: 5 s */
    unsigned max_connections;    /* upstream connections per worker thread; 0: 8 */
} cep_settings;

static cep_settings settings;

#define FIELD(f) CORING_OPTION_FIELD(cep_settings, f)

static const coring_option options[] = {
    {.name = "cep-upstream", .value = "on|off", .kind = CORING_OPTION_ON_OFF, FIELD(upstream_off),
     .inverted = true,
     .help = "ask ViaCEP (VIACEP_URL) on a database miss (default on)",
     .default_doc = "`on`"},
    {.name = "cep-negative-ttl", .value = "S", .kind = CORING_OPTION_NUMBER,
     FIELD(negative_ttl_ns), .min = 1, .max = 30 * 86400, .scale = CR_NS_PER_S,
     .help = "remember unknown CEPs, seconds (default 3600)",
     .default_doc = "3600 s"},
    {.name = "cep-connect-timeout-ms", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(connect_timeout_ns), .min = 1, .max = 600000, .scale = CR_NS_PER_MS,
     .help = "upstream connect timeout (default 2000)",
     .default_doc = "2000"},
    {.name = "cep-timeout-ms", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(total_timeout_ns),
     .min = 1, .max = 600000, .scale = CR_NS_PER_MS,
     .help = "upstream request timeout (default 5000)",
     .default_doc = "5000"},
    {.name = "cep-max-connections", .value = "N", .kind = CORING_OPTION_NUMBER,
     FIELD(max_connections), .min = 1, .max = 1024,
     .help = "upstream connections per worker thread (default 8);\n"
             "up to 32 per connection wait, more get 503 at once",
     .default_doc = "8"},
};

/* VIACEP_URL: an http:// or https:// URL that fits. */
static int check(const app_options *opts)
{
    (void)opts;
    const char *url = getenv("VIACEP_URL");
    if (url && *url) {
        size_t len = strlen(url);
        while (len && url[len - 1] == '/')
            len--;
        if (len >= sizeof(upstream) ||
            (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
            cr_log_error("cep: VIACEP_URL must be an http:// or https:// URL under %zu bytes",
                         sizeof(upstream));
            return -EINVAL;
        }
        snprintf(upstream, sizeof(upstream), "%.*s", (int)len, url);
    }
    return 0;
}

static int start(const app_options *opts)
{
    (void)opts;
    upstream_off = settings.upstream_off;
    if (settings.negative_ttl_ns)
        negative_ttl_ns = settings.negative_ttl_ns;
    fetch_options.connect_timeout_ns = settings.connect_timeout_ns;
    fetch_options.total_timeout_ns = settings.total_timeout_ns;
    fetch_options.max_body_bytes = 64 * 1024;
    http_client_set_limits(&(http_client_limits){.max_connections = settings.max_connections});
    if (upstream_off)
        cr_log_info("cep: upstream off: answering from the database only");
    else
        cr_log_info("cep: upstream %s", upstream);
    return 0;
}

static int thread_init(void)
{
    cep_thread *ct = calloc(1, sizeof(*ct));
    if (!ct)
        return -ENOMEM;
    ct->negative = calloc(NEGATIVE_CACHE_SLOTS, sizeof(negative_slot));
    if (!ct->negative) {
        free(ct);
        return -ENOMEM;
    }
    tl_cep = ct;
    return 0;
}

static void thread_fini(void)
{
    if (!tl_cep)
        return;
    free(tl_cep->negative);
    free(tl_cep);
    tl_cep = NULL;
}

/* apps/cep/openapi.json and migrations/, built in (apps/CMakeLists.txt). */
extern const char cep_openapi[];
extern const db_migration_set cep_migrations;

/* The upstream's connections of a worker thread, and 2 for curl's
 * resolver; none with the upstream off. */
static unsigned reserved_fds(void)
{
    return upstream_off ? 0 : http_client_get_limits().max_connections + 2;
}

/* A lookup, the upstream call (its connect included), a write: two
 * queries and the call (app_def.longest_request_ns). */
static uint64_t longest_request_ns(const app_options *opts, char *why, size_t len)
{
    uint64_t db = app_db_longest_request_ns(opts, why, len);
    if (settings.upstream_off)
        return db;
    uint64_t upstream = settings.total_timeout_ns ? settings.total_timeout_ns : 5 * CR_NS_PER_S;
    if (why && len) {
        size_t used = strlen(why);
        snprintf(why + used, len - used, " + --cep-timeout-ms %llu",
                 (unsigned long long)(upstream / CR_NS_PER_MS));
    }
    return db + upstream;
}

const app_def app_cep = {
    .name = "cep",
    .deadline_ns = 4 * CR_NS_PER_S, /* docs/deadlines.md */
    .summary = "GET /api/v1/cep/{cep}: addresses, cached in PostgreSQL from ViaCEP (VIACEP_URL)",
    .openapi = cep_openapi,
    .database = true,
    .migrations = &cep_migrations,
    .options = options,
    .num_options = sizeof(options) / sizeof(options[0]),
    .config = &settings,
    .environment =
        "  VIACEP_URL               the cep app's upstream (default https://viacep.com.br/ws)\n",
    .mount = mount,
    .check = check,
    .start = start,
    .reserved_fds = reserved_fds,
    .longest_request_ns = longest_request_ns,
    .ready = app_db_ready,
    .ready_check = "database",
    .thread_init = thread_init,
    .thread_fini = thread_fini,
};
