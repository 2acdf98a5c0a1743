/*
 * Unit tests for the embed tokenizer (coring/embed/tokenizer.h): BERT's
 * basic tokenizer (control characters, white space, CJK, lower-case and
 * accents, punctuation), WordPiece (longest match, ##, [UNK]) and
 * truncation, on a small vocabulary written here. The full vocabulary is
 * checked against Hugging Face's tokenizer in tests/embed.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "coring/embed/tokenizer.h"

static const char vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\nun\n##aff\n##able\n,\n!\n"
                            "the\na\n##a\ncafe\n\xe4\xb8\xad\n.\nplay\n##ing\n##s\n\xce\xb1\n$\n";

static embed_tokenizer *tok;

static void setup(void)
{
    char err[256];
    cr_assert_eq(embed_tokenizer_from_buffer(vocab, strlen(vocab), &tok, err, sizeof(err)), 0, "%s",
                 err);
}

static void teardown(void)
{
    embed_tokenizer_free(tok);
}

/* The tokens of @text as one space-separated string. */
static const char *tokens(const char *text, size_t len, size_t max_ids)
{
    static char out[4096];
    int32_t ids[512];
    long n = embed_tokenize(tok, text, len, ids, max_ids);
    cr_assert_geq(n, 2);
    out[0] = '\0';
    for (long i = 0; i < n; i++) {
        strcat(out, i ? " " : "");
        strcat(out, embed_tokenizer_token(tok, ids[i]));
    }
    return out;
}

#define T(text) tokens((text), strlen(text), 512)

TestSuite(tokenizer, .init = setup, .fini = teardown);

Test(tokenizer, vocabulary_lookup)
{
    cr_assert_eq(embed_tokenizer_size(tok), 22);
    cr_assert_eq(embed_tokenizer_id(tok, "hello", 5), 4);
    cr_assert_eq(embed_tokenizer_id(tok, "##aff", 5), 7);
    cr_assert_eq(embed_tokenizer_id(tok, "hell", 4), -1);
    cr_assert_null(embed_tokenizer_token(tok, 22));
    cr_assert_null(embed_tokenizer_token(tok, -1));
}

Test(tokenizer, lower_case_punctuation_and_white_space)
{
    cr_assert_str_eq(T("Hello, World!"), "[CLS] hello , world ! [SEP]");
    cr_assert_str_eq(T("  hello\t\n\r world  "), "[CLS] hello world [SEP]");
    cr_assert_str_eq(T("hello\xe3\x80\x80world"), "[CLS] hello world [SEP]"); /* U+3000 */
    cr_assert_str_eq(T("hello\xc2\xa0world"), "[CLS] hello world [SEP]");     /* NBSP */
    cr_assert_str_eq(T("hello...!!"), "[CLS] hello . . . ! ! [SEP]");
    cr_assert_str_eq(T("$hello"), "[CLS] $ hello [SEP]"); /* ASCII symbols split too */
}

Test(tokenizer, empty_text_is_cls_sep)
{
    cr_assert_str_eq(T(""), "[CLS] [SEP]");
    cr_assert_str_eq(T(" \t "), "[CLS] [SEP]");
}

Test(tokenizer, control_characters_are_dropped_without_splitting)
{
    cr_assert_str_eq(tokens("hel\x01lo\x7f", 7, 512), "[CLS] hello [SEP]");
    cr_assert_str_eq(tokens("hel\0lo", 6, 512), "[CLS] hello [SEP]");
    cr_assert_str_eq(T("hel\xe2\x80\x8blo"), "[CLS] hello [SEP]"); /* U+200B, format (Cf) */
    cr_assert_str_eq(T("\xef\xbf\xbdhello"), "[CLS] hello [SEP]"); /* U+FFFD */
}

Test(tokenizer, invalid_utf8_never_fails)
{
    cr_assert_str_eq(T("\xff\xfehello\xc3"), "[CLS] hello [SEP]");
    cr_assert_str_eq(T("\xed\xa0\x80"), "[CLS] [SEP]"); /* a surrogate */
}

Test(tokenizer, accents_are_stripped_after_lower_case)
{
    cr_assert_str_eq(T("Caf\xc3\xa9"), "[CLS] cafe [SEP]");  /* precomposed é */
    cr_assert_str_eq(T("CAFE\xcc\x81"), "[CLS] cafe [SEP]"); /* E + combining acute */
    cr_assert_str_eq(T("\xce\x91"), "[CLS] \xce\xb1 [SEP]"); /* Greek capital alpha */
}

