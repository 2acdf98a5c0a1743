/*
 * Request ids (coring/http/request_id.h): validating an incoming
 * X-Request-Id, and making one per request at the cost of a counter
 * increment and a hex conversion.
 */
#include "coring/http/request_id.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

bool http_request_id_valid(const char *id, size_t len)
{
    if (len == 0 || len > HTTP_REQUEST_ID_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)id[i];
        if (c < 0x21 || c > 0x7e)
            return false;
    }
    return true;
}

static _Thread_local char prefix[17]; /* 16 hex digits and '-'; [0] == 0: not made */
static _Thread_local uint64_t counter;

static const char hex[] = "0123456789abcdef";

static void make_prefix(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&counter;
    }
    for (int i = 15; i >= 0; i--, r >>= 4)
        prefix[i] = hex[r & 15];
    prefix[16] = '-';
}

size_t http_request_id_make(char *dst)
{
    if (!prefix[0])
        make_prefix();
    memcpy(dst, prefix, 17);
    uint64_t n = ++counter;
    char digits[16];
    int k = 0;
    do {
        digits[k++] = hex[n & 15];
        n >>= 4;
    } while (n || k < 8);
    size_t len = 17;
    while (k)
        dst[len++] = digits[--k];
    dst[len] = '\0';
    return len;
}
