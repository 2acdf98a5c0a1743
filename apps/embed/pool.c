/*
 * The inference pool (see coring/embed/pool.h).
 *
 * One FIFO of jobs under a mutex, shared by the submitting ring threads and
 * the inference threads; the mutex is held only to link or unlink jobs.
 * Batching: an inference thread takes up to max_batch waiting jobs. When
 * fewer are waiting and another inference thread is busy, it waits until
 * the oldest job has waited max_wait_us for more to arrive; when every
 * inference thread is idle it runs at once (waiting then would only add
 * latency: under load, jobs pile up during a forward pass and the next
 * batch fills by itself).
 *
 * Placement (the caller's choice, apps/embed/app.c): on CPUs of their own,
 * or below the ring threads' priority (SCHED_IDLE, or SCHED_BATCH at nice
 * 10), so that a ring waking for a request does not wait behind a forward
 * pass on its core. Each thread sets both on its own tid: on Linux the scheduling
 * policy, the nice value and the affinity are per thread.
 *
 * Split passes: when a thread takes its jobs, leaves the queue empty and
 * other inference threads are idle, it recruits them (up to
 * EMBED_BERT_MAX_PARTS - 1) for this one pass (embed_bert_encode_split):
 * under the lock it reserves them (counted busy) and wakes them; each idle
 * thread serves a pending recruitment before it looks at the queue. The
 * participants then meet only at the team's barriers, never at the lock.
 * One team at a time: it lives in the pool and is reused once its last
 * helper has left it.
 */
#include "coring/embed/pool.h"

#include "coring/core/log.h"
#include "coring/core/metrics.h"

#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct embed_pool {
    const embed_bert *model;
    const embed_tokenizer *tokenizer;
    embed_pool_config cfg;
    pthread_mutex_t lock;
    pthread_cond_t arrived; /* jobs were queued, or stop */
    pthread_cond_t settled_cv; /* a thread is in its loop, or failed its set-up */
    embed_job *head, *tail; /* FIFO, under lock */
    size_t queued;          /* jobs in it */
    unsigned busy;          /* threads running a batch */
    bool stop;
    pthread_t *threads;
    unsigned started;
    unsigned ready;       /* threads in their loop (not out of memory), under lock */
    unsigned settled;     /* threads past their set-up, ready or not, under lock */
    unsigned recruit;     /* helpers reserved for the team, not yet joined, under lock */
    unsigned next_part;   /* the part the next joining helper takes, under lock */
    unsigned team_left;   /* helpers not yet out of the team, under lock */
    bool team_active;     /* the team is in use (until team_left is 0), under lock */
    embed_bert_team team; /* the split pass's state, see embed_bert_team */
};

/* Metrics (docs/metrics.md): inference threads write their own blocks
 * (cr_metrics_thread_attach, not workers); the queue gauge goes up on the
 * submitting worker and down on the inference thread, each in its block. */
static const uint64_t batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
static const uint64_t forward_bounds[] = {1000000,   2500000,   5000000,   10000000,
                                          25000000,  50000000,  100000000, 250000000,
                                          500000000, 1000000000, 2500000000, 10000000000};
static cr_metric m_queue, m_batch, m_forward, m_texts, m_tokens, m_split, m_dropped;

