/*
 * coring-linear-compare: the float32 linear layers of one MiniLM encoder
 * layer on each matrix library that could run them, one thread, same
 * inputs, so the choice behind apps/embed/blas.c is a measurement, not a
 * belief.
 *
 *   coring-linear-compare [--rows N[,N...]] [--seconds S] [--rounds R]
 *                         [--hidden H] [--inter I]
 *
 * One "layer" is the six products of a BERT layer, y = x W^T + b with W
 * in PyTorch's [out, in] layout: query, key, value and attention output
 * (H -> H), the FFN up (H -> I) and down (I -> H); MiniLM: H 384, I 1536.
 * Per row count (default 29, one text of perf's pool, and 512, a batch of
 * 16 such texts) every backend runs the layer for S seconds (default 1),
 * the backends taking turns, R rounds (default 3); printed is the median
 * microseconds per layer, GFLOP/s, and the largest difference from
 * OpenBLAS's result (the backends compute the same thing). Backends:
 *
 *   coring    embed_sgemm_packed on weights packed once (embed_fweights),
 *             bias in the epilogue: what /embed runs where AVX-512 is;
 *   openblas  cblas_sgemm on the unpacked weights after the bias is copied
 *             into y (bert.c's linear(): what runs elsewhere); OpenBLAS
 *             packs B on every call, it has no public pre-pack;
 *   onednn    a oneDNN matmul primitive (one per shape, made at setup) on
 *             weights reordered once into the format it asks for
 *             (format_tag any), bias as its argument: the pre-packed path
 *             PyTorch and onnxruntime take;
 *   blis      bli_sgemm (typed API; it too packs per call) after the bias
 *             copy, as openblas.
 *
 * Every backend runs on the calling thread: OpenBLAS and BLIS are set to
 * one thread, and oneDNN and BLIS's OpenMP runtime read OMP_NUM_THREADS at
 * load, so the tool runs itself again with OMP_NUM_THREADS=1 when it is
 * not set so. Pin it (taskset -c 1). Built only where oneDNN (libdnnl-dev)
 * and BLIS (libblis-dev) are installed (.ci/install-deps perf).
 */
#include "coring/embed/blas.h"
#include "layer_bench.h"
#include "onednn_matmul.h"
#include "linear_compare.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void openblas_set_num_threads(int n);
char *openblas_get_corename(void);

/* One product of the layer: its weights in every backend's form. */
typedef struct product {
    size_t in, out;
    float *w, *b;      /* [out, in], [out] */
    embed_fweights fw; /* coring's packed copy */
    onednn_matmul dm;  /* oneDNN's matmul for the current row count */
} product;

typedef struct bench {
    size_t rows;
    float *x, *y, *ref; /* rows * max(in) inputs, rows * max(out) outputs */
    product p[LAYER_PRODUCTS];
    dnnl_engine_t engine;
    dnnl_stream_t stream;
} bench;

/* Reorder @p's weights once into the layout the matmul for @rows rows
 * prefers and make that primitive (oneDNN fixes the shape at creation). */
static int onednn_setup(bench *bn, product *p, size_t rows)
{
    dnnl_memory_desc_t src, wei_any, wei_ba, bias, dst;
    dnnl_dims_t sd = {(dnnl_dim_t)rows, (dnnl_dim_t)p->in};
    dnnl_dims_t wd = {(dnnl_dim_t)p->in, (dnnl_dim_t)p->out};
    dnnl_dims_t bd = {1, (dnnl_dim_t)p->out};
    dnnl_dims_t dd = {(dnnl_dim_t)rows, (dnnl_dim_t)p->out};
    /* W is [out][in] row-major: as the matmul's [in, out] weights that is
     * the "ba" layout (in varies fastest). */
    if (onednn_ok(dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_f32, dnnl_ab), "src desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&wei_any, 2, wd, dnnl_f32, dnnl_format_tag_any),
                  "weights desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&wei_ba, 2, wd, dnnl_f32, dnnl_ba),
                  "weights desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab), "bias desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab), "dst desc"))
        return -1;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (onednn_ok(dnnl_matmul_desc_init(&md, &src, &wei_any, &bias, &dst), "matmul desc") ||
        onednn_ok(dnnl_primitive_desc_create(&pd, &md, NULL, bn->engine, NULL), "matmul pd"))
        return -1;
    return onednn_matmul_make(&p->dm, bn->engine, bn->stream, pd, &wei_ba, p->w, &src, bn->x, &bias,
                              p->b, &dst, bn->y);
}

typedef enum backend { B_CORING, B_OPENBLAS, B_ONEDNN, B_BLIS, B_COUNT } backend;
static const char *const backend_name[B_COUNT] = {"coring", "openblas", "onednn", "blis"};

static void bias_rows(float *y, size_t rows, const float *b, size_t out)
{
    for (size_t r = 0; r < rows; r++)
        memcpy(y + r * out, b, out * sizeof(float));
}

/* Product @i on backend @k: y[rows, out] = x[rows, in] W^T + b
 * (layer_bench_measure's step, and the checks'). */
static void run_product(void *ctx, int k, int i)
{
    bench *bn = ctx;
    product *p = &bn->p[i];
    size_t n = bn->rows;
    switch ((backend)k) {
    case B_CORING:
        embed_sgemm_packed(bn->x, n, p->in, &p->fw, p->b, bn->y, p->out, EMBED_EPI_BIAS);
        break;
    case B_OPENBLAS:
        bias_rows(bn->y, n, p->b, p->out);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)p->out, (int)p->in, 1.0f,
                    bn->x, (int)p->in, p->w, (int)p->in, 1.0f, bn->y, (int)p->out);
        break;
    case B_ONEDNN:
        onednn_matmul_run(&p->dm, bn->stream);
        break;
    case B_BLIS:
        bias_rows(bn->y, n, p->b, p->out);
        linear_compare_blis(bn->x, n, p->in, p->w, p->out, bn->y);
        break;
    default:
        break;
    }
}

