/*
 * Tests of coring/core/version.h: the library answers the version its
 * headers name, and the number orders versions as the string does.
 */
#include <criterion/criterion.h>
#include <stdio.h>

#include "coring/core/version.h"

Test(version, library_and_headers_agree)
{
    cr_expect_str_eq(coring_version(), CORING_VERSION_STRING);
    cr_expect_eq(coring_version_number(), CORING_VERSION_NUMBER);
    char parts[32];
    snprintf(parts, sizeof(parts), "%d.%d.%d", CORING_VERSION_MAJOR, CORING_VERSION_MINOR,
             CORING_VERSION_PATCH);
    cr_expect_str_eq(parts, CORING_VERSION_STRING);
}

Test(version, number_orders_versions)
{
    cr_expect_eq(CORING_VERSION_NUMBER >> 16, CORING_VERSION_MAJOR);
    cr_expect_eq((CORING_VERSION_NUMBER >> 8) & 0xff, CORING_VERSION_MINOR);
    cr_expect_eq(CORING_VERSION_NUMBER & 0xff, CORING_VERSION_PATCH);
}
