/*
 * Stackful coroutines, their user-space context switch and the per-thread
 * stack pool. See coring/core/coro.h.
 *
 * Why our own switch: swapcontext(3) makes a sigprocmask system call on
 * every switch (~0.5 us); this one saves the callee-saved registers on the
 * stack being left, stores the stack pointer, loads the other one and
 * pops its registers: a few nanoseconds.
 *
 * Memory layout of one coroutine, a single mmap:
 *
 *     low  [guard, PROT_NONE, 64 KiB][usable stack ... grows down][cr_coro]
 *          [arena's first chunk, 8 KiB]  high
 *
 * The cr_coro record lives at the top of its stack, in its own mapping, and
 * the first chunk of its arena above it, so a coroutine is one mmap and
 * no malloc; a stack cached by the pool comes back with its record and
 * arena chunk ready: creating from the cache makes no system call and no
 * allocation. The chunk is above the record, never below the stack: an
 * overflow reaches the guard, not the arena. (From malloc, each new
 * connection's first chunk grew the thread's heap by one page: one
 * mprotect(2) per connection.) The record and the top of the stack share a
 * page, so the switch touches one page. The usable stack is at least the
 * pool's stack size (the record takes room from an extra page). Untouched
 * pages of the mapping (MAP_NORESERVE) cost no memory.
 */
#include "coring/core/coro.h"

#include "coring/core/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CR_CORO_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CR_CORO_ASAN 1
#endif
#endif
#ifdef CR_CORO_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
/* ThreadSanitizer must be told about each stack switch too, through its
 * fiber API: every coroutine is a TSan fiber, switched to before
 * cr__coro_switch. Switching with flags 0 also orders the two fibers'
 * memory accesses, which matches what runs: one at a time on one thread. */
#if defined(__SANITIZE_THREAD__)
#define CR_CORO_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CR_CORO_TSAN 1
#endif
#endif
#ifdef CR_CORO_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "coring coroutines: context switch written for x86-64 and aarch64 only"
#endif

struct cr_coro {
    void *sp;         /* saved stack pointer while suspended (switch frame) */
    void *resumer_sp; /* saved stack pointer of the context that resumed it */
    bool running;     /* between resume and the matching yield/return */
    bool started;     /* resumed at least once */
    bool finished;    /* fn returned; never resumed again */
    cr_coro_fn fn;    /* entry function and its argument */
    void *arg;
    void *data; /* user data (cr_coro_set_data) */
    const char *log_tag; /* cr_coro_set_log_tag: the request id its lines carry */
    const struct cr_trace_context *log_trace; /* cr_coro_set_log_trace */
    cr_stack_pool *pool;
    cr_coro *next_free; /* pool free list link while cached */
    cr_arena arena;     /* freed (reset when cached) on destroy */
    /* Used by ASan builds only: this coroutine's fake stack, and the bounds
     * of its resumer's stack, named when switching back on yield. */
    void *fake_stack;
    const void *resumer_stack_lo;
    size_t resumer_stack_size;
    /* Used by TSan builds only: this coroutine's fiber and its resumer's. */
    void *tsan_fiber;
    void *tsan_resumer;
};

/* The arena's first chunk, in the mapping above the record: room for what
 * one request of the http engine allocates, beyond a malloc chunk (4 KiB),
 * so a steady state that fitted in one malloc'd chunk fits in it. */
#define CORO__ARENA_BYTES (8u * 1024u)

struct cr_stack_pool {
    size_t page_size;
    size_t guard_size;    /* PROT_NONE bytes below each stack, whole pages */
    size_t map_size;      /* bytes per mapping: guard + stack + record + arena chunk */
    size_t record_offset; /* offset of the cr_coro record in a mapping */
    size_t arena_offset;  /* offset of the arena's first chunk, up to map_size */
    unsigned max_cached;  /* free mappings kept for reuse */
    bool paint;           /* CORING_STACK_REPORT: measure the deepest stack use */
    size_t deepest;       /* with paint: most bytes of a stack ever used */
    unsigned cached;      /* free mappings now in free_list */
    unsigned low;         /* the fewest in free_list since the last trim: that many
                             stayed unused all along (cr_stack_pool_trim) */
    cr_coro *free_list;   /* LIFO: the most recently used stack is warmest, the
                             tail the coldest */
};

/* The coroutine running on this thread, NULL on the thread's own stack. */
static _Thread_local cr_coro *coro__current;

