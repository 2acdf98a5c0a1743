/*
 * Unit tests for the embed model files and maths: the safetensors reader
 * (coring/embed/safetensors.h) on valid, truncated and malformed files;
 * config.json parsing and weight binding with missing, mis-shaped and
 * non-F32 tensors (coring/embed/bert.h); mean pooling and L2
 * normalisation; and a batched forward pass equal to one-by-one passes.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coring/embed/bert.h"
#include "coring/embed/safetensors.h"

/* A tiny BERT: vocab 8, hidden 4, 1 layer, 2 heads, FFN 8, 8 positions. */
static const char config_json[] =
    "{\"model_type\":\"bert\",\"hidden_act\":\"gelu\",\"vocab_size\":8,\"hidden_size\":4,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"intermediate_size\":8,"
    "\"max_position_embeddings\":8,\"type_vocab_size\":2,\"layer_norm_eps\":1e-12}";

typedef struct spec {
    const char *name;
    int d0, d1; /* d1 == 0: one dimension */
} spec;

static const spec specs[] = {
    {"embeddings.word_embeddings.weight", 8, 4},
    {"embeddings.position_embeddings.weight", 8, 4},
    {"embeddings.token_type_embeddings.weight", 2, 4},
    {"embeddings.LayerNorm.weight", 4, 0},
    {"embeddings.LayerNorm.bias", 4, 0},
    {"encoder.layer.0.attention.self.query.weight", 4, 4},
    {"encoder.layer.0.attention.self.query.bias", 4, 0},
    {"encoder.layer.0.attention.self.key.weight", 4, 4},
    {"encoder.layer.0.attention.self.key.bias", 4, 0},
    {"encoder.layer.0.attention.self.value.weight", 4, 4},
    {"encoder.layer.0.attention.self.value.bias", 4, 0},
    {"encoder.layer.0.attention.output.dense.weight", 4, 4},
    {"encoder.layer.0.attention.output.dense.bias", 4, 0},
    {"encoder.layer.0.attention.output.LayerNorm.weight", 4, 0},
    {"encoder.layer.0.attention.output.LayerNorm.bias", 4, 0},
    {"encoder.layer.0.intermediate.dense.weight", 8, 4},
    {"encoder.layer.0.intermediate.dense.bias", 8, 0},
    {"encoder.layer.0.output.dense.weight", 4, 8},
    {"encoder.layer.0.output.dense.bias", 4, 0},
    {"encoder.layer.0.output.LayerNorm.weight", 4, 0},
    {"encoder.layer.0.output.LayerNorm.bias", 4, 0},
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

typedef struct variant {
    const char *prefix;  /* before every name */
    const char *skip;    /* leave this tensor out */
    const char *reshape; /* give this tensor shape [3] */
    const char *i32;     /* call this tensor I32 (same size) */
    size_t cut;          /* drop this many bytes from the end */
    size_t pad;          /* data bytes before the first tensor (misaligns it when odd) */
} variant;

static char path[64];

/* Write a safetensors file of the tiny model with small pseudo-random values. */
static void write_model(variant v)
{
    char header[8192];
    size_t hl = 0, offset = v.pad;
    float data[4096];
    size_t nfloats = 0;
    unsigned seed = 12345;
    hl +=
        (size_t)snprintf(header + hl, sizeof(header) - hl, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (size_t i = 0; i < NSPECS; i++) {
        const spec *s = &specs[i];
        if (v.skip && strcmp(v.skip, s->name) == 0)
            continue;
        bool re = v.reshape && strcmp(v.reshape, s->name) == 0;
        size_t n = re ? 3 : (size_t)s->d0 * (size_t)(s->d1 ? s->d1 : 1);
        bool norm_weight = strstr(s->name, "LayerNorm.weight") != NULL;
        for (size_t k = 0; k < n; k++) {
            seed = seed * 1103515245u + 12345u;
            float r = (float)((seed >> 8) & 0xffff) / 65536.0f - 0.5f;
            data[nfloats++] = norm_weight ? 1.0f + 0.1f * r : 0.5f * r;
        }
        char shape[32];
        if (re)
            snprintf(shape, sizeof(shape), "[3]");
        else if (s->d1)
            snprintf(shape, sizeof(shape), "[%d,%d]", s->d0, s->d1);
        else
            snprintf(shape, sizeof(shape), "[%d]", s->d0);
        hl += (size_t)snprintf(
            header + hl, sizeof(header) - hl,
            ",\"%s%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[%zu,%zu]}",
            v.prefix ? v.prefix : "", s->name, v.i32 && strcmp(v.i32, s->name) == 0 ? "I32" : "F32",
            shape, offset, offset + n * 4);
        offset += n * 4;
    }
    hl += (size_t)snprintf(header + hl, sizeof(header) - hl, "}");
    while (hl % 8)
        header[hl++] = ' ';
    strcpy(path, "/tmp/coring-test-st-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "wb");
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, hl, f);
    static const char zeros[8];
    fwrite(zeros, 1, v.pad, f);
    fwrite(data, 4, nfloats, f);
    fclose(f);
    if (v.cut)
        cr_assert_eq(truncate(path, (off_t)(8 + hl + v.pad + nfloats * 4 - v.cut)), 0);
}

static void remove_model(void)
{
    if (path[0])
        unlink(path);
}

TestSuite(safetensors, .fini = remove_model);
TestSuite(bert, .fini = remove_model);

Test(safetensors, reads_names_shapes_and_data)
{
    write_model((variant){0});
    embed_safetensors *st;
    char err[512];
    cr_assert_eq(embed_safetensors_open(path, &st, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(embed_safetensors_count(st), NSPECS);
    const embed_tensor *t = embed_safetensors_find(st, "encoder.layer.0.intermediate.dense.weight");
    cr_assert_not_null(t);
    cr_assert_str_eq(t->dtype, "F32");
    cr_assert_eq(t->ndim, 2);
    cr_assert_eq(t->shape[0], 8);
    cr_assert_eq(t->shape[1], 4);
    cr_assert_eq(t->nbytes, 128);
    cr_assert_null(embed_safetensors_find(st, "__metadata__"));
    cr_assert_null(embed_safetensors_find(st, "nope"));
    embed_safetensors_close(st);
}

Test(safetensors, misaligned_data_is_copied_aligned)
{
    write_model((variant){.pad = 2});
    embed_safetensors *st;
    char err[512];
    cr_assert_eq(embed_safetensors_open(path, &st, err, sizeof(err)), 0, "%s", err);
    const embed_tensor *t = embed_safetensors_find(st, "embeddings.LayerNorm.weight");
    cr_assert_eq((uintptr_t)t->data % 4, 0);
    const float *w = t->data;
    cr_assert(w[0] > 0.9f && w[0] < 1.1f, "%f", w[0]);
    embed_safetensors_close(st);
}

Test(safetensors, truncated_file_is_an_error)
{
    write_model((variant){.cut = 4});
    embed_safetensors *st;
    char err[512];
    cr_assert_eq(embed_safetensors_open(path, &st, err, sizeof(err)), -EINVAL);
    cr_assert_null(st);
    cr_assert(strstr(err, "truncated"), "%s", err);
}

static int open_bytes(const void *bytes, size_t len, char *err, size_t err_len)
{
    strcpy(path, "/tmp/coring-test-st-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
    embed_safetensors *st = NULL;
    int ret = embed_safetensors_open(path, &st, err, err_len);
    embed_safetensors_close(st);
    return ret;
}

Test(safetensors, malformed_headers_are_errors)
{
    char err[512];
    cr_assert_eq(open_bytes("\x10\0\0\0", 4, err, sizeof(err)), -EINVAL); /* under 8 bytes */
    unlink(path);
    cr_assert_eq(open_bytes("\xff\0\0\0\0\0\0\0{}", 10, err, sizeof(err)),
                 -EINVAL); /* header past end */
    cr_assert(strstr(err, "does not fit"), "%s", err);
    unlink(path);
    cr_assert_eq(open_bytes("\x02\0\0\0\0\0\0\0{x", 10, err, sizeof(err)), -EINVAL); /* not JSON */
    unlink(path);
    static const char short_data[] =
        "\x36\0\0\0\0\0\0\0{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}";
    cr_assert_eq(open_bytes(short_data, sizeof(short_data) - 1, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "truncated"), "%s", err);
    unlink(path);
    static const char mismatch[] = "\x36\0\0\0\0\0\0\0{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                   "\"data_offsets\":[0,4]}}12345678";
    cr_assert_eq(open_bytes(mismatch, sizeof(mismatch) - 1, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "4 data bytes for 2 elements"), "%s", err);
    unlink(path);
    static const char ok[] =
        "\x36\0\0\0\0\0\0\0{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}1234";
    cr_assert_eq(open_bytes(ok, sizeof(ok) - 1, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(open_bytes("x", 0, err, sizeof(err)), -EINVAL); /* empty file */
    char missing[] = "/nonexistent/model.safetensors";
    embed_safetensors *st;
    cr_assert_eq(embed_safetensors_open(missing, &st, err, sizeof(err)), -ENOENT);
}

/* --- bert ------------------------------------------------------------------- */

static embed_bert_config tiny_config(void)
{
    embed_bert_config cfg;
    char err[256];
    cr_assert_eq(embed_bert_config_parse(config_json, strlen(config_json), &cfg, err, sizeof(err)),
                 0, "%s", err);
    return cfg;
}

/* Load the model written with @v; returns the error (message in @err). */
static int load(variant v, embed_safetensors **st, embed_bert **m, char *err, size_t err_len)
{
    write_model(v);
    embed_bert_config cfg = tiny_config();
    cr_assert_eq(embed_safetensors_open(path, st, err, err_len), 0, "%s", err);
    return embed_bert_load(&cfg, *st, m, err, err_len);
}

Test(bert, config_fields_and_errors)
{
    embed_bert_config cfg = tiny_config();
    cr_assert_eq(cfg.hidden_size, 4);
    cr_assert_eq(cfg.num_heads, 2);
    cr_assert_eq(cfg.intermediate_size, 8);
    cr_assert_float_eq(cfg.layer_norm_eps, 1e-12f, 1e-18);
    char err[256];
    const char *bad[] = {
        "[]",
        "{\"hidden_size\":4}",
        "{\"model_type\":\"gpt2\"}",
        "{\"vocab_size\":8,\"hidden_size\":5,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
        "\"intermediate_size\":8}",
        "{\"hidden_act\":\"relu\",\"vocab_size\":8,\"hidden_size\":4,\"num_hidden_layers\":1,\"num_"
        "attention_heads\":2,\"intermediate_size\":8}",
        "{\"vocab_size\":-1,\"hidden_size\":4,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
        "\"intermediate_size\":8}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(embed_bert_config_parse(bad[i], strlen(bad[i]), &cfg, err, sizeof(err)),
                     -EINVAL, "%s", bad[i]);
}

Test(bert, missing_tensor_is_named)
{
    embed_safetensors *st;
    embed_bert *m;
    char err[512];
    cr_assert_eq(load((variant){.skip = "encoder.layer.0.attention.self.key.bias"}, &st, &m, err,
                      sizeof(err)),
                 -EINVAL);
    cr_assert(strstr(err, "missing tensor encoder.layer.0.attention.self.key.bias"), "%s", err);
    embed_safetensors_close(st);
}

Test(bert, misshaped_tensor_is_named)
{
    embed_safetensors *st;
    embed_bert *m;
    char err[512];
    cr_assert_eq(load((variant){.reshape = "encoder.layer.0.output.dense.weight"}, &st, &m, err,
                      sizeof(err)),
                 -EINVAL);
    cr_assert(strstr(err, "encoder.layer.0.output.dense.weight has shape [3], expected [4, 8]"),
              "%s", err);
    embed_safetensors_close(st);
}

Test(bert, non_f32_tensor_is_refused)
{
    embed_safetensors *st;
    embed_bert *m;
    char err[512];
    cr_assert_eq(load((variant){.i32 = "embeddings.LayerNorm.bias"}, &st, &m, err, sizeof(err)),
                 -EINVAL);
    cr_assert(strstr(err, "embeddings.LayerNorm.bias is I32"), "%s", err);
    embed_safetensors_close(st);
}

Test(bert, batched_pass_equals_single_passes_and_bad_input_is_refused)
{
    embed_safetensors *st;
    embed_bert *m;
    char err[512];
    cr_assert_eq(load((variant){.prefix = "bert."}, &st, &m, err, sizeof(err)), 0, "%s", err);
    embed_bert_workspace *ws = embed_bert_workspace_create();
    const int32_t a[] = {2, 5, 6, 7, 3}, b[] = {2, 4, 3}, c[] = {2, 1, 1, 1, 1, 1, 1, 3};
    const int32_t *ids[] = {a, b, c};
    size_t lens[] = {5, 3, 8};
    float together[3][4], alone[3][4];
    float *out[] = {together[0], together[1], together[2]};
    cr_assert_eq(embed_bert_encode(m, ws, 3, ids, lens, out), 0);
    for (int i = 0; i < 3; i++) {
        float *o = alone[i];
        cr_assert_eq(embed_bert_encode(m, ws, 1, &ids[i], &lens[i], &o), 0);
        for (int j = 0; j < 4; j++)
            cr_assert_float_eq(together[i][j], alone[i][j], 1e-6, "seq %d dim %d", i, j);
    }
    /* Different sequences give different vectors; values are finite. */
    cr_assert(fabsf(together[0][0] - together[1][0]) > 1e-6f);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            cr_assert(isfinite(together[i][j]));
    const int32_t bad_id[] = {2, 8, 3};
    const int32_t *bad[] = {bad_id};
    size_t three = 3, zero = 0, nine = 9;
    cr_assert_eq(embed_bert_encode(m, ws, 1, bad, &three, out), -EINVAL); /* id >= vocab */
    cr_assert_eq(embed_bert_encode(m, ws, 1, ids, &zero, out), -EINVAL);  /* empty */
    cr_assert_eq(embed_bert_encode(m, ws, 1, ids, &nine, out), -EINVAL);  /* > positions */
    embed_bert_workspace_free(ws);
    embed_bert_free(m);
    embed_safetensors_close(st);
}

Test(pooling, mean_over_tokens)
{
    const float hidden[] = {1, 2, 3, 3, 4, 5, -1, 0, 1}; /* 3 tokens x 3 */
    float out[3];
    embed_mean_pool(hidden, 3, 3, out);
    cr_assert_float_eq(out[0], 1.0f, 1e-6);
    cr_assert_float_eq(out[1], 2.0f, 1e-6);
    cr_assert_float_eq(out[2], 3.0f, 1e-6);
    embed_mean_pool(hidden, 1, 3, out);
    cr_assert_float_eq(out[2], 3.0f, 1e-6);
}

Test(pooling, l2_normalisation)
{
    float v[] = {3, 4};
    embed_l2_normalize(v, 2);
    cr_assert_float_eq(v[0], 0.6f, 1e-6);
    cr_assert_float_eq(v[1], 0.8f, 1e-6);
    float zero[] = {0, 0, 0};
    embed_l2_normalize(zero, 3); /* torch's eps: stays zero, no NaN */
    cr_assert_eq(zero[0], 0.0f);
    float tiny[] = {1e-20f, 0};
    embed_l2_normalize(tiny, 2); /* divided by 1e-12, not by its own norm */
    cr_assert_float_eq(tiny[0], 1e-8f, 1e-12);
}

static void *help_main(void *arg)
{
    embed_bert_help(arg, 1);
    return NULL;
}

/* A pass split across two threads (embed_bert_encode_split) gives what
 * the same pass on one thread gives, and a bad input releases the helper;
 * with float32 or (@int8) int8 linear layers. */
static void split_equals_unsplit(bool int8)
{
    embed_safetensors *st;
    embed_bert *m;
    char err[512];
    cr_assert_eq(load((variant){.prefix = "bert."}, &st, &m, err, sizeof(err)), 0, "%s", err);
    if (int8)
        cr_assert_eq(embed_bert_quantize_int8(m), 0);
    embed_bert_workspace *ws = embed_bert_workspace_create();
    const int32_t a[] = {2, 5, 6, 7, 3}, b[] = {2, 4, 3};
    const int32_t *ids[] = {a, b};
    size_t lens[] = {5, 3};
    float split[2][4], alone[2][4];
    float *out[] = {split[0], split[1]}, *ref[] = {alone[0], alone[1]};
    cr_assert_eq(embed_bert_encode(m, ws, 2, ids, lens, ref), 0);
    for (int round = 0; round < 3; round++) {
        embed_bert_team team = {.parts = 2};
        pthread_t helper;
        cr_assert_eq(pthread_create(&helper, NULL, help_main, &team), 0);
        cr_assert_eq(embed_bert_encode_split(m, ws, 2, ids, lens, out, &team), 0);
        pthread_join(helper, NULL);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                cr_assert_float_eq(split[i][j], alone[i][j], 1e-6, "seq %d dim %d", i, j);
    }
    const int32_t bad_id[] = {2, 8, 3};
    const int32_t *bad[] = {bad_id};
    size_t three = 3;
    embed_bert_team team = {.parts = 2};
    pthread_t helper;
    cr_assert_eq(pthread_create(&helper, NULL, help_main, &team), 0);
    cr_assert_eq(embed_bert_encode_split(m, ws, 1, bad, &three, out, &team), -EINVAL);
    pthread_join(helper, NULL);
    embed_bert_workspace_free(ws);
    embed_bert_free(m);
    embed_safetensors_close(st);
}

Test(bert, split_pass_equals_the_unsplit_pass)
{
    split_equals_unsplit(false);
}

Test(bert, split_int8_pass_equals_the_unsplit_int8_pass)
{
    split_equals_unsplit(true);
}
