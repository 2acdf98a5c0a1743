/*
 * Request ids: the `X-Request-Id` a request carries through the logs and
 * back to the client. An incoming id is kept when valid, otherwise one is
 * made: a per-thread random prefix (getrandom(2) once per thread) and a
 * per-thread counter, so ids are unique within a process and, with high
 * probability, across processes and restarts, with no lock or shared
 * atomic between cores.
 */
#ifndef CORING_HTTP_REQUEST_ID_H
#define CORING_HTTP_REQUEST_ID_H

#include <stdbool.h>
#include <stddef.h>

/* Longest id kept, bytes; room for one plus its NUL. */
#define HTTP_REQUEST_ID_MAX 128
#define HTTP_REQUEST_ID_SIZE (HTTP_REQUEST_ID_MAX + 1)

/*
 * http_request_id_valid - whether @len bytes at @id may be kept as a
 * request id: 1 to HTTP_REQUEST_ID_MAX bytes, each printable ASCII
 * 0x21..0x7e (no space, no control byte, nothing above 0x7e). Pure.
 */
bool http_request_id_valid(const char *id, size_t len);

/*
 * http_request_id_make - a new id into @dst (HTTP_REQUEST_ID_SIZE bytes):
 * 16 hex digits of this thread's random prefix, '-', the thread's counter
 * in hex (at least 8 digits). Returns its length (25 up to 2^32 ids per
 * thread). Any thread; no system call after the thread's first id (the
 * prefix falls back to time and thread address when getrandom fails).
 */
size_t http_request_id_make(char *dst);

#endif
