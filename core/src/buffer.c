/* cr_buf: growable byte buffer. See coring/core/buffer.h. */
#include "coring/core/buffer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int cr_buf_reserve(cr_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    if (extra > ((size_t)-1) / 4 - b->len) {
        b->failed = true;
        return -ENOMEM;
    }
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return -ENOMEM;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

int cr_buf_append_u64(cr_buf *b, unsigned long long v)
{
    char tmp[20];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return cr_buf_append(b, tmp + i, sizeof(tmp) - i);
}

int cr_buf_appendf(cr_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(b->cap > b->len ? b->data + b->len : NULL, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return -EINVAL;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (cr_buf_reserve(b, (size_t)n + 1) < 0) {
            va_end(ap2);
            return -ENOMEM;
        }
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap2);
    }
    va_end(ap2);
    b->len += (size_t)n;
    return 0;
}

void cr_buf_consume(cr_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void cr_buf_shrink(cr_buf *b, size_t floor)
{
    if (b->cap <= floor || b->len > floor)
        return;
    if (b->len == 0) {
        free(b->data);
        b->data = NULL;
        b->cap = 0;
        return;
    }
    char *p = realloc(b->data, floor);
    if (p) {
        b->data = p;
        b->cap = floor;
    }
}

void cr_buf_free(cr_buf *b)
{
    free(b->data);
    *b = CR_BUF_INIT;
}
