/*
 * coring: the server binary. Its apps, and coring_main()
 * (coring/apps/startup.h), which reads the command line and the CORING_
 * variables, mounts the apps chosen with the server's own routes and
 * serves them on every core until SIGINT/SIGTERM.
 */
#include "coring/apps/apps.h"
#include "coring/apps/startup.h"
#include "coring/core/error.h"

/* The apps --apps may name, in --help's order; every one by default. */
static const app_def *const all_apps[] = {&app_hello, &app_todo, &app_users, &app_cep, &app_embed};

int main(int argc, char **argv)
{
    return coring_main(argc, argv, all_apps, cr_countof(all_apps));
}
