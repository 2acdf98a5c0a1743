/*
 * Stackful coroutines with a user-space context switch.
 *
 * A coroutine runs a function on its own stack. cr_coro_resume() switches
 * into it; cr_coro_yield() switches back to whoever resumed it. The switch
 * saves only the callee-saved registers the ABI requires (on x86-64 also
 * MXCSR and the x87 control word; on aarch64 d8-d15), with no system call,
 * unlike swapcontext(3), which calls sigprocmask each time.
 *
 * Stacks come from a per-thread pool: each is mmap'd with a PROT_NONE guard
 * region of CR_CORO_GUARD_SIZE below it, so an overflow faults (SIGSEGV)
 * instead of corrupting memory. A coroutine runs only on the thread that
 * created it.
 *
 * Each coroutine owns an arena (coring/core/arena.h) freed when it is
 * destroyed, so a handler's temporary memory cannot leak.
 */
#ifndef CORING_CORE_CORO_H
#define CORING_CORE_CORO_H

#include <stdbool.h>
#include <stddef.h>

#include "coring/core/arena.h"

typedef struct cr_stack_pool cr_stack_pool;
typedef struct cr_coro cr_coro;
typedef void (*cr_coro_fn)(void *arg);

/* Default stack size: 64 KiB (usable bytes, the guard region is extra).
 * Deepest use measured (perf/stack_use.py, CORING_STACK_REPORT): HTTP and
 * JSON 6.1 KiB; libpq connect and queries, Unix socket or TCP with
 * getaddrinfo, 6.2 KiB; libcurl over HTTP 7.5 KiB, with OpenSSL (https,
 * ClientHello and a failed handshake) 8.9 KiB; embed requests 8.5 KiB.
 * A full TLS handshake was not measured. */
#define CR_CORO_DEFAULT_STACK_SIZE (64u * 1024u)

/*
 * Guard region below each stack: 64 KiB of PROT_NONE address space (no
 * memory: never touched, mapped MAP_NORESERVE). It must be larger than any
 * frame, or a frame could jump over it and write into the mapping below:
 * our code is built with -fstack-clash-protection (frames probe each page)
 * and without VLAs, but libc, libpq, libcurl and OpenSSL, which also run on
 * these stacks, may not be; none of their frames measured comes near 64 KiB.
 */
#define CR_CORO_GUARD_SIZE (64u * 1024u)

/*
 * cr_stack_pool_create - a pool of coroutine stacks for the calling thread.
 * @stack_size: usable bytes per stack, rounded up to the page size; 0 means
 *              CR_CORO_DEFAULT_STACK_SIZE. A guard region of
 *              CR_CORO_GUARD_SIZE (rounded up to pages) is added below.
 * @max_cached: how many free stacks (and coroutine records) to keep for
 *              reuse; more are unmapped when released.
 * @out: receives the pool (owned by the caller: cr_stack_pool_destroy);
 *       left untouched on failure.
 * Returns 0, or -ENOMEM (no memory, or @stack_size too large), -EINVAL
 * (@out is NULL); negative errno as everywhere (coring/core/error.h).
 * One thread only.
 */
int cr_stack_pool_create(cr_stack_pool **out, size_t stack_size, unsigned max_cached);

/* cr_stack_pool_cached - free stacks @pool keeps for reuse now (at most
 * max_cached). The pool's own thread. */
unsigned cr_stack_pool_cached(const cr_stack_pool *pool);

/*
 * cr_stack_pool_trim - give back to the system the free stacks of @pool
 * that stayed unused since the last trim (or the pool's creation), beyond
 * @keep of them: those are unmapped, the coldest first, so that the pages
 * a burst of coroutines touched do not stay resident once it is over. The
 * pool keeps a working set: a stack taken at least once between two trims
 * is not released by the second. Called periodically (the runtime: every
 * 500 ms); the interval is the time a stack may sit unused before it goes.
 * Returns how many were unmapped. The pool's own thread.
 */
unsigned cr_stack_pool_trim(cr_stack_pool *pool, unsigned keep);

