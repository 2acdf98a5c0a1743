/*
 * A BERT encoder (Devlin et al., "BERT: Pre-training of Deep Bidirectional
 * Transformers for Language Understanding", 2019; the Hugging Face
 * transformers BertModel layout) with sentence-transformers' mean pooling,
 * for sentence embeddings such as all-MiniLM-L6-v2.
 *
 * Post-LayerNorm transformer layers, exact (erf) GELU, absolute position
 * embeddings, token type 0. Every matrix product is an OpenBLAS sgemm
 * (the linear layers' are int8 after embed_bert_quantize_int8).
 * LayerNorm, GELU and softmax run in AVX-512 where the CPU has it (float32
 * sums; GELU by table and exp inline, apps/embed/vmath.h), else in scalar C (LayerNorm sums in
 * double): the last bits of a vector depend on the CPU. The torch
 * reference test (within 1e-4) runs on the CPU it is run on.
 * A batch is packed: the sequences' tokens are stacked without padding and
 * each sequence attends only to its own tokens, which is what BERT's
 * padding mask computes, without spending work on the padded rows.
 *
 * A loaded model is read-only: threads share it. Each thread that runs it
 * needs its own workspace.
 */
#ifndef CORING_EMBED_BERT_H
#define CORING_EMBED_BERT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coring/embed/safetensors.h"

typedef struct embed_bert_config {
    unsigned vocab_size;        /* 30522 */
    unsigned hidden_size;       /* 384 */
    unsigned num_layers;        /* num_hidden_layers: 6 */
    unsigned num_heads;         /* num_attention_heads: 12 */
    unsigned intermediate_size; /* 1536 */
    unsigned max_positions;     /* max_position_embeddings: 512 */
    unsigned type_vocab_size;   /* 2 */
    float layer_norm_eps;       /* 1e-12 */
} embed_bert_config;

/*
 * embed_bert_config_parse - read a Hugging Face config.json (@len bytes).
 * Requires model_type "bert" (when present), hidden_act "gelu" (when
 * present), hidden_size divisible by num_attention_heads, and sizes within
 * sane bounds. Returns 0, or -EINVAL with a message in @err (@err_len bytes).
 */
int embed_bert_config_parse(const char *json, size_t len, embed_bert_config *cfg, char *err,
                            size_t err_len);

typedef struct embed_bert embed_bert;

/*
 * embed_bert_load - bind the weights of @st to a model of shape @cfg.
 * Tensor names as transformers' BertModel writes them, with or without a
 * "bert." prefix (embeddings.word_embeddings.weight, encoder.layer.N.
 * attention.self.query.weight, ...); every one must be F32 and of the
 * shape @cfg implies (linear weights are [out, in]).
 * The model points into @st, which must outlive it.
 * Returns 0 and *@out (free with embed_bert_free), -EINVAL with a message
 * in @err naming the missing or mis-shaped tensor, or -ENOMEM.
 */
int embed_bert_load(const embed_bert_config *cfg, const embed_safetensors *st, embed_bert **out,
                    char *err, size_t err_len);

void embed_bert_free(embed_bert *m);

/* embed_bert_config_of - the model's configuration. */
const embed_bert_config *embed_bert_config_of(const embed_bert *m);

/*
 * embed_bert_quantize_int8 - from now on run the linear layers (query,
 * key, value, attention output, intermediate, output: 99% of the
 * multiply-adds at 30 tokens) in int8 with dynamic quantisation (see
 * coring/embed/qgemm.h); embeddings, LayerNorm, attention scores, GELU
 * and pooling stay float32. The float32 weights of those layers are
 * dropped from the resident set. Costs accuracy (figures in docs/embeddings.md);
 * faster only where the CPU has AVX-512 VNNI.
 * Returns 0 (also when already done), -EINVAL (intermediate_size over
 * EMBED_QGEMM_MAX_IN) or -ENOMEM; on error the model stays float32.
 * Main thread, before any embed_bert_encode runs.
 */
int embed_bert_quantize_int8(embed_bert *m);

/* Scratch memory for one thread's forward passes; grows to the largest
 * batch seen. NULL on ENOMEM. */
