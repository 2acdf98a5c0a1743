/*
 * Shortest round-trip floats (coring/core/float_format.h) over every
 * exponent with many mantissas each, the subnormals, and the edges: each
 * text reads back (strtof) as the same float, is a JSON number (RFC 8259
 * section 6), is never longer than "%.9g", and has the fewest significant
 * digits that round-trip ("%.{n-1}e" of it does not). The embed app's own
 * outputs are checked against numpy in tests/embed/test_embed_limits.py.
 */
#include "coring/core/buffer.h"
#include "coring/core/float_format.h"
#include "coring/core/json_writer.h"

#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* RFC 8259 section 6: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [-+]? [0-9]+)? */
static bool is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

/* Significant digits of a JSON number's text. */
static int significant_digits(const char *s)
{
    int n = 0;
    bool leading = true;
    int trailing_zeros = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9')
            continue;
        if (leading && *s == '0')
            continue;
        leading = false;
        n++;
        trailing_zeros = *s == '0' ? trailing_zeros + 1 : 0;
    }
    return n - trailing_zeros; /* "1500": 2 */
}

static unsigned long checked;

static void check(float v)
{
    char text[CR_FLOAT_SHORTEST_MAX + 1];
    size_t n = cr_float_shortest(v, text);
    cr_assert(n > 0 && n <= CR_FLOAT_SHORTEST_MAX, "%a: %zu bytes", (double)v, n);
    text[n] = '\0';
    cr_assert(is_json_number(text), "%a: \"%s\" is not a JSON number", (double)v, text);
    float back = strtof(text, NULL);
    cr_assert(to_bits(back) == to_bits(v), "%a (%.9g): \"%s\" reads back as %a", (double)v,
              (double)v, text, (double)back);
    char g[32];
    int gn = snprintf(g, sizeof(g), "%.9g", (double)v);
    cr_assert(n <= (size_t)gn, "%a: \"%s\" longer than %%.9g's \"%s\"", (double)v, text, g);
    int digits = significant_digits(text);
    if (digits > 1) {
        /* one digit fewer, correctly rounded, does not round-trip */
        char shorter[48];
        snprintf(shorter, sizeof(shorter), "%.*e", digits - 2, (double)v);
        cr_assert(to_bits(strtof(shorter, NULL)) != to_bits(v),
                  "%a: \"%s\" is not the shortest: \"%s\" reads back too", (double)v, text,
                  shorter);
    }
    checked++;
}

static void check_both_signs(float v)
{
    check(v);
    check(-v);
}

/* A small xorshift: the same sample on every run. */
static uint32_t next_random(uint32_t *state)
{
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *state = x;
}

Test(float_format, every_exponent_many_mantissas)
{
    uint32_t state = 2463534242u;
    for (uint32_t exponent = 1; exponent < 255; exponent++) {
        for (uint32_t m = 0; m < 64; m++) { /* the first and the last mantissas */
            check_both_signs(from_bits(exponent << 23 | m));
            check_both_signs(from_bits(exponent << 23 | (0x7fffffu - m)));
        }
        for (uint32_t i = 0; i < 4096; i++) /* and a random 4096 between */
            check_both_signs(from_bits(exponent << 23 | (next_random(&state) & 0x7fffffu)));
    }
    cr_log_info("%lu floats checked", checked);
}

Test(float_format, subnormals)
{
    uint32_t state = 88675123u;
    for (uint32_t m = 1; m < 4096; m++) {
        check_both_signs(from_bits(m));
        check_both_signs(from_bits(0x7fffffu - m + 1));
    }
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t m = next_random(&state) & 0x7fffffu;
        if (m)
            check_both_signs(from_bits(m));
    }
}

Test(float_format, edges_and_exact_texts)
{
    static const struct {
        float v;
        const char *text;
    } cases[] = {
        {0.0f, "0"},
        {-0.0f, "-0"},
        {1.0f, "1"},
        {-1.5f, "-1.5"},
        {0.1f, "0.1"},
        {0.3f, "0.3"},
        {1500.0f, "1500"},
        {123456.0f, "123456"},
        {1e7f, "1e7"},
        {12345678.0f, "12345678"},
        {0.001f, "1e-3"},
        {0.01f, "0.01"},
        {0.0001f, "1e-4"},
        {0.00012f, "1.2e-4"},
        {1e-7f, "1e-7"},
        {1e21f, "1e21"},
        {FLT_MAX, "3.4028235e38"},
        {FLT_MIN, "1.1754944e-38"},
        {FLT_TRUE_MIN, "1e-45"},
        {-FLT_TRUE_MIN, "-1e-45"},
        {0.044281036f, "0.044281036"},
        {16777216.0f, "16777216"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[CR_FLOAT_SHORTEST_MAX + 1];
        size_t n = cr_float_shortest(cases[i].v, text);
        text[n] = '\0';
        cr_expect_str_eq(text, cases[i].text, "%a", (double)cases[i].v);
        check(cases[i].v);
    }
    for (int e = -45; e <= 38; e++) /* the powers of ten */
        check_both_signs((float)pow(10.0, e));
}

Test(float_format, nan_and_infinity_are_not_numbers)
{
    char text[CR_FLOAT_SHORTEST_MAX];
    cr_expect_eq(cr_float_shortest(NAN, text), 0);
    cr_expect_eq(cr_float_shortest(-NAN, text), 0);
    cr_expect_eq(cr_float_shortest(INFINITY, text), 0);
    cr_expect_eq(cr_float_shortest(-INFINITY, text), 0);
}

Test(float_format, json_writer_arrays_and_null)
{
    cr_buf b = CR_BUF_INIT;
    cr_json_writer w;
    cr_json_writer_init(&w, &b);
    cr_json_object_begin(&w);
    cr_json_key(&w, "v", 1);
    const float v[] = {0.1f, -2.0f, NAN, INFINITY, 1e-7f, 0.044281036f};
    cr_json_float_array(&w, v, 6);
    cr_json_key(&w, "empty", 5);
    cr_json_float_array(&w, v, 0);
    cr_json_key(&w, "one", 3);
    cr_json_float(&w, 0.25f);
    cr_json_key(&w, "nan", 3);
    cr_json_float(&w, NAN);
    cr_json_object_end(&w);
    cr_assert_not(b.failed);
    cr_expect(b.len ==
                      strlen("{\"v\":[0.1,-2,null,null,1e-7,0.044281036],\"empty\":[],\"one\":0.25,"
                             "\"nan\":null}") &&
                  memcmp(b.data,
                         "{\"v\":[0.1,-2,null,null,1e-7,0.044281036],\"empty\":[],\"one\":0.25,"
                         "\"nan\":null}",
                         b.len) == 0,
              "%.*s", (int)b.len, b.data);
    cr_buf_free(&b);
}
