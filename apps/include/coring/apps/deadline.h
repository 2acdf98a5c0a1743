/*
 * --deadline (CORING_DEADLINE): the deadline of each mounted app's routes,
 * after which a request's handler is cancelled with everything it waits
 * on and the request is answered 504 {"error":"deadline exceeded"}
 * (docs/deadlines.md). Each app's default is its app_def.deadline_ns; the
 * option overrides it for every app ("2s", "off") or per app
 * ("users=2s,cep=5s", an app not named keeping its default).
 */
#ifndef CORING_APPS_DEADLINE_H
#define CORING_APPS_DEADLINE_H

#include "coring/apps/apps.h"

#include <stddef.h>
#include <stdint.h>

/*
 * app_deadline_resolve - the deadline of each of the @n apps @mounted
 * under --deadline @spec (NULL: not given) into @out[i], ns (0: none).
 * @spec: "off", a DURATION, or a comma-separated list of NAME=DURATION or
 * NAME=off, NAME a mounted app's; DURATION a decimal number of seconds
 * with an optional unit, "ms" or "s" ("1.5s", "500ms", "2"), at most
 * 3600 s and, when not 0, at least 1 ms. Returns 0, or -EINVAL with why
 * (for the option's message) in @why (@len bytes). Main thread.
 */
int app_deadline_resolve(const char *spec, const app_def *const *mounted, size_t n, uint64_t *out,
                         char *why, size_t len);

/*
 * app_deadline_syntax - check @spec as app_deadline_resolve would, but not
 * the names (the apps are not chosen yet when the option is read).
 * Returns 0 or -EINVAL with why in @why (@len bytes). Any thread.
 */
int app_deadline_syntax(const char *spec, char *why, size_t len);

#endif
