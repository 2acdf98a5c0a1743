/*
 * UTF-8 well-formedness, as the JSON writer and the JSON log lines check it.
 */
#ifndef CORING_CORE_UTF8_H
#define CORING_CORE_UTF8_H

#include <stddef.h>

/*
 * cr_utf8_sequence_length - the length (2, 3 or 4) of the well-formed
 * multi-byte UTF-8 sequence at @p, of which @avail bytes (at least 1) are
 * there, or 0 if @p[0] does not start one. Per RFC 3629 section 4: no
 * overlong forms (C0, C1, E0 80..9F, F0 80..8F), no surrogates
 * (ED A0..BF), nothing above U+10FFFF (F4 90.., F5..FF), no truncated
 * sequence. ASCII (below 0x80) is the caller's: it returns 0 for it. Any
 * thread; reads at most 4 bytes.
 */
static inline size_t cr_utf8_sequence_length(const unsigned char *p, size_t avail)
{
    unsigned char c = p[0];
    if (c < 0xc2) /* ASCII, a continuation byte, or an overlong 2-byte lead */
        return 0;
    if (c < 0xe0)
        return avail >= 2 && (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c < 0xf0) {
        unsigned char lo = c == 0xe0 ? 0xa0 : 0x80;
        unsigned char hi = c == 0xed ? 0x9f : 0xbf;
        return avail >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 ? 3 : 0;
    }
    if (c < 0xf5) {
        unsigned char lo = c == 0xf0 ? 0x90 : 0x80;
        unsigned char hi = c == 0xf4 ? 0x8f : 0xbf;
        return avail >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xc0) == 0x80 &&
                       (p[3] & 0xc0) == 0x80
                   ? 4
                   : 0;
    }
    return 0;
}

#endif
