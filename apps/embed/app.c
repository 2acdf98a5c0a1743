/*
 * embed: sentence embeddings over HTTP.
 *
 *   POST /embed           {"text": "..."} or {"texts": [...]}, "normalize" optional
 *   POST /v1/embeddings   OpenAI's shape: {"input": "..." | [...], "model": "..."}
 *
 * The handler validates the JSON on its ring thread, copies the texts to
 * a block of its own and hands one job per text to the inference pool,
 * which tokenizes and encodes them (WordPiece on a hostile text takes
 * milliseconds: not on a ring), and waits (net_wait) until
 * the last of its jobs is done; the inference thread that finishes it
 * resumes the coroutine on its own ring (net_wake). Everything a job points
 * to lives in that block, which the request and its jobs share: a request
 * that stops waiting (cancelled by the drain's deadline) leaves it to its
 * jobs, and the last of them frees it.
 *
 * Without --embed-model the routes answer 503 and the other apps run.
 */
#include "coring/apps/apps.h"
#include "coring/core/clock.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/embed/blas.h"
#include "coring/embed/embed.h"
#include "coring/embed/pool.h"
#include "coring/embed/qgemm.h"
#include "coring/http/server.h"
#include "coring/net/io.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EMBED_MAX_TEXTS 64

/* Texts per forward pass by default: where a MiniLM-sized float32 pass
 * peaks in sentences/s on a Zen 5 core (perf/tools' coring-embed-forward:
 * 302 at 8, 322 at 16, 314 at 32); larger batches only make each request
 * wait behind a longer pass (wrk, 32 connections, the embed scenario's
 * sentences: p99 188 ms at 32 against 114 ms at 16). */
#define APP_EMBED_DEFAULT_MAX_BATCH 16

/* Where the inference threads run (--embed-placement; docs/embeddings.md). */
typedef enum app_embed_placement {
    APP_EMBED_PLACEMENT_AUTO = 0, /* spare when the affinity mask has CPUs the rings leave, else batch */
    APP_EMBED_PLACEMENT_SPARE,    /* pinned to the CPUs the ring threads leave (batch when none) */
    APP_EMBED_PLACEMENT_BATCH,    /* on every CPU, below the rings: SCHED_BATCH at nice 10 */
    APP_EMBED_PLACEMENT_IDLE,     /* on every CPU, SCHED_IDLE: only when no normal thread wants it */
    APP_EMBED_PLACEMENT_SHARED,   /* on every CPU, at the rings' priority */
} app_embed_placement;

/* The app's settings: its options' fields (at the end of this file), and
 * the server's threads, which start() copies. */
typedef struct app_embed_options {
    const char *model_dir;   /* folder with config.json, model.safetensors, vocab.txt; NULL: 503 */
    unsigned threads;        /* inference threads; 0: the CPUs in the affinity mask */
    unsigned max_batch;      /* texts per forward pass; 0: APP_EMBED_DEFAULT_MAX_BATCH */
    unsigned max_wait_us;    /* how long a batch may wait to fill, microseconds */
    unsigned max_queue;      /* texts waiting at most before 503; 0: 1024 */
    bool int8;               /* linear layers in int8 (embed_bert_quantize_int8) */
    app_embed_placement placement;
    unsigned ring_threads;   /* the server's ring threads (net_config.threads); 0: the CPUs in
                              * the affinity mask. Pinned (--pin on), the rings take the
                              * mask's first ones. */
    bool rings_pinned;       /* net_config.pin: false, the rings may run on any CPU of the
                              * mask, so "auto" never picks "spare" */
} app_embed_options;

static app_embed_options options = {.max_wait_us = 1000};
static embed_model *model;
static embed_pool *pool;

/* The texts of one request, after validation. */
typedef struct embed_input {
    const char *text[EMBED_MAX_TEXTS]; /* in the JSON document until copied by run() */
    size_t len[EMBED_MAX_TEXTS];
    size_t count;
    bool many; /* given as an array */
    bool normalize;
    bool openai; /* /v1/embeddings: errors in OpenAI's shape */
} embed_input;

