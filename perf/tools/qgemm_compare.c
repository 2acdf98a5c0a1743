/*
 * coring-qgemm-compare: the int8 linear layers of one MiniLM encoder layer
 * on coring's kernel (apps/embed/qgemm.c) and on oneDNN's int8 matmul, one
 * thread, same integers, so that keeping our own int8 kernel is a
 * measurement (issue 44: "oneDNN ... or tile code of our own: measure and
 * choose"). oneDNN picks its kernel from the CPU (AVX-512 VNNI here, AMX
 * tiles on a CPU with amx_int8); the header line says which it took.
 *
 *   coring-qgemm-compare [--rows N[,N...]] [--seconds S] [--rounds R]
 *                        [--hidden H] [--inter I]
 *
 * One "layer" is the six products of a BERT layer as in
 * coring-linear-compare (H -> H four times, H -> I, I -> H; MiniLM: H 384,
 * I 1536), y = sx sw[o] (qx . qw[o] - zx colsum[o]) + b[o]: uint8
 * activations with one scale and zero point, int8 weights quantised per
 * output row, float32 out. Rows default to 29 (one text of perf's pool)
 * and 928 (32 such texts, the c=32 batch). Backends, each on the same
 * already-quantised activations:
 *
 *   coring        embed_qgemm on weights packed once (embed_qweights_init):
 *                 what /embed --embed-int8 runs per product;
 *   coring+quant  embed_quantize_rows of the float rows, then embed_qgemm:
 *                 the whole per-product cost /embed pays (oneDNN's row
 *                 leaves quantisation out, so this row says what it adds);
 *   onednn        a oneDNN matmul primitive (u8 x s8 -> f32, weights
 *                 reordered once into the format it asks for, the zero
 *                 point and the per-output scales set at creation, bias as
 *                 its argument): the int8 path onnxruntime's and PyTorch's
 *                 CPU back ends lead to.
 *
 * Printed per row count: the median microseconds per layer over R rounds
 * of S seconds (defaults 3 and 1), GOP/s (two operations a multiply-add),
 * the time beside coring's, and the largest difference from a double
 * reference computed from the same integers. oneDNN's OpenMP runtime reads
 * OMP_NUM_THREADS at load, so the tool runs itself again with
 * OMP_NUM_THREADS=1 when it is not set so. Pin it (taskset -c 1). Built
 * only where oneDNN (libdnnl-dev) is installed.
 */
#include "coring/embed/qgemm.h"
#include "layer_bench.h"
#include "onednn_matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* One product: the float weights, their int8 form for oneDNN and the
 * reference, coring's packed copy, and oneDNN's primitive for the row
 * count being measured. */
typedef struct product {
    size_t in, out;
    float *w, *b;      /* [out, in], [out] */
    int8_t *qw;        /* [out, in], per output row symmetric */
    float *sw;         /* [out] */
    float *db;         /* oneDNN's bias: b[o] over its output scale */
    embed_qweights cw; /* coring's packed copy */
    onednn_matmul dm;  /* oneDNN's matmul for the current row count */
} product;

typedef struct bench {
    size_t rows, ldq;
    float *x, *y, sx; /* float rows (for coring+quant), outputs, the scale */
    uint8_t *qx;      /* rows * ldq quantised activations */
    float *sxr;       /* sx per row, for embed_qgemm */
    int32_t zx, *zxr; /* zero point, per row */
    product p[LAYER_PRODUCTS];
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    char impl[64]; /* the oneDNN implementation of the last primitive */
} bench;

static unsigned next(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 9;
}

/* Per output row symmetric int8 (qgemm.h's rule): sw = max|w[o]| / 127. */
static void quantize_weights(product *p)
{
    for (size_t o = 0; o < p->out; o++) {
        float m = 0;
        for (size_t k = 0; k < p->in; k++)
            m = fmaxf(m, fabsf(p->w[o * p->in + k]));
        p->sw[o] = m > 0 ? m / 127.0f : 1.0f;
        for (size_t k = 0; k < p->in; k++)
            p->qw[o * p->in + k] = (int8_t)lrintf(p->w[o * p->in + k] / p->sw[o]);
    }
}

