/*
 * libFuzzer target: CEP validation and normalisation (apps/cep/cep_code.c).
 *
 * Checks: cep_parse accepts only 8 digits or 5 digits, '-', 3 digits; what
 * it accepts formats to "DDDDD-DDD", which parses back to the same digits,
 * and cep_key is the number those digits spell.
 */
#include "cep/cep_code.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char digits[9], again[9], formatted[10];
    if (cep_parse((const char *)data, size, digits) != 0)
        return 0;
    if (size != 8 && size != 9)
        abort();
    uint32_t key = 0;
    for (int i = 0; i < 8; i++) {
        if (digits[i] < '0' || digits[i] > '9')
            abort();
        key = key * 10 + (uint32_t)(digits[i] - '0');
    }
    if (digits[8] != '\0' || cep_key(digits) != key)
        abort();
    cep_format(digits, formatted);
    if (strlen(formatted) != 9 || formatted[5] != '-')
        abort();
    if (cep_parse(formatted, 9, again) != 0 || memcmp(again, digits, 9) != 0)
        abort();
    return 0;
}