/*
 * One request's jobs and everything they point to (the texts, the token
 * ids, the vectors), in one malloc'd block that the request and its jobs
 * share: freed by whichever lets go last, so that a request that stops
 * waiting (cancelled) leaves nothing freed for an inference thread still
 * running its jobs to write into.
 */
typedef struct embed_batch {
    net_wait_handle *wait;  /* woken when the last job is done */
    atomic_size_t pending;  /* jobs not done yet */
    atomic_int refs;        /* the request's, and its jobs' while any is pending */
    embed_job *jobs;        /* count of them, then their ids and vectors */
    int32_t *ids;
    float *vectors;
} embed_batch;

static void batch_release(embed_batch *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

static void job_done(embed_job *job)
{
    embed_batch *b = job->user;
    if (atomic_fetch_sub_explicit(&b->pending, 1, memory_order_acq_rel) != 1)
        return;
    int err = net_wake(b->wait);
    if (err < 0) /* -ESHUTDOWN: the server stopped; nobody waits any more */
        cr_log_warn("embed: could not wake the request: %s", cr_strerror(err));
    batch_release(b);
}

/* A block for @count jobs of texts @len (@max ids and @hidden floats each),
 * or NULL. The texts are copied behind the vectors. */
static embed_batch *batch_new(const embed_input *in, size_t max, size_t hidden)
{
    size_t n = in->count, text_bytes = 0;
    for (size_t i = 0; i < n; i++)
        text_bytes += in->len[i] + 1;
    size_t jobs_at = (sizeof(embed_batch) + 15) & ~(size_t)15;
    size_t ids_at = jobs_at + ((n * sizeof(embed_job) + 15) & ~(size_t)15);
    size_t vectors_at = ids_at + ((n * max * sizeof(int32_t) + 15) & ~(size_t)15);
    size_t texts_at = vectors_at + n * hidden * sizeof(float);
    char *p = malloc(texts_at + text_bytes);
    if (!p)
        return NULL;
    embed_batch *b = (embed_batch *)(void *)p;
    b->jobs = (embed_job *)(void *)(p + jobs_at);
    b->ids = (int32_t *)(void *)(p + ids_at);
    b->vectors = (float *)(void *)(p + vectors_at);
    char *text = p + texts_at;
    for (size_t i = 0; i < n; i++) {
        memcpy(text, in->text[i], in->len[i]);
        text[in->len[i]] = '\0';
        b->jobs[i] = (embed_job){
            .text = text,
            .text_len = in->len[i],
            .ids = b->ids + i * max,
            .max_ids = max,
            .out = b->vectors + i * hidden,
            .normalize = in->normalize,
            .done = job_done,
            .user = b,
        };
        text += in->len[i] + 1;
    }
    atomic_init(&b->pending, n);
    atomic_init(&b->refs, 2);
    return b;
}

/* Answer @status with @message: {"error":"..."} on /embed; on
 * /v1/embeddings OpenAI's error object, {"error":{"message","type",
 * "param","code"}} (@param, @code: NULL for null), so that OpenAI's
 * clients read every error of that route the same way. */
static void fail(http_ctx *ctx, const embed_input *in, int status, const char *param,
                 const char *code, const char *message)
{
    if (!in->openai) {
        http_respond_error(ctx, status, message);
        return;
    }
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, status, "application/json"));
    cr_json_object_begin(&w);
    cr_json_key(&w, "error", 5);
    cr_json_object_begin(&w);
    cr_json_key(&w, "message", 7);
    cr_json_cstring(&w, message);
    cr_json_key(&w, "type", 4);
    cr_json_cstring(&w, status >= 500 ? "server_error" : "invalid_request_error");
    cr_json_key(&w, "param", 5);
    cr_json_cstring(&w, param);
    cr_json_key(&w, "code", 4);
    cr_json_cstring(&w, code);
    cr_json_object_end(&w);
    cr_json_object_end(&w);
    http_response_end(ctx); /* out of memory: the connection closes */
}

