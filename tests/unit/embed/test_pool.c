/*
 * The inference pool (coring/embed/pool.h) refuses jobs while no inference
 * thread is running: when every thread fails its set-up (its allocations),
 * a job would otherwise wait in the queue for ever, and its request with
 * it. The threads' allocations are made to fail with RLIMIT_DATA
 * (setrlimit(2): private writable mappings, malloc's included), which the
 * sanitizers' own shadow mappings already exceed: skipped under them.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <sys/resource.h>

#include "coring/embed/pool.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

static void never_done(embed_job *job)
{
    (void)job;
}

Test(pool, refuses_jobs_when_no_inference_thread_could_start)
{
    if (UNDER_SANITIZER)
        cr_skip_test("RLIMIT_DATA and the sanitizers' shadow memory do not mix");
    /* A batch this large needs tens of GiB of scratch per thread: with
     * RLIMIT_DATA at 1 GiB, every thread's malloc fails. */
    embed_pool_config cfg = {.threads = 2, .max_batch = UINT_MAX, .max_queue = UINT_MAX};
    struct rlimit old, capped;
    cr_assert_eq(getrlimit(RLIMIT_DATA, &old), 0);
    capped = old;
    capped.rlim_cur = 1ul << 30;
    cr_assert_eq(setrlimit(RLIMIT_DATA, &capped), 0);
    embed_pool *p = NULL;
    /* The tokenizer is never read: no job runs. */
    int err = embed_pool_create(NULL, (const embed_tokenizer *)(const void *)&cfg, &cfg, &p);
    setrlimit(RLIMIT_DATA, &old);
    cr_assert_eq(err, 0);
    embed_job job = {.text = "hello", .text_len = 5, .done = never_done};
    embed_job *jobs[] = {&job};
    cr_expect_eq(embed_pool_submit(p, jobs, 1), -ESRCH);
    embed_pool_destroy(p);
}
