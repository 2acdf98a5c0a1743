/*
 * coring: the server binary, built as any service on coring is: its apps
 * (coring's own, coring/apps/stock.h) and coring_main()
 * (coring/apps/startup.h), which reads the command line and the CORING_
 * variables, mounts the apps chosen with the server's own routes and
 * serves them on every core until SIGINT/SIGTERM.
 */
#include "coring/apps/startup.h"
#include "coring/apps/stock.h"
#include "coring/core/error.h"

int main(int argc, char **argv)
{
    static const app_def *const apps[] = {CORING_STOCK_APPS};
    return coring_main(argc, argv, apps, cr_countof(apps));
}
