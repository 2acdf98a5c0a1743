/*
 * GET /openapi.json and GET /docs: the OpenAPI document of the routes this
 * server has mounted, and a Swagger UI page that renders it.
 *
 * The document is put together at start-up from pieces of JSON: the
 * server's own (apps/openapi/openapi.json: info, the operations of
 * /livez, /readyz, /metrics and the docs, the components every app may
 * refer to) and each mounted app's fragment (app_def.openapi: its tags,
 * paths and components). Every fragment is parsed and cut into its tags,
 * its operations and its components; an operation is kept while the
 * router holds its method and pattern, so that a server started with
 * --apps hello describes only hello's routes and never a route it would
 * answer 404; components are merged by name (one name, one definition).
 * Each operation gets what the server answers on every route, whatever the
 * app (the trace context's headers, 429): written once here rather than in
 * every fragment.
 * The page's files (Swagger UI's, from npm, and ours) are embedded at
 * build time (openapi_data.h): nothing is read from disk or from the
 * internet when the page is viewed.
 */
#include "openapi_data.h"

#include "coring/apps/apps.h"
#include "coring/core/buffer.h"
#include "coring/core/json.h"
#include "coring/core/json_writer.h"
#include "coring/core/log.h"
#include "coring/core/version.h"
#include "coring/http/server.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define DOCS_NOT_BUILT                                                                             \
    "the docs page was not built: npm was missing at build time; install it "                      \
    "(.ci/install-deps test) and rebuild"

/* The document, put together by app_openapi_mount; served as it is. */
static cr_buf document;

/* The pieces of every fragment, each a JSON text of its own (malloc'd). */
typedef struct piece {
    const char *owner;   /* the app's name, or "server" */
    char *key;           /* tag: its name; operation: its pattern; members: the pattern;
                          * component: "section/name" */
    char *method;        /* operation: "GET", as the router names it */
    char *tag;           /* operation: its first tag, "" when none */
    char *json;          /* tag: the object; operation: `"get":{...}`; members: the path
                          * item's other members without braces; component: the value */
    bool kept;           /* operation: routed; tag: used by a kept operation */
} piece;

typedef struct piece_list {
    piece *items;
    size_t count, cap;
} piece_list;

/* Everything cut from the fragments. */
static struct {
    cr_buf head;          /* the server's root members but tags, paths, components */
    piece_list tags, operations, members, components;
    bool failed;          /* out of memory */
} cut;

static const char *const METHODS[] = {"get", "put", "post", "delete", "options", "head", "patch",
                                      "trace"};

static const char *method_name(http_method m)
{
    static const char *const names[] = {
        [HTTP_GET] = "GET",         [HTTP_HEAD] = "HEAD",       [HTTP_POST] = "POST",
        [HTTP_PUT] = "PUT",         [HTTP_PATCH] = "PATCH",     [HTTP_DELETE] = "DELETE",
        [HTTP_OPTIONS] = "OPTIONS", [HTTP_CONNECT] = "CONNECT", [HTTP_TRACE] = "TRACE",
    };
    return (unsigned)m < sizeof(names) / sizeof(names[0]) && names[m] ? names[m] : "";
}

/* A copy of @len bytes at @s, NUL-terminated; NULL (and cut.failed) when
 * out of memory. */
static char *copy(const char *s, size_t len)
{
    char *out = malloc(len + 1);
    if (!out) {
        cut.failed = true;
        return NULL;
    }
    memcpy(out, s, len);
    out[len] = '\0';
    return out;
}

static piece *add_piece(piece_list *l)
{
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        piece *items = realloc(l->items, cap * sizeof(*items));
        if (!items) {
            cut.failed = true;
            return NULL;
        }
        l->items = items;
        l->cap = cap;
    }
    piece *p = &l->items[l->count++];
    *p = (piece){0};
    return p;
}

static void free_pieces(piece_list *l)
{
    for (size_t i = 0; i < l->count; i++) {
        free(l->items[i].key);
        free(l->items[i].method);
        free(l->items[i].tag);
        free(l->items[i].json);
    }
    free(l->items);
    *l = (piece_list){0};
}

