/*
 * The response side of one request alone, with no socket: what a handler
 * and http/src/response.c do to put an answer into a connection's output
 * buffer, --requests times, the buffer emptied after each as a send does.
 * Run under `valgrind --tool=callgrind` for instructions per request (the
 * server itself does not run under valgrind: io_uring). Cases:
 *   root       GET /: http_respond of a constant body
 *   json       GET /json: {"message":...} by a cr_json_writer
 *   user       a users row (5 fields) by a cr_json_writer
 *   embed      64 vectors of 384 floats, as /embed writes them
 * Each built case (json, user, embed) runs two ways: "scratch" (the
 * writer into http_scratch(), then http_respond_json copies it: how the
 * apps answered before the builder) and "builder" (http_response_begin
 * ... _end, in place); embed's scratch way writes %.9g floats
 * (cr_json_double), its builder way shortest floats (cr_json_float_array).
 *   coring-response-path CASE scratch|builder [--requests N]
 * With -DRESPONSE_PATH_SCRATCH_ONLY it builds against an http layer that
 * has no builder (the baseline).
 */
#include "coring/core/buffer.h"
#include "coring/core/json_writer.h"
#include "coring/http/server.h"
#include "http/src/internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VECTORS = 64, DIM = 384 };
static float vectors[VECTORS * DIM];

static void write_user(cr_json_writer *w)
{
    cr_json_object_begin(w);
    cr_json_key(w, "id", 2);
    cr_json_int64(w, 123456);
    cr_json_key(w, "name", 4);
    cr_json_cstring(w, "Ada Lovelace");
    cr_json_key(w, "email", 5);
    cr_json_cstring(w, "ada@example.com");
    cr_json_key(w, "created_at", 10);
    cr_json_cstring(w, "2026-12-02T04:20:58Z");
    cr_json_key(w, "active", 6);
    cr_json_bool(w, true);
    cr_json_object_end(w);
}

static void write_case(cr_json_writer *w, const char *which, bool shortest)
{
    if (!strcmp(which, "json")) {
        cr_json_object_begin(w);
        cr_json_key(w, "message", 7);
        cr_json_cstring(w, "Hello, World!");
        cr_json_object_end(w);
    } else if (!strcmp(which, "user")) {
        write_user(w);
    } else {
        cr_json_object_begin(w);
        cr_json_key(w, "embeddings", 10);
        cr_json_array_begin(w);
        for (size_t i = 0; i < VECTORS; i++) {
#ifndef RESPONSE_PATH_SCRATCH_ONLY
            if (shortest) {
                cr_json_float_array(w, vectors + i * DIM, DIM);
                continue;
            }
#else
            (void)shortest;
#endif
            cr_json_array_begin(w);
            for (size_t j = 0; j < DIM; j++)
                cr_json_double(w, vectors[i * DIM + j]);
            cr_json_array_end(w);
        }
        cr_json_array_end(w);
        cr_json_object_end(w);
    }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: coring-response-path root|json|user|embed scratch|builder "
                        "[--requests N]\n");
        return 2;
    }
    const char *which = argv[1];
    bool builder = !strcmp(argv[2], "builder");
    long requests = argc > 4 && !strcmp(argv[3], "--requests") ? atol(argv[4]) : 10000;
#ifdef RESPONSE_PATH_SCRATCH_ONLY
    if (builder) {
        fprintf(stderr, "coring-response-path: built without the builder\n");
        return 2;
    }
#endif
    for (size_t i = 0; i < VECTORS * DIM; i++) /* values like a normalised vector's */
        vectors[i] = (float)(sin((double)i * 12.9898) * 0.12);
    static http_thread thread;
    http_tl = &thread;
    cr_buf out = CR_BUF_INIT;
    size_t bytes = 0;
    for (long r = 0; r < requests; r++) {
        struct http_ctx_internal in = {.out = &out, .request_id = "0123456789abcdef", .request_id_len = 16};
        http_ctx ctx = {.internal = &in};
        if (!strcmp(which, "root")) {
            static const char body[] = "{\"message\":\"hello world\"}";
            http_respond(&ctx, 200, "application/json", body, sizeof(body) - 1);
        } else if (!builder) {
            cr_buf *b = http_scratch();
            cr_json_writer w;
            cr_json_writer_init(&w, b);
            write_case(&w, which, false);
            http_respond_json(&ctx, 200, b);
        } else {
#ifndef RESPONSE_PATH_SCRATCH_ONLY
            cr_json_writer w;
            cr_json_writer_init(&w, http_response_begin(&ctx, 200, "application/json"));
            write_case(&w, which, true);
            http_response_end(&ctx);
#endif
        }
        if (out.failed)
            return 1;
        bytes = out.len;
        cr_buf_reset(&out); /* sent */
    }
    printf("%s %s: %ld requests, %zu bytes a response\n", which, argv[2], requests, bytes);
    cr_buf_free(&out);
    cr_buf_free(&thread.scratch);
    return 0;
}
