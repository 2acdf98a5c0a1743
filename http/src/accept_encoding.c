/*
 * Accept-Encoding negotiation (RFC 9110 section 12.5.3): each field line
 * parsed into a table of q-values, then the choice among the codings the
 * server offers. Kept apart from the compressors (compress.c) so that the
 * rules are pure and tested alone, with a table of field values.
 */
#include "coring/http/accept_encoding.h"

#include <errno.h>
#include <string.h>
#include <strings.h>

static const char *const coding_names[HTTP_CODING_COUNT] = {"identity", "zstd", "br", "gzip"};

const char *http_coding_name(http_coding coding)
{
    return (unsigned)coding < HTTP_CODING_COUNT ? coding_names[coding] : NULL;
}

void http_accept_encoding_init(http_accept_encoding *ae)
{
    for (int i = 0; i < HTTP_CODING_COUNT; i++)
        ae->q[i] = -1;
    ae->any = -1;
    ae->present = false;
    ae->invalid = false;
}

/* tchar of RFC 9110 section 5.6.2. */
static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* The coding named by the @len bytes at @name; -1 for one coring does
 * not produce. */
static int coding_of(const char *name, size_t len)
{
    for (int i = 0; i < HTTP_CODING_COUNT; i++)
        if (strlen(coding_names[i]) == len && strncasecmp(name, coding_names[i], len) == 0)
            return i;
    if (len == 6 && strncasecmp(name, "x-gzip", 6) == 0) /* RFC 9110 section 8.4.1.3 */
        return HTTP_CODING_GZIP;
    return -1;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ) (RFC 9110
 * section 12.4.2) at *@p, up to @end: its value in thousandths, *@p moved
 * past it; -1 when it is not one. */
static int parse_qvalue(const char **p, const char *end)
{
    const char *s = *p;
    if (s == end || (*s != '0' && *s != '1'))
        return -1;
    int whole = *s++ - '0';
    int frac = 0, digits = 0;
    if (s < end && *s == '.') {
        s++;
        while (s < end && *s >= '0' && *s <= '9' && digits < 3) {
            frac = frac * 10 + (*s++ - '0');
            digits++;
        }
        if (s < end && *s >= '0' && *s <= '9')
            return -1; /* a fourth decimal */
    }
    for (; digits < 3; digits++)
        frac *= 10;
    if (whole == 1 && frac != 0)
        return -1;
    *p = s;
    return whole * 1000 + frac;
}

int http_accept_encoding_parse(http_accept_encoding *ae, const char *value, size_t len)
{
    const char *p = value, *end = value + len;
    ae->present = true;
    for (;;) {
        /* Empty list elements are allowed and skipped (section 5.6.1). */
        while (p < end && (is_ows(*p) || *p == ','))
            p++;
        if (p == end)
            return 0;
        const char *name = p;
        while (p < end && is_tchar((unsigned char)*p))
            p++;
        size_t name_len = (size_t)(p - name);
        if (name_len == 0)
            goto bad;
        int q = 1000;
        while (p < end && is_ows(*p))
            p++;
        if (p < end && *p == ';') {
            p++;
            while (p < end && is_ows(*p))
                p++;
            if (end - p < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=')
                goto bad;
            p += 2;
            q = parse_qvalue(&p, end);
            if (q < 0)
                goto bad;
            while (p < end && is_ows(*p))
                p++;
        }
        if (p < end && *p != ',')
            goto bad;
        int16_t *slot = NULL;
        if (name_len == 1 && name[0] == '*') {
            slot = &ae->any;
        } else {
            int c = coding_of(name, name_len);
            if (c >= 0)
                slot = &ae->q[c];
        }
        if (slot && *slot < 0)
            *slot = (int16_t)q;
    }
bad:
    ae->invalid = true;
    return -EINVAL;
}

http_coding http_accept_encoding_choose(const http_accept_encoding *ae, unsigned offered)
{
    if (!ae->present || ae->invalid)
        return HTTP_CODING_IDENTITY;
    http_coding best = HTTP_CODING_IDENTITY;
    int best_q = 0;
    for (int c = HTTP_CODING_IDENTITY + 1; c < HTTP_CODING_COUNT; c++) {
        if (!(offered & HTTP_CODING_BIT(c)))
            continue;
        int q = ae->q[c] >= 0 ? ae->q[c] : ae->any;
        if (q > best_q) {
            best = (http_coding)c;
            best_q = q;
        }
    }
    /* identity: always the fall-back (see the header); it wins over a
     * coding only when the client rates it higher, by name or through "*"
     * (not named at all, it is acceptable but unrated: section 12.5.3). */
    int identity_q = ae->q[HTTP_CODING_IDENTITY] >= 0 ? ae->q[HTTP_CODING_IDENTITY]
                     : ae->any >= 0                   ? ae->any
                                                      : 0;
    if (best != HTTP_CODING_IDENTITY && identity_q > best_q)
        return HTTP_CODING_IDENTITY;
    return best;
}

int http_codings_parse(const char *text, unsigned *mask)
{
    if (strcmp(text, "on") == 0) {
        *mask = HTTP_CODINGS_ALL;
        return 0;
    }
    if (strcmp(text, "off") == 0) {
        *mask = 0;
        return 0;
    }
    unsigned m = 0;
    const char *p = text;
    for (;;) {
        while (is_ows(*p))
            p++;
        const char *name = p;
        while (*p && *p != ',' && !is_ows(*p))
            p++;
        int c = coding_of(name, (size_t)(p - name));
        if (c <= HTTP_CODING_IDENTITY)
            return -EINVAL; /* empty, unknown, or identity (always offered) */
        m |= HTTP_CODING_BIT(c);
        while (is_ows(*p))
            p++;
        if (!*p)
            break;
        if (*p++ != ',')
            return -EINVAL;
    }
    *mask = m;
    return 0;
}