/* Write value @v of a parsed document as JSON text. The writer refuses
 * more than CR_JSON_WRITER_MAX_DEPTH levels (out->failed); an OpenAPI
 * document has a dozen. */
static void write_value(cr_json_writer *w, cr_json_value v, unsigned depth)
{
    if (depth > CR_JSON_WRITER_MAX_DEPTH) {
        w->out->failed = true;
        return;
    }
    const char *s;
    size_t len;
    bool b;
    int64_t i;
    uint64_t u;
    double d;
    switch (cr_json_type_of(v)) {
    case CR_JSON_NULL:
        cr_json_null(w);
        break;
    case CR_JSON_BOOL:
        cr_json_get_bool(v, &b);
        cr_json_bool(w, b);
        break;
    case CR_JSON_INT:
        cr_json_get_int64(v, &i);
        cr_json_int64(w, i);
        break;
    case CR_JSON_UINT:
        cr_json_get_uint64(v, &u);
        cr_json_uint64(w, u);
        break;
    case CR_JSON_DOUBLE:
        cr_json_get_double(v, &d);
        cr_json_double(w, d);
        break;
    case CR_JSON_STRING:
        cr_json_get_string(v, &s, &len);
        cr_json_string(w, s, len);
        break;
    case CR_JSON_ARRAY: {
        cr_json_array_begin(w);
        long n = cr_json_array_size(v);
        for (long k = 0; k < n; k++) {
            cr_json_value e;
            cr_json_array_at(v, (size_t)k, &e);
            write_value(w, e, depth + 1);
        }
        cr_json_array_end(w);
        break;
    }
    case CR_JSON_OBJECT: {
        cr_json_object_begin(w);
        long n = cr_json_object_size(v);
        for (long k = 0; k < n; k++) {
            cr_json_value e;
            cr_json_object_at(v, (size_t)k, &s, &len, &e);
            cr_json_key(w, s, len);
            write_value(w, e, depth + 1);
        }
        cr_json_object_end(w);
        break;
    }
    }
}

/* @v written by @write as a JSON text of its own (malloc'd), or NULL when
 * out of memory. */
static char *json_text(cr_json_value v, void (*write)(cr_json_writer *, cr_json_value, unsigned))
{
    cr_buf b = {0};
    cr_json_writer w;
    cr_json_writer_init(&w, &b);
    write(&w, v, 0);
    char *out = b.failed ? NULL : copy(b.data ? b.data : "", b.len);
    if (b.failed)
        cut.failed = true;
    cr_buf_free(&b);
    return out;
}

/* What the server adds to the operations, so that no fragment repeats it
 * (docs/openapi.md): the trace context's request headers and the
 * traceresponse header on every answer (--trace-context, on by default:
 * docs/tracing.md), and 429 (--rate-limit, off by default:
 * docs/rate-limits.md) on every path but those exempt by default. The
 * components referred to are the server's (apps/openapi/openapi.json). */
static const char *const RATE_LIMIT_EXEMPT[] = {"/livez", "/readyz", "/metrics"};

/* Write `{"$ref":"#/components/@ref"}`, as member @key when not NULL. */
static void write_ref(cr_json_writer *w, const char *key, const char *ref)
{
    char target[128];
    snprintf(target, sizeof(target), "#/components/%s", ref);
    if (key)
        cr_json_key(w, key, strlen(key));
    cr_json_object_begin(w);
    cr_json_key(w, "$ref", 4);
    cr_json_cstring(w, target);
    cr_json_object_end(w);
}

/* @key (@len bytes) is @name. */
static bool is_key(const char *key, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(name, key, len) == 0;
}

/* Write the members of object @v but @skip and @skip_too (NULL: none), each
 * value through @write at @depth. */
static void write_members(cr_json_writer *w, cr_json_value v, const char *skip,
                          const char *skip_too, unsigned depth,
                          void (*write)(cr_json_writer *, cr_json_value, unsigned))
{
    long n = cr_json_object_size(v);
    for (long k = 0; k < n; k++) {
        const char *key;
        size_t len;
        cr_json_value e;
        cr_json_object_at(v, (size_t)k, &key, &len, &e);
        if ((skip && is_key(key, len, skip)) || (skip_too && is_key(key, len, skip_too)))
            continue;
        cr_json_key(w, key, len);
        write(w, e, depth);
    }
}