/* Parse the body into its root object, and check that it is a JSON
 * object, then that the model is loaded: a malformed request is the
 * client's error (4xx) whatever the server's state. Answers the error
 * itself. */
static bool parse_body(http_ctx *ctx, const embed_input *in, cr_json_value *root)
{
    /* http_json_object_parse answers nothing itself: /v1/embeddings
     * answers in OpenAI's shape. */
    const char *message;
    int status = http_json_object_parse(ctx, root, &message);
    if (status != 0) {
        fail(ctx, in, status, NULL, NULL, message);
        return false;
    }
    if (!model) {
        fail(ctx, in, 503, NULL, NULL, "no model loaded");
        return false;
    }
    return true;
}

/* Read @v, a string or an array of 1..64 strings, each non-empty, into @in.
 * @field names it in error messages. Answers the error itself. */
static bool read_texts(http_ctx *ctx, cr_json_value v, const char *field, embed_input *in)
{
    char msg[128];
    if (cr_json_type_of(v) == CR_JSON_STRING) {
        cr_json_get_string(v, &in->text[0], &in->len[0]);
        in->count = 1;
        in->many = false;
    } else if (cr_json_type_of(v) == CR_JSON_ARRAY) {
        long n = cr_json_array_size(v);
        if (n < 1 || n > EMBED_MAX_TEXTS) {
            snprintf(msg, sizeof(msg), "%s must hold 1 to %d strings, not %ld", field,
                     EMBED_MAX_TEXTS, n);
            fail(ctx, in, 422, field, NULL, msg);
            return false;
        }
        for (long i = 0; i < n; i++) {
            cr_json_value item;
            cr_json_array_at(v, (size_t)i, &item);
            if (cr_json_get_string(item, &in->text[i], &in->len[i]) != CR_JSON_OK) {
                snprintf(msg, sizeof(msg), "%s[%ld] must be a string", field, i);
                fail(ctx, in, 422, field, NULL, msg);
                return false;
            }
        }
        in->count = (size_t)n;
        in->many = true;
    } else {
        snprintf(msg, sizeof(msg), "%s must be a string or an array of strings", field);
        fail(ctx, in, 422, field, NULL, msg);
        return false;
    }
    for (size_t i = 0; i < in->count; i++)
        if (in->len[i] == 0) {
            if (in->many)
                snprintf(msg, sizeof(msg), "%s[%zu] must not be empty", field, i);
            else
                snprintf(msg, sizeof(msg), "%s must not be empty", field);
            fail(ctx, in, 422, field, NULL, msg);
            return false;
        }
    return true;
}

/* Copy the texts to a block of the request's and its jobs' (the JSON
 * document is this thread's and the next request parses over it while this
 * one waits), queue one job a text (the inference thread tokenizes it:
 * worst-case WordPiece must not hold the ring), and wait. On success
 * returns the block (release it with batch_release once answered): its
 * vectors hold count x hidden floats, *@tokens the ids used. Answers
 * errors itself and returns NULL. */
