/*
 * What coring-linear-compare and coring-qgemm-compare share: their
 * options (the six products of one BERT layer at some row counts), the
 * one-thread set-up, the inputs and the timing.
 */
#ifndef CORING_PERF_LAYER_BENCH_H
#define CORING_PERF_LAYER_BENCH_H

#include <stddef.h>

enum { LAYER_PRODUCTS = 6, LAYER_BENCH_MAX_ROWS = 8, LAYER_BENCH_MAX_ROUNDS = 99 };

typedef struct layer_bench_opts {
    size_t rows[LAYER_BENCH_MAX_ROWS], nrows; /* row counts to measure */
    size_t hidden, inter;                     /* H and I (MiniLM: 384, 1536) */
    double seconds;                           /* per backend per round */
    int rounds;
} layer_bench_opts;

/*
 * layer_bench_start - first make sure the process runs with
 * OMP_NUM_THREADS=1, which oneDNN's and BLIS's OpenMP runtimes read at
 * load (when it is not so: set it and execv(2) /proc/self/exe with @argv,
 * so every backend runs on the calling thread); then parse --rows
 * N[,N...] --seconds S --rounds R --hidden H --inter I (and --help) into
 * @o, which holds the tool's defaults on entry. @prog names the tool in
 * its usage and errors; @what (a line) says what it measures, in its
 * usage, beside the defaults. Returns -1 to go on, or the exit
 * status: 0 after --help, 2 after a bad option, 1 when execv failed (each
 * said on stderr).
 */
int layer_bench_start(int argc, char **argv, const char *prog, const char *what,
                      layer_bench_opts *o);

/* layer_bench_max_rows - the largest of @o's row counts. */
size_t layer_bench_max_rows(const layer_bench_opts *o);

/* layer_bench_shapes - the six products' [in, out]: H->H four times
 * (query, key, value, attention output), H->I, I->H. */
void layer_bench_shapes(const layer_bench_opts *o, size_t shapes[LAYER_PRODUCTS][2]);

/* layer_bench_fill - @n pseudo-random floats in [-@scale/2, @scale/2)
 * from @seed (advanced), the same on every run. */
void layer_bench_fill(float *v, size_t n, unsigned *seed, float scale);

/*
 * layer_bench_measure - time @backends backends: @o->rounds rounds, and in
 * each, every backend in turn runs one layer (@product(@ctx, backend, i)
 * for the six products i) again and again for @o->seconds; @median_us[k]
 * gets backend k's median microseconds per layer over the rounds.
 */
void layer_bench_measure(const layer_bench_opts *o, int backends,
                         void (*product)(void *ctx, int backend, int i), void *ctx,
                         double *median_us);

#endif
