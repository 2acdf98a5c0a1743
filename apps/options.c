/*
 * The option table at work (coring/apps/options.h): one row per option
 * becomes getopt_long(3)'s table, the CORING_ variable looked up for it,
 * the check of its value and the message when it is wrong, and its lines
 * of --help. Adding an option is adding a row; docs/configuration.md lists
 * them (tests/unit/apps/test_options.c holds the page to the rows).
 *
 * The variables are turned into options and put in front of the real
 * ones, so that one parser checks both. A message about an option names
 * its variable through coring_option_source(); for messages that do not
 * ask (a check that prints the flag's name itself), a failing exit
 * (status 2) lists the variables that were used.
 */
/* on_exit(3) needs _GNU_SOURCE, which the build defines. */
#include "coring/apps/options.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ENV_PREFIX "CORING_"

/* Width of --help's flag column, its indent included. */
#define FLAG_COLUMN 27

/* getopt_long's value for row i: past every character option. */
#define ROW_VALUE(i) (256 + (int)(i))

/* One option taken from the environment. */
typedef struct env_setting {
    const char *option; /* its row's name */
    char *label;        /* "CORING_PORT=8080", for messages */
} env_setting;

/* A row of one of the tables given, with the configuration it sets. */
typedef struct table_row {
    const coring_option *row;
    void *config;
} table_row;

/* What was taken, for messages; and the vectors handed to getopt_long,
 * kept here for the process's life (their strings with them). */
static struct {
    env_setting *settings;
    size_t count;
    bool named; /* a message named a variable itself */
    char **argv;
    struct option *long_options;
    table_row *rows; /* every table's rows, in order: getopt_long's index */
    size_t num_rows;
} taken;

void coring_option_variable(const char *name, char *buf, size_t len)
{
    if (!len)
        return;
    size_t n = 0;
    for (const char *p = ENV_PREFIX; *p && n + 1 < len; p++)
        buf[n++] = *p;
    for (const char *p = name; *p && n + 1 < len; p++)
        buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[n] = '\0';
}

/* getopt_long's has_arg for @o. */
static int has_arg(const coring_option *o)
{
    if (o->kind == CORING_OPTION_SWITCH)
        return no_argument;
    if (o->kind == CORING_OPTION_COMMAND)
        return o->implicit ? optional_argument : no_argument;
    return o->implicit ? optional_argument : required_argument;
}

