/*
 * The start-up's choice of the drain deadline (apps/startup.c): the
 * longest a request of the apps mounted may take, summed from the
 * timeouts of the waits its handler makes one after the other, which
 * --shutdown-timeout must outlast (docs/operating.md, "Signals and
 * drain").
 */
#include <criterion/criterion.h>
#include <string.h>

#include "coring/apps/options.h"
#include "coring/apps/startup.h"
#include "coring/core/clock.h"

#define S CR_NS_PER_S

static uint64_t longest(const app_def *const *apps, size_t n, app_options opts, char *why)
{
    return coring_longest_request_ns(apps, n, &opts, why, 160);
}

Test(startup, apps_that_do_not_wait_need_no_more_than_the_default)
{
    const app_def *apps[] = {&app_hello, &app_todo, &app_embed};
    char why[160] = "x";
    cr_expect_eq(longest(apps, 3, (app_options){0}, why), 0);
    cr_expect_str_eq(why, "");
}

Test(startup, a_database_app_takes_two_queries)
{
    const app_def *users[] = {&app_hello, &app_users};
    char why[160];
    cr_expect_eq(longest(users, 2, (app_options){0}, why), 10 * S, "2 x the 5 s default");
    cr_expect_str_eq(why, "users: 2 x --db-timeout 5 s");
    /* todo's variant on --todo-store postgres, as the start-up mounts it */
    char *argv[] = {"coring", "--todo-store", "postgres", NULL};
    cr_assert_eq(coring_options_parse(app_todo.options, app_todo.num_options, app_todo.config, 3,
                                      argv),
                 0);
    cr_assert_not_null(app_todo.variant);
    const app_def *todo[] = {app_todo.variant()};
    cr_assert_not_null(todo[0]);
    cr_expect_eq(longest(todo, 1, (app_options){.db_timeout_ns = 3 * S}, why), 6 * S);
    cr_expect_str_eq(why, "todo: 2 x --db-timeout 3 s");
}

/* cep's own options, as the command line sets them (the app's rows). */
static void cep_options(int argc, char **argv)
{
    cr_assert_eq(coring_options_parse(app_cep.options, app_cep.num_options, app_cep.config, argc,
                                      argv),
                 0);
}

Test(startup, cep_adds_its_upstream_call)
{
    const app_def *apps[] = {&app_users, &app_cep};
    char why[160];
    cr_expect_eq(longest(apps, 2, (app_options){0}, why), 15 * S, "5 + 5 + 5 s");
    cr_expect_str_eq(why, "cep: 2 x --db-timeout 5 s + --cep-timeout-ms 5000");
    char *argv[] = {"coring", "--cep-timeout-ms", "7000", NULL};
    cep_options(3, argv);
    cr_expect_eq(longest(apps, 2, (app_options){.db_timeout_ns = 2 * S}, why), 11 * S);
    cr_expect_str_eq(why, "cep: 2 x --db-timeout 2 s + --cep-timeout-ms 7000");
}

Test(startup, cep_without_its_upstream_takes_what_users_does)
{
    const app_def *apps[] = {&app_users, &app_cep};
    char why[160];
    char *argv[] = {"coring", "--cep-upstream", "off", NULL};
    cep_options(3, argv);
    cr_expect_eq(longest(apps, 2, (app_options){0}, why), 10 * S, "no upstream call: as users");
}

Test(startup, the_deadline_is_chosen_unless_given)
{
    coring_config cfg = coring_config_default();
    cr_expect_eq(cfg.net.shutdown_timeout_ns, CORING_SHUTDOWN_TIMEOUT_AUTO);
    cr_expect_eq(CORING_SHUTDOWN_TIMEOUT_MIN_NS, 10 * S, "the deadline it had");
}
