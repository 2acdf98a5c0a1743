/*
 * cr_arena: bump allocation from chunks, freed all at once.
 *
 * Used per coroutine and per request: a handler allocates what it needs
 * for one request and the arena is reset when the request ends, so the
 * steady state of a keep-alive connection allocates nothing from malloc.
 * Not thread-safe.
 */
#ifndef CORING_CORE_ARENA_H
#define CORING_CORE_ARENA_H

#include <stddef.h>

typedef struct cr_arena_chunk cr_arena_chunk;

typedef struct cr_arena {
    cr_arena_chunk *head;  /* current chunk (newest), or NULL */
    size_t chunk_size;     /* default size of a new chunk in bytes */
} cr_arena;

/* cr_arena_init - an empty arena; no memory is taken until the first alloc.
 * @chunk_size: bytes per chunk (0 means 4 KiB); larger requests get a chunk
 * of their own. */
void cr_arena_init(cr_arena *a, size_t chunk_size);

/* cr_arena_alloc - @size bytes aligned to 16. Returns NULL when malloc
 * fails (or @size is absurd). The memory lives until reset or free. */
void *cr_arena_alloc(cr_arena *a, size_t size);

/* cr_arena_strndup - copy @len bytes of @s and a NUL. NULL on ENOMEM. */
char *cr_arena_strndup(cr_arena *a, const char *s, size_t len);

/* cr_arena_reset - forget every allocation; keeps the first chunk for
 * reuse and frees the others. Precisely: the oldest chunk of the default
 * size is kept and every other chunk, oversized ones included, is freed,
 * so a steady state whose allocations fit in one chunk never calls malloc
 * and one huge request does not pin its memory. */
void cr_arena_reset(cr_arena *a);

/* cr_arena_free - release all memory; the arena is empty but usable. */
void cr_arena_free(cr_arena *a);

#endif
