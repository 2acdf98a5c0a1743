/*
 * Shortest round-trip floats (coring/core/float_format.h). The digits come
 * from double-conversion, a C++ library (the one Chromium's V8 and Firefox
 * use for Number.prototype.toString); their placement is ours, so that the
 * text is JSON's and the shorter of the plain and exponent forms. This and
 * json.cpp are the C++ files of coring: nothing here throws or allocates.
 */
#include "coring/core/float_format.h"

#include <double-conversion/double-to-string.h>

#include <cmath>
#include <cstring>

namespace
{

using double_conversion::DoubleToStringConverter;

/* Decimal digits of 0 < @v < 100. */
inline size_t exponent_digits(int v)
{
    return v >= 10 ? 2 : 1;
}

} // namespace

extern "C" size_t cr_float_shortest(float v, char *out)
{
    if (!std::isfinite(v))
        return 0;
    char *p = out;
    if (std::signbit(v))
        *p++ = '-';
    if (v == 0.0f) {
        *p++ = '0';
        return (size_t)(p - out);
    }
    /* v = digits * 10^(point - n): at most 9 digits for a float. */
    char digits[DoubleToStringConverter::kBase10MaximalLength + 1];
    bool sign;
    int n;
    int point;
    DoubleToStringConverter::DoubleToAscii(v, DoubleToStringConverter::SHORTEST_SINGLE, 0, digits,
                                           sizeof(digits), &sign, &n, &point);
    /* Lengths without the sign: plain, and d[.ddd]e[-]x. Float exponents
     * stay within -45..38, two digits. */
    int e = point - 1;
    size_t plain = point <= 0   ? 2 + (size_t)(-point) + (size_t)n /* 0.000ddd */
                   : point >= n ? (size_t)point                    /* ddd000 */
                                : (size_t)n + 1;                   /* dd.ddd */
    size_t exponent = (size_t)n + (n > 1) + 1 + (e < 0) + exponent_digits(e < 0 ? -e : e);
    if (plain <= exponent) {
        if (point <= 0) {
            *p++ = '0';
            *p++ = '.';
            std::memset(p, '0', (size_t)(-point));
            p += -point;
            std::memcpy(p, digits, (size_t)n);
            p += n;
        } else if (point >= n) {
            std::memcpy(p, digits, (size_t)n);
            p += n;
            std::memset(p, '0', (size_t)(point - n));
            p += point - n;
        } else {
            std::memcpy(p, digits, (size_t)point);
            p += point;
            *p++ = '.';
            std::memcpy(p, digits + point, (size_t)(n - point));
            p += n - point;
        }
        return (size_t)(p - out);
    }
    *p++ = digits[0];
    if (n > 1) {
        *p++ = '.';
        std::memcpy(p, digits + 1, (size_t)(n - 1));
        p += n - 1;
    }
    *p++ = 'e';
    if (e < 0) {
        *p++ = '-';
        e = -e;
    }
    if (e >= 10)
        *p++ = (char)('0' + e / 10);
    *p++ = (char)('0' + e % 10);
    return (size_t)(p - out);
}
