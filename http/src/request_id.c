/*
 * Request ids (coring/http/request_id.h): validating an incoming
 * X-Request-Id, and making one per request at the cost of a hex counter
 * incremented in place and a copy.
 */
#include "coring/http/request_id.h"

#include "coring/core/random.h"

#include <stdint.h>
#include <string.h>

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

/* This thread's last id: the prefix (16 hex digits and '-') and the
 * counter in hex, at least 8 digits; [0] == 0 until the first is made.
 * The next id is this one's counter plus one, carried digit by digit in
 * place (an odometer): most ids change one byte. */
static _Thread_local char last[HTTP_REQUEST_ID_SIZE];
static _Thread_local size_t last_len;

static const char hex[] = "0123456789abcdef";

static void make_prefix(void)
{
    uint64_t r;
    cr_random_seed(&r, sizeof(r));
    for (int i = 15; i >= 0; i--, r >>= 4)
        last[i] = hex[r & 15];
    last[16] = '-';
    memset(last + 17, '0', 8); /* counter 0: the first id made is 1 */
    last_len = 25;
    last[last_len] = '\0';
}

size_t http_request_id_make(char *dst)
{
    if (!last[0])
        make_prefix();
    size_t i = last_len;
    while (i > 17 && last[i - 1] == 'f')
        last[--i] = '0';
    if (i > 17) {
        char d = last[i - 1];
        last[i - 1] = d == '9' ? 'a' : (char)(d + 1);
    } else {
        /* Every digit was f: one digit more, 1 followed by zeros (2^32
         * ids on this thread, then 2^36...). */
        last[17] = '1';
        last[last_len++] = '0';
        last[last_len] = '\0';
    }
    memcpy(dst, last, last_len + 1);
    return last_len;
}