static embed_batch *run(http_ctx *ctx, const embed_input *in, size_t *tokens)
{
    size_t h = model->config.hidden_size;
    embed_batch *b = batch_new(in, model->max_tokens, h);
    if (!b) {
        fail(ctx, in, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    if (net_wait_init(&b->wait) < 0) {
        free(b);
        fail(ctx, in, 500, NULL, NULL, "embed: cannot wait for the inference threads");
        return NULL;
    }
    embed_job *ptrs[EMBED_MAX_TEXTS];
    for (size_t i = 0; i < in->count; i++)
        ptrs[i] = &b->jobs[i];
    int err = embed_pool_submit(pool, ptrs, in->count);
    if (err < 0) {
        net_wait_release(b->wait);
        free(b);
        http_add_header(ctx, "Retry-After", "1");
        fail(ctx, in, 503, NULL, NULL,
             err == -EAGAIN  ? "inference queue is full"
             : err == -ESRCH ? "no inference thread is running"
                             : "shutting down");
        return NULL;
    }
    err = net_wait(b->wait, 0);
    if (err < 0) {
        /* Cancelled (the request's deadline, the drain's): the jobs not
         * started leave the queue; one running keeps the block, and its
         * result is dropped with it. The answer is the deadline's
         * (http/src/request.c). */
        embed_pool_withdraw(pool, ptrs, in->count);
        batch_release(b);
        fail(ctx, in, 503, NULL, NULL, "shutting down");
        return NULL;
    }
    *tokens = 0;
    for (size_t i = 0; i < in->count; i++) {
        if (b->jobs[i].status < 0) {
            cr_log_error("embed: inference failed: %s", cr_strerror(b->jobs[i].status));
            batch_release(b);
            fail(ctx, in, 500, NULL, NULL, "inference failed");
            return NULL;
        }
        *tokens += b->jobs[i].count;
    }
    return b;
}

/* Each float with the fewest digits that read back as it (docs/embed.md). */
static void write_vector(cr_json_writer *w, const float *v, size_t n)
{
    cr_json_float_array(w, v, n);
}

/* Writes the body of a successful answer: @vectors holds in->count vectors
 * of @dim floats, from @tokens token ids in all. */
typedef void (*embed_writer_fn)(cr_json_writer *w, const embed_input *in, const float *vectors,
                                size_t dim, size_t tokens);

/* Run @in and answer 200 with what @write writes, or the error. */
static void answer(http_ctx *ctx, const embed_input *in, embed_writer_fn write)
{
    size_t tokens;
    embed_batch *b = run(ctx, in, &tokens);
    if (!b)
        return;
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, 200, "application/json"));
    cr_json_object_begin(&w);
    write(&w, in, b->vectors, model->config.hidden_size, tokens);
    cr_json_object_end(&w);
    batch_release(b);
    http_response_end(ctx); /* out of memory: the connection closes */
}

/* {"embedding": [...]} or {"embeddings": [[...], ...]} */
static void write_embed(cr_json_writer *w, const embed_input *in, const float *vectors, size_t dim,
                        size_t tokens)
{
    (void)tokens;
    if (!in->many) {
        cr_json_key(w, "embedding", 9);
        write_vector(w, vectors, dim);
        return;
    }
    cr_json_key(w, "embeddings", 10);
    cr_json_array_begin(w);
    for (size_t i = 0; i < in->count; i++)
        write_vector(w, vectors + i * dim, dim);
    cr_json_array_end(w);
}

/* OpenAI's list of embedding objects, model and usage. */
static void write_openai(cr_json_writer *w, const embed_input *in, const float *vectors, size_t dim,
                         size_t tokens)
{
    cr_json_key(w, "object", 6);
    cr_json_cstring(w, "list");
    cr_json_key(w, "data", 4);
    cr_json_array_begin(w);
    for (size_t i = 0; i < in->count; i++) {
        cr_json_object_begin(w);
        cr_json_key(w, "object", 6);
        cr_json_cstring(w, "embedding");
        cr_json_key(w, "index", 5);
        cr_json_uint64(w, i);
        cr_json_key(w, "embedding", 9);
        write_vector(w, vectors + i * dim, dim);
        cr_json_object_end(w);
    }
    cr_json_array_end(w);
    cr_json_key(w, "model", 5);
    cr_json_cstring(w, model->name);
    cr_json_key(w, "usage", 5);
    cr_json_object_begin(w);
    cr_json_key(w, "prompt_tokens", 13);
    cr_json_uint64(w, tokens);
    cr_json_key(w, "total_tokens", 12);
    cr_json_uint64(w, tokens);
    cr_json_object_end(w);
}