/* oneDNN's int8 matmul for @p at @bn->rows rows, weights reordered once. */
static int onednn_setup(bench *bn, product *p)
{
    dnnl_memory_desc_t src, wei_any, wei_ba, bias, dst;
    dnnl_dims_t sd = {(dnnl_dim_t)bn->rows, (dnnl_dim_t)p->in};
    dnnl_dims_t wd = {(dnnl_dim_t)p->in, (dnnl_dim_t)p->out};
    dnnl_dims_t bd = {1, (dnnl_dim_t)p->out};
    dnnl_dims_t dd = {(dnnl_dim_t)bn->rows, (dnnl_dim_t)p->out};
    dnnl_dims_t sstrides = {(dnnl_dim_t)bn->ldq, 1};
    if (onednn_ok(dnnl_memory_desc_init_by_strides(&src, 2, sd, dnnl_u8, sstrides), "src desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&wei_any, 2, wd, dnnl_s8, dnnl_format_tag_any),
                  "weights desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&wei_ba, 2, wd, dnnl_s8, dnnl_ba), "weights desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab), "bias desc") ||
        onednn_ok(dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab), "dst desc"))
        return -1;
    /* oneDNN 2.x: dst = output_scale[o] * (sum (src - zp) wei + bias[o]),
     * the bias inside the scale (a bias of b gives a difference of about
     * b, seen), so it is given b[o] / output_scale[o]. */
    float *scales = malloc(p->out * sizeof(float));
    free(p->db);
    p->db = malloc(p->out * sizeof(float));
    if (!scales || !p->db) {
        free(scales);
        return -1;
    }
    for (size_t o = 0; o < p->out; o++) {
        scales[o] = bn->sx * p->sw[o];
        p->db[o] = p->b[o] / scales[o];
    }
    dnnl_primitive_attr_t attr;
    int32_t zp = bn->zx;
    int bad =
        onednn_ok(dnnl_primitive_attr_create(&attr), "attr") ||
        onednn_ok(dnnl_primitive_attr_set_output_scales(attr, (dnnl_dim_t)p->out, 1 << 1, scales),
                  "output scales") ||
        onednn_ok(dnnl_primitive_attr_set_zero_points(attr, DNNL_ARG_SRC, 1, 0, &zp),
                  "src zero point");
    free(scales);
    if (bad)
        return -1;
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (onednn_ok(dnnl_matmul_desc_init(&md, &src, &wei_any, &bias, &dst), "matmul desc") ||
        onednn_ok(dnnl_primitive_desc_create(&pd, &md, attr, bn->engine, NULL), "matmul pd"))
        return -1;
    dnnl_primitive_attr_destroy(attr);
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(bn->impl, sizeof bn->impl, "%s", impl);
    return onednn_matmul_make(&p->dm, bn->engine, bn->stream, pd, &wei_ba, p->qw, &src, bn->qx,
                              &bias, p->db, &dst, bn->y);
}

typedef enum backend { B_CORING, B_CORING_QUANT, B_ONEDNN, B_COUNT } backend;
static const char *const backend_name[B_COUNT] = {"coring", "coring+quant", "onednn"};

/* Product @i on backend @k (layer_bench_measure's step, and the check's). */
static void run_product(void *ctx, int k, int i)
{
    bench *bn = ctx;
    product *p = &bn->p[i];
    switch ((backend)k) {
    case B_CORING_QUANT:
        /* Overwrites qx and the per-row scales with the float rows'
         * quantisation: only the time is read from this backend. */
        embed_quantize_rows(bn->x, bn->rows, p->in, p->in, bn->qx, bn->ldq, bn->sxr, bn->zxr);
        /* fall through */
    case B_CORING:
        embed_qgemm(bn->qx, bn->rows, bn->ldq, bn->sxr, bn->zxr, &p->cw, p->b, bn->y, p->out,
                    EMBED_EPI_BIAS);
        break;
    case B_ONEDNN:
        onednn_matmul_run(&p->dm, bn->stream);
        break;
    default:
        break;
    }
}

/* The same activations for every backend: random bytes, one scale and
 * zero point for all rows (what oneDNN's common zero point can express). */
static void set_activations(bench *bn, unsigned seed)
{
    for (size_t r = 0; r < bn->rows; r++) {
        for (size_t k = 0; k < bn->ldq; k++)
            bn->qx[r * bn->ldq + k] = (uint8_t)(next(&seed) & 0xff);
        bn->sxr[r] = bn->sx;
        bn->zxr[r] = bn->zx;
    }
}

/* Largest |y - reference| of product @i on @k, the reference in double
 * from the integers both backends are given. */