/*
 * cr__coro_switch - save the callee-saved state on the current stack, store
 * the stack pointer in *@save_sp, load @to_sp and restore the state saved
 * there; returns into the context that was suspended at @to_sp.
 * cr__coro_entry - where a new coroutine's first switch returns to: calls
 * cr__coro_main(co) with co taken from a callee-saved register.
 */
void cr__coro_switch(void **save_sp, void *to_sp) __attribute__((visibility("hidden")));
void cr__coro_entry(void) __attribute__((visibility("hidden")));
void cr__coro_main(cr_coro *co) __attribute__((visibility("hidden"), noreturn, used));

#if defined(__x86_64__)
/*
 * Switch frame, from the saved stack pointer up (64 bytes):
 *   +0 MXCSR (4 bytes), +4 x87 control word (2 bytes), +8 r15, +16 r14,
 *   +24 r13, +32 r12, +40 rbx, +48 rbp, +56 return address.
 * The stack pointer saved here is 16-byte aligned (entry at 8 mod 16, then
 * 56 bytes pushed/reserved).
 */
__asm__(".pushsection .text\n"
        ".globl cr__coro_switch\n"
        ".hidden cr__coro_switch\n"
        ".type cr__coro_switch, @function\n"
        ".p2align 4\n"
        "cr__coro_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cr__coro_switch, .-cr__coro_switch\n"
        "\n"
        ".globl cr__coro_entry\n"
        ".hidden cr__coro_entry\n"
        ".type cr__coro_entry, @function\n"
        ".p2align 4\n"
        "cr__coro_entry:\n"
        "    movq %r12, %rdi\n"
        "    call cr__coro_main\n"
        "    ud2\n"
        ".size cr__coro_entry, .-cr__coro_entry\n"
        ".popsection\n");

enum { CORO__FRAME_WORDS = 10 }; /* switch frame + 16 bytes above */

static void **coro__frame_init(cr_coro *co, void **top)
{
    uint32_t mxcsr = __builtin_ia32_stmxcsr();
    uint16_t x87cw;
    __asm__ volatile("fnstcw %0" : "=m"(x87cw));
    /* A new coroutine starts with its creator's FP control state. */
    void **sp = top - CORO__FRAME_WORDS;
    sp[0] = (void *)(uintptr_t)(mxcsr | (uint64_t)x87cw << 32);
    sp[1] = sp[2] = sp[3] = NULL; /* r15, r14, r13 */
    sp[4] = co;                   /* r12: the argument of cr__coro_main */
    sp[5] = sp[6] = NULL;         /* rbx; rbp = 0 ends frame-pointer walks */
    sp[7] = (void *)cr__coro_entry;
    /* After `ret`, rsp = top - 16, aligned, so the call in cr__coro_entry
     * enters cr__coro_main with rsp = 8 mod 16 as the ABI wants. */
    sp[8] = sp[9] = NULL;
    return sp;
}

#elif defined(__aarch64__)
/*
 * Switch frame, from the saved stack pointer up (160 bytes):
 *   +0 x19..x28, +80 x29 (frame pointer), +88 x30 (return address),
 *   +96 d8..d15. The stack pointer stays 16-byte aligned throughout.
 */
__asm__(".pushsection .text\n"
        ".globl cr__coro_switch\n"
        ".hidden cr__coro_switch\n"
        ".type cr__coro_switch, %function\n"
        ".p2align 4\n"
        "cr__coro_switch:\n"
        "    sub sp, sp, #160\n"
        "    stp x19, x20, [sp, #0]\n"
        "    stp x21, x22, [sp, #16]\n"
        "    stp x23, x24, [sp, #32]\n"
        "    stp x25, x26, [sp, #48]\n"
        "    stp x27, x28, [sp, #64]\n"
        "    stp x29, x30, [sp, #80]\n"
        "    stp d8, d9, [sp, #96]\n"
        "    stp d10, d11, [sp, #112]\n"
        "    stp d12, d13, [sp, #128]\n"
        "    stp d14, d15, [sp, #144]\n"
        "    mov x9, sp\n"
        "    str x9, [x0]\n"
        "    mov sp, x1\n"
        "    ldp x19, x20, [sp, #0]\n"
        "    ldp x21, x22, [sp, #16]\n"
        "    ldp x23, x24, [sp, #32]\n"
        "    ldp x25, x26, [sp, #48]\n"
        "    ldp x27, x28, [sp, #64]\n"
        "    ldp x29, x30, [sp, #80]\n"
        "    ldp d8, d9, [sp, #96]\n"
        "    ldp d10, d11, [sp, #112]\n"
        "    ldp d12, d13, [sp, #128]\n"
        "    ldp d14, d15, [sp, #144]\n"
        "    add sp, sp, #160\n"
        "    ret\n"
        ".size cr__coro_switch, .-cr__coro_switch\n"
        "\n"
        ".globl cr__coro_entry\n"
        ".hidden cr__coro_entry\n"
        ".type cr__coro_entry, %function\n"
        ".p2align 4\n"
        "cr__coro_entry:\n"
        "    mov x0, x19\n"
        "    bl cr__coro_main\n"
        "    brk #0x3e8\n"
        ".size cr__coro_entry, .-cr__coro_entry\n"
        ".popsection\n");

