/*
 * The embed app's response writing alone: 64 vectors of 384 floats (an
 * /embed answer at its largest, MiniLM's size), written as JSON arrays
 * with "%.9g" (cr_json_double, the writer before shortest floats) and with
 * the shortest round-trip text (cr_json_float_array). Prints, for each,
 * the bytes written and the ns per float (best of --rounds).
 *   coring-json-floats [--rounds N] [--vectors N] [--dim N] [--only double|float]
 * --only runs one writer (for callgrind: instructions per float).
 */
#include "coring/core/buffer.h"
#include "coring/core/json_writer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* L2-normalized vectors of Gaussian values: the shape /embed answers. */
static void fill(float *v, size_t vectors, size_t dim)
{
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < vectors; i++) {
        double norm = 0;
        for (size_t j = 0; j < dim; j++) {
            double u[2];
            for (int k = 0; k < 2; k++) {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                u[k] = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
            }
            double g = sqrt(-2 * log(u[0])) * cos(2 * M_PI * u[1]);
            v[i * dim + j] = (float)g;
            norm += g * g;
        }
        for (size_t j = 0; j < dim; j++)
            v[i * dim + j] = (float)(v[i * dim + j] / sqrt(norm));
    }
}

static void write_all(cr_buf *b, const float *v, size_t vectors, size_t dim, bool shortest)
{
    cr_buf_reset(b);
    cr_json_writer w;
    cr_json_writer_init(&w, b);
    cr_json_object_begin(&w);
    cr_json_key(&w, "embeddings", 10);
    cr_json_array_begin(&w);
    for (size_t i = 0; i < vectors; i++) {
        if (shortest) {
            cr_json_float_array(&w, v + i * dim, dim);
        } else {
            cr_json_array_begin(&w);
            for (size_t j = 0; j < dim; j++)
                cr_json_double(&w, v[i * dim + j]);
            cr_json_array_end(&w);
        }
    }
    cr_json_array_end(&w);
    cr_json_object_end(&w);
}

int main(int argc, char **argv)
{
    int rounds = 20;
    size_t vectors = 64, dim = 384;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--vectors"))
            vectors = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim"))
            dim = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
        else {
            fprintf(stderr, "coring-json-floats: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (rounds < 1 || vectors < 1 || dim < 1)
        return 2;
    float *v = malloc(vectors * dim * sizeof(float));
    if (!v)
        return 1;
    fill(v, vectors, dim);
    cr_buf b = CR_BUF_INIT;
    static const char *names[2] = {"double", "float"};
    for (int k = 0; k < 2; k++) {
        if (only && strcmp(only, names[k]))
            continue;
        uint64_t best = UINT64_MAX;
        for (int r = 0; r < rounds; r++) {
            uint64_t t0 = now_ns();
            write_all(&b, v, vectors, dim, k == 1);
            uint64_t t = now_ns() - t0;
            if (t < best)
                best = t;
        }
        if (b.failed)
            return 1;
        printf("%-6s %s: %zu bytes, %.1f ns per float (best of %d)\n", names[k],
               k ? "shortest (cr_json_float_array)" : "%.9g (cr_json_double)", b.len,
               (double)best / (double)(vectors * dim), rounds);
    }
    cr_buf_free(&b);
    free(v);
    return 0;
}