static double check_product(bench *bn, backend k, int i)
{
    product *p = &bn->p[i];
    run_product(bn, k, i);
    double worst = 0;
    for (size_t r = 0; r < bn->rows; r++)
        for (size_t o = 0; o < p->out; o++) {
            long long acc = 0;
            for (size_t c = 0; c < p->in; c++)
                acc += ((long long)bn->qx[r * bn->ldq + c] - bn->zx) * p->qw[o * p->in + c];
            double ref = (double)bn->sx * p->sw[o] * (double)acc + p->b[o];
            double d = fabs(bn->y[r * p->out + o] - ref);
            worst = d > worst ? d : worst;
        }
    return worst;
}

int main(int argc, char **argv)
{
    layer_bench_opts o = {
        .rows = {29, 928}, .nrows = 2, .hidden = 384, .inter = 1536, .seconds = 1, .rounds = 3};
    int status = layer_bench_start(argc, argv, "coring-qgemm-compare",
                                   "the six int8 products of one BERT layer (H->H x4, H->I, I->H)"
                                   " on coring's kernel and oneDNN's int8 matmul, one thread each",
                                   &o);
    if (status >= 0)
        return status;
    size_t hidden = o.hidden, inter = o.inter;

    bench bn = {.sx = 0.02f, .zx = 131};
    if (onednn_ok(dnnl_engine_create(&bn.engine, dnnl_cpu, 0), "engine") ||
        onednn_ok(dnnl_stream_create(&bn.stream, bn.engine, dnnl_stream_default_flags), "stream"))
        return 1;
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
        p->qw = malloc(p->in * p->out);
        p->sw = malloc(p->out * sizeof(float));
        if (!p->w || !p->b || !p->qw || !p->sw)
            return 1;
        layer_bench_fill(p->w, p->in * p->out, &seed, 0.1f);
        layer_bench_fill(p->b, p->out, &seed, 0.1f);
        quantize_weights(p);
        if (embed_qweights_init(&p->cw, p->w, p->out, p->in) < 0)
            return 1;
    }
    bn.ldq = (maxw + 63) / 64 * 64;
    bn.x = malloc(maxrows * maxw * sizeof(float));
    bn.y = malloc(maxrows * maxw * sizeof(float));
    bn.qx = aligned_alloc(64, maxrows * bn.ldq);
    bn.sxr = malloc(maxrows * sizeof(float));
    bn.zxr = malloc(maxrows * sizeof(int32_t));
    if (!bn.x || !bn.y || !bn.qx || !bn.sxr || !bn.zxr)
        return 1;
    layer_bench_fill(bn.x, maxrows * maxw, &seed, 2.0f);

    const dnnl_version_t *dv = dnnl_version();
    printf("one thread, %zu hidden, %zu intermediate; coring's int8 kernel: %s; oneDNN %d.%d.%d\n",
           hidden, inter, embed_qgemm_kernel(), dv->major, dv->minor, dv->patch);
    printf("%6s  %-12s %12s %9s %10s %12s\n", "rows", "backend", "us/layer", "GOP/s", "vs coring",
           "max |diff|");
    for (size_t r = 0; r < o.nrows; r++) {
        bn.rows = o.rows[r];
        set_activations(&bn, 7);
        for (int i = 0; i < LAYER_PRODUCTS; i++)
            if (onednn_setup(&bn, &bn.p[i]) < 0)
                return 1;
        double diff[B_COUNT] = {0};
        for (int k = 0; k < B_COUNT; k++) {
            if (k == B_CORING_QUANT)
                continue; /* its activations are its own: timed, not checked */
            for (int i = 0; i < LAYER_PRODUCTS; i++) {
                double d = check_product(&bn, (backend)k, i);
                diff[k] = d > diff[k] ? d : diff[k];
            }
        }
        double med[B_COUNT];
        layer_bench_measure(&o, B_COUNT, run_product, &bn, med);
        double ops = 0;
        for (int i = 0; i < LAYER_PRODUCTS; i++)
            ops += 2.0 * (double)bn.rows * (double)bn.p[i].in * (double)bn.p[i].out;
        if (r == 0)
            printf("oneDNN implementation: %s\n", bn.impl[0] ? bn.impl : "?");
        for (int k = 0; k < B_COUNT; k++) {
            char d[32] = "-";
            if (k != B_CORING_QUANT)
                snprintf(d, sizeof d, "%.3g", diff[k]);
            printf("%6zu  %-12s %12.1f %9.1f %9.2fx %12s\n", bn.rows, backend_name[k], med[k],
                   ops / (med[k] * 1e3), med[k] / med[B_CORING], d);
        }
        for (int i = 0; i < LAYER_PRODUCTS; i++)
            onednn_matmul_free(&bn.p[i].dm);
    }
    return 0;
}
