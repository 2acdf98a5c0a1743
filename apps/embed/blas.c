/*
 * Which kernels run the encoder (see coring/embed/blas.h).
 */
#include "coring/embed/blas.h"

#include "coring/embed/bert.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool portable_only;

int embed_kernels_select(const char *value)
{
    if (!value || !*value || strcmp(value, "auto") == 0)
        portable_only = false;
    else if (strcmp(value, "portable") == 0)
        portable_only = true;
    else
        return -EINVAL;
    return 0;
}

bool embed_kernels_portable(void)
{
    return portable_only;
}

void embed_blas_describe(char *buf, size_t len)
{
    const char *core = openblas_get_corename();
    const char *forced = getenv("OPENBLAS_CORETYPE");
    const char *own = embed_bert_avx512() ? "AVX-512" : "portable C";
    if (forced)
        snprintf(buf, len,
                 "OpenBLAS %s kernels (OPENBLAS_CORETYPE=%s in the environment); "
                 "element-wise kernels %s%s",
                 core ? core : "?", forced, own, portable_only ? " (CORING_EMBED_KERNELS=portable)" : "");
    else
        snprintf(buf, len, "OpenBLAS %s kernels; element-wise kernels %s%s", core ? core : "?", own,
                 portable_only ? " (CORING_EMBED_KERNELS=portable)" : "");
}
