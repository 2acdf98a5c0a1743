/*
 * BERT's basic tokenizer + WordPiece (see coring/embed/tokenizer.h).
 *
 * One pass over the text's code points does the normalizer and the
 * pre-tokenizer together: drop NUL, U+FFFD and control characters; split
 * on white space; make each CJK ideograph a word of its own; lower-case,
 * decompose (NFD) and drop non-spacing marks (accents); make each
 * punctuation character a word of its own. Each finished word goes through
 * WordPiece at once: greedy longest match from the left, "##" before
 * pieces that continue a word, the whole word as [UNK] when a piece has no
 * match or the word is longer than 100 code points. Candidates longer
 * than the vocabulary's longest token (18 bytes in BERT's) are never
 * looked up: a word costs at most that many lookups per piece.
 *
 * The vocabulary is an open-addressing hash table over the vocab file's
 * bytes, which the tokenizer keeps (one NUL-terminated token per line).
 */
#include "coring/embed/tokenizer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

struct embed_tokenizer {
    char *text;       /* the vocab file, lines NUL-terminated */
    uint32_t *offset; /* per id: start of its token in text */
    uint32_t *length; /* per id: bytes */
    size_t count;     /* tokens */
    int32_t *slots;   /* hash table of ids, -1 = empty; slot_mask + 1 slots */
    size_t slot_mask;
    size_t max_len;   /* bytes of the longest token ("##" included): no
                       * WordPiece candidate longer than this can match */
    int32_t cls, sep, unk;
};

static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int32_t embed_tokenizer_id(const embed_tokenizer *t, const char *s, size_t len)
{
    for (size_t i = hash_bytes(s, len) & t->slot_mask;; i = (i + 1) & t->slot_mask) {
        int32_t id = t->slots[i];
        if (id < 0)
            return -1;
        if (t->length[id] == len && memcmp(t->text + t->offset[id], s, len) == 0)
            return id;
    }
}

size_t embed_tokenizer_size(const embed_tokenizer *t)
{
    return t->count;
}

size_t embed_tokenizer_max_token_bytes(const embed_tokenizer *t)
{
    return t->max_len;
}

const char *embed_tokenizer_token(const embed_tokenizer *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->count)
        return NULL;
    return t->text + t->offset[id];
}

void embed_tokenizer_free(embed_tokenizer *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->offset);
    free(t->length);
    free(t->slots);
    free(t);
}

int embed_tokenizer_from_buffer(const char *vocab, size_t len, embed_tokenizer **out, char *err,
                                size_t err_len)
{
    *out = NULL;
    if (len >= UINT32_MAX) {
        snprintf(err, err_len, "vocabulary file too large");
        return -EINVAL;
    }
    embed_tokenizer *t = calloc(1, sizeof(*t));
    if (!t || !(t->text = malloc(len + 1)))
        goto nomem;
    memcpy(t->text, vocab, len);
    t->text[len] = '\0';
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += vocab[i] == '\n';
    if (len && vocab[len - 1] != '\n')
        lines++;
    if (lines == 0 || lines > INT32_MAX / 4) {
        snprintf(err, err_len, "vocabulary is empty");
        embed_tokenizer_free(t);
        return -EINVAL;
    }
    size_t slots = 16;
    while (slots < lines * 2)
        slots *= 2;
    t->offset = malloc(lines * sizeof(*t->offset));
    t->length = malloc(lines * sizeof(*t->length));
    t->slots = malloc(slots * sizeof(*t->slots));
    if (!t->offset || !t->length || !t->slots)
        goto nomem;
    memset(t->slots, 0xff, slots * sizeof(*t->slots));
    t->slot_mask = slots - 1;
    for (size_t pos = 0; pos < len && t->count < lines;) {
        char *line = t->text + pos;
        char *nl = memchr(line, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - line) : len - pos;
        pos += n + 1;
        if (nl)
            *nl = '\0';
        if (n && line[n - 1] == '\r')
            line[--n] = '\0';
        int32_t id = (int32_t)t->count++;
        t->offset[id] = (uint32_t)(line - t->text);
        t->length[id] = (uint32_t)n;
        if (n > t->max_len)
            t->max_len = n;
        if (embed_tokenizer_id(t, line, n) >= 0)
            continue; /* a repeated token keeps its first id */
        size_t i = hash_bytes(line, n) & t->slot_mask;
        while (t->slots[i] >= 0)
            i = (i + 1) & t->slot_mask;
        t->slots[i] = id;
    }
    t->cls = embed_tokenizer_id(t, "[CLS]", 5);
    t->sep = embed_tokenizer_id(t, "[SEP]", 5);
    t->unk = embed_tokenizer_id(t, "[UNK]", 5);
    if (t->cls < 0 || t->sep < 0 || t->unk < 0) {
        snprintf(err, err_len, "vocabulary lacks %s",
                 t->cls < 0   ? "[CLS]"
                 : t->sep < 0 ? "[SEP]"
                              : "[UNK]");
        embed_tokenizer_free(t);
        return -EINVAL;
    }
    *out = t;
    return 0;
nomem:
    snprintf(err, err_len, "out of memory loading the vocabulary");
    embed_tokenizer_free(t);
    return -ENOMEM;
}

