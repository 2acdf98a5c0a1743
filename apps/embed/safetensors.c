/*
 * safetensors reader (see coring/embed/safetensors.h): mmap, then the JSON
 * header parsed with coring's simdjson wrapper into a table of tensors.
 */
#include "coring/embed/safetensors.h"

#include "coring/core/json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is not a model we can use (HF caps it at 100 MB). */
#define HEADER_MAX (100u * 1024u * 1024u)

struct embed_safetensors {
    void *map;
    size_t map_len;
    embed_tensor *tensors;
    size_t count;
    char *names;   /* all names, NUL-terminated */
    void **copies; /* aligned copies of misaligned tensors */
    size_t copy_count;
};

void embed_safetensors_close(embed_safetensors *st)
{
    if (!st)
        return;
    if (st->map && st->map != MAP_FAILED)
        munmap(st->map, st->map_len);
    for (size_t i = 0; i < st->copy_count; i++)
        free(st->copies[i]);
    free(st->copies);
    free(st->tensors);
    free(st->names);
    free(st);
}

void embed_safetensors_drop(const embed_safetensors *st, const void *data, size_t len)
{
    uintptr_t map = (uintptr_t)st->map, begin = (uintptr_t)data, end = begin + len;
    if (!st->map || st->map == MAP_FAILED || begin < map || end > map + st->map_len)
        return; /* not in the mapping: a copy */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    begin = (begin + page - 1) / page * page;
    end = end / page * page;
    if (end > begin)
        madvise((void *)begin, end - begin, MADV_DONTNEED);
}

size_t embed_safetensors_count(const embed_safetensors *st)
{
    return st->count;
}

const embed_tensor *embed_safetensors_at(const embed_safetensors *st, size_t i)
{
    return i < st->count ? &st->tensors[i] : NULL;
}

const embed_tensor *embed_safetensors_find(const embed_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->tensors[i].name, name) == 0)
            return &st->tensors[i];
    return NULL;
}

static size_t dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } known[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
        {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2},  {"U32", 4}, {"U64", 8},
    };
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(d, known[i].name) == 0)
            return known[i].size;
    return 0;
}

/* Fill @t from header entry @v; @data/@data_len: the data section. */
static int read_entry(embed_safetensors *st, embed_tensor *t, cr_json_value v, const char *data,
                      size_t data_len, char *err, size_t err_len)
{
    cr_json_value dtype, shape, offsets, x;
    const char *s;
    size_t len;
    if (cr_json_object_get(v, "dtype", 5, &dtype) != CR_JSON_OK ||
        cr_json_get_string(dtype, &s, &len) != CR_JSON_OK || len == 0 || len >= sizeof(t->dtype)) {
        snprintf(err, err_len, "tensor %s: missing or bad \"dtype\"", t->name);
        return -EINVAL;
    }
    memcpy(t->dtype, s, len);
    t->dtype[len] = '\0';
    t->element_size = dtype_size(t->dtype);
    long ndim;
    if (cr_json_object_get(v, "shape", 5, &shape) != CR_JSON_OK ||
        (ndim = cr_json_array_size(shape)) < 0 || ndim > EMBED_TENSOR_MAX_DIMS) {
        snprintf(err, err_len, "tensor %s: missing or bad \"shape\"", t->name);
        return -EINVAL;
    }
    t->ndim = (unsigned)ndim;
    uint64_t elements = 1;
    for (unsigned i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (cr_json_array_at(shape, i, &x) != CR_JSON_OK ||
            cr_json_get_uint64(x, &d) != CR_JSON_OK || d > (1ull << 40) ||
            (d && elements > (1ull << 40) / d)) {
            snprintf(err, err_len, "tensor %s: bad \"shape\"", t->name);
            return -EINVAL;
        }
        t->shape[i] = (int64_t)d;
        elements *= d;
    }
    uint64_t begin, end;
    if (cr_json_object_get(v, "data_offsets", 12, &offsets) != CR_JSON_OK ||
        cr_json_array_size(offsets) != 2 || cr_json_array_at(offsets, 0, &x) != CR_JSON_OK ||
        cr_json_get_uint64(x, &begin) != CR_JSON_OK ||
        cr_json_array_at(offsets, 1, &x) != CR_JSON_OK ||
        cr_json_get_uint64(x, &end) != CR_JSON_OK || begin > end) {
        snprintf(err, err_len, "tensor %s: missing or bad \"data_offsets\"", t->name);
        return -EINVAL;
    }
    if (end > data_len) {
        snprintf(err, err_len,
                 "tensor %s: data ends at byte %llu but the file has only %zu data bytes "
                 "(truncated file?)",
                 t->name, (unsigned long long)end, data_len);
        return -EINVAL;
    }
    t->nbytes = (size_t)(end - begin);
    if (t->element_size && elements * t->element_size != t->nbytes) {
        snprintf(err, err_len, "tensor %s: %zu data bytes for %llu elements of %s", t->name,
                 t->nbytes, (unsigned long long)elements, t->dtype);
        return -EINVAL;
    }
    const char *p = data + begin;
    size_t align = t->element_size ? t->element_size : 1;
    if ((uintptr_t)p % align) {
        void **copies = realloc(st->copies, (st->copy_count + 1) * sizeof(*copies));
        if (!copies)
            return -ENOMEM;
        st->copies = copies;
        void *copy = malloc(t->nbytes ? t->nbytes : 1);
        if (!copy)
            return -ENOMEM;
        memcpy(copy, p, t->nbytes);
        st->copies[st->copy_count++] = copy;
        p = copy;
    }
    t->data = p;
    return 0;
}

