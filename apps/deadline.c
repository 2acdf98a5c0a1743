/*
 * --deadline's value (coring/apps/deadline.h): one duration for every app
 * mounted, or one per app. Read twice: its syntax when the option is given
 * (config.c, so that a mistake is refused with the option's name), then
 * with the apps once they are chosen (startup.c).
 */
#include "coring/apps/deadline.h"

#include "coring/core/clock.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEADLINE_MAX_NS (3600ull * CR_NS_PER_S)

/* "off", or a DURATION ("1.5s", "500ms", "2": seconds), the @len bytes at
 * @p, into *@ns. 0 or -EINVAL. */
static int parse_duration(const char *p, size_t len, uint64_t *ns)
{
    char text[32];
    if (len == 0 || len >= sizeof(text))
        return -EINVAL;
    memcpy(text, p, len);
    text[len] = '\0';
    if (strcmp(text, "off") == 0) {
        *ns = 0;
        return 0;
    }
    if (text[0] < '0' || text[0] > '9')
        return -EINVAL; /* no sign, no white space, no "inf" */
    char *end;
    double v = strtod(text, &end);
    double scale = 1e9;
    if (strcmp(end, "ms") == 0)
        scale = 1e6;
    else if (strcmp(end, "s") != 0 && *end != '\0')
        return -EINVAL;
    double total = v * scale;
    if (!(total <= (double)DEADLINE_MAX_NS) || (total > 0 && total < 1e6))
        return -EINVAL;
    *ns = (uint64_t)(total + 0.5);
    return 0;
}

/* Walk @spec: for the one-for-all form call @each(NULL, 0, ns, ctx), for
 * each NAME=DURATION @each(name, name_len, ns, ctx). 0, -EINVAL (why in
 * @why), or what @each returned. */
static int walk(const char *spec, int (*each)(const char *, size_t, uint64_t, void *), void *ctx,
                char *why, size_t len)
{
    uint64_t ns;
    if (!strchr(spec, '=')) {
        if (parse_duration(spec, strlen(spec), &ns) < 0) {
            snprintf(why, len, "expected off, a duration (2s, 500ms) or NAME=DURATION,... got '%s'",
                     spec);
            return -EINVAL;
        }
        return each(NULL, 0, ns, ctx);
    }
    for (const char *p = spec; *p;) {
        const char *comma = strchr(p, ',');
        size_t item = comma ? (size_t)(comma - p) : strlen(p);
        const char *eq = memchr(p, '=', item);
        if (!eq || eq == p || parse_duration(eq + 1, item - (size_t)(eq + 1 - p), &ns) < 0) {
            snprintf(why, len,
                     "expected NAME=DURATION (users=2s, cep=500ms, embed=off), got '%.*s'",
                     (int)item, p);
            return -EINVAL;
        }
        int err = each(p, (size_t)(eq - p), ns, ctx);
        if (err < 0) {
            snprintf(why, len, "no app '%.*s' is mounted", (int)(eq - p), p);
            return err;
        }
        p += item;
        if (*p == ',' && !*++p) {
            snprintf(why, len, "expected NAME=DURATION after the last ','");
            return -EINVAL;
        }
    }
    return 0;
}

static int accept_any(const char *name, size_t len, uint64_t ns, void *ctx)
{
    (void)name, (void)len, (void)ns, (void)ctx;
    return 0;
}

int app_deadline_syntax(const char *spec, char *why, size_t len)
{
    return walk(spec, accept_any, NULL, why, len);
}

struct resolve {
    const app_def *const *mounted;
    size_t n;
    uint64_t *out;
};

static int set_one(const char *name, size_t len, uint64_t ns, void *ctx)
{
    struct resolve *r = ctx;
    bool found = false;
    for (size_t i = 0; i < r->n; i++)
        if (!name ||
            (strlen(r->mounted[i]->name) == len && memcmp(r->mounted[i]->name, name, len) == 0)) {
            r->out[i] = ns;
            found = true;
        }
    return found || !name ? 0 : -EINVAL;
}

int app_deadline_resolve(const char *spec, const app_def *const *mounted, size_t n, uint64_t *out,
                         char *why, size_t len)
{
    for (size_t i = 0; i < n; i++)
        out[i] = mounted[i]->deadline_ns;
    if (!spec)
        return 0;
    struct resolve r = {.mounted = mounted, .n = n, .out = out};
    return walk(spec, set_one, &r, why, len);
}
