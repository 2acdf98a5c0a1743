/*
 * Tests of the command line as a table (apps/options.c, apps/config.c):
 * docs/configuration.md's table of flags is the rows' (the same flags in
 * the same order, each with its variable and its default as the row says
 * it); and each kind of row reads its value into its field, from a flag or
 * from a CORING_ variable, refusing what is out of bounds.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coring/apps/startup.h"
#include "coring/core/clock.h"

#ifndef CORING_SOURCE_DIR
#error "the unit tests are built with CORING_SOURCE_DIR (tests/CMakeLists.txt)"
#endif

/* The cells of the rows of docs/configuration.md's "Every flag" table. */
typedef struct doc_row {
    char flag[64];     /* the name, without "--" and without a value */
    char variable[64]; /* `CORING_X` or — */
    char fallback[256];
} doc_row;

/* Copy cell @k (0: the first) of markdown table row @line into @out,
 * trimmed; false if the row has fewer cells. */
static bool cell(const char *line, int k, char *out, size_t len)
{
    const char *p = line;
    for (int i = 0; i <= k; i++) {
        p = strchr(p, '|');
        if (!p)
            return false;
        p++;
    }
    const char *e = strchr(p, '|');
    if (!e)
        return false;
    while (p < e && *p == ' ')
        p++;
    while (e > p && e[-1] == ' ')
        e--;
    snprintf(out, len, "%.*s", (int)(e - p), p);
    return true;
}

static size_t read_doc_rows(doc_row *rows, size_t max)
{
    FILE *f = fopen(CORING_SOURCE_DIR "/docs/configuration.md", "r");
    cr_assert(f != NULL, "docs/configuration.md: %s", strerror(errno));
    char line[4096];
    bool in_table = false;
    size_t n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "| flag | variable | default |", 29) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table || strncmp(line, "| ---", 5) == 0)
            continue;
        if (strncmp(line, "| `--", 5) != 0)
            break;
        cr_assert(n < max, "more rows in docs/configuration.md than expected");
        doc_row *r = &rows[n++];
        char first[128];
        cell(line, 0, first, sizeof(first));
        snprintf(r->flag, sizeof(r->flag), "%.*s", (int)strcspn(first + 3, "`[ "), first + 3);
        cell(line, 1, r->variable, sizeof(r->variable));
        cell(line, 2, r->fallback, sizeof(r->fallback));
    }
    fclose(f);
    return n;
}

/* The page's table is the rows': flag, variable and default, in order. */
Test(options, documented_as_the_table_says)
{
    static doc_row rows[128];
    size_t n = read_doc_rows(rows, 128);
    cr_expect_eq(n, coring_config_num_options, "docs/configuration.md lists %zu flags, the table %zu",
                 n, coring_config_num_options);
    for (size_t i = 0; i < n && i < coring_config_num_options; i++) {
        const coring_option *o = &coring_config_options[i];
        cr_expect_str_eq(rows[i].flag, o->name, "row %zu of docs/configuration.md", i);
        char want[80] = "—";
        if (o->kind != CORING_OPTION_COMMAND) {
            char var[64];
            coring_option_variable(o->name, var, sizeof(var));
            snprintf(want, sizeof(want), "`%s`", var);
        }
        cr_expect_str_eq(rows[i].variable, want, "--%s: its variable in docs/configuration.md",
                         o->name);
        cr_expect_str_eq(rows[i].fallback, o->default_doc,
                         "--%s: its default in docs/configuration.md", o->name);
    }
}

/* coring_config_parse on a copy of @args (NULL-terminated, argv[0] added). */
static int parse(coring_config *cfg, const char *const *args)
{
    static char *argv[64];
    int argc = 0;
    argv[argc++] = "coring";
    for (size_t i = 0; args[i]; i++)
        argv[argc++] = (char *)args[i];
    argv[argc] = NULL;
    return coring_config_parse(cfg, argc, argv);
}

