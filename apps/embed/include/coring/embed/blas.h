/*
 * The kernels the encoder runs on: OpenBLAS's choice, and the switch
 * (CORING_EMBED_KERNELS) between our AVX-512 kernels and portable C.
 */
#ifndef CORING_EMBED_BLAS_H
#define CORING_EMBED_BLAS_H

#include <stdbool.h>
#include <stddef.h>

/*
 * embed_kernels_select - choose the encoder's own kernels from @value, the
 * CORING_EMBED_KERNELS environment variable: NULL, "" or "auto" = AVX-512
 * (element-wise kernels, int8 VNNI product) where the CPU has it, portable C
 * otherwise; "portable" = portable C whatever the CPU (what a CPU without
 * AVX-512 runs; the embed reference test runs both). Call once at start-up,
 * before any inference thread runs (not thread-safe against
 * embed_kernels_portable). Returns 0, or -EINVAL for any other value (the
 * choice is then unchanged).
 */
int embed_kernels_select(const char *value);

/*
 * embed_kernels_portable - true when embed_kernels_select("portable") was
 * called: the AVX-512 kernels of bert.c and qgemm.c must not run. Any
 * thread, after start-up.
 */
bool embed_kernels_portable(void);

/*
 * embed_blas_describe - one line for the log: the kernels OpenBLAS chose
 * (openblas_get_corename(): "Cooperlake", "Haswell", ...) and whether the
 * environment forced them (OPENBLAS_CORETYPE, read once when OpenBLAS is
 * loaded; DYNAMIC_ARCH builds such as Debian's pick by CPU otherwise),
 * and which element-wise kernels run (AVX-512 or portable C, see
 * embed_kernels_select), into @buf (@len bytes, NUL-terminated). Any
 * thread.
 */
void embed_blas_describe(char *buf, size_t len);

#endif