static void post_embed(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_value root, text, texts, v;
    embed_input in = {.normalize = true};
    if (!parse_body(ctx, &in, &root))
        return;
    bool has_text = cr_json_object_get(root, "text", 4, &text) == CR_JSON_OK;
    bool has_texts = cr_json_object_get(root, "texts", 5, &texts) == CR_JSON_OK;
    if (has_text == has_texts) {
        http_respond_error(ctx, 422,
                           has_text ? "give either \"text\" or \"texts\", not both"
                                    : "\"text\" (a string) or \"texts\" (an array of "
                                      "strings) is required");
        return;
    }
    if (has_text && cr_json_type_of(text) != CR_JSON_STRING) {
        http_respond_error(ctx, 422, "text must be a string");
        return;
    }
    if (has_texts && cr_json_type_of(texts) != CR_JSON_ARRAY) {
        http_respond_error(ctx, 422, "texts must be an array of strings");
        return;
    }
    if (!read_texts(ctx, has_text ? text : texts, has_text ? "text" : "texts", &in))
        return;
    if (cr_json_object_get(root, "normalize", 9, &v) == CR_JSON_OK &&
        cr_json_get_bool(v, &in.normalize) != CR_JSON_OK) {
        http_respond_error(ctx, 422, "normalize must be a boolean");
        return;
    }
    answer(ctx, &in, write_embed);
}

/* Whether @s (@len bytes) names the served model: its folder's name, alone
 * or after an owner as on Hugging Face ("sentence-transformers/NAME"). */
static bool served_model(const char *s, size_t len)
{
    size_t n = strlen(model->name);
    if (len < n || memcmp(s + len - n, model->name, n) != 0)
        return false;
    return len == n || (len > n + 1 && s[len - n - 1] == '/' && !memchr(s, '/', len - n - 1));
}

/* OpenAI's embeddings API: https://platform.openai.com/docs/api-reference/embeddings
 * Every error is OpenAI's error object (see fail()). */
static void post_openai(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_value root, input, v;
    embed_input in = {.normalize = true, .openai = true};
    if (!parse_body(ctx, &in, &root))
        return;
    if (cr_json_object_get(root, "input", 5, &input) != CR_JSON_OK) {
        fail(ctx, &in, 422, "input", NULL, "input (a string or an array of strings) is required");
        return;
    }
    if (!read_texts(ctx, input, "input", &in))
        return;
    if (cr_json_object_get(root, "model", 5, &v) == CR_JSON_OK) {
        const char *s;
        size_t len;
        if (cr_json_get_string(v, &s, &len) != CR_JSON_OK) {
            fail(ctx, &in, 422, "model", NULL, "model must be a string");
            return;
        }
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
                fail(ctx, &in, 422, "model", NULL, "model must not contain control characters");
                return;
            }
        if (!served_model(s, len)) {
            /* The name is not echoed: it is the client's, ours is known. */
            char msg[200];
            snprintf(msg, sizeof(msg), "this server serves only the model '%s'", model->name);
            fail(ctx, &in, 404, "model", "model_not_found", msg);
            return;
        }
    }
    if (cr_json_object_get(root, "dimensions", 10, &v) == CR_JSON_OK) {
        int64_t d;
        if (cr_json_get_int64(v, &d) != CR_JSON_OK || d != (int64_t)model->config.hidden_size) {
            char msg[128];
            snprintf(msg, sizeof(msg), "dimensions must be %u, this model's size",
                     model->config.hidden_size);
            fail(ctx, &in, 422, "dimensions", NULL, msg);
            return;
        }
    }
    if (cr_json_object_get(root, "encoding_format", 15, &v) == CR_JSON_OK) {
        const char *s;
        size_t len;
        if (cr_json_get_string(v, &s, &len) != CR_JSON_OK || len != 5 || memcmp(s, "float", 5)) {
            fail(ctx, &in, 422, "encoding_format", NULL, "encoding_format must be \"float\"");
            return;
        }
    }
    answer(ctx, &in, write_openai);
}

/* --- the app ---------------------------------------------------------------- */

