/*
 * notes: a service of its own on coring, built against the installed
 * library (docs/handlers.md builds it step by step). One app, "notes":
 *
 *   GET  /about        {"service":"notes","coring":"0.1.0"}: JSON, no database
 *   POST /notes        {"body":"..."} -> 201 {"id":1,"body":"..."}, in PostgreSQL
 *   GET  /notes/{id}   200 {"id":1,"body":"..."}, or 404
 *
 * Its table is its migration, its routes' description its OpenAPI
 * fragment, its one option --notes-max-body; main() mounts it beside
 * coring's hello app, and coring_main() does the rest: the command line,
 * DATABASE_URL and the migration, /readyz, /openapi.json, /metrics, the
 * drain on SIGTERM.
 */
#include <coring/apps/apps.h>
#include <coring/apps/database.h>
#include <coring/apps/startup.h>
#include <coring/core/json_writer.h>
#include <coring/core/version.h>
#include <coring/db/db.h>
#include <coring/http/server.h>

#include <stdint.h>
#include <string.h>

/* --- settings: the app's one option --------------------------------------- */

typedef struct notes_settings {
    unsigned max_body; /* --notes-max-body: bytes a note may hold */
} notes_settings;

static notes_settings settings = {.max_body = 280};

static const coring_option options[] = {
    {.name = "notes-max-body", .value = "N", .kind = CORING_OPTION_NUMBER,
     CORING_OPTION_FIELD(notes_settings, max_body), .min = 1, .max = 1000,
     .help = "bytes a note may hold (default 280)", .default_doc = "280"},
};

/* --- the table: one migration, applied once at start-up ------------------- */

static const db_migration migrations[] = {
    {"0001_notes.sql", "CREATE TABLE notes ("
                       " id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                       " body text NOT NULL CHECK (octet_length(body) BETWEEN 1 AND 1000))"},
};
static const db_migration_set schema = {.list = migrations, .count = 1};

/* --- the statements, registered at mount ---------------------------------- */

static const db_statement insert_def = {
    .sql = "INSERT INTO notes (body) VALUES ($1) RETURNING id",
    .types = {DB_TEXT},
    .writes = true,
};
static const db_statement get_def = {
    .sql = "SELECT body FROM notes WHERE id = $1",
    .types = {DB_INT8},
};
static const db_stmt *insert_stmt, *get_stmt;

/* --- the handlers ---------------------------------------------------------- */

/* {"id":@id,"body":@body} with @status. */
static void respond_note(http_ctx *ctx, int status, int64_t id, const char *body, size_t len)
{
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, status, "application/json"));
    cr_json_object_begin(&w);
    cr_json_key(&w, "id", 2);
    cr_json_int64(&w, id);
    cr_json_key(&w, "body", 4);
    cr_json_string(&w, body, len);
    cr_json_object_end(&w);
    http_response_end(ctx);
}

static void get_about(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_writer w;
    cr_json_writer_init(&w, http_response_begin(ctx, 200, "application/json"));
    cr_json_object_begin(&w);
    cr_json_key(&w, "service", 7);
    cr_json_cstring(&w, "notes");
    cr_json_key(&w, "coring", 6);
    cr_json_cstring(&w, coring_version());
    cr_json_object_end(&w);
    http_response_end(ctx);
}

static void post_note(http_ctx *ctx, void *user)
{
    (void)user;
    cr_json_value obj, v;
    if (!http_json_object_body(ctx, &obj))
        return; /* 400, 415 or 422, answered */
    const char *text;
    size_t len;
    if (cr_json_object_get(obj, "body", 4, &v) != CR_JSON_OK ||
        cr_json_get_string(v, &text, &len) != CR_JSON_OK) {
        http_respond_error(ctx, 422, "body must be a string");
        return;
    }
    if (len == 0 || len > settings.max_body || memchr(text, '\0', len)) {
        http_respond_errorf(ctx, 422, "body must be 1 to %u bytes, without NUL", settings.max_body);
        return;
    }
    /* The parser's strings are reused while this request waits: copy. */
    char *body = cr_arena_strndup(ctx->arena, text, len);
    if (!body) {
        http_respond_error(ctx, 500, "out of memory");
        return;
    }
    db_result r;
    int64_t id;
    int err = DB_RUN(insert_stmt, &r, db_param_text(body, len));
    if (err < 0)
        app_db_respond_error(ctx, "notes", err, &r); /* 503 while PostgreSQL is away */
    else if (db_result_int64(&r, 0, 0, &id) < 0)
        http_respond_error(ctx, 500, "database error");
    else
        respond_note(ctx, 201, id, body, len);
    db_result_clear(&r);
}