int embed_pool_metrics_register(void)
{
    const cr_metric_def defs[] = {
        {.name = "embed_queue_texts", .help = "Texts waiting for an inference thread.",
         .type = CR_METRIC_GAUGE},
        {.name = "embed_batch_size", .help = "Texts per forward pass.", .type = CR_METRIC_HISTOGRAM,
         .bounds = batch_bounds, .num_bounds = sizeof(batch_bounds) / sizeof(batch_bounds[0])},
        {.name = "embed_forward_duration_seconds", .help = "Time of one batched forward pass.",
         .type = CR_METRIC_HISTOGRAM, .bounds = forward_bounds,
         .num_bounds = sizeof(forward_bounds) / sizeof(forward_bounds[0]), .scale = 1e-9},
        {.name = "embed_texts_total", .help = "Texts embedded (or refused by the tokenizer).",
         .type = CR_METRIC_COUNTER},
        {.name = "embed_tokens_total", .help = "Tokens run through the encoder, [CLS] and [SEP] included.",
         .type = CR_METRIC_COUNTER},
        {.name = "embed_split_passes_total",
         .help = "Forward passes split across idle inference threads.", .type = CR_METRIC_COUNTER},
        {.name = "embed_jobs_dropped_total",
         .help = "Texts taken out of the queue before any inference thread ran them: their "
                 "request's deadline passed (docs/deadlines.md).",
         .type = CR_METRIC_COUNTER},
    };
    cr_metric *out[] = {&m_queue, &m_batch, &m_forward, &m_texts, &m_tokens, &m_split, &m_dropped};
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        int err = cr_metrics_register(&defs[i], out[i]);
        if (err < 0 && err != -EEXIST)
            return err;
    }
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Reserve the idle inference threads as helpers of the calling thread's
 * next pass and wake them: their number (0: run unsplit, with no thread
 * idle, a job waiting for one or the team in use). */
static unsigned recruit(embed_pool *p)
{
    unsigned k = 0;
    pthread_mutex_lock(&p->lock);
    if (!p->team_active && !p->head && p->ready > p->busy && !p->stop) {
        k = p->ready - p->busy;
        k = k > EMBED_BERT_MAX_PARTS - 1 ? EMBED_BERT_MAX_PARTS - 1 : k;
        memset(&p->team, 0, sizeof(p->team));
        p->team.parts = k + 1;
        p->busy += k;
        p->recruit = k;
        p->next_part = 1;
        p->team_left = k;
        p->team_active = true;
        pthread_cond_broadcast(&p->arrived);
    }
    pthread_mutex_unlock(&p->lock);
    return k;
}

/* Tokenize @n jobs, run the ones that tokenized as one forward pass, or
 * one by one when the batch fails (so that one bad job does not fail the
 * others), then finish them all. */
static void run_batch(embed_pool *p, embed_bert_workspace *ws, embed_job **jobs, size_t n,
                      const int32_t **ids, size_t *lens, float **outs)
{
    embed_job **run = jobs + n; /* the jobs that tokenized, in the second half */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        embed_job *j = jobs[i];
        long count = embed_tokenize(p->tokenizer, j->text, j->text_len, j->ids, j->max_ids);
        j->status = count < 0 ? (int)count : 0;
        j->count = count < 0 ? 0 : (size_t)count;
        if (count < 0)
            continue;
        ids[m] = j->ids;
        lens[m] = j->count;
        outs[m] = j->out;
        run[m++] = j;
    }
    uint64_t t0 = now_ns();
    unsigned helpers = m ? recruit(p) : 0;
    int err = 0;
    if (helpers) {
        err = embed_bert_encode_split(p->model, ws, m, ids, lens, outs, &p->team);
        cr_metric_add(&m_split, 0, 1);
    } else if (m)
        err = embed_bert_encode(p->model, ws, m, ids, lens, outs);
    if (m) { /* texts the tokenizer refused ran no pass */
        cr_metric_observe(&m_forward, 0, now_ns() - t0);
        cr_metric_observe(&m_batch, 0, m);
        cr_metric_add(&m_texts, 0, m);
    }
    for (size_t i = 0; i < m; i++)
        cr_metric_add(&m_tokens, 0, lens[i]);
    for (size_t i = 0; i < m; i++) {
        int status = err;
        if (err < 0 && m > 1)
            status = embed_bert_encode(p->model, ws, 1, &ids[i], &lens[i], &outs[i]);
        if (status == 0 && run[i]->normalize)
            embed_l2_normalize(run[i]->out, embed_bert_config_of(p->model)->hidden_size);
        run[i]->status = status;
    }
    for (size_t i = 0; i < n; i++)
        jobs[i]->done(jobs[i]);
}

/* Apply @cfg's placement to the calling thread, by its tid. SCHED_IDLE
 * (sched(7)): the thread runs only when no normal thread wants its core,
 * and a waking ring thread preempts it at once. SCHED_BATCH: treated as
 * CPU-bound, it does not preempt others on its wake-ups, but a waking ring
 * can still wait for its slice (EEVDF). nice 10 (setpriority(2), per
 * thread on Linux) on both: a smaller share where the policy is refused.
 * Raising nice and entering SCHED_BATCH or SCHED_IDLE need no privilege.
 * Failures are logged, not fatal. */