/* Write response @v (a Response Object) with the traceresponse header among
 * its headers; a reference is written as it is (its component has it). */
static void write_response(cr_json_writer *w, cr_json_value v, unsigned depth)
{
    cr_json_value headers;
    if (cr_json_type_of(v) != CR_JSON_OBJECT ||
        cr_json_object_get(v, "$ref", 4, &headers) == CR_JSON_OK) {
        write_value(w, v, depth);
        return;
    }
    bool has_headers = cr_json_object_get(v, "headers", 7, &headers) == CR_JSON_OK &&
                       cr_json_type_of(headers) == CR_JSON_OBJECT;
    cr_json_object_begin(w);
    write_members(w, v, "headers", NULL, depth + 1, write_value);
    cr_json_key(w, "headers", 7);
    cr_json_object_begin(w);
    if (has_headers)
        write_members(w, headers, "traceresponse", NULL, depth + 2, write_value);
    write_ref(w, "traceresponse", "headers/Traceresponse");
    cr_json_object_end(w);
    cr_json_object_end(w);
}

/* Write operation @v of @pattern (@pattern_len bytes) with traceparent and
 * tracestate among its parameters, each response through write_response,
 * and 429 unless @pattern is exempt by default or the operation documents
 * its own. */
static void write_operation(cr_json_writer *w, const char *pattern, size_t pattern_len,
                            cr_json_value v, unsigned depth)
{
    bool limited = true;
    for (size_t i = 0; i < sizeof(RATE_LIMIT_EXEMPT) / sizeof(RATE_LIMIT_EXEMPT[0]); i++)
        if (is_key(pattern, pattern_len, RATE_LIMIT_EXEMPT[i]))
            limited = false;
    cr_json_value parameters, responses, e;
    bool has_parameters = cr_json_object_get(v, "parameters", 10, &parameters) == CR_JSON_OK &&
                          cr_json_type_of(parameters) == CR_JSON_ARRAY;
    bool has_responses = cr_json_object_get(v, "responses", 9, &responses) == CR_JSON_OK &&
                         cr_json_type_of(responses) == CR_JSON_OBJECT;
    cr_json_object_begin(w);
    write_members(w, v, has_parameters ? "parameters" : NULL, has_responses ? "responses" : NULL,
                  depth + 1, write_value);
    cr_json_key(w, "parameters", 10);
    cr_json_array_begin(w);
    long p = has_parameters ? cr_json_array_size(parameters) : 0;
    for (long k = 0; k < p; k++) {
        cr_json_array_at(parameters, (size_t)k, &e);
        write_value(w, e, depth + 2);
    }
    write_ref(w, NULL, "parameters/Traceparent");
    write_ref(w, NULL, "parameters/Tracestate");
    cr_json_array_end(w);
    cr_json_key(w, "responses", 9);
    cr_json_object_begin(w);
    if (has_responses)
        write_members(w, responses, NULL, NULL, depth + 2, write_response);
    if (limited && !(has_responses && cr_json_object_get(responses, "429", 3, &e) == CR_JSON_OK))
        write_ref(w, "429", "responses/TooManyRequests");
    cr_json_object_end(w);
    cr_json_object_end(w);
}

/* @key (@len bytes) is one of the operations' methods. */
static bool is_method(const char *key, size_t len)
{
    for (size_t i = 0; i < sizeof(METHODS) / sizeof(METHODS[0]); i++)
        if (strlen(METHODS[i]) == len && memcmp(METHODS[i], key, len) == 0)
            return true;
    return false;
}

/* Log why @owner's fragment is refused; returns -EINVAL. */
static int refuse(const char *owner, const char *why, const char *what, size_t len)
{
    cr_log_error("openapi: the description of %s: %s%s%.*s", owner, why, what ? ": " : "",
                 (int)len, what ? what : "");
    return -EINVAL;
}