/* 1 for a word that means on, 0 for off, -1 for anything else. */
static int boolean(const char *s)
{
    static const char *const on[] = {"1", "true", "yes", "on"},
                             *const off[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* The rows of the @num @tables in one list, and getopt_long's table for
 * them (both kept in taken). Returns 0, -ENOMEM, or -EEXIST after a
 * message when two rows have one name (a program's mistake, not the
 * user's). */
static int collect_rows(const coring_option_table *tables, size_t num)
{
    size_t count = 0;
    for (size_t t = 0; t < num; t++)
        count += tables[t].count;
    free(taken.rows); /* a parse before this one's */
    free(taken.long_options);
    taken.rows = calloc(count ? count : 1, sizeof(*taken.rows));
    taken.long_options = calloc(count + 1, sizeof(*taken.long_options));
    if (!taken.rows || !taken.long_options)
        return -ENOMEM;
    taken.num_rows = 0;
    for (size_t t = 0; t < num; t++)
        for (size_t i = 0; i < tables[t].count; i++) {
            const coring_option *o = &tables[t].rows[i];
            for (size_t j = 0; j < taken.num_rows; j++)
                if (strcmp(taken.rows[j].row->name, o->name) == 0) {
                    fprintf(stderr, "coring: option --%s is declared twice%s%s\n", o->name,
                            tables[t].title ? ", again by " : "",
                            tables[t].title ? tables[t].title : "");
                    return -EEXIST;
                }
            size_t k = taken.num_rows++;
            taken.rows[k] = (table_row){o, tables[t].config};
            taken.long_options[k] = (struct option){o->name, has_arg(o), NULL, ROW_VALUE(k)};
        }
    return 0;
}

/* Which rows the command line @argc/@argv gives: marks given[i] for row i.
 * Uses getopt_long on a copy (it permutes). */
static int scan_command_line(int argc, char **argv, const struct option *options, bool *given)
{
    char **copy = malloc(((size_t)argc + 1) * sizeof(*copy));
    if (!copy)
        return -ENOMEM;
    memcpy(copy, argv, ((size_t)argc + 1) * sizeof(*copy));
    int saved_opterr = opterr, index;
    opterr = 0;
    optind = 0;
    for (;;) {
        index = -1;
        if (getopt_long(argc, copy, "", options, &index) == -1)
            break;
        if (index >= 0)
            given[index] = true;
    }
    opterr = saved_opterr;
    optind = 0;
    free(copy);
    return 0;
}

static void list_on_failure(int status, void *arg)
{
    (void)arg;
    if (status != 2 || taken.named || !taken.count)
        return;
    fprintf(stderr, "coring: options from the environment:");
    for (size_t i = 0; i < taken.count; i++)
        fprintf(stderr, " %s", taken.settings[i].label);
    fprintf(stderr, "\n");
}

/*
 * Put the options that variables set in front of the command line: for
 * each row (of taken.rows) that is a setting and that the command line
 * does not give, a set, non-empty variable becomes "--name=value", or
 * "--name" for a switch that is on (or an optional value given as an on
 * word). *@argc and *@argv are replaced by the new vector. Returns 0,
 * CORING_OPTIONS_REFUSED after a message (a switch's variable that is no
 * boolean word), or -ENOMEM.
 */
static int apply_environment(int *argc, char ***argv)
{
    size_t num = taken.num_rows;
    bool *given = calloc(num ? num : 1, sizeof(*given));
    char **out = calloc((size_t)*argc + num + 1, sizeof(*out));
    taken.argv = out; /* reachable from here on, on every path */
    taken.settings = calloc(num ? num : 1, sizeof(*taken.settings));
    taken.count = 0;
    taken.named = false;
    if (!given || !out || !taken.settings ||
        scan_command_line(*argc, *argv, taken.long_options, given) < 0) {
        free(given);
        return -ENOMEM;
    }
    int n = 0;
    out[n++] = (*argv)[0];
    for (size_t i = 0; i < num; i++) {
        const coring_option *o = taken.rows[i].row;
        if (given[i] || o->kind == CORING_OPTION_COMMAND)
            continue;
        char name[128];
        coring_option_variable(o->name, name, sizeof(name));
        const char *value = getenv(name);
        if (!value || !*value)
            continue; /* empty: unset */
        int on = boolean(value);
        bool optional = has_arg(o) == optional_argument;
        if (has_arg(o) == no_argument && on < 0) {
            fprintf(stderr, "coring: %s=%s: expected 1, true, yes or on (or 0, false, no, off)\n",
                    name, value);
            free(given);
            return CORING_OPTIONS_REFUSED;
        }
        bool digit = isdigit((unsigned char)value[0]);
        if ((has_arg(o) == no_argument && on == 0) || (optional && on == 0 && !digit))
            continue; /* off */
        size_t len = strlen(o->name) + strlen(value) + 4;
        char *arg = malloc(len);
        size_t label_len = strlen(name) + strlen(value) + 2;
        char *label = malloc(label_len);
        if (!arg || !label) {
            free(arg);
            free(label);
            free(given);
            return -ENOMEM;
        }
        if (has_arg(o) == no_argument || (optional && on == 1 && !digit))
            snprintf(arg, len, "--%s", o->name);
        else
            snprintf(arg, len, "--%s=%s", o->name, value);
        snprintf(label, label_len, "%s=%s", name, value);
        out[n++] = arg;
        taken.settings[taken.count++] = (env_setting){.option = o->name, .label = label};
    }
    for (int i = 1; i < *argc; i++)
        out[n++] = (*argv)[i];
    out[n] = NULL;
    free(given);
    static bool listed;
    if (taken.count && !listed)
        listed = on_exit(list_on_failure, NULL) == 0;
    *argc = n;
    *argv = out;
    return 0;
}

const char *coring_option_source(const char *flag)
{
    const char *name = flag && flag[0] == '-' && flag[1] == '-' ? flag + 2 : flag;
    for (size_t i = 0; name && i < taken.count; i++)
        if (strcmp(taken.settings[i].option, name) == 0) {
            taken.named = true;
            return taken.settings[i].label;
        }
    return flag;
}

int coring_option_number(const char *flag, const char *s, unsigned long long min,
                         unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v < min || v > max) {
        fprintf(stderr, "coring: %s: expected a number from %llu to %llu, got '%s'\n",
                coring_option_source(flag), min, max, s);
        if (strncmp(s, "tcp://", 6) == 0)
            fprintf(stderr, "coring: that looks like a Kubernetes service link (a Service named "
                            "coring): set enableServiceLinks: false in the pod spec\n");
        return CORING_OPTIONS_REFUSED;
    }
    *out = v;
    return 0;
}

/* A decimal number of seconds in [0, max], fractions allowed ("1.5"), into
 * *@ns nanoseconds; else a message and CORING_OPTIONS_REFUSED. */
static int seconds_ns(const char *flag, const char *s, unsigned long long max, uint64_t *ns)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= 0 && v <= (double)max) ||
        s[strspn(s, "0123456789.")] != '\0') {
        fprintf(stderr, "coring: %s: expected seconds from 0 to %llu (e.g. 1.5), got '%s'\n",
                coring_option_source(flag), max, s);
        return CORING_OPTIONS_REFUSED;
    }
    *ns = (uint64_t)(v * 1e9 + 0.5);
    return 0;
}

