/*
 * The server's OpenAPI description and the docs page's files as C data,
 * generated at build time from openapi.json and (embed.py) Swagger UI's
 * dist folder (apps/CMakeLists.txt). Read only by openapi.c.
 */
#ifndef CORING_APPS_OPENAPI_DATA_H
#define CORING_APPS_OPENAPI_DATA_H

#include <stddef.h>

/* apps/openapi/openapi.json: the server's own description (info, the
 * operations of /livez, /readyz, /metrics and the docs, the components
 * the apps may refer to), NUL-terminated. */
extern const char openapi_server[];

/* A file of the docs page, served at /docs/NAME (index.html at /docs). */
typedef struct openapi_docs_file {
    const char *name;
    const char *content_type;
    const char *data;
    size_t len; /* bytes */
} openapi_docs_file;

extern const openapi_docs_file openapi_docs_files[];
extern const unsigned openapi_num_docs_files;
/* 0 when the build had no Swagger UI (no npm): /docs answers 503. */
extern const int openapi_docs_built;

#endif