typedef struct embed_bert_workspace embed_bert_workspace;
embed_bert_workspace *embed_bert_workspace_create(void);
void embed_bert_workspace_free(embed_bert_workspace *ws);

/*
 * embed_bert_encode - run @count sequences through the encoder and mean-pool
 * each one's last hidden states over its tokens (every token counts: the
 * attention mask is 1 on all of them).
 * @ids[i]: @lens[i] token ids (1 <= lens[i] <= max_positions, each below
 * vocab_size). @out[i]: room for hidden_size floats, written.
 * No normalisation here: see embed_l2_normalize.
 * Returns 0, -EINVAL (a bad length or id; nothing written) or -ENOMEM.
 * Thread: any, with a workspace of its own.
 */
int embed_bert_encode(const embed_bert *m, embed_bert_workspace *ws, size_t count,
                      const int32_t *const *ids, const size_t *lens, float *const *out);

/* The most threads one forward pass splits across (embed_bert_team). */
#define EMBED_BERT_MAX_PARTS 16

/*
 * A group of threads running one forward pass together: the leader calls
 * embed_bert_encode_split, each helper embed_bert_help with its part number.
 * The caller (the pool) zeroes it, sets @parts and keeps it alive until every
 * helper has returned from embed_bert_help; one pass at a time per team.
 * The other fields are the pass's state, written by the leader before the
 * first barrier and read by the helpers after it.
 */
typedef struct embed_bert_team {
    unsigned parts; /* participants, the leader included: 1..EMBED_BERT_MAX_PARTS */
    _Atomic unsigned count, gen, sleepers; /* the barrier */
    const embed_bert *m;
    embed_bert_workspace *ws; /* the leader's: every participant works in it */
    size_t count_seqs, tokens, ffn_rows, longest;
    const size_t *lens;
    int status; /* 0: the helpers run the layers; else they leave at once */
} embed_bert_team;

/*
 * embed_bert_encode_split - embed_bert_encode with @team's helpers: each
 * linear product is split by output columns (blocks of 64), attention by
 * (sequence, head), LayerNorm and int8 models' quantisation of a product's
 * input by rows, with a barrier between steps (spin, then futex(2)
 * FUTEX_WAIT). Results equal embed_bert_encode's to the rounding of the
 * OpenBLAS path (the packed float32 and the int8 kernels give the same
 * bits). The leader's part is 0; it returns once every helper has passed
 * the last barrier of the pass. Same arguments, returns and errors as
 * embed_bert_encode; on an error the helpers return without work.
 * Precondition: @team->parts - 1 threads call embed_bert_help(@team,
 * 1..parts-1) for this pass.
 * Thread: the leader's, with @ws its own.
 */
int embed_bert_encode_split(const embed_bert *m, embed_bert_workspace *ws, size_t count,
                            const int32_t *const *ids, const size_t *lens, float *const *out,
                            embed_bert_team *team);

/*
 * embed_bert_help - take part @part (1..parts-1) of the pass that @team's
 * leader runs (embed_bert_encode_split); returns when it is done.
 * Thread: a helper's (the leader's workspace is used, not one of its own).
 */
void embed_bert_help(embed_bert_team *team, unsigned part);

/*
 * embed_bert_avx512 - true when the element-wise kernels (LayerNorm, GELU,
 * softmax) run in AVX-512: the CPU has AVX-512F (an x86-64 build) and
 * CORING_EMBED_KERNELS is not "portable" (embed_kernels_select).
 * Any thread, after start-up.
 */
bool embed_bert_avx512(void);

/*
 * embed_mean_pool - @out[j] = mean over the @tokens rows of @hidden
 * (@tokens x @dim, row-major) of hidden[t][j]. @tokens >= 1.
 * (sentence-transformers models.Pooling, pooling_mode_mean_tokens.)
 */
void embed_mean_pool(const float *hidden, size_t tokens, size_t dim, float *out);

/*
 * embed_l2_normalize - divide @v (@dim floats) by its Euclidean norm, or by
 * 1e-12 when the norm is smaller (torch.nn.functional.normalize, as
 * sentence-transformers' Normalize module does).
 */
void embed_l2_normalize(float *v, size_t dim);

#endif