enum { CORO__FRAME_WORDS = 20 }; /* the switch frame exactly */

static void **coro__frame_init(cr_coro *co, void **top)
{
    void **sp = top - CORO__FRAME_WORDS;
    for (int i = 0; i < CORO__FRAME_WORDS; i++)
        sp[i] = NULL;                /* x29 = 0 ends frame-pointer walks; d8-d15 = 0 */
    sp[0] = co;                      /* x19: the argument of cr__coro_main */
    sp[11] = (void *)cr__coro_entry; /* x30 */
    /* After the switch pops its frame, sp = top: 16-byte aligned. */
    return sp;
}
#endif

/* A coroutine API used against its contract: a bug in the caller. */
__attribute__((noreturn, cold)) static void coro__misuse(const char *what)
{
    fprintf(stderr, "coring: coroutine misuse: %s\n", what);
    abort();
}

static inline char *coro__map_base(const cr_coro *co)
{
    return (char *)co - co->pool->record_offset;
}

/* Lowest usable byte of @co's stack (just above the guard region). */
static inline char *coro__stack_lo(const cr_coro *co)
{
    return coro__map_base(co) + co->pool->guard_size;
}

/* Usable bytes of @co's stack: from coro__stack_lo up to the record. */
static inline size_t coro__stack_size(const cr_coro *co)
{
    return co->pool->record_offset - co->pool->guard_size;
}

/*
 * ASan needs to be told about every stack switch (sanitizer/
 * common_interface_defs.h): start before leaving a stack, naming the stack
 * entered; finish after arriving. Without ASan these are empty.
 */
static inline void coro__asan_start(void **fake_stack_save, const void *lo, size_t size)
{
#ifdef CR_CORO_ASAN
    __sanitizer_start_switch_fiber(fake_stack_save, lo, size);
#else
    (void)fake_stack_save, (void)lo, (void)size;
#endif
}

static inline void coro__asan_finish(void *fake_stack, cr_coro *resumed_from)
{
#ifdef CR_CORO_ASAN
    if (resumed_from)
        __sanitizer_finish_switch_fiber(fake_stack, &resumed_from->resumer_stack_lo,
                                        &resumed_from->resumer_stack_size);
    else
        __sanitizer_finish_switch_fiber(fake_stack, NULL, NULL);
#else
    (void)fake_stack, (void)resumed_from;
#endif
}

/* Inside @co: switch back to its resumer; @fake_stack_save is NULL when
 * @co has finished (ASan then drops its fake stack). */
static inline void coro__switch_to_resumer(cr_coro *co, void **fake_stack_save)
{
    coro__asan_start(fake_stack_save, co->resumer_stack_lo, co->resumer_stack_size);
#ifdef CR_CORO_TSAN
    __tsan_switch_to_fiber(co->tsan_resumer, 0);
#endif
    cr__coro_switch(&co->sp, co->resumer_sp);
}

void cr__coro_main(cr_coro *co)
{
    coro__asan_finish(NULL, co);
    co->fn(co->arg);
    co->finished = true;
    coro__switch_to_resumer(co, NULL);
    __builtin_trap(); /* cr_coro_resume never enters a finished coroutine */
}

