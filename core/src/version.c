/*
 * The version of the library a program runs on (coring/core/version.h):
 * compiled into the library, so that a program can compare it with the
 * CORING_VERSION_* macros it was built with.
 */
#include "coring/core/version.h"

const char *coring_version(void)
{
    return CORING_VERSION_STRING;
}

unsigned coring_version_number(void)
{
    return CORING_VERSION_NUMBER;
}