static void place_thread(const embed_pool_config *cfg)
{
    pid_t tid = gettid();
    if (cfg->use_cpus && sched_setaffinity(tid, sizeof(cfg->cpus), &cfg->cpus) < 0)
        cr_log_warn("embed: cannot pin the inference thread to its CPUs: %s", cr_strerror(-errno));
    if (cfg->policy != SCHED_IDLE && cfg->policy != SCHED_BATCH)
        return;
    /* nice first: a SCHED_IDLE thread on a busy core may wait long for
     * its next slice, and it must not wait there at nice 0. */
    if (setpriority(PRIO_PROCESS, (id_t)tid, EMBED_POOL_LOW_NICE) < 0)
        cr_log_warn("embed: cannot lower the inference thread's priority: %s", cr_strerror(-errno));
    struct sched_param param = {.sched_priority = 0};
    if (sched_setscheduler(tid, cfg->policy, &param) < 0)
        cr_log_warn("embed: cannot set %s on the inference thread: %s",
                    cfg->policy == SCHED_IDLE ? "SCHED_IDLE" : "SCHED_BATCH", cr_strerror(-errno));
}

static void *inference_main(void *arg)
{
    embed_pool *p = arg;
    cr_log_set_thread_name("embed");
    cr_metrics_thread_attach("embed", false);
    place_thread(&p->cfg);
    size_t max = p->cfg.max_batch;
    embed_bert_workspace *ws = embed_bert_workspace_create();
    embed_job **jobs = malloc(2 * max * sizeof(*jobs)); /* taken, then run */
    const int32_t **ids = malloc(max * sizeof(*ids));
    size_t *lens = malloc(max * sizeof(*lens));
    float **outs = malloc(max * sizeof(*outs));
    bool ok = ws && jobs && ids && lens && outs;
    if (!ok)
        cr_log_error("embed: inference thread out of memory; it will not run");
    pthread_mutex_lock(&p->lock);
    if (ok)
        p->ready++;
    p->settled++;
    pthread_cond_broadcast(&p->settled_cv);
    /* a reserved helper joins its team even when the pool stops */
    while (ok && (!p->stop || p->recruit)) {
        if (p->recruit) {
            unsigned part = p->next_part++;
            p->recruit--;
            pthread_mutex_unlock(&p->lock);
            embed_bert_help(&p->team, part);
            pthread_mutex_lock(&p->lock);
            p->busy--;
            if (--p->team_left == 0)
                p->team_active = false;
            continue;
        }
        if (!p->head) {
            pthread_cond_wait(&p->arrived, &p->lock);
            continue;
        }
        if (p->queued < max && p->busy > 0 && p->cfg.max_wait_us > 0) {
            uint64_t deadline = p->head->queued_ns + (uint64_t)p->cfg.max_wait_us * 1000u;
            if (now_ns() < deadline) {
                struct timespec ts = {(time_t)(deadline / 1000000000u),
                                      (long)(deadline % 1000000000u)};
                pthread_cond_timedwait(&p->arrived, &p->lock, &ts);
                continue;
            }
        }
        size_t n = 0;
        while (p->head && n < max) {
            jobs[n++] = p->head;
            p->head = p->head->next;
        }
        if (!p->head)
            p->tail = NULL;
        p->queued -= n;
        cr_metric_add(&m_queue, 0, (uint64_t)-(int64_t)n);
        p->busy++;
        pthread_mutex_unlock(&p->lock);
        run_batch(p, ws, jobs, n, ids, lens, outs);
        pthread_mutex_lock(&p->lock);
        p->busy--;
    }
    if (ok)
        p->ready--;
    pthread_mutex_unlock(&p->lock);
    embed_bert_workspace_free(ws);
    free(jobs);
    free(ids);
    free(lens);
    free(outs);
    return NULL;
}