static unsigned cpus_available(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        return (unsigned)CPU_COUNT(&set);
    return 1;
}

/* Write "0-1,4" for @set into @buf. */
static void describe_cpus(const cpu_set_t *set, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int c = 0; c < CPU_SETSIZE && n < len; c++) {
        if (!CPU_ISSET(c, set) || (c > 0 && CPU_ISSET(c - 1, set)))
            continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int w = last > c ? snprintf(buf + n, len - n, "%s%d-%d", n ? "," : "", c, last)
                         : snprintf(buf + n, len - n, "%s%d", n ? "," : "", c);
        n += w > 0 ? (size_t)w : 0;
    }
}

/* Decide where the inference threads run (--embed-placement) and say it
 * in @what. Pinned, the ring threads take the affinity mask's first
 * ring_threads CPUs (net/src/setup.c pick_cpus); "spare" is the rest of
 * the mask. Unpinned (--pin off) the rings may run anywhere in the mask,
 * so no CPU is theirs alone and "auto" chooses "batch". */
static void place_pool(embed_pool_config *cfg, char *what, size_t len)
{
    cpu_set_t mask, spare;
    CPU_ZERO(&spare);
    unsigned rings = options.ring_threads ? options.ring_threads : cpus_available();
    unsigned seen = 0;
    if (sched_getaffinity(0, sizeof(mask), &mask) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &mask) && seen++ >= rings)
                CPU_SET(c, &spare);
    unsigned num_spare = (unsigned)CPU_COUNT(&spare);
    app_embed_placement p = options.placement;
    if (p == APP_EMBED_PLACEMENT_AUTO && !options.rings_pinned)
        p = APP_EMBED_PLACEMENT_BATCH;
    if (p == APP_EMBED_PLACEMENT_AUTO || p == APP_EMBED_PLACEMENT_SPARE)
        p = num_spare ? APP_EMBED_PLACEMENT_SPARE : APP_EMBED_PLACEMENT_BATCH;
    cfg->use_cpus = p == APP_EMBED_PLACEMENT_SPARE;
    cfg->policy = p == APP_EMBED_PLACEMENT_IDLE    ? SCHED_IDLE
                  : p == APP_EMBED_PLACEMENT_BATCH ? SCHED_BATCH
                                                   : SCHED_OTHER;
    if (!cfg->threads)
        cfg->threads = cfg->use_cpus ? num_spare : cpus_available();
    char cpus[128];
    switch (p) {
    case APP_EMBED_PLACEMENT_SPARE:
        cfg->cpus = spare;
        describe_cpus(&spare, cpus, sizeof(cpus));
        snprintf(what, len, "on the CPUs the %u ring thread(s) leave (CPUs %s)", rings, cpus);
        break;
    case APP_EMBED_PLACEMENT_BATCH:
        snprintf(what, len, "below the ring threads (SCHED_BATCH, nice %d)%s", EMBED_POOL_LOW_NICE,
                 num_spare ? "" : ": no CPU in the affinity mask beyond the rings'");
        break;
    case APP_EMBED_PLACEMENT_IDLE:
        snprintf(what, len, "below the ring threads (SCHED_IDLE)");
        break;
    default:
        snprintf(what, len, "at the ring threads' priority (--embed-placement shared)");
        break;
    }
}

/* How long opening the model took (check), for load's line. */
static double open_ms;

/* With --embed-model, once: CORING_EMBED_KERNELS, and the model opened
 * (the weights read and checked; no thread started yet): what a start
 * needs that no network does, so --check-config runs it too (check()).
 * 0, or -errno after logging why. */
