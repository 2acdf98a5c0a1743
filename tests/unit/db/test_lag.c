/*
 * Replication lag (db/src/lag.c): WAL positions read in pg_lsn's text
 * form, and the bound that sends reads to the primary.
 */
#include "db/src/lag.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

static int parse(const char *s, uint64_t *out)
{
    return db_lsn_parse(s, strlen(s), out);
}

Test(lag, lsn_text)
{
    uint64_t v = 0;
    cr_expect_eq(parse("0/0", &v), 0);
    cr_expect_eq(v, 0);
    cr_expect_eq(parse("16/B374D848", &v), 0);
    cr_expect_eq(v, 0x16B374D848ull);
    cr_expect_eq(parse("ffffffff/FFFFFFFF", &v), 0);
    cr_expect_eq(v, UINT64_MAX);
    cr_expect_eq(parse("0/3000148", &v), 0);
    cr_expect_eq(v, 0x3000148ull);
    static const char *const bad[] = {"", "/", "0/", "/0", "12", "1/2/3", "g/0", "0/1 ",
                                      "100000000/0", "0/-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse(bad[i], &v), -EINVAL, "'%s' taken", bad[i]);
}

Test(lag, bound)
{
    cr_expect_not(db_lag_exceeds(5000, 0), "no bound");
    cr_expect_not(db_lag_exceeds(-1, 1), "unknown: the replica keeps its reads");
    cr_expect_not(db_lag_exceeds(100, 100000000), "at the bound");
    cr_expect(db_lag_exceeds(101, 100000000));
    cr_expect_not(db_lag_exceeds(0, 1));
}

Test(lag, a_replica_that_replayed_all_the_primary_wrote_does_not_lag)
{
    /* A standby started again behind an idle primary: its last replayed
     * transaction is old, but nothing is left to replay. */
    cr_expect_eq(db_lag_ms(18458, 0), 0);
    cr_expect_eq(db_lag_ms(18458, 4096), 18458, "WAL left to replay: the age counts");
    cr_expect_eq(db_lag_ms(18458, -1), 18458, "the primary unknown: the age counts");
    cr_expect_eq(db_lag_ms(-1, 4096), -1);
}
