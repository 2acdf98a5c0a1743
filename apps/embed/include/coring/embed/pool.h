/*
 * The inference pool: threads that tokenize and run the encoder, so that
 * no ring thread ever does (WordPiece on a worst-case text costs
 * milliseconds). Callers (ring threads) submit jobs, one text each; an
 * inference thread takes every job waiting, up to max_batch, waiting up to
 * max_wait_us after the oldest one arrived for the batch to fill,
 * tokenizes each text, runs them as one forward pass, and calls each
 * job's done() from the inference thread.
 *
 * Submission takes a mutex shared with the inference threads only (never
 * held during tokenizing or inference); the queue is bounded so that
 * overload is answered at once (-EAGAIN) instead of queueing without limit.
 */
#ifndef CORING_EMBED_POOL_H
#define CORING_EMBED_POOL_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coring/embed/bert.h"
#include "coring/embed/tokenizer.h"

typedef struct embed_job embed_job;

/* Called once per job, on an inference thread, when the job is finished
 * (status set). It must not block; it may free nothing the pool still
 * reads (the pool does not touch the job after done() returns). */
typedef void (*embed_job_done_fn)(embed_job *job);

struct embed_job {
    const char *text;   /* text_len bytes of UTF-8 to tokenize; not owned, must
                         * stay valid until done() */
    size_t text_len;
    int32_t *ids;       /* room for max_ids token ids, written ([CLS] ... [SEP]) */
    size_t max_ids;     /* 2 ... max_positions */
    size_t count;       /* result: ids written (embed_tokenize) */
    float *out;         /* hidden_size floats, written; not owned */
    bool normalize;     /* L2-normalise out */
    embed_job_done_fn done;
    void *user; /* for done() */
    int status; /* result: 0, -EINVAL (max_ids < 2, or a bad id), -ENOMEM,
                 * -ECANCELED */
    /* Internal to the pool: */
    embed_job *next;
    uint64_t queued_ns;
};

typedef struct embed_pool_config {
    unsigned threads;     /* inference threads (>= 1) */
    unsigned max_batch;   /* texts per forward pass (>= 1) */
    unsigned max_wait_us; /* how long a batch waits to fill (0: take what is there) */
    unsigned max_queue;   /* texts waiting at most (>= max_batch) */
    int policy;           /* SCHED_IDLE or SCHED_BATCH: each thread sets it and nice
                           * EMBED_POOL_LOW_NICE on its own tid (sched(7),
                           * setpriority(2)), below the ring threads (SCHED_OTHER,
                           * nice 0); SCHED_OTHER: the creator's policy and nice */
    bool use_cpus;        /* each thread sets its affinity to cpus (sched_setaffinity(2)
                           * on its tid); false: the creator's affinity */
    cpu_set_t cpus;       /* with use_cpus: the CPUs the threads may run on (not empty) */
} embed_pool_config;

/* The nice value of low-priority inference threads (embed_pool_config). */
#define EMBED_POOL_LOW_NICE 10

typedef struct embed_pool embed_pool;

/*
 * embed_pool_create - start @cfg->threads inference threads that tokenize
 * with @tokenizer and encode with @model (both must outlive the pool).
 * Sets OpenBLAS to one thread: the pool's size is the parallelism.
 * Threads are named "embed-N" (pthread_setname_np; /proc/PID/task/TID/comm).
 * A thread that cannot set @cfg's priority or affinity logs a warning and
 * runs with the creator's. Returns once every thread is in its loop or has
 * failed its set-up (then logged; with none running, submits fail -ESRCH).
 * Returns 0 and *@out, -EINVAL (bad config: also
 * use_cpus with an empty set), -ENOMEM or -EAGAIN (a thread could not
 * start). Main thread.
 */
int embed_pool_create(const embed_bert *model, const embed_tokenizer *tokenizer,
                      const embed_pool_config *cfg, embed_pool **out);

/*
 * embed_pool_submit - queue @n jobs (all or none). Each job's done() will
 * be called exactly once, from an inference thread (or by
 * embed_pool_withdraw), unless this returns an error. Returns 0, -EAGAIN (the queue is full: try later), -ESRCH (no
 * inference thread is running: every one failed its set-up) or
 * -ESHUTDOWN (the pool is stopping). Thread: any.
 */
int embed_pool_submit(embed_pool *p, embed_job *const *jobs, size_t n);

/*
 * embed_pool_withdraw - take those of the @n @jobs (submitted together)
 * that no inference thread has taken yet out of the queue, and call their
 * done() now, on the calling thread, with status -ECANCELED: a request
 * whose deadline passed (docs/deadlines.md) leaves no work behind it. A
 * job already taken runs to its end (its done() comes from its inference
 * thread, as usual; the caller discards its result). Counted in
 * coring_embed_jobs_dropped_total. Returns how many were withdrawn.
 * Thread: any (the lock is held only to unlink them).
 */
size_t embed_pool_withdraw(embed_pool *p, embed_job *const *jobs, size_t n);

/*
 * embed_pool_destroy - stop taking jobs, let the threads finish the batch
 * they are running, fail what is still queued with -ECANCELED (calling
 * done()), join the threads and free the pool. Main thread.
 */
void embed_pool_destroy(embed_pool *p);

/*
 * embed_pool_metrics_register - register the pool's metrics
 * (embed_queue_texts, embed_batch_size, embed_forward_duration_seconds,
 * embed_texts_total, embed_tokens_total; docs/metrics.md). Main thread,
 * before any pool runs. Returns 0 or -errno from cr_metrics_register.
 */
int embed_pool_metrics_register(void);

#endif
