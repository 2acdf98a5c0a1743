/*
 * coring-peak-compute: the arithmetic peak of one core for the
 * instructions the embedding encoder's products use, measured rather than
 * read off a data sheet, so that coring-embed-forward's GFLOP/s can be
 * set beside it (docs/embeddings.md, "Against the hardware").
 *
 *   coring-peak-compute [--seconds S]
 *
 * Each kernel is a tight loop of 16 independent register accumulators
 * (more than latency x issue width on any AVX-512 core) on one thread;
 * run it under taskset to pin it to a core. No memory is touched in the
 * loop, so the figure is the execution units' rate at whatever clock the
 * core runs under this load, per second of this thread's CPU time (not
 * wall time: other work on the core does not count against it). No clock
 * is assumed: a virtual machine shows no cycle counter, so the figure is
 * per second, not per cycle. Printed per kernel: instructions/ns
 * and G operations/s, counting a multiply-add as two operations:
 *
 *   vfmadd231ps zmm   16 float32 multiply-adds   = 32 FLOP
 *   vpdpbusd zmm      64 u8 x s8 multiply-adds   = 128 OP (int32 sums)
 *   vdpbf16ps zmm     32 bf16 multiply-adds      = 64 FLOP (float32 sums)
 *   vfmadd231ps ymm, vpdpbusd ymm (AVX-VNNI): half of the above, for
 *   comparison with the 256-bit paths.
 *
 * A kernel whose instructions the CPU lacks is skipped (CPUID, through
 * __builtin_cpu_supports).
 */
#include <stdbool.h>
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

/* 16 independent accumulators zmm0..15 (or ymm), sources in register 16/17
 * (zmm16 and up need AVX-512; the ymm kernels use ymm14/15 as sources and
 * 14 accumulators so they run on AVX2-only encodings). */
#define ACC16(op, w)                                                                               \
    op " %%" w "17, %%" w "16, %%" w "0\n\t" op " %%" w "17, %%" w "16, %%" w "1\n\t" op " %%" w   \
       "17, %%" w "16, %%" w "2\n\t" op " %%" w "17, %%" w "16, %%" w "3\n\t" op " %%" w           \
       "17, %%" w "16, %%" w "4\n\t" op " %%" w "17, %%" w "16, %%" w "5\n\t" op " %%" w           \
       "17, %%" w "16, %%" w "6\n\t" op " %%" w "17, %%" w "16, %%" w "7\n\t" op " %%" w           \
       "17, %%" w "16, %%" w "8\n\t" op " %%" w "17, %%" w "16, %%" w "9\n\t" op " %%" w           \
       "17, %%" w "16, %%" w "10\n\t" op " %%" w "17, %%" w "16, %%" w "11\n\t" op " %%" w         \
       "17, %%" w "16, %%" w "12\n\t" op " %%" w "17, %%" w "16, %%" w "13\n\t" op " %%" w         \
       "17, %%" w "16, %%" w "14\n\t" op " %%" w "17, %%" w "16, %%" w "15\n\t"

#define CLOBBER_VEX                                                                                \
    "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",       \
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
#define CLOBBER_EVEX CLOBBER_VEX, "xmm16", "xmm17"

#define ACC14_YMM(op)                                                                              \
    op " %%ymm15, %%ymm14, %%ymm0\n\t" op " %%ymm15, %%ymm14, %%ymm1\n\t" op                       \
       " %%ymm15, %%ymm14, %%ymm2\n\t" op " %%ymm15, %%ymm14, %%ymm3\n\t" op                       \
       " %%ymm15, %%ymm14, %%ymm4\n\t" op " %%ymm15, %%ymm14, %%ymm5\n\t" op                       \
       " %%ymm15, %%ymm14, %%ymm6\n\t" op " %%ymm15, %%ymm14, %%ymm7\n\t" op                       \
       " %%ymm15, %%ymm14, %%ymm8\n\t" op " %%ymm15, %%ymm14, %%ymm9\n\t" op                       \
       " %%ymm15, %%ymm14, %%ymm10\n\t" op " %%ymm15, %%ymm14, %%ymm11\n\t" op                     \
       " %%ymm15, %%ymm14, %%ymm12\n\t" op " %%ymm15, %%ymm14, %%ymm13\n\t"

