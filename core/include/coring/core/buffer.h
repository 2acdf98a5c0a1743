/*
 * cr_buf: a growable byte buffer, the one type every layer appends output to
 * (responses, JSON, log lines). Not thread-safe; owned by one thread at a
 * time (a buffer may be handed to another core inside a message, and is then
 * owned by that core until it replies).
 */
#ifndef CORING_CORE_BUFFER_H
#define CORING_CORE_BUFFER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct cr_buf {
    char *data;   /* heap memory, or NULL while cap == 0 */
    size_t len;   /* bytes in use */
    size_t cap;   /* bytes allocated */
    bool failed;  /* an allocation failed: appends were dropped */
} cr_buf;

#define CR_BUF_INIT ((cr_buf){0})

/*
 * cr_buf_reserve - make room for @extra more bytes after len.
 * Returns 0, or -ENOMEM (and sets failed) when the allocation fails.
 */
int cr_buf_reserve(cr_buf *b, size_t extra);

/*
 * cr_buf_append - append @n bytes from @src. On allocation failure the bytes
 * are dropped and b->failed is set, so callers may append a whole response
 * and check once. Returns 0 or -ENOMEM.
 */
static inline int cr_buf_append(cr_buf *b, const void *src, size_t n)
{
    if (b->cap - b->len < n && cr_buf_reserve(b, n) < 0)
        return -ENOMEM;
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* cr_buf_append_str - append a NUL-terminated string (without the NUL). */
static inline int cr_buf_append_str(cr_buf *b, const char *s)
{
    return cr_buf_append(b, s, strlen(s));
}

/* cr_buf_append_u64 - append @v in decimal. Returns 0 or -ENOMEM. */
int cr_buf_append_u64(cr_buf *b, unsigned long long v);

/* cr_buf_appendf - append printf-formatted text. Returns 0 or -ENOMEM. */
int cr_buf_appendf(cr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* cr_buf_consume - drop the first @n bytes (n <= len), moving the rest down. */
void cr_buf_consume(cr_buf *b, size_t n);

/* cr_buf_reset - len = 0, keep the memory; clears failed. */
static inline void cr_buf_reset(cr_buf *b)
{
    b->len = 0;
    b->failed = false;
}

/*
 * cr_buf_shrink - give back memory a buffer no longer needs: when it holds
 * at most @floor bytes (len <= floor) but has more than @floor allocated,
 * it is reallocated to @floor bytes, or freed when empty (then cap == 0).
 * A buffer holding more than @floor bytes is left alone, so a request still
 * being gathered keeps growing without being copied back and forth. Used
 * after each request so that one large request does not pin its memory on
 * a connection that then idles. @floor: bytes. Never fails: when realloc
 * cannot shrink, the memory stays as it was. Owner thread only.
 */
void cr_buf_shrink(cr_buf *b, size_t floor);

/* cr_buf_free - release the memory; the buffer is CR_BUF_INIT after. */
void cr_buf_free(cr_buf *b);

#endif