/* Cut the path item @item of @pattern (@len bytes) of @owner's fragment. */
static int cut_path(const char *owner, const char *pattern, size_t len, cr_json_value item)
{
    if (cr_json_type_of(item) != CR_JSON_OBJECT)
        return refuse(owner, "a path item that is not an object", pattern, len);
    cr_buf rest = {0};
    cr_json_writer w;
    cr_json_writer_init(&w, &rest);
    long n = cr_json_object_size(item);
    for (long k = 0; k < n; k++) {
        const char *key;
        size_t key_len;
        cr_json_value v;
        cr_json_object_at(item, (size_t)k, &key, &key_len, &v);
        if (!is_method(key, key_len)) {
            /* "parameters", "summary"...: members of the path item. The
             * writer wants an object around them: its braces go after. */
            if (rest.len == 0)
                cr_json_object_begin(&w);
            cr_json_key(&w, key, key_len);
            write_value(&w, v, 1);
            continue;
        }
        if (cr_json_type_of(v) != CR_JSON_OBJECT) {
            cr_buf_free(&rest);
            return refuse(owner, "an operation that is not an object", pattern, len);
        }
        char method[8];
        for (size_t c = 0; c < key_len; c++)
            method[c] = (char)toupper((unsigned char)key[c]);
        method[key_len] = '\0';
        for (size_t e = 0; e < cut.operations.count; e++) {
            piece *other = &cut.operations.items[e];
            if (strcmp(other->method, method) == 0 && strlen(other->key) == len &&
                memcmp(other->key, pattern, len) == 0) {
                cr_buf_free(&rest);
                cr_log_error("openapi: %s %.*s is described by %s and by %s", method, (int)len,
                             pattern, other->owner, owner);
                return -EINVAL;
            }
        }
        cr_json_value tags, first;
        const char *tag = "";
        size_t tag_len = 0;
        if (cr_json_object_get(v, "tags", 4, &tags) == CR_JSON_OK &&
            cr_json_array_at(tags, 0, &first) == CR_JSON_OK)
            cr_json_get_string(first, &tag, &tag_len);
        cr_buf op = {0};
        cr_json_writer ow;
        cr_json_writer_init(&ow, &op);
        cr_json_object_begin(&ow);
        cr_json_key(&ow, key, key_len);
        write_operation(&ow, pattern, len, v, 1);
        cr_json_object_end(&ow);
        piece *p = add_piece(&cut.operations);
        if (p && !op.failed) {
            p->owner = owner;
            p->key = copy(pattern, len);
            p->method = copy(method, key_len);
            p->tag = copy(tag, tag_len);
            /* `{"get":{...}}` without its braces: a member of the path item. */
            p->json = copy(op.data + 1, op.len - 2);
        } else {
            cut.failed = true;
        }
        cr_buf_free(&op);
    }
    if (rest.len) {
        cr_json_object_end(&w);
        piece *p = add_piece(&cut.members);
        if (p && !rest.failed) {
            p->owner = owner;
            p->key = copy(pattern, len);
            p->json = copy(rest.data + 1, rest.len - 2);
        } else {
            cut.failed = true;
        }
    }
    cr_buf_free(&rest);
    return 0;
}

/* Cut the components of @owner's fragment: each definition once by
 * name, or the same definition again. */
static int cut_components(const char *owner, cr_json_value components)
{
    long sections = cr_json_object_size(components);
    if (sections < 0)
        return refuse(owner, "\"components\" is not an object", NULL, 0);
    for (long k = 0; k < sections; k++) {
        const char *section, *name;
        size_t section_len, name_len;
        cr_json_value defs, def;
        cr_json_object_at(components, (size_t)k, &section, &section_len, &defs);
        long n = cr_json_object_size(defs);
        if (n < 0)
            return refuse(owner, "a section of components that is not an object", section,
                          section_len);
        for (long d = 0; d < n; d++) {
            cr_json_object_at(defs, (size_t)d, &name, &name_len, &def);
            char key[256];
            int key_len = snprintf(key, sizeof(key), "%.*s/%.*s", (int)section_len, section,
                                   (int)name_len, name);
            if (key_len < 0 || (size_t)key_len >= sizeof(key))
                return refuse(owner, "a component's name is too long", name, name_len);
            /* A response shared by operations says traceresponse as theirs do. */
            bool response = section_len == 9 && memcmp(section, "responses", 9) == 0;
            char *json = json_text(def, response ? write_response : write_value);
            if (!json)
                return -ENOMEM;
            bool same = false;
            for (size_t e = 0; e < cut.components.count; e++) {
                piece *other = &cut.components.items[e];
                if (strcmp(other->key, key) != 0)
                    continue;
                if (strcmp(other->json, json) != 0) {
                    free(json);
                    cr_log_error("openapi: #/components/%s is defined by %s and otherwise by %s",
                                 key, other->owner, owner);
                    return -EINVAL;
                }
                same = true;
            }
            if (same) {
                free(json);
                continue;
            }
            piece *p = add_piece(&cut.components);
            if (!p) {
                free(json);
                return -ENOMEM;
            }
            p->owner = owner;
            p->key = copy(key, (size_t)key_len);
            p->json = json;
        }
    }
    return 0;
}

