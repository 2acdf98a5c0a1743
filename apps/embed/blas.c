/*
 * Which OpenBLAS kernels run the encoder (see coring/embed/blas.h).
 */
#include "coring/embed/blas.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

void embed_blas_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced)
        snprintf(buf, len, "OpenBLAS %s kernels (OPENBLAS_CORETYPE=%s in the environment)",
                 core ? core : "?", forced);
    else
        snprintf(buf, len, "OpenBLAS %s kernels", core ? core : "?");
}
