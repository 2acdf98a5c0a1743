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
    cr_arena_chunk *fixed; /* first chunk in the owner's memory, or NULL */
} cr_arena;

/* cr_arena_init - an empty arena; no memory is taken until the first alloc.
 * @chunk_size: bytes per chunk (0 means 4 KiB); larger requests get a chunk
 * of their own. */
void cr_arena_init(cr_arena *a, size_t chunk_size);

/* cr_arena_init_fixed - an arena whose first chunk is @mem: @bytes of memory
 * the caller owns, 16-byte aligned, that outlives the arena (a coroutine's
 * arena lives in its stack mapping: coro.c). Allocations use it before any
 * malloc; reset keeps it, and free leaves it as the arena's only chunk;
 * neither frees it. What does not fit takes chunks of @chunk_size (0 means
 * 4 KiB) from malloc, as in cr_arena_init. @mem NULL, misaligned, or too
 * small for a chunk header and 16 bytes: the same as cr_arena_init. */
void cr_arena_init_fixed(cr_arena *a, void *mem, size_t bytes, size_t chunk_size);

/* cr_arena_alloc - @size bytes aligned to 16. Returns NULL when malloc
 * fails (or @size is absurd). The memory lives until reset or free. */
void *cr_arena_alloc(cr_arena *a, size_t size);

/* cr_arena_strndup - copy @len bytes of @s and a NUL. NULL on ENOMEM. */
char *cr_arena_strndup(cr_arena *a, const char *s, size_t len);

/* cr_arena_reset - forget every allocation; keeps the first chunk for
 * reuse and frees the others. Precisely: the fixed chunk if there is one,
 * otherwise the oldest chunk of the default size, is kept and every other
 * chunk, oversized ones included, is freed, so a steady state whose
 * allocations fit in one chunk never calls malloc and one huge request
 * does not pin its memory. */
void cr_arena_reset(cr_arena *a);

/* cr_arena_free - release all memory taken from malloc; the arena is empty
 * but usable (with its fixed chunk, if it has one, as its only chunk). */
void cr_arena_free(cr_arena *a);

#endif
