/*
 * A pre-packed oneDNN matmul. See onednn_matmul.h.
 */
#include "onednn_matmul.h"

#include <stdio.h>

int onednn_ok(dnnl_status_t st, const char *what)
{
    if (st == dnnl_success)
        return 0;
    fprintf(stderr, "oneDNN %s failed (status %d)\n", what, (int)st);
    return -1;
}

int onednn_matmul_make(onednn_matmul *m, dnnl_engine_t engine, dnnl_stream_t stream,
                       dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *plain, void *weights,
                       const dnnl_memory_desc_t *src, void *x, const dnnl_memory_desc_t *bias,
                       void *b, const dnnl_memory_desc_t *dst, void *y)
{
    const dnnl_memory_desc_t *packed = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_memory_t from = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    int bad =
        onednn_ok(dnnl_memory_create(&from, plain, engine, weights), "weights memory") ||
        onednn_ok(dnnl_memory_create(&m->w, packed, engine, DNNL_MEMORY_ALLOCATE),
                  "packed weights memory") ||
        onednn_ok(dnnl_reorder_primitive_desc_create(&rpd, plain, engine, packed, engine, NULL),
                  "reorder pd") ||
        onednn_ok(dnnl_primitive_create(&reorder, rpd), "reorder");
    if (!bad) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, m->w}};
        bad = onednn_ok(dnnl_primitive_execute(reorder, stream, 2, args), "reorder run") ||
              onednn_ok(dnnl_stream_wait(stream), "stream wait") ||
              onednn_ok(dnnl_primitive_create(&m->mm, pd), "matmul") ||
              onednn_ok(dnnl_memory_create(&m->src, src, engine, x), "src memory") ||
              onednn_ok(dnnl_memory_create(&m->bias, bias, engine, b), "bias memory") ||
              onednn_ok(dnnl_memory_create(&m->dst, dst, engine, y), "dst memory");
    }
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(from);
    dnnl_primitive_desc_destroy(pd);
    return bad ? -1 : 0;
}

void onednn_matmul_run(const onednn_matmul *m, dnnl_stream_t stream)
{
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, m->src},
                              {DNNL_ARG_WEIGHTS, m->w},
                              {DNNL_ARG_BIAS, m->bias},
                              {DNNL_ARG_DST, m->dst}};
    dnnl_primitive_execute(m->mm, stream, 4, args);
    dnnl_stream_wait(stream);
}

void onednn_matmul_free(onednn_matmul *m)
{
    dnnl_primitive_destroy(m->mm);
    dnnl_memory_destroy(m->w);
    dnnl_memory_destroy(m->src);
    dnnl_memory_destroy(m->bias);
    dnnl_memory_destroy(m->dst);
    *m = (onednn_matmul){0};
}
