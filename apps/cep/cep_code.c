/* CEP validation and normalisation. See cep_code.h. */
#include "cep_code.h"

#include <errno.h>
#include <string.h>

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

int cep_parse(const char *s, size_t len, char digits[9])
{
    size_t o = 0;
    if (len != 8 && len != 9)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (len == 9 && i == 5) {
            if (s[i] != '-')
                return -EINVAL;
            continue;
        }
        if (!is_digit(s[i]))
            return -EINVAL;
        digits[o++] = s[i];
    }
    digits[8] = '\0';
    return 0;
}

void cep_format(const char digits[9], char out[10])
{
    memcpy(out, digits, 5);
    out[5] = '-';
    memcpy(out + 6, digits + 5, 3);
    out[9] = '\0';
}

uint32_t cep_key(const char digits[9])
{
    uint32_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v * 10 + (uint32_t)(digits[i] - '0');
    return v;
}
