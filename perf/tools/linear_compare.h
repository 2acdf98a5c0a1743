/*
 * The BLIS side of coring-linear-compare, in its own translation unit:
 * blis.h and OpenBLAS's cblas.h do not mix in one file.
 */
#ifndef CORING_PERF_LINEAR_COMPARE_H
#define CORING_PERF_LINEAR_COMPARE_H

#include <stddef.h>

/* linear_compare_blis_init - open BLIS (CORING_BLIS_LIBRARY, the path CMake
 * found) and set it to one thread. Returns 0, or -1 after saying why on
 * stderr. */
int linear_compare_blis_init(void);

/* linear_compare_blis - y[n, out] += x[n, in] w[out, in]^T (row-major, y
 * already holding the bias) with bli_sgemm. */
void linear_compare_blis(const float *x, size_t n, size_t in, const float *w, size_t out, float *y);

/* linear_compare_blis_version - BLIS's version string (static). */
const char *linear_compare_blis_version(void);

/* linear_compare_blis_arch - the kernel set BLIS chose for this CPU
 * ("skx", "haswell", "generic", ...; static). */
const char *linear_compare_blis_arch(void);

#endif
