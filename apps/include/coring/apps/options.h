/*
 * Command-line options as a table: each option is one row (its flag, its
 * value's placeholder, its --help text, the default as
 * docs/configuration.md states it, and how its value is parsed and where
 * it is stored), and the rows drive everything an option needs: the
 * getopt_long(3) table, the lookup of its environment variable, the
 * checks and messages, and --help. A test holds docs/configuration.md to
 * the rows.
 *
 * Configuration by environment: every option that is a setting can also
 * be set by a variable, named by one rule, --foo-bar -> CORING_FOO_BAR
 * (upper case, '-' -> '_'). Precedence: the flag, then the variable, then
 * the default. A variable that is set but empty counts as unset. Switches
 * (options without a value) take 1, true, yes, on to turn them on and 0,
 * false, no, off to leave them off, in any case; an option with an optional
 * value (--seed-users[=N]) takes those words for "given without a value" /
 * "not given", anything else as its value. The variables are turned into
 * options put in front of the command line's own, so that one parser
 * checks both; a message about an option names its variable
 * ("CORING_PORT=abc") when the value came from there, and a refused start
 * (exit status 2) whose message named only a flag lists the variables that
 * were used.
 */
#ifndef CORING_APPS_OPTIONS_H
#define CORING_APPS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* How a row's value is read, and what it sets in the configuration. */
typedef enum coring_option_kind {
    CORING_OPTION_NUMBER,  /* a whole decimal number in [min, max], times scale, into an
                            * unsigned field of 1, 2, 4 or 8 bytes */
    CORING_OPTION_SECONDS, /* decimal seconds in [0, max], fractions allowed ("1.5"), into a
                            * uint64_t of nanoseconds */
    CORING_OPTION_STRING,  /* the value itself (not copied: argv's or the environment's
                            * string, which live as long as the process), into a const char * */
    CORING_OPTION_SWITCH,  /* no value: sets a bool */
    CORING_OPTION_ON_OFF,  /* "on" or "off" into a bool (true for on; for off with
                            * inverted, a field that says "off") */
    CORING_OPTION_CHOICE,  /* one of words[]: its index into an unsigned field (or an enum,
                            * or a bool for two words) */
    CORING_OPTION_CUSTOM,  /* set() reads the value */
    CORING_OPTION_COMMAND, /* not a setting but a command (--help): no variable; set(). A
                            * command with an implicit value takes one with '='
                            * (--list-apps=json), else it gets the implicit one */
} coring_option_kind;

/* A row's .offset and .size for field @field of settings struct @type:
 * {.name = "limit", ..., CORING_OPTION_FIELD(my_settings, limit)}. */
#define CORING_OPTION_FIELD(type, field)                                                           \
    .offset = offsetof(type, field), .size = sizeof(((type *)0)->field)

/* What set() and coring_options_parse() return besides 0 (go on). */
#define CORING_OPTIONS_EXIT 1    /* a command did what was asked: exit 0 */
#define CORING_OPTIONS_REFUSED 2 /* a message was printed: exit with status 2 */

typedef struct coring_option {
    const char *name;        /* the flag without "--" */
    const char *value;       /* its value's placeholder in --help ("N", "on|off"); NULL
                              * for a switch or a command */
    const char *help;        /* --help's text, lines separated by '\n' */
    const char *default_doc; /* the default, as docs/configuration.md's table says it */
    coring_option_kind kind;
    size_t offset;           /* the field it sets in the configuration ... */
    size_t size;             /* ... and its size, bytes */
    unsigned long long min, max; /* NUMBER: the values allowed; SECONDS: max */
    unsigned long long scale;    /* NUMBER: the field is the value times this (0: 1) */
    const char *implicit;    /* NUMBER and COMMAND: the value taken when the flag comes
                              * without one, which makes the value optional
                              * (--seed-users[=N], --list-apps[=FORMAT]) */
    const char *const *words; /* CHOICE: the words, in the field's order */
    unsigned num_words;
    bool inverted;           /* ON_OFF: the field is true for "off" */
    /* CUSTOM and COMMAND: read @value (NULL for a command or a switch) into
     * @config. Returns 0, CORING_OPTIONS_EXIT or CORING_OPTIONS_REFUSED
     * after printing why (naming the option with coring_option_source). */
    int (*set)(void *config, const char *value);
} coring_option;

/* Rows and the configuration they set: each row's offset is into @config
 * (an app's own settings, or the server's coring_config). */
typedef struct coring_option_table {
    const char *title;         /* --help's heading over the rows ("the cep app"); NULL: none */
    const coring_option *rows;
    size_t count;
    void *config;
} coring_option_table;

/*
 * coring_options_parse_tables - coring_options_parse() over the rows of
 * the @num @tables together, each row setting its own table's config: one
 * command line and one environment for all of them. Same returns and
 * context, and -EEXIST after a message when two rows have one name.
 */
int coring_options_parse_tables(const coring_option_table *tables, size_t num, int argc,
                                char **argv);

/*
 * coring_options_parse - set @config from the environment's CORING_
 * variables and the command line @argc/@argv, by the @num rows of @table,
 * in order: each variable of a row whose flag the command line does not
 * give (looked up with getopt_long itself, so abbreviations count) and
 * that is set and not empty, then the command line's options. Stops at the
 * first error, after printing to stderr why ("coring: --port: expected a
 * number from 0 to 65535, got 'abc'", or the same naming CORING_PORT=abc;
 * an unknown option, a missing value, a value given to a switch, an
 * argument that is no option). Returns 0 (go on), CORING_OPTIONS_EXIT (a
 * command such as --help was done: exit 0), CORING_OPTIONS_REFUSED (exit 2)
 * or -ENOMEM. Main thread, once, before any other thread exists (it uses
 * getopt_long's globals and the environment; what it allocates is kept for
 * the process's life, and so is @argv, whose strings @config may keep).
 */
int coring_options_parse(const coring_option *table, size_t num, void *config, int argc,
                         char **argv);

/*
 * coring_options_help - print the @num rows of @table to @out as --help's
 * option list: "  --name VALUE" in a 25-column flag column, then the help
 * text, and under it, in the flag column, the variable that sets it
 * ("CORING_NAME=VALUE", =1 for a switch) beside the help's next line when
 * that fits, else on a line of its own. Commands have no variable. Any
 * thread.
 */
void coring_options_help(FILE *out, const coring_option *table, size_t num);

/*
 * coring_option_variable - write @name's variable (CORING_ and the name in
 * upper case, '-' as '_') into @buf, @len bytes with its NUL, truncated to
 * fit. Any thread.
 */
void coring_option_variable(const char *name, char *buf, size_t len);

/*
 * coring_option_source - how a message should name option @flag ("--port"):
 * "CORING_PORT=abc" when its value came from the environment (the command
 * line did not give it), else @flag itself. Main thread, after
 * coring_options_parse began.
 */
const char *coring_option_source(const char *flag);

/*
 * coring_option_number - read @s as a whole decimal number in [min, max]
 * into *@out; else print "coring: FLAG: expected a number from MIN to MAX,
 * got 'S'" (FLAG as coring_option_source names it, and a hint when @s
 * looks like a Kubernetes service link) and return CORING_OPTIONS_REFUSED.
 * Returns 0. For a set() that reads a number. Main thread.
 */
int coring_option_number(const char *flag, const char *s, unsigned long long min,
                         unsigned long long max, unsigned long long *out);

#endif
