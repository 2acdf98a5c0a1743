/*
 * Configuration by environment: every option of the `coring` command line
 * can also be set by a variable, named by one rule, --foo-bar ->
 * CORING_FOO_BAR (upper case, '-' -> '_'). Precedence: the flag, then the
 * variable, then the default. A variable that is set but empty counts as
 * unset. Switches (options without a value) take 1, true, yes, on to turn
 * them on and 0, false, no, off to leave them off, in any case; an option
 * with an optional value (--seed-users[=N]) takes those words for "given
 * without a value" / "not given", anything else as its value.
 *
 * It works on getopt_long(3)'s option table, so a flag added to the table
 * gets its variable, its check and its --help line with no more code.
 * docs/configuration.md lists them.
 */
#ifndef CORING_APPS_ENV_CONFIG_H
#define CORING_APPS_ENV_CONFIG_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * env_config_variable - write @option's variable name (CORING_...) into
 * @buf (@len bytes, NUL-terminated, truncated to fit). Any thread.
 */
void env_config_variable(const char *option, char *buf, size_t len);

/*
 * env_config_apply - put the options that variables set in front of the
 * command line. For each entry of @options (getopt_long's table, ending
 * with a zero entry) that is not in @skip (a NULL-terminated list of
 * names, e.g. "help") and that the command line does not give (looked up
 * with getopt_long itself, so abbreviations count), a set, non-empty
 * CORING_ variable becomes "--name=value", or "--name" for a switch that
 * is on. They go before the command line's own options, which getopt_long
 * then reads after them. *@argc and *@argv are replaced by the new vector
 * (allocated once, kept for the process's life; the strings of the old one
 * are reused). Resets getopt_long (optind = 0).
 * Returns 0; -EINVAL after printing to stderr "coring: CORING_X=v: ..."
 * for a switch's variable that is not a boolean word; -ENOMEM.
 * Main thread, before parsing the command line.
 */
int env_config_apply(int *argc, char ***argv, const struct option *options,
                     const char *const *skip);

/*
 * env_config_name - how a message should name option @flag ("--port"):
 * "CORING_PORT=abc" when the value came from the environment (then the
 * command line did not give it), else @flag itself. Main thread.
 */
const char *env_config_name(const char *flag);

/*
 * env_config_help - print @text, coring's usage, to @out with each
 * option's variable beside it: under the line that starts with "  --name",
 * in the flag column, as "CORING_NAME=VALUE" (VALUE the placeholder of the
 * flag's line, 1 for a switch), sharing the entry's next line when that one
 * has an empty flag column wide enough. Options in @skip or not in
 * @options are printed as they are. Main thread.
 */
void env_config_help(FILE *out, const char *text, const struct option *options,
                     const char *const *skip);

#endif
