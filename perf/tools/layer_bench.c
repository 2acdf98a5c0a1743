/*
 * The options, set-up and timing of the layer benchmarks. See layer_bench.h.
 */
#include "layer_bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int parse_rows(const char *s, layer_bench_opts *o)
{
    o->nrows = 0;
    while (*s) {
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || errno || v == 0 || v > 65536 || o->nrows == LAYER_BENCH_MAX_ROWS)
            return -1;
        o->rows[o->nrows++] = v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return o->nrows ? 0 : -1;
}

static int one_thread(char **argv, const char *prog)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    if (omp && strcmp(omp, "1") == 0)
        return 0;
    setenv("OMP_NUM_THREADS", "1", 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "%s: execv /proc/self/exe: %s\n", prog, strerror(errno));
    return -1;
}

static void usage(FILE *f, const char *prog, const char *what, const layer_bench_opts *o)
{
    fprintf(f,
            "usage: %s [--rows N[,N...]] [--seconds S] [--rounds R] [--hidden H] [--inter I]\n"
            "  %s\n  defaults: --rows ",
            prog, what);
    for (size_t r = 0; r < o->nrows; r++)
        fprintf(f, "%s%zu", r ? "," : "", o->rows[r]);
    fprintf(f, " --seconds %g --rounds %d --hidden %zu --inter %zu\n", o->seconds, o->rounds,
            o->hidden, o->inter);
}

int layer_bench_start(int argc, char **argv, const char *prog, const char *what,
                      layer_bench_opts *o)
{
    if (one_thread(argv, prog) < 0)
        return 1;
    const layer_bench_opts defaults = *o;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, prog, what, &defaults);
            return 0;
        } else if (!strcmp(argv[i], "--rows") && v) {
            if (parse_rows(v, o) < 0) {
                fprintf(stderr, "%s: --rows wants N[,N...], 1..65536, at most %d\n", prog,
                        LAYER_BENCH_MAX_ROWS);
                return 2;
            }
        } else if (!strcmp(argv[i], "--seconds") && v) {
            o->seconds = atof(v);
        } else if (!strcmp(argv[i], "--rounds") && v) {
            o->rounds = atoi(v);
        } else if (!strcmp(argv[i], "--hidden") && v) {
            o->hidden = strtoul(v, NULL, 10);
        } else if (!strcmp(argv[i], "--inter") && v) {
            o->inter = strtoul(v, NULL, 10);
        } else {
            usage(stderr, prog, what, &defaults);
            return 2;
        }
        i++;
    }
    if (o->seconds <= 0 || o->seconds > 60 || o->rounds < 1 || o->rounds > LAYER_BENCH_MAX_ROUNDS ||
        o->hidden == 0 || o->hidden > 8192 || o->inter == 0 || o->inter > 32768) {
        fprintf(stderr, "%s: --seconds 0..60, --rounds 1..%d, --hidden 1..8192, --inter 1..32768\n",
                prog, LAYER_BENCH_MAX_ROUNDS);
        return 2;
    }
    return -1;
}

size_t layer_bench_max_rows(const layer_bench_opts *o)
{
    size_t m = 0;
    for (size_t r = 0; r < o->nrows; r++)
        m = o->rows[r] > m ? o->rows[r] : m;
    return m;
}

void layer_bench_shapes(const layer_bench_opts *o, size_t shapes[LAYER_PRODUCTS][2])
{
    for (int i = 0; i < 4; i++) {
        shapes[i][0] = o->hidden;
        shapes[i][1] = o->hidden;
    }
    shapes[4][0] = o->hidden;
    shapes[4][1] = o->inter;
    shapes[5][0] = o->inter;
    shapes[5][1] = o->hidden;
}

void layer_bench_fill(float *v, size_t n, unsigned *seed, float scale)
{
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        v[i] = ((float)(*seed >> 9) / (float)(1u << 23) - 0.5f) * scale;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void layer_bench_measure(const layer_bench_opts *o, int backends,
                         void (*product)(void *ctx, int backend, int i), void *ctx,
                         double *median_us)
{
    double us[LAYER_BENCH_MAX_ROUNDS];
    for (int k = 0; k < backends; k++)
        median_us[k] = 0;
    double *all = malloc((size_t)backends * LAYER_BENCH_MAX_ROUNDS * sizeof(double));
    if (!all)
        return;
    for (int round = 0; round < o->rounds; round++)
        for (int k = 0; k < backends; k++) {
            long layers = 0;
            double t0 = now_s(), t;
            do {
                for (int i = 0; i < LAYER_PRODUCTS; i++)
                    product(ctx, k, i);
                layers++;
                t = now_s();
            } while (t - t0 < o->seconds);
            all[k * LAYER_BENCH_MAX_ROUNDS + round] = (t - t0) * 1e6 / (double)layers;
        }
    for (int k = 0; k < backends; k++) {
        memcpy(us, all + k * LAYER_BENCH_MAX_ROUNDS, (size_t)o->rounds * sizeof(double));
        qsort(us, (size_t)o->rounds, sizeof(double), cmp_double);
        median_us[k] = us[o->rounds / 2];
    }
    free(all);
}
