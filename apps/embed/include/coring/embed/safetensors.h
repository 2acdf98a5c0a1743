/*
 * A reader for the safetensors format (Hugging Face): an 8-byte
 * little-endian header length N, N bytes of JSON mapping tensor names to
 * {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
 * byte after the header; an optional "__metadata__" entry), then the raw
 * little-endian tensor data. The file is mmap'd read-only; tensors point
 * into the mapping (or, when a tensor is not aligned to its element size,
 * into an aligned copy).
 *
 * Source: https://huggingface.co/docs/safetensors (format section).
 * An open file is read-only afterwards: any thread may read it.
 */
#ifndef CORING_EMBED_SAFETENSORS_H
#define CORING_EMBED_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define EMBED_TENSOR_MAX_DIMS 8

typedef struct embed_tensor {
    const char *name;    /* NUL-terminated, owned by the file */
    char dtype[8];       /* "F32", "F16", "BF16", "I64", ... as written */
    size_t element_size; /* bytes per element (0 for a dtype not known here) */
    unsigned ndim;
    int64_t shape[EMBED_TENSOR_MAX_DIMS];
    const void *data; /* nbytes of data, aligned to element_size */
    size_t nbytes;
} embed_tensor;

typedef struct embed_safetensors embed_safetensors;

/*
 * embed_safetensors_open - map @path and check its header: valid JSON, every
 * entry with a dtype, a shape and offsets inside the file whose size agrees
 * with the shape (shape product x element size).
 * @err: @err_len bytes for a one-line message on failure.
 * Returns 0 and *@out (free with embed_safetensors_close), -ENOENT, -EIO,
 * -EINVAL (malformed or truncated file; the message says what) or -ENOMEM.
 * Thread: any.
 */
int embed_safetensors_open(const char *path, embed_safetensors **out, char *err, size_t err_len);

void embed_safetensors_close(embed_safetensors *st);

/* embed_safetensors_find - the tensor called @name, or NULL. */
const embed_tensor *embed_safetensors_find(const embed_safetensors *st, const char *name);

/* embed_safetensors_count / _at - iterate over the tensors (file order not
 * kept). _at returns NULL when @i >= count. */
size_t embed_safetensors_count(const embed_safetensors *st);
const embed_tensor *embed_safetensors_at(const embed_safetensors *st, size_t i);

/*
 * embed_safetensors_drop - the @len bytes at @data (inside one of @st's
 * tensors) will not be read again soon: the whole pages among them leave
 * the process's resident set (madvise(2) MADV_DONTNEED on the read-only
 * private file mapping; a later read faults them back in from the file,
 * unchanged). Does nothing for a tensor held in an aligned copy. Only a
 * hint: no error. Thread: any.
 */
void embed_safetensors_drop(const embed_safetensors *st, const void *data, size_t len);

#endif