/* The root's members but tags, paths and components, with info.version
 * the running coring's. */
static void cut_head(cr_json_value root)
{
    cr_json_writer w;
    cr_json_writer_init(&w, &cut.head);
    cr_json_object_begin(&w);
    long n = cr_json_object_size(root);
    for (long k = 0; k < n; k++) {
        const char *key;
        size_t len;
        cr_json_value v;
        cr_json_object_at(root, (size_t)k, &key, &len, &v);
        if ((len == 4 && memcmp(key, "tags", 4) == 0) || (len == 5 && memcmp(key, "paths", 5) == 0) ||
            (len == 10 && memcmp(key, "components", 10) == 0))
            continue;
        cr_json_key(&w, key, len);
        if (!(len == 4 && memcmp(key, "info", 4) == 0) || cr_json_type_of(v) != CR_JSON_OBJECT) {
            write_value(&w, v, 1);
            continue;
        }
        cr_json_object_begin(&w);
        long m = cr_json_object_size(v);
        for (long i = 0; i < m; i++) {
            const char *ikey;
            size_t ilen;
            cr_json_value iv;
            cr_json_object_at(v, (size_t)i, &ikey, &ilen, &iv);
            cr_json_key(&w, ikey, ilen);
            if (ilen == 7 && memcmp(ikey, "version", 7) == 0)
                cr_json_cstring(&w, coring_version());
            else
                write_value(&w, iv, 2);
        }
        cr_json_object_end(&w);
    }
    cr_json_object_end(&w);
}

/* Parse @owner's fragment @text and cut it into pieces; the server's
 * (@head) gives the root's other members too. 0, or -EINVAL after
 * logging why, or -ENOMEM. */
static int cut_fragment(cr_json_parser *parser, const char *owner, const char *text, bool head)
{
    cr_json_value root, v;
    cr_json_error e = cr_json_parse(parser, text, strlen(text), &root);
    if (e != CR_JSON_OK) {
        const char *detail = cr_json_parser_detail(parser);
        cr_log_error("openapi: the description of %s is not JSON: %s", owner,
                     detail ? detail : cr_json_error_message(e));
        return e == CR_JSON_ENOMEM ? -ENOMEM : -EINVAL;
    }
    if (cr_json_type_of(root) != CR_JSON_OBJECT)
        return refuse(owner, "not a JSON object", NULL, 0);
    if (head)
        cut_head(root);
    if (cr_json_object_get(root, "tags", 4, &v) == CR_JSON_OK) {
        long n = cr_json_array_size(v);
        if (n < 0)
            return refuse(owner, "\"tags\" is not an array", NULL, 0);
        for (long k = 0; k < n; k++) {
            cr_json_value tag, name;
            const char *s;
            size_t len;
            cr_json_array_at(v, (size_t)k, &tag);
            if (cr_json_object_get(tag, "name", 4, &name) != CR_JSON_OK ||
                cr_json_get_string(name, &s, &len) != CR_JSON_OK)
                return refuse(owner, "a tag without a name", NULL, 0);
            bool known = false;
            for (size_t t = 0; t < cut.tags.count; t++)
                known = known || (strlen(cut.tags.items[t].key) == len &&
                                  memcmp(cut.tags.items[t].key, s, len) == 0);
            if (known)
                continue; /* the first description of a tag stands */
            piece *p = add_piece(&cut.tags);
            if (!p)
                return -ENOMEM;
            p->owner = owner;
            p->key = copy(s, len);
            p->json = json_text(tag, write_value);
        }
    }
    if (cr_json_object_get(root, "paths", 5, &v) == CR_JSON_OK) {
        long n = cr_json_object_size(v);
        if (n < 0)
            return refuse(owner, "\"paths\" is not an object", NULL, 0);
        for (long k = 0; k < n; k++) {
            const char *pattern;
            size_t len;
            cr_json_value item;
            cr_json_object_at(v, (size_t)k, &pattern, &len, &item);
            int err = cut_path(owner, pattern, len, item);
            if (err < 0)
                return err;
        }
    }
    if (cr_json_object_get(root, "components", 10, &v) == CR_JSON_OK) {
        int err = cut_components(owner, v);
        if (err < 0)
            return err;
    }
    return cut.failed ? -ENOMEM : 0;
}

