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
 * (the packed float32 linear layers, the fused attention, the element-wise
 * kernels, the int8 VNNI product) where the CPU has it, OpenBLAS and
 * portable C otherwise; "portable" = OpenBLAS and portable C whatever the CPU (what a CPU without
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
 * whether the float32 linear layers run on packed weights
 * (embed_sgemm_packed_available), and which element-wise kernels run (AVX-512 or portable C, see
 * embed_kernels_select), into @buf (@len bytes, NUL-terminated). Any
 * thread.
 */
void embed_blas_describe(char *buf, size_t len);

/*
 * A float32 weight matrix [out, in] (PyTorch's nn.Linear layout) packed once
 * at load for embed_sgemm_packed: block j holds outputs 64j .. 64j+63, and
 * inside it input k takes 64 consecutive floats (one per output, zero past
 * @out). A linear layer then reads its weights in the order the kernel uses
 * them, never copying them per call (OpenBLAS's sgemm repacks B on every
 * call: ~15 % of a forward pass at one text).
 */
typedef struct embed_fweights {
    float *packed; /* out_pad * in floats, 64-byte aligned */
    size_t in, out, out_pad;
} embed_fweights;

/* What embed_sgemm_packed does after the product, per output value v. */
typedef enum embed_epilogue {
    EMBED_EPI_BIAS,          /* y = v + b */
    EMBED_EPI_BIAS_ADD,      /* y += v + b (a residual already in y) */
    EMBED_EPI_BIAS_GELU,     /* y = GELU(v + b), erf GELU (within 1e-6, vmath.h) */
} embed_epilogue;

/*
 * embed_fweights_init - pack @w (@out x @in floats, row-major, read only;
 * the caller keeps it) into @q. Returns 0, -EINVAL (a zero size) or -ENOMEM
 * (then @q holds nothing to free). Any thread; load time.
 */
int embed_fweights_init(embed_fweights *q, const float *w, size_t out, size_t in);

/* embed_fweights_free - release what embed_fweights_init allocated; @q may
 * be zeroed (then nothing happens). */
void embed_fweights_free(embed_fweights *q);

/*
 * embed_sgemm_packed_available - true when embed_sgemm_packed runs here:
 * the CPU has AVX-512F (an x86-64 build) and CORING_EMBED_KERNELS is not
 * "portable". Otherwise the caller uses
 * OpenBLAS's sgemm on the unpacked weights. Any thread, after start-up.
 */
bool embed_sgemm_packed_available(void);

/*
 * embed_sgemm_packed - y[r][o] = epilogue(sum_k x[r][k] w[o][k], b[o]) for
 * the @n rows of @x (@w->in floats each, @ldx apart) and the @w->out
 * outputs (@y: rows @ldy floats apart). @b: @w->out floats. Only when
 * embed_sgemm_packed_available(); any thread.
 */
void embed_sgemm_packed(const float *x, size_t n, size_t ldx, const embed_fweights *w,
                        const float *b, float *y, size_t ldy, embed_epilogue epi);

#endif
