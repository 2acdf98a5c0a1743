/*
 * Leveled logging to stderr. One write(2) per line so that lines from
 * different worker threads never interleave. See coring/core/log.h.
 */
#include "coring/core/log.h"
#include "coring/core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

cr_log_level cr_log_threshold = CR_LOG_INFO;
static _Thread_local char thread_name[16] = "main";

void cr_log_set_level(cr_log_level level)
{
    cr_log_threshold = level;
}

int cr_log_parse_level(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (size_t i = 0; i < cr_countof(names); i++)
        if (strcasecmp(name, names[i]) == 0)
            return (int)i;
    return -EINVAL;
}

void cr_log_set_thread_name(const char *name)
{
    snprintf(thread_name, sizeof(thread_name), "%s", name);
}

void cr_log_write(cr_log_level level, const char *fmt, ...)
{
    static const char *tags[] = {"DEBUG", "INFO ", "WARN ", "ERROR"};
    char line[1024];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %s [%s] ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, (int)(tv.tv_usec / 1000), tags[level < CR_LOG_OFF ? level : 3],
                     thread_name);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

char *cr_log_escape(char *dst, size_t dst_size, const char *src, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    if (dst_size == 0)
        return dst;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)src[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 1 >= dst_size)
                break;
            dst[o++] = (char)c;
        } else {
            if (o + 4 >= dst_size)
                break;
            dst[o++] = '\\', dst[o++] = 'x', dst[o++] = hex[c >> 4], dst[o++] = hex[c & 15];
        }
    }
    dst[o] = '\0';
    return dst;
}

const char *cr_strerror(int err)
{
    const char *s = strerrordesc_np(err < 0 ? -err : err);
    return s ? s : "unknown error";
}