/* Each runs @iters iterations of its block; returns instructions issued. */
#define KERNEL(name, isa, clobbers, zero, body, per_iter)                                          \
    __attribute__((target(isa), noinline)) static double name(long iters)                          \
    {                                                                                              \
        long i = iters;                                                                            \
        __asm__ volatile(zero "1:\n\t" body "dec %0\n\tjnz 1b\n\tvzeroupper\n\t"                   \
                         : "+r"(i)                                                                 \
                         :                                                                         \
                                                                                                   \
                         : clobbers, "cc");                                                        \
        return (double)iters * (per_iter);                                                         \
    }

/* Every register zero (vzeroall clears the first 16 whole): no denormals. */
#define ZERO_ZMM                                                                                   \
    "vzeroall\n\tvpxord %%zmm16, %%zmm16, %%zmm16\n\tvpxord %%zmm17, %%zmm17, %%zmm17\n\t"
#define ZERO_YMM "vzeroall\n\t"

KERNEL(fma_zmm, "avx512f", CLOBBER_EVEX, ZERO_ZMM, ACC16("vfmadd231ps", "zmm"), 16)
KERNEL(dpbusd_zmm, "avx512f,avx512vnni", CLOBBER_EVEX, ZERO_ZMM, ACC16("vpdpbusd", "zmm"), 16)
KERNEL(dpbf16_zmm, "avx512f,avx512bf16", CLOBBER_EVEX, ZERO_ZMM, ACC16("vdpbf16ps", "zmm"), 16)
KERNEL(fma_ymm, "avx2,fma", CLOBBER_VEX, ZERO_YMM, ACC14_YMM("vfmadd231ps"), 14)
KERNEL(dpbusd_ymm, "avx2,avxvnni", CLOBBER_VEX, ZERO_YMM, ACC14_YMM("%{vex%} vpdpbusd"), 14)

struct kernel {
    const char *name;
    const char *what;
    double ops; /* operations per instruction */
    bool (*have)(void);
    double (*run)(long iters);
};

static bool have_avx512f(void)
{
    return __builtin_cpu_supports("avx512f");
}
static bool have_vnni512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
}
static bool have_bf16_512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}
static bool have_fma(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
static bool have_avxvnni(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
}

static const struct kernel kernels[] = {
    {"vfmadd231ps zmm", "GFLOP/s float32", 32, have_avx512f, fma_zmm},
    {"vpdpbusd zmm", "GOP/s int8", 128, have_vnni512, dpbusd_zmm},
    {"vdpbf16ps zmm", "GFLOP/s bf16", 64, have_bf16_512, dpbf16_zmm},
    {"vfmadd231ps ymm", "GFLOP/s float32", 16, have_fma, fma_ymm},
    {"vpdpbusd ymm", "GOP/s int8", 64, have_avxvnni, dpbusd_ymm},
};

int main(int argc, char **argv)
{
    double seconds = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc && atof(argv[i + 1]) > 0)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: coring-peak-compute [--seconds S]\n");
            return 2;
        }
    }
    printf("%-16s %10s %10s  %s\n", "instruction", "instr/ns", "G ops/s", "unit");
    for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++) {
        const struct kernel *kn = &kernels[k];
        if (!kn->have()) {
            printf("%-16s %10s %10s  (not on this CPU)\n", kn->name, "-", "-");
            continue;
        }
        kn->run(1000000); /* warm the unit up (AVX-512 licence, clocks) */
        double instr = 0, start = now_s(), t;
        do
            instr += kn->run(10000000);
        while ((t = now_s() - start) < seconds);
        printf("%-16s %10.2f %10.1f  %s\n", kn->name, instr / t * 1e-9, instr * kn->ops / t * 1e-9,
               kn->what);
    }
    return 0;
}