int embed_pool_submit(embed_pool *p, embed_job *const *jobs, size_t n)
{
    if (n == 0)
        return 0;
    uint64_t now = now_ns();
    pthread_mutex_lock(&p->lock);
    /* Nothing would run a job while no thread is in its loop (every one
     * failed its allocations): refuse at once rather than queue forever. */
    int ret = p->stop                           ? -ESHUTDOWN
              : p->ready == 0                   ? -ESRCH
              : p->queued + n > p->cfg.max_queue ? -EAGAIN
                                                 : 0;
    if (ret == 0) {
        for (size_t i = 0; i < n; i++) {
            embed_job *j = jobs[i];
            j->next = NULL;
            j->queued_ns = now;
            if (p->tail)
                p->tail->next = j;
            else
                p->head = j;
            p->tail = j;
        }
        p->queued += n;
        cr_metric_add(&m_queue, 0, n);
        pthread_cond_signal(&p->arrived);
    }
    pthread_mutex_unlock(&p->lock);
    return ret;
}

size_t embed_pool_withdraw(embed_pool *p, embed_job *const *jobs, size_t n)
{
    embed_job *out = NULL; /* withdrawn, linked through next */
    size_t count = 0;
    pthread_mutex_lock(&p->lock);
    embed_job *prev = NULL;
    for (embed_job *j = p->head; j && count < n;) {
        embed_job *next = j->next;
        bool ours = false;
        for (size_t i = 0; i < n && !ours; i++)
            ours = jobs[i] == j;
        if (!ours) {
            prev = j;
            j = next;
            continue;
        }
        if (prev)
            prev->next = next;
        else
            p->head = next;
        if (p->tail == j)
            p->tail = prev;
        j->next = out;
        out = j;
        count++;
        j = next;
    }
    p->queued -= count;
    pthread_mutex_unlock(&p->lock);
    if (count) {
        cr_metric_add(&m_queue, 0, (uint64_t)-(int64_t)count);
        cr_metric_add(&m_dropped, 0, count);
    }
    while (out) {
        embed_job *next = out->next;
        out->status = -ECANCELED;
        out->done(out);
        out = next;
    }
    return count;
}

int embed_pool_create(const embed_bert *model, const embed_tokenizer *tokenizer,
                      const embed_pool_config *cfg, embed_pool **out)
{
    *out = NULL;
    if (!tokenizer || cfg->threads < 1 || cfg->max_batch < 1 || cfg->max_queue < cfg->max_batch ||
        (cfg->use_cpus && CPU_COUNT(&cfg->cpus) == 0))
        return -EINVAL;
    embed_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->model = model;
    p->tokenizer = tokenizer;
    p->cfg = *cfg;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->arrived, &ca);
    pthread_cond_init(&p->settled_cv, NULL);
    pthread_condattr_destroy(&ca);
    p->threads = calloc(cfg->threads, sizeof(*p->threads));
    if (!p->threads) {
        embed_pool_destroy(p);
        return -ENOMEM;
    }
    openblas_set_num_threads(1);
    for (unsigned i = 0; i < cfg->threads; i++) {
        int err = pthread_create(&p->threads[i], NULL, inference_main, p);
        if (err) {
            embed_pool_destroy(p);
            return -err;
        }
        p->started++;
        char name[16];
        snprintf(name, sizeof(name), "embed-%u", i % 1000u);
        pthread_setname_np(p->threads[i], name);
    }
    /* Every thread past its set-up before the first job comes: a job is
     * refused only when none could be ready, never because none is yet. */
    pthread_mutex_lock(&p->lock);
    while (p->settled < p->started)
        pthread_cond_wait(&p->settled_cv, &p->lock);
    if (p->ready == 0)
        cr_log_error("embed: no inference thread could start: requests get 503");
    pthread_mutex_unlock(&p->lock);
    *out = p;
    return 0;
}

void embed_pool_destroy(embed_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    embed_job *rest = p->head;
    p->head = p->tail = NULL;
    p->queued = 0;
    pthread_cond_broadcast(&p->arrived);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->started; i++)
        pthread_join(p->threads[i], NULL);
    while (rest) {
        embed_job *next = rest->next;
        rest->status = -ECANCELED;
        rest->done(rest);
        rest = next;
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->arrived);
    pthread_cond_destroy(&p->settled_cv);
    free(p->threads);
    free(p);
}
