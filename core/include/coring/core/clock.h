/*
 * Monotonic and wall clocks.
 *
 * All durations in coring are nanoseconds in a uint64_t unless a name says
 * otherwise (`_ms`, `_s`).
 */
#ifndef CORING_CORE_CLOCK_H
#define CORING_CORE_CLOCK_H

#include <stdint.h>
#include <stddef.h>

#define CR_NS_PER_US 1000ull
#define CR_NS_PER_MS 1000000ull
#define CR_NS_PER_S 1000000000ull

/*
 * cr_clock_now_ns - CLOCK_MONOTONIC in nanoseconds (vDSO, no system call
 * on Linux). Any thread. Never fails.
 */
uint64_t cr_clock_now_ns(void);

/*
 * cr_clock_http_date - format the current wall-clock time as an HTTP date,
 * the IMF-fixdate of RFC 9110 section 5.6.7 ("Sun, 06 Nov 1994 08:49:37 GMT").
 * @out: at least 30 bytes; receives 29 characters and a NUL.
 * Returns 29, the length written. Any thread.
 */
size_t cr_clock_http_date(char out[30]);

#endif
