/*
 * coring-read-bandwidth: how fast one core reads a buffer of a given size
 * again and again, like STREAM's read-only kernels: the memory floor of an
 * embedding pass that streams all the model's weights (at one text every
 * pass reads every weight once; docs/embeddings.md, "Against the
 * hardware").
 *
 *   coring-read-bandwidth [--seconds S] SIZE...
 *
 * SIZE: bytes, with an optional K, M or G suffix (powers of 1024) or a
 * decimal fraction (10.6M). Per size: the buffer is allocated 64-byte
 * aligned, written once (so its pages exist), then summed with 512-bit
 * loads (AVX2's 256 bits without AVX-512) into 8 independent
 * accumulators, whole, for S seconds of this thread's CPU time (default
 * 2). Printed: GB/s (10^9 bytes per CPU second) and the time of one read
 * of the buffer. A size well past the
 * last-level cache gives DRAM's bandwidth for one core; a size that fits
 * gives the cache's. Run it under taskset to pin it to a core.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* This thread's CPU time: on a machine shared with other work, wall time
 * would count the time others ran on the core. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* uint32_t name(const void *p, size_t n): the sum of the @n bytes at @p
 * (64-byte aligned, n a multiple of 512) as 32-bit lanes, so the loads
 * cannot be dropped, read with @vec loads into 8 independent
 * accumulators; one version per instruction set (@isa). */
#define READ_SUM(name, isa, vec, zero, load, add)                                                  \
    __attribute__((target(isa))) static uint32_t name(const void *p, size_t n)                     \
    {                                                                                              \
        const vec *v = p;                                                                          \
        vec a0 = zero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;            \
        for (size_t i = 0; i < n / sizeof(vec); i += 8) {                                          \
            a0 = add(a0, load(v + i));                                                             \
            a1 = add(a1, load(v + i + 1));                                                         \
            a2 = add(a2, load(v + i + 2));                                                         \
            a3 = add(a3, load(v + i + 3));                                                         \
            a4 = add(a4, load(v + i + 4));                                                         \
            a5 = add(a5, load(v + i + 5));                                                         \
            a6 = add(a6, load(v + i + 6));                                                         \
            a7 = add(a7, load(v + i + 7));                                                         \
        }                                                                                          \
        a0 = add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7)));                    \
        uint32_t lanes[sizeof(vec) / 4], sum = 0;                                                  \
        memcpy(lanes, &a0, sizeof(lanes));                                                         \
        for (size_t j = 0; j < sizeof(vec) / 4; j++)                                               \
            sum += lanes[j];                                                                       \
        return sum;                                                                                \
    }

READ_SUM(read_avx512, "avx512f", __m512i, _mm512_setzero_si512, _mm512_load_si512, _mm512_add_epi32)
READ_SUM(read_avx2, "avx2", __m256i, _mm256_setzero_si256, _mm256_load_si256, _mm256_add_epi32)

/* "10.6M" -> bytes; 0 on a malformed size. */
static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double unit = 1;
    if (*end == 'K' || *end == 'k')
        unit = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        unit = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        unit = 1024.0 * 1024 * 1024, end++;
    if (end == s || *end || !(v > 0) || v * unit > 64.0 * 1024 * 1024 * 1024)
        return 0;
    return (size_t)(v * unit);
}

int main(int argc, char **argv)
{
    double seconds = 2;
    int first = 1;
    if (argc > 2 && !strcmp(argv[1], "--seconds") && atof(argv[2]) > 0) {
        seconds = atof(argv[2]);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: coring-read-bandwidth [--seconds S] SIZE...  (SIZE: 1G, 42.5M)\n");
        return 2;
    }
    int wide = __builtin_cpu_supports("avx512f");
    printf("%12s %10s %12s  (%s loads)\n", "bytes", "GB/s", "ms/read",
           wide ? "512-bit" : "256-bit");
    for (int a = first; a < argc; a++) {
        size_t size = parse_size(argv[a]);
        if (!size) {
            fprintf(stderr, "coring-read-bandwidth: bad size %s\n", argv[a]);
            return 2;
        }
        size = (size + 511) / 512 * 512;
        void *buf = aligned_alloc(64, size);
        if (!buf) {
            fprintf(stderr, "coring-read-bandwidth: cannot allocate %zu bytes\n", size);
            return 1;
        }
        memset(buf, 1, size);
        uint32_t sink = wide ? read_avx512(buf, size) : read_avx2(buf, size); /* warm */
        size_t reads = 0;
        double start = now_s(), t;
        do {
            sink += wide ? read_avx512(buf, size) : read_avx2(buf, size);
            reads++;
        } while ((t = now_s() - start) < seconds);
        printf("%12zu %10.2f %12.4f  %s%s\n", size, (double)size * (double)reads / t * 1e-9,
               t * 1e3 / (double)reads, argv[a], sink == 1 ? " " : "");
        free(buf);
    }
    return 0;
}
