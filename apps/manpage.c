/*
 * coring-manpage: writes the man page coring(1) to stdout, at build time
 * (cmake/library.cmake), from what --help itself prints from: the server's
 * option rows (coring_config_options), the stock apps' own rows and the
 * environment variables they read (coring/apps/stock.h), and the
 * version. An option added, changed or removed is in the page at the next
 * build: it cannot drift from the binary. The prose around the rows is
 * here. Written in man(7) macros.
 */
#include "coring/apps/startup.h"
#include "coring/apps/stock.h"
#include "coring/core/error.h"
#include "coring/core/version.h"

#include <stdio.h>
#include <string.h>

/* @s as roff text: '-' as \-, '\' as \e, a line never starting with a
 * control character; @len bytes, '\n' joined into the paragraph. */
static void text(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i] == '\n' ? ' ' : s[i];
        if (c == '-')
            fputs("\\-", stdout);
        else if (c == '\\')
            fputs("\\e", stdout);
        else if ((c == '.' || c == '\'') && (i == 0 || s[i - 1] == '\n'))
            fputs("\\&.", stdout);
        else
            putchar(c);
    }
}

static void puts_text(const char *s)
{
    text(s, strlen(s));
}

/* One row: the flag and its value, the help, its variable. */
static void option(const coring_option *o)
{
    fputs(".TP\n\\fB", stdout);
    puts_text("--");
    puts_text(o->name);
    fputs("\\fR", stdout);
    if (o->value) {
        fputs(o->implicit ? "[=\\fI" : " \\fI", stdout);
        puts_text(o->value);
        fputs(o->implicit ? "\\fR]" : "\\fR", stdout);
    }
    putchar('\n');
    puts_text(o->help);
    putchar('\n');
    if (o->kind != CORING_OPTION_COMMAND) {
        char var[96];
        coring_option_variable(o->name, var, sizeof(var));
        fputs(".br\nVariable: \\fB", stdout);
        puts_text(var);
        fputs("\\fR\n", stdout);
    }
}

/* An app's environment lines as --help prints them ("  NAME   text", then
 * lines of text indented): one .TP entry per variable. */
static void environment(const char *lines)
{
    for (const char *line = lines; *line;) {
        size_t len = strcspn(line, "\n");
        const char *p = line;
        while (p < line + len && *p == ' ')
            p++;
        if (p - line == 2) { /* a variable's first line */
            size_t name = strcspn(p, " \n");
            fputs(".TP\n.B ", stdout);
            text(p, name);
            putchar('\n');
            p += name;
            while (p < line + len && *p == ' ')
                p++;
        }
        text(p, (size_t)(line + len - p));
        putchar('\n');
        line += len + (line[len] == '\n');
    }
}

int main(void)
{
    static const app_def *const apps[] = {CORING_STOCK_APPS};
    size_t settings = 0;
    while (settings < coring_config_num_options &&
           coring_config_options[settings].kind != CORING_OPTION_COMMAND)
        settings++;

    printf(".TH CORING 1 \"\" \"coring %s\" \"User Commands\"\n", coring_version());
    fputs(".SH NAME\ncoring \\- HTTP/1.1 server with one io_uring per CPU core\n"
          ".SH SYNOPSIS\n.B coring\n[\\fIoptions\\fR]\n"
          ".SH DESCRIPTION\n"
          ".B coring\n"
          "serves HTTP/1.1 on one io_uring per CPU core: one worker thread per core, each with\n"
          "its own ring, listener, connections and stackful coroutines, and PostgreSQL\n"
          "through pipelined libpq on the same ring. It mounts the apps chosen with\n"
          ".B \\-\\-apps\n"
          "among those it was built with, beside its own routes: /metrics, /livez, /readyz,\n"
          "/openapi.json and /docs.\n"
          ".PP\n"
          "Every option that is a setting can also be set by an environment variable:\n"
          "\\-\\-foo\\-bar is CORING_FOO_BAR. The flag wins over the variable, the variable over\n"
          "the default; an empty variable is unset. Switches take 1, true, yes or on, and\n"
          "0, false, no or off.\n"
          ".SH OPTIONS\n",
          stdout);
    for (size_t i = 0; i < settings; i++)
        option(&coring_config_options[i]);
    for (size_t a = 0; a < cr_countof(apps); a++) {
        if (!apps[a]->num_options)
            continue;
        printf(".SS \"Options of the %s app\"\n", apps[a]->name);
        fputs("Taken whether the app is mounted or not.\n", stdout);
        for (size_t i = 0; i < apps[a]->num_options; i++)
            option(&apps[a]->options[i]);
    }
    fputs(".SH COMMANDS\n", stdout);
    for (size_t i = settings; i < coring_config_num_options; i++)
        option(&coring_config_options[i]);
    fputs(".SH APPS\n", stdout);
    for (size_t a = 0; a < cr_countof(apps); a++) {
        printf(".TP\n.B %s\n", apps[a]->name);
        puts_text(apps[a]->summary);
        fputs(apps[a]->database ? "\n.br\nNeeds PostgreSQL (DATABASE_URL).\n" : "\n", stdout);
    }
    fputs(".SH ENVIRONMENT\n"
          ".TP\n.B DATABASE_URL\n"
          "libpq URI or conninfo of PostgreSQL, required when an app on it is mounted\n"
          "(\\fBcoring \\-\\-list\\-apps\\fR says which).\n"
          ".TP\n.B DATABASE_READ_URL\n"
          "optional libpq URI or conninfo of a read replica: the apps' reads go there\n"
          "while it is up, else to DATABASE_URL.\n",
          stdout);
    for (size_t a = 0; a < cr_countof(apps); a++)
        if (apps[a]->environment)
            environment(apps[a]->environment);
    fputs(".SH EXIT STATUS\n"
          "0 after a clean shutdown (a drain on SIGINT or SIGTERM) and after a command;\n"
          "1 when the start failed (the log says why); 2 for a refused option or variable\n"
          "(with a message).\n"
          ".SH SIGNALS\n"
          "SIGINT or SIGTERM: /readyz answers 503 at once, the listeners keep accepting for\n"
          "\\-\\-drain\\-grace, then the requests in flight get \\-\\-shutdown\\-timeout to\n"
          "finish. A second signal stops at once.\n"
          ".SH FILES\n"
          ".TP\n.I /etc/coring/coring.env\n"
          "the environment of the systemd unit coring.service (EnvironmentFile=).\n"
          ".SH SEE ALSO\n"
          "The manual is the docs/ folder of coring's sources: docs/operating.md,\n"
          "docs/configuration.md (every option and variable), docs/library.md (a service\n"
          "of your own on libcoring).\n",
          stdout);
    return ferror(stdout) ? 1 : 0;
}