static void get_note(http_ctx *ctx, void *user)
{
    (void)user;
    int64_t id;
    if (http_route_param_int64(ctx->params, "id", 1, INT64_MAX, &id) < 0) {
        http_respond_error(ctx, 400, "id must be a positive integer");
        return;
    }
    db_result r;
    const char *body;
    size_t len;
    int err = DB_RUN(get_stmt, &r, db_param_int64(id));
    if (err < 0)
        app_db_respond_error(ctx, "notes", err, &r);
    else if (db_result_rows(&r) == 0)
        http_respond_error(ctx, 404, "note not found");
    else if (db_result_string(&r, 0, 0, &body, &len) < 0)
        http_respond_error(ctx, 500, "database error");
    else
        respond_note(ctx, 200, id, body, len);
    db_result_clear(&r);
}

/* --- the app: one definition ----------------------------------------------- */

static int mount(http_router *r)
{
    int err;
    if ((err = http_router_add(r, HTTP_GET, "/about", get_about, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_POST, "/notes", post_note, NULL)) < 0 ||
        (err = http_router_add(r, HTTP_GET, "/notes/{id}", get_note, NULL)) < 0 ||
        (err = app_db_statement("notes", &insert_def, &insert_stmt)) < 0 ||
        (err = app_db_statement("notes", &get_def, &get_stmt)) < 0)
        return err;
    return 0;
}

/* The routes' description, put into /openapi.json by coring. The errors
 * refer to the server's own components (#/components/responses/...). */
static const char openapi[] = APP_JSON({
    "tags": [{"name": "notes", "description": "Notes in PostgreSQL"}],
    "paths": {
        "/about": {"get": {
            "tags": ["notes"], "operationId": "getAbout", "summary": "The service and its coring",
            "responses": {"200": {"description": "Always", "content": {"application/json": {
                "schema": {"type": "object", "required": ["service", "coring"], "properties": {
                    "service": {"type": "string"}, "coring": {"type": "string"}}}}}}}}},
        "/notes": {"post": {
            "tags": ["notes"], "operationId": "createNote", "summary": "Keep a note",
            "requestBody": {"required": true, "content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/NoteCreate"},
                "example": {"body": "buy milk"}}}},
            "responses": {
                "201": {"description": "Kept", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Note"}}}},
                "400": {"$ref": "#/components/responses/BadRequest"},
                "415": {"$ref": "#/components/responses/UnsupportedMediaType"},
                "422": {"$ref": "#/components/responses/Unprocessable"},
                "503": {"$ref": "#/components/responses/Unavailable"}}}},
        "/notes/{id}": {
            "parameters": [{"name": "id", "in": "path", "required": true, "example": 1,
                            "schema": {"type": "integer", "minimum": 1}}],
            "get": {
                "tags": ["notes"], "operationId": "getNote", "summary": "A note by its id",
                "responses": {
                    "200": {"description": "The note", "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Note"}}}},
                    "400": {"$ref": "#/components/responses/BadRequest"},
                    "404": {"$ref": "#/components/responses/NotFound"},
                    "503": {"$ref": "#/components/responses/Unavailable"}}}}
    },
    "components": {"schemas": {
        "NoteCreate": {"type": "object", "required": ["body"], "properties": {
            "body": {"type": "string", "minLength": 1, "maxLength": 1000}}},
        "Note": {"type": "object", "required": ["id", "body"], "properties": {
            "id": {"type": "integer", "minimum": 1}, "body": {"type": "string"}}}}}
});

static const app_def notes_app = {
    .name = "notes",
    .summary = "POST /notes, GET /notes/{id} (PostgreSQL), GET /about",
    .openapi = openapi,
    .database = true,
    .migrations = &schema,
    .options = options,
    .num_options = sizeof(options) / sizeof(options[0]),
    .config = &settings,
    .mount = mount,
    .ready = app_db_ready, /* /readyz: not ready while PostgreSQL is away */
    .ready_check = "database",
};

/* --- the service: its apps, and coring does the rest ------------------------ */

int main(int argc, char **argv)
{
    static const app_def *const apps[] = {&notes_app, &app_hello};
    return coring_main(argc, argv, apps, sizeof(apps) / sizeof(apps[0]));
}
