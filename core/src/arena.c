/*
 * Bump arena: memory for one request or one coroutine, freed all at once.
 *
 * Chunks come from malloc and form a list, newest first; allocation bumps a
 * cursor in the newest chunk. A request larger than the default chunk gets
 * a chunk of its own, linked behind the current one so that the space left
 * in the current chunk is not wasted. Reset keeps one default-size chunk
 * (the oldest one, i.e. the first ever taken) and frees the rest, so a
 * keep-alive steady state whose requests fit in one chunk never calls
 * malloc; oversized chunks are always given back so one huge request does
 * not pin its memory. An arena may start with a fixed chunk in its owner's
 * memory (a coroutine's, in its stack mapping), which is used first, kept
 * by reset and never freed. See coring/core/arena.h.
 */
#include "coring/core/arena.h"

#include "coring/core/error.h"

#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CR_ARENA_ALIGN 16u
#define CR_ARENA_DEFAULT_CHUNK 4096u
/* Larger requests fail with ENOMEM: malloc cannot serve more than
 * PTRDIFF_MAX, and below this bound no size computation can overflow. */
#define CR_ARENA_MAX_ALLOC ((size_t)PTRDIFF_MAX - 4096u)

struct cr_arena_chunk {
    cr_arena_chunk *next; /* older chunk, or NULL */
    size_t size;          /* usable bytes in data[] */
    size_t used;          /* bytes handed out from data[] */
    alignas(CR_ARENA_ALIGN) unsigned char data[];
};

/* malloc must return 16-byte aligned memory for data[] to be aligned. */
_Static_assert(alignof(max_align_t) >= CR_ARENA_ALIGN, "malloc alignment below 16");
_Static_assert(sizeof(cr_arena_chunk) % CR_ARENA_ALIGN == 0, "chunk header not 16-aligned");

/* Round @n (at most CR_ARENA_MAX_ALLOC) up to a multiple of 16. */
static inline size_t arena__round(size_t n)
{
    return (n + CR_ARENA_ALIGN - 1) & ~(size_t)(CR_ARENA_ALIGN - 1);
}

void cr_arena_init(cr_arena *a, size_t chunk_size)
{
    if (chunk_size == 0 || chunk_size > CR_ARENA_MAX_ALLOC)
        chunk_size = CR_ARENA_DEFAULT_CHUNK;
    a->head = NULL;
    a->chunk_size = arena__round(chunk_size);
    a->fixed = NULL;
}

void cr_arena_init_fixed(cr_arena *a, void *mem, size_t bytes, size_t chunk_size)
{
    cr_arena_init(a, chunk_size);
    if (!mem || (uintptr_t)mem % CR_ARENA_ALIGN || bytes < sizeof(cr_arena_chunk) + CR_ARENA_ALIGN)
        return;
    cr_arena_chunk *c = mem;
    c->next = NULL;
    c->size = (bytes - sizeof(cr_arena_chunk)) & ~(size_t)(CR_ARENA_ALIGN - 1);
    c->used = 0;
    a->fixed = a->head = c;
}

/* @c (or nothing), emptied, as @a's only chunk. */
static void arena__keep_only(cr_arena *a, cr_arena_chunk *c)
{
    if (c) {
        c->next = NULL;
        c->used = 0;
    }
    a->head = c;
}

static cr_arena_chunk *arena__chunk_new(size_t size)
{
    cr_arena_chunk *c = malloc(sizeof(cr_arena_chunk) + size);
    if (!c)
        return NULL;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    return c;
}

/* Slow path of cr_arena_alloc: the current chunk cannot hold @size bytes. */
static void *arena__alloc_chunk(cr_arena *a, size_t size)
{
    if (size > a->chunk_size) {
        /* A chunk of its own, behind the current one, which stays current. */
        cr_arena_chunk *big = arena__chunk_new(size);
        if (!big)
            return NULL;
        big->used = size;
        if (a->head) {
            big->next = a->head->next;
            a->head->next = big;
        } else {
            a->head = big;
        }
        return big->data;
    }
    cr_arena_chunk *c = arena__chunk_new(a->chunk_size);
    if (!c)
        return NULL;
    c->used = size;
    c->next = a->head;
    a->head = c;
    return c->data;
}

void *cr_arena_alloc(cr_arena *a, size_t size)
{
    if (cr_unlikely(size > CR_ARENA_MAX_ALLOC)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t n = arena__round(size);
    cr_arena_chunk *c = a->head;
    if (c && c->size - c->used >= n) {
        void *p = c->data + c->used;
        c->used += n;
        return p;
    }
    return arena__alloc_chunk(a, n);
}

char *cr_arena_strndup(cr_arena *a, const char *s, size_t len)
{
    if (len > CR_ARENA_MAX_ALLOC) {
        errno = ENOMEM;
        return NULL;
    }
    char *p = cr_arena_alloc(a, len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

void cr_arena_reset(cr_arena *a)
{
    /* A fixed chunk is kept, and never freed. Without one, the list being
     * newest first, the last default-size chunk seen is the oldest one. */
    cr_arena_chunk *keep = a->fixed;
    cr_arena_chunk *c = a->head;
    while (c) {
        cr_arena_chunk *next = c->next;
        if (!a->fixed && c->size == a->chunk_size) {
            free(keep);
            keep = c;
        } else if (c != a->fixed) {
            free(c);
        }
        c = next;
    }
    arena__keep_only(a, keep);
}

void cr_arena_free(cr_arena *a)
{
    cr_arena_chunk *c = a->head;
    while (c) {
        cr_arena_chunk *next = c->next;
        if (c != a->fixed)
            free(c);
        c = next;
    }
    arena__keep_only(a, a->fixed);
}