/*
 * cr_stack_pool_deepest - the most bytes of one stack that a coroutine of
 * @pool used, over the coroutines destroyed so far, when CORING_STACK_REPORT
 * was set in the environment as @pool was created (each stack is then
 * painted with a pattern on cr_coro_create, which touches all its pages,
 * and scanned on cr_coro_destroy; cr_stack_pool_destroy prints the figure
 * to stderr). Returns 0 when the variable was not set. For sizing
 * --stack-size; pool's thread only.
 */
size_t cr_stack_pool_deepest(const cr_stack_pool *pool);

/*
 * cr_stack_pool_destroy - unmap every cached stack. All coroutines created
 * from the pool must have been destroyed first.
 */
void cr_stack_pool_destroy(cr_stack_pool *pool);

/*
 * cr_coro_create - a coroutine that will run @fn(@arg) when first resumed.
 * @out:  receives the coroutine (owned by the caller: cr_coro_destroy once
 *        it finished); left untouched on failure.
 * @pool: the calling thread's pool; the coroutine belongs to this thread.
 * Returns 0, or -ENOMEM (mmap(2) or mprotect(2) failed), -EINVAL (@out,
 * @pool or @fn is NULL); negative errno as everywhere (coring/core/error.h).
 * With a stack cached in @pool it makes no system call and no allocation.
 */
int cr_coro_create(cr_coro **out, cr_stack_pool *pool, cr_coro_fn fn, void *arg);

/*
 * cr_coro_resume - switch into @co until it yields or its function returns.
 * Called from the thread's scheduler or from another coroutine (nesting is
 * allowed: a yield returns to the resumer). @co must not be finished nor
 * currently running.
 */
void cr_coro_resume(cr_coro *co);

/*
 * cr_coro_yield - from inside a coroutine: switch back to the context that
 * last resumed it. Returns when the coroutine is resumed again. Calling it
 * outside a coroutine is a programming error.
 */
void cr_coro_yield(void);

/* cr_coro_current - the coroutine running on this thread, or NULL. */
cr_coro *cr_coro_current(void);

/* cr_coro_finished - true once @co's function has returned. */
bool cr_coro_finished(const cr_coro *co);

/*
 * cr_coro_destroy - free @co: its arena is freed and its stack returned to
 * the pool. @co must be finished or never resumed, and not running. A stack
 * kept by the pool keeps one arena chunk for the next coroutine (see
 * cr_arena_reset); cr_stack_pool_destroy frees it.
 */
void cr_coro_destroy(cr_coro *co);

/* cr_coro_arena - @co's arena, freed when @co is destroyed. Its first chunk
 * lies in @co's own mapping, so a coroutine's first allocations take no
 * malloc (coro.c). */
cr_arena *cr_coro_arena(cr_coro *co);

/*
 * cr_coro_set_data / cr_coro_data - one pointer of user data per coroutine
 * (the runtime stores its per-coroutine state there).
 */
void cr_coro_set_data(cr_coro *co, void *data);
void *cr_coro_data(const cr_coro *co);

/*
 * cr_coro_set_log_tag / cr_coro_log_tag - one string per coroutine that the
 * logger adds to every line the coroutine logs (the request id; see
 * cr_log_set_request_id). Not copied; NULL when the coroutine is made.
 * Setting it clears the coroutine's log trace (a request's log context
 * begins with its id; one store where two calls would be).
 */
void cr_coro_set_log_tag(cr_coro *co, const char *tag);
const char *cr_coro_log_tag(const cr_coro *co);

/*
 * cr_coro_set_log_trace / cr_coro_log_trace - the trace context (coring/
 * core/log.h) the logger adds to every line the coroutine logs, and that
 * its outbound calls pass on (see cr_log_set_trace). Not copied; NULL
 * when the coroutine is made.
 */
struct cr_trace_context;
void cr_coro_set_log_trace(cr_coro *co, const struct cr_trace_context *trace);
const struct cr_trace_context *cr_coro_log_trace(const cr_coro *co);

/*
 * cr_coro_stack_bounds - the usable stack of @co: bytes [*@lo, *@hi). The
 * guard region is the CR_CORO_GUARD_SIZE bytes (rounded up to pages) just
 * below *@lo; an access there raises SIGSEGV.
 * For tests, debuggers and stack-usage checks. Returns 0, or -EINVAL when
 * an argument is NULL.
 */
int cr_coro_stack_bounds(const cr_coro *co, void **lo, void **hi);

#endif