/* For http_router_each: mark the operation of (@method, @pattern) kept,
 * or warn that the route is not described. */
static void keep_route(http_method method, const char *pattern, void *user)
{
    (void)user;
    const char *name = method_name(method);
    if (method == HTTP_HEAD || method == HTTP_OPTIONS)
        return; /* implied by GET; CORS preflights */
    for (size_t i = 0; i < cut.operations.count; i++) {
        piece *op = &cut.operations.items[i];
        if (strcmp(op->method, name) == 0 && strcmp(op->key, pattern) == 0) {
            op->kept = true;
            return;
        }
    }
    cr_log_warn("openapi: %s %s is served but described by no app: /openapi.json leaves it out",
                name, pattern);
}

/* The pieces put together: the head, the tags of the operations kept, the
 * path items (their members and kept operations, in the order the
 * fragments gave them), the components. */
static void assemble(cr_buf *b)
{
    for (size_t i = 0; i < cut.operations.count; i++) {
        piece *op = &cut.operations.items[i];
        if (!op->kept)
            continue;
        for (size_t t = 0; t < cut.tags.count; t++)
            if (strcmp(cut.tags.items[t].key, op->tag) == 0)
                cut.tags.items[t].kept = true;
    }
    cr_buf_append(b, cut.head.data, cut.head.len - 1); /* without its closing brace */
    cr_buf_append_str(b, cut.head.len > 2 ? ",\"tags\":[" : "\"tags\":[");
    bool first = true;
    for (size_t t = 0; t < cut.tags.count; t++) {
        if (!cut.tags.items[t].kept)
            continue;
        cr_buf_append_str(b, first ? "" : ",");
        cr_buf_append_str(b, cut.tags.items[t].json);
        first = false;
    }
    cr_buf_append_str(b, "],\"paths\":{");
    first = true;
    for (size_t i = 0; i < cut.operations.count; i++) {
        piece *op = &cut.operations.items[i];
        if (!op->kept)
            continue;
        bool seen = false; /* the path item was written with an earlier operation */
        for (size_t k = 0; k < i && !seen; k++)
            seen = cut.operations.items[k].kept && strcmp(cut.operations.items[k].key, op->key) == 0;
        if (seen)
            continue;
        cr_buf_append_str(b, first ? "" : ",");
        first = false;
        cr_json_escape_string(b, op->key, strlen(op->key));
        cr_buf_append_str(b, ":{");
        bool first_member = true;
        for (size_t m = 0; m < cut.members.count; m++)
            if (strcmp(cut.members.items[m].key, op->key) == 0) {
                cr_buf_append_str(b, cut.members.items[m].json);
                first_member = false;
                break;
            }
        for (size_t k = i; k < cut.operations.count; k++) {
            piece *same = &cut.operations.items[k];
            if (!same->kept || strcmp(same->key, op->key) != 0)
                continue;
            cr_buf_append_str(b, first_member ? "" : ",");
            cr_buf_append_str(b, same->json);
            first_member = false;
        }
        cr_buf_append_str(b, "}");
    }
    cr_buf_append_str(b, "},\"components\":{");
    first = true;
    for (size_t c = 0; c < cut.components.count; c++) {
        const char *key = cut.components.items[c].key;
        size_t section_len = (size_t)(strchr(key, '/') - key);
        bool seen = false;
        for (size_t k = 0; k < c && !seen; k++)
            seen = strncmp(cut.components.items[k].key, key, section_len + 1) == 0;
        if (seen)
            continue; /* its section was written with an earlier one */
        cr_buf_append_str(b, first ? "" : ",");
        first = false;
        cr_json_escape_string(b, key, section_len);
        cr_buf_append_str(b, ":{");
        bool first_def = true;
        for (size_t k = c; k < cut.components.count; k++) {
            const piece *def = &cut.components.items[k];
            if (strncmp(def->key, key, section_len + 1) != 0)
                continue;
            cr_buf_append_str(b, first_def ? "" : ",");
            first_def = false;
            cr_json_escape_string(b, def->key + section_len + 1, strlen(def->key + section_len + 1));
            cr_buf_append_str(b, ":");
            cr_buf_append_str(b, def->json);
        }
        cr_buf_append_str(b, "}");
    }
    cr_buf_append_str(b, "}}");
}

