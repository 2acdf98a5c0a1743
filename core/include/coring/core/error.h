/*
 * Error conventions shared by every layer.
 *
 * Functions that can fail return a negative errno value (-ENOMEM, -EINVAL,
 * -ETIMEDOUT, ...) and 0 or a non-negative count on success, as liburing
 * does. There is no global error state. Where errno does not fit, a layer
 * defines a small enum of its own and says so in its header.
 */
#ifndef CORING_CORE_ERROR_H
#define CORING_CORE_ERROR_H

#include <errno.h>
#include <string.h>

/* Likely/unlikely hints for the hot path. */
#define cr_likely(x) __builtin_expect(!!(x), 1)
#define cr_unlikely(x) __builtin_expect(!!(x), 0)

/* Number of elements of a fixed-size array. */
#define cr_countof(a) (sizeof(a) / sizeof((a)[0]))

/*
 * cr_strerror - the message for a negative errno value.
 * @err: a value returned by a coring function (negative errno; positive
 *       values are accepted too).
 * Returns a static string; thread-safe (uses strerrordesc_np semantics).
 */
const char *cr_strerror(int err);

#endif
