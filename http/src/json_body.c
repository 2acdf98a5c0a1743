/*
 * The JSON object body (http_json_object_body in coring/http/server.h):
 * the Content-Type check, the parse and the "must be an object" check
 * that every JSON route starts with, and their error answers, in one
 * place so that each route says the same thing in the same words.
 */
#include "coring/core/arena.h"
#include "coring/core/json.h"
#include "coring/http/server.h"

#include <string.h>

/* "invalid JSON: <detail>", the detail's first letter lowered when it
 * starts a sentence ("The JSON document..." reads "the JSON document..."),
 * in the request arena; the bare message when out of memory. */
static const char *syntax_message(http_ctx *ctx, const char *detail)
{
    static const char prefix[] = "invalid JSON: ";
    if (!detail || !*detail)
        return "invalid JSON";
    size_t n = sizeof(prefix) - 1, len = strlen(detail);
    char *m = cr_arena_alloc(ctx->arena, n + len + 1);
    if (!m)
        return "invalid JSON";
    memcpy(m, prefix, n);
    memcpy(m + n, detail, len + 1);
    if (m[n] >= 'A' && m[n] <= 'Z' && !(m[n + 1] >= 'A' && m[n + 1] <= 'Z'))
        m[n] = (char)(m[n] - 'A' + 'a');
    return m;
}

int http_json_object_parse(http_ctx *ctx, cr_json_value *obj, const char **message)
{
    if (ctx->body && ctx->body_len && !http_request_is_json(ctx->req)) {
        *message = HTTP_NOT_JSON_MESSAGE;
        return 415;
    }
    if (!ctx->body || ctx->body_len == 0) {
        *message = "request body must be a JSON object";
        return 400;
    }
    cr_json_parser *p = http_json_parser();
    cr_json_error err = cr_json_parse(p, ctx->body, ctx->body_len, obj);
    if (err == CR_JSON_EINVALID) {
        *message = syntax_message(ctx, cr_json_parser_detail(p));
        return 400;
    }
    if (err != CR_JSON_OK) {
        *message = cr_json_error_message(err);
        return err == CR_JSON_ENOMEM ? 500 : 400;
    }
    if (cr_json_type_of(*obj) != CR_JSON_OBJECT) {
        *message = "body must be a JSON object";
        return 422;
    }
    return 0;
}

bool http_json_object_body(http_ctx *ctx, cr_json_value *obj)
{
    const char *message;
    int status = http_json_object_parse(ctx, obj, &message);
    if (status == 0)
        return true;
    http_respond_error(ctx, status, message);
    return false;
}
