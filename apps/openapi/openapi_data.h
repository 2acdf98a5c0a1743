/*
 * The OpenAPI document and the docs page's files as C data, generated at
 * build time by embed.py from openapi.json and Swagger UI's dist folder
 * (apps/CMakeLists.txt). Read only by openapi.c.
 */
#ifndef CORING_APPS_OPENAPI_DATA_H
#define CORING_APPS_OPENAPI_DATA_H

#include <stddef.h>

/* One entry of the root's "tags": its name and its whole JSON object. */
typedef struct openapi_tag {
    const char *name;
    const char *json;
} openapi_tag;

/* One operation of a path item. */
typedef struct openapi_operation {
    const char *method; /* "GET", as the router names it */
    const char *tag;    /* its first tag, "" when none */
    const char *json;   /* `"get":{...}`, a member of the path item */
} openapi_operation;

/* One path item: its members other than operations ("parameters"), and
 * its operations, openapi_operations[first .. first + count). */
typedef struct openapi_path {
    const char *pattern; /* "/todos/{id}": the router's pattern */
    const char *members; /* `"parameters":[...]`, or "" */
    unsigned first;
    unsigned count;
} openapi_path;

/* The root object's members other than tags and paths, without braces. */
extern const char openapi_head[];
extern const openapi_tag openapi_tags[];
extern const unsigned openapi_num_tags;
extern const openapi_operation openapi_operations[];
extern const unsigned openapi_num_operations;
extern const openapi_path openapi_paths[];
extern const unsigned openapi_num_paths;

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