Test(tokenizer, cjk_characters_are_words_of_their_own)
{
    cr_assert_str_eq(T("the\xe4\xb8\xadthe"), "[CLS] the \xe4\xb8\xad the [SEP]");
    /* 文 is not in the vocabulary: [UNK], alone. */
    cr_assert_str_eq(T("\xe4\xb8\xad\xe6\x96\x87"), "[CLS] \xe4\xb8\xad [UNK] [SEP]");
}

Test(tokenizer, wordpiece_longest_match_first)
{
    cr_assert_str_eq(T("unaffable"), "[CLS] un ##aff ##able [SEP]");
    cr_assert_str_eq(T("Playing plays"), "[CLS] play ##ing play ##s [SEP]");
    cr_assert_str_eq(T("aaa"), "[CLS] a ##a ##a [SEP]");
}

Test(tokenizer, a_word_with_an_unmatched_piece_is_one_unk)
{
    cr_assert_str_eq(T("unaffablex hello"), "[CLS] [UNK] hello [SEP]");
    cr_assert_str_eq(T("xhello"), "[CLS] [UNK] [SEP]");
}

Test(tokenizer, words_over_100_characters_are_unk)
{
    char word[202];
    memset(word, 'a', 101);
    word[101] = '\0';
    cr_assert_str_eq(T(word), "[CLS] [UNK] [SEP]");
    word[100] = '\0'; /* exactly 100: matched piece by piece */
    int32_t ids[512];
    cr_assert_eq(embed_tokenize(tok, word, 100, ids, 512), 102);
    /* 100 two-byte characters: still a word of 100 (code points, not bytes) */
    char alpha[201];
    for (int i = 0; i < 100; i++)
        memcpy(alpha + 2 * i, "\xce\xb1", 2);
    cr_assert_eq(embed_tokenize(tok, alpha, 200, ids, 512), 3); /* α then ##α: not in vocab */
    cr_assert_str_eq(embed_tokenizer_token(tok, ids[1]), "[UNK]");
}

Test(tokenizer, longest_token_is_measured_at_load)
{
    /* "##able": WordPiece looks up no candidate longer than this. */
    cr_assert_eq(embed_tokenizer_max_token_bytes(tok), 6);
    /* Pieces of exactly that length still match, after a multi-byte one. */
    cr_assert_str_eq(T("\xce\xb1 unaffable playings"), "[CLS] \xce\xb1 un ##aff ##able play ##ing ##s [SEP]");
    /* A 100-character word that fails only at its last character. */
    char word[104];
    memset(word, 'a', 99);
    memcpy(word + 99, "\xe2\x98\x83", 4); /* U+2603, not in the vocabulary */
    cr_assert_str_eq(T(word), "[CLS] [UNK] [SEP]");
}

Test(tokenizer, truncation_keeps_cls_and_sep)
{
    cr_assert_str_eq(tokens("hello world hello world", 23, 5), "[CLS] hello world hello [SEP]");
    cr_assert_str_eq(tokens("unaffable", 9, 4), "[CLS] un ##aff [SEP]");
    cr_assert_str_eq(tokens("hello", 5, 2), "[CLS] [SEP]");
    int32_t ids[1];
    cr_assert_eq(embed_tokenize(tok, "hello", 5, ids, 1), -EINVAL);
}

Test(tokenizer_load, errors_and_line_ends)
{
    embed_tokenizer *t;
    char err[256];
    cr_assert_eq(embed_tokenizer_load("/nonexistent/vocab.txt", &t, err, sizeof(err)), -ENOENT);
    cr_assert_null(t);
    cr_assert_eq(embed_tokenizer_from_buffer("[CLS]\n[SEP]\n", 12, &t, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "[UNK]"), "%s", err);
    cr_assert_eq(embed_tokenizer_from_buffer("", 0, &t, err, sizeof(err)), -EINVAL);
    const char *crlf = "[UNK]\r\n[CLS]\r\n[SEP]\r\nhi";
    cr_assert_eq(embed_tokenizer_from_buffer(crlf, strlen(crlf), &t, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(embed_tokenizer_id(t, "hi", 2), 3);
    cr_assert_eq(embed_tokenizer_id(t, "[SEP]", 5), 2);
    embed_tokenizer_free(t);
}