int embed_safetensors_open(const char *path, embed_safetensors **out, char *err, size_t err_len)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, err_len, "%s: %s", path, strerror(e));
        return e == ENOENT ? -ENOENT : -EIO;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        int e = errno;
        close(fd);
        snprintf(err, err_len, "%s: %s", path, strerror(e));
        return -EIO;
    }
    size_t size = (size_t)sb.st_size;
    if (size < 8) {
        close(fd);
        snprintf(err, err_len, "%s: %zu bytes: too short for a safetensors file", path, size);
        return -EINVAL;
    }
    embed_safetensors *st = calloc(1, sizeof(*st));
    if (!st) {
        close(fd);
        return -ENOMEM;
    }
    st->map_len = size;
    st->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (st->map == MAP_FAILED) {
        int e = errno;
        snprintf(err, err_len, "%s: mmap: %s", path, strerror(e));
        embed_safetensors_close(st);
        return -EIO;
    }
    const unsigned char *b = st->map;
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--)
        header_len = header_len << 8 | b[i];
    if (header_len > HEADER_MAX || header_len > size - 8) {
        snprintf(err, err_len,
                 "%s: header of %llu bytes does not fit the file (%zu bytes; truncated?)", path,
                 (unsigned long long)header_len, size);
        embed_safetensors_close(st);
        return -EINVAL;
    }
    cr_json_parser *parser = cr_json_parser_create(header_len + 64, 16);
    if (!parser) {
        embed_safetensors_close(st);
        return -ENOMEM;
    }
    int ret = 0;
    cr_json_value root;
    cr_json_error jerr = cr_json_parse(parser, (const char *)b + 8, header_len, &root);
    long members = cr_json_object_size(root);
    if (jerr != CR_JSON_OK || members < 0) {
        snprintf(err, err_len, "%s: header is not a JSON object (%s)", path,
                 jerr ? cr_json_error_message(jerr) : "wrong type");
        ret = -EINVAL;
        goto out;
    }
    size_t names_len = 0;
    for (long i = 0; i < members; i++) {
        const char *key;
        size_t key_len;
        cr_json_value v;
        cr_json_object_at(root, (size_t)i, &key, &key_len, &v);
        names_len += key_len + 1;
    }
    st->tensors = calloc((size_t)members + 1, sizeof(*st->tensors));
    st->names = malloc(names_len + 1);
    if (!st->tensors || !st->names) {
        ret = -ENOMEM;
        goto out;
    }
    const char *data = (const char *)b + 8 + header_len;
    size_t data_len = size - 8 - header_len;
    char *name = st->names;
    for (long i = 0; i < members; i++) {
        const char *key;
        size_t key_len;
        cr_json_value v;
        cr_json_object_at(root, (size_t)i, &key, &key_len, &v);
        if (key_len == 12 && memcmp(key, "__metadata__", 12) == 0)
            continue;
        if (cr_json_type_of(v) != CR_JSON_OBJECT || memchr(key, '\0', key_len)) {
            snprintf(err, err_len, "%s: header entry %ld is not a tensor description", path, i);
            ret = -EINVAL;
            goto out;
        }
        memcpy(name, key, key_len);
        name[key_len] = '\0';
        embed_tensor *t = &st->tensors[st->count];
        t->name = name;
        name += key_len + 1;
        if ((ret = read_entry(st, t, v, data, data_len, err, err_len)) < 0) {
            if (ret == -ENOMEM)
                snprintf(err, err_len, "out of memory reading %s", path);
            goto out;
        }
        st->count++;
    }
out:
    cr_json_parser_destroy(parser);
    if (ret < 0) {
        embed_safetensors_close(st);
        return ret;
    }
    *out = st;
    return 0;
}
