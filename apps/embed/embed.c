/*
 * Loading a model folder (see coring/embed/embed.h).
 */
#include "coring/embed/embed.h"

#include "coring/core/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read a whole small file (at most @max bytes) into a malloc'd buffer. */
static int read_file(const char *path, size_t max, char **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? -ENOENT : -EIO;
    char *buf = malloc(max + 1);
    if (!buf) {
        fclose(f);
        return -ENOMEM;
    }
    size_t n = fread(buf, 1, max + 1, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > max) {
        free(buf);
        return bad ? -EIO : -EFBIG;
    }
    *data = buf;
    *len = n;
    return 0;
}

static size_t max_seq_length(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sentence_bert_config.json", dir);
    char *data;
    size_t len, out = EMBED_DEFAULT_MAX_TOKENS;
    if (read_file(path, 65536, &data, &len) < 0)
        return out;
    cr_json_parser *p = cr_json_parser_create(len + 64, 16);
    cr_json_value root, v;
    uint64_t n;
    if (p && cr_json_parse(p, data, len, &root) == CR_JSON_OK &&
        cr_json_object_get(root, "max_seq_length", 14, &v) == CR_JSON_OK &&
        cr_json_get_uint64(v, &n) == CR_JSON_OK && n >= 2 && n <= 65536)
        out = (size_t)n;
    cr_json_parser_destroy(p);
    free(data);
    return out;
}

void embed_model_close(embed_model *m)
{
    if (!m)
        return;
    embed_bert_free(m->bert);
    embed_safetensors_close(m->weights);
    embed_tokenizer_free(m->tokenizer);
    free(m);
}

int embed_model_open(const char *dir, embed_model **out, char *err, size_t err_len)
{
    *out = NULL;
    embed_model *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(err, err_len, "out of memory");
        return -ENOMEM;
    }
    char path[4096], msg[512];
    /* The name is the folder's last component: "models/minilm/" -> "minilm". */
    snprintf(path, sizeof(path), "%s", dir);
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/')
        path[--end] = '\0';
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof(m->name), "%s", base && base[1] ? base + 1 : path);

    char *json = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    int ret = read_file(path, 1 << 20, &json, &len);
    if (ret < 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(-ret));
        goto fail;
    }
    ret = embed_bert_config_parse(json, len, &m->config, msg, sizeof(msg));
    free(json);
    if (ret < 0) {
        snprintf(err, err_len, "%s: %s", dir, msg);
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/vocab.txt", dir);
    if ((ret = embed_tokenizer_load(path, &m->tokenizer, err, err_len)) < 0)
        goto fail;
    if (embed_tokenizer_size(m->tokenizer) > m->config.vocab_size) {
        snprintf(err, err_len, "%s has %zu tokens but config.json says vocab_size %u", path,
                 embed_tokenizer_size(m->tokenizer), m->config.vocab_size);
        ret = -EINVAL;
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if ((ret = embed_safetensors_open(path, &m->weights, err, err_len)) < 0)
        goto fail;
    if ((ret = embed_bert_load(&m->config, m->weights, &m->bert, msg, sizeof(msg))) < 0) {
        snprintf(err, err_len, "%s: %s", dir, msg);
        goto fail;
    }
    m->max_tokens = max_seq_length(dir);
    if (m->max_tokens > m->config.max_positions)
        m->max_tokens = m->config.max_positions;
    *out = m;
    return 0;
fail:
    embed_model_close(m);
    return ret;
}