/* Each kind of row: the value lands in its field, in its unit. */
Test(options, each_kind_sets_its_field)
{
    coring_config cfg = coring_config_default();
    static const char *const args[] = {
        "--port", "9000",                /* NUMBER, 2 bytes */
        "--stack-size=128",              /* NUMBER with a scale: KiB */
        "--keepalive-timeout", "7",      /* seconds, as ns */
        "--drain-grace", "1.5",          /* SECONDS, fractions */
        "--pin", "on",                   /* ON_OFF */
        "--db-coalesce", "off",          /* ON_OFF inverted: db_coalesce_off */
        "--db-routing", "pack",          /* CHOICE into an unsigned */
        "--todo-store", "postgres",      /* CHOICE into a bool */
        "--embed-placement", "idle",     /* CHOICE into an enum */
        "--apps", "hello,todo",          /* STRING */
        "--access-log",                  /* SWITCH */
        "--recv-buffers", "64",          /* CUSTOM */
        "--seed-users",                  /* an optional value, not given */
        "--check-config",                /* COMMAND */
        NULL,
    };
    cr_assert_eq(parse(&cfg, args), 0);
    cr_expect_eq(cfg.net.port, 9000);
    cr_expect_eq(cfg.net.stack_size, 128 * 1024);
    cr_expect_eq(cfg.http.keepalive_timeout_ns, 7 * CR_NS_PER_S);
    cr_expect_eq(cfg.net.drain_grace_ns, 1500 * CR_NS_PER_MS);
    cr_expect(cfg.net.pin);
    cr_expect(cfg.apps.db_coalesce_off);
    cr_expect_eq(cfg.apps.db_routing, 2);
    cr_expect(cfg.todo_postgres);
    cr_expect_eq(cfg.embed.placement, APP_EMBED_PLACEMENT_IDLE);
    cr_expect_str_eq(cfg.mount, "hello,todo");
    cr_expect(cfg.http.access_log);
    cr_expect_eq(cfg.net.provided_buffers, 64);
    cr_expect_eq(cfg.apps.seed_users, 10000);
    cr_expect(cfg.check_only);
    /* Untouched: the defaults. */
    coring_config d = coring_config_default();
    cr_expect_eq(cfg.net.threads, d.net.threads);
    cr_expect_eq(cfg.http.header_timeout_ns, d.http.header_timeout_ns);
    cr_expect(!cfg.apps.cep_upstream_off);
}

/* --seed-users N and --seed-users=N take the number. */
Test(options, optional_value)
{
    coring_config cfg = coring_config_default();
    static const char *const spaced[] = {"--seed-users", "5", NULL};
    cr_assert_eq(parse(&cfg, spaced), 0);
    cr_expect_eq(cfg.apps.seed_users, 5);
    static const char *const joined[] = {"--seed-users=7", NULL};
    cr_assert_eq(parse(&cfg, joined), 0);
    cr_expect_eq(cfg.apps.seed_users, 7);
}

/* A variable sets its row's field unless the flag is given; empty is unset. */
Test(options, variables)
{
    setenv("CORING_PORT", "8123", 1);
    setenv("CORING_THREADS", "3", 1);
    setenv("CORING_HEADER_TIMEOUT", "", 1);
    setenv("CORING_EMBED_INT8", "yes", 1);
    setenv("CORING_CEP_UPSTREAM", "off", 1);
    coring_config cfg = coring_config_default();
    static const char *const args[] = {"--threads", "2", NULL};
    cr_assert_eq(parse(&cfg, args), 0);
    cr_expect_eq(cfg.net.port, 8123);
    cr_expect_eq(cfg.net.threads, 2, "the flag wins over CORING_THREADS");
    cr_expect_eq(cfg.http.header_timeout_ns, coring_config_default().http.header_timeout_ns);
    cr_expect(cfg.embed.int8);
    cr_expect(cfg.apps.cep_upstream_off);
    cr_expect_str_eq(coring_option_source("--port"), "CORING_PORT=8123");
    cr_expect_str_eq(coring_option_source("--threads"), "--threads");
}

