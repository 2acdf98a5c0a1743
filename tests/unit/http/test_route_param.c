/*
 * Tests of http_route_param_int64 (http/src/router.c): a path parameter
 * read as a decimal integer in bounds, as every app reads its ids; a table
 * of values and what each gives.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "coring/http/router.h"

/* Parameters {id} = @value, as the router's match leaves them. */
static http_route_params params_of(const char *value)
{
    http_route_params p = {.count = 1};
    p.names[0] = (http_str){"id", 2};
    p.values[0] = (http_str){value, strlen(value)};
    return p;
}

Test(route_param_int64, table)
{
    static const struct {
        const char *value;
        int64_t min, max;
        int ret;
        int64_t want;
    } cases[] = {
        {"1", 1, INT64_MAX, 0, 1},
        {"0042", 1, INT64_MAX, 0, 42},
        {"9223372036854775807", 1, INT64_MAX, 0, INT64_MAX},
        {"9223372036854775808", 1, INT64_MAX, -ERANGE, 0},
        {"99999999999999999999999", 1, INT64_MAX, -ERANGE, 0},
        {"-9223372036854775808", INT64_MIN, 0, 0, INT64_MIN},
        {"-9223372036854775809", INT64_MIN, 0, -ERANGE, 0},
        {"0", 1, INT64_MAX, -ERANGE, 0},
        {"-1", 1, INT64_MAX, -ERANGE, 0},
        {"101", 1, 100, -ERANGE, 0},
        {"", 1, INT64_MAX, -EINVAL, 0},
        {"-", 1, INT64_MAX, -EINVAL, 0},
        {"+1", 1, INT64_MAX, -EINVAL, 0},
        {"1x", 1, INT64_MAX, -EINVAL, 0},
        {" 1", 1, INT64_MAX, -EINVAL, 0},
        {"%31", 1, INT64_MAX, -EINVAL, 0},
        {"0x10", 1, INT64_MAX, -EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        http_route_params p = params_of(cases[i].value);
        int64_t out = -7;
        int ret = http_route_param_int64(&p, "id", cases[i].min, cases[i].max, &out);
        cr_expect_eq(ret, cases[i].ret, "'%s': %d", cases[i].value, ret);
        cr_expect_eq(out, ret == 0 ? cases[i].want : -7, "'%s': %lld", cases[i].value,
                     (long long)out);
    }
}

Test(route_param_int64, no_such_parameter)
{
    http_route_params p = params_of("1");
    int64_t out = -7;
    cr_expect_eq(http_route_param_int64(&p, "other", 1, 9, &out), -ENOENT);
    cr_expect_eq(out, -7);
}