int embed_tokenizer_load(const char *vocab_path, embed_tokenizer **out, char *err, size_t err_len)
{
    *out = NULL;
    FILE *f = fopen(vocab_path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, err_len, "%s: %s", vocab_path, strerror(e));
        return e == ENOENT ? -ENOENT : -EIO;
    }
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            char *p = realloc(data, cap = cap * 2 + 65536);
            if (!p) {
                free(data);
                fclose(f);
                snprintf(err, err_len, "out of memory reading %s", vocab_path);
                return -ENOMEM;
            }
            data = p;
        }
        size_t n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        free(data);
        snprintf(err, err_len, "%s: read error", vocab_path);
        return -EIO;
    }
    int ret = embed_tokenizer_from_buffer(data, len, out, err, err_len);
    free(data);
    return ret;
}

/* --- character classes (Hugging Face tokenizers' bert normalizer) ------- */

static bool is_control(utf8proc_int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return false;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return true;
    default:
        return false;
    }
}

static bool is_whitespace(utf8proc_int32_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0x2028 || c == 0x2029 ||
           utf8proc_category(c) == UTF8PROC_CATEGORY_ZS;
}

/* The CJK Unified Ideographs blocks that BERT splits (tokenization.py). */
static bool is_cjk(utf8proc_int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ASCII punctuation (symbols included, as BERT does) or Unicode P*. */
static bool is_punctuation(utf8proc_int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return true;
    switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return true;
    default:
        return false;
    }
}

/* --- tokenizing ---------------------------------------------------------- */

/* The word being built and the ids written so far. */
typedef struct tokenize_state {
    const embed_tokenizer *t;
    int32_t *ids;  /* ids[0] is [CLS]; pieces from ids[1] */
    size_t pieces; /* pieces written */
    size_t max_pieces;
    /* The word: "##" slot, then its UTF-8 bytes; off[i] = byte of char i. */
    char buf[2 + EMBED_WORDPIECE_MAX_CHARS * 4];
    uint16_t off[EMBED_WORDPIECE_MAX_CHARS + 1];
    size_t chars; /* may exceed the maximum: then only counted */
} tokenize_state;

static void emit(tokenize_state *s, int32_t id)
{
    if (s->pieces < s->max_pieces)
        s->ids[1 + s->pieces++] = id;
}