static double layer_flops(const bench *bn)
{
    double f = 0;
    for (int i = 0; i < LAYER_PRODUCTS; i++)
        f += 2.0 * (double)bn->rows * (double)bn->p[i].in * (double)bn->p[i].out;
    return f;
}

/* Largest |y - ref| over product @i's outputs after running it on @k. */
static double check_product(bench *bn, backend k, int i)
{
    product *p = &bn->p[i];
    run_product(bn, B_OPENBLAS, i);
    memcpy(bn->ref, bn->y, bn->rows * p->out * sizeof(float));
    run_product(bn, k, i);
    double worst = 0;
    for (size_t j = 0; j < bn->rows * p->out; j++) {
        double d = fabs((double)bn->y[j] - bn->ref[j]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* Where @fn was loaded from (the library's file name), for the header. */
static const char *origin(void *fn)
{
    Dl_info info;
    if (dladdr(fn, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        return slash ? slash + 1 : info.dli_fname;
    }
    return "?";
}

int main(int argc, char **argv)
{
    layer_bench_opts o = {
        .rows = {29, 512}, .nrows = 2, .hidden = 384, .inter = 1536, .seconds = 1, .rounds = 3};
    int status =
        layer_bench_start(argc, argv, "coring-linear-compare",
                          "the six float32 products of one BERT layer (H->H x4, H->I, I->H)"
                          " on coring's packed kernel, OpenBLAS, oneDNN and BLIS, one thread each",
                          &o);
    if (status >= 0)
        return status;
    size_t hidden = o.hidden, inter = o.inter;
    if (!embed_sgemm_packed_available()) {
        fprintf(stderr, "coring-linear-compare: coring's packed kernel does not run on this "
                        "CPU (no AVX-512F): nothing to compare\n");
        return 77;
    }
    openblas_set_num_threads(1);
    if (linear_compare_blis_init() < 0)
        return 1;

    bench bn = {0};
    if (onednn_ok(dnnl_engine_create(&bn.engine, dnnl_cpu, 0), "engine") ||
        onednn_ok(dnnl_stream_create(&bn.stream, bn.engine, dnnl_stream_default_flags), "stream"))
        return 1;
    const char *blas_from = origin((void *)cblas_sgemm);
    const dnnl_version_t *dv = dnnl_version();
    printf("one thread, %zu hidden, %zu intermediate; OpenBLAS %s kernels (cblas_sgemm from "
           "%s), oneDNN %d.%d.%d (%s), BLIS %s (%s kernels)\n",
           hidden, inter, openblas_get_corename(), blas_from, dv->major, dv->minor, dv->patch,
           dv->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other runtime",
           linear_compare_blis_version(), linear_compare_blis_arch());
    if (!strstr(blas_from, "openblas")) {
        fprintf(stderr, "coring-linear-compare: cblas_sgemm does not come from OpenBLAS; the "
                        "openblas row would measure another library\n");
        return 1;
    }

    size_t shapes[LAYER_PRODUCTS][2];
    layer_bench_shapes(&o, shapes);
    unsigned seed = 42;
    size_t maxw = hidden > inter ? hidden : inter, maxrows = layer_bench_max_rows(&o);
    for (int i = 0; i < LAYER_PRODUCTS; i++) {
        product *p = &bn.p[i];
        p->in = shapes[i][0];
        p->out = shapes[i][1];
        p->w = malloc(p->in * p->out * sizeof(float));
        p->b = malloc(p->out * sizeof(float));
        if (!p->w || !p->b)
            return 1;
        layer_bench_fill(p->w, p->in * p->out, &seed, 0.1f);
        layer_bench_fill(p->b, p->out, &seed, 0.1f);
        if (embed_fweights_init(&p->fw, p->w, p->out, p->in) < 0)
            return 1;
    }
    bn.x = malloc(maxrows * maxw * sizeof(float));
    bn.y = malloc(maxrows * maxw * sizeof(float));
    bn.ref = malloc(maxrows * maxw * sizeof(float));
    if (!bn.x || !bn.y || !bn.ref)
        return 1;
    layer_bench_fill(bn.x, maxrows * maxw, &seed, 2.0f);

    printf("%6s  %-9s %12s %9s %10s %12s\n", "rows", "backend", "us/layer", "GFLOP/s", "vs coring",
           "max |diff|");
    for (size_t r = 0; r < o.nrows; r++) {
        bn.rows = o.rows[r];
        for (int i = 0; i < LAYER_PRODUCTS; i++)
            if (onednn_setup(&bn, &bn.p[i], bn.rows) < 0)
                return 1;
        double diff[B_COUNT] = {0};
        for (int k = 0; k < B_COUNT; k++)
            for (int i = 0; i < LAYER_PRODUCTS; i++) {
                double d = check_product(&bn, (backend)k, i);
                diff[k] = d > diff[k] ? d : diff[k];
            }
        double med[B_COUNT];
        layer_bench_measure(&o, B_COUNT, run_product, &bn, med);
        for (int k = 0; k < B_COUNT; k++)
            printf("%6zu  %-9s %12.1f %9.1f %9.2fx %12.3g\n", bn.rows, backend_name[k], med[k],
                   layer_flops(&bn) / (med[k] * 1e3), med[k] / med[B_CORING], diff[k]);
        for (int i = 0; i < LAYER_PRODUCTS; i++)
            onednn_matmul_free(&bn.p[i].dm);
    }
    return 0;
}