/* The index of @s among the @n @words into *@index; else a message naming
 * them all (as "a, b or c") and CORING_OPTIONS_REFUSED. */
static int choice(const char *flag, const char *s, const char *const *words, unsigned n,
                  unsigned *index)
{
    for (unsigned k = 0; k < n; k++)
        if (strcmp(s, words[k]) == 0) {
            *index = k;
            return 0;
        }
    fprintf(stderr, "coring: %s: expected ", coring_option_source(flag));
    for (unsigned k = 0; k < n; k++)
        fprintf(stderr, "%s%s", words[k], k + 2 < n ? ", " : k + 2 == n ? " or " : "");
    fprintf(stderr, ", got '%s'\n", s);
    return CORING_OPTIONS_REFUSED;
}

/* Store @v in the unsigned field of @size bytes at @field. */
static void store(void *field, size_t size, unsigned long long v)
{
    switch (size) {
    case 1: *(uint8_t *)field = (uint8_t)v; break;
    case 2: *(uint16_t *)field = (uint16_t)v; break;
    case 4: *(uint32_t *)field = (uint32_t)v; break;
    default: *(uint64_t *)field = (uint64_t)v; break;
    }
}

/* Read @value (NULL for a switch or a command) by row @o into @config. */
static int set_row(const coring_option *o, void *config, const char *value)
{
    char flag[64];
    snprintf(flag, sizeof(flag), "--%s", o->name);
    void *field = (char *)config + o->offset;
    unsigned long long n;
    unsigned index;
    int err = 0;
    switch (o->kind) {
    case CORING_OPTION_NUMBER:
        err = coring_option_number(flag, value, o->min, o->max, &n);
        if (!err)
            store(field, o->size, n * (o->scale ? o->scale : 1));
        return err;
    case CORING_OPTION_SECONDS: {
        uint64_t ns;
        err = seconds_ns(flag, value, o->max, &ns);
        if (!err)
            store(field, o->size, ns);
        return err;
    }
    case CORING_OPTION_STRING:
        *(const char **)field = value;
        return 0;
    case CORING_OPTION_SWITCH:
        *(bool *)field = true;
        return 0;
    case CORING_OPTION_ON_OFF: {
        static const char *const on_off[] = {"on", "off"};
        err = choice(flag, value, on_off, 2, &index);
        if (!err)
            *(bool *)field = (index == 0) != o->inverted;
        return err;
    }
    case CORING_OPTION_CHOICE:
        err = choice(flag, value, o->words, o->num_words, &index);
        if (!err)
            store(field, o->size, index);
        return err;
    case CORING_OPTION_CUSTOM:
    case CORING_OPTION_COMMAND:
        return o->set(config, value);
    }
    return 0;
}

