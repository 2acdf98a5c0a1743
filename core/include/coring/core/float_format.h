/*
 * Shortest round-trip decimal text for a float (IEEE 754 binary32): the
 * fewest significant digits that read back (strtof, or any correctly
 * rounding reader: JSON parsers, Python's float32 conversion) as the same
 * float, the digits from Google's double-conversion
 * (DoubleToStringConverter::DoubleToAscii, SHORTEST_SINGLE: the Grisu3
 * algorithm with a bignum fallback; Debian's libdouble-conversion-dev).
 */
#ifndef CORING_CORE_FLOAT_FORMAT_H
#define CORING_CORE_FLOAT_FORMAT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes cr_float_shortest may write, with no NUL: "-1.23456789e-38" is 15. */
#define CR_FLOAT_SHORTEST_MAX 16

/*
 * cr_float_shortest - write finite @v at @out (CR_FLOAT_SHORTEST_MAX bytes
 * of room; no NUL added) in the JSON number grammar (RFC 8259 section 6):
 * an optional '-', the shortest digits that round-trip, in whichever of
 * the plain ("0.00123", "1500") or exponent ("1.5e-7", "1e21") forms is
 * shorter (the plain one on a tie), so never longer than printf's "%.9g";
 * zero is "0", negative zero "-0". Returns the bytes written, or 0 when @v
 * is NaN or infinite (JSON has no such numbers: the caller writes null).
 * Locale-independent; no allocation; any thread.
 */
size_t cr_float_shortest(float v, char *out);

#ifdef __cplusplus
}
#endif

#endif
