/*
 * Brazilian postal codes (CEP): eight digits, written 01001000 or
 * 01001-000. Validation and normalisation only; no I/O.
 */
#ifndef CORING_APPS_CEP_CODE_H
#define CORING_APPS_CEP_CODE_H

#include <stddef.h>
#include <stdint.h>

/*
 * cep_parse - accept exactly "DDDDDDDD" or "DDDDD-DDD" (ASCII digits).
 * @s, @len: the text, not NUL-terminated (e.g. a path parameter).
 * @digits: receives the eight digits and a NUL.
 * Returns 0, or -EINVAL for anything else (wrong length, letters, spaces,
 * a hyphen elsewhere, empty).
 */
int cep_parse(const char *s, size_t len, char digits[9]);

/* cep_format - "01001-000" from the eight @digits; @out gets 9 chars and a NUL. */
void cep_format(const char digits[9], char out[10]);

/* cep_key - the eight @digits as a number (for hashing and lookups). */
uint32_t cep_key(const char digits[9]);

#endif
