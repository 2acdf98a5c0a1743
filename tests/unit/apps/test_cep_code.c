/* CEP validation and normalisation. */
#include "apps/cep/cep_code.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

static int parse(const char *s, char digits[9])
{
    return cep_parse(s, strlen(s), digits);
}

Test(cep_code, accepts_both_spellings)
{
    char d[9], f[10];
    cr_assert_eq(parse("01001000", d), 0);
    cr_expect_str_eq(d, "01001000");
    cr_assert_eq(parse("01001-000", d), 0);
    cr_expect_str_eq(d, "01001000");
    cep_format(d, f);
    cr_expect_str_eq(f, "01001-000");
    cr_expect_eq(cep_key(d), 1001000u);
    cr_assert_eq(parse("99999-999", d), 0);
    cr_expect_eq(cep_key(d), 99999999u);
}

Test(cep_code, rejects_everything_else)
{
    static const char *bad[] = {
        "", "0", "0100100", "010010000", "01001-00", "01001-0000", "0100-1000", "01001_000",
        "01001 000", " 01001000", "01001000 ", "0100100a", "ABCDEFGH", "01001--00", "-01001000",
        "01001000-", "１２３４５６７８", "0100100\xff", "+1001000", "01.001-000",
    };
    char d[9];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse(bad[i], d), -EINVAL, "accepted '%s'", bad[i]);
}

Test(cep_code, embedded_nul_is_rejected)
{
    char d[9];
    cr_expect_eq(cep_parse("0100\0000", 8, d), -EINVAL);
}