static void wordpiece(tokenize_state *s)
{
    size_t n = s->chars;
    s->chars = 0;
    if (n == 0)
        return;
    if (n > EMBED_WORDPIECE_MAX_CHARS) {
        emit(s, s->t->unk);
        return;
    }
    int32_t found[EMBED_WORDPIECE_MAX_CHARS];
    size_t count = 0;
    for (size_t start = 0; start < n;) {
        /* A continuation's "##" overwrites the two bytes before it, which
         * belong to pieces already matched (or to the "##" slot). */
        char *key = s->buf + s->off[start];
        if (start) {
            key[0] = '#';
            key[1] = '#';
        } else {
            key += 2;
        }
        /* Only candidates no longer than the longest token can match:
         * start from the longest of those (a character is at least one
         * byte, so none ends past start + max_len characters), which
         * bounds the lookups per piece by the vocabulary, not the word. */
        size_t prefix = start ? 2 : 0, max_len = s->t->max_len;
        size_t end = n - start > max_len ? start + max_len : n;
        while (end > start && (size_t)(s->off[end] - s->off[start]) + prefix > max_len)
            end--;
        int32_t id = -1;
        for (; end > start; end--) {
            size_t len = (size_t)(s->off[end] - s->off[start]) + prefix;
            if ((id = embed_tokenizer_id(s->t, key, len)) >= 0)
                break;
        }
        if (id < 0) {
            emit(s, s->t->unk);
            return;
        }
        found[count++] = id;
        start = end;
    }
    for (size_t i = 0; i < count; i++)
        emit(s, found[i]);
}

static void append_char(tokenize_state *s, utf8proc_int32_t c)
{
    if (s->chars < EMBED_WORDPIECE_MAX_CHARS) {
        if (s->chars == 0)
            s->off[0] = 0;
        size_t at = s->off[s->chars];
        utf8proc_ssize_t n = utf8proc_encode_char(c, (utf8proc_uint8_t *)s->buf + 2 + at);
        s->off[s->chars + 1] = (uint16_t)(at + (size_t)n);
    }
    s->chars++;
}

/* Lower-case, decompose and strip accents from @c, then add what is left
 * to the word (punctuation as a word of its own). */
static void add_normalized(tokenize_state *s, utf8proc_int32_t c, bool cjk)
{
    utf8proc_int32_t parts[8];
    int boundclass = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char(cjk ? c : utf8proc_tolower(c), parts, 8,
                                                 UTF8PROC_DECOMPOSE, &boundclass);
    if (n < 1 || n > 8) {
        parts[0] = c;
        n = 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++) {
        utf8proc_int32_t d = cjk ? parts[i] : utf8proc_tolower(parts[i]);
        if (utf8proc_category(d) == UTF8PROC_CATEGORY_MN)
            continue;
        if (!cjk && is_punctuation(d)) {
            wordpiece(s);
            append_char(s, d);
            wordpiece(s);
        } else {
            append_char(s, d);
        }
    }
}

long embed_tokenize(const embed_tokenizer *t, const char *text, size_t len, int32_t *ids,
                    size_t max_ids)
{
    if (max_ids < 2)
        return -EINVAL;
    tokenize_state s;
    s.t = t;
    s.ids = ids;
    s.pieces = 0;
    s.max_pieces = max_ids - 2;
    s.chars = 0;
    s.buf[0] = s.buf[1] = '#';
    ids[0] = t->cls;
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)text;
    size_t pos = 0;
    while (pos < len && s.pieces < s.max_pieces) {
        utf8proc_int32_t c;
        utf8proc_ssize_t n = utf8proc_iterate(p + pos, (utf8proc_ssize_t)(len - pos), &c);
        if (n < 1) {
            n = 1;
            c = 0xFFFD;
        }
        pos += (size_t)n;
        if (c == 0 || c == 0xFFFD || is_control(c))
            continue;
        if (is_whitespace(c)) {
            wordpiece(&s);
        } else if (is_cjk(c)) {
            wordpiece(&s);
            add_normalized(&s, c, true);
            wordpiece(&s);
        } else {
            add_normalized(&s, c, false);
        }
    }
    wordpiece(&s);
    ids[1 + s.pieces] = t->sep;
    return (long)s.pieces + 2;
}