static int build_document(const http_router *router, const app_def *const *apps, size_t count)
{
    cr_json_parser *parser = cr_json_parser_create(0, 0);
    if (!parser)
        return -ENOMEM;
    int err = 0;
    for (size_t i = 0; i < count && !err; i++) {
        if (!apps[i]->openapi) {
            cr_log_warn("openapi: the %s app describes none of its routes", apps[i]->name);
            continue;
        }
        err = cut_fragment(parser, apps[i]->name, apps[i]->openapi, false);
    }
    if (!err)
        err = cut_fragment(parser, "the server", openapi_server, true);
    cr_json_parser_destroy(parser);
    if (!err) {
        http_router_each(router, keep_route, NULL);
        for (size_t i = 0; i < cut.operations.count; i++) {
            const piece *op = &cut.operations.items[i];
            if (!op->kept && strcmp(op->owner, "the server") != 0)
                cr_log_warn("openapi: the %s app describes %s %s, which no route serves: "
                            "/openapi.json leaves it out",
                            op->owner, op->method, op->key);
        }
        assemble(&document);
        if (document.failed || cut.failed)
            err = -ENOMEM;
    }
    if (err == -ENOMEM)
        cr_log_error("openapi: out of memory putting the document together");
    cr_buf_free(&cut.head);
    free_pieces(&cut.tags);
    free_pieces(&cut.operations);
    free_pieces(&cut.members);
    free_pieces(&cut.components);
    cut.failed = false;
    return err;
}

const char *app_openapi_document(size_t *len)
{
    *len = document.len;
    return document.data;
}

static void get_openapi(http_ctx *ctx, void *user)
{
    (void)user;
    http_respond(ctx, 200, "application/json", document.data, document.len);
}

/* Answers the docs file called @name (@len bytes), or 404/503. */
static void serve_docs_file(http_ctx *ctx, const char *name, size_t len)
{
    if (!openapi_docs_built) {
        http_respond_error(ctx, 503, DOCS_NOT_BUILT);
        return;
    }
    for (unsigned i = 0; i < openapi_num_docs_files; i++) {
        const openapi_docs_file *f = &openapi_docs_files[i];
        if (strlen(f->name) == len && memcmp(f->name, name, len) == 0) {
            http_add_header(ctx, "Cache-Control", "no-cache");
            http_respond(ctx, 200, f->content_type, f->data, f->len);
            return;
        }
    }
    http_respond_error(ctx, 404, "no such docs file");
}

static void get_docs(http_ctx *ctx, void *user)
{
    (void)user;
    serve_docs_file(ctx, "index.html", 10);
}

static void get_docs_file(http_ctx *ctx, void *user)
{
    (void)user;
    const http_str *file = http_route_param(ctx->params, "file");
    /* index.html is the page at /docs, not a file of it. */
    if (!file || (file->len == 10 && memcmp(file->ptr, "index.html", 10) == 0)) {
        http_respond_error(ctx, 404, "no such docs file");
        return;
    }
    serve_docs_file(ctx, file->ptr, file->len);
}

int app_openapi_mount(http_router *r, const app_def *const *apps, size_t count)
{
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/openapi.json", get_openapi, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/docs", get_docs, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/docs/{file}", get_docs_file, NULL)) < 0)
        return err;
    cr_buf_free(&document);
    return build_document(r, apps, count);
}
