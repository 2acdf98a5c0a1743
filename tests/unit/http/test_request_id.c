/*
 * Request ids: which incoming X-Request-Id values are kept, and that made
 * ids are distinct and of the documented shape.
 */
#include "coring/http/request_id.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

Test(request_id, valid_is_printable_ascii_without_space_up_to_128_bytes)
{
    char id[200];
    memset(id, 'a', sizeof(id));
    cr_expect(http_request_id_valid("abc-123_XYZ", 11));
    cr_expect(http_request_id_valid("!~{}\"'", 6));
    cr_expect(http_request_id_valid(id, 128));
    cr_expect_not(http_request_id_valid(id, 129));
    cr_expect_not(http_request_id_valid("", 0));
    cr_expect_not(http_request_id_valid("a b", 3));
    cr_expect_not(http_request_id_valid("a\tb", 3));
    cr_expect_not(http_request_id_valid("a\x7f", 2));
    cr_expect_not(http_request_id_valid("caf\xc3\xa9", 5));
    cr_expect_not(http_request_id_valid("a\0b", 3));
}

Test(request_id, made_ids_are_valid_distinct_and_shaped)
{
    char a[HTTP_REQUEST_ID_SIZE], b[HTTP_REQUEST_ID_SIZE];
    size_t na = http_request_id_make(a);
    size_t nb = http_request_id_make(b);
    cr_assert_eq(na, 25, "%s", a);
    cr_assert_eq(strlen(a), na);
    cr_assert(http_request_id_valid(a, na));
    cr_assert_eq(a[16], '-');
    cr_assert(strncmp(a, b, 17) == 0, "one prefix per thread: %s %s", a, b);
    cr_assert_eq(nb, na);
    cr_assert_str_neq(a, b);
    cr_assert_str_eq(a + 17, "00000001");
    cr_assert_str_eq(b + 17, "00000002");
}

/* The counter carries like an odometer: f -> 10, ff -> 100. */
Test(request_id, the_counter_carries_in_hex)
{
    char id[HTTP_REQUEST_ID_SIZE];
    for (unsigned n = 1; n <= 0x1000; n++) {
        size_t len = http_request_id_make(id);
        char want[16];
        snprintf(want, sizeof(want), "%08x", n);
        cr_assert_eq(len, 25);
        cr_assert_str_eq(id + 17, want, "id %u: %s", n, id);
    }
}
