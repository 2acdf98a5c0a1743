/*
 * A sentence-embedding model folder, as Hugging Face ships
 * sentence-transformers/all-MiniLM-L6-v2: config.json (BERT sizes),
 * model.safetensors (float32 weights, mmap'd), vocab.txt (WordPiece
 * vocabulary) and, optionally, sentence_bert_config.json (max_seq_length,
 * 256 when absent). Pure C: no HTTP, no ring.
 */
#ifndef CORING_EMBED_EMBED_H
#define CORING_EMBED_EMBED_H

#include <stddef.h>

#include "coring/embed/bert.h"
#include "coring/embed/safetensors.h"
#include "coring/embed/tokenizer.h"

/* sentence-transformers' max_seq_length for all-MiniLM-L6-v2. */
#define EMBED_DEFAULT_MAX_TOKENS 256

typedef struct embed_model {
    embed_bert_config config;
    embed_tokenizer *tokenizer;
    embed_safetensors *weights;
    embed_bert *bert;
    size_t max_tokens; /* ids per text, [CLS] and [SEP] included */
    char name[128];    /* the folder's last path component */
} embed_model;

/*
 * embed_model_open - load the model in folder @dir.
 * Returns 0 and *@out (free with embed_model_close), or a negative errno
 * with a one-line message in @err (@err_len bytes) naming the file and
 * what is wrong with it. Main thread (slow: reads files).
 */
int embed_model_open(const char *dir, embed_model **out, char *err, size_t err_len);

void embed_model_close(embed_model *m);

#endif
