/*
 * Shorthands for the core unit tests: the coroutine constructors return
 * -errno and hand the object back through an out argument (coro.h); most
 * tests only want the object, NULL on failure.
 */
#ifndef CORING_TESTS_UNIT_CORE_CORO_UTIL_H
#define CORING_TESTS_UNIT_CORE_CORO_UTIL_H

#include "coring/core/coro.h"

static inline cr_stack_pool *new_pool(size_t stack_size, unsigned max_cached)
{
    cr_stack_pool *p = NULL;
    return cr_stack_pool_create(&p, stack_size, max_cached) == 0 ? p : NULL;
}

static inline cr_coro *new_coro(cr_stack_pool *p, cr_coro_fn fn, void *arg)
{
    cr_coro *co = NULL;
    return cr_coro_create(&co, p, fn, arg) == 0 ? co : NULL;
}

#endif
