/*
 * --deadline's value (apps/deadline.c): one duration for every app, or one
 * per app, "off" for none; each app's own default where not named; a
 * mistake refused with why.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "coring/apps/deadline.h"
#include "coring/core/clock.h"

static const app_def *const apps[] = {&app_hello, &app_users, &app_cep, &app_embed};
#define N (sizeof(apps) / sizeof(apps[0]))

static int resolve(const char *spec, uint64_t *out)
{
    char why[160];
    return app_deadline_resolve(spec, apps, N, out, why, sizeof(why));
}

Test(deadline, each_app_keeps_its_own_without_the_option)
{
    uint64_t out[N];
    cr_assert_eq(resolve(NULL, out), 0);
    cr_expect_eq(out[0], 0, "hello waits on nothing");
    cr_expect_eq(out[1], 3 * CR_NS_PER_S);
    cr_expect_eq(out[2], 4 * CR_NS_PER_S);
    cr_expect_eq(out[3], 5 * CR_NS_PER_S);
}

Test(deadline, one_for_every_app)
{
    uint64_t out[N];
    cr_assert_eq(resolve("1.5s", out), 0);
    for (size_t i = 0; i < N; i++)
        cr_expect_eq(out[i], 1500 * CR_NS_PER_MS);
    cr_assert_eq(resolve("250ms", out), 0);
    cr_expect_eq(out[0], 250 * CR_NS_PER_MS);
    cr_assert_eq(resolve("2", out), 0);
    cr_expect_eq(out[3], 2 * CR_NS_PER_S, "a bare number is seconds");
    cr_assert_eq(resolve("off", out), 0);
    for (size_t i = 0; i < N; i++)
        cr_expect_eq(out[i], 0);
}

Test(deadline, per_app_the_others_keep_theirs)
{
    uint64_t out[N];
    cr_assert_eq(resolve("users=2s,cep=500ms,embed=off", out), 0);
    cr_expect_eq(out[0], 0);
    cr_expect_eq(out[1], 2 * CR_NS_PER_S);
    cr_expect_eq(out[2], 500 * CR_NS_PER_MS);
    cr_expect_eq(out[3], 0);
}

Test(deadline, mistakes_are_refused_with_why)
{
    uint64_t out[N];
    char why[160];
    /* clang-format off */
    const char *bad[] = {"", "soon", "-1s", "1h", "0.5ms", "3601s", "users=", "=2s", "users=2x",
                         "users=2s,", "users=2s,,cep=1s", " 2s", "inf", "nan"};
    /* clang-format on */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(app_deadline_syntax(bad[i], why, sizeof(why)), -EINVAL, "'%s' taken", bad[i]);
        cr_expect_eq(resolve(bad[i], out), -EINVAL, "'%s' taken", bad[i]);
    }
    cr_expect_eq(app_deadline_syntax("todo=1s", why, sizeof(why)), 0, "names are not checked yet");
    cr_expect_eq(app_deadline_resolve("todo=1s", apps, N, out, why, sizeof(why)), -EINVAL);
    cr_expect_str_eq(why, "no app 'todo' is mounted");
}
