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
#include "coring/apps/stock.h"
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

/* The rows in docs/configuration.md's order: the server's settings, each
 * stock app's own options in the coring binary's order, the commands. */
static size_t expected_rows(const coring_option **out, size_t max)
{
    static const app_def *const apps[] = {CORING_STOCK_APPS};
    size_t n = 0, settings = 0;
    while (settings < coring_config_num_options &&
           coring_config_options[settings].kind != CORING_OPTION_COMMAND)
        settings++;
    for (size_t i = 0; i < settings && n < max; i++)
        out[n++] = &coring_config_options[i];
    for (size_t a = 0; a < sizeof(apps) / sizeof(apps[0]); a++)
        for (size_t i = 0; i < apps[a]->num_options && n < max; i++)
            out[n++] = &apps[a]->options[i];
    for (size_t i = settings; i < coring_config_num_options && n < max; i++)
        out[n++] = &coring_config_options[i];
    return n;
}

/* The page's table is the rows': flag, variable and default, in order. */
Test(options, documented_as_the_table_says)
{
    static doc_row rows[128];
    static const coring_option *want[128];
    size_t n = read_doc_rows(rows, 128);
    size_t m = expected_rows(want, 128);
    cr_expect_eq(n, m, "docs/configuration.md lists %zu flags, the tables %zu", n, m);
    for (size_t i = 0; i < n && i < m; i++) {
        const coring_option *o = want[i];
        cr_expect_str_eq(rows[i].flag, o->name, "row %zu of docs/configuration.md", i);
        char var_want[80] = "—";
        if (o->kind != CORING_OPTION_COMMAND) {
            char var[64];
            coring_option_variable(o->name, var, sizeof(var));
            snprintf(var_want, sizeof(var_want), "`%s`", var);
        }
        cr_expect_str_eq(rows[i].variable, var_want, "--%s: its variable in docs/configuration.md",
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
    static const app_def *const apps[] = {CORING_STOCK_APPS};
    cfg->available = apps;
    cfg->num_available = sizeof(apps) / sizeof(apps[0]);
    return coring_config_parse(cfg, argc, argv);
}

/* Each kind of row of the server's: the value lands in its field, in its
 * unit (the kinds only apps use: tables_each_set_their_own). */
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
        "--apps", "hello,todo",          /* STRING */
        "--access-log",                  /* SWITCH */
        "--recv-buffers", "64",          /* CUSTOM */
        "--todo-store", "postgres",      /* an app's: taken beside the server's */
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
    cr_expect_str_eq(cfg.mount, "hello,todo");
    cr_expect(cfg.http.access_log);
    cr_expect_eq(cfg.net.provided_buffers, 64);
    cr_expect(cfg.check_only);
    /* Untouched: the defaults. */
    coring_config d = coring_config_default();
    cr_expect_eq(cfg.net.threads, d.net.threads);
    cr_expect_eq(cfg.http.header_timeout_ns, d.http.header_timeout_ns);
}

/* A variable sets its row's field unless the flag is given; empty is unset. */
Test(options, variables)
{
    setenv("CORING_PORT", "8123", 1);
    setenv("CORING_THREADS", "3", 1);
    setenv("CORING_HEADER_TIMEOUT", "", 1);
    setenv("CORING_ACCESS_LOG", "yes", 1);
    setenv("CORING_DB_COALESCE", "off", 1);
    coring_config cfg = coring_config_default();
    static const char *const args[] = {"--threads", "2", NULL};
    cr_assert_eq(parse(&cfg, args), 0);
    cr_expect_eq(cfg.net.port, 8123);
    cr_expect_eq(cfg.net.threads, 2, "the flag wins over CORING_THREADS");
    cr_expect_eq(cfg.http.header_timeout_ns, coring_config_default().http.header_timeout_ns);
    cr_expect(cfg.http.access_log);
    cr_expect(cfg.apps.db_coalesce_off);
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
typedef enum demo_color { DEMO_RED, DEMO_GREEN, DEMO_BLUE } demo_color;

typedef struct demo_settings {
    unsigned limit;
    bool verbose;
    const char *format;
    bool postgres;           /* CHOICE of two words into a bool */
    demo_color color;        /* CHOICE into an enum */
    unsigned long long seed; /* NUMBER with an optional value */
} demo_settings;

static const char *const demo_stores[] = {"memory", "postgres"};
static const char *const demo_colors[] = {"red", "green", "blue"};

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
    {.name = "demo-store", .value = "STORE", .kind = CORING_OPTION_CHOICE,
     CORING_OPTION_FIELD(demo_settings, postgres), .words = demo_stores, .num_words = 2},
    {.name = "demo-color", .value = "C", .kind = CORING_OPTION_CHOICE,
     CORING_OPTION_FIELD(demo_settings, color), .words = demo_colors, .num_words = 3},
    {.name = "demo-seed", .value = "N", .kind = CORING_OPTION_NUMBER,
     CORING_OPTION_FIELD(demo_settings, seed), .min = 1, .max = 100, .implicit = "10"},
};

#define DEMO_ROWS (sizeof(demo_rows) / sizeof(demo_rows[0]))

/* The kinds only apps use: CHOICE into a bool and into an enum, a number
 * whose value is optional (not given, --x N, --x=N). */
Test(options, app_kinds)
{
    demo_settings demo = {0};
    coring_option_table table = {.rows = demo_rows, .count = DEMO_ROWS, .config = &demo};
    char *argv[] = {"coring", "--demo-store", "postgres", "--demo-color=blue", "--demo-seed", NULL};
    cr_assert_eq(coring_options_parse_tables(&table, 1, 5, argv), 0);
    cr_expect(demo.postgres);
    cr_expect_eq(demo.color, DEMO_BLUE);
    cr_expect_eq(demo.seed, 10, "the implicit value");
    char *spaced[] = {"coring", "--demo-seed", "5", NULL};
    cr_assert_eq(coring_options_parse_tables(&table, 1, 3, spaced), 0);
    cr_expect_eq(demo.seed, 5);
    char *joined[] = {"coring", "--demo-seed=7", NULL};
    cr_assert_eq(coring_options_parse_tables(&table, 1, 2, joined), 0);
    cr_expect_eq(demo.seed, 7);
}

/* Several tables: each row sets its own table's configuration, from a
 * flag or a variable, and the server's rows still set the server's. */
Test(options, tables_each_set_their_own)
{
    coring_config cfg = coring_config_default();
    demo_settings demo = {0};
    coring_option_table tables[] = {
        {.rows = coring_config_options, .count = coring_config_num_options, .config = &cfg},
        {.title = "the demo app", .rows = demo_rows, .count = DEMO_ROWS, .config = &demo},
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
    coring_option_table table = {.rows = demo_rows, .count = DEMO_ROWS, .config = &demo};
    char *argv[] = {"coring", "--demo-list", "json", NULL};
    cr_expect_eq(coring_options_parse_tables(&table, 1, 3, argv), CORING_OPTIONS_REFUSED);
}

/* Two rows of one name, in two tables: the program's mistake, said. */
Test(options, one_name_twice, .init = cr_redirect_stderr)
{
    demo_settings a = {0}, b = {0};
    coring_option_table tables[] = {
        {.rows = demo_rows, .count = DEMO_ROWS, .config = &a},
        {.title = "the second app", .rows = demo_rows, .count = 1, .config = &b},
    };
    char *argv[] = {"coring", NULL};
    cr_expect_eq(coring_options_parse_tables(tables, 2, 1, argv), -EEXIST);
    fflush(stderr);
    cr_expect_stderr_eq_str("coring: option --demo-limit is declared twice, again by the second app\n");
}
