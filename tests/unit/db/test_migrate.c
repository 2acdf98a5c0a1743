/*
 * Tests of db_migrate's checks of the sets it is given (db/src/migrate.c),
 * which run before it connects: an owner missing or given twice, a file
 * without its number, numbers of an owner that do not increase. Each is
 * -EINVAL with a reason, and no connection is tried (the conninfo names
 * no server).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "coring/db/admin.h"

static const db_migration two[] = {{"0001_a.sql", "SELECT 1"}, {"0002_b.sql", "SELECT 2"}};
static const db_migration backwards[] = {{"0002_b.sql", "SELECT 2"}, {"0001_a.sql", "SELECT 1"}};
static const db_migration twice[] = {{"0001_a.sql", "SELECT 1"}, {"1_again.sql", "SELECT 1"}};
static const db_migration unnumbered[] = {{"a.sql", "SELECT 1"}};

/* db_migrate on @sets: its return, and its reason in @why. */
static int migrate(const db_migration_set *sets, size_t n, char *why, size_t len)
{
    int applied = -1;
    int ret = db_migrate("host=/nonexistent dbname=none connect_timeout=1", sets, n, &applied, why,
                         len);
    cr_expect_eq(applied, 0);
    return ret;
}

Test(migrate, refused_before_connecting)
{
    static const struct {
        db_migration_set sets[2];
        size_t n;
        const char *why;
    } cases[] = {
        {{{NULL, two, 2}}, 1, "migrations without an owner (the app they belong to)"},
        {{{"", two, 2}}, 1, "migrations without an owner (the app they belong to)"},
        {{{"a", two, 2}, {"a", two, 1}}, 2, "migrations of a given twice"},
        {{{"a", backwards, 2}}, 1, "migration a/0001_a.sql: numbers must increase (after 2)"},
        {{{"a", twice, 2}}, 1, "migration a/1_again.sql: numbers must increase (after 1)"},
        {{{"a", unnumbered, 1}}, 1, "migration a/a.sql: the name must start with its number"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[256] = "";
        cr_expect_eq(migrate(cases[i].sets, cases[i].n, why, sizeof(why)), -EINVAL, "case %zu", i);
        cr_expect_str_eq(why, cases[i].why, "case %zu", i);
    }
}

/* Valid sets go on to connect, which fails here: -ECONNREFUSED. */
Test(migrate, valid_sets_connect)
{
    db_migration_set sets[] = {{"a", two, 2}, {"b", two, 2}};
    char why[256] = "";
    cr_expect_eq(migrate(sets, 2, why, sizeof(why)), -ECONNREFUSED);
    cr_expect(strncmp(why, "cannot connect", 14) == 0, "%s", why);
}
