/*
 * Options from CORING_* environment variables: see coring/apps/env_config.h
 * and docs/configuration.md.
 *
 * The variables are turned into command-line options and put in front of
 * the real ones, so that one parser (main's getopt_long loop) checks both
 * and every later flag gets its variable for free. A message about an
 * option names its variable through env_config_name(); for messages that
 * do not ask (a check that prints the flag's name itself), a failing exit
 * (status 2) lists the variables that were used.
 */
/* on_exit(3) needs _GNU_SOURCE, which the build defines. */
#include "coring/apps/env_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ENV_PREFIX "CORING_"

/* One option taken from the environment. */
typedef struct env_setting {
    const char *option; /* its long name, in the option table */
    char *label;        /* "CORING_PORT=8080", for messages */
} env_setting;

/* What was taken, for messages; and the vector handed to main, kept here
 * for the process's life (its option strings with it). */
static struct {
    env_setting *settings;
    size_t count;
    bool named; /* a message named a variable itself */
    char **argv;
} taken;

void env_config_variable(const char *option, char *buf, size_t len)
{
    if (!len)
        return;
    size_t n = 0;
    for (const char *p = ENV_PREFIX; *p && n + 1 < len; p++)
        buf[n++] = *p;
    for (const char *p = option; *p && n + 1 < len; p++)
        buf[n++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
    buf[n] = '\0';
}

static bool skipped(const char *name, const char *const *skip)
{
    for (; skip && *skip; skip++)
        if (strcmp(*skip, name) == 0)
            return true;
    return false;
}

/* 1 for a word that means on, 0 for off, -1 for anything else. */
static int boolean(const char *s)
{
    static const char *const on[] = {"1", "true", "yes", "on"}, *const off[] = {"0", "false", "no",
                                                                                "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    return -1;
}

/* Which options of @options the command line @argc/@argv gives: marks
 * given[i] for options[i]. Uses getopt_long on a copy (it permutes). */
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

int env_config_apply(int *argc, char ***argv, const struct option *options, const char *const *skip)
{
    size_t count = 0;
    while (options[count].name)
        count++;
    bool *given = calloc(count ? count : 1, sizeof(*given));
    char **out = calloc((size_t)*argc + count + 1, sizeof(*out));
    taken.argv = out; /* reachable from here on, on every path */
    taken.settings = calloc(count ? count : 1, sizeof(*taken.settings));
    if (!given || !out || !taken.settings || scan_command_line(*argc, *argv, options, given) < 0) {
        free(given);
        return -ENOMEM;
    }
    int n = 0;
    out[n++] = (*argv)[0];
    for (size_t i = 0; i < count; i++) {
        const struct option *o = &options[i];
        if (given[i] || skipped(o->name, skip))
            continue;
        char name[128];
        env_config_variable(o->name, name, sizeof(name));
        const char *value = getenv(name);
        if (!value || !*value)
            continue; /* empty: unset */
        int on = boolean(value);
        if (o->has_arg == no_argument && on < 0) {
            fprintf(stderr, "coring: %s=%s: expected 1, true, yes or on (or 0, false, no, off)\n",
                    name, value);
            free(given);
            return -EINVAL;
        }
        if ((o->has_arg == no_argument && on == 0) ||
            (o->has_arg == optional_argument && on == 0 && !isdigit((unsigned char)value[0])))
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
        if (o->has_arg == no_argument ||
            (o->has_arg == optional_argument && on == 1 && !isdigit((unsigned char)value[0])))
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
    if (taken.count)
        on_exit(list_on_failure, NULL);
    *argc = n;
    *argv = out;
    optind = 0;
    return 0;
}

const char *env_config_name(const char *flag)
{
    const char *name = flag && flag[0] == '-' && flag[1] == '-' ? flag + 2 : flag;
    for (size_t i = 0; name && i < taken.count; i++)
        if (strcmp(taken.settings[i].option, name) == 0) {
            taken.named = true;
            return taken.settings[i].label;
        }
    return flag;
}

/* Width of the flag column of coring's usage text, indent included. */
#define FLAG_COLUMN 27

void env_config_help(FILE *out, const char *text, const struct option *options,
                     const char *const *skip)
{
    const char *line = text;
    while (*line) {
        size_t len = strcspn(line, "\n");
        const char *next = line + len + (line[len] == '\n');
        fprintf(out, "%.*s\n", (int)len, line);
        if (strncmp(line, "  --", 4) != 0) {
            line = next;
            continue;
        }
        /* "  --name VALUE   text", "  --name[=VALUE]  text" or "  --name  text" */
        const char *name = line + 4;
        size_t name_len = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-");
        const struct option *o = options;
        while (o->name && (strlen(o->name) != name_len || strncmp(o->name, name, name_len) != 0))
            o++;
        if (!o->name || skipped(o->name, skip)) {
            line = next;
            continue;
        }
        const char *value = name + name_len;
        value += strspn(value, " [=");
        size_t value_len = strcspn(value, " ]\n");
        char var[128], entry[200];
        env_config_variable(o->name, var, sizeof(var));
        if (o->has_arg == no_argument || value_len == 0)
            snprintf(entry, sizeof(entry), "%s=1", var);
        else
            snprintf(entry, sizeof(entry), "%s=%.*s", var, (int)value_len, value);
        /* The entry's next line, when its flag column is empty and wide
         * enough, takes the variable; otherwise it gets a line of its own. */
        size_t next_len = strcspn(next, "\n");
        bool blank = next_len > FLAG_COLUMN && strspn(next, " ") >= FLAG_COLUMN;
        if (blank && 2 + strlen(entry) + 1 <= FLAG_COLUMN) {
            fprintf(out, "  %-*s%.*s\n", FLAG_COLUMN - 2, entry, (int)(next_len - FLAG_COLUMN),
                    next + FLAG_COLUMN);
            next += next_len + (next[next_len] == '\n');
        } else {
            fprintf(out, "  %s\n", entry);
        }
        line = next;
    }
}