int cr_stack_pool_create(cr_stack_pool **out, size_t stack_size, unsigned max_cached)
{
    if (!out)
        return -EINVAL;
    long page = sysconf(_SC_PAGESIZE);
    size_t pg = page > 0 ? (size_t)page : 4096;
    if (stack_size == 0)
        stack_size = CR_CORO_DEFAULT_STACK_SIZE;
    /* The record sits at the top of an extra page, which it shares with the
     * top of the stack, so the usable stack is at least @stack_size. */
    size_t record = (sizeof(cr_coro) + 63) & ~(size_t)63;
    if (stack_size > SIZE_MAX / 2 || record > pg)
        return -ENOMEM;
    stack_size = (stack_size + pg - 1) & ~(pg - 1);

    cr_stack_pool *pool = malloc(sizeof(*pool));
    if (!pool)
        return -ENOMEM;
    pool->page_size = pg;
    pool->guard_size = (CR_CORO_GUARD_SIZE + pg - 1) & ~(pg - 1);
    pool->arena_offset = pool->guard_size + stack_size + pg;
    pool->map_size = pool->arena_offset + ((CORO__ARENA_BYTES + pg - 1) & ~(pg - 1));
    pool->record_offset = pool->arena_offset - record;
    pool->max_cached = max_cached;
    pool->cached = 0;
    pool->low = 0;
    pool->free_list = NULL;
    pool->paint = getenv("CORING_STACK_REPORT") != NULL;
    pool->deepest = 0;
    *out = pool;
    return 0;
}

/*
 * Stack-use measurement (CORING_STACK_REPORT set in the environment; for
 * sizing --stack-size, never in production: painting touches every page of
 * every stack). Each stack is filled with a pattern when a coroutine is
 * created on it; when the coroutine is destroyed, the lowest byte no longer
 * holding the pattern marks how deep it went. The pool's deepest figure is
 * printed to stderr when the pool is destroyed (thread exit).
 */
enum { CORO__PAINT = 0xa5 };

static void coro__paint(cr_coro *co)
{
    memset(coro__stack_lo(co), CORO__PAINT, coro__stack_size(co));
}

static size_t coro__stack_used(const cr_coro *co)
{
    const unsigned char *lo = (const unsigned char *)coro__stack_lo(co);
    size_t size = coro__stack_size(co), i = 0;
    while (i < size && lo[i] == CORO__PAINT)
        i++;
    return size - i;
}

