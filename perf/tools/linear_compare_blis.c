/*
 * The BLIS side of coring-linear-compare (see linear_compare.h). BLIS is
 * opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND), not linked: it exports a
 * cblas_sgemm and an sgemm_ of its own, and a linked BLIS would take those
 * names from OpenBLAS (the link line keeps one copy of each library, in an
 * order CMake chooses). blis.h gives only the types and constants here.
 */
#include "linear_compare.h"

#include <blis.h>
#include <dlfcn.h>
#include <stdio.h>

static void *lib;
static __typeof__(bli_sgemm) *sgemm;
static __typeof__(bli_info_get_version_str) *version;
static const char *arch;

int linear_compare_blis_init(void)
{
    lib = dlopen(CORING_BLIS_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!lib) {
        fprintf(stderr, "coring-linear-compare: %s\n", dlerror());
        return -1;
    }
    __typeof__(bli_thread_set_num_threads) *threads = dlsym(lib, "bli_thread_set_num_threads");
    sgemm = dlsym(lib, "bli_sgemm");
    version = dlsym(lib, "bli_info_get_version_str");
    __typeof__(bli_arch_query_id) *arch_id = dlsym(lib, "bli_arch_query_id");
    __typeof__(bli_arch_string) *arch_name = dlsym(lib, "bli_arch_string");
    if (!threads || !sgemm || !version || !arch_id || !arch_name) {
        fprintf(stderr,
                "coring-linear-compare: %s lacks one of bli_sgemm, "
                "bli_thread_set_num_threads, bli_info_get_version_str, "
                "bli_arch_query_id, bli_arch_string\n",
                CORING_BLIS_LIBRARY);
        return -1;
    }
    threads(1);
    arch = arch_name(arch_id());
    return 0;
}

void linear_compare_blis(const float *x, size_t n, size_t in, const float *w, size_t out, float *y)
{
    float one = 1.0f;
    /* C = A B^T + C, A: n x in (row stride in), B: out x in (row stride in). */
    sgemm(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, (dim_t)n, (dim_t)out, (dim_t)in, &one, (float *)x,
          (inc_t)in, 1, (float *)w, (inc_t)in, 1, &one, y, (inc_t)out, 1);
}

const char *linear_compare_blis_version(void)
{
    return version();
}

const char *linear_compare_blis_arch(void)
{
    return arch;
}
