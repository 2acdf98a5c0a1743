/* Monotonic clock and HTTP dates. See coring/core/clock.h. */
#include "coring/core/clock.h"

#include <time.h>

uint64_t cr_clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * CR_NS_PER_S + (uint64_t)ts.tv_nsec;
}

size_t cr_clock_http_date(char out[30])
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    /* Fixed layout: "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 5.6.7). */
    char *p = out;
    const char *d = days[tm.tm_wday], *m = months[tm.tm_mon];
    int year = tm.tm_year + 1900;
    *p++ = d[0], *p++ = d[1], *p++ = d[2], *p++ = ',', *p++ = ' ';
    *p++ = (char)('0' + tm.tm_mday / 10), *p++ = (char)('0' + tm.tm_mday % 10), *p++ = ' ';
    *p++ = m[0], *p++ = m[1], *p++ = m[2], *p++ = ' ';
    *p++ = (char)('0' + year / 1000 % 10), *p++ = (char)('0' + year / 100 % 10);
    *p++ = (char)('0' + year / 10 % 10), *p++ = (char)('0' + year % 10), *p++ = ' ';
    *p++ = (char)('0' + tm.tm_hour / 10), *p++ = (char)('0' + tm.tm_hour % 10), *p++ = ':';
    *p++ = (char)('0' + tm.tm_min / 10), *p++ = (char)('0' + tm.tm_min % 10), *p++ = ':';
    *p++ = (char)('0' + tm.tm_sec / 10), *p++ = (char)('0' + tm.tm_sec % 10);
    *p++ = ' ', *p++ = 'G', *p++ = 'M', *p++ = 'T';
    *p = '\0';
    return (size_t)(p - out);
}
