/*
 * libFuzzer target: BERT's basic tokenizer and WordPiece
 * (apps/embed/tokenizer.c) on the real all-MiniLM-L6-v2 vocabulary
 * (tests/data/minilm/vocab.txt, path given at build time).
 *
 * The input is any bytes (valid UTF-8 or not). Checks: the result is
 * [CLS] ... [SEP], at most max_ids ids (the first input byte picks max_ids),
 * every id inside the vocabulary; nothing crashes or reads out of bounds.
 */
#include "coring/embed/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CORING_VOCAB
#error "build with -DCORING_VOCAB=\"path/to/vocab.txt\""
#endif

static embed_tokenizer *tok;
static int32_t cls, sep;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    char err[256];
    if (embed_tokenizer_load(CORING_VOCAB, &tok, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_wordpiece: %s\n", err);
        abort();
    }
    cls = embed_tokenizer_id(tok, "[CLS]", 5);
    sep = embed_tokenizer_id(tok, "[SEP]", 5);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int32_t ids[300];
    size_t max_ids = size ? 2 + data[0] % 255 : 256;
    long n = embed_tokenize(tok, (const char *)data, size, ids, max_ids);
    if (n < 2 || (size_t)n > max_ids || ids[0] != cls || ids[n - 1] != sep)
        abort();
    size_t vocab = embed_tokenizer_size(tok);
    for (long i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= vocab)
            abort();
    return 0;
}