static int open_model(void)
{
    if (model || !options.model_dir)
        return 0;
    const char *kernels = getenv("CORING_EMBED_KERNELS");
    if (embed_kernels_select(kernels) < 0) {
        cr_log_error("embed: CORING_EMBED_KERNELS=%s: expected auto or portable", kernels);
        return -EINVAL;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    char err[512];
    int ret = embed_model_open(options.model_dir, &model, err, sizeof(err));
    if (ret < 0) {
        cr_log_error("embed: cannot load the model: %s", err);
        return ret;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    open_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return 0;
}

static int load(void)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ret = open_model();
    if (ret < 0)
        return ret;
    if (options.int8 && (ret = embed_bert_quantize_int8(model->bert)) < 0) {
        cr_log_error("embed: cannot quantise the model to int8: %s", cr_strerror(ret));
        embed_model_close(model);
        model = NULL;
        return ret;
    }
    if (options.int8 && strcmp(embed_qgemm_kernel(), "AVX-512 VNNI") != 0)
        cr_log_warn("embed: --embed-int8 without AVX-512 VNNI on this CPU runs portable C, "
                    "slower than float32 here");
    embed_pool_config cfg = {
        .threads = options.threads,
        .max_batch = options.max_batch ? options.max_batch : APP_EMBED_DEFAULT_MAX_BATCH,
        .max_wait_us = options.max_wait_us,
        .max_queue = options.max_queue ? options.max_queue : 1024,
    };
    if (cfg.max_queue < cfg.max_batch)
        cfg.max_queue = cfg.max_batch;
    char placement[256];
    place_pool(&cfg, placement, sizeof(placement));
    if ((ret = embed_pool_create(model->bert, model->tokenizer, &cfg, &pool)) < 0) {
        cr_log_error("embed: cannot start the inference threads: %s", cr_strerror(ret));
        embed_model_close(model);
        model = NULL;
        return ret;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const embed_bert_config *c = &model->config;
    char blas[256];
    embed_blas_describe(blas, sizeof(blas));
    if (options.int8)
        snprintf(blas + strlen(blas), sizeof(blas) - strlen(blas),
                 "; int8 linear layers on %s", embed_qgemm_kernel());
    cr_log_info("embed: model %s (%u layers, hidden %u, %u heads, vocab %u, max %zu tokens) "
                "loaded in %.1f ms; %u inference threads %s, batches of up to %u, wait %u us; %s",
                model->name, c->num_layers, c->hidden_size, c->num_heads, c->vocab_size,
                model->max_tokens,
                open_ms + (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
                    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
                cfg.threads, placement, cfg.max_batch, cfg.max_wait_us, blas);
    if (cfg.threads > 1)
        cr_log_info("embed: split passes on: a pass that leaves the queue empty splits across "
                    "the idle inference threads (up to %u)",
                    cfg.threads < EMBED_BERT_MAX_PARTS ? cfg.threads : EMBED_BERT_MAX_PARTS);
    return 0;
}

static int mount(http_router *r)
{
    int err;
    if (embed_pool_metrics_register() < 0)
        cr_log_warn("embed: metrics could not be registered: they stay out of /metrics");
    if ((err = http_router_add(r, HTTP_POST, "/embed", post_embed, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_POST, "/v1/embeddings", post_openai, NULL)) < 0)
        return err;
    return 0;
}

/* --check-config and a start, before the migrations: the kernels' word
 * and the model, opened here (not at mount: --list-routes does not need
 * it) and kept for start(). */
static int check(const app_options *opts)
{
    (void)opts;
    return open_model();
}

/* The model's inference threads start before serving. */
static int start(const app_options *opts)
{
    options.ring_threads = opts->threads;
    options.rings_pinned = opts->threads_pinned;
    if (!options.model_dir) {
        cr_log_info("embed: no --embed-model given: /embed and /v1/embeddings answer 503");
        return 0;
    }
    return load();
}

/* /readyz: a model given with --embed-model is loaded at start (coring
 * does not start when it cannot be), so with one the app is ready. Without
 * one the app is not configured: its routes answer 503 by design, and that
 * does not hold the server's readiness (the default --apps mounts embed);
 * the check says so. */
static const char *ready(char *buf, size_t len)
{
    if (!model)
        snprintf(buf, len, "not configured: no --embed-model, /embed answers 503");
    return NULL;
}

static void stop(void)
{
    embed_pool_destroy(pool);
    pool = NULL;
    embed_model_close(model);
    model = NULL;
}

/* In app_embed_placement's order. */
static const char *const placements[] = {"auto", "spare", "batch", "idle", "shared"};

#define FIELD(f) CORING_OPTION_FIELD(app_embed_options, f)

static const coring_option option_rows[] = {
    {.name = "embed-model", .value = "DIR", .kind = CORING_OPTION_STRING, FIELD(model_dir),
     .help = "embedding model folder (config.json, model.safetensors,\n"
             "vocab.txt); without it /embed answers 503",
     .default_doc = "none"},
    {.name = "embed-threads", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(threads),
     .min = 1, .max = 1024,
     .help = "inference threads (default: one per spare CPU when\n"
             "inference runs on them, else the CPUs in the mask)\n"
             "(one text's pass splits across the idle ones)",
     .default_doc = "one per spare CPU when inference runs on spare CPUs (`--embed-placement` auto "
                    "or spare), else the CPUs in the affinity mask"},
    {.name = "embed-placement", .value = "P", .kind = CORING_OPTION_CHOICE, FIELD(placement),
     .words = placements, .num_words = sizeof(placements) / sizeof(placements[0]),
     .help = "where inference runs: auto (default: spare when the\n"
             "affinity mask has more CPUs than ring threads and\n"
             "they are pinned, else batch), spare (pinned to the CPUs the rings leave),\n"
             "batch (every CPU, SCHED_BATCH + nice 10, below the\n"
             "rings), idle (every CPU, SCHED_IDLE: only when no\n"
             "other thread wants it), shared (every CPU, the\n"
             "rings' priority)",
     .default_doc = "auto"},
    {.name = "embed-max-batch", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(max_batch),
     .min = 1, .max = 1024,
     .help = "texts per forward pass (default 16)",
     .default_doc = "16"},
    {.name = "embed-max-wait-us", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(max_wait_us),
     .min = 0, .max = 1000000,
     .help = "time a batch may wait to fill, microseconds (default 1000)",
     .default_doc = "1000"},
    {.name = "embed-max-queue", .value = "N", .kind = CORING_OPTION_NUMBER, FIELD(max_queue),
     .min = 1, .max = 1u << 20,
     .help = "texts waiting at most before 503 (default 1024)",
     .default_doc = "1024"},
    {.name = "embed-int8", .kind = CORING_OPTION_SWITCH, FIELD(int8),
     .help = "run the linear layers in int8 (dynamic quantisation):\n"
             "~1.5x the throughput with AVX-512 VNNI, vectors within\n"
             "~1e-3 of float32 (docs/embeddings.md); default float32",
     .default_doc = "off"},
};

/* apps/embed/openapi.json, built in (apps/CMakeLists.txt). */
extern const char embed_openapi[];

const app_def app_embed = {
    .name = "embed",
    .deadline_ns = 5 * CR_NS_PER_S, /* docs/deadlines.md */
    .summary = "POST /embed, POST /v1/embeddings (BERT sentence embeddings; needs --embed-model)",
    .openapi = embed_openapi,
    .options = option_rows,
    .num_options = sizeof(option_rows) / sizeof(option_rows[0]),
    .config = &options,
    .environment =
        "  OPENBLAS_CORETYPE        read by OpenBLAS: forces its kernels for the embed app\n"
        "                           (Haswell, SkylakeX, ...; used where coring's AVX-512\n"
        "                           kernels do not run); unset, it picks them for the CPU\n"
        "  CORING_EMBED_KERNELS     auto (default: AVX-512 where the CPU has it) or portable:\n"
        "                           the embed app's element-wise kernels and int8 product\n"
        "                           in portable C whatever the CPU (docs/embeddings.md)\n",
    .mount = mount,
    .check = check,
    .start = start,
    .stop = stop,
    .ready = ready,
};
