/*
 * embed_tokenize: print coring's token ids for a list of sentences, for
 * comparison with Hugging Face's tokenizer (tokenize.mjs) in test_embed.py.
 *
 *   embed_tokenize VOCAB_TXT SENTENCES_JSON [MAX_IDS]
 *
 * SENTENCES_JSON is a JSON array of strings; one JSON array of ids is
 * printed per sentence, in order. MAX_IDS (default 256) truncates like the
 * server does. Exits 2 on bad arguments or files.
 */
#include "coring/core/json.h"
#include "coring/embed/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: embed_tokenize VOCAB_TXT SENTENCES_JSON [MAX_IDS]\n");
        return 2;
    }
    size_t max_ids = argc == 4 ? strtoul(argv[3], NULL, 10) : 256;
    char err[512];
    embed_tokenizer *t;
    if (embed_tokenizer_load(argv[1], &t, err, sizeof(err)) < 0 || max_ids < 2) {
        fprintf(stderr, "embed_tokenize: %s\n", max_ids < 2 ? "MAX_IDS must be 2 or more" : err);
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    char *data = malloc(1 << 24);
    size_t len = f && data ? fread(data, 1, 1 << 24, f) : 0;
    if (f)
        fclose(f);
    cr_json_parser *p = cr_json_parser_create(1 << 24, 8);
    cr_json_value root;
    if (!len || !p || cr_json_parse(p, data, len, &root) != CR_JSON_OK ||
        cr_json_array_size(root) < 0) {
        fprintf(stderr, "embed_tokenize: %s: not a JSON array of strings\n", argv[2]);
        return 2;
    }
    int32_t *ids = malloc(max_ids * sizeof(*ids));
    for (long i = 0, n = cr_json_array_size(root); i < n && ids; i++) {
        cr_json_value v;
        const char *s;
        size_t slen;
        if (cr_json_array_at(root, (size_t)i, &v) != CR_JSON_OK ||
            cr_json_get_string(v, &s, &slen) != CR_JSON_OK) {
            fprintf(stderr, "embed_tokenize: item %ld is not a string\n", i);
            return 2;
        }
        long count = embed_tokenize(t, s, slen, ids, max_ids);
        putchar('[');
        for (long k = 0; k < count; k++)
            printf(k ? ",%d" : "%d", ids[k]);
        puts("]");
    }
    free(ids);
    free(data);
    cr_json_parser_destroy(p);
    embed_tokenizer_free(t);
    return 0;
}
