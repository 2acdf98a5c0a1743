/*
 * BERT's tokenizer: the basic tokenizer (clean-up, CJK split, lower-case,
 * accent strip, punctuation split) followed by WordPiece, as Hugging Face
 * tokenizers' BertNormalizer + BertPreTokenizer + WordPiece do for
 * bert-base-uncased and sentence-transformers/all-MiniLM-L6-v2.
 *
 * Sources: Devlin et al., "BERT" (2019), section 3 and the reference
 * tokenization.py; Hugging Face tokenizers documentation (normalizers.
 * BertNormalizer, pre_tokenizers.BertPreTokenizer, models.WordPiece).
 *
 * A loaded tokenizer is read-only: any thread may use it concurrently.
 * Tokenizing never allocates and never fails on any input bytes (bytes that
 * are not UTF-8 count as U+FFFD, which the clean-up drops).
 */
#ifndef CORING_EMBED_TOKENIZER_H
#define CORING_EMBED_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

/* WordPiece's limit: longer words become [UNK] (in code points). */
#define EMBED_WORDPIECE_MAX_CHARS 100

typedef struct embed_tokenizer embed_tokenizer;

/*
 * embed_tokenizer_load - read a vocabulary file (one token per line, the
 * line number, from 0, is the token id; "\n" or "\r\n" line ends).
 * The vocabulary must contain [CLS], [SEP] and [UNK].
 * @err: @err_len bytes for a one-line message on failure.
 * Returns 0 and *@out (free with embed_tokenizer_free), or -ENOENT/-EIO
 * (file), -EINVAL (no [CLS]/[SEP]/[UNK], or empty), -ENOMEM.
 * Thread: any.
 */
int embed_tokenizer_load(const char *vocab_path, embed_tokenizer **out, char *err, size_t err_len);

/*
 * embed_tokenizer_from_buffer - the same from @len bytes in memory
 * (copied). Returns as embed_tokenizer_load.
 */
int embed_tokenizer_from_buffer(const char *vocab, size_t len, embed_tokenizer **out, char *err,
                                size_t err_len);

void embed_tokenizer_free(embed_tokenizer *t);

/* embed_tokenizer_size - the number of tokens in the vocabulary. */
size_t embed_tokenizer_size(const embed_tokenizer *t);

/* embed_tokenizer_max_token_bytes - the length in bytes of the longest
 * token in the vocabulary ("##" included), measured when it loaded:
 * WordPiece looks up no candidate longer than this. */
size_t embed_tokenizer_max_token_bytes(const embed_tokenizer *t);

/* embed_tokenizer_id - the id of token @s (@len bytes, exact), or -1. */
int32_t embed_tokenizer_id(const embed_tokenizer *t, const char *s, size_t len);

/* embed_tokenizer_token - the text of token @id (NUL-terminated, owned by
 * @t), or NULL when @id is out of range. */
const char *embed_tokenizer_token(const embed_tokenizer *t, int32_t id);

/*
 * embed_tokenize - the ids of @text (@len bytes of UTF-8): [CLS], its
 * word pieces, [SEP]; the pieces are cut after @max_ids - 2 (right-side
 * truncation, as tokenizers' "truncation": {"max_length": 256} does).
 * @ids: room for @max_ids ids (@max_ids >= 2).
 * Returns the number of ids written (2 or more), or -EINVAL when
 * @max_ids < 2. Empty text gives [CLS] [SEP].
 */
long embed_tokenize(const embed_tokenizer *t, const char *text, size_t len, int32_t *ids,
                    size_t max_ids);

#endif
