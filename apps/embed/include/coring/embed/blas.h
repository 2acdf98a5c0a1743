/*
 * The OpenBLAS kernels the encoder runs on.
 */
#ifndef CORING_EMBED_BLAS_H
#define CORING_EMBED_BLAS_H

#include <stddef.h>

/*
 * embed_blas_describe - one line for the log: the kernels OpenBLAS chose
 * (openblas_get_corename(): "Cooperlake", "Haswell", ...) and whether the
 * environment forced them (OPENBLAS_CORETYPE, read once when OpenBLAS is
 * loaded; DYNAMIC_ARCH builds such as Debian's pick by CPU otherwise),
 * into @buf (@len bytes, NUL-terminated). Any thread.
 */
void embed_blas_describe(char *buf, size_t len);

#endif
