/*
 * A oneDNN matmul with its weights reordered once into the layout it asks
 * for: the pre-packed path PyTorch and onnxruntime take, as
 * coring-linear-compare (float32) and coring-qgemm-compare (int8) run it.
 */
#ifndef CORING_PERF_ONEDNN_MATMUL_H
#define CORING_PERF_ONEDNN_MATMUL_H

#include <oneapi/dnnl/dnnl.h>

typedef struct onednn_matmul {
    dnnl_primitive_t mm;
    dnnl_memory_t w, src, bias, dst; /* w: oneDNN's own reordered copy */
} onednn_matmul;

/* onednn_ok - 0 when @st is dnnl_success, else -1 after saying on stderr
 * that @what failed. */
int onednn_ok(dnnl_status_t st, const char *what);

/*
 * onednn_matmul_make - from @pd (a matmul primitive descriptor whose
 * weights were described with dnnl_format_tag_any; taken over: destroyed
 * here either way), reorder @weights (laid out as @plain, only read) once
 * into the layout @pd chose, then make the primitive and the memories over
 * @x, @b and @y (described by @src, @bias and @dst; not copied, so they
 * must outlive @m). Returns 0, or -1 after saying which oneDNN call failed
 * (man: oneDNN's "Reorder" and "Matrix Multiplication" primitives).
 */
int onednn_matmul_make(onednn_matmul *m, dnnl_engine_t engine, dnnl_stream_t stream,
                       dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *plain, void *weights,
                       const dnnl_memory_desc_t *src, void *x, const dnnl_memory_desc_t *bias,
                       void *b, const dnnl_memory_desc_t *dst, void *y);

/* onednn_matmul_run - run @m once on @stream and wait for it. */
void onednn_matmul_run(const onednn_matmul *m, dnnl_stream_t stream);

/* onednn_matmul_free - what onednn_matmul_make made. */
void onednn_matmul_free(onednn_matmul *m);

#endif
