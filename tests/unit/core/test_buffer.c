/*
 * cr_buf_shrink: a buffer holding at most the floor is cut back to the
 * floor (freed when empty); one holding more is left alone.
 */
#include <criterion/criterion.h>

#include "coring/core/buffer.h"

Test(buffer, shrink_frees_an_empty_buffer_over_the_floor)
{
    cr_buf b = CR_BUF_INIT;
    cr_assert_eq(cr_buf_reserve(&b, 1 << 20), 0);
    cr_buf_shrink(&b, 4096);
    cr_expect_null(b.data);
    cr_expect_eq(b.cap, 0);
    cr_expect_eq(b.len, 0);
    cr_assert_eq(cr_buf_append(&b, "x", 1), 0, "usable after");
    cr_buf_free(&b);
}

Test(buffer, shrink_cuts_a_small_content_back_to_the_floor)
{
    cr_buf b = CR_BUF_INIT;
    cr_assert_eq(cr_buf_reserve(&b, 1 << 20), 0);
    cr_assert_eq(cr_buf_append(&b, "hello", 5), 0);
    cr_buf_shrink(&b, 4096);
    cr_expect_eq(b.cap, 4096);
    cr_expect_eq(b.len, 5);
    cr_expect_eq(memcmp(b.data, "hello", 5), 0);
    cr_buf_free(&b);
}

Test(buffer, shrink_leaves_a_buffer_over_the_floor_or_within_it)
{
    cr_buf b = CR_BUF_INIT;
    char big[8192] = {0};
    cr_assert_eq(cr_buf_append(&b, big, sizeof(big)), 0);
    size_t cap = b.cap;
    cr_buf_shrink(&b, 4096); /* holds more than the floor: still gathering */
    cr_expect_eq(b.cap, cap);
    cr_expect_eq(b.len, sizeof(big));
    cr_buf_reset(&b);
    cr_buf_shrink(&b, 1 << 20); /* within the floor: kept for reuse */
    cr_expect_eq(b.cap, cap);
    cr_expect_not_null(b.data);
    cr_buf_free(&b);
}
