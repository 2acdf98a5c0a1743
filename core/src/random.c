/* Seeds from getrandom(2), or from the clock. See coring/core/random.h. */
#include "coring/core/random.h"

#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

void cr_random_seed_clock(void *out, size_t len)
{
    struct timespec real, mono;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t x = ((uint64_t)real.tv_sec << 30) ^ (uint64_t)real.tv_nsec ^
                 ((uint64_t)mono.tv_nsec << 20) ^ (uint64_t)mono.tv_sec ^ (uint64_t)(uintptr_t)out;
    unsigned char *p = out;
    while (len) {
        uint64_t r = cr_random_mix64(x += 0x9e3779b97f4a7c15ull);
        size_t n = len < sizeof(r) ? len : sizeof(r);
        memcpy(p, &r, n);
        p += n;
        len -= n;
    }
}

bool cr_random_seed(void *out, size_t len)
{
    if (len == 0 || getrandom(out, len, GRND_NONBLOCK) == (ssize_t)len)
        return true;
    cr_random_seed_clock(out, len);
    return false;
}