/* Say what is wrong with the option getopt_long refused in @arg (as it
 * stands in argv): unknown, missing its value, or given one it takes none. */
static void bad_option(const struct option *options, const char *arg)
{
    const char *name = arg[0] == '-' && arg[1] == '-' ? arg + 2 : NULL;
    size_t len = name ? strcspn(name, "=") : 0;
    const struct option *o = NULL;
    for (const struct option *p = options; name && p->name; p++)
        if (strlen(p->name) == len && strncmp(p->name, name, len) == 0)
            o = p;
    if (!o)
        fprintf(stderr, "coring: unknown option '%s'\n", arg);
    else if (o->has_arg == required_argument)
        fprintf(stderr, "coring: option '--%s' needs a value\n", o->name);
    else
        fprintf(stderr, "coring: option '--%s' takes no value\n", o->name);
    fprintf(stderr, "Try 'coring --help'.\n");
}

int coring_options_parse_tables(const coring_option_table *tables, size_t num, int argc,
                                char **argv)
{
    int err = collect_rows(tables, num);
    if (err)
        return err;
    err = apply_environment(&argc, &argv);
    if (err)
        return err;
    opterr = 0;
    optind = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "", taken.long_options, NULL)) != -1) {
        size_t k = (size_t)(opt - ROW_VALUE(0));
        if (opt < ROW_VALUE(0) || k >= taken.num_rows) {
            bad_option(taken.long_options, argv[optind - 1]);
            return CORING_OPTIONS_REFUSED;
        }
        const coring_option *o = taken.rows[k].row;
        const char *value = optarg;
        if (o->implicit && !value) {
            /* --name, --name=N or --name N (a number's only: a command's
             * value is given with '=') */
            if (o->kind == CORING_OPTION_NUMBER && optind < argc && argv[optind][0] >= '0' &&
                argv[optind][0] <= '9')
                value = argv[optind++];
            else
                value = o->implicit;
        }
        err = set_row(o, taken.rows[k].config, value);
        if (err)
            return err;
    }
    if (optind < argc) {
        fprintf(stderr, "coring: unexpected argument '%s'\nTry 'coring --help'.\n", argv[optind]);
        return CORING_OPTIONS_REFUSED;
    }
    return 0;
}

int coring_options_parse(const coring_option *table, size_t num, void *config, int argc,
                         char **argv)
{
    coring_option_table one = {.rows = table, .count = num, .config = config};
    return coring_options_parse_tables(&one, 1, argc, argv);
}

void coring_options_help(FILE *out, const coring_option *table, size_t num)
{
    for (size_t i = 0; i < num; i++) {
        const coring_option *o = &table[i];
        char flag[96];
        if (!o->value)
            snprintf(flag, sizeof(flag), "--%s", o->name);
        else if (o->implicit)
            snprintf(flag, sizeof(flag), "--%s[=%s]", o->name, o->value);
        else
            snprintf(flag, sizeof(flag), "--%s %s", o->name, o->value);
        const char *line = o->help;
        size_t len = strcspn(line, "\n");
        fprintf(out, "  %-*s  %.*s\n", FLAG_COLUMN - 4, flag, (int)len, line);
        line += len + (line[len] == '\n');
        if (o->kind != CORING_OPTION_COMMAND) {
            /* The variable goes in the flag column of the help's next line
             * when it fits there, else on a line of its own. */
            char var[96], entry[160];
            coring_option_variable(o->name, var, sizeof(var));
            snprintf(entry, sizeof(entry), "%s=%s", var, o->value ? o->value : "1");
            len = strcspn(line, "\n");
            if (len > 0 && 2 + strlen(entry) + 1 <= FLAG_COLUMN) {
                fprintf(out, "  %-*s%.*s\n", FLAG_COLUMN - 2, entry, (int)len, line);
                line += len + (line[len] == '\n');
            } else {
                fprintf(out, "  %s\n", entry);
            }
        }
        while (*line) {
            len = strcspn(line, "\n");
            fprintf(out, "%*s%.*s\n", FLAG_COLUMN, "", (int)len, line);
            line += len + (line[len] == '\n');
        }
    }
}
