/*
 * coring-compress-levels: what each coding costs at each level on given
 * bodies, without HTTP: CPU microseconds per compression (thread CPU time,
 * so that a busy machine stretches it less than wall time) and bytes out,
 * for gzip (libdeflate, levels 1-9), br (libbrotli, qualities 0-6) and zstd
 * (libzstd, levels 1-6): the table docs/compression.md chose coring's
 * levels from. perf/compression.sh runs it on the bodies coring serves.
 *   coring-compress-levels [--iterations N] FILE...
 * Prints one line per file, coding and level: file, bytes in, coding,
 * level, bytes out, us CPU per compression.
 */
#include <brotli/encode.h>
#include <libdeflate.h>
#include <zstd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            b = realloc(b, cap *= 2);
    }
    fclose(f);
    *len = n;
    return b;
}

static void report(const char *file, size_t in, const char *coding, int level, size_t out,
                   double t0, int iterations)
{
    printf("%s %zu %s %d %zu %.2f\n", file, in, coding, level, out, (cpu_us() - t0) / iterations);
}

int main(int argc, char **argv)
{
    int iterations = 500, first = 1;
    if (argc > 2 && strcmp(argv[1], "--iterations") == 0) {
        iterations = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || iterations < 1) {
        fprintf(stderr, "usage: coring-compress-levels [--iterations N] FILE...\n");
        return 2;
    }
    printf("file bytes_in coding level bytes_out us_cpu\n");
    for (int f = first; f < argc; f++) {
        size_t n;
        char *in = read_file(argv[f], &n);
        size_t cap = n * 2 + 1024;
        unsigned char *out = malloc(cap);
        if (!in || !out) {
            fprintf(stderr, "coring-compress-levels: cannot read %s\n", argv[f]);
            return 1;
        }
        for (int level = 1; level <= 9; level++) {
            struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
            size_t m = 0;
            double t0 = cpu_us();
            for (int i = 0; i < iterations; i++)
                m = libdeflate_gzip_compress(c, in, n, out, cap);
            report(argv[f], n, "gzip", level, m, t0, iterations);
            libdeflate_free_compressor(c);
        }
        for (int quality = 0; quality <= 6; quality++) {
            size_t m = 0;
            double t0 = cpu_us();
            for (int i = 0; i < iterations; i++) {
                m = cap;
                BrotliEncoderCompress(quality, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_TEXT, n,
                                      (const uint8_t *)in, &m, out);
            }
            report(argv[f], n, "br", quality, m, t0, iterations);
        }
        ZSTD_CCtx *z = ZSTD_createCCtx();
        for (int level = 1; level <= 6; level++) {
            size_t m = 0;
            double t0 = cpu_us();
            for (int i = 0; i < iterations; i++)
                m = ZSTD_compressCCtx(z, out, cap, in, n, level);
            report(argv[f], n, "zstd", level, m, t0, iterations);
        }
        ZSTD_freeCCtx(z);
        free(in);
        free(out);
    }
    return 0;
}