/* A fresh mapping with its guard region and an initialised record. */
static cr_coro *coro__map(cr_stack_pool *pool)
{
    char *base = mmap(NULL, pool->map_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    if (mprotect(base, pool->guard_size, PROT_NONE) != 0) {
        munmap(base, pool->map_size);
        return NULL;
    }
    cr_coro *co = (cr_coro *)(base + pool->record_offset);
    co->pool = pool;
    cr_arena_init_fixed(&co->arena, base + pool->arena_offset, pool->map_size - pool->arena_offset, 0);
#ifdef CR_CORO_TSAN
    /* One fiber per mapping, kept with it in the pool: making one costs
     * TSan far more than a switch, and a connection now takes a stack per
     * request (a fiber reused by the next coroutine is like a pool thread
     * taking its next job). */
    co->tsan_fiber = __tsan_create_fiber(0);
#endif
    return co;
}

static void coro__unmap(cr_coro *co)
{
#ifdef CR_CORO_TSAN
    __tsan_destroy_fiber(co->tsan_fiber);
#endif
    cr_arena_free(&co->arena);
    munmap(coro__map_base(co), co->pool->map_size);
}

unsigned cr_stack_pool_cached(const cr_stack_pool *pool)
{
    return pool->cached;
}

unsigned cr_stack_pool_trim(cr_stack_pool *pool, unsigned keep)
{
    unsigned release = pool->low > keep ? pool->low - keep : 0;
    if (release) {
        /* The coldest are at the tail: keep the first cached - release. */
        unsigned stay = pool->cached - release;
        cr_coro **link = &pool->free_list;
        for (unsigned i = 0; i < stay; i++)
            link = &(*link)->next_free;
        cr_coro *co = *link;
        *link = NULL;
        while (co) {
            cr_coro *next = co->next_free;
            coro__unmap(co);
            co = next;
        }
        pool->cached = stay;
    }
    pool->low = pool->cached;
    return release;
}

size_t cr_stack_pool_deepest(const cr_stack_pool *pool)
{
    return pool->deepest;
}

void cr_stack_pool_destroy(cr_stack_pool *pool)
{
    if (!pool)
        return;
    cr_coro *co = pool->free_list;
    while (co) {
        cr_coro *next = co->next_free;
        coro__unmap(co);
        co = next;
    }
    if (pool->paint)
        fprintf(stderr,
                "coring: CORING_STACK_REPORT: deepest coroutine stack use %zu of %zu bytes\n",
                pool->deepest, pool->record_offset - pool->guard_size);
    free(pool);
}

int cr_coro_create(cr_coro **out, cr_stack_pool *pool, cr_coro_fn fn, void *arg)
{
    if (!out || !pool || !fn)
        return -EINVAL;
    cr_coro *co = pool->free_list;
    if (co) {
        pool->free_list = co->next_free;
        if (--pool->cached < pool->low)
            pool->low = pool->cached;
    } else {
        co = coro__map(pool);
        if (!co)
            return -ENOMEM;
    }
    co->running = co->started = co->finished = false;
    co->fn = fn;
    co->arg = arg;
    co->data = NULL;
    co->log_tag = NULL;
    co->log_trace = NULL;
    co->next_free = NULL;
    co->fake_stack = NULL;
    co->resumer_stack_lo = NULL;
    co->resumer_stack_size = 0;
#ifdef CR_CORO_TSAN
    co->tsan_resumer = NULL;
#endif
    if (pool->paint)
        coro__paint(co);
    co->sp = coro__frame_init(co, (void **)co);
    *out = co;
    return 0;
}

void cr_coro_resume(cr_coro *co)
{
    if (cr_unlikely(co->running || co->finished))
        coro__misuse(co->finished ? "resume of a finished coroutine"
                                  : "resume of a running coroutine");
    cr_coro *prev = coro__current;
    co->running = co->started = true;
    coro__current = co;
    void *fake_stack = NULL;
    coro__asan_start(&fake_stack, coro__stack_lo(co), coro__stack_size(co));
#ifdef CR_CORO_TSAN
    co->tsan_resumer = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(co->tsan_fiber, 0);
#endif
    cr__coro_switch(&co->resumer_sp, co->sp);
    coro__asan_finish(fake_stack, NULL);
    coro__current = prev;
    co->running = false;
}

void cr_coro_yield(void)
{
    cr_coro *co = coro__current;
    if (cr_unlikely(!co))
        coro__misuse("cr_coro_yield outside a coroutine");
    coro__switch_to_resumer(co, &co->fake_stack);
    coro__asan_finish(co->fake_stack, co);
}

cr_coro *cr_coro_current(void)
{
    return coro__current;
}

bool cr_coro_finished(const cr_coro *co)
{
    return co->finished;
}

void cr_coro_destroy(cr_coro *co)
{
    if (!co)
        return;
    if (cr_unlikely(co->running || (co->started && !co->finished)))
        coro__misuse("destroy of a running or suspended coroutine");
    cr_stack_pool *pool = co->pool;
#ifdef CR_CORO_ASAN
    /* cr__coro_main's frame never returns: clear its poisoned redzones so
     * the next user of these addresses starts clean. */
    __asan_unpoison_memory_region(coro__stack_lo(co), coro__stack_size(co));
#endif
    if (pool->paint) {
        size_t used = coro__stack_used(co);
        if (used > pool->deepest)
            pool->deepest = used;
    }
    if (pool->cached < pool->max_cached) {
        /* Keep one arena chunk with the record: no malloc on reuse. */
        cr_arena_reset(&co->arena);
        co->next_free = pool->free_list;
        pool->free_list = co;
        pool->cached++;
    } else {
        coro__unmap(co);
    }
}

cr_arena *cr_coro_arena(cr_coro *co)
{
    return &co->arena;
}

void cr_coro_set_data(cr_coro *co, void *data)
{
    co->data = data;
}

void *cr_coro_data(const cr_coro *co)
{
    return co->data;
}

void cr_coro_set_log_tag(cr_coro *co, const char *tag)
{
    co->log_tag = tag;
    co->log_trace = NULL;
}

const char *cr_coro_log_tag(const cr_coro *co)
{
    return co->log_tag;
}

void cr_coro_set_log_trace(cr_coro *co, const struct cr_trace_context *trace)
{
    co->log_trace = trace;
}

const struct cr_trace_context *cr_coro_log_trace(const cr_coro *co)
{
    return co->log_trace;
}

int cr_coro_stack_bounds(const cr_coro *co, void **lo, void **hi)
{
    if (!co || !lo || !hi)
        return -EINVAL;
    *lo = coro__stack_lo(co);
    *hi = coro__stack_lo(co) + coro__stack_size(co);
    return 0;
}