/* Out of bounds or not a word of the row: refused with exit status 2. */
Test(options, refused, .init = cr_redirect_stderr)
{
    static const char *const cases[][3] = {
        {"--port", "65536", NULL},   {"--stack-size", "8", NULL}, {"--drain-grace", "1.5x", NULL},
        {"--pin", "maybe", NULL},    {"--db-routing", "x", NULL}, {"--recv-buffers", "3", NULL},
        {"--no-such-flag", NULL},    {"--access-log=1", NULL},    {"--port", NULL},
        {"--check-config", "extra"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        coring_config cfg = coring_config_default();
        cr_expect_eq(parse(&cfg, cases[i]), CORING_OPTIONS_REFUSED, "case %zu: %s", i,
                     cases[i][0]);
    }
}

/* An app's own rows and settings, beside the server's. */
typedef struct demo_settings {
    unsigned limit;
    bool verbose;
    const char *format;
} demo_settings;

static int demo_list(void *config, const char *value)
{
    ((demo_settings *)config)->format = value;
    return 0;
}

static const coring_option demo_rows[] = {
    {.name = "demo-limit", .value = "N", .kind = CORING_OPTION_NUMBER,
     .offset = offsetof(demo_settings, limit), .size = sizeof(unsigned), .min = 1, .max = 9},
    {.name = "demo-verbose", .kind = CORING_OPTION_SWITCH,
     .offset = offsetof(demo_settings, verbose), .size = sizeof(bool)},
    {.name = "demo-list", .value = "FORMAT", .kind = CORING_OPTION_COMMAND, .implicit = "text",
     .set = demo_list},
};

/* Several tables: each row sets its own table's configuration, from a
 * flag or a variable, and the server's rows still set the server's. */
Test(options, tables_each_set_their_own)
{
    coring_config cfg = coring_config_default();
    demo_settings demo = {0};
    coring_option_table tables[] = {
        {.rows = coring_config_options, .count = coring_config_num_options, .config = &cfg},
        {.title = "the demo app", .rows = demo_rows, .count = 3, .config = &demo},
    };
    setenv("CORING_DEMO_VERBOSE", "on", 1);
    char *argv[] = {"coring", "--port", "9001", "--demo-limit", "7", "--demo-list", NULL};
    cr_assert_eq(coring_options_parse_tables(tables, 2, 6, argv), 0);
    unsetenv("CORING_DEMO_VERBOSE");
    cr_expect_eq(cfg.net.port, 9001);
    cr_expect_eq(demo.limit, 7);
    cr_expect(demo.verbose, "CORING_DEMO_VERBOSE=on sets the app's switch");
    cr_expect_str_eq(demo.format, "text", "a command without its value gets the implicit one");

    char *with_value[] = {"coring", "--demo-list=json", NULL};
    cr_assert_eq(coring_options_parse_tables(tables, 2, 2, with_value), 0);
    cr_expect_str_eq(demo.format, "json");
}

/* A command's value comes only with '=': the next argument stays an
 * argument (refused), unlike a number's. */
Test(options, command_value_only_with_equals, .init = cr_redirect_stderr)
{
    demo_settings demo = {0};
    coring_option_table table = {.rows = demo_rows, .count = 3, .config = &demo};
    char *argv[] = {"coring", "--demo-list", "json", NULL};
    cr_expect_eq(coring_options_parse_tables(&table, 1, 3, argv), CORING_OPTIONS_REFUSED);
}

/* Two rows of one name, in two tables: the program's mistake, said. */
Test(options, one_name_twice, .init = cr_redirect_stderr)
{
    demo_settings a = {0}, b = {0};
    coring_option_table tables[] = {
        {.rows = demo_rows, .count = 3, .config = &a},
        {.title = "the second app", .rows = demo_rows, .count = 1, .config = &b},
    };
    char *argv[] = {"coring", NULL};
    cr_expect_eq(coring_options_parse_tables(tables, 2, 1, argv), -EEXIST);
    fflush(stderr);
    cr_expect_stderr_eq_str("coring: option --demo-limit is declared twice, again by the second app\n");
}
